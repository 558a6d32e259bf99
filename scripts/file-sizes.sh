#!/usr/bin/env bash
# Files by job: fail on a non-test source file over 900 lines, listing it,
# so size is seen when it happens (issue 38). A Rust file's lines are
# counted up to its first inline `#[cfg(test)] mod NAME {` (an inline test
# module is not production code; a `#[cfg(test)] mod NAME;` line is not
# the end of anything); files under a tests/ or testing/ folder are tests.
# Files not yet committed are checked too, so a file grows past the limit
# in the change that makes it so.
# The exceptions below are known, each with its reason: a new file over the
# limit, or a known one that grew, fails.
set -euo pipefail
cd "$(dirname "$0")/.."
LIMIT=900

# path, then the most lines it may have (its size when it was let be),
# then why.
declare -A KNOWN=(
  # One program shipped into the image and run as `python3 -I runner.py`.
  # What stands alone already lives beside it (tool_search.py and the
  # modules it loads, through load_beside); the rest is one control flow
  # around one loop (the channel, the gate, the output capture, the tool
  # calls, the globals), whose parts would have to pass the loop's state
  # between files. Let grow only with a reason (issue 38). Files out
  # (issue 42) live in files_out.py beside it; runner.py grew by the five
  # lines that load it, make the folder, offer save_file and send the files;
  # the whole printed output kept (issue 42) by nine more that hand the
  # output capture files_out.OutputKeeper and name its file in the cut line;
  # files in (issue 42) by the three that place them before the code runs,
  # and by 22 for the channel: a long line (the cell message) is searched
  # once, not once per chunk, and files in larger than the result limit
  # come as raw bytes after the message (Channel.read_into), not base64;
  # kept sessions' files (issue 42) by 13 in the kept loop: its cells' raw
  # files in read off the channel with their message (the reader thread's
  # and the first cell's), and each cell's files placed, the folder's
  # snapshot taken, and its files sent before `done` (files_out.kept_cell).
  # Search by meaning (issue 43) by 35: the caller's blocking question to
  # the host (its id, lock, channel and line limit are the caller's) and
  # the reader's branch settling it; reading the answer and ranking by it
  # live in tool_search.py.
  [services/sandbox-runner/image/runner.py]=1405
)

lines_of() {
  case "$1" in
    *.rs) awk 'prev ~ /^#\[cfg\(test\)\]/ && /^mod [A-Za-z0-9_]+ *\{/ {print NR - 2; found = 1; exit} {prev = $0} END {if (!found) print NR}' "$1" ;;
    *) wc -l <"$1" ;;
  esac
}

over=()
while IFS= read -r file; do
  [ -f "$file" ] || continue # deleted, not yet committed
  n=$(lines_of "$file")
  limit=${KNOWN[$file]:-$LIMIT}
  if [ "$n" -gt "$limit" ]; then
    over+=("$file: $n lines (at most $limit)")
  fi
done < <(git ls-files --cached --others --exclude-standard '*.rs' '*.py' '*.sh' '*.mjs' '*.js' '*.ts' |
  grep -v -E '(^|/)(tests?|testing)/')

if [ "${#over[@]}" -gt 0 ]; then
  echo "files over $LIMIT lines (split them by job, issue 38):" >&2
  printf '  %s\n' "${over[@]}" >&2
  exit 1
fi
