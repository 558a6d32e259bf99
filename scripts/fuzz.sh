#!/usr/bin/env bash
# Run every cargo-fuzz target in fuzz/ for SECONDS each (default 60), one
# after another, one libFuzzer process each (the CI machine has 2 cores).
#
#   scripts/fuzz.sh [SECONDS]          all targets
#   FUZZ_TARGETS="policy tool_schema" scripts/fuzz.sh 300
#
# Needs the nightly toolchain and cargo-fuzz (installed here when missing).
# The corpus grows in fuzz/corpus/<target> (not committed); the committed
# seeds are fuzz/seeds/<target>. A crash stops the script with the input in
# fuzz/artifacts/<target>/: turn it into a regression test (docs/fuzzing.md).
# Each target's final libFuzzer statistics are printed, and its log is kept
# in fuzz/logs/<target>.log.
set -euo pipefail

seconds="${1:-60}"
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root/fuzz"

if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "fuzz.sh: the nightly toolchain is missing: rustup toolchain install nightly" >&2
    exit 1
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked --version 0.13.2
fi

# Safe Rust only in code-mode (unsafe_code = "forbid"): no sanitizer, so
# more executions per second; overflow checks and debug assertions on.
sanitizer="${FUZZ_SANITIZER:-none}"
export CARGO_TARGET_DIR="${FUZZ_TARGET_DIR:-$root/fuzz/target}"
build=(cargo +nightly fuzz build --sanitizer "$sanitizer" --debug-assertions)
"${build[@]}"

targets="${FUZZ_TARGETS:-$(cargo +nightly fuzz list)}"
mkdir -p logs
for target in $targets; do
    mkdir -p "corpus/$target" "seeds/$target"
    echo "== $target: ${seconds}s"
    cargo +nightly fuzz run --sanitizer "$sanitizer" --debug-assertions "$target" \
        "corpus/$target" "seeds/$target" -- \
        -max_total_time="$seconds" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
        >"logs/$target.log" 2>&1 || {
        tail -n 40 "logs/$target.log" >&2
        echo "fuzz.sh: $target failed; the input is in fuzz/artifacts/$target/" >&2
        exit 1
    }
    grep -E '^(#[0-9]+[[:space:]]+DONE|stat::)' "logs/$target.log" || tail -n 3 "logs/$target.log"
    echo "corpus: $(find "corpus/$target" -type f | wc -l) inputs"
done
