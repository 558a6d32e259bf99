#!/usr/bin/env bash
# Throughput of the compose stack with 1, 2 and 3 sandbox-runners, measured
# with `code-mode-loadtest clients` over the HTTP frontend. Each step brings
# the stack up with `--scale sandbox-runner=N`, runs the same closed-loop
# load and takes the stack down; the JSON reports go to $OUT.
#
#   scripts/scale-throughput.sh [--bin-dir target/debug] [--runners "1 2 3"] \
#       [--sessions 12] [--cells 5] [--mix print=2,tool=2,cpu=1] [--repeat 1] \
#       [--raw-churn] [--kill-runner-after S]
#
# --repeat K runs the whole round (every N of --runners) K times, one round
# after the other, so a slow moment of the machine hits every N alike.
# --raw-churn adds, after each load and while its stack is still up (idle),
# the engine's floor at the same concurrency: as many raw `docker run --rm`
# of `print(1)` in the stack's sandbox image, with the runner's lock-down
# flags (not its seccomp profile), --sessions at once.
# Every step prints one `result` line: cells/s, the machine's load average
# before and after, the CPU the machine spent (busy cores of 2) and the
# shares of dockerd (with its hooks), containerd, the containers' shims and
# runc runs (as reaped by pid 1) and the stack's own processes, read from
# /proc before and after the step; then a `top:` line, the commands that
# used the most CPU meanwhile (those still running at its end).
#
# With --kill-runner-after S, one runner container is killed (`docker kill`)
# S seconds into each load: its cells must fail clearly (the load test's
# `failed`), none may be lost or hung (the load test exits 1 if one is), and
# no sandbox container it owned may be left 20 s after the load.
#
# Images come from deploy/build.sh with the same --bin-dir. Takes the
# compose lock (/tmp/code-mode-compose.lock) from the image build on (the
# build retags code-mode-services:latest, which other compose users run),
# uses its own project name and a free port, and removes the stack when
# done.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin_dir=$root/target/debug
runners="1 2 3"
sessions=12
cells=5
mix=print=2,tool=2,cpu=1
kill_after=
repeat=1
raw_churn=
out=${OUT:-$root/target/scale-throughput}
while [ $# -gt 0 ]; do
  case $1 in
    --bin-dir) bin_dir=$2; shift 2 ;;
    --runners) runners=$2; shift 2 ;;
    --sessions) sessions=$2; shift 2 ;;
    --cells) cells=$2; shift 2 ;;
    --mix) mix=$2; shift 2 ;;
    --kill-runner-after) kill_after=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --raw-churn) raw_churn=1; shift ;;
    *) echo "scale-throughput.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
exec 9>/tmp/code-mode-compose.lock
flock 9
bash "$root/deploy/build.sh" --bin-dir "$bin_dir" >&2
# The sandbox image the stack's runners use (build-image names it).
image=$("$bin_dir/code-mode" build-image --if-missing 2>&1 | grep -o 'code-mode-sandbox:[0-9a-f]*' | head -1)
export CODE_MODE_NATS_FRONTEND_PASSWORD=$(openssl rand -hex 16) \
       CODE_MODE_NATS_BRIDGE_PASSWORD=$(openssl rand -hex 16) \
       CODE_MODE_NATS_RUNNER_PASSWORD=$(openssl rand -hex 16)
export CODE_MODE_HTTP_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# The frontend lets every session's cell run; the runners' slots are the limit.
export CODE_MODE_HTTP_MAX_CONCURRENT=$sessions
project=codemodescale$$
compose=(docker-compose -p "$project" -f "$root/deploy/docker-compose.yml" --profile http)
trap '"${compose[@]}" down -v --remove-orphans -t 20 >/dev/null 2>&1 || true' EXIT

# CPU ticks (user + system, and of waited-for children: containerd's
# include its exited shims and runc) of the processes given, summed.
ticks() {
  local sum=0 pid
  for pid in "$@"; do
    [ -r "/proc/$pid/stat" ] || continue
    # Fields after the command name, which ends with ")": utime is the 12th.
    set -- $(sed 's/.*) //' "/proc/$pid/stat")
    sum=$((sum + ${12} + ${13} + ${14} + ${15}))
  done
  echo $sum
}
# CPU ticks of the exited processes pid 1 reaped: the engine's short-lived
# ones (each container's containerd-shim, with the runc runs it waited
# for) end there, being daemons whose parent exited.
orphans() {
  set -- $(sed 's/.*) //' /proc/1/stat)
  echo $((${14} + ${15}))
}
# "pid command ticks" of every process now.
snapshot() {
  local f
  for f in /proc/[0-9]*/stat; do
    sed -n 's/^\([0-9]*\) (\(.*\)) [^ ]* \(.*\)$/\1 \2 \3/p' "$f" 2>/dev/null || true
  done | awk '{gsub(/ /, "_", $2); print $1, $2, $(14) + $(15)}'
}
# Busy and total ticks of the whole machine (all cores).
machine() { awk '/^cpu /{busy=$2+$3+$4+$7+$8+$9; print busy, busy+$5+$6}' /proc/stat; }
loadavg() { cut -d' ' -f1 /proc/loadavg; }
hz=$(getconf CLK_TCK)
cores=$(nproc)
dockerd=$(pgrep -x dockerd | head -1 || true)
containerd=$(pgrep -x containerd | head -1 || true)
stack_pids() {
  local c
  for c in $("${compose[@]}" ps -q 2>/dev/null); do docker inspect -f '{{.State.Pid}}' "$c" 2>/dev/null; done
}
# Start a measured step: remember the counters.
begin() {
  t0=$(date +%s.%N); load0=$(loadavg); read -r busy0 total0 <<<"$(machine)"
  d0=$(ticks $dockerd); c0=$(ticks $containerd); s0=$(ticks $(stack_pids)); o0=$(orphans)
  snapshot > "$out/.procs0"
}
# End a measured step named $1 with $2 cells: print its result line.
finish() {
  local t1 busy1 total1 d1 c1 s1 o1
  t1=$(date +%s.%N); read -r busy1 total1 <<<"$(machine)"
  d1=$(ticks $dockerd); c1=$(ticks $containerd); s1=$(ticks $(stack_pids)); o1=$(orphans)
  awk -v what="$1" -v cells="$2" -v t0="$t0" -v t1="$t1" -v l0="$load0" -v l1="$(loadavg)" \
      -v b0="$busy0" -v b1="$busy1" -v T0="$total0" -v T1="$total1" -v hz="$hz" -v cores="$cores" \
      -v d="$((d1 - d0))" -v c="$((c1 - c0))" -v s="$((s1 - s0))" -v o="$((o1 - o0))" 'BEGIN {
    wall = t1 - t0; busy = (b1 - b0) / hz
    printf "result %-22s %4d cells in %6.1f s: %5.2f cells/s; load %s -> %s; busy %.2f of %d cores; dockerd %.2f, containerd %.2f, shims+runc %.2f, stack %.2f cores (%.0f%%, %.0f%%, %.0f%%, %.0f%% of the busy CPU)\n",
      what, cells, wall, cells / wall, l0, l1, busy / wall, cores, d / hz / wall, c / hz / wall, o / hz / wall, s / hz / wall,
      100 * d / hz / busy, 100 * c / hz / busy, 100 * o / hz / busy, 100 * s / hz / busy
  }' | tee -a "$out/results.txt"
  # Where the machine's CPU went: the commands that used most of it
  # (processes that ran the whole step or started in it and still run).
  snapshot > "$out/.procs1"
  awk -v wall="$(awk -v a="$t0" -v b="$t1" 'BEGIN{print b - a}')" -v hz="$hz" '
    NR == FNR { before[$1] = $3; next }
    { used[$2] += $3 - ($1 in before ? before[$1] : 0) }
    END { for (c in used) if (used[c] > 0) printf "%.2f %s\n", used[c] / hz / wall, c }' \
    "$out/.procs0" "$out/.procs1" | sort -rn | head -6 \
    | awk '{printf "%s %s %s", sep, $2, $1; sep=","} END {print " cores"}' | sed 's/^/  top:/' | tee -a "$out/results.txt"
}
# --sessions raw `docker run`s at once, $1 in all, of the sandbox image $2.
churn() {
  local total=$1 image=$2
  seq "$total" | xargs -P "$sessions" -I{} docker run --rm --label code-mode.scale-churn=1 \
    --network none --read-only --tmpfs /tmp:rw,noexec,nosuid,size=64m --ipc none --cap-drop ALL \
    --security-opt no-new-privileges --memory 256m --memory-swap 256m --pids-limit 64 --cpus 1 \
    --ulimit nofile=256:256 --log-driver none --user 65534 --entrypoint python3 "$image" -c 'print(1)' >/dev/null
}

for round in $(seq "$repeat"); do
for n in $runners; do
  "${compose[@]}" up -d --scale sandbox-runner="$n" nats bridge sandbox-runner frontend-http >&2
  for _ in $(seq 120); do
    curl -s -o /dev/null "http://127.0.0.1:$CODE_MODE_HTTP_PORT/mcp" && break
    sleep 0.5
  done
  sleep 5   # the runners' warm pools fill
  echo "== $n sandbox-runner(s), round $round"
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
  begin
  "$bin_dir/code-mode-loadtest" clients --url "http://127.0.0.1:$CODE_MODE_HTTP_PORT/mcp" \
    --sessions "$sessions" --cells "$cells" --mix "$mix" --json "$out/runners-$n-$round.json" --plots "$out/plots-$n-$round"
  finish "code-mode, $n runner(s)" $((sessions * cells))
  if [ -n "$raw_churn" ]; then
    sleep 3
    begin
    churn $((sessions * cells)) "$image"
    finish "raw docker run" $((sessions * cells))
  fi
  if [ -n "$victim" ]; then
    wait
    sleep 20
    left=$(docker ps -a --filter label=code-mode.sandbox --format '{{.Label "code-mode.owner"}}' | grep -cxFf "$owners" || true)
    echo "containers of the killed runner left 20 s after the load: $left"
  fi
  "${compose[@]}" down -v --remove-orphans -t 20 >&2
done
done
