#!/usr/bin/env bash
# How long a one-shot `code-mode run` takes end to end (process start to
# exit), two builds side by side in one run, samples alternating.
#
#   scripts/run-end-to-end.sh [--samples 8] BEFORE AFTER -- SERVER [ARGS...]
#
# BEFORE and AFTER are code-mode binaries (copy one aside before rebuilding).
# Each sample pipes `print(1)` to `BIN run -- SERVER ARGS`; prints each
# build's samples, its median in milliseconds, and the ratio of the medians.
set -euo pipefail
samples=8
if [ "${1:-}" = --samples ]; then samples=$2; shift 2; fi
[ $# -ge 4 ] && [ "$3" = -- ] || { echo "usage: $0 [--samples N] BEFORE AFTER -- SERVER [ARGS...]" >&2; exit 2; }
before=$1
after=$2
shift 3
declare -A took
for _ in $(seq "$samples"); do
  for build in before after; do
    bin=${!build}
    start=$(date +%s%N)
    echo 'print(1)' | "$bin" run -- "$@" >/dev/null 2>&1
    took[$build]+=" $(( ($(date +%s%N) - start) / 1000000 ))"
  done
done
median() { tr ' ' '\n' | grep . | sort -n | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
b=$(echo "${took[before]}" | median)
a=$(echo "${took[after]}" | median)
echo "before:${took[before]} (median $b ms)"
echo "after: ${took[after]} (median $a ms)"
awk -v b="$b" -v a="$a" 'BEGIN {printf "before / after: %.2f\n", b / a}'
