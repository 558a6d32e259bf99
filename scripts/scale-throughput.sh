#!/usr/bin/env bash
# Throughput of the compose stack with 1, 2 and 3 sandbox-runners, measured
# with `code-mode-loadtest clients` over the HTTP frontend. Each step brings
# the stack up with `--scale sandbox-runner=N`, runs the same closed-loop
# load and takes the stack down; the JSON reports go to $OUT.
#
#   scripts/scale-throughput.sh [--bin-dir target/debug] [--runners "1 2 3"] \
#       [--sessions 12] [--cells 5] [--mix print=2,tool=2,cpu=1] [--kill-runner-after S]
#
# With --kill-runner-after S, one runner container is killed (`docker kill`)
# S seconds into each load: its cells must fail clearly (the load test's
# `failed`), none may be lost or hung (the load test exits 1 if one is), and
# no sandbox container it owned may be left 20 s after the load.
#
# Images come from deploy/build.sh with the same --bin-dir. Takes the
# compose lock (/tmp/code-mode-compose.lock) while a stack is up, uses its
# own project name and a free port, and removes the stack when done.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin_dir=$root/target/debug
runners="1 2 3"
sessions=12
cells=5
mix=print=2,tool=2,cpu=1
kill_after=
out=${OUT:-$root/target/scale-throughput}
while [ $# -gt 0 ]; do
  case $1 in
    --bin-dir) bin_dir=$2; shift 2 ;;
    --runners) runners=$2; shift 2 ;;
    --sessions) sessions=$2; shift 2 ;;
    --cells) cells=$2; shift 2 ;;
    --mix) mix=$2; shift 2 ;;
    --kill-runner-after) kill_after=$2; shift 2 ;;
    *) echo "scale-throughput.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
bash "$root/deploy/build.sh" --bin-dir "$bin_dir" >&2
export CODE_MODE_NATS_FRONTEND_PASSWORD=$(openssl rand -hex 16) \
       CODE_MODE_NATS_BRIDGE_PASSWORD=$(openssl rand -hex 16) \
       CODE_MODE_NATS_RUNNER_PASSWORD=$(openssl rand -hex 16)
export CODE_MODE_HTTP_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# The frontend lets every session's cell run; the runners' slots are the limit.
export CODE_MODE_HTTP_MAX_CONCURRENT=$sessions
project=codemodescale$$
compose=(docker-compose -p "$project" -f "$root/deploy/docker-compose.yml" --profile http)
exec 9>/tmp/code-mode-compose.lock
flock 9
trap '"${compose[@]}" down -v --remove-orphans -t 20 >/dev/null 2>&1 || true' EXIT
for n in $runners; do
  "${compose[@]}" up -d --scale sandbox-runner="$n" nats bridge sandbox-runner frontend-http >&2
  for _ in $(seq 120); do
    curl -s -o /dev/null "http://127.0.0.1:$CODE_MODE_HTTP_PORT/mcp" && break
    sleep 0.5
  done
  sleep 5   # the runners' warm pools fill
  echo "== $n sandbox-runner(s)"
  victim=
  if [ -n "$kill_after" ]; then
    victim=$("${compose[@]}" ps -q sandbox-runner | head -1)
    owners=$out/owners-$n.txt
    (
      sleep "$kill_after"
      # Its owner labels now (a runner the engine starts again is another owner).
      docker ps -a --filter label=code-mode.sandbox --format '{{.Label "code-mode.owner"}}' \
        | grep "^${victim:0:12}:" | sort -u > "$owners" || true
      docker kill "$victim" >/dev/null
      echo "killed runner ${victim:0:12} at ${kill_after} s" >&2
    ) &
  fi
  "$bin_dir/code-mode-loadtest" clients --url "http://127.0.0.1:$CODE_MODE_HTTP_PORT/mcp" \
    --sessions "$sessions" --cells "$cells" --mix "$mix" --json "$out/runners-$n.json" --plots "$out/plots-$n"
  if [ -n "$victim" ]; then
    wait
    sleep 20
    left=$(docker ps -a --filter label=code-mode.sandbox --format '{{.Label "code-mode.owner"}}' | grep -cxFf "$owners" || true)
    echo "containers of the killed runner left 20 s after the load: $left"
  fi
  "${compose[@]}" down -v --remove-orphans -t 20 >&2
done
