"""Name the Python distributions an image holds beyond the standard library.

Run by ``packages.Dockerfile`` in its builder stage (never in the final
image): ``python3 list_packages.py OUT DIR [DIR...] [--merge FILE...]``
writes to OUT one JSON object of distribution name to version, for every
distribution found in the DIRs (by ``importlib.metadata``), plus the
objects of the ``--merge`` files. Only the standard library is used.
"""

import importlib.metadata
import json
import os
import sys


def found_in(path):
    """Distribution name to version of what is installed under ``path``."""
    found = {}
    if not os.path.isdir(path):
        return found
    for dist in importlib.metadata.distributions(path=[path]):
        name = dist.metadata["Name"]
        if name:
            found[name] = dist.version
    return found


def main(argv):
    if len(argv) < 2:
        sys.exit("usage: list_packages.py OUT DIR [DIR...] [--merge FILE...]")
    out, rest = argv[0], argv[1:]
    dirs, merged = rest, []
    if "--merge" in rest:
        at = rest.index("--merge")
        dirs, merged = rest[:at], rest[at + 1 :]
    found = {}
    for name in merged:
        with open(name, encoding="utf-8") as f:
            found.update(json.load(f))
    for path in dirs:
        found.update(found_in(path))
    with open(out, "w", encoding="utf-8") as f:
        json.dump(found, f, sort_keys=True, separators=(",", ":"))
    print("code-mode packages:", json.dumps(found, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1:])
