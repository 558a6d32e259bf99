#!/usr/bin/env bash
# The test suite, on a fresh machine: check no source file grew past 900
# lines, set up (Docker engine, gVisor, image), check formatting and lints,
# check the isolation with `code-mode doctor` under both runtimes, then run
# every test with cargo-nextest. Tests that need Docker fail under CI=true
# when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
# Files by job: no non-test source file over 900 lines (issue 38). First,
# as it takes no time and needs nothing built.
scripts/file-sizes.sh
# Sourced, so the PATH it may extend (nats-server) reaches the tests.
source scripts/setup.sh
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# Licenses, banned crates and sources of every dependency (deny.toml). The
# advisories check needs the RustSec database from GitHub, which this
# machine cannot reach; with network: cargo deny check advisories.
cargo deny check licenses bans sources
# The posture of this host under each runtime: exits non-zero when a
# required control does not hold.
./target/debug/code-mode doctor --runtime runc
./target/debug/code-mode doctor --runtime runsc
if ! command -v cargo-nextest >/dev/null 2>&1; then
  cargo install cargo-nextest --locked
fi
cargo nextest run --workspace --locked --profile ci
# nextest does not run doc tests: the library's examples in its rustdoc.
cargo test --doc --locked -p code-mode
