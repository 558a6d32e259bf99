"""A real MCP client for the tests: the official Python SDK driving a server.

The Rust tests run this with the `.venv` Python (installed by
scripts/setup.sh) to talk to code-mode as third-party clients do.

    python mcp_client.py (--url URL | --stdio COMMAND [ARG...] --) [--header 'Name: value']...
                         [--oauth ISSUER CLIENT_ID SECRET SCOPE] [--mode legacy|auto|VERSION]
                         [--api client|session] [--log-level LEVEL] [--cafile PEM] STEPS

--api picks the SDK's client: `client` (default) is the high-level
`mcp.Client` in --mode (its default `auto` adopts the stateless 2026-07-28
protocol when the server offers it); `session` is the lower-level
`ClientSession` with the initialize handshake (2025-11-25), as older
integrations use it. --log-level opts `mcp.Client` into log notifications
(sent with each request under 2026-07-28).

With --stdio, the command runs up to the last `--` (so it may hold a `--`
of its own).

--cafile trusts the certificates of PEM (an https URL with a certificate
of its own) instead of the system's.

--oauth authenticates with the SDK's ClientCredentialsOAuthProvider: it
reads the server's Protected Resource Metadata, discovers ISSUER, asks it
for a token with client_credentials, and sends it.

STEPS is a JSON list, run in order in one client session:
    {"op": "list_tools"}
    {"op": "capabilities"}  the capabilities the server declared to this client
    {"op": "call", "tool": NAME, "arguments": {...}}
        with "session_from_last": true, the `session` value of the last
        call's structured content is added to the arguments (a stateless
        client's kept-session handle); with "session_from_step": N, that of
        step N's (counting from 0)
    {"op": "set_level", "level": LEVEL}            logging/setLevel
    {"op": "logs", "at_least": N, "wait": SECONDS}  the log notifications
        received so far (waiting up to SECONDS for N of them, then a moment
        more for any that follow), as a list of {"level", "logger", "data"}
    {"op": "list_resources"} / {"op": "list_templates"} / {"op": "list_prompts"}
    {"op": "read_resource", "uri": URI}
    {"op": "read_links"}  every resource link of the last call's result read
        with resources/read, in order, as a list of results; with
        "of_step": N, the links of step N's result (counting from 0)
    {"op": "subscribe", "uri": URI} / {"op": "unsubscribe", "uri": URI}
    {"op": "get_prompt", "name": NAME, "arguments": {...}}
    {"op": "complete", "ref": {"type": "ref/prompt", "name": N} | {"type": "ref/resource", "uri": U},
                       "argument": {"name": A, "value": V}}
    {"op": "notifications", "at_least": N, "wait": SECONDS}  the server
        notifications other than log messages received so far, as a list of
        {"method", "params"}
    {"op": "sleep", "seconds": S}  wait S seconds (e.g. past a token's expiry)
    {"op": "set_roots", "roots": [URI, ...]}  answer roots/list with these
        from now on and send notifications/roots/list_changed (with --roots)
    {"op": "asked"}  the questions the server put to this client so far
        (sampling, elicitation, roots), as a list of {"method", "params"};
        with "at_least": N and "wait": SECONDS, once N are noted (or the
        wait is over)
    {"op": "together", "steps": [...], "stagger": SECONDS}  the steps at
        once (each started SECONDS after the last), their outputs as a list
    {"op": "pause"}  wait for a line on stdin (the test's go-ahead, while
        other clients act), its output null; the session stays open
A "call" step with "progress": true passes a progress callback; the step's
output then also holds "progress": [{"progress", "total", "message"}, ...].
A "call" step with "give_up_after": SECONDS stops waiting after that long
(an anyio cancel scope around the call, as a caller's timeout would); its
output is then {"op": "call", "result": null, "gave_up": true}.
A "call" step with "read_timeout": SECONDS passes the SDK's own read
timeout (read_timeout_seconds); a call that times out gives
{"op": "call", "result": null, "timed_out": true}.

--sampling TEXT declares sampling and answers every request with TEXT
(after --sampling-delay SECONDS, if given; a question the server cancels
meanwhile is noted in "asked" as {"method": "cancelled"});
--elicit JSON declares (form) elicitation and accepts with that content
(--elicit decline declines); --roots URI (repeatable) declares roots.
--url-browser COMMAND_JSON (a JSON list: a command and its arguments)
declares elicitation (form and URL mode, as the SDK does) and answers a
URL-mode elicitation as a person with a browser would: it runs the command
with the URL as its last argument (the person opens the link and completes
what it asks), notes the command's stdout (JSON) in "asked" as the
question's "browser", and accepts (a URL accept carries no content); a
command that fails cancels. A form question then declines unless --elicit.
Each step prints one JSON line on stdout: {"op": ..., "result": ...} (the
SDK's result as JSON) or {"op": ..., "error": "..."} when the step raised.
Everything the SDK logs goes to stderr, which the tests read too.
"""

import argparse
import asyncio
import contextlib
import json
import logging
import ssl
import sys
import warnings

import anyio
import httpx2
import mcp.types as types
from mcp import Client, ClientSession, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client


def parse_args(argv):
    stdio = None
    if "--stdio" in argv:
        start = argv.index("--stdio")
        # The last `--`: the command may hold one of its own (`serve ... --
        # SERVER`).
        end = len(argv) - 1 - argv[::-1].index("--")
        stdio = argv[start + 1 : end]
        argv = argv[:start] + argv[end + 1 :]
    parser = argparse.ArgumentParser()
    parser.add_argument("--url")
    parser.add_argument("--header", action="append", default=[])
    parser.add_argument("--mode", default="auto")
    parser.add_argument("--api", choices=["client", "session"], default="client")
    parser.add_argument("--log-level")
    parser.add_argument("--cafile")
    parser.add_argument("--oauth", nargs=4, metavar=("ISSUER", "CLIENT_ID", "SECRET", "SCOPE"))
    parser.add_argument("--sampling")
    parser.add_argument("--sampling-delay", type=float)
    parser.add_argument("--elicit")
    parser.add_argument("--roots", action="append")
    parser.add_argument("--url-browser")
    parser.add_argument("steps")
    args = parser.parse_args(argv)
    args.stdio = stdio
    if (args.url is None) == (stdio is None):
        parser.error("give exactly one of --url or --stdio COMMAND ... --")
    return args


class MemoryStorage:
    """Token storage for one run (the SDK's TokenStorage protocol)."""

    def __init__(self):
        self.tokens = None
        self.client_info = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client_info

    async def set_client_info(self, client_info):
        self.client_info = client_info


def as_json(value):
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    return value


async def logs_after(received, at_least, wait):
    loop = asyncio.get_running_loop()
    give_up = loop.time() + wait
    while len(received) < at_least and loop.time() < give_up:
        await asyncio.sleep(0.05)
    # Any notification right behind them.
    await asyncio.sleep(0.3)
    return list(received)


async def open_in_browser(args, url, noted):
    """A URL-mode question: the person's browser step (--url-browser), then
    accept; cancel when there is no such step or it failed."""
    if args.url_browser is None:
        return types.ElicitResult(action="cancel")
    command = json.loads(args.url_browser) + [url]
    process = await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await process.communicate()
    try:
        noted["browser"] = json.loads(out.decode() or "null")
    except ValueError:
        noted["browser"] = {"stdout": out.decode()[-2000:]}
    if process.returncode != 0:
        noted["browser_stderr"] = err.decode()[-2000:]
        return types.ElicitResult(action="cancel")
    return types.ElicitResult(action="accept")


def callbacks(args, asked, notes):
    """The client's answers to a server's questions (only those --sampling,
    --elicit and --roots ask for: each declares its capability), each
    question noted in `asked`, and a message handler noting the server's
    notifications in `notes`."""
    options = {}
    if args.sampling is not None:
        async def sampling(context, params):
            asked.append({"method": "sampling/createMessage", "params": as_json(params)})
            if args.sampling_delay:
                try:
                    await asyncio.sleep(args.sampling_delay)
                except BaseException:
                    # The server cancelled its question (the SDK cancels
                    # the callback on notifications/cancelled).
                    asked.append({"method": "cancelled", "params": {}})
                    raise
            return types.CreateMessageResult(
                role="assistant",
                content=types.TextContent(type="text", text=args.sampling),
                model="test-model",
                stop_reason="endTurn",
            )
        options["sampling_callback"] = sampling
    if args.elicit is not None or args.url_browser is not None:
        async def elicit(context, params):
            asked.append({"method": "elicitation/create", "params": as_json(params)})
            if getattr(params, "mode", None) == "url":
                return await open_in_browser(args, params.url, asked[-1])
            if args.elicit is None or args.elicit == "decline":
                return types.ElicitResult(action="decline")
            return types.ElicitResult(action="accept", content=json.loads(args.elicit))
        options["elicitation_callback"] = elicit
    if args.roots:
        async def roots(context):
            asked.append({"method": "roots/list", "params": {}})
            return types.ListRootsResult(roots=[types.Root(uri=uri) for uri in args.roots])
        options["list_roots_callback"] = roots

    async def on_message(message):
        if isinstance(message, types.ServerNotification):
            note = as_json(message)
            if note.get("method") != "notifications/message":
                notes.append({"method": note.get("method"), "params": note.get("params")})
    options["message_handler"] = on_message
    return options


@contextlib.asynccontextmanager
async def connect(args, server, on_log, options):
    """The client --api names, connected to `server` (a transport for
    `session`, anything `mcp.Client` takes for `client`)."""
    if args.api == "client":
        if args.log_level:
            options = {**options, "log_level": args.log_level}
        async with Client(server, mode=args.mode, logging_callback=on_log, **options) as client:
            yield client
        return
    transport = stdio_client(server) if isinstance(server, StdioServerParameters) else server
    async with transport as streams:
        read, write = streams[0], streams[1]
        async with ClientSession(read, write, logging_callback=on_log, **options) as session:
            await session.initialize()
            yield session


async def main(argv):
    args = parse_args(argv)
    steps = json.loads(args.steps)
    received = []
    asked = []
    notes = []

    async def on_log(params):
        received.append({"level": params.level, "logger": params.logger, "data": params.data})
    if args.stdio:
        server = StdioServerParameters(command=args.stdio[0], args=args.stdio[1:])
    else:
        headers = dict(h.split(": ", 1) for h in args.header)
        auth = None
        if args.oauth:
            from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider

            issuer, client_id, secret, scope = args.oauth
            auth = ClientCredentialsOAuthProvider(
                server_url=args.url,
                storage=MemoryStorage(),
                client_id=client_id,
                client_secret=secret,
                scope=scope,
                issuer=issuer,
            )
        verify = ssl.create_default_context(cafile=args.cafile) if args.cafile else True
        http = httpx2.AsyncClient(headers=headers, auth=auth, timeout=httpx2.Timeout(120.0), verify=verify)
        server = streamable_http_client(args.url, http_client=http)
    async with connect(args, server, on_log, callbacks(args, asked, notes)) as client:
        last = None
        results = []
        async def one(step):
            """One step's output line (as a dict)."""
            nonlocal last
            op = step["op"]
            try:
                if op == "together":
                    async def later(i, inner):
                        await asyncio.sleep(i * step.get("stagger", 0))
                        return await one(inner)
                    outputs = await asyncio.gather(*(later(i, s) for i, s in enumerate(step["steps"])))
                    results.append(outputs)
                    return {"op": op, "result": outputs}
            except Exception as e:
                results.append(None)
                return {"op": op, "error": f"{type(e).__name__}: {e}"}
            return await plain(step)

        async def plain(step):
            nonlocal last
            op = step["op"]
            try:
                if op == "list_tools":
                    result = await client.list_tools()
                elif op == "call":
                    arguments = dict(step.get("arguments", {}))
                    if step.get("session_from_last"):
                        arguments["session"] = (last.structured_content or {}).get("session") if last else None
                    if "session_from_step" in step:
                        earlier = results[step["session_from_step"]]
                        arguments["session"] = (getattr(earlier, "structured_content", None) or {}).get("session")
                    progress = []
                    options = {}
                    if step.get("progress"):
                        async def on_progress(done, total, message):
                            progress.append({"progress": done, "total": total, "message": message})
                        options["progress_callback"] = on_progress
                    if "give_up_after" in step:
                        # The caller gives up: the SDK abandons the request
                        # (notifications/cancelled, or at 2026-07-28 over
                        # HTTP the request's stream closed).
                        with anyio.move_on_after(step["give_up_after"]) as scope:
                            result = await client.call_tool(step["tool"], arguments, **options)
                        if scope.cancelled_caught:
                            results.append(None)
                            return {"op": op, "result": None, "gave_up": True}
                    elif "read_timeout" in step:
                        # The SDK's own timeout: it abandons the request
                        # with a courtesy cancel.
                        try:
                            result = await client.call_tool(
                                step["tool"], arguments, read_timeout_seconds=step["read_timeout"], **options
                            )
                        except MCPError as e:
                            if e.error.code != -32001:
                                raise
                            results.append(None)
                            return {"op": op, "result": None, "timed_out": True}
                    else:
                        result = await client.call_tool(step["tool"], arguments, **options)
                    last = result
                    if step.get("progress"):
                        results.append(result)
                        return {"op": op, "result": as_json(result), "progress": progress}
                elif op == "capabilities":
                    result = client.server_capabilities
                elif op == "set_level":
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")  # the capability is deprecated from 2026-07-28 on
                        result = await client.set_logging_level(step["level"])
                elif op == "logs":
                    result = await logs_after(received, step.get("at_least", 0), step.get("wait", 5))
                elif op == "notifications":
                    result = await logs_after(notes, step.get("at_least", 0), step.get("wait", 5))
                elif op == "asked":
                    # With "at_least": wait (up to "wait" s) for that many.
                    at_least = step.get("at_least")
                    result = list(asked) if at_least is None else await logs_after(asked, at_least, step.get("wait", 5))
                elif op == "pause":
                    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
                    result = None
                elif op == "sleep":
                    await asyncio.sleep(step["seconds"])
                    result = None
                elif op == "set_roots":
                    args.roots[:] = step["roots"]
                    session = getattr(client, "session", client)
                    await session.send_roots_list_changed()
                    result = None
                elif op == "list_resources":
                    result = await client.list_resources()
                elif op == "list_templates":
                    result = await client.list_resource_templates()
                elif op == "list_prompts":
                    result = await client.list_prompts()
                elif op == "read_resource":
                    result = await client.read_resource(step["uri"])
                elif op == "read_links":
                    called = results[step["of_step"]] if "of_step" in step else last
                    content = getattr(called, "content", None) or []
                    links = [c for c in content if getattr(c, "type", None) == "resource_link"]
                    result = [as_json(await client.read_resource(str(link.uri))) for link in links]
                elif op in ("subscribe", "unsubscribe"):
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")  # legacy-only from 2026-07-28 on
                        method = client.subscribe_resource if op == "subscribe" else client.unsubscribe_resource
                        result = await method(step["uri"])
                elif op == "get_prompt":
                    result = await client.get_prompt(step["name"], step.get("arguments"))
                elif op == "complete":
                    reference = step["ref"]
                    if reference["type"] == "ref/prompt":
                        ref = types.PromptReference(type="ref/prompt", name=reference["name"])
                    else:
                        ref = types.ResourceTemplateReference(type="ref/resource", uri=reference["uri"])
                    result = await client.complete(ref, step["argument"])
                else:
                    raise ValueError(f"unknown op {op!r}")
                results.append(result)
                return {"op": op, "result": as_json(result)}
            except Exception as e:  # the test reads what failed
                results.append(None)
                return {"op": op, "error": f"{type(e).__name__}: {e}"}

        for step in steps:
            print(json.dumps(await one(step)), flush=True)


if __name__ == "__main__":
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    asyncio.run(main(sys.argv[1:]))
