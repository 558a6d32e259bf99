"""Run the MCP conformance suite's server scenarios and print the outcome as JSON.

    .venv/bin/python testing/conformance/run.py --url http://127.0.0.1:PORT/mcp \\
        --requirements 2025-11-25 --requirements 2026-07-28 [--scenario NAME ...]
    .venv/bin/python testing/conformance/run.py --peer --requirements 2026-07-28

For each requirement set it runs `conformance server` (the suite pinned in
testing/peers, under the Node 22 installed there), reads the per-scenario
`checks.json` files the suite writes with `-o DIR`, and prints on stdout one
JSON object:

    {"2025-11-25": {"passed": [...], "failed": {"scenario": "first failure"},
                    "not_scored": {"passed": [...], "failed": {...}}}, ...}

`passed`/`failed` hold the scenarios the set requires (its frozen `server:`
list); `not_scored` holds those the suite runs with the set but never scores
(extensions, pending, added after the release). A scenario fails when any of
its checks has status FAILURE (warnings do not fail it, as in the suite).

`--peer` starts testing/conformance/peer/server.py on a free loopback port
and runs against it; `--url` runs against a server already listening.
Standard library only. Exit status: 0 when every required scenario that ran
passed, 1 when one failed, 2 when the suite could not be run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
DEFAULT_BIN_DIR = ROOT / "testing" / "peers" / "node_modules" / ".bin"
PEER = HERE / "peer" / "server.py"
REVISIONS = ("2025-11-25", "2026-07-28")

# A results folder is named server-<scenario>-<ISO time with : and . as ->.
RESULT_DIR = re.compile(r"^server-(?P<name>.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$")
SUMMARY_LINE = re.compile(r"^([✓✗]) (\S+): (\d+) passed, (\d+) failed")
RUNNING_LINE = re.compile(r"^=== Running scenario: (\S+) ===$")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def suite_env(bin_dir: Path) -> dict[str, str]:
    """The environment for the suite: testing/peers' .bin (Node 22) first on PATH."""
    env = dict(os.environ)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    return env


def required_scenarios(bin_dir: Path, revision: str) -> list[str]:
    """The server scenarios a requirement set scores, as `conformance list` states them."""
    out = subprocess.run(
        [str(bin_dir / "conformance"), "list", "--requirements", revision],
        env=suite_env(bin_dir),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    names: list[str] = []
    in_server = False
    for line in out.splitlines():
        if line.startswith("Server scenarios"):
            in_server = True
        elif in_server and line.strip().startswith("- "):
            names.append(line.strip()[2:].strip())
        elif in_server and not line.strip():
            break
    if not names:
        raise RuntimeError(f"`conformance list --requirements {revision}` named no server scenario:\n{out}")
    return names


def first_failure(checks: list[dict]) -> str | None:
    for check in checks:
        if check.get("status") == "FAILURE":
            reason = check.get("errorMessage") or check.get("description") or "failed"
            return f"{check.get('id', '?')}: {reason}"
    return None


def read_results(out_dir: Path, stdout: str, stderr: str) -> dict[str, str | None]:
    """scenario -> None when it passed, else its first failure.

    Primary source: the checks.json of each scenario's results folder. The
    suite's closing summary fills in scenarios that left no folder (a crash
    before the checks were written).
    """
    outcome: dict[str, str | None] = {}
    for folder in sorted(out_dir.iterdir()) if out_dir.is_dir() else []:
        match = RESULT_DIR.match(folder.name)
        checks_file = folder / "checks.json"
        if not match or not checks_file.is_file():
            continue
        try:
            checks = json.loads(checks_file.read_text())
        except (OSError, ValueError) as exc:
            outcome[match.group("name")] = f"unreadable checks.json: {exc}"
            continue
        outcome[match.group("name")] = first_failure(checks) if isinstance(checks, list) else "checks.json is not a list"
    for line in stdout.splitlines():
        summary = SUMMARY_LINE.match(line.strip())
        if summary and summary.group(2) not in outcome:
            name = summary.group(2)
            crash = next((l for l in stderr.splitlines() if f"Failed to run scenario {name}" in l), None)
            outcome[name] = None if summary.group(1) == "✓" else (crash or "failed (no checks.json; see the suite's output)")
    return outcome


def run_suite(bin_dir: Path, url: str, revision: str, scenario: str | None, timeout_ms: int, verbose: bool, keep: Path | None) -> dict:
    """One requirement set (or one scenario of it) against `url`."""
    required = required_scenarios(bin_dir, revision)
    with contextlib.ExitStack() as stack:
        if keep is not None:
            out_dir = keep / revision
            out_dir.mkdir(parents=True, exist_ok=True)
        else:
            out_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=f"conformance-{revision}-")))
        command = [str(bin_dir / "conformance"), "server", "--url", url, "-o", str(out_dir), "--timeout", str(timeout_ms)]
        if scenario:
            # What --requirements does for each of its scenarios: run at the
            # revision's wire version even outside its applicability window.
            command += ["--scenario", scenario, "--spec-version", revision, "--force"]
        else:
            command += ["--requirements", revision]
        log(f"running: {' '.join(command)}")
        budget = 600 + (timeout_ms / 1000) * (1 if scenario else 80)
        proc = subprocess.run(command, env=suite_env(bin_dir), capture_output=True, text=True, timeout=budget)
        if verbose:
            sys.stderr.write(proc.stdout)
            sys.stderr.write(proc.stderr)
        outcome = read_results(out_dir, proc.stdout, proc.stderr)
        if not outcome:
            tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-20:])
            raise RuntimeError(f"the suite produced no results (exit {proc.returncode}):\n{tail}")
    report: dict = {"passed": [], "failed": {}, "not_scored": {"passed": [], "failed": {}}}
    for name, failure in outcome.items():
        bucket = report if name in required else report["not_scored"]
        if failure is None:
            bucket["passed"].append(name)
        else:
            bucket["failed"][name] = failure
    # A required scenario that left no trace at all did not pass.
    if not scenario:
        for name in required:
            if name not in outcome:
                report["failed"][name] = "no result: the suite did not report this scenario"
    order = {name: i for i, name in enumerate(required)}
    report["passed"].sort(key=lambda n: order.get(n, len(order)))
    return report


def merged(runs: list[dict]) -> dict:
    """The reports of several runs of one requirement set, as one."""
    report: dict = {"passed": [], "failed": {}, "not_scored": {"passed": [], "failed": {}}}
    for run in runs:
        for bucket, into in ((run, report), (run["not_scored"], report["not_scored"])):
            into["passed"] += [name for name in bucket["passed"] if name not in into["passed"]]
            into["failed"].update(bucket["failed"])
    return report


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def started_peer(python: str) -> Iterator[str]:
    """Our reference server on a free loopback port, stopped on exit."""
    port = free_port()
    log_file = tempfile.NamedTemporaryFile(prefix="conformance-peer-", suffix=".log", delete=False)
    proc = subprocess.Popen([python, str(PEER), "--port", str(port)], stdout=log_file, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the peer exited with {proc.returncode}; log: {log_file.name}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the peer did not listen on port {port} within 30 s; log: {log_file.name}")
            time.sleep(0.1)
        log(f"peer listening at http://127.0.0.1:{port}/mcp (log: {log_file.name})")
        yield f"http://127.0.0.1:{port}/mcp"
    except BaseException:
        keep_log = True
        raise
    else:
        keep_log = False
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log_file.close()
        if not keep_log:
            Path(log_file.name).unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog="See testing/conformance/README.md.")
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--url", help="MCP endpoint of a running server, e.g. http://127.0.0.1:8931/mcp")
    target.add_argument("--peer", action="store_true", help="start our reference peer on a free port and test it")
    parser.add_argument(
        "--requirements", action="append", choices=REVISIONS, help="requirement set to run (repeatable; default: both)"
    )
    parser.add_argument(
        "--scenario",
        action="append",
        help="run only this scenario (repeatable; each at each requirement set's wire version)",
    )
    parser.add_argument("--timeout-ms", type=int, default=30000, help="per-scenario timeout (default 30000)")
    parser.add_argument("--bin-dir", type=Path, default=DEFAULT_BIN_DIR, help=f"where `conformance` and Node 22 are (default {DEFAULT_BIN_DIR})")
    parser.add_argument("--keep", type=Path, help="keep the suite's results folders under this directory")
    parser.add_argument("--verbose", action="store_true", help="copy the suite's own output to stderr")
    args = parser.parse_args(argv)

    if not (args.bin_dir / "conformance").exists() or not (args.bin_dir / "node").exists():
        log(f"no conformance suite / Node 22 in {args.bin_dir}: run scripts/setup.sh (npm install in testing/peers)")
        return 2
    revisions = list(dict.fromkeys(args.requirements or REVISIONS))
    results: dict[str, dict] = {}
    try:
        with contextlib.ExitStack() as stack:
            url = stack.enter_context(started_peer(sys.executable)) if args.peer else args.url
            for revision in revisions:
                runs = [
                    run_suite(args.bin_dir, url, revision, scenario, args.timeout_ms, args.verbose, args.keep)
                    for scenario in args.scenario or [None]
                ]
                results[revision] = merged(runs)
    except (RuntimeError, subprocess.SubprocessError, OSError) as exc:
        log(f"error: {exc}")
        if results:
            print(json.dumps(results, indent=2))
        return 2
    print(json.dumps(results, indent=2))
    return 1 if any(r["failed"] for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
