"""Files out of a cell (issue 42): what the code writes under /tmp/out,
also through ``save_file``, handed to the host on the protocol channel once
the code finished.

Each regular file goes as a ``file`` line (its path under the folder, the
MIME type ``save_file`` was given or one guessed from its name, its size),
then its bytes in ``file_data`` lines (base64, each within the host's line
limit). A symlink, anything but a regular file, a name the host would not
take, and everything past the run's bounds (MAX_FILES files, MAX_BYTES
bytes) is not handed out: a ``file_note`` line says which and why, and past
a bound the collection ends there. The host holds the same bounds again.
Loaded by runner.py from beside it (``load_beside``).

In a kept session (``--keep-variables``) the folders stay from cell to
cell: each cell hands out only what is new or changed since it started
(``snapshot``), and its files in join those of earlier cells in /tmp/in.

The whole printed output, when the host asks for it (``keep_output``), is
kept by an ``OutputKeeper``: once the output outgrew what the model reads,
its bytes go to the host in ``output_kept`` lines as they are printed (up
to the bound), and the host offers them as the file ``output.txt``, which
counts in the run's bounds.
"""

import base64
import io
import json
import mimetypes
import os
import stat

OUT = "/tmp/out"
# The host's bounds (code_mode_proto::MAX_FILES_OUT, MAX_FILES_OUT_BYTES).
MAX_FILES = 64
MAX_BYTES = 64 * 1024 * 1024
MAX_NAME = 255

# Where files in are placed (issue 42), read-only, before the code starts.
IN = "/tmp/in"

# The file the host keeps the whole printed output as.
OUTPUT_FILE = "output.txt"

# MIME types given to save_file, by name.
_given = {}


def prepare():
    """Make the output folder (before ``ready``: the code finds it there)."""
    os.makedirs(OUT, exist_ok=True)


def safe_name(name):
    """A relative path of plain names, as the host takes them."""
    return (isinstance(name, str) and 0 < len(name.encode("utf-8", "surrogatepass")) <= MAX_NAME
            and not any(c < " " or c in "\\\x7f" for c in name)
            and all(part not in ("", ".", "..") for part in name.split("/")))


def save_file(name, data, mime_type=None):
    """Write ``data`` (bytes, or a str as UTF-8) to /tmp/out/``name`` for the
    client: it comes back as a link, not to the model. ``name`` is a relative
    path without ``..``; ``mime_type`` is guessed from the name when not
    given. Returns the file's path."""
    if not safe_name(name):
        raise ValueError(f"save_file: the name must be a relative path under {OUT} without '..', "
                         f"'.' or empty parts (at most {MAX_NAME} bytes), got {name!r}")
    if isinstance(data, str):
        data = data.encode("utf-8")
    elif isinstance(data, (bytes, bytearray, memoryview)):
        data = bytes(data)
    else:
        raise TypeError(f"save_file: data must be bytes or str, got {type(data).__name__}")
    if mime_type is not None and (not isinstance(mime_type, str) or "/" not in mime_type):
        raise ValueError("save_file: mime_type must be like 'text/csv'")
    path = os.path.join(OUT, name)
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    if os.path.realpath(folder) != folder:
        raise ValueError(f"save_file: {name!r} goes through a symlink: refused")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    if mime_type is not None:
        _given[name] = mime_type
    return path


def _mime_of(name):
    given = _given.get(name)
    if given:
        return given
    return mimetypes.guess_type(name, strict=False)[0] or "application/octet-stream"


def _entries():
    """(path under the folder, full path) of everything in it, in order;
    a symlinked folder is listed, never entered."""
    for folder, dirs, files in os.walk(OUT, followlinks=False):
        dirs.sort()
        for name in sorted(files) + [d for d in dirs if os.path.islink(os.path.join(folder, d))]:
            full = os.path.join(folder, name)
            yield os.path.relpath(full, OUT), full
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(folder, d))]


def _read(full, size):
    """The file's bytes, opened without following a symlink; None when it
    changed into something else meanwhile."""
    try:
        fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None
        return f.read(size + 1)


def place_inputs(channel, inputs, data=None):
    """Write the cell's files in (``[{"name", "size"}]``, names checked by
    the host: plain, distinct; their raw bytes follow the cell message on
    ``channel``, in order, or were read already: ``data``, one bytes per
    file) to /tmp/in, then make them and the folder read-only. In a kept
    session the folder stays from cell to cell: a later cell's file of a
    name already there replaces it. Returns an error line, or None."""
    if not inputs:
        return None
    os.makedirs(IN, exist_ok=True)
    # An earlier kept cell left it read-only.
    os.chmod(IN, 0o755)
    for number, item in enumerate(inputs):
        name = item.get("name") if isinstance(item, dict) else None
        if not isinstance(name, str) or not safe_name(name) or "/" in name:
            return f"files: the name {name!r} cannot be placed under {IN}"
        path = os.path.join(IN, name)
        try:
            if os.path.lexists(path):
                os.unlink(path)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o444)
            with os.fdopen(fd, "wb") as f:
                if data is not None:
                    f.write(data[number])
                elif not channel.read_into(f, int(item.get("size") or 0)):
                    return f"files: the host went away while {name} came in"
        except OSError as exc:
            return f"files: {name} could not be placed under {IN}: {exc.strerror}"
    os.chmod(IN, 0o555)
    return None


def read_inputs(channel, inputs):
    """The raw bytes of the cell's files in, read off ``channel`` right
    after its cell message (kept mode: the reader thread reads them before
    any later line; the host bounds them to 8 MiB in all); None at EOF."""
    data = []
    for item in inputs or ():
        sink = io.BytesIO()
        size = int(item.get("size") or 0) if isinstance(item, dict) else 0
        if not channel.read_into(sink, size):
            return None
        data.append(sink.getvalue())
    return data


def kept_cell(channel, cell, data, max_output, max_line):
    """A kept session's cell starts: its files in placed (``data``, read
    with the cell message), what the output folder holds now, and the
    keeper of its whole printed output when the host asks for it. Returns
    (an error line or None, the keeper or None, the ``snapshot``)."""
    placed = place_inputs(channel, cell.get("inputs"), data)
    keep = int((cell.get("limits") or {}).get("keep_output", 0))
    keeper = OutputKeeper(channel, keep, max_output, max_line) if keep > 0 else None
    return placed, keeper, snapshot()


def snapshot():
    """What the output folder holds now, entry by entry (kept mode, when a
    cell starts): a file whose size, modification time, inode or type then
    differ, or that is new, is the cell's to hand out."""
    seen = {}
    for rel, full in _entries():
        try:
            st = os.lstat(full)
        except OSError:
            continue
        seen[rel] = (st.st_mode, st.st_ino, st.st_size, st.st_mtime_ns)
    return seen


class OutputKeeper:
    """The whole printed output, up to ``limit`` bytes, for the host: held
    here while it fits in what the model reads (``threshold`` bytes), then
    sent in ``output_kept`` lines as it grows. Its caller serializes calls."""

    def __init__(self, channel, limit, threshold, max_line):
        self._channel = channel
        self._limit = limit
        self._threshold = threshold
        self._chunk = _chunk(max_line)
        self._pending = bytearray()
        self.kept = 0  # bytes held or sent
        self.spilling = False  # the output outgrew the model's share

    def add(self, text, encoded=None):
        """More output: ``encoded`` (its UTF-8 bytes) or ASCII ``text``."""
        room = self._limit - self.kept
        if room <= 0:
            return
        data = encoded[:room] if encoded is not None else text[:room].encode("ascii")
        self._pending += data
        self.kept += len(data)
        self.spilling = self.spilling or self.kept > self._threshold
        if self.spilling and len(self._pending) >= self._chunk:
            self._send(len(self._pending) // self._chunk * self._chunk)

    def flush(self):
        """The output ends: what is held goes too, if it is to be kept."""
        if self.spilling:
            self._send(len(self._pending))

    def said(self, total):
        """What the line saying how much was cut adds about the file."""
        if total <= self.kept:
            return f"; all {total} bytes printed are in the file {OUTPUT_FILE}"
        return f"; the first {self.kept} of the {total} bytes printed are in the file {OUTPUT_FILE}"

    def _send(self, upto):
        for start in range(0, upto, self._chunk):
            encoded = base64.b64encode(self._pending[start:min(upto, start + self._chunk)]).decode("ascii")
            self._channel.send_line(json.dumps({"type": "output_kept", "data": encoded}).encode("ascii"))
        del self._pending[:upto]


def _chunk(max_line):
    """Bytes per line of base64 data, within the host's line limit."""
    return max(3, (max_line - 64) // 4 * 3)


def send_files(channel, max_line, keeper=None, since=None):
    """Hand the folder's files to the host (after the code finished); the
    printed output ``keeper`` handed out counts as one file. With ``since``
    (a ``snapshot`` taken when a kept cell started) only what is new or
    changed since then goes: the folder stays from cell to cell."""
    def note(text):
        channel.send({"type": "file_note", "note": text})

    chunk = _chunk(max_line)
    count = total = 0
    if keeper is not None and keeper.spilling:
        count, total = 1, keeper.kept
    for rel, full in _entries():
        try:
            st = os.lstat(full)
        except OSError:
            continue
        mode = st.st_mode
        if since is not None and since.get(rel) == (mode, st.st_ino, st.st_size, st.st_mtime_ns):
            continue
        if stat.S_ISLNK(mode):
            note(f"{rel!r}: a symlink: refused (only regular files under {OUT} are handed out)")
            continue
        if not stat.S_ISREG(mode):
            note(f"{rel!r}: not a regular file: refused")
            continue
        if not safe_name(rel):
            note(f"{rel!r}: a name that cannot be handed out: refused")
            continue
        if count >= MAX_FILES:
            note(f"{rel!r} and any later files not handed out: a run hands out at most {MAX_FILES} files")
            return
        size = os.lstat(full).st_size
        if total + size > MAX_BYTES:
            note(f"{rel!r} and any later files not handed out: a run hands out at most "
                 f"{MAX_BYTES // (1024 * 1024)} MiB of files")
            return
        data = _read(full, MAX_BYTES - total)
        if data is None or total + len(data) > MAX_BYTES:
            note(f"{rel!r}: changed while it was handed out: refused")
            continue
        count += 1
        total += len(data)
        channel.send({"type": "file", "name": rel, "mime_type": _mime_of(rel), "size": len(data)})
        for start in range(0, len(data), chunk):
            encoded = base64.b64encode(data[start:start + chunk]).decode("ascii")
            channel.send_line(json.dumps({"type": "file_data", "data": encoded}).encode("ascii"))
