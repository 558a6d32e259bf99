"""Run runner.py's own ``search_tools`` on the host, for the evaluation and the bench.

``runner.py`` loads the ranking from ``tool_search.py`` beside it (and that
its tables from ``search_tables.py``), as in the image.

Usage: ``python3 rank.py RUNNER_PY [rank|bench]``, with one JSON object on stdin
(``rank``) or one per command (``bench``):

- ``rank``: stdin holds ``{"tools": [...], "queries": [...], "limit": N}``, where
  ``tools`` is exactly the list a cell carries (``ToolStub`` of proto-schemas).
  Prints one JSON list per query: the names ``search_tools(query, limit=N)``
  returns, best first.
- ``meaning``: as ``rank``, with ``"near"`` beside ``"queries"``: for each
  query, each tool's cosine with it (name -> cosine, as the bridge's encoder
  answers); ``search_tools`` gets these as the host's answer when it asks.
  Prints ``{"results": [...], "asked": N}``, N the searches that asked.
- ``words``: stdin holds a JSON list of texts; prints, for each, the words
  ``search_tools`` indexes it by (``search_words``) and the weighted word
  groups a query of that text asks for (``query_terms``).
- ``bench``: the first line holds ``{"tools": [...], "queries": [...]}``; each
  later line holds a command, ``search N`` (N searches, cycling through the
  queries, over one index built before) or ``index N`` (N fresh indexes, each
  with one search, the stem cache emptied first as in a fresh sandbox).
  After each it prints the nanoseconds they took, so a criterion bench can
  time the Python code alone, without the process start.

The module is loaded from its path, as the sandbox runs it; its ``main`` does
not run (it only runs as ``__main__``).
"""

import importlib.util
import json
import sys
import time


def load_runner(path):
    spec = importlib.util.spec_from_file_location("code_mode_runner", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rank(runner):
    request = json.load(sys.stdin)
    search = runner.make_search_tools(request["tools"])
    limit = request.get("limit", 10)
    results = [list(search(query, limit=limit)) for query in request["queries"]]
    json.dump(results, sys.stdout)


def meaning(runner):
    request = json.load(sys.stdin)
    by_query = dict(zip(request["queries"], request["near"]))
    asked = []

    def ask(query):
        asked.append(query)
        return by_query[query]

    search = runner.make_search_tools(request["tools"], ask)
    limit = request.get("limit", 10)
    results = [list(search(query, limit=limit)) for query in request["queries"]]
    json.dump({"results": results, "asked": len(asked)}, sys.stdout)


def words(runner):
    texts = json.load(sys.stdin)
    results = []
    for text in texts:
        groups = [[weight, sorted(members)] for weight, members in runner.tool_search.query_terms(text)]
        results.append({"index": runner.tool_search.search_words(text), "query": groups})
    json.dump(results, sys.stdout)


def bench(runner):
    first = json.loads(sys.stdin.readline())
    tools, queries = first["tools"], first["queries"]
    search = runner.make_search_tools(tools)
    search(queries[0])  # build the index outside the timed part
    for line in sys.stdin:
        command, count = line.split()
        count = int(count)
        start = time.perf_counter_ns()
        if command == "search":
            for i in range(count):
                search(queries[i % len(queries)])
        elif command == "index":
            for i in range(count):
                # As in a fresh sandbox: nothing of an earlier index is kept.
                runner.tool_search._STEMS.clear()
                runner.make_search_tools(tools)(queries[i % len(queries)])
        else:
            raise SystemExit(f"unknown command {command!r}")
        elapsed = time.perf_counter_ns() - start
        print(elapsed, flush=True)


def main():
    runner = load_runner(sys.argv[1])
    mode = sys.argv[2] if len(sys.argv) > 2 else "rank"
    {"rank": rank, "meaning": meaning, "words": words, "bench": bench}[mode](runner)


if __name__ == "__main__":
    main()
