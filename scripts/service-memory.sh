#!/usr/bin/env bash
# Resident memory of each service run apart over NATS, idle and under load.
#
#   scripts/service-memory.sh [--bin-dir target/release] [--sessions 8] \
#       [--cells 10] [--mix print=2,tool=2,cpu=1] [--capacity 4]
#
# Starts a nats-server on a free port, then the bridge (wrapping the test
# server), one sandbox-runner and the frontend with MCP over HTTP on
# loopback, each its own process as in the compose stack. Prints each
# process's VmRSS once every service answers (idle, warm pool filled), then
# runs `code-mode-loadtest clients` (closed loop) against the frontend and
# prints each process's VmRSS right after the load and its VmHWM (the peak
# over its whole life, so the peak under load). Every figure in KiB from
# /proc/<pid>/status. Stops everything it started on exit.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin_dir=$root/target/release
sessions=8
cells=10
mix=print=2,tool=2,cpu=1
capacity=4
while [ $# -gt 0 ]; do
  case "$1" in
    --bin-dir) bin_dir=$2; shift 2 ;;
    --sessions) sessions=$2; shift 2 ;;
    --cells) cells=$2; shift 2 ;;
    --mix) mix=$2; shift 2 ;;
    --capacity) capacity=$2; shift 2 ;;
    *) echo "service-memory.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
for bin in code-mode code-mode-loadtest code-mode-test-server; do
  [ -x "$bin_dir/$bin" ] || { echo "service-memory.sh: $bin_dir/$bin is missing (cargo build --release -p code-mode -p code-mode-loadtests -p code-mode-test-server)" >&2; exit 1; }
done
command -v nats-server >/dev/null || { echo "service-memory.sh: nats-server is not on PATH (scripts/setup.sh installs it)" >&2; exit 1; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

nats_port=$(free_port)
http_port=$(free_port)
nats=nats://127.0.0.1:$nats_port
nats-server -a 127.0.0.1 -p "$nats_port" -js -sd "$work/js" >"$work/nats.log" 2>&1 &
pids+=($!); nats_pid=$!
sleep 1
"$bin_dir/code-mode" bridge --nats "$nats" -- "$bin_dir/code-mode-test-server" >"$work/bridge.log" 2>&1 &
pids+=($!); bridge_pid=$!
"$bin_dir/code-mode" sandbox-runner --nats "$nats" --capacity "$capacity" >"$work/runner.log" 2>&1 &
pids+=($!); runner_pid=$!
"$bin_dir/code-mode" frontend --nats "$nats" --http "127.0.0.1:$http_port" >"$work/frontend.log" 2>&1 &
pids+=($!); frontend_pid=$!

url=http://127.0.0.1:$http_port/mcp
# Ready: one cell through the whole stack (the load test's own check).
for _ in $(seq 1 60); do
  if "$bin_dir/code-mode-loadtest" clients --url "$url" --sessions 1 --cells 1 --mix print=1 >/dev/null 2>&1; then break; fi
  sleep 1
done
sleep 5 # the warm pool refills after that cell

field() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; }
report() {
  local when=$1
  for name in nats-server bridge sandbox-runner frontend; do
    case $name in
      nats-server) pid=$nats_pid ;; bridge) pid=$bridge_pid ;;
      sandbox-runner) pid=$runner_pid ;; frontend) pid=$frontend_pid ;;
    esac
    echo "memory $when $name rss_kib=$(field "$pid" VmRSS) peak_kib=$(field "$pid" VmHWM)"
  done
}
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
report idle
"$bin_dir/code-mode-loadtest" clients --url "$url" --sessions "$sessions" --cells "$cells" --mix "$mix" \
  --json "$work/load.json" 2>/dev/null | tail -n 8
report after-load
echo "machine: load average $(cut -d' ' -f1-3 /proc/loadavg)"
