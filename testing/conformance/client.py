"""code-mode as the client of the MCP conformance suite's client scenarios.

The suite runs `CMD <serverUrl>` once per scenario, with the scenario in
MCP_CONFORMANCE_SCENARIO, the protocol revision its mock server speaks in
MCP_CONFORMANCE_PROTOCOL_VERSION and, for some scenarios, JSON in
MCP_CONFORMANCE_CONTEXT (client credentials, pre-registered clients, the
tool calls to make). This driver puts code-mode in front of that URL:

    code-mode serve --url URL [--auth BLOCK] --expose-tools=only

and drives it with the official Python SDK over stdio, as a user's MCP
client would. Scenarios whose mock server requires a person's login get one
first, the way a user does it: `code-mode login --url URL --auth BLOCK
--no-browser` prints the authorization URL, and this driver follows it as a
browser would (one GET, its redirect to code-mode's loopback port). When a
call through code-mode then fails saying the server needs a (new) login or
more scope, the driver logs in again and retries once, as a person told so
would.

    python testing/conformance/client.py http://localhost:PORT/mcp

CODE_MODE_BIN names the code-mode binary (default target/debug/code-mode
of this checkout). Each run keeps its logins in a fresh folder
(CODE_MODE_STATE_DIR) under a fresh key (CODE_MODE_TOKEN_KEY), removed at
the end. Exit status 0 when the scenario's steps ran; non-zero when a step
failed (some scenarios expect that: a client that refuses a forged iss).
Everything goes to stderr; stdout stays empty.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import secrets
import shutil
import sys
import tempfile
import threading
import urllib.error
import urllib.request
from pathlib import Path

import mcp.types as types
from mcp import Client, StdioServerParameters

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CODE_MODE = os.environ.get("CODE_MODE_BIN") or str(ROOT / "target" / "debug" / "code-mode")
SCENARIO = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
VERSION = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION", "")
# The Client ID Metadata Document URL the suite's CIMD scenario expects.
CIMD_URL = "https://conformance-test.local/client-metadata.json"
LOGIN_HINT = re.compile(r"code-mode login\b")


def log(message: str) -> None:
    print(f"[driver] {message}", file=sys.stderr, flush=True)


def context() -> dict:
    text = os.environ.get("MCP_CONFORMANCE_CONTEXT")
    return json.loads(text) if text else {}


def auth_block(env: dict[str, str]) -> str | None:
    """The --auth block for this scenario; secrets go in `env` as ${VARS}."""
    ctx = context()
    if SCENARIO == "auth/client-credentials-basic":
        env["CM_CONFORMANCE_SECRET"] = ctx["client_secret"]
        return json.dumps(
            {"type": "client_credentials", "client_id": ctx["client_id"], "client_secret": "${CM_CONFORMANCE_SECRET}"}
        )
    if SCENARIO == "auth/client-credentials-jwt":
        env["CM_CONFORMANCE_KEY"] = ctx["private_key_pem"]
        return json.dumps(
            {
                "type": "client_credentials",
                "client_id": ctx["client_id"],
                "private_key": "${CM_CONFORMANCE_KEY}",
                "signing_algorithm": ctx.get("signing_algorithm", "ES256"),
            }
        )
    if SCENARIO == "auth/enterprise-managed-authorization":
        # SEP-990: the person's ID token from the enterprise identity provider goes in
        # a file (re-read at each exchange), the client secret in a variable.
        env["CM_CONFORMANCE_SECRET"] = ctx["client_secret"]
        id_token = Path(env["CODE_MODE_STATE_DIR"]) / "id_token.jwt"
        id_token.write_text(ctx["idp_id_token"])
        block = {
            "type": "enterprise",
            "client_id": ctx["client_id"],
            "client_secret": "${CM_CONFORMANCE_SECRET}",
            "idp_issuer": ctx["idp_issuer"],
            "idp_client_id": ctx["idp_client_id"],
            "id_token_file": str(id_token),
        }
        # The IdP's token endpoint (also in the context) is left for
        # code-mode to discover from the issuer's metadata, as a user would.
        return json.dumps(block)
    if not SCENARIO.startswith("auth/"):
        return None
    block: dict = {"type": "oauth", "client_metadata_url": CIMD_URL}
    if ctx.get("client_id"):
        block["client_id"] = ctx["client_id"]
        if ctx.get("client_secret"):
            env["CM_CONFORMANCE_SECRET"] = ctx["client_secret"]
            block["client_secret"] = "${CM_CONFORMANCE_SECRET}"
    return json.dumps(block)


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):  # noqa: ANN002, ANN003
        return None


def follow_as_browser(url: str) -> None:
    """GET the authorization URL, then the page it redirects to (code-mode's
    loopback port), as a browser does after the person agreed."""
    opener = urllib.request.build_opener(NoRedirect)
    try:
        response = opener.open(url, timeout=15)
        location = response.headers.get("Location")
    except urllib.error.HTTPError as e:
        location = e.headers.get("Location")
        if not location:
            log(f"the authorization endpoint answered {e.code} without a redirect")
            return
    if not location:
        log("the authorization endpoint did not redirect")
        return
    try:
        with urllib.request.urlopen(location, timeout=15) as page:
            log(f"the redirect page answered {page.status}")
    except urllib.error.HTTPError as e:
        log(f"the redirect page answered {e.code}")
    except OSError as e:
        log(f"the redirect page could not be reached: {e}")


async def login(url: str, block: str, env: dict[str, str]) -> int:
    """`code-mode login`, following each authorization URL it prints."""
    process = await asyncio.create_subprocess_exec(
        CODE_MODE,
        "login",
        "--url",
        url,
        "--auth",
        block,
        "--no-browser",
        "--timeout",
        "20",
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stderr is not None
    while line := await process.stderr.readline():
        text = line.decode(errors="replace").rstrip()
        print(f"[login] {text}", file=sys.stderr, flush=True)
        if text.startswith(("http://", "https://")):
            await asyncio.to_thread(follow_as_browser, text)
    return await process.wait()


async def accept_with_defaults(context, params):  # noqa: ANN001
    """Elicitation: accept, filling each field's default (SEP-1034)."""
    content = {}
    schema = getattr(params, "requested_schema", None) or {}
    for name, field in (schema.get("properties") or {}).items():
        if "default" in field:
            content[name] = field["default"]
    return types.ElicitResult(action="accept", content=content)


async def confirm(context, params):  # noqa: ANN001
    return types.ElicitResult(action="accept", content={"confirmed": True})


def needs_login(result: types.CallToolResult) -> bool:
    if not result.is_error:
        return False
    text = " ".join(getattr(block, "text", "") or "" for block in result.content)
    return bool(LOGIN_HINT.search(text))


def stub_arguments(schema: dict) -> dict:
    """The least arguments a tool's input schema requires."""
    kinds = {"string": "x", "integer": 0, "number": 0, "boolean": False, "object": {}, "array": [], "null": None}
    properties = schema.get("properties") or {}
    return {name: kinds.get((properties.get(name) or {}).get("type"), "x") for name in schema.get("required") or []}


async def run(url: str) -> int:
    state = tempfile.mkdtemp(prefix="cm-conformance-")
    env = dict(os.environ)
    env["CODE_MODE_STATE_DIR"] = state
    env["CODE_MODE_TOKEN_KEY"] = base64.b64encode(secrets.token_bytes(32)).decode()
    env.setdefault("RUST_LOG", "info")
    try:
        block = auth_block(env)
        interactive = block is not None and json.loads(block)["type"] == "oauth"
        if interactive:
            status = await login(url, block, env)
            if status != 0:
                log(f"code-mode login exited {status}")
                return status
        args = ["serve", "--url", url, "--expose-tools=only"]
        if block is not None:
            args += ["--auth", block]
        server = StdioServerParameters(command=CODE_MODE, args=args, env=env)
        mode = "legacy" if VERSION and VERSION < "2026-07-28" else "auto"
        callback = confirm if SCENARIO == "sep-2322-client-request-state" else accept_with_defaults
        async with Client(server, mode=mode, elicitation_callback=callback) as client:
            return await steps(client, url, block, env, interactive)
    finally:
        shutil.rmtree(state, ignore_errors=True)


async def steps(client: Client, url: str, block: str | None, env: dict[str, str], interactive: bool) -> int:
    async def call(name: str, arguments: dict) -> types.CallToolResult:
        result = await client.call_tool(name, arguments)
        if interactive and needs_login(result):
            # code-mode says the server needs a new login (or more scope):
            # log in again as a person would, then retry once.
            log(f"{name}: code-mode asks for a login: logging in again")
            await login(url, block, env)
            result = await client.call_tool(name, arguments)
        log(f"{name}: {'error' if result.is_error else 'ok'}")
        return result

    listed = await client.list_tools()
    tools = listed.tools
    if interactive and not tools:
        # The server waits for a new login (its login was withdrawn): log in
        # again, then wait for its tools to join.
        log("no tools listed: logging in again")
        await login(url, block, env)
        for _ in range(50):
            await asyncio.sleep(0.2)
            tools = (await client.list_tools()).tools
            if tools:
                break
    names = [t.name for t in tools]
    log(f"tools: {names}")
    ctx = context()
    if SCENARIO in ("tools_call", "request-metadata", "http-standard-headers"):
        await call("add_numbers", {"a": 5, "b": 3})
    elif SCENARIO == "sse-retry":
        await call("test_reconnection", {})
    elif SCENARIO == "elicitation-sep1034-client-defaults":
        await call("test_client_elicitation_defaults", {})
    elif SCENARIO == "sep-2322-client-request-state":
        for name in ("test_mrtr_echo_state", "test_mrtr_unrelated", "test_mrtr_no_state", "test_mrtr_no_result_type"):
            await call(name, {})
    elif SCENARIO == "http-invalid-tool-headers":
        for tool in tools:
            try:
                await call(tool.name, stub_arguments(tool.input_schema))
            except Exception as e:  # noqa: BLE001
                log(f"{tool.name}: {e}")
    elif SCENARIO == "http-custom-headers":
        for entry in ctx.get("toolCalls", []):
            if entry["name"] in names:
                try:
                    await call(entry["name"], entry.get("arguments") or {})
                except Exception as e:  # noqa: BLE001
                    log(f"{entry['name']}: {e}")
    elif SCENARIO == "json-schema-2020-12-preservation":
        focal = next((t for t in tools if t.name == "json_schema_2020_12_tool"), None)
        if focal is not None:
            await call("json_schema_echo", {"schema": focal.input_schema})
    elif SCENARIO.startswith("auth/") and tools:
        await call(tools[0].name, {})
    return 0


def main() -> None:
    if len(sys.argv) < 2:
        print(f"usage: {sys.argv[0]} <server url>", file=sys.stderr)
        sys.exit(2)
    sys.exit(asyncio.run(run(sys.argv[-1])))


if __name__ == "__main__":
    main()
