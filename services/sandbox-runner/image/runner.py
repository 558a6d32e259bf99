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
import importlib.util
import faulthandler
import inspect
import io
import itertools
import json
import linecache
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
# How long a search waits for the host's answer by meaning (the runner
# waits 2 s for the bridge's).
MEANING_WAIT = 2.5

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
        self._in_buffer = bytearray()
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
        """Return the next line (without its newline), or None at EOF.
        Only what came since the last look is searched: a long line (a
        cell message) costs one pass, not one per chunk."""
        start = 0
        while (end := self._in_buffer.find(b"\n", start)) < 0:
            start = len(self._in_buffer)
            chunk = self._read(65536)
            if not chunk:
                return None
            self._in_buffer += chunk
        line = bytes(self._in_buffer[:end])
        del self._in_buffer[:end + 1]
        return line

    def read_into(self, sink, size):
        """Copy the next ``size`` raw bytes (a file in, after the cell
        message) to ``sink``; False at EOF before them."""
        while size > 0:
            chunk = self._in_buffer[:size] if self._in_buffer else self._read(min(size, 1 << 20))
            if not chunk:
                return False
            if self._in_buffer:
                del self._in_buffer[:len(chunk)]
            sink.write(chunk)
            size -= len(chunk)
        return True

    def _read(self, most):
        while True:
            try:
                return os.read(self._in_fd, most)
            except InterruptedError:
                continue


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


# Output kept at the end of a run's printed text, as a share of what is
# kept (the rest is its head), and the least kept output that gets a tail.
OUTPUT_TAIL_SHARE = 4
OUTPUT_TAIL_MIN = 256
# Bytes kept in the tail for the line saying how much was cut.
CUT_LINE_ROOM = 64


class OutputCapture:
    """Counts everything the code prints and forwards what the host keeps.

    Of ``max_output`` bytes kept (UTF-8, never cut inside a character), the
    first three quarters are the output's head, sent as ``output`` messages
    as they are printed; the last quarter is its tail, held here until the
    cell ends (``finish``), so that a summary the code prints last comes
    back too. When the code printed more, a line between head and tail
    says how many bytes were cut there. Once the count reaches
    ``stop_output`` the run ends at once with ``stopped: true``. With a
    ``keeper`` (files_out.OutputKeeper) the whole output goes to it too.
    """

    def __init__(self, channel, max_output, stop_output, max_line, gate, keeper=None):
        self._channel = channel
        self._gate = gate
        self._max_output = max_output
        tail = max_output // OUTPUT_TAIL_SHARE if max_output >= OUTPUT_TAIL_MIN else 0
        self._head_max = max_output - tail
        self._tail_room = tail
        self._tail = b""
        self._finished = False
        self._stop_output = stop_output
        # Largest piece of output per message: even if every byte became a
        # six-character JSON escape the line stays under the line limit.
        self._chunk = max(1, (max_line - 64) // 6)
        self._lock = threading.Lock()
        self.total = 0
        self.keeper = keeper

    @property
    def truncated(self):
        return self.total > self._max_output

    def write(self, text):
        room = self._tail_room
        if text.isascii():
            # The common case, without encoding a huge string just to count.
            size = len(text)
            head = text[:max(0, self._head_max)].encode("ascii")
            tail = text[-room:].encode("ascii") if room else b""
        else:
            head = text.encode("utf-8", "backslashreplace")
            size = len(head)
            tail = head[-room:] if room else b""
        with self._lock:
            if not self._gate.admits():
                return  # not the running cell's: dropped, not counted
            if self.keeper is not None and not self._finished:
                self.keeper.add(text, None if text.isascii() else head)
            left = self._head_max - self.total
            self.total += size
            if left > 0:
                self._forward(head[:left])
            past = min(size, self.total - self._head_max)
            if room and past > 0:
                self._tail = (self._tail + tail[-min(past, len(tail)):])[-room:]
            if self.total >= self._stop_output:
                self._finish_locked()
                self._channel.send_last({
                    "type": "done",
                    "error": "stopped: the code printed "
                             f"{_size(self._stop_output)} or more",
                    "truncated": True,
                    "stopped": True,
                })

    def finish(self):
        """Send the output's tail (after the head, with the line saying
        how much was cut between them, if anything was): once, at the end
        of the cell, before ``done``."""
        with self._lock:
            self._finish_locked()

    def _finish_locked(self):
        if self._finished:
            return
        self._finished = True
        if self.keeper is not None:
            self.keeper.flush()
        past = self.total - self._head_max
        if past <= 0 or not self._tail_room:
            return
        if self.total <= self._max_output:
            self._forward(self._tail[-past:])  # all of it fits: nothing cut
            return
        said = self.keeper.said(self.total) if self.keeper is not None else ""
        tail = self._tail[-(self._tail_room - CUT_LINE_ROOM - len(said)):]
        # Start the tail at a line's start when one begins in its first half.
        newline = tail.find(b"\n", 0, len(tail) // 2)
        if newline >= 0:
            tail = tail[newline + 1:]
        cut = self.total - self._head_max - len(tail)
        self._forward(f"\n[... {cut} bytes of output cut here{said} ...]\n".encode("ascii") + tail)

    def end_cell(self, message):
        """Send the tail, close the gate and send ``done``: no text of the
        cell follows it."""
        with self._lock:
            self._finish_locked()
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
        self._asked = {}  # meaning question id -> [threading.Event, answer]
        self._meaning_off = False  # the host said it has no encoder
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
        self._meaning_off = False

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
                "report_progress": report_progress, "Block": Block, "Result": Result,
                "save_file": files_out.save_file}

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

    def meaning(self, query):
        """Ask the host how near ``query`` is in meaning to each tool; its
        answer as ``tool_search.read_near`` reads it, or None (no answer
        within ``MEANING_WAIT`` s: later searches of the cell ask no more).
        Blocks this thread; the reader thread settles the wait."""
        waiter = [threading.Event(), None]
        with self._lock:
            if self._meaning_off or not self._gate.admits():
                return None
            ask_id = next(self._ids)
            line = json.dumps({"type": "meaning", "id": ask_id, "query": query[:1000]}).encode()
            if len(line) >= self._max_line:  # with its newline, past the limit
                return None
            self._asked[ask_id] = waiter
            self._channel.send_line(line)
        waiter[0].wait(MEANING_WAIT)
        with self._lock:
            self._asked.pop(ask_id, None)
        near = tool_search.read_near(waiter[1])
        self._meaning_off = near is None
        return near

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
                # Its files in follow it, raw: read before any later line.
                if (data := files_out.read_inputs(self._channel, message.get("inputs"))) is None:
                    break
                self._cells.put((message, data))
                continue
            if message.get("type") == "meaning":
                with self._lock:
                    waiter = self._asked.pop(message.get("id"), None)
                if waiter is not None:
                    waiter[1] = message.get("near")
                    waiter[0].set()
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
# --------------------------------------------------------------------------


def load_beside(name):
    """The module ``name`` of the file ``name.py`` in this file's folder
    (``/opt/code-mode`` in the image), loaded from its path: the folder is
    not on ``sys.path`` (``python3 -I``), so the code cannot import a file
    of that name in its place, and nothing of ours is importable by it."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), name + ".py")
    spec = importlib.util.spec_from_file_location("code_mode_" + name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The ranking lives in tool_search.py (which loads search_query.py, and
# that search_tables.py, from the same folder): loaded here, before
# ``ready``, so no cell pays for it.
tool_search = load_beside("tool_search")
# Files out of a cell (/tmp/out, save_file): files_out.py, beside this one.
files_out = load_beside("files_out")
make_search_tools = tool_search.make_search_tools


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
    namespace["search_tools"] = make_search_tools(tools, caller.meaning)
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
    namespace["search_tools"] = make_search_tools(tools, caller.meaning)
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
    files_out.prepare()
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
    placed = files_out.place_inputs(channel, cell.get("inputs"))
    if placed is not None:
        channel.send_last({"type": "done", "error": placed, "truncated": False, "stopped": False})
    keep = int((cell.get("limits") or {}).get("keep_output", 0))
    keeper = files_out.OutputKeeper(channel, keep, max_output, max_line) if keep > 0 else None
    capture = OutputCapture(channel, max_output, stop_output, max_line, gate, keeper)
    sys.stdout = sys.__stdout__ = CapturedStream(capture, "<stdout>")
    sys.stderr = sys.__stderr__ = CapturedStream(capture, "<stderr>")

    caller.begin(max_line, gate)

    module = make_globals(tools, caller, withheld)
    # `import __main__` (pickle, for one) finds the code's namespace; the
    # runner's own module stays referenced by this frame.
    runner_module, sys.modules["__main__"] = sys.modules["__main__"], module
    error = run_cell(code, module.__dict__, loop_runner=loop_runner)

    # The head was sent as it was written; its tail goes now, then the files.
    capture.finish()
    files_out.send_files(channel, max_line, keeper)
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
    # The first cell's files in, read before the reader takes the channel.
    if (data := files_out.read_inputs(channel, cell.get("inputs"))) is None:
        host_gone()
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
            cell, data = next_cell(cells, between)
            continue
        placed, keeper, before = files_out.kept_cell(channel, cell, data, max_output, max_line)
        if placed is not None:
            channel.send({"type": "done", "error": placed, "truncated": False, "stopped": False})
            cell, data = next_cell(cells, between)
            continue
        capture = OutputCapture(channel, max_output, stop_output, max_line, gate, keeper)
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
        capture.finish()  # then the files, then ``done``, as a fresh cell
        files_out.send_files(channel, max_line, keeper, since=before)
        caller.end_cell(capture, {"type": "done", "error": error,
                                  "truncated": capture.truncated,
                                  "stopped": False})
        cell, data = next_cell(cells, between)
    os._exit(0)


def next_cell(cells, between):
    """Kept mode: wait for the session's next cell (and its files in's
    bytes), at most ``between`` seconds (and never past the session's end);
    then arm the new cell's run bound."""
    BACKSTOP.arm(between if between is not None else DEFAULT_UNCLAIMED)
    cell, data = cells.get()
    run_for, new_between, session = read_backstop(cell)
    if session is not None:
        BACKSTOP.end_session_in(session)
    BACKSTOP.arm(run_for)
    if new_between is not None:
        between = new_between
    return cell, data


def _run_numbered(number, code, namespace, filename):
    CURRENT_CELL.set(number)
    return run_cell(code, namespace, filename)


if __name__ == "__main__":
    main()
