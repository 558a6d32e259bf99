"""Run one cell of model-written Python inside the sandbox container.

This file is the container's entrypoint (``python3 -I /opt/code-mode/runner.py``).
It speaks the protocol of ``docs/sandbox-protocol.md`` with the host over the
container's stdin and stdout, one JSON object per line:

1. It moves the protocol streams out of the way: descriptors 0 and 1 are
   duplicated onto private, non-inheritable descriptors, and 0, 1 and 2 are
   pointed at ``/dev/null``. Nothing the code or its subprocesses write to a
   descriptor can reach the host; only what goes through ``sys.stdout`` and
   ``sys.stderr`` is captured and sent, as ``output`` messages.
2. It sends ``ready``, reads the ``cell`` message, and builds fresh globals
   for the code: one async function per tool, ``TOOLS``, ``search_tools`` and
   ``ToolError``.
3. It runs the code (top-level ``await`` allowed). Each awaited tool function
   sends a ``call`` line and waits for the matching ``result`` line, which a
   reader thread picks up from the host.
4. It sends ``done`` (with the end of the traceback if the code raised) and
   exits at once, so that no stray thread can keep the container alive.

The code runs in this same process and could tamper with anything here; that
is accepted. The host treats every line from the container as untrusted, so
this runner only has to be correct for code that does not try to subvert it.

Only the standard library is used.
"""

import ast
import asyncio
import builtins
import inspect
import io
import itertools
import json
import linecache
import os
import re
import sys
import threading
import traceback
import types

# Used when the cell message leaves a limit out.
DEFAULT_MAX_OUTPUT = 8192
DEFAULT_STOP_OUTPUT = 1024 * 1024
DEFAULT_MAX_LINE = 256 * 1024

# The file name the cell is compiled under; only its frames are reported.
CELL_FILENAME = "<cell>"

# How much of a traceback the host gets (the end is kept).
ERROR_MAX_LINES = 20
ERROR_MAX_CHARS = 2000


class ToolError(Exception):
    """A tool call was refused locally, refused by the host, or failed."""


# The code sees the class as plain `ToolError` in tracebacks.
ToolError.__module__ = "__main__"


# --------------------------------------------------------------------------
# The protocol channel
# --------------------------------------------------------------------------


class Channel:
    """The private descriptors to the host: whole lines out, lines in."""

    def __init__(self, in_fd, out_fd):
        self._in_fd = in_fd
        self._out_fd = out_fd
        self._in_buffer = b""
        self._write_lock = threading.Lock()

    def send(self, message):
        """Write one message as one line; never interleaved with another."""
        line = json.dumps(message, ensure_ascii=False).encode("utf-8") + b"\n"
        with self._write_lock:
            self._write_all(line)

    def send_last(self, message):
        """Write the final message and exit while still holding the lock.

        Holding the lock until the process is gone guarantees that nothing
        (another thread's output or call) follows ``done`` on the stream.
        """
        line = json.dumps(message, ensure_ascii=False).encode("utf-8") + b"\n"
        self._write_lock.acquire()
        try:
            self._write_all(line)
        finally:
            os._exit(0)

    def _write_all(self, data):
        view = memoryview(data)
        while view:
            try:
                written = os.write(self._out_fd, view)
            except OSError:
                # The host is gone: there is nobody left to report to.
                os._exit(1)
            view = view[written:]

    def read_line(self):
        """Return the next line (without its newline), or None at EOF."""
        while b"\n" not in self._in_buffer:
            try:
                chunk = os.read(self._in_fd, 65536)
            except InterruptedError:
                continue
            if not chunk:
                return None
            self._in_buffer += chunk
        line, _, self._in_buffer = self._in_buffer.partition(b"\n")
        return line


# --------------------------------------------------------------------------
# Captured output
# --------------------------------------------------------------------------


class OutputCapture:
    """Counts everything the code prints and forwards what the host keeps.

    The first ``max_output`` bytes (UTF-8, never cut inside a character) are
    sent as ``output`` messages; the rest is only counted. Once the count
    reaches ``stop_output`` the run ends at once with ``stopped: true``.
    """

    def __init__(self, channel, max_output, stop_output, max_line):
        self._channel = channel
        self._max_output = max_output
        self._stop_output = stop_output
        # Largest piece of output per message: even if every byte became a
        # six-character JSON escape the line stays under the line limit.
        self._chunk = max(1, (max_line - 64) // 6)
        self._lock = threading.Lock()
        self.total = 0

    @property
    def truncated(self):
        return self.total > self._max_output

    def write(self, text):
        if text.isascii():
            # The common case, without encoding a huge string just to count.
            size = len(text)
            head = text[:max(0, self._max_output)].encode("ascii")
        else:
            head = text.encode("utf-8", "backslashreplace")
            size = len(head)
        with self._lock:
            room = self._max_output - self.total
            self.total += size
            if room > 0:
                self._forward(head[:room])
            if self.total >= self._stop_output:
                self._channel.send_last({
                    "type": "done",
                    "error": "stopped: the code printed "
                             f"{_size(self._stop_output)} or more",
                    "truncated": True,
                    "stopped": True,
                })

    def _forward(self, data):
        # Dropping the bytes of a character cut at the end is the only
        # decoding loss possible: `data` was encoded from text just above.
        text = data.decode("utf-8", "ignore")
        for start in range(0, len(text), self._chunk):
            piece = text[start:start + self._chunk]
            self._channel.send({"type": "output", "data": piece})


class CapturedStream(io.TextIOBase):
    """What ``sys.stdout`` and ``sys.stderr`` become for the code."""

    encoding = "utf-8"
    errors = "backslashreplace"

    def __init__(self, capture, name):
        super().__init__()
        self._capture = capture
        self.name = name

    def writable(self):
        return True

    def write(self, text):
        if not isinstance(text, str):
            raise TypeError(
                f"write() argument must be str, not {type(text).__name__}")
        if self.closed:
            raise ValueError("I/O operation on closed file.")
        if text:
            self._capture.write(text)
        return len(text)


def _size(count):
    """A byte count for people: "1 MiB", "64 KiB" or "1000 bytes"."""
    for unit, scale in (("MiB", 1024 * 1024), ("KiB", 1024)):
        if count >= scale and count % scale == 0:
            return f"{count // scale} {unit}"
    return f"{count} bytes"


# --------------------------------------------------------------------------
# Tool calls
# --------------------------------------------------------------------------


class ToolCaller:
    """Sends ``call`` messages and settles them when ``result`` lines arrive.

    Calls are awaited on whatever event loop the code is running; a reader
    thread reads the host's lines and hands each result back to the loop of
    its call with ``call_soon_threadsafe``.
    """

    def __init__(self, channel, max_line):
        self._channel = channel
        self._max_line = max_line
        self._ids = itertools.count(1)
        self._pending = {}  # call id -> future
        self._lock = threading.Lock()
        self._closed = False  # the host closed its side

    def start_reader(self):
        thread = threading.Thread(
            target=self._read_results, name="code-mode-reader", daemon=True)
        thread.start()

    def make_tool(self, name, stub):
        """The async function the code calls for one tool."""
        caller = self

        async def tool(params=None, /, **kwargs):
            return await caller.call(name, params, kwargs)

        tool.__name__ = tool.__qualname__ = name
        tool.__doc__ = stub
        return tool

    async def call(self, name, params, kwargs):
        if params is None:
            params = {}
        if not isinstance(params, dict):
            raise ToolError(f"{name}: arguments must be a dict, "
                            f"got {type(params).__name__}")
        arguments = dict(params)
        arguments.update(kwargs)
        try:
            encoded = json.dumps(arguments, ensure_ascii=False,
                                 allow_nan=False)
            encoded.encode("utf-8")
        except (TypeError, ValueError, RecursionError) as exc:
            # TypeError: an object JSON cannot hold; ValueError: NaN,
            # infinities, a cycle, or a lone surrogate (UnicodeEncodeError).
            raise ToolError(
                f"{name}: arguments are not JSON-serialisable: {exc}") from None

        loop = asyncio.get_running_loop()
        future = loop.create_future()
        with self._lock:
            if self._closed:
                raise ToolError("the host closed the channel")
            call_id = next(self._ids)
            message = {"type": "call", "id": call_id, "tool": name,
                       "arguments": arguments}
            line = json.dumps(message, ensure_ascii=False, allow_nan=False)
            # +1 for the newline ending the line.
            if len(line.encode("utf-8")) + 1 > self._max_line:
                raise ToolError(
                    f"{name}: arguments are too large "
                    f"(the call must fit in {_size(self._max_line)})")
            # Registered before sending so that a quick result is not missed.
            self._pending[call_id] = future
        try:
            self._channel.send(message)
            return await future
        finally:
            with self._lock:
                self._pending.pop(call_id, None)

    def _read_results(self):
        while True:
            line = self._channel.read_line()
            if line is None:
                break
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if not isinstance(message, dict) or message.get("type") != "result":
                continue
            with self._lock:
                future = self._pending.pop(message.get("id"), None)
            if future is None:
                continue  # unknown id, or a call the code stopped awaiting
            if message.get("ok") is True:
                outcome = (True, message.get("value"))
            else:
                outcome = (False, ToolError(message.get("error")))
            self._settle_threadsafe(future, outcome)

        # The host closed its side: every call still waiting fails.
        with self._lock:
            self._closed = True
            waiting = list(self._pending.values())
            self._pending.clear()
        for future in waiting:
            self._settle_threadsafe(
                future, (False, ToolError("the host closed the channel")))

    @staticmethod
    def _settle_threadsafe(future, outcome):
        try:
            future.get_loop().call_soon_threadsafe(_settle, future, outcome)
        except RuntimeError:
            pass  # that loop is closed: nobody is waiting any more


def _settle(future, outcome):
    if future.done():  # cancelled by the code meanwhile
        return
    ok, value = outcome
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


# --------------------------------------------------------------------------
# The code's globals
# --------------------------------------------------------------------------


def make_search_tools(catalog):
    """``search_tools(query, limit=10)`` over ``catalog`` (name -> stub)."""
    entries = [(name, name.lower(), stub.lower())
               for name, stub in catalog.items()]

    def search_tools(query, limit=10):
        """The names of the tools matching a query, best first.

        Each word of the query (letters and digits) found in a tool's name
        scores 2, found in its stub scores 1; tools scoring 0 are left out
        and ties keep catalog order.
        """
        if not isinstance(query, str):
            raise TypeError(f"search_tools: query must be a str, "
                            f"got {type(query).__name__}")
        words = re.findall(r"[^\W_]+", query.lower())
        scored = []
        for position, (name, name_lower, stub_lower) in enumerate(entries):
            score = 0
            for word in words:
                if word in name_lower:
                    score += 2
                if word in stub_lower:
                    score += 1
            if score > 0:
                scored.append((-score, position, name))
        scored.sort()
        if limit is not None:
            scored = scored[:max(0, limit)]
        return [name for _, _, name in scored]

    return search_tools


def make_globals(tools, caller):
    """A fresh module namespace holding only what the code is promised."""
    module = types.ModuleType("__main__")
    namespace = module.__dict__
    namespace["__builtins__"] = builtins
    catalog = {}
    for tool in tools:
        name, stub = tool["name"], tool.get("stub", "")
        catalog[name] = stub
        namespace[name] = caller.make_tool(name, stub)
    # The documented helpers win over a tool of the same name.
    namespace["TOOLS"] = dict(catalog)
    namespace["search_tools"] = make_search_tools(catalog)
    namespace["ToolError"] = ToolError
    return module


# --------------------------------------------------------------------------
# Running the cell
# --------------------------------------------------------------------------


def run_cell(code, namespace):
    """Run the code; return None, or the error text for ``done``."""
    # Let tracebacks show the cell's source lines.
    linecache.cache[CELL_FILENAME] = (
        len(code), None, code.splitlines(True), CELL_FILENAME)
    try:
        compiled = compile(code, CELL_FILENAME, "exec",
                           flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT,
                           dont_inherit=True)
        if compiled.co_flags & inspect.CO_COROUTINE:
            # Top-level await: the cell runs in a fresh event loop.
            asyncio.run(eval(compiled, namespace))
        else:
            # No top-level await: run it as a plain module, so that the code
            # may start its own loop with `asyncio.run(...)`.
            exec(compiled, namespace)
    except SystemExit as exc:
        if exc.code is None or exc.code == 0:
            return None
        return f"SystemExit: {exc.code}"
    except BaseException as exc:  # KeyboardInterrupt and all: report them
        return format_error(exc)
    return None


def format_error(exc):
    """The end of the traceback, with the frames of the cell only."""
    try:
        report = traceback.TracebackException.from_exception(exc)
        _keep_cell_frames(report, set())
        text = "".join(report.format()).rstrip("\n")
    except Exception:  # formatting must never fail the run report
        text = f"{type(exc).__name__}: <the error could not be formatted>"
    lines = text.splitlines()[-ERROR_MAX_LINES:]
    text = "\n".join(lines)
    if len(text) > ERROR_MAX_CHARS:
        text = "..." + text[-(ERROR_MAX_CHARS - 3):]
    return text


def _keep_cell_frames(report, seen):
    """Drop the runner's (and library) frames, in chained exceptions too."""
    if report is None or id(report) in seen:
        return
    seen.add(id(report))
    report.stack = traceback.StackSummary.from_list(
        [frame for frame in report.stack if frame.filename == CELL_FILENAME])
    _keep_cell_frames(report.__cause__, seen)
    _keep_cell_frames(report.__context__, seen)
    for member in getattr(report, "exceptions", None) or ():
        _keep_cell_frames(member, seen)


# --------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------


def take_protocol_descriptors():
    """Move the protocol off 0 and 1; point 0, 1 and 2 at /dev/null."""
    in_fd = os.dup(0)  # os.dup makes non-inheritable descriptors
    out_fd = os.dup(1)
    null_fd = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null_fd, fd)  # inheritable: subprocesses get /dev/null
    os.close(null_fd)
    return Channel(in_fd, out_fd)


def main():
    channel = take_protocol_descriptors()
    channel.send({"type": "ready"})

    line = channel.read_line()
    if line is None:
        os._exit(0)  # the host went away before sending the cell
    try:
        cell = json.loads(line)
        code = cell["code"]
        tools = cell.get("tools") or []
        limits = cell.get("limits") or {}
        max_output = int(limits.get("max_output", DEFAULT_MAX_OUTPUT))
        stop_output = int(limits.get("stop_output", DEFAULT_STOP_OUTPUT))
        max_line = int(limits.get("max_line", DEFAULT_MAX_LINE))
    except (ValueError, TypeError, KeyError) as exc:
        channel.send_last({"type": "done",
                           "error": f"runner: bad cell message: {exc!r}",
                           "truncated": False, "stopped": False})

    capture = OutputCapture(channel, max_output, stop_output, max_line)
    sys.stdout = sys.__stdout__ = CapturedStream(capture, "<stdout>")
    sys.stderr = sys.__stderr__ = CapturedStream(capture, "<stderr>")

    caller = ToolCaller(channel, max_line)
    caller.start_reader()

    module = make_globals(tools, caller)
    # `import __main__` (pickle, for one) finds the code's namespace; the
    # runner's own module stays referenced by this frame.
    runner_module, sys.modules["__main__"] = sys.modules["__main__"], module
    error = run_cell(code, module.__dict__)

    # Captured output is sent as it is written: nothing is left to flush.
    channel.send_last({"type": "done", "error": error,
                       "truncated": capture.truncated, "stopped": False})


if __name__ == "__main__":
    main()
