#!/usr/bin/env bash
# The main job on a fresh machine: set up, then run one cell of model-style
# Python against the bundled test MCP server and print its report.
set -euo pipefail
cd "$(dirname "$0")/.."
# Sourced, so the PATH it may extend (nats-server) reaches the tests.
source scripts/setup.sh
./target/debug/code-mode run --code '
import asyncio, json
sums = await asyncio.gather(*(add({"a": n, "b": 10}) for n in range(3)))
print([json.loads(s)["sum"] for s in sums])
print(search_tools("echo text back", limit=1))
' -- ./target/debug/code-mode-test-server
