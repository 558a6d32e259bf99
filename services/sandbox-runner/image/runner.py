"""Run one cell of model-written Python inside the sandbox container.

This file is the container's entrypoint (``python3 -I /opt/code-mode/runner.py``).
It speaks the protocol of ``docs/sandbox-protocol.md`` with the host over the
container's stdin and stdout, one JSON object per line:

1. It moves the protocol streams out of the way: descriptors 0 and 1 are
   duplicated onto private, non-inheritable descriptors, and 0, 1 and 2 are
   pointed at ``/dev/null``. Nothing the code or its subprocesses write to a
   descriptor can reach the host; only what goes through ``sys.stdout`` and
   ``sys.stderr`` is captured and sent, as ``output`` messages.
2. Before ``ready`` it does what needs no cell: it starts the reader thread
   (parked until the cell is read), makes the event loop a top-level
   ``await`` will run on, and warms up the compiler, the JSON codec and
   asyncio. The container then waits in the warm pool with this done, so a
   cell does not pay for it. None of it holds data of any cell: each fresh
   container runs one cell only.
3. It sends ``ready``, reads the ``cell`` message, and builds fresh globals
   for the code: one async function per tool, ``TOOLS``, ``search_tools``,
   ``ToolError`` and ``PACKAGES``.
4. It runs the code (top-level ``await`` allowed). Each awaited tool function
   sends a ``call`` line and waits for the matching ``result`` line, which a
   reader thread picks up from the host.
5. It sends ``done`` (with the end of the traceback if the code raised) and
   exits at once, so that no stray thread can keep the container alive.

A cell message with ``"keep": true`` starts the kept mode of a session whose
variables persist: the runner sends ``done`` without exiting and waits for
the session's next ``cell``, running each in the same namespace with its own
limits. Output and calls are tied to the cell whose code made them (a
context variable, carried into the threads and executor jobs the code
starts): what code left running by an earlier cell prints is dropped, and a
call it makes is refused without being sent, as is everything between
cells. The host enforces the same between cells on its side.

The container ends by itself when the host is gone, and at the latest at
a bound nobody has to tell it (see "Lifetime" in ``docs/sandbox.md``): the
end of its input (the host's attach stream closed, as when the sandbox-runner
dies) makes the runner exit at once, in the warm wait, during a cell and
between kept cells; and a timer outside the interpreter's lock
(``faulthandler``'s watchdog thread, which needs no GIL, so code stuck in C
cannot hold it off) exits the process at the backstop: ``--unclaimed
SECONDS`` (an argument at start) while it waits for its cell, then the
``backstop`` of the cell message (the run's deadline plus a margin; in kept
mode also the wait for the next cell and the session's longest life). The
runner is the container's init, so its exit ends every process of the code.

The code runs in this same process and could tamper with anything here; that
is accepted. The host treats every line from the container as untrusted, so
this runner only has to be correct for code that does not try to subvert it.

Only the standard library is used. An image built with packages
(``code-mode build-image --requirements``) holds them under
``/opt/code-mode/packages``, which is put at the end of ``sys.path`` (so
the standard library wins over a package's module of the same name), and
names them in ``/opt/code-mode/packages.json``. Nothing of them is imported
before the code imports it: a warm container costs the same with packages.
"""

import ast
import asyncio
import base64
import builtins
import concurrent.futures
import contextvars
import faulthandler
import inspect
import io
import itertools
import json
import linecache
import math
import os
import queue
import re
import sys
import threading
import time
import traceback
import types

# Used when the cell message leaves a limit out.
DEFAULT_MAX_OUTPUT = 8192
DEFAULT_STOP_OUTPUT = 1024 * 1024
DEFAULT_MAX_LINE = 256 * 1024

# How long a container may wait for its cell when no ``--unclaimed`` is
# given, and a run's bound when its cell message names none (seconds).
DEFAULT_UNCLAIMED = 600.0
DEFAULT_RUN_BACKSTOP = 3600.0

# The file name the cell is compiled under; only its frames are reported.
# Kept cells are compiled as "<cell N>", so a function defined in one cell
# still shows its own source when a later cell calls it.
CELL_FILENAME = "<cell>"
KEPT_FILENAME = re.compile(r"<cell \d+>")

# Sources of kept cells kept for tracebacks (the most recent ones).
KEPT_SOURCES = 64

# How much of a traceback the host gets (the end is kept).
ERROR_MAX_LINES = 20
ERROR_MAX_CHARS = 2000

# What one cell may hand back to the model with ``show``: blocks, and bytes
# of data in all (the host holds a cell to the same bounds).
MAX_HANDED_BACK = 8
MAX_HANDED_BACK_BYTES = 160 * 1024

# ``report_progress`` sends at most one line per this many seconds (the
# host's lease says the latest once a second).
PROGRESS_EVERY = 0.1


class ToolError(Exception):
    """A tool call was refused locally, refused by the host, or failed."""


# The code sees the class as plain `ToolError` in tracebacks.
ToolError.__module__ = "__main__"


class Block:
    """A block of a tool's result other than text (an image, audio, an
    embedded resource, a resource link), or one content of a resource read
    with ``read_resource``: its ``type``, ``mime_type``, and its ``data``
    (bytes) or ``text``, and ``uri`` where it has one. ``show(block)``
    hands it back to the model."""

    __slots__ = ("type", "mime_type", "data", "text", "uri", "name")

    def __init__(self, type, mime_type=None, data=None, text=None, uri=None, name=None):
        self.type = type
        self.mime_type = mime_type
        self.data = data
        self.text = text
        self.uri = uri
        self.name = name

    @classmethod
    def from_mcp(cls, block):
        """A block from its MCP JSON (an unknown shape keeps its type only)."""
        kind = block.get("type")
        if kind in ("image", "audio"):
            return cls(kind, block.get("mimeType"), _decoded(block.get("data")))
        if kind == "resource":
            return cls.from_contents(block.get("resource") or {}, "resource")
        if kind == "resource_link":
            return cls(kind, block.get("mimeType"), uri=block.get("uri"), name=block.get("name"))
        return cls(str(kind))

    @classmethod
    def from_contents(cls, contents, kind="resource"):
        """One content of a resource (text or blob)."""
        if "blob" in contents:
            return cls(kind, contents.get("mimeType"), data=_decoded(contents.get("blob")),
                       uri=contents.get("uri"))
        return cls(kind, contents.get("mimeType"), text=contents.get("text"), uri=contents.get("uri"))

    def __repr__(self):
        size = f", {len(self.data)} bytes" if self.data is not None else ""
        text = f", {len(self.text)} characters" if self.text is not None else ""
        uri = f", {self.uri}" if self.uri else ""
        return f"<{self.type} {self.mime_type or ''}{size}{text}{uri}>"


Block.__module__ = "__main__"


def _decoded(data):
    if not isinstance(data, str):
        return None
    try:
        return base64.b64decode(data, validate=True)
    except ValueError:
        return None


class Result(str):
    """A tool's result (or a resource's text) as the string it always was,
    with its other blocks, bytes and MIME type included, in ``blocks`` (each
    named in the string where it stood: ``[image image/png: .blocks[0]]``)."""

    blocks = ()

    @property
    def images(self):
        """The image blocks."""
        return [b for b in self.blocks if b.type == "image"]


Result.__module__ = "__main__"


def _result(value, blocks):
    result = Result(value)
    result.blocks = [Block.from_mcp(b) for b in blocks if isinstance(b, dict)]
    return result


def _resource(text):
    """What ``read_resource`` gives: the text of its text contents, each
    other content named in its place, and every content in ``blocks``."""
    try:
        read = json.loads(text)
    except ValueError:
        return Result(text)
    contents = read.get("contents") if isinstance(read, dict) else None
    if not isinstance(contents, list):
        return Result(text)
    blocks = [Block.from_contents(c) for c in contents if isinstance(c, dict)]
    parts = []
    for i, block in enumerate(blocks):
        if block.text is not None:
            parts.append(block.text)
        else:
            parts.append(f"[blob {block.mime_type or ''}: .blocks[{i}]]")
    result = Result("\n".join(parts))
    result.blocks = blocks
    return result


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
        self.send_line(json.dumps(message, ensure_ascii=False).encode("utf-8"))

    def send_line(self, line):
        """Write one encoded message (without its newline) as one line."""
        with self._write_lock:
            self._write_all(line + b"\n")

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
# How long the container may live
# --------------------------------------------------------------------------


def host_gone():
    """The host closed its side: nobody reads what the code does any more,
    so the container ends now (the runner is its init)."""
    os._exit(0)


class Backstop:
    """Ends the process at a moment nobody has to announce: the bound of
    the phase the runner is in (waiting for a cell, running one, waiting
    between kept cells), never later than the kept session's end.

    ``faulthandler.dump_traceback_later(..., exit=True)`` runs a native
    thread that waits without the GIL and calls ``_exit`` when the time is
    up: code spinning in C (``sum(range(10**12))``) cannot hold it off as
    it would a Python thread. Setting a new bound replaces the old one.
    The traceback it writes goes to descriptor 2, which is /dev/null."""

    def __init__(self):
        self._session_end = None  # time.monotonic() of a kept session's end

    def arm(self, seconds):
        """End the process ``seconds`` from now (or at the session's end)."""
        if self._session_end is not None:
            seconds = min(seconds, self._session_end - time.monotonic())
        try:
            faulthandler.dump_traceback_later(max(0.001, seconds), exit=True, file=2)
        except (RuntimeError, ValueError, OverflowError):
            # No thread could be started: a process without its backstop
            # must not run code.
            os._exit(3)

    def end_session_in(self, seconds):
        """A kept session lives at most ``seconds`` more."""
        end = time.monotonic() + seconds
        self._session_end = end if self._session_end is None else min(self._session_end, end)


def _seconds(value, default):
    """A positive, finite number of seconds, or ``default``."""
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return default
    return seconds if 0 < seconds < 1e9 else default


def unclaimed_from(argv):
    """``--unclaimed SECONDS`` of the runner's arguments."""
    for i, arg in enumerate(argv[:-1]):
        if arg == "--unclaimed":
            return _seconds(argv[i + 1], DEFAULT_UNCLAIMED)
    return DEFAULT_UNCLAIMED


BACKSTOP = Backstop()


# --------------------------------------------------------------------------
# Which cell runs
# --------------------------------------------------------------------------

# The number of the kept cell whose code is executing in this context; None
# outside any cell (the runner itself, threads the runner did not start).
CURRENT_CELL = contextvars.ContextVar("code_mode_cell", default=None)


class Gate:
    """Decides whether printed text and calls belong to the running cell.

    A fresh container runs one cell: everything belongs to it. A kept
    container runs one cell at a time; text and calls count only when they
    come from the context of the cell that runs now.
    """

    def __init__(self, kept):
        self.kept = kept
        self.running = None if kept else 0

    def admits(self):
        if not self.kept:
            return True
        return self.running is not None and CURRENT_CELL.get() == self.running


def carry_cell_into_threads():
    """Threads and executor jobs run in the context of the code that
    started or submitted them, so they count for that code's cell."""
    start = threading.Thread.start

    def start_in_context(self):
        context = contextvars.copy_context()
        run = self.run
        self.run = lambda: context.run(run)
        start(self)

    threading.Thread.start = start_in_context
    submit = concurrent.futures.ThreadPoolExecutor.submit

    def submit_in_context(self, fn, /, *args, **kwargs):
        return submit(self, contextvars.copy_context().run, fn, *args, **kwargs)

    concurrent.futures.ThreadPoolExecutor.submit = submit_in_context


# --------------------------------------------------------------------------
# Captured output
# --------------------------------------------------------------------------


class OutputCapture:
    """Counts everything the code prints and forwards what the host keeps.

    The first ``max_output`` bytes (UTF-8, never cut inside a character) are
    sent as ``output`` messages; the rest is only counted. Once the count
    reaches ``stop_output`` the run ends at once with ``stopped: true``.
    """

    def __init__(self, channel, max_output, stop_output, max_line, gate):
        self._channel = channel
        self._gate = gate
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
            if not self._gate.admits():
                return  # not the running cell's: dropped, not counted
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

    def end_cell(self, message):
        """Close the gate and send ``done``: no text of the cell follows it."""
        with self._lock:
            self._gate.running = None
            self._channel.send(message)

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
        # An OutputCapture, or a holder whose ``capture`` is the running
        # cell's (kept mode).
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
            capture = getattr(self._capture, "capture", self._capture)
            capture.write(text)
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

    def __init__(self, channel):
        self._channel = channel
        self._max_line = DEFAULT_MAX_LINE
        self._gate = None  # set by ``begin``, with the cell's limits
        self._cells = None  # kept mode: where the host's next cells go
        self._ids = itertools.count(1)
        self._pending = {}  # call id -> future
        self._lock = threading.Lock()
        self._go = threading.Event()
        # What the running cell handed back, and when it last reported
        # progress (reset for each kept cell).
        self._handed = 0
        self._handed_bytes = 0
        self._progress_at = 0.0

    def start_reader(self):
        """Start the reader thread, parked until ``begin``.

        Starting a thread costs 0.3-5 ms here (the new thread must be
        scheduled before ``start`` returns, on the container's one CPU), so
        it is done before ``ready``, while the container waits in the pool.
        Until ``begin`` the main thread alone reads the channel (the cell
        message); the event orders its reads before the reader's."""
        thread = threading.Thread(
            target=self._read_after_begin, name="code-mode-reader", daemon=True)
        thread.start()

    def begin(self, max_line, gate, cells=None):
        """The cell has been read: let the reader take the channel's input.
        With ``cells`` (a queue), kept mode: the host's next ``cell``
        messages go there (at the end of the input the process exits)."""
        self._max_line = max_line
        self._gate = gate
        self._cells = cells
        self._go.set()

    def _read_after_begin(self):
        self._go.wait()
        self._read_results()

    def make_tool(self, name, stub, signature=None):
        """The async function the code calls for one tool; with its
        ``signature`` (the catalog's parameters), a call with a name it does
        not take or without one it needs raises at once, saying which."""
        caller = self

        async def tool(params=None, /, **kwargs):
            return await caller.call(name, params, kwargs, signature=signature)

        tool.__name__ = tool.__qualname__ = name
        tool.__doc__ = stub
        return tool

    def new_cell(self):
        """A (kept) cell starts: it may hand back its own blocks."""
        self._handed = 0
        self._handed_bytes = 0
        self._progress_at = 0.0

    def make_helpers(self):
        """The functions for resources, handing content back and progress."""
        caller = self

        async def read_resource(uri):
            """Read one resource of the wrapped servers by its URI: its text
            (as a str), each content with its bytes in ``.blocks``."""
            if not isinstance(uri, str):
                raise ToolError(f"read_resource: the URI must be a str, got {type(uri).__name__}")
            return _resource(await caller.call(uri, {}, {}, op="read_resource", label="read_resource"))

        async def list_resources():
            """The wrapped servers' resources: a list of dicts (uri, name,
            description, mimeType, and server with several servers)."""
            return json.loads(await caller.call("", {}, {}, op="list_resources", label="list_resources"))

        async def list_resource_templates():
            """The wrapped servers' resource templates: a list of dicts
            (uriTemplate, name, description, mimeType, server)."""
            return json.loads(await caller.call("", {}, {}, op="list_templates", label="list_resource_templates"))

        def show(item, mime_type=None):
            """Hand an image, audio or a file back to the model, beside the
            printed output: a ``Block`` of a result, or bytes with their
            MIME type (``image/...``, ``audio/...``, anything else as a
            file). At most 8 per run and 160 KiB in all."""
            caller.hand_back(item, mime_type)

        def report_progress(progress, total=None, message=None):
            """Tell the client how far the run is (when it asked to hear):
            ``progress`` (and ``total``) numbers, increasing."""
            caller.progress(progress, total, message)

        return {"read_resource": read_resource, "list_resources": list_resources,
                "list_resource_templates": list_resource_templates, "show": show,
                "report_progress": report_progress, "Block": Block, "Result": Result}

    def hand_back(self, item, mime_type):
        if isinstance(item, Block):
            data = item.data if item.data is not None else (item.text or "").encode("utf-8")
            mime_type = mime_type or item.mime_type
        elif isinstance(item, (bytes, bytearray, memoryview)):
            data = bytes(item)
        else:
            raise TypeError("show: give a Block of a result, or bytes and their MIME type")
        if not isinstance(mime_type, str) or "/" not in mime_type:
            raise ValueError("show: the MIME type is needed (e.g. 'image/png')")
        if self._handed >= MAX_HANDED_BACK:
            raise ValueError(f"show: a run may hand back at most {MAX_HANDED_BACK} blocks")
        if self._handed_bytes + len(data) > MAX_HANDED_BACK_BYTES:
            raise ValueError(f"show: a run may hand back at most {_size(MAX_HANDED_BACK_BYTES)} in all")
        encoded = base64.b64encode(data).decode("ascii")
        kind = mime_type.split("/", 1)[0]
        if kind in ("image", "audio"):
            block = {"type": kind, "data": encoded, "mimeType": mime_type}
        else:
            uri = f"code-mode://cell/handed/{self._handed}"
            block = {"type": "resource", "resource": {"uri": uri, "mimeType": mime_type, "blob": encoded}}
        line = json.dumps({"type": "content", "block": block}).encode("utf-8")
        if len(line) + 1 > self._max_line:
            raise ValueError(f"show: one block must fit in {_size(self._max_line)} of protocol line")
        with self._lock:
            if not self._gate.admits():
                raise ToolError("show: from code left running by a cell that has ended; not sent")
            self._channel.send_line(line)
        self._handed += 1
        self._handed_bytes += len(data)

    def progress(self, progress, total, message):
        numbers = [progress] if total is None else [progress, total]
        if not all(isinstance(n, (int, float)) and not isinstance(n, bool) for n in numbers):
            raise TypeError("report_progress: progress and total are numbers")
        now = time.monotonic()
        final = total is not None and progress >= total
        if now - self._progress_at < PROGRESS_EVERY and not final:
            return
        self._progress_at = now
        message = None if message is None else str(message)[:200]
        line = json.dumps({"type": "progress", "progress": float(progress),
                           "total": None if total is None else float(total), "message": message},
                          allow_nan=False).encode("utf-8")
        with self._lock:
            if self._gate.admits():
                self._channel.send_line(line)

    async def call(self, name, params, kwargs, op=None, label=None, signature=None):
        if params is None:
            params = {}
        if not isinstance(params, dict):
            raise ToolError(f"{name}: arguments must be a dict, "
                            f"got {type(params).__name__}")
        arguments = dict(params)
        arguments.update(kwargs)
        if signature:
            check_argument_names(name, signature, arguments)
        try:
            encoded = json.dumps(arguments, ensure_ascii=False,
                                 allow_nan=False).encode("utf-8")
        except (TypeError, ValueError, RecursionError) as exc:
            # TypeError: an object JSON cannot hold; ValueError: NaN,
            # infinities, a cycle, or a lone surrogate (UnicodeEncodeError).
            raise ToolError(
                f"{name}: arguments are not JSON-serialisable: {exc}") from None

        loop = asyncio.get_running_loop()
        future = loop.create_future()
        with self._lock:
            if not self._gate.admits():
                raise ToolError(
                    f"{label or name}: this call comes from code left running by a "
                    "cell that has ended; it is not sent")
            call_id = next(self._ids)
            # The arguments are encoded once, above; the line is built
            # around them (the same bytes `json.dumps` of the whole message
            # would give).
            line = (b'{"type": "call", "id": %d, "tool": ' % call_id
                    + json.dumps(name, ensure_ascii=False).encode("utf-8")
                    + b', "arguments": ' + encoded
                    + (b', "op": ' + json.dumps(op).encode("utf-8") if op else b"")
                    + b"}")
            # +1 for the newline ending the line.
            if len(line) + 1 > self._max_line:
                raise ToolError(
                    f"{label or name}: arguments are too large "
                    f"(the call must fit in {_size(self._max_line)})")
            # Registered before sending so that a quick result is not missed.
            self._pending[call_id] = future
            # Sent under the lock: the cell cannot end between the check
            # above and the line.
            self._channel.send_line(line)
        try:
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
            if not isinstance(message, dict):
                continue
            if message.get("type") == "cell" and self._cells is not None:
                self._cells.put(message)
                continue
            if message.get("type") != "result":
                continue
            with self._lock:
                future = self._pending.pop(message.get("id"), None)
            if future is None:
                continue  # unknown id, or a call the code stopped awaiting
            if message.get("ok") is True:
                value = message.get("value")
                blocks = message.get("blocks")
                if isinstance(value, str) and isinstance(blocks, list):
                    value = _result(value, blocks)
                outcome = (True, value)
            else:
                outcome = (False, ToolError(message.get("error")))
            self._settle_threadsafe(future, outcome)

        # The host closed its side: it is gone (it closes nothing while it
        # still wants the run), so nothing of the code may go on.
        host_gone()

    def end_cell(self, capture, message):
        """Kept mode: close the gate, send ``done``, and fail the calls the
        cell left waiting (the host answers none of them any more)."""
        with self._lock:
            capture.end_cell(message)
            waiting = list(self._pending.values())
            self._pending.clear()
        for future in waiting:
            self._settle_threadsafe(
                future, (False, ToolError("the cell that made this call has ended")))

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
# Finding tools: search_tools
#
# Ranking knows words and what they stand for, not substrings. Names are
# split at snake, kebab and camel case, every word is lower-cased and
# lightly stemmed ("directories", "directory"; "created", "create"). A
# query is read before it is matched: values in it (quoted text, paths,
# file names, URLs, numbers, identifiers no tool is named by, capitalised
# names) are arguments of the call and weigh little, though what they are
# tells something (a .png file asks for media, a glob for a pattern, a
# clock time or two time zones for a conversion, "2+2" for a sum); a word
# no tool and no table knows is read as a misspelling of the known words
# nearest to it (one or two letters apart). Two tables of generic
# vocabulary then let a query word also match its synonyms (half weight:
# "folder" finds "directory") and the words of the same need (less:
# "weather" finds "temperature", "told" finds "knowledge"). Tools are
# ranked by BM25F over the fields of SearchText (proto-schemas): a word in
# the name weighs more than one in the description, which weighs more than
# one in a parameter's description. Everything here runs on the catalog the
# cell carries: no server is asked, no call is spent, no model is used. The
# evaluation in testing/search-eval runs this very code; its README says
# how the numbers below were chosen.
# --------------------------------------------------------------------------

# Field -> (weight, length normalisation b). The name, title and server are
# short, so their length matters little.
SEARCH_FIELDS = {
    "name": (4.0, 0.3),
    "title": (1.0, 0.3),
    "server": (0.6, 0.0),
    "description": (1.0, 0.75),
    "params": (0.8, 0.3),
    "param_text": (0.3, 0.6),
    "output": (0.3, 0.6),
}
SEARCH_K1 = 1.2
# A synonym counts this much of the word itself; a word of the same need
# (RELATED_GROUPS) this much.
SYNONYM_WEIGHT = 0.5
RELATED_WEIGHT = 0.3
# How much a tool gains when the query names all of its name's words.
NAME_COVER_BONUS = 0.3
# A tool holding more of the query's words is preferred: its score is
# multiplied by (the share of the query it holds) to this power.
COORDINATION = 0.25
# A tool whose title or description says it is deprecated has its score
# multiplied by this: when it ties with its replacement, the replacement
# comes first.
DEPRECATED_FACTOR = 0.9
# A question (what, which, when, ...) asks for something to be read: these
# words join the query at this weight ("what time is it" -> get the time).
QUESTION_WORDS = frozenset(
    "what what's whats which when where who whose how is are does do did have has".split())
QUESTION_HINTS = ("get", "list", "read")
QUESTION_WEIGHT = 0.3
# A question about someone ("who is Alice") asks about a person.
QUESTION_SUBJECTS = {"who": "person", "whom": "person", "whose": "person"}
# A question asking where something is asks to find it.
WHERE_HINT = "search"
WHERE_WEIGHT = 0.6
# A question about one named file ("when was main.py created") asks
# about it: this word joins the query at this weight.
ONE_FILE_QUESTION_HINT = "metadata"
ONE_FILE_QUESTION_WEIGHT = 0.4
# A question that names someone or something ("who is Alice", "what do we
# know about Bob") or asks what is known ("did I ever mention ...") asks
# to look it up: this word joins the query at NAMED_QUESTION_WEIGHT, more
# than the plain question's hints.
NAMED_QUESTION_HINT = "search"
NAMED_QUESTION_WEIGHT = 0.6
# A request that names someone or something ("forget Dave") is about a
# thing of that name: this word joins the query at this weight.
NAMED_HINT = "entity"
NAMED_HINT_WEIGHT = 0.15
# Words of a question that asks what is known or was said.
RECALL_WORDS = frozenset("remember remembered recall told mention mentioned said stored know known".split())
# The word after one of these is a name the call is given ("a folder
# called logs"): an argument.
NAMING_WORDS = frozenset("called named titled".split())
# After "how", these words make the question ("how many", "how long").
HOW_WORDS = frozenset("many much long often".split())
# A name in the query (a capitalised word after the first) weighs this much.
PROPER_NAME_WEIGHT = 0.3
# A value in the query (quoted text, a path, a file name, a URL, a number,
# an identifier that names no tool or server) is an argument of the call:
# its words weigh this much.
ARGUMENT_WEIGHT = 0.3
# A query word that no tool and no table knows, read as a known word one
# or two letters away (a typo), weighs this much.
TYPO_WEIGHTS = {1: 0.8, 2: 0.5}
# Words of at most this many letters are read with one wrong letter at
# most; longer ones with two. A word longer than TYPO_LONGEST is not read
# as a typo at all.
TYPO_SHORT = 4
TYPO_LONGEST = 30

# Two numbers or more in a query ("add 5 and 9") ask for a tool of
# numbers: "number" joins the query at this weight.
NUMBERS_WEIGHT = 0.6

# Words that say nothing about which tool is wanted.
STOP_WORDS = frozenset("""
a an the of to in on at by for from with without into onto about as and or
but if then than so is are was were be been being am it its it's this that
these those there here what what's whats which who whom whose how why when
where do does did doing done can could would should will shall may might
must please me my mine i i'm you your yours we us our they them their he
she his her him some any each every all just also only very really quite
want wants need needs like let let's give tell using use via s t d ll re ve
not no nor have has had ever i've pls thanks thank okay ok hey
""".split())

# Words that stand for several (command names, shorthand): they join the
# query as the words they stand for.
COMPOUND_WORDS = {
    "mkdir": "make directory",
    "rmdir": "remove directory",
    "ls": "list",
    "rm": "remove",
    "mv": "move",
    "cp": "copy",
    "cat": "read",
    "grep": "search",
    "unlink": "remove link",
    "du": "size",
    "stat": "metadata",
    "rn": "now",
    "atm": "now",
    "filename": "file name",
    "dirs": "directory",
    "envs": "environment",
    "llm": "llm model",
    "readme": "file",
    "license": "file",
    "makefile": "file",
    "dockerfile": "file",
    "changelog": "file",
    "disconnect": "remove connection",
    "detach": "remove link",
}

# Verbs that, opening the query or a clause of it, ask for more than
# their word: "link Alice to Acme" creates a link, "remember that ..."
# stores something.
LEADING_VERBS = {
    "link": "link create",
    "connect": "connect create",
    "remember": "remember add",
    "note": "note add",
    "record": "record create",
}

# Phrases read as one word before the query is split.
PHRASES = {
    "log in": "login",
    "log into": "login",
    "sign in": "login",
    "logged in": "login",
    "in one go": "together",
    "at once": "together",
    "at the same time": "together",
    "which files": "list files",
    "what files": "list files",
    "last changed": "last modified",
    "in one call": "together",
    "side by side": "compare",
    "right now": "now",
    "daylight saving": "dst",
    "daylight savings": "dst",
    "at the moment": "now",
    "take up space": "size",
    "taking up space": "size",
    "off limits": "allowed",
    "no longer": "remove",
    "knowledge graph": "graph",
    "look at": "view",
    "look inside": "inside",
    "say back": "echo",
    "deep dive": "research",
    "forget that": "forget fact",
    "let me": "allowed",
    "file or folder": "type",
    "file or a folder": "type",
    "file or directory": "type",
    "file or a directory": "type",
}
_PHRASE = re.compile(r"\b(" + "|".join(sorted((re.escape(p) for p in PHRASES), key=len, reverse=True)) + r")\b", re.I)

# Groups of words that name one thing or action in tool catalogs: generic
# vocabulary of files, records, time and actions, written before tuning
# (testing/search-eval/README.md lists what tuning changed).
SYNONYM_GROUPS = [
    "create make new add generate build",
    "add sum plus total addition",
    "delete remove erase drop forget destroy purge clear wipe retract discard",
    "read get fetch load open view show display retrieve see print peek inspect examine grab",
    "write save store put overwrite persist",
    "edit modify change update patch alter replace amend tweak fix correct swap",
    "list enumerate browse entries",
    "search find lookup look locate query match filter seek",
    "directory folder dir subfolder subdirectory",
    "file document",
    "move rename relocate transfer",
    "time clock hour minute date datetime timestamp",
    "current now present today latest",
    "timezone zone tz",
    "convert translate transform",
    "size big large bytes",
    "metadata info information details stat stats attributes properties",
    "compress zip gzip gz pack archive",
    "image picture photo png jpg jpeg gif icon screenshot",
    "media audio video sound",
    "environment env",
    "variable var",
    "echo repeat parrot",
    "message text string word",
    "toggle switch enable disable turn activate deactivate",
    "trigger start run launch begin kick",
    "observation fact note detail",
    "entity node person people organization thing contact",
    "relation relationship link connect connection edge associate",
    "research investigate investigation study explore analyze",
    "number integer digit",
    "slow long lengthy",
    "operation task job process",
    "tree hierarchy recursive",
    "allowed allow access permitted accessible",
    "permission privilege mode owner own owns",
    "pattern glob wildcard regex",
    "multiple several many batch bulk together simultaneously",
    "know knowledge",
    "weather forecast",
    "elicitation elicit",
    "sampling completion",
    "url uri",
    "root roots",
]

# Groups of words people use for one kind of need, though they do not
# mean the same: a member matches the others at RELATED_WEIGHT.
RELATED_GROUPS = [
    "time morning afternoon evening night noon midnight tonight day week weekday weekend "
    "monday tuesday wednesday thursday friday saturday sunday",
    "dst daylight saving summer",
    "convert difference ahead behind equivalent",
    "timezone utc gmt offset",
    "read contents content inside say says written tail head",
    "list contents inside items children contain contains containing",
    "current local",
    "media binary base64 song music voice podcast clip movie",
    "edit insert append prepend",
    "size kb mb gb megabytes kilobytes",
    "metadata timestamps age",
    "reference ref pointer",
    "elicitation confirm confirmation questionnaire survey",
    "entity record entry profile",
    "multiple both compare",
    "entire whole everything complete full dump export backup snapshot",
    "size space usage disk biggest largest smallest",
    "tree layout overview organised organized nested",
    "knowledge memory memories remember recall told mention mentioned stored",
    "relation reports manages married works belongs owns member friend parent child "
    "sibling spouse colleague boss employee employer partner",
    "observation preference prefers likes dislikes speaks lives",
    "echo ping back unchanged mirror",
    "annotation annotated priority audience",
    "edit diff comment uncomment",
    "delete unlink break detach disconnect",
    "allowed reach touch sandbox",
    "create empty blank fresh",
    "exclude skip skipping ignore except excluding",
    "count handful few",
    "weather temperature humidity conditions rain sunny climate",
    "sum add plus total calculate compute arithmetic math addition",
    "tiny small little sample logo",
    "compress shrink deflate",
    "log spam verbose level levels noisy",
    "subscription subscribe subscriber subscribed notification notifications notify changed",
    "long progress steps duration wait while",
    "research topic deep synthesize findings summarize",
    "elicitation ask prompt input form fill answer",
    "url browser web page login oauth consent authorize redirect visit",
    "sampling llm model completion prompt tokens ai gpt haiku poem",
    "root workspace",
]

# Time zone abbreviations: one in a query asks about a time zone. Those
# that are English words count only when written in capitals.
ZONE_ABBREVIATIONS = frozenset("""
utc gmt pst pdt pt mst mdt mt cst cdt ct est edt et akst akdt hst cet cest
eet eest wet west bst ist jst kst sgt hkt aest aedt acst acdt awst nzst
nzdt msk gst pht ict wib sast brt art cat eat wat
""".split())
ZONE_WORDS = frozenset("pt mt ct et west cat eat art wat".split())
# Words that make a zone abbreviation in lower case one ("9am est to ist").
TIME_WORDS = frozenset("time times hour hours clock now timezone timezones zone zones convert date".split())
# An IANA time zone name: "Europe/Madrid", "America/Argentina/Salta".
_IANA_ZONE = re.compile(r"^(?:Africa|America|Antarctica|Arctic|Asia|Atlantic|Australia|Europe|Indian|Pacific|Etc)"
                        r"/[A-Za-z_+-]+(?:/[A-Za-z_+-]+)?$", re.I)
# A time of day: "4pm", "9:30", "14:30", "10am".
_CLOCK = re.compile(r"^\d{1,2}(?::\d{2})?(?:am|pm|h)$|^\d{1,2}:\d{2}$", re.I)
CLOCK_WORDS = frozenset("noon midnight".split())
# Two numbers added: "2+2", "19.5 + 0.5".
_SUM = re.compile(r"\d\s*\+\s*\.?\d")
# A file name ("notes.txt", "main.py", ".env") or a bare extension (".gz").
_FILE_NAME = re.compile(r"^[\w-]*\.[A-Za-z][A-Za-z0-9]{0,4}$|^\.[A-Za-z][\w.-]{0,40}$")
# What a file name's extension says the file is.
EXTENSION_KINDS = {
    "image": "png jpg jpeg gif bmp webp svg tif tiff ico heic",
    "audio": "mp3 wav ogg flac m4a aac opus",
    "video": "mp4 mov avi mkv webm",
    "text": "txt md markdown json csv tsv log yaml yml toml ini cfg conf py rs js ts "
            "html xml sh sql c h go java rb",
    "compress": "gz zip tgz tar bz2 xz 7z",
}
EXTENSIONS = {ext: kind for kind, exts in EXTENSION_KINDS.items() for ext in exts.split()}
# The words a kind of file adds to a query, with their weights.
EXTENSION_HINTS = {
    "image": (("image", 0.6), ("media", 0.5)),
    "audio": (("audio", 0.6), ("media", 0.5)),
    "video": (("video", 0.6), ("media", 0.5)),
    "text": (("text", 0.5),),
    "compress": (),
}
# Punctuation around a token of the query.
_EDGE_PUNCTUATION = "\"'`()[]{}<>,;:!?."

_CAMEL_LOWER_UPPER = re.compile(r"([a-z0-9])([A-Z])")
_CAMEL_ACRONYM = re.compile(r"([A-Z]+)([A-Z][a-z])")
_WORD = re.compile(r"[^\W\d_]+|\d+")
_ASCII_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
# A parenthesis of examples in a description: "(e.g., 'Asia/Tokyo')". Its
# values show a format, not what the tool is for.
_EXAMPLES = re.compile(r"\((?:e\.g\.|eg\b|for example|such as)[^)]*\)", re.I)
# A capitalised word (not an acronym): "Tokyo", "Alice".
_PROPER_NAME = re.compile(r"\b[A-Z][a-z]+\b")
# Where a clause of a query ends.
_CLAUSES = re.compile(r"[,;:.!?]+\s")
# Quoted text in a query: 'likes tea', "Project X", `main`.
_QUOTED = re.compile(r"(?<!\w)(['\"`])([^'\"`]{1,120})\1(?!\w)")


_STEMS = {}  # word -> its stem: catalogs repeat their words


def _stem(word):
    """A light stemmer: plurals, -ing, -ed, a final -e; never below 3 letters."""
    stem = _STEMS.get(word)
    if stem is None:
        stem = _STEMS[word] = _stem_word(word)
    return stem


def _stem_word(word):
    if len(word) <= 3 or not word.isalpha():
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("sses"):
        word = word[:-2]
    elif word.endswith(("xes", "ches", "shes", "zes")):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    for suffix in ("ing", "ed"):
        stem = word[:-len(suffix)]
        if (word.endswith(suffix) and len(stem) >= 3
                and any(c in "aeiouy" for c in stem)):
            word = stem
            if word[-1] == word[-2] and word[-1] not in "lsz":
                word = word[:-1]  # running -> run, logging -> log
            elif word.endswith("i"):
                word = word[:-1] + "y"  # modified -> modify
            break
    if word.endswith("e") and len(word) > 3:
        word = word[:-1]
    return word


def _raw_words(text):
    """Lower-cased words of ``text``, names split at snake, kebab and camel
    case, letters and digits apart."""
    if text.isascii():
        # One pass: an acronym before a capitalised word ("HTTPServer"),
        # a capitalised or lower-case word, an acronym, digits.
        return [w.lower() for w in _ASCII_WORD.findall(text)]
    text = _CAMEL_LOWER_UPPER.sub(r"\1 \2", text)
    text = _CAMEL_ACRONYM.sub(r"\1 \2", text)
    return _WORD.findall(text.lower())


def _content_words(text):
    """The raw words of ``text`` that count: no stop words, no single
    letters, no example values in parentheses."""
    return [w for w in _raw_words(_EXAMPLES.sub(" ", text))
            if w not in STOP_WORDS and (len(w) >= 2 or w.isdigit())]


def search_words(text):
    """The stemmed words of ``text``, in order, without stop words, single
    letters, or example values in parentheses."""
    return [_stem(word) for word in _content_words(text)]


def _lexicon():
    """Stemmed word -> {other stemmed word: weight} from the synonym and
    related groups (a synonym's weight wins over a related word's)."""
    table = {}
    for groups, weight in ((RELATED_GROUPS, RELATED_WEIGHT), (SYNONYM_GROUPS, SYNONYM_WEIGHT)):
        for group in groups:
            stems = {_stem(w) for w in group.split()}
            for stem in stems:
                others = table.setdefault(stem, {})
                for other in stems - {stem}:
                    others[other] = max(weight, others.get(other, 0.0))
    return table


LEXICON = _lexicon()
# Kept for the words test and for readers: the synonyms alone.
SYNONYMS = {stem: {o for o, w in others.items() if w == SYNONYM_WEIGHT} for stem, others in LEXICON.items()}


def _grams(word):
    """The letter pairs of ``word`` with its ends marked: "^c", "ca", "at", "t$"."""
    padded = "^" + word + "$"
    return {padded[i:i + 2] for i in range(len(padded) - 1)}


def _gram_index(words, index=None):
    """Letter pair -> the words holding it (added to ``index``)."""
    index = {} if index is None else index
    for word in words:
        for gram in _grams(word):
            index.setdefault(gram, set()).add(word)
    return index


def _typo_distance(a, b, bound):
    """The optimal string alignment distance of ``a`` and ``b`` (a letter
    dropped, added, replaced, or two neighbours swapped, each counts one),
    or ``bound + 1`` as soon as it exceeds ``bound``."""
    if abs(len(a) - len(b)) > bound:
        return bound + 1
    before, row = None, list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        current = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            current[j] = min(row[j] + 1, current[j - 1] + 1, row[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                current[j] = min(current[j], before[j - 2] + 1)
        if min(current) > bound:
            return bound + 1
        before, row = row, current
    return row[-1]


# Words the tables know (their raw spellings), which a typo may stand for,
# and their letter pairs: built once, before any cell.
_LEXICON_WORDS = frozenset(
    w for groups in (SYNONYM_GROUPS, RELATED_GROUPS) for group in groups for w in group.split()
    if w.isalpha() and len(w) >= 3)
_LEXICON_GRAMS = _gram_index(_LEXICON_WORDS)


def _query_tokens(query):
    """Split a query into its plain text and the values in it.

    Returns ``(text, arguments, hints, files)``: the text left for words,
    the words of values (quoted text, paths, globs, URLs, file names,
    numbers), words the values ask for with their weights (``("file",
    1.0)`` for a file name), and how many files the query names.
    Identifiers with ``_`` stay in the text marked with a leading NUL:
    whether they name a tool is for the index to say."""
    arguments, hints = [], []
    zones = clocks = files = numbers = 0
    maybe_zones = []  # "pst" in lower case: a zone if the query is about time

    def quoted(match):
        arguments.extend(_raw_words(match.group(2)))
        return " "

    text = _QUOTED.sub(quoted, query)
    if _SUM.search(text):
        hints.append(("sum", 1.0))
        text = text.replace("+", " + ")
    text = _PHRASE.sub(lambda m: PHRASES[m.group(1).lower()], text)
    plain = []

    def file_name(bare):
        """Read ``bare`` as a file name or a bare extension, if it is one."""
        nonlocal files
        if not _FILE_NAME.match(bare) or bare[0].isdigit():
            return False
        name, _, extension = bare.lower().rpartition(".")
        kind = EXTENSIONS.get(extension)
        if name or kind is None:  # a file (notes.txt, .env), not a bare extension (.gz)
            files += 1
            arguments.extend(_raw_words(name or extension))
            hints.append(("file", 1.0))
            hints.extend(EXTENSION_HINTS.get(kind or "text", ()))
        else:
            plain.append(extension)
        return True

    for token in text.split():
        if token.startswith("."):
            bare = token.rstrip(_EDGE_PUNCTUATION)
        else:
            bare = token.strip(_EDGE_PUNCTUATION)
        lower = bare.lower()
        if not bare:
            continue
        if "://" in bare or lower.startswith("www."):
            arguments.extend(_raw_words(bare))
            hints.append(("url", 1.0))
        elif _IANA_ZONE.match(bare):
            zones += 1
        elif lower in ZONE_ABBREVIATIONS and bare.isupper():
            zones += 1
        elif lower in ZONE_ABBREVIATIONS and lower not in ZONE_WORDS:
            maybe_zones.append(bare)
        elif _CLOCK.match(bare) or lower in CLOCK_WORDS:
            clocks += 1
        elif lower in ("am", "pm") and plain and plain[-1].isdigit():
            plain.pop()
            clocks += 1
        elif "*" in bare:
            arguments.extend(_raw_words(bare))
            hints += [("pattern", 1.0), ("file", 0.5)]
        elif file_name(bare):
            pass
        elif "/" in bare and len(bare) > 1:
            *folders, last = bare.split("/")
            arguments.extend(w for f in folders for w in _raw_words(f))
            if not file_name(last):
                arguments.extend(_raw_words(last))
        elif bare.replace(".", "").replace(",", "").isdigit():
            arguments.append(bare)
            numbers += 1
        elif "_" in bare.strip("_"):
            plain.append("\0" + bare)  # an identifier: the index decides
        else:
            plain.append(bare)
    if maybe_zones:
        if zones or clocks or TIME_WORDS.intersection(w.lower() for w in plain):
            zones += len(maybe_zones)
        else:
            plain += maybe_zones  # "edt file": a misspelt word, not a zone
    if files >= 2:
        hints.append(("multiple", 0.8))
    if numbers >= 2:
        hints.append(("number", NUMBERS_WEIGHT))
    if zones:
        hints += [("timezone", 1.0), ("time", 0.5)]
    if clocks:
        hints += [("time", 1.0), ("convert", 0.8)]
    elif zones >= 2:
        hints.append(("convert", 1.0))
    return " ".join(plain), arguments, hints, files


def query_terms(query, named=None, correct=None):
    """The query as weighted groups of stemmed words: for each word of the
    query, ``(weight, {word: 1, synonym: SYNONYM_WEIGHT, related word:
    RELATED_WEIGHT, ...})``.

    ``named`` holds the raw words tools and servers are named by (an
    identifier in the query made of them is a name, not an argument);
    ``correct(stem, word)`` returns how many letters are wrong and the
    known words a misspelt one may stand for, or ``None``."""
    text, arguments, extra, files = _query_tokens(query)
    tokens, named_words = [], []
    for token in text.split():
        if token.startswith("\0"):  # an identifier: a name, or an argument
            words = _raw_words(token[1:])
            if named is not None and words and all(w in named for w in words):
                named_words += words
            else:
                arguments.extend(words)
            continue
        if tokens and tokens[-1].lower() in NAMING_WORDS:
            arguments.extend(_raw_words(token))  # "a folder called logs"
            continue
        tokens.append(token)
    text = " ".join(tokens)
    raw = []
    for clause in _CLAUSES.split(text):
        words = _raw_words(clause)
        if words and words[0] in LEADING_VERBS:
            words[:1] = LEADING_VERBS[words[0]].split()
        raw += words
    question = bool(raw) and raw[0] in QUESTION_WORDS
    raw += named_words
    if question:
        extra += [(word, QUESTION_WEIGHT) for word in QUESTION_HINTS]
    # Capitalised words after the first are names (Tokyo, New York,
    # Alice): arguments of the call, not words of the tool.
    names = {w.lower() for w in _PROPER_NAME.findall(text)[1:]}
    if _PROPER_NAME.match(text.lstrip()) is None:
        names |= {w.lower() for w in _PROPER_NAME.findall(text)[:1]}
    names -= LEXICON.keys() | set(COMPOUND_WORDS)  # "Read", "Echo": words, not names
    if question:
        extra += [(QUESTION_SUBJECTS[word], 1.0) for word in raw[:1] if word in QUESTION_SUBJECTS]
        extra += [(WHERE_HINT, WHERE_WEIGHT) for word in raw[:1] if word == "where"]
        if files == 1:
            extra.append((ONE_FILE_QUESTION_HINT, ONE_FILE_QUESTION_WEIGHT))
        if names or RECALL_WORDS.intersection(raw):
            extra.append((NAMED_QUESTION_HINT, NAMED_QUESTION_WEIGHT))
    elif names:
        extra.append((NAMED_HINT, NAMED_HINT_WEIGHT))
    weighted = []  # (stem, weight, the word as written if it may be a typo)
    previous = None
    for word in raw:
        if previous == "how" and word in HOW_WORDS:
            previous = word
            continue  # "how many": a question, not "many" things
        previous = word
        expansion = COMPOUND_WORDS.get(word)
        for part in (expansion.split() if expansion else [word]):
            if part in STOP_WORDS or (len(part) < 2 and not part.isdigit()):
                continue
            if word in names:
                weighted.append((_stem(part), PROPER_NAME_WEIGHT, None))
            elif part.isdigit():
                weighted.append((part, ARGUMENT_WEIGHT, None))
            elif expansion is None and part.isalpha():
                weighted.append((_stem(part), 1.0, part))  # may be a typo
            else:
                weighted.append((_stem(part), 1.0, None))
    weighted += [(_stem(w), ARGUMENT_WEIGHT, None) for w in arguments
                 if w not in STOP_WORDS and (len(w) >= 2 or w.isdigit())]
    weighted += [(_stem(word), weight, None) for word, weight in extra]
    groups = {}
    for word, weight, written in weighted:
        members = None
        if written is not None and correct is not None:
            found = correct(word, written)
            if found:
                distance, known = found
                weight *= TYPO_WEIGHTS[distance]
                members = {}
                for other in known:
                    for synonym, w in LEXICON.get(other, {}).items():
                        members[synonym] = max(w, members.get(synonym, 0.0))
                members.update(dict.fromkeys(known, 1.0))
        if word in groups:
            groups[word] = (max(weight, groups[word][0]), groups[word][1])
            continue
        if members is None:
            members = dict(LEXICON.get(word, {}))
            members[word] = 1.0
        groups[word] = (weight, members)
    return list(groups.values())


class SearchIndex:
    """BM25F over the tools' search fields, built once per cell on first use."""

    def __init__(self, tools):
        self.names = []
        self.summaries = []
        self.exact = {}  # a tool's Python or listed name, lower-cased -> index
        self.exact_words = {}  # the words of a tool's Python or listed name -> index
        self.postings = {}  # word -> {tool index: its weighted, normalised count}
        self.lengths = []  # per tool: {field: words}
        self.name_words = []  # per tool: the distinct words of its name
        self.factors = []  # per tool: 1, or DEPRECATED_FACTOR
        self.named = set()  # raw words of tools' and servers' names
        spellings = {}  # raw word of any field -> its stem
        totals = dict.fromkeys(SEARCH_FIELDS, 0)
        for index, tool in enumerate(tools):
            name = tool["name"]
            search = tool.get("search") or {}
            summary = tool.get("summary") or ""
            if summary.startswith(name):
                summary = summary[len(name):]  # "(a: int, b: int) -> {sum: int}  What it does."
            self.names.append(name)
            self.summaries.append(summary)
            self.exact.setdefault(name.lower(), index)
            self.exact_words.setdefault(" ".join(_raw_words(name)), index)
            listed = search.get("name") or ""
            if listed:
                self.exact.setdefault(listed.lower(), index)
                self.exact_words.setdefault(" ".join(_raw_words(listed)), index)
            texts = {field: search.get(field) or "" for field in SEARCH_FIELDS}
            if not texts["name"]:
                texts["name"] = name
            if not texts["description"]:
                texts["description"] = tool.get("stub") or ""
            lengths = {}
            for field, text in texts.items():
                raw = _content_words(text)
                lengths[field] = len(raw)
                totals[field] += len(raw)
                for spelling in raw:
                    word = spellings.get(spelling)
                    if word is None:
                        word = spellings[spelling] = _stem(spelling)
                    fields = self.postings.setdefault(word, {}).setdefault(index, {})
                    fields[field] = fields.get(field, 0) + 1
                if field in ("name", "server"):
                    self.named.update(raw)
            self.lengths.append(lengths)
            self.name_words.append(tuple(set(search_words(texts["name"]))))
            deprecated = "deprecat" in (texts["title"] + " " + texts["description"]).lower()
            self.factors.append(DEPRECATED_FACTOR if deprecated else 1.0)
        count = max(1, len(tools))
        self.average = {f: max(1.0, totals[f] / count) for f in SEARCH_FIELDS}
        self.count = len(tools)
        for tools_fields in self.postings.values():
            for index, fields in tools_fields.items():
                tools_fields[index] = self._tf(index, fields)
        # Spellings a typo may stand for: the catalog's words and the tables'.
        self.spellings = {w: s for w, s in spellings.items() if w.isalpha() and len(w) >= 3}
        self.grams = _gram_index(w for w in self.spellings if w not in _LEXICON_WORDS)

    def correct(self, stem, word):
        """``(letters wrong, {stems})`` for a word (``stem`` as stemmed,
        ``word`` as written) neither the catalog nor the tables know: the
        known words closest to it, one letter away, or two when one of the
        two words is longer than TYPO_SHORT letters and neither shorter; a
        word of two or three letters only stands for a word of a tool's or
        server's name. ``None`` when there is none."""
        if (len(word) < 2 or len(word) > TYPO_LONGEST or stem in self.postings or stem in LEXICON
                or word in STOP_WORDS or word in self.spellings or word in _LEXICON_WORDS):
            return None
        bound = 1 if len(word) < TYPO_SHORT else 2
        shared = {}
        for gram in _grams(word):
            for index in (self.grams, _LEXICON_GRAMS):
                for known in index.get(gram, ()):
                    shared[known] = shared.get(known, 0) + 1
        best, found = bound + 1, set()
        for known, count in shared.items():
            # Each wrong letter spoils at most three pairs of letters.
            if count < len(word) + 1 - 3 * bound or abs(len(known) - len(word)) > bound:
                continue
            if len(word) < TYPO_SHORT and known not in self.named:
                continue
            short, long = sorted((len(known), len(word)))
            # Two letters wrong: only in longer words, never the first.
            limit = 2 if short >= TYPO_SHORT and long > TYPO_SHORT and known[0] == word[0] else 1
            if count < len(word) + 1 - 3 * limit:
                continue
            distance = _typo_distance(word, known, min(limit, best))
            if distance < best:
                best, found = distance, {known}
            elif distance == best:
                found.add(known)
        if not found or best > bound:
            return None
        return best, {self.spellings.get(w) or _stem(w) for w in found}

    def _tf(self, index, fields):
        """The weighted, length-normalised count of a word in one tool."""
        lengths = self.lengths[index]
        tf = 0.0
        for field, count in fields.items():
            field_weight, b = SEARCH_FIELDS[field]
            norm = 1.0 - b + b * lengths[field] / self.average[field]
            tf += field_weight * count / norm
        return tf

    def rank(self, query):
        """Tool indexes matching ``query``, best first (ties: catalog order)."""
        postings = self.postings
        scores = {}
        matched = {}  # tool -> the weight of the query's words it holds
        total_weight = 0.0
        asked = {}  # word -> the highest weight the query gives it
        for weight, members in query_terms(query, self.named, self.correct):
            # A word and its synonyms count as one term (BM25F with
            # synonyms): its idf is that of its most common member, so a
            # rare synonym cannot outweigh the word itself.
            present = [(member, word) for word, member in members.items() if word in postings]
            for word, member in members.items():
                if asked.get(word, 0.0) < weight * member:
                    asked[word] = weight * member
            if not present:
                continue
            df = max(len(postings[word]) for _, word in present)
            idf = math.log(1.0 + (self.count - df + 0.5) / (df + 0.5))
            total_weight += weight
            # The strongest member first: the first a tool holds is its best.
            present.sort(reverse=True)
            tfs = {}
            best = {}  # tool -> the best member weight it holds
            for member, word in present:
                for index, tf in postings[word].items():
                    if index in tfs:
                        tfs[index] += tf * member
                    else:
                        tfs[index] = tf * member
                        best[index] = member
            gain = weight * idf
            for index, tf in tfs.items():
                if index in scores:
                    scores[index] += gain * tf / (SEARCH_K1 + tf)
                    matched[index] += weight * best[index]
                else:
                    scores[index] = gain * tf / (SEARCH_K1 + tf)
                    matched[index] = weight * best[index]
        ranked = []
        for index, score in scores.items():
            if score <= 0:
                continue
            words = self.name_words[index]
            if words:
                cover = 0.0
                for word in words:
                    got = asked.get(word)
                    if got:
                        cover += got if got < 1.0 else 1.0
                cover /= len(words)
                score *= 1.0 + NAME_COVER_BONUS * cover * cover
            score *= self.factors[index] * (matched[index] / total_weight) ** COORDINATION
            ranked.append((-score, index))
        ranked.sort()
        order = [index for _, index in ranked]
        # A query that is exactly a tool's name, or its words, finds that
        # tool first.
        exact = self.exact.get(query.strip().lower())
        if exact is None:
            exact = self.exact_words.get(" ".join(_raw_words(query)))
        if exact is not None:
            order = [exact] + [i for i in order if i != exact]
        return order


# --------------------------------------------------------------------------
# Help when the code guesses wrong
# --------------------------------------------------------------------------

# Suggestions named in one error.
MAX_SUGGESTIONS = 3


def _folded(name):
    """A name compared loosely: lower case, without ``_`` and ``-``
    (``filePath``, ``file_path`` and ``file-path`` are one)."""
    return name.lower().replace("_", "").replace("-", "")


def _short(name):
    """A tool's name after its server's prefix."""
    return name.rsplit("__", 1)[-1]


def closest(wrong, names, cutoff=0.6):
    """The names most like ``wrong``, best first, at most
    ``MAX_SUGGESTIONS``: the same name spelt another way (case, ``_``), the
    same tool name under another or no server prefix, then near spellings."""
    import difflib  # only on this error path: nothing to pay otherwise

    names = [n for n in names if isinstance(n, str)]
    found = []

    def add(name):
        if name not in found and name != wrong:
            found.append(name)

    folded = _folded(wrong)
    short = _folded(_short(wrong))
    for name in names:
        if _folded(name) == folded:
            add(name)
    for name in names:
        if _folded(_short(name)) == short:
            add(name)
    by_fold = {}
    for name in names:
        by_fold.setdefault(_folded(name), name)
        by_fold.setdefault(_folded(_short(name)), name)
    for match in difflib.get_close_matches(folded, list(by_fold), n=MAX_SUGGESTIONS * 2, cutoff=cutoff):
        add(by_fold[match])
    if short != folded:
        for match in difflib.get_close_matches(short, list(by_fold), n=MAX_SUGGESTIONS, cutoff=cutoff):
            add(by_fold[match])
    return found[:MAX_SUGGESTIONS]


def _one_of(names):
    """``a``, ``a or b``, ``a, b or c``."""
    if len(names) == 1:
        return names[0]
    return ", ".join(names[:-1]) + " or " + names[-1]


def _param_text(param):
    """``path: str`` for a required parameter, ``head?: int`` otherwise."""
    mark = "" if param.get("required") else "?"
    return f"{param.get('name')}{mark}: {param.get('type') or 'Any'}"


def check_argument_names(name, signature, arguments):
    """Raise ToolError, before the call is sent (it costs no call), when
    ``arguments`` name a parameter the tool does not declare (unless its
    schema takes other names too) or lack one it requires: each named, with
    the closest declared names and the parameters the tool takes."""
    params = [p for p in (signature.get("params") or ()) if isinstance(p, dict)]
    declared = [p.get("name") for p in params]
    problems = []
    if not signature.get("open", True):
        for key in arguments:
            if key in declared:
                continue
            near = closest(key, declared)
            hint = f" (did you mean {_one_of(near)}?)" if near else ""
            problems.append(f"it takes no parameter {key!r}{hint}")
    for param in params:
        if param.get("required") and param.get("name") not in arguments:
            problems.append(f"missing required parameter {_param_text(param)}")
    if problems:
        takes = ", ".join(_param_text(p) for p in params) or "no parameters"
        raise ToolError(f"{name}: " + "; ".join(problems) + f". It takes: {takes}")


# The tools' names, for the did-you-mean of a NameError (set with the globals).
_tool_names = []


def explain_name_error(exc):
    """A NameError naming something close to a tool's name: say which tools
    were meant (Python's own guess only looks at near spellings of any
    global, and misses a tool under its server's prefix). Looks into
    exception groups (``asyncio.TaskGroup``) too."""
    seen = set()

    def visit(error):
        if error is None or id(error) in seen:
            return
        seen.add(id(error))
        if isinstance(error, NameError) and isinstance(getattr(error, "name", None), str):
            near = closest(error.name, _tool_names)
            if near:
                error.args = (f"name {error.name!r} is not defined; did you mean {_one_of(near)}? "
                              "(TOOLS lists every tool; search_tools(query) finds one)",)
                # Python would add its own guess to ours.
                error.name = None
        for member in getattr(error, "exceptions", None) or ():
            visit(member)

    try:
        visit(exc)
    except Exception:  # help must never hide the error itself
        pass


class ToolStubs(dict):
    """``TOOLS``: each tool's stub by name; a name it does not hold raises a
    KeyError naming the closest tools."""

    def __missing__(self, key):
        near = closest(key, list(self)) if isinstance(key, str) else []
        hint = f"; did you mean {_one_of(near)}?" if near else "; search_tools(query) finds one"
        raise KeyError(f"no tool {key!r}{hint}")


def make_search_tools(tools):
    """``search_tools(query, limit=5)`` over ``tools`` (the cell's list of
    ``{"name", "stub", "summary", "search"}``)."""
    tools = list(tools)
    index = []  # built on the first search: a cell that never searches pays nothing

    def search_tools(query, limit=5):
        """The tools that best match a query, best first, as a dict from name
        to one-line summary (parameters, labels, what it does).

        Words of the query are matched against each tool's name, title,
        description, parameters and result fields (a word in the name counts
        most), after splitting names at snake, kebab and camel case and
        reducing words to their stem; generic synonyms and words of the
        same need also match ("folder" finds "directory", "weather" finds
        "temperature"), a misspelt word counts as the known words one or
        two letters away, and values in the query (file names, paths,
        quoted text, numbers, names) weigh little. Tools matching nothing
        are left out.
        """
        if not isinstance(query, str):
            raise TypeError(f"search_tools: query must be a str, "
                            f"got {type(query).__name__}")
        if limit is not None and not isinstance(limit, int):
            raise TypeError(f"search_tools: limit must be an int or None, "
                            f"got {type(limit).__name__}")
        if not index:
            index.append(SearchIndex(tools))
        found = index[0]
        order = found.rank(query)
        if limit is not None:
            order = order[:max(0, limit)]
        return {found.names[i]: found.summaries[i] for i in order}

    return search_tools


# --------------------------------------------------------------------------
# The code's globals
# --------------------------------------------------------------------------

# Where an image built with packages holds them, and the file naming them.
PACKAGES_DIR = "/opt/code-mode/packages"
PACKAGES_FILE = "/opt/code-mode/packages.json"

if os.path.isdir(PACKAGES_DIR):
    sys.path.append(PACKAGES_DIR)


def read_packages(path=PACKAGES_FILE):
    """The packages the image holds beyond the standard library, as a
    read-only mapping of distribution name to version (empty for the
    default image, or when the file is unreadable)."""
    try:
        with open(path, encoding="utf-8") as f:
            found = json.load(f)
    except (OSError, ValueError):
        found = {}
    if not isinstance(found, dict):
        found = {}
    return types.MappingProxyType({str(k): str(v) for k, v in sorted(found.items())})


# Read once, before the container is ready: every cell's PACKAGES is this
# same read-only mapping, off the cell's path.
INSTALLED = read_packages()




def make_globals(tools, caller, withheld=()):
    """A fresh module namespace holding only what the code is promised.

    ``withheld`` names tools a policy denies outright: they get a function,
    so that calling one raises the host's refusal (its rule and reason)
    instead of a NameError, but ``TOOLS`` and ``search_tools`` never list
    them."""
    module = types.ModuleType("__main__")
    namespace = module.__dict__
    namespace["__builtins__"] = builtins
    for name in withheld:
        if isinstance(name, str) and name.isidentifier():
            namespace[name] = caller.make_tool(name, "")
    catalog = {}
    for tool in tools:
        name, stub = tool["name"], tool.get("stub", "")
        catalog[name] = stub
        namespace[name] = caller.make_tool(name, stub, tool.get("signature"))
    _tool_names[:] = list(catalog)
    # The documented helpers win over a tool of the same name.
    namespace.update(caller.make_helpers())
    namespace["TOOLS"] = ToolStubs(catalog)
    namespace["search_tools"] = make_search_tools(tools)
    namespace["ToolError"] = ToolError
    namespace["PACKAGES"] = INSTALLED
    return module


def refresh_globals(module, tools, caller, installed, withheld=()):
    """Kept mode: (re)bind this cell's tools and helpers in the session's
    namespace (withheld tools as in ``make_globals``). A tool function of an
    earlier cell that is gone from the catalog is removed, unless the code
    rebound its name."""
    namespace = module.__dict__
    catalog = {}
    current = {}
    for name in withheld:
        if isinstance(name, str) and name.isidentifier():
            current[name] = namespace[name] = caller.make_tool(name, "")
    for tool in tools:
        name, stub = tool["name"], tool.get("stub", "")
        catalog[name] = stub
        current[name] = namespace[name] = caller.make_tool(name, stub, tool.get("signature"))
    _tool_names[:] = list(catalog)
    for name, function in installed.items():
        if name not in current and namespace.get(name) is function:
            del namespace[name]
    namespace.update(caller.make_helpers())
    namespace["TOOLS"] = ToolStubs(catalog)
    namespace["search_tools"] = make_search_tools(tools)
    namespace["ToolError"] = ToolError
    namespace["PACKAGES"] = INSTALLED
    return current


# --------------------------------------------------------------------------
# Running the cell
# --------------------------------------------------------------------------


def run_cell(code, namespace, filename=CELL_FILENAME, loop_runner=None):
    """Run the code; return None, or the error text for ``done``.

    ``loop_runner``: an ``asyncio.Runner`` made ahead (with its loop), which
    a top-level ``await`` runs on instead of a new one; it is closed either
    way, so plain code has all of its descriptors."""
    # Let tracebacks show the cell's source lines.
    linecache.cache[filename] = (
        len(code), None, code.splitlines(True), filename)
    try:
        compiled = compile(code, filename, "exec",
                           flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT,
                           dont_inherit=True)
        if compiled.co_flags & inspect.CO_COROUTINE:
            # Top-level await: the cell runs in a fresh event loop, as
            # `asyncio.run` would give it (the prepared one is unused).
            if loop_runner is None:
                asyncio.run(eval(compiled, namespace))
            else:
                with loop_runner:
                    loop_runner.run(eval(compiled, namespace))
        else:
            if loop_runner is not None:
                loop_runner.close()
            # No top-level await: run it as a plain module, so that the code
            # may start its own loop with `asyncio.run(...)`.
            exec(compiled, namespace)
    except SystemExit as exc:
        if exc.code is None or exc.code == 0:
            return None
        return f"SystemExit: {exc.code}"
    except BaseException as exc:  # KeyboardInterrupt and all: report them
        explain_name_error(exc)
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
        [frame for frame in report.stack if _is_cell_file(frame.filename)])
    _keep_cell_frames(report.__cause__, seen)
    _keep_cell_frames(report.__context__, seen)
    for member in getattr(report, "exceptions", None) or ():
        _keep_cell_frames(member, seen)


# --------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------


def _is_cell_file(filename):
    return filename == CELL_FILENAME or KEPT_FILENAME.fullmatch(filename)


def take_protocol_descriptors():
    """Move the protocol off 0 and 1; point 0, 1 and 2 at /dev/null."""
    in_fd = os.dup(0)  # os.dup makes non-inheritable descriptors
    out_fd = os.dup(1)
    null_fd = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null_fd, fd)  # inheritable: subprocesses get /dev/null
    os.close(null_fd)
    return Channel(in_fd, out_fd)


def read_limits(cell):
    """The code, tools, withheld tool names and limits of a cell message
    (ValueError, TypeError, KeyError on a bad one)."""
    code = cell["code"]
    if not isinstance(code, str):
        raise TypeError("code is not a string")
    tools = cell.get("tools") or []
    withheld = cell.get("withheld") or []
    limits = cell.get("limits") or {}
    return (code, tools, withheld,
            int(limits.get("max_output", DEFAULT_MAX_OUTPUT)),
            int(limits.get("stop_output", DEFAULT_STOP_OUTPUT)),
            int(limits.get("max_line", DEFAULT_MAX_LINE)))


def prepare():
    """Warm what every cell uses, before ``ready``: the first use of the
    compiler, the JSON codec and asyncio costs more than later ones (lazy
    imports, caches). Runs nothing of any cell. Returns the event loop
    runner a top-level ``await`` will use."""
    compile("await x", "<prepare>", "exec",
            flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
    json.loads(json.dumps({"type": "prepare", "data": ["\u00e9", 1]},
                          ensure_ascii=False))

    async def nothing():
        pass

    asyncio.run(nothing())
    loop_runner = asyncio.Runner()
    loop_runner.get_loop()  # makes the loop now
    return loop_runner


def read_backstop(cell):
    """The cell message's ``backstop``: seconds the run may last, and in
    kept mode how long to wait for the next cell and how long the session
    may still live (None when not given)."""
    backstop = cell.get("backstop") if isinstance(cell, dict) else None
    if not isinstance(backstop, dict):
        backstop = {}
    return (_seconds(backstop.get("run"), DEFAULT_RUN_BACKSTOP),
            _seconds(backstop.get("between"), None),
            _seconds(backstop.get("session"), None))


def main():
    # The wait for the cell is bounded before anything else happens.
    BACKSTOP.arm(unclaimed_from(sys.argv[1:]))
    channel = take_protocol_descriptors()
    caller = ToolCaller(channel)
    caller.start_reader()
    loop_runner = prepare()
    channel.send({"type": "ready"})

    line = channel.read_line()
    if line is None:
        host_gone()  # the host went away before sending the cell
    try:
        cell = json.loads(line)
        run_for, _, session = read_backstop(cell)
        if session is not None:
            BACKSTOP.end_session_in(session)
        BACKSTOP.arm(run_for)
        kept = cell.get("keep") is True
        code, tools, withheld, max_output, stop_output, max_line = read_limits(cell)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        channel.send_last({"type": "done",
                           "error": f"runner: bad cell message: {exc!r}",
                           "truncated": False, "stopped": False})
    if kept:
        loop_runner.close()
        run_kept(channel, cell, caller)

    gate = Gate(kept=False)
    capture = OutputCapture(channel, max_output, stop_output, max_line, gate)
    sys.stdout = sys.__stdout__ = CapturedStream(capture, "<stdout>")
    sys.stderr = sys.__stderr__ = CapturedStream(capture, "<stderr>")

    caller.begin(max_line, gate)

    module = make_globals(tools, caller, withheld)
    # `import __main__` (pickle, for one) finds the code's namespace; the
    # runner's own module stays referenced by this frame.
    runner_module, sys.modules["__main__"] = sys.modules["__main__"], module
    error = run_cell(code, module.__dict__, loop_runner=loop_runner)

    # Captured output is sent as it is written: nothing is left to flush.
    channel.send_last({"type": "done", "error": error,
                       "truncated": capture.truncated, "stopped": False})


class CurrentCapture:
    """Kept mode: where ``sys.stdout`` writes, the running cell's capture."""

    def __init__(self, capture):
        self.capture = capture


def run_kept(channel, cell, caller):
    """Run the cells of one session in one namespace until the host closes
    the channel (or a backstop ends it); each cell gets its own limits and
    output capture.
    ``caller``'s reader thread is started and waits for ``begin``."""
    carry_cell_into_threads()
    gate = Gate(kept=True)
    cells = queue.Queue()
    first_line = int((cell.get("limits") or {}).get("max_line", DEFAULT_MAX_LINE))
    caller.begin(first_line, gate, cells)
    module = types.ModuleType("__main__")
    module.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = module
    current = CurrentCapture(None)
    streams = (CapturedStream(current, "<stdout>"),
               CapturedStream(current, "<stderr>"))
    installed = {}
    number = 0
    _, between, _ = read_backstop(cell)
    while cell is not None:
        number += 1
        try:
            code, tools, withheld, max_output, stop_output, max_line = read_limits(cell)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            channel.send({"type": "done",
                          "error": f"runner: bad cell message: {exc!r}",
                          "truncated": False, "stopped": False})
            cell = next_cell(cells, between)
            continue
        capture = OutputCapture(channel, max_output, stop_output, max_line, gate)
        current.capture = capture
        # A cell that redirected them does not silence the next one.
        sys.stdout = sys.__stdout__ = streams[0]
        sys.stderr = sys.__stderr__ = streams[1]
        caller._max_line = max_line
        caller.new_cell()
        installed = refresh_globals(module, tools, caller, installed, withheld)
        filename = f"<cell {number}>"
        linecache.cache.pop(f"<cell {number - KEPT_SOURCES}>", None)
        gate.running = number
        context = contextvars.copy_context()
        error = context.run(_run_numbered, number, code, module.__dict__, filename)
        caller.end_cell(capture, {"type": "done", "error": error,
                                  "truncated": capture.truncated,
                                  "stopped": False})
        cell = next_cell(cells, between)
    os._exit(0)


def next_cell(cells, between):
    """Kept mode: wait for the session's next cell, at most ``between``
    seconds (and never past the session's end); then arm the new cell's
    run bound."""
    BACKSTOP.arm(between if between is not None else DEFAULT_UNCLAIMED)
    cell = cells.get()
    run_for, new_between, session = read_backstop(cell)
    if session is not None:
        BACKSTOP.end_session_in(session)
    BACKSTOP.arm(run_for)
    if new_between is not None:
        between = new_between
    return cell


def _run_numbered(number, code, namespace, filename):
    CURRENT_CELL.set(number)
    return run_cell(code, namespace, filename)


if __name__ == "__main__":
    main()
