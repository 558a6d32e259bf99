"""Run the MCP conformance suite's client scenarios against a client command,
one scenario at a time, and print the outcome as one JSON object.

    .venv/bin/python testing/conformance/run_client.py \\
        --command ".venv/bin/python testing/conformance/client.py" \\
        --requirements 2025-11-25 [--requirements 2026-07-28] [--extensions] [--scenario NAME]

For each requirement set it lists the client scenarios the set scores
(`conformance list --client --requirements V`), and with --extensions the
extension scenarios of the client credentials grant and of enterprise-managed
authorization, then runs each alone (`conformance client --command CMD
--scenario S --spec-version V`): the suite's all-at-once mode starts every
client together, which times out on a small machine. A scenario passes as
the suite's own verdict says (`OVERALL: PASSED`: no failed check, no
warning, no time-out, and a zero exit unless the scenario allows a client
error); otherwise its first failed or warning check is the reason.

Output on stdout:

    {"2025-11-25": {"passed": [...], "failed": {"auth/x": "check-id: why"}}, ...}

(extension runs are keyed `extension@VERSION`). With --retries N a failed
scenario runs again up to N times (the passes after a retry are listed
under "retried" too). Exit status 0 when every
scenario run passed, 1 when one failed, 2 when the suite could not run.
Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
DEFAULT_BIN_DIR = ROOT / "testing" / "peers" / "node_modules" / ".bin"
REVISIONS = ("2025-11-25", "2026-07-28")
# The extension scenarios measured: client credentials (SEP-1046) with a
# secret and with a signed JWT, and enterprise-managed authorization.
EXTENSIONS = ("auth/client-credentials-basic", "auth/client-credentials-jwt", "auth/enterprise-managed-authorization")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def suite_env(bin_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    return env


def client_scenarios(bin_dir: Path, revision: str) -> list[str]:
    """The client scenarios the requirement set scores."""
    out = subprocess.run(
        [str(bin_dir / "conformance"), "list", "--client", "--requirements", revision],
        env=suite_env(bin_dir),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    names: list[str] = []
    inside = False
    for line in out.splitlines():
        if line.startswith("Client scenarios"):
            inside = True
        elif inside and line.strip().startswith("- "):
            names.append(line.strip()[2:].strip())
        elif inside and not line.strip():
            break
    if not names:
        raise RuntimeError(f"`conformance list --client --requirements {revision}` named no scenario:\n{out}")
    return names


def verdict(out_dir: Path, output: str) -> str | None:
    """None when the suite passed the scenario, else why not."""
    if "OVERALL: PASSED" in output:
        return None
    for checks_file in sorted(out_dir.rglob("checks.json")):
        try:
            checks = json.loads(checks_file.read_text())
        except (OSError, ValueError):
            continue
        for status in ("FAILURE", "WARNING"):
            for check in checks if isinstance(checks, list) else []:
                if check.get("status") == status:
                    reason = check.get("errorMessage") or check.get("description") or status.lower()
                    return f"{check.get('id', '?')}: {reason}"
    if "CLIENT TIMED OUT" in output:
        return "the client timed out"
    if "CLIENT EXITED WITH ERROR" in output:
        return "the client exited with an error"
    return "failed (see the suite's output)"


def run_one(bin_dir: Path, command: str, scenario: str, revision: str, timeout_ms: int, verbose: bool) -> str | None:
    with tempfile.TemporaryDirectory(prefix="conformance-client-") as out:
        argv = [
            str(bin_dir / "conformance"),
            "client",
            "--command",
            command,
            "--scenario",
            scenario,
            "--spec-version",
            revision,
            "--force",
            "--timeout",
            str(timeout_ms),
            "-o",
            out,
        ]
        proc = subprocess.run(
            argv, env=suite_env(bin_dir), capture_output=True, text=True, timeout=timeout_ms / 1000 + 120
        )
        output = proc.stdout + proc.stderr
        if verbose:
            sys.stderr.write(output)
        return verdict(Path(out), output)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--command", required=True, help="the client command; the suite appends the server URL")
    parser.add_argument("--requirements", action="append", choices=REVISIONS, help="requirement set (repeatable)")
    parser.add_argument("--extensions", action="store_true", help="also the client credentials / enterprise extension scenarios")
    parser.add_argument("--scenario", action="append", help="only these scenarios (repeatable)")
    parser.add_argument("--timeout-ms", type=int, default=30000, help="per scenario (default 30000)")
    parser.add_argument("--bin-dir", type=Path, default=DEFAULT_BIN_DIR)
    parser.add_argument("--verbose", action="store_true", help="copy the suite's output to stderr")
    parser.add_argument(
        "--retries", type=int, default=0, help="run a failed scenario again up to N times (a loaded machine's time-outs)"
    )
    args = parser.parse_args(argv)
    if not (args.bin_dir / "conformance").exists():
        log(f"no conformance suite in {args.bin_dir}: run scripts/setup.sh")
        return 2
    revisions = list(dict.fromkeys(args.requirements or REVISIONS))
    results: dict[str, dict] = {}
    try:
        for revision in revisions:
            plans = [(revision, client_scenarios(args.bin_dir, revision))]
            if args.extensions:
                plans.append((f"extension@{revision}", list(EXTENSIONS)))
            for key, names in plans:
                if args.scenario:
                    names = [n for n in names if n in args.scenario]
                report: dict = {"passed": [], "failed": {}}
                for name in names:
                    log(f"{key}: {name} ...")
                    failure = run_one(args.bin_dir, args.command, name, revision, args.timeout_ms, args.verbose)
                    for attempt in range(args.retries):
                        if failure is None:
                            break
                        log(f"{key}: {name}: failed ({failure}); again ({attempt + 1} of {args.retries})")
                        report.setdefault("retried", []).append(name)
                        failure = run_one(args.bin_dir, args.command, name, revision, args.timeout_ms, args.verbose)
                    log(f"{key}: {name}: {'PASS' if failure is None else 'FAIL ' + failure}")
                    if failure is None:
                        report["passed"].append(name)
                    else:
                        report["failed"][name] = failure
                if names:
                    results[key] = report
    except (RuntimeError, subprocess.SubprocessError, OSError) as exc:
        log(f"error: {exc}")
        print(json.dumps(results, indent=2))
        return 2
    print(json.dumps(results, indent=2))
    return 1 if any(r["failed"] for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
