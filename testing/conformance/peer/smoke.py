"""Smoke check of the conformance peer with the official Python SDK client.

The conformance suite drives the peer over HTTP only; this covers stdio too.
For each transport (stdio, and HTTP when --url is given) it connects twice:
`mode="legacy"` (initialize handshake, 2025-11-25) and `mode="auto"` (which
adopts the stateless 2026-07-28 protocol the peer offers), and exercises
tools, resources, templates, subscriptions, prompts, completion, logging,
progress, sampling, elicitation and roots.

    .venv/bin/python testing/conformance/peer/smoke.py [--url http://127.0.0.1:PORT/mcp]

Prints one line per check and a closing "N passed, M failed"; exits 1 on a failure.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPDeprecationWarning

# The 2025-11-25 half uses logging, subscribe and ping, deprecated at 2026-07-28.
warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

SERVER = Path(__file__).with_name("server.py")


class Checks:
    def __init__(self) -> None:
        self.passed = 0
        self.failed = 0

    def check(self, label: str, ok: bool, detail: Any = "") -> None:
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        print(f"{'ok  ' if ok else 'FAIL'} {label}" + ("" if ok else f": {detail}"), flush=True)


def first_text(result: Any) -> str:
    for block in getattr(result, "content", []) or []:
        if getattr(block, "type", None) == "text":
            return block.text
    return ""


async def exercise(label: str, target: Any, mode: str, checks: Checks) -> None:
    """One connection: every feature the peer offers on this transport and era."""
    logs: list[str] = []
    notices: list[str] = []
    progress: list[float] = []

    async def on_sampling(context, params):
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="Paris"), model="smoke", stop_reason="endTurn"
        )

    async def on_elicit(context, params):
        # Fill every field of the requested form: text "ada", yes for booleans.
        fields = (getattr(params, "requested_schema", None) or {}).get("properties", {})
        answers = {key: True if spec.get("type") == "boolean" else "ada" for key, spec in fields.items()}
        return types.ElicitResult(action="accept", content=answers)

    async def on_roots(context):
        return types.ListRootsResult(roots=[types.Root(uri="file:///tmp/smoke", name="smoke")])

    async def on_log(params):
        logs.append(str(params.data))

    async def on_message(message):
        if isinstance(message, types.ServerNotification) or hasattr(message, "method"):
            notices.append(getattr(message, "method", type(message).__name__))

    async def on_progress(done, total, message):
        progress.append(done)

    name = f"{label}/{mode}"
    async with Client(
        target,
        mode=mode,
        sampling_callback=on_sampling,
        elicitation_callback=on_elicit,
        list_roots_callback=on_roots,
        logging_callback=on_log,
        message_handler=on_message,
        log_level="debug",
        read_timeout_seconds=20,
    ) as client:
        modern = client.protocol_version == "2026-07-28"
        checks.check(f"{name}: protocol {client.protocol_version}", client.protocol_version in ("2025-11-25", "2026-07-28"))
        tools = {t.name for t in (await client.list_tools()).tools}
        checks.check(f"{name}: tools/list", {"test_simple_text", "test_sampling", "test_elicitation"} <= tools, tools)
        result = await client.call_tool("test_simple_text", {})
        checks.check(f"{name}: test_simple_text", first_text(result) == "This is a simple text response for testing.", result)
        result = await client.call_tool("test_error_handling", {})
        checks.check(f"{name}: test_error_handling isError", result.is_error is True, result)
        result = await client.call_tool("test_image_content", {})
        checks.check(f"{name}: test_image_content", result.content[0].type == "image", result)
        await client.call_tool("test_tool_with_logging", {})
        checks.check(f"{name}: logging notifications", len(logs) >= 3, logs)
        await client.call_tool("test_tool_with_progress", {}, progress_callback=on_progress)
        checks.check(f"{name}: progress notifications", progress[-3:] == [0, 50, 100], progress)
        result = await client.call_tool("test_sampling", {"prompt": "Capital of France?"})
        checks.check(f"{name}: sampling", first_text(result) == "LLM response: Paris", result)
        result = await client.call_tool("test_elicitation", {"message": "Who are you?"})
        checks.check(f"{name}: elicitation", "action=accept" in first_text(result) and "ada" in first_text(result), result)
        result = await client.call_tool("test_input_required_result_list_roots", {})
        checks.check(f"{name}: roots", "file:///tmp/smoke" in first_text(result), result)
        result = await client.call_tool("test_input_required_result_multi_round", {})
        checks.check(f"{name}: two rounds of input", first_text(result).startswith("Multi-round complete"), result)

        resources = {r.uri for r in (await client.list_resources()).resources}
        checks.check(f"{name}: resources/list", "test://static-text" in {str(u) for u in resources}, resources)
        read = await client.read_resource("test://template/7/data")
        checks.check(f"{name}: template read", '"id":"7"' in read.contents[0].text, read)
        templates = await client.list_resource_templates()
        checks.check(f"{name}: templates/list", templates.resource_templates[0].uri_template == "test://template/{id}/data")
        try:
            await client.read_resource("test://missing")
            checks.check(f"{name}: unknown resource is an error", False, "no error")
        except Exception as exc:  # MCPError
            checks.check(f"{name}: unknown resource is an error", "not found" in str(exc).lower(), exc)

        prompt = await client.get_prompt("test_prompt_with_arguments", {"arg1": "a", "arg2": "b"})
        checks.check(f"{name}: prompts/get", prompt.messages[0].content.text == "Prompt with arguments: arg1='a', arg2='b'")
        prompt = await client.get_prompt("test_input_required_result_prompt", {})
        checks.check(f"{name}: prompt needing input", "Use this context" in prompt.messages[0].content.text, prompt)
        completion = await client.complete(
            types.PromptReference(type="ref/prompt", name="test_prompt_with_arguments"), {"name": "arg1", "value": "te"}
        )
        checks.check(f"{name}: completion", completion.completion.values[:1] == ["test"], completion)

        if modern:
            # Change events arrive on a subscriptions/listen stream.
            async with client.listen(resource_subscriptions=["test://watched-resource"], tools_list_changed=True) as sub:
                await client.call_tool("test_update_watched_resource", {})
                with anyio.fail_after(5):
                    event = await sub.__anext__()
                checks.check(f"{name}: subscriptions/listen event", "watched" in repr(event), event)
        else:
            await client.set_logging_level("info")
            await client.subscribe_resource("test://watched-resource")
            await client.call_tool("test_update_watched_resource", {})
            with anyio.fail_after(5):
                while "notifications/resources/updated" not in notices:
                    await anyio.sleep(0.05)
            checks.check(f"{name}: resources/updated after subscribe", True)
            await client.unsubscribe_resource("test://watched-resource")
            await client.send_ping()
            checks.check(f"{name}: ping", True)


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="also check a running peer over HTTP (e.g. http://127.0.0.1:8931/mcp)")
    args = parser.parse_args()
    checks = Checks()
    targets: list[tuple[str, Any]] = [("stdio", StdioServerParameters(command=sys.executable, args=[str(SERVER), "--stdio"]))]
    if args.url:
        targets.append(("http", args.url))
    for label, target in targets:
        for mode in ("legacy", "auto"):
            try:
                await exercise(label, target, mode, checks)
            except Exception as exc:  # report and go on with the next connection
                checks.check(f"{label}/{mode}: connection", False, repr(exc))
    print(f"{checks.passed} passed, {checks.failed} failed")
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(anyio.run(main))
