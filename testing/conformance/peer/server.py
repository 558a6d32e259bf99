"""code-mode's own reference MCP server for the MCP conformance suite.

It offers every tool, resource, template, prompt and completion that the
suite's server scenarios ask for, under both requirement sets:

* 2025-11-25: the stateful era (initialize handshake, sessions, server-to-client
  requests such as sampling and elicitation, logging/setLevel, subscriptions);
* 2026-07-28: the stateless era (server/discover, per-request `_meta`,
  `resultType`, input-required results with `requestState`, caching hints,
  subscriptions/listen).

The protocol machinery of both eras (envelope and header validation, version
negotiation, error codes, sealing of `requestState`, caching hints, the
serverInfo stamp) comes from the official Python SDK (`mcp` 2.3, the low-level
`Server`). This file adds the fixtures and the behaviour of each of them.

Every tool that needs input from the client is written once, in the
multi-round style of 2026-07-28 (it returns the requests it needs and resumes
from `inputResponses`/`requestState`); on a 2025-11-25 connection a small
driver plays those rounds itself by sending the same requests to the client.

Run:  python server.py --port 8931      (streamable HTTP at http://127.0.0.1:8931/mcp)
      python server.py --stdio          (stdio; stdout is the MCP channel)
      --discover-as-reference           answer server/discover as the suite's
                                        reference server does (see below)
Logs go to stderr only.
"""

from __future__ import annotations

import argparse
import base64
import itertools
import json
import logging
import re
import secrets
import struct
import sys
import warnings
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types
from mcp_types import INVALID_PARAMS, MISSING_REQUIRED_CLIENT_CAPABILITY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp.server.caching import CacheHint
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    PromptsListChanged,
    ResourceUpdated,
    ToolsListChanged,
)
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.shared.message import ServerMessageMetadata

# Logging, roots and client progress are deprecated at 2026-07-28 but still
# part of 2025-11-25, which this server serves too: silence the SDK's notices.
warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

log = logging.getLogger("conformance-peer")

SERVER_NAME = "code-mode-conformance-peer"
SERVER_VERSION = "1.0.0"


# ---------------------------------------------------------------------------
# Binary fixtures, built here rather than pasted: a 1x1 PNG and a short WAV.
# ---------------------------------------------------------------------------


def _png_1x1(rgb: tuple[int, int, int]) -> bytes:
    """A valid one-pixel RGB PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)  # 1x1, 8-bit, truecolour
    pixels = zlib.compress(b"\x00" + bytes(rgb))  # filter byte + one pixel
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


def _wav_silence(samples: int = 8, rate: int = 8000) -> bytes:
    """A valid mono 16-bit PCM WAV with a few silent samples."""
    data = b"\x00\x00" * samples
    fmt = struct.pack("<HHIIHH", 1, 1, rate, rate * 2, 2, 16)
    return (
        b"RIFF"
        + struct.pack("<I", 4 + 8 + len(fmt) + 8 + len(data))
        + b"WAVE"
        + b"fmt "
        + struct.pack("<I", len(fmt))
        + fmt
        + b"data"
        + struct.pack("<I", len(data))
        + data
    )


PNG_B64 = base64.b64encode(_png_1x1((220, 30, 30))).decode()
WAV_B64 = base64.b64encode(_wav_silence()).decode()

# The inputSchema the json-schema-2020-12 scenario expects to see preserved
# verbatim in tools/list (its fixture is part of the scenario's requirements).
JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}

NO_ARGS: dict[str, Any] = {"type": "object", "properties": {}}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool_result(*content: dict[str, Any], is_error: bool = False) -> dict[str, Any]:
    result: dict[str, Any] = {"content": list(content)}
    if is_error:
        result["isError"] = True
    return result


# ---------------------------------------------------------------------------
# Requests a handler needs from the client (elicitation, sampling, roots).
# ---------------------------------------------------------------------------


def elicit(message: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    schema = {"type": "object", "properties": properties, "required": required}
    return {"method": "elicitation/create", "params": {"message": message, "requestedSchema": schema}}


def sample(prompt: str, max_tokens: int) -> dict[str, Any]:
    message = {"role": "user", "content": {"type": "text", "text": prompt}}
    return {"method": "sampling/createMessage", "params": {"messages": [message], "maxTokens": max_tokens}}


def list_roots() -> dict[str, Any]:
    return {"method": "roots/list", "params": {}}


# Which client capability each kind of request relies on.
CAPABILITY_FOR = {"elicitation/create": "elicitation", "sampling/createMessage": "sampling", "roots/list": "roots"}


@dataclass
class NeedInput:
    """A handler's answer "not yet": what to ask the client, and what to remember."""

    requests: dict[str, dict[str, Any]]
    state: str | None = None


@dataclass
class Call:
    """One round of a call: its arguments and what the client answered so far."""

    name: str
    arguments: dict[str, Any]
    responses: dict[str, Any]
    state: str | None
    capabilities: dict[str, Any]
    modern: bool

    def answer(self, key: str) -> dict[str, Any] | None:
        """The client's answer for `key`, when it is a well-formed object."""
        value = self.responses.get(key)
        return value if isinstance(value, dict) else None

    def accepted(self, key: str) -> dict[str, Any] | None:
        """The content of an accepted elicitation answer for `key`."""
        value = self.answer(key)
        if value is None or value.get("action") != "accept" or not isinstance(value.get("content"), dict):
            return None
        return value["content"]

    def state_json(self) -> dict[str, Any]:
        try:
            value = json.loads(self.state) if self.state else {}
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}


def new_state(**values: Any) -> str:
    """A fresh requestState: the values plus a nonce, so every round's state differs."""
    return json.dumps({**values, "nonce": secrets.token_hex(8)})


def sampled_text(answer: dict[str, Any] | None) -> str | None:
    content = (answer or {}).get("content")
    if isinstance(content, dict) and isinstance(content.get("text"), str):
        return content["text"]
    return None


Flow = Callable[[Call], Awaitable["dict[str, Any] | NeedInput"]]


# ---------------------------------------------------------------------------
# Resumable SSE streams for 2025-11-25 (SEP-1699): a small in-memory event store.
# ---------------------------------------------------------------------------


class MemoryEventStore(EventStore):
    """Keeps the events of every SSE stream in memory so a client can resume.

    The SDK names a stream after its request id, which repeats across
    sessions; each stream's priming event therefore opens a new lineage, and
    an event id names its lineage, so a resume replays only its own stream.
    """

    def __init__(self) -> None:
        self._lineages = itertools.count(1)
        self._current: dict[str, int] = {}  # stream id -> its newest lineage
        self._events: dict[int, list[types.JSONRPCMessage]] = {}  # lineage -> messages
        self._streams: dict[int, str] = {}  # lineage -> stream id

    async def store_event(self, stream_id: str, message: types.JSONRPCMessage | None) -> str:
        if message is None or stream_id not in self._current:
            lineage = next(self._lineages)
            self._current[stream_id] = lineage
            self._events[lineage] = []
            self._streams[lineage] = stream_id
        lineage = self._current[stream_id]
        if message is not None:
            self._events[lineage].append(message)
        return f"{lineage}-{len(self._events[lineage])}"

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> str | None:
        try:
            lineage, seen = (int(part) for part in last_event_id.split("-", 1))
        except ValueError:
            return None
        if lineage not in self._events:
            return None
        for index, message in enumerate(self._events[lineage][seen:], start=seen + 1):
            await send_callback(EventMessage(message, f"{lineage}-{index}"))
        return self._streams[lineage]


# ---------------------------------------------------------------------------
# The server: fixtures and handlers.
# ---------------------------------------------------------------------------


class PeerServer(Server[Any]):
    """Low-level SDK server whose handshake announces list-changed support."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(prompts_changed=True, resources_changed=True, tools_changed=True),
            experimental_capabilities,
            extensions,
        )


@dataclass
class ToolSpec:
    description: str
    input_schema: dict[str, Any]
    run: Callable[[ServerRequestContext[Any, Any], Call], Awaitable["dict[str, Any] | NeedInput"]]


@dataclass
class Peer:
    """All fixtures and the state they share (dynamic tool/prompt, watched resource)."""

    bus: InMemorySubscriptionBus = field(default_factory=InMemorySubscriptionBus)
    dynamic_tool: bool = False
    dynamic_prompt: bool = False
    watched_version: int = 1
    # 2025-11-25 subscribers of resources/subscribe: uri -> (connection, session) to notify.
    subscribers: dict[str, list[tuple[str, Any]]] = field(default_factory=dict)
    # logging/setLevel per 2025-11-25 connection (HTTP session id, or "stdio").
    log_levels: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.tools: dict[str, ToolSpec] = self._tools()

    # -- helpers ----------------------------------------------------------

    @staticmethod
    def modern(ctx: ServerRequestContext[Any, Any]) -> bool:
        return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS

    @staticmethod
    def capabilities(ctx: ServerRequestContext[Any, Any]) -> dict[str, Any]:
        caps = ctx.session.client_capabilities
        return caps.model_dump(by_alias=True, exclude_none=True) if caps is not None else {}

    @staticmethod
    def connection_key(ctx: ServerRequestContext[Any, Any]) -> str:
        request = ctx.request
        headers = getattr(request, "headers", None)
        return (headers.get("mcp-session-id") if headers is not None else None) or "stdio"

    async def log(self, ctx: ServerRequestContext[Any, Any], level: types.LoggingLevel, message: str) -> None:
        """A log notification on this request's stream, honouring logging/setLevel."""
        order = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
        wanted = self.log_levels.get(self.connection_key(ctx), "debug")
        if not self.modern(ctx) and order.index(level) < order.index(wanted):
            return
        await ctx.session.send_log_message(level, message, logger=SERVER_NAME, related_request_id=ctx.request_id)

    @staticmethod
    def progress_token(ctx: ServerRequestContext[Any, Any]) -> Any:
        meta = ctx.meta or {}
        return meta.get("progress_token", meta.get("progressToken"))

    async def progress(self, ctx: ServerRequestContext[Any, Any], done: int, total: int) -> None:
        token = self.progress_token(ctx)
        if token is None:
            return
        await ctx.session.send_progress_notification(
            token, done, total, f"{done} of {total} done", related_request_id=ctx.request_id
        )

    # -- tools ------------------------------------------------------------

    def _tools(self) -> dict[str, ToolSpec]:
        def args(**props: dict[str, Any]) -> dict[str, Any]:
            return {"type": "object", "properties": props, "required": list(props)}

        return {
            # Content of every kind.
            "test_simple_text": ToolSpec("Returns one text block.", NO_ARGS, self.t_simple_text),
            "test_image_content": ToolSpec("Returns one PNG image block.", NO_ARGS, self.t_image),
            "test_audio_content": ToolSpec("Returns one WAV audio block.", NO_ARGS, self.t_audio),
            "test_embedded_resource": ToolSpec("Returns an embedded text resource.", NO_ARGS, self.t_embedded),
            "test_multiple_content_types": ToolSpec(
                "Returns text, an image and an embedded JSON resource.", NO_ARGS, self.t_mixed
            ),
            "test_error_handling": ToolSpec("Always fails with a tool error (isError).", NO_ARGS, self.t_error),
            # Notifications during a call.
            "test_tool_with_logging": ToolSpec(
                "Sends three info log messages while it runs.", NO_ARGS, self.t_logging
            ),
            "test_tool_with_progress": ToolSpec(
                "Reports progress 0, 50 and 100 of 100 when given a progress token.", NO_ARGS, self.t_progress
            ),
            # Input from the client: sent as requests (2025-11-25) or as
            # input-required results (2026-07-28).
            "test_sampling": ToolSpec(
                "Asks the client's LLM to answer a prompt (sampling).",
                args(prompt={"type": "string", "description": "What to ask the LLM"}),
                self.flow(self.f_sampling),
            ),
            "test_elicitation": ToolSpec(
                "Asks the user for a response (elicitation).",
                args(message={"type": "string", "description": "What to show the user"}),
                self.flow(self.f_elicitation),
            ),
            "test_elicitation_sep1034_defaults": ToolSpec(
                "Elicits a form whose fields all carry default values (SEP-1034).",
                NO_ARGS,
                self.flow(self.f_elicitation_defaults),
            ),
            "test_elicitation_sep1330_enums": ToolSpec(
                "Elicits a form with every enum variant (SEP-1330).", NO_ARGS, self.flow(self.f_elicitation_enums)
            ),
            "test_input_required_result_elicitation": ToolSpec(
                "Needs the user's name (one elicitation).", NO_ARGS, self.flow(self.f_mrtr_elicitation)
            ),
            "test_input_required_result_sampling": ToolSpec(
                "Needs one sampling answer.", NO_ARGS, self.flow(self.f_mrtr_sampling)
            ),
            "test_input_required_result_list_roots": ToolSpec(
                "Needs the client's roots.", NO_ARGS, self.flow(self.f_mrtr_roots)
            ),
            "test_input_required_result_request_state": ToolSpec(
                "Needs a confirmation and checks its own requestState.", NO_ARGS, self.flow(self.f_mrtr_state)
            ),
            "test_input_required_result_multiple_inputs": ToolSpec(
                "Needs an elicitation, a sampling answer and the roots at once.",
                NO_ARGS,
                self.flow(self.f_mrtr_multiple),
            ),
            "test_input_required_result_multi_round": ToolSpec(
                "Needs two elicitations, one round after the other.", NO_ARGS, self.flow(self.f_mrtr_multi_round)
            ),
            "test_input_required_result_tampered_state": ToolSpec(
                "Needs a confirmation; rejects a requestState that was altered.",
                NO_ARGS,
                self.flow(self.f_mrtr_tamper),
            ),
            "test_input_required_result_capabilities": ToolSpec(
                "Asks only for the kinds of input the client declared it supports.",
                NO_ARGS,
                self.flow(self.f_mrtr_capabilities),
            ),
            "test_missing_capability": ToolSpec(
                "Requires the client's sampling capability.", NO_ARGS, self.t_missing_capability
            ),
            # Stream behaviour and diagnostics.
            "test_streaming_elicitation": ToolSpec(
                "Sends progress (when asked) on the response stream, then its result.", NO_ARGS, self.t_streaming
            ),
            "test_logging_tool": ToolSpec("Logs one info message, then returns.", NO_ARGS, self.t_logging_tool),
            "test_reconnection": ToolSpec(
                "Closes its SSE stream mid-call; the result arrives after the client resumes (SEP-1699).",
                NO_ARGS,
                self.t_reconnection,
            ),
            "test_trigger_tool_change": ToolSpec(
                "Adds or removes test_dynamic_tool and announces the change.", NO_ARGS, self.t_trigger_tools
            ),
            "test_trigger_prompt_change": ToolSpec(
                "Adds or removes test_dynamic_prompt and announces the change.", NO_ARGS, self.t_trigger_prompts
            ),
            "test_update_watched_resource": ToolSpec(
                "Changes test://watched-resource and notifies its subscribers.", NO_ARGS, self.t_touch_watched
            ),
            "test_header_param": ToolSpec(
                "Echoes its region, which 2026-07-28 clients also send as the Mcp-Param-Region header (SEP-2243).",
                {
                    "type": "object",
                    "properties": {"region": {"type": "string", "description": "Any text", "x-mcp-header": "Region"}},
                    "required": ["region"],
                },
                self.t_header_param,
            ),
            "json_schema_2020_12_tool": ToolSpec(
                "Takes JSON Schema 2020-12 input (SEP-1613, SEP-2106).", JSON_SCHEMA_2020_12, self.t_json_schema
            ),
            "test_dynamic_tool": ToolSpec(
                "Listed only after test_trigger_tool_change added it.", NO_ARGS, self.t_dynamic
            ),
        }

    def listed_tools(self) -> list[str]:
        return [name for name in self.tools if name != "test_dynamic_tool" or self.dynamic_tool]

    async def t_simple_text(self, ctx, call):
        return tool_result(text("This is a simple text response for testing."))

    async def t_image(self, ctx, call):
        return tool_result({"type": "image", "data": PNG_B64, "mimeType": "image/png"})

    async def t_audio(self, ctx, call):
        return tool_result({"type": "audio", "data": WAV_B64, "mimeType": "audio/wav"})

    async def t_embedded(self, ctx, call):
        resource = {"uri": "test://embedded-resource", "mimeType": "text/plain", "text": "This is an embedded resource content."}
        return tool_result({"type": "resource", "resource": resource})

    async def t_mixed(self, ctx, call):
        resource = {
            "uri": "test://mixed-content-resource",
            "mimeType": "application/json",
            "text": json.dumps({"test": "data", "value": 123}, separators=(",", ":")),
        }
        return tool_result(
            text("Multiple content types test:"),
            {"type": "image", "data": PNG_B64, "mimeType": "image/png"},
            {"type": "resource", "resource": resource},
        )

    async def t_error(self, ctx, call):
        return tool_result(text("This tool intentionally returns an error for testing"), is_error=True)

    async def t_logging(self, ctx, call):
        for i, message in enumerate(["Tool execution started", "Tool processing data", "Tool execution completed"]):
            if i:
                await anyio.sleep(0.05)
            await self.log(ctx, "info", message)
        return tool_result(text("Logged three messages at info level."))

    async def t_progress(self, ctx, call):
        for i, done in enumerate([0, 50, 100]):
            if i:
                await anyio.sleep(0.05)
            await self.progress(ctx, done, 100)
        token = self.progress_token(ctx)
        return tool_result(text(f"Progress reported for token {token}" if token is not None else "No progress token given."))

    async def t_missing_capability(self, ctx, call):
        if "sampling" not in call.capabilities:
            raise missing_capability("sampling")
        return tool_result(text("The client declared sampling."))

    async def t_streaming(self, ctx, call):
        await self.progress(ctx, 1, 2)
        await self.progress(ctx, 2, 2)
        return tool_result(text("Streaming complete."))

    async def t_logging_tool(self, ctx, call):
        # On 2026-07-28 the SDK drops this unless the request's _meta set a log level.
        await self.log(ctx, "info", "test_logging_tool ran")
        return tool_result(text("Logging evaluated."))

    async def t_reconnection(self, ctx, call):
        if ctx.close_sse_stream is not None:
            await ctx.close_sse_stream()
        await anyio.sleep(0.2)
        return tool_result(text("Reconnection test complete: the result was delivered after the stream was closed."))

    async def t_trigger_tools(self, ctx, call):
        self.dynamic_tool = not self.dynamic_tool
        await self.bus.publish(ToolsListChanged())
        if not self.modern(ctx):
            await ctx.session.send_tool_list_changed()
        return tool_result(text(f"test_dynamic_tool is now {'listed' if self.dynamic_tool else 'gone'}."))

    async def t_trigger_prompts(self, ctx, call):
        self.dynamic_prompt = not self.dynamic_prompt
        await self.bus.publish(PromptsListChanged())
        if not self.modern(ctx):
            await ctx.session.send_prompt_list_changed()
        return tool_result(text(f"test_dynamic_prompt is now {'listed' if self.dynamic_prompt else 'gone'}."))

    async def t_touch_watched(self, ctx, call):
        self.watched_version += 1
        uri = "test://watched-resource"
        await self.bus.publish(ResourceUpdated(uri=uri))
        for entry in list(self.subscribers.get(uri, [])):
            try:
                await entry[1].send_resource_updated(uri)
            except Exception:  # a closed connection: forget it
                self.subscribers[uri].remove(entry)
        return tool_result(text(f"test://watched-resource is now at version {self.watched_version}."))

    async def t_header_param(self, ctx, call):
        # The SDK has already checked Mcp-Param-Region against the body (HTTP 400 on a mismatch).
        return tool_result(text(f"Region: {call.arguments.get('region')}"))

    async def t_json_schema(self, ctx, call):
        return tool_result(text(f"Called with {json.dumps(call.arguments, sort_keys=True)}"))

    async def t_dynamic(self, ctx, call):
        return tool_result(text("The dynamic tool ran."))

    # -- tools that need input (written in the multi-round style) -----------

    async def f_sampling(self, call: Call):
        prompt = call.arguments.get("prompt")
        if not isinstance(prompt, str):
            return tool_result(text("Missing argument: prompt (string)"), is_error=True)
        answer = call.answer("llm")
        if answer is None:
            return NeedInput({"llm": sample(prompt, 100)})
        return tool_result(text(f"LLM response: {sampled_text(answer) or '(no text)'}"))

    async def f_elicitation(self, call: Call):
        message = call.arguments.get("message")
        if not isinstance(message, str):
            return tool_result(text("Missing argument: message (string)"), is_error=True)
        answer = call.answer("user")
        if answer is None:
            properties = {
                "username": {"type": "string", "description": "The user's name"},
                "email": {"type": "string", "description": "The user's email address"},
            }
            return NeedInput({"user": elicit(message, properties, ["username", "email"])})
        return tool_result(text(describe_elicitation("User response", answer)))

    async def f_elicitation_defaults(self, call: Call):
        answer = call.answer("form")
        if answer is None:
            properties = {
                "name": {"type": "string", "description": "Name", "default": "John Doe"},
                "age": {"type": "integer", "description": "Age", "default": 30},
                "score": {"type": "number", "description": "Score", "default": 95.5},
                "status": {
                    "type": "string",
                    "description": "Status",
                    "enum": ["active", "inactive", "pending"],
                    "default": "active",
                },
                "verified": {"type": "boolean", "description": "Verified", "default": True},
            }
            return NeedInput({"form": elicit("Check the prefilled fields and change any you like", properties, [])})
        return tool_result(text(describe_elicitation("Elicitation completed", answer)))

    async def f_elicitation_enums(self, call: Call):
        answer = call.answer("form")
        if answer is None:

            def titled(values: list[str], titles: list[str]) -> list[dict[str, str]]:
                return [{"const": v, "title": t} for v, t in zip(values, titles)]

            properties = {
                "untitledSingle": {
                    "type": "string",
                    "description": "Pick one",
                    "enum": ["option1", "option2", "option3"],
                },
                "titledSingle": {
                    "type": "string",
                    "description": "Pick one (titled)",
                    "oneOf": titled(["value1", "value2", "value3"], ["First Option", "Second Option", "Third Option"]),
                },
                "legacyEnum": {
                    "type": "string",
                    "description": "Pick one (legacy titles)",
                    "enum": ["opt1", "opt2", "opt3"],
                    "enumNames": ["Option One", "Option Two", "Option Three"],
                },
                "untitledMulti": {
                    "type": "array",
                    "description": "Pick some",
                    "minItems": 1,
                    "maxItems": 3,
                    "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
                },
                "titledMulti": {
                    "type": "array",
                    "description": "Pick some (titled)",
                    "minItems": 1,
                    "maxItems": 3,
                    "items": {
                        "anyOf": titled(["value1", "value2", "value3"], ["First Choice", "Second Choice", "Third Choice"])
                    },
                },
            }
            return NeedInput({"form": elicit("Choose from each list", properties, [])})
        return tool_result(text(describe_elicitation("Elicitation completed", answer)))

    async def f_mrtr_elicitation(self, call: Call):
        content = call.accepted("user_name")
        if content is None or not isinstance(content.get("name"), str):
            return NeedInput({"user_name": elicit("What is your name?", {"name": {"type": "string"}}, ["name"])})
        return tool_result(text(f"Hello, {content['name']}!"))

    async def f_mrtr_sampling(self, call: Call):
        answer = call.answer("capital_question")
        if answer is None:
            return NeedInput({"capital_question": sample("What is the capital of France?", 100)})
        return tool_result(text(f"Sampling result: {sampled_text(answer) or '(no text)'}"))

    async def f_mrtr_roots(self, call: Call):
        answer = call.answer("client_roots")
        if answer is None or not isinstance(answer.get("roots"), list):
            return NeedInput({"client_roots": list_roots()})
        uris = [r.get("uri") for r in answer["roots"] if isinstance(r, dict)]
        return tool_result(text(f"The client has {len(uris)} root(s): {', '.join(map(str, uris))}"))

    async def f_mrtr_state(self, call: Call):
        state = call.state_json()
        content = call.accepted("confirm")
        if state.get("step") == "confirm" and content is not None and content.get("ok") is True:
            return tool_result(text("state-ok: the requestState came back as issued"))
        ask = {"confirm": elicit("Please confirm", {"ok": {"type": "boolean"}}, ["ok"])}
        return NeedInput(ask, new_state(step="confirm"))

    async def f_mrtr_multiple(self, call: Call):
        state = call.state_json()
        person, greeting, roots = call.accepted("user_name"), call.answer("greeting"), call.answer("client_roots")
        if state.get("step") == "all" and person is not None and greeting is not None and roots is not None:
            count = len(roots.get("roots") or [])
            summary = f"Name: {person.get('name')}; Greeting: {sampled_text(greeting)}; Roots: {count}"
            return tool_result(text(summary))
        return NeedInput(
            {
                "user_name": elicit("What is your name?", {"name": {"type": "string"}}, ["name"]),
                "greeting": sample("Generate a greeting", 50),
                "client_roots": list_roots(),
            },
            new_state(step="all"),
        )

    async def f_mrtr_multi_round(self, call: Call):
        state = call.state_json()
        if state.get("round") == 1 and (first := call.accepted("step1")) is not None:
            name = str(first.get("name", "friend"))
            ask = {"step2": elicit("Step 2: What is your favorite color?", {"color": {"type": "string"}}, ["color"])}
            return NeedInput(ask, new_state(round=2, name=name))
        if state.get("round") == 2 and (second := call.accepted("step2")) is not None:
            return tool_result(text(f"Multi-round complete: {state.get('name')} likes {second.get('color')}"))
        ask = {"step1": elicit("Step 1: What is your name?", {"name": {"type": "string"}}, ["name"])}
        return NeedInput(ask, new_state(round=1))

    async def f_mrtr_tamper(self, call: Call):
        # The SDK seals requestState (AES-GCM, bound to this tool and its
        # arguments): an altered state is refused with -32602 before this runs.
        if call.state_json().get("step") == "confirm" and call.accepted("confirm") is not None:
            return tool_result(text("integrity-ok: the requestState verified"))
        ask = {"confirm": elicit("Please confirm", {"ok": {"type": "boolean"}}, ["ok"])}
        return NeedInput(ask, new_state(step="confirm"))

    async def f_mrtr_capabilities(self, call: Call):
        wanted = {
            "elicit_input": elicit("Type a value", {"value": {"type": "string"}}, ["value"]),
            "sample_input": sample("Say something", 50),
            "roots_input": list_roots(),
        }
        possible = {k: r for k, r in wanted.items() if CAPABILITY_FOR[r["method"]] in call.capabilities}
        if not possible:
            return tool_result(text("The client declared none of elicitation, sampling or roots."))
        if any(k in call.responses for k in possible):
            return tool_result(text(f"capabilities-ok: received {', '.join(sorted(k for k in possible if k in call.responses))}"))
        return NeedInput(possible, new_state(step="capabilities"))

    def flow(self, flow: Flow):
        """Adapt a multi-round handler to a tool: per era, see `run_flow`."""

        async def run(ctx: ServerRequestContext[Any, Any], call: Call):
            return await flow(call)

        return run

    # -- request handlers -------------------------------------------------

    async def on_list_tools(self, ctx, params):
        tools = []
        for name in self.listed_tools():
            spec = self.tools[name]
            tools.append({"name": name, "description": spec.description, "inputSchema": spec.input_schema})
        return {"tools": tools}

    async def on_call_tool(self, ctx, params):
        spec = self.tools.get(params.name)
        if spec is None or params.name not in self.listed_tools():
            raise MCPError(INVALID_PARAMS, f"Unknown tool: {params.name}", {"name": params.name})
        arguments = params.arguments or {}

        async def step(call: Call):
            return await spec.run(ctx, call)

        return await self.run_flow(ctx, params.name, arguments, step)

    async def run_flow(self, ctx, name: str, arguments: dict[str, Any], step) -> dict[str, Any]:
        """Run a handler to completion, the way the connection's era allows.

        2026-07-28: one round per request; a `NeedInput` becomes an
        input-required result (the SDK seals its requestState on the way out
        and verifies it on the way back in).
        2025-11-25: the rounds are played here, each request sent to the
        client over this call's stream, until the handler completes.
        """
        raw = ctx.params or {}
        responses = raw.get("inputResponses")
        call = Call(
            name=name,
            arguments=arguments,
            responses=responses if isinstance(responses, dict) else {},
            state=raw.get("requestState") if isinstance(raw.get("requestState"), str) else None,
            capabilities=self.capabilities(ctx),
            modern=self.modern(ctx),
        )
        for _ in range(10):
            outcome = await step(call)
            if not isinstance(outcome, NeedInput):
                return outcome
            missing = sorted({CAPABILITY_FOR[r["method"]] for r in outcome.requests.values()} - set(call.capabilities))
            if missing:
                if call.modern:
                    raise missing_capability(*missing)
                return tool_result(text(f"The client did not declare the {', '.join(missing)} capability."), is_error=True)
            refused = [
                call.responses[k].get("action")
                for k in outcome.requests
                if isinstance(call.responses.get(k), dict) and call.responses[k].get("action") in ("decline", "cancel")
            ]
            if refused and not call.modern:
                # Asking the same person again right away would loop: stop here.
                return tool_result(text(f"The user chose to {refused[0]}; nothing was done."), is_error=True)
            if call.modern:
                result: dict[str, Any] = {"resultType": "input_required", "inputRequests": outcome.requests}
                if outcome.state is not None:
                    result["requestState"] = outcome.state
                return result
            try:
                answers = {key: await self.ask_client(ctx, request) for key, request in outcome.requests.items()}
            except MCPError as exc:
                return tool_result(text(f"The client refused {exc.error.message}"), is_error=True)
            call = Call(name, arguments, answers, outcome.state, call.capabilities, False)
        return tool_result(text("Gave up after ten rounds of input."), is_error=True)

    async def ask_client(self, ctx, request: dict[str, Any]) -> dict[str, Any]:
        """Send one server-to-client request on this call's stream (2025-11-25)."""
        kinds = {
            "elicitation/create": (types.ElicitRequest, types.ElicitResult),
            "sampling/createMessage": (types.CreateMessageRequest, types.CreateMessageResult),
            "roots/list": (types.ListRootsRequest, types.ListRootsResult),
        }
        request_type, result_type = kinds[request["method"]]
        typed = request_type.model_validate(request, by_name=False)
        result = await ctx.session.send_request(
            typed, result_type, metadata=ServerMessageMetadata(related_request_id=ctx.request_id)
        )
        return result.model_dump(by_alias=True, mode="json", exclude_none=True)

    # Resources.

    RESOURCES = {
        "test://static-text": ("static-text", "Static Text Resource", "A static text resource", "text/plain"),
        "test://static-binary": ("static-binary", "Static Binary Resource", "A static PNG image", "image/png"),
        "test://watched-resource": (
            "watched-resource",
            "Watched Resource",
            "Changes when test_update_watched_resource runs; subscribe to hear about it",
            "text/plain",
        ),
    }
    TEMPLATE = re.compile(r"^test://template/([^/]+)/data$")

    async def on_list_resources(self, ctx, params):
        resources = [
            {"uri": uri, "name": name, "title": title, "description": desc, "mimeType": mime}
            for uri, (name, title, desc, mime) in self.RESOURCES.items()
        ]
        return {"resources": resources}

    async def on_list_resource_templates(self, ctx, params):
        template = {
            "uriTemplate": "test://template/{id}/data",
            "name": "template",
            "title": "Resource Template",
            "description": "JSON data for any id",
            "mimeType": "application/json",
        }
        return {"resourceTemplates": [template]}

    async def on_read_resource(self, ctx, params):
        uri = str(params.uri)
        if uri == "test://static-text":
            contents = {"uri": uri, "mimeType": "text/plain", "text": "This is the content of the static text resource."}
        elif uri == "test://static-binary":
            contents = {"uri": uri, "mimeType": "image/png", "blob": PNG_B64}
        elif uri == "test://watched-resource":
            contents = {"uri": uri, "mimeType": "text/plain", "text": f"Watched resource, version {self.watched_version}"}
            # It changes on demand, so nobody should keep it.
            return {"contents": [contents], "ttlMs": 0, "cacheScope": "private"}
        elif match := self.TEMPLATE.match(uri):
            ident = match.group(1)
            body = json.dumps({"id": ident, "templateTest": True, "data": f"Data for ID: {ident}"}, separators=(",", ":"))
            contents = {"uri": uri, "mimeType": "application/json", "text": body}
        else:
            # SEP-2164: -32602 with the uri in data, never an empty contents list.
            raise MCPError(INVALID_PARAMS, "Resource not found", {"uri": uri})
        return {"contents": [contents]}

    async def on_subscribe(self, ctx, params):
        # The session proxy keeps the connection's standalone stream, which
        # is where resources/updated goes.
        self.subscribers.setdefault(str(params.uri), []).append((self.connection_key(ctx), ctx.session))
        return {}

    async def on_unsubscribe(self, ctx, params):
        key = self.connection_key(ctx)
        uri = str(params.uri)
        self.subscribers[uri] = [entry for entry in self.subscribers.get(uri, []) if entry[0] != key]
        return {}

    # Prompts.

    def prompt_specs(self) -> list[dict[str, Any]]:
        def arg(name: str, description: str) -> dict[str, Any]:
            return {"name": name, "description": description, "required": True}

        prompts = [
            {"name": "test_simple_prompt", "title": "Simple Prompt", "description": "A prompt without arguments"},
            {
                "name": "test_prompt_with_arguments",
                "title": "Prompt With Arguments",
                "description": "A prompt with two required arguments",
                "arguments": [arg("arg1", "First argument"), arg("arg2", "Second argument")],
            },
            {
                "name": "test_prompt_with_embedded_resource",
                "title": "Prompt With Embedded Resource",
                "description": "A prompt that embeds a resource",
                "arguments": [arg("resourceUri", "URI of the resource to embed")],
            },
            {"name": "test_prompt_with_image", "title": "Prompt With Image", "description": "A prompt with an image"},
            {
                "name": "test_input_required_result_prompt",
                "title": "Prompt Needing Input",
                "description": "Asks the user for context before it can be built",
            },
        ]
        if self.dynamic_prompt:
            prompts.append({"name": "test_dynamic_prompt", "description": "Listed after test_trigger_prompt_change"})
        return prompts

    async def on_list_prompts(self, ctx, params):
        return {"prompts": self.prompt_specs()}

    async def on_get_prompt(self, ctx, params):
        name, arguments = params.name, params.arguments or {}
        if name not in {p["name"] for p in self.prompt_specs()}:
            raise MCPError(INVALID_PARAMS, f"Unknown prompt: {name}", {"name": name})
        for spec in self.prompt_specs():
            for needed in spec.get("arguments", []) if spec["name"] == name else []:
                if needed["name"] not in arguments:
                    raise MCPError(INVALID_PARAMS, f"Missing argument: {needed['name']}")

        def user(content: dict[str, Any]) -> dict[str, Any]:
            return {"role": "user", "content": content}

        if name == "test_simple_prompt":
            return {"messages": [user(text("This is a simple prompt for testing."))]}
        if name == "test_prompt_with_arguments":
            return {"messages": [user(text(f"Prompt with arguments: arg1='{arguments['arg1']}', arg2='{arguments['arg2']}'"))]}
        if name == "test_prompt_with_embedded_resource":
            resource = {"uri": arguments["resourceUri"], "mimeType": "text/plain", "text": "Embedded resource content for testing."}
            return {
                "messages": [
                    user({"type": "resource", "resource": resource}),
                    user(text("Please process the embedded resource above.")),
                ]
            }
        if name == "test_prompt_with_image":
            return {
                "messages": [
                    user({"type": "image", "data": PNG_B64, "mimeType": "image/png"}),
                    user(text("Please analyze the image above.")),
                ]
            }
        if name == "test_dynamic_prompt":
            return {"messages": [user(text("The dynamic prompt."))]}

        # test_input_required_result_prompt: needs the user's context first.
        async def step(call: Call):
            content = call.accepted("user_context")
            if content is None or not isinstance(content.get("context"), str):
                ask = elicit("What context should the prompt use?", {"context": {"type": "string"}}, ["context"])
                return NeedInput({"user_context": ask})
            return {"messages": [user(text(f"Use this context: {content['context']}"))]}

        result = await self.run_flow(ctx, name, dict(arguments), step)
        if result.get("isError"):  # only tools carry isError: a prompt fails with a JSON-RPC error
            raise MCPError(INVALID_PARAMS, result["content"][0]["text"])
        return result

    # Completion and logging.

    COMPLETIONS = {
        "arg1": ["test", "testing", "tested", "hello", "help"],
        "arg2": ["world", "word", "work"],
        "resourceUri": ["test://static-text", "test://static-binary", "test://watched-resource"],
        "id": ["1", "2", "3", "42", "123"],
    }

    async def on_completion(self, ctx, params):
        prefix = params.argument.value or ""
        values = [v for v in self.COMPLETIONS.get(params.argument.name, []) if v.startswith(prefix)]
        return {"completion": {"values": values, "total": len(values), "hasMore": False}}

    async def on_set_level(self, ctx, params):
        self.log_levels[self.connection_key(ctx)] = params.level
        return {}


def missing_capability(*names: str) -> MCPError:
    """MissingRequiredClientCapabilityError (-32021), HTTP 400 on 2026-07-28."""
    required = {name: {} for name in names}
    return MCPError(
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        f"This request needs the client capability: {', '.join(names)}",
        {"requiredCapabilities": required},
    )


def describe_elicitation(prefix: str, answer: dict[str, Any]) -> str:
    return f"{prefix}: action={answer.get('action')}, content={json.dumps(answer.get('content') or {})}"


def completed(handler):
    """On 2026-07-28 every result names its type: mark plain results complete.

    (The SDK checks a handler's result against the revision's schema before
    it would stamp `resultType` itself, so a plain dict must carry it.)
    """

    async def wrapped(ctx, params):
        result = await handler(ctx, params)
        if isinstance(result, dict) and Peer.modern(ctx) and "resultType" not in result:
            result = {**result, "resultType": "complete"}
        return result

    return wrapped


def build_server(discover_as_reference: bool = False) -> tuple[PeerServer, Peer]:
    peer = Peer()
    public = CacheHint(ttl_ms=60_000, scope="public")
    server = PeerServer(
        SERVER_NAME,
        version=SERVER_VERSION,
        title="code-mode conformance peer",
        # SEP-2549: lists may be shared for a minute; reads are per caller.
        cache_hints={
            "tools/list": public,
            "prompts/list": public,
            "resources/list": public,
            "resources/templates/list": public,
            "resources/read": CacheHint(ttl_ms=10_000, scope="private"),
        },
        get_tool_input_schema=lambda name: peer.tools[name].input_schema if name in peer.tools else None,
        on_list_tools=completed(peer.on_list_tools),
        on_call_tool=completed(peer.on_call_tool),
        on_list_resources=completed(peer.on_list_resources),
        on_list_resource_templates=completed(peer.on_list_resource_templates),
        on_read_resource=completed(peer.on_read_resource),
        on_subscribe_resource=peer.on_subscribe,
        on_unsubscribe_resource=peer.on_unsubscribe,
        on_subscriptions_listen=ListenHandler(peer.bus),
        on_list_prompts=completed(peer.on_list_prompts),
        on_get_prompt=completed(peer.on_get_prompt),
        on_completion=completed(peer.on_completion),
        on_set_logging_level=peer.on_set_level,
    )
    # Seal and verify requestState (SEP-2322) under a key of this process.
    server.middleware.append(RequestStateBoundary(RequestStateSecurity.ephemeral(), default_audience=SERVER_NAME))
    if discover_as_reference:
        server.add_request_handler("server/discover", types.RequestParams, discover_without_session_features(server))
    return server, peer


def discover_without_session_features(server: PeerServer):
    """A `server/discover` handler that answers as the conformance suite's
    reference server (everything-server.ts) does: `resources` without
    `subscribe`, and neither `logging` nor `completions`, which that server
    offers on its initialize handshake (2025-11-25) alone. The handshake
    still offers them all, and every request is still served on both paths:
    only what the 2026-07-28 path declares differs."""

    async def discover(ctx: ServerRequestContext[Any, Any], params: types.RequestParams) -> types.DiscoverResult:
        caps = server.get_capabilities(protocol_version=ctx.protocol_version)
        caps = caps.model_copy(update={"resources": types.ResourcesCapability(), "logging": None, "completions": None})
        return types.DiscoverResult(
            supported_versions=list(MODERN_PROTOCOL_VERSIONS), capabilities=caps, instructions=server.instructions
        )

    return discover


# ---------------------------------------------------------------------------
# HTTP: DNS-rebinding guard in front of the SDK's streamable HTTP app.
# ---------------------------------------------------------------------------

LOCAL_NAMES = {"localhost", "127.0.0.1", "[::1]", "::1"}


def _hostname(value: str) -> str:
    """The host part of a Host header value or of an origin's authority."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[: value.find("]") + 1] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class LocalOnly:
    """ASGI guard: 403 unless Host (and Origin, when sent) name this machine.

    A web page on another origin could otherwise reach this server through
    DNS rebinding. Extra names (e.g. a container's) can be allowed.
    """

    def __init__(self, app: Any, extra_hosts: set[str]) -> None:
        self.app = app
        self.allowed = LOCAL_NAMES | {h.lower() for h in extra_hosts}

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
            host = headers.get("host", "")
            origin = headers.get("origin")
            origin_ok = origin is None or _hostname(re.sub(r"^[a-z][a-z0-9+.-]*://", "", origin.lower()).split("/")[0]) in self.allowed
            if _hostname(host) not in self.allowed or not origin_ok:
                body = json.dumps(
                    {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Forbidden: Host or Origin is not this machine"}}
                ).encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": 403,
                        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def serve_http(port: int, host: str, extra_hosts: set[str], discover_as_reference: bool) -> None:
    import uvicorn

    server, _ = build_server(discover_as_reference)
    app = server.streamable_http_app(
        streamable_http_path="/mcp",
        event_store=MemoryEventStore(),  # resumable streams (SEP-1699)
        retry_interval=1000,
        # Host/Origin are checked by LocalOnly (403); the SDK's own check would answer 421.
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        host=host,
    )
    log.info("MCP endpoint: http://%s:%d/mcp", host, port)
    uvicorn.run(LocalOnly(app, extra_hosts), host=host, port=port, log_level="warning", access_log=False)


def serve_stdio(discover_as_reference: bool) -> None:
    from mcp.server.stdio import stdio_server

    server, _ = build_server(discover_as_reference)

    async def main() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(main)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--stdio", action="store_true", help="serve MCP on stdin/stdout")
    mode.add_argument("--port", type=int, help="serve streamable HTTP on this port at /mcp")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument(
        "--allow-host", action="append", default=[], help="another Host/Origin name to accept (repeatable)"
    )
    parser.add_argument("--log-level", default="WARNING", help="stderr log level (default WARNING)")
    parser.add_argument(
        "--discover-as-reference",
        action="store_true",
        help="server/discover declares resources without subscribe, and no logging or completions (the handshake declares them)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=args.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if args.stdio:
        serve_stdio(args.discover_as_reference)
    else:
        serve_http(args.port, args.host, set(args.allow_host), args.discover_as_reference)


if __name__ == "__main__":
    main()
