"""search_tools: find the tool a need asks for, in the cell's catalog.

Part of the sandbox image, beside ``runner.py``, which loads it from its own
folder (``/opt/code-mode/tool_search.py``; not on the code's ``sys.path``)
before the container says ``ready`` and puts the function
``make_search_tools`` makes into the code's globals as ``search_tools``.
The host's tests and benches load it the same way, from its path
(``testing/search-eval/rank.py``).

Only the standard library; no server is asked, no call is spent, no model is
used: everything runs on the catalog the cell carries.
"""

import importlib.util
import math
import os
import re


def _load_beside(name):
    """The module of ``name``.py in this file's folder (not on ``sys.path``)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), name + ".py")
    spec = importlib.util.spec_from_file_location("code_mode_" + name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# What this file uses of search_query.py (and of its tables).
QUERY = _load_beside("search_query")
STOP_WORDS, QUESTION_WORDS, COMPOUND_WORDS = QUERY.STOP_WORDS, QUERY.QUESTION_WORDS, QUERY.COMPOUND_WORDS
MUTATING_VERBS, WHOLE_WORDS, LEXICON = QUERY.MUTATING_VERBS, QUERY.WHOLE_WORDS, QUERY.LEXICON
TYPO_SHORT, TYPO_LONGEST = QUERY.TYPO_SHORT, QUERY.TYPO_LONGEST
_LEXICON_WORDS, _LEXICON_GRAMS, _FUNCTION_DELETIONS = QUERY._LEXICON_WORDS, QUERY._LEXICON_GRAMS, QUERY._FUNCTION_DELETIONS
COMMON_WORDS = QUERY.TABLES.COMMON_WORDS
_stem, _raw_words, _content_words = QUERY._stem, QUERY._raw_words, QUERY._content_words
_gram_index, _grams, _typo_distance, _deletions = QUERY._gram_index, QUERY._grams, QUERY._typo_distance, QUERY._deletions
_QUOTED = QUERY._QUOTED
# Also for the evaluation (testing/search-eval/rank.py): the words a text is
# indexed by, the word groups a query asks for, the stems seen so far.
search_words, query_terms, read_query, _STEMS = QUERY.search_words, QUERY.query_terms, QUERY.read_query, QUERY._STEMS

# --------------------------------------------------------------------------
# How search_tools ranks
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
# nearest to it (one or two letters apart, the first letter kept), unless it
# is an everyday English word (COMMON_WORDS: "take" is no "make"). A verb
# whose particle follows its object reads as the pair ("take it out":
# remove), and a request opening with a verb that takes away does not want
# a tool whose name makes or adds, nor the other way round. What a query
# says it does not want ("no sizes") weighs as an argument and weighs down
# tools named by it; a past verb after its subject ("Marta moved to ...",
# "what I wrote") tells what happened, not what to do; a request about
# named things favours the knowledge-graph tool of what it is about (a
# link between two, a fact about one, a new one: the kind joins the query
# as a word, and a statement with no verb is a fact to keep). A query naming a file
# does not want a tool that takes arguments but no path, a clock time in
# it is when something happened (not a time to convert), and a function
# called in it ("print('hi')") is a value. A verb that places, after "and"
# or opening a later clause, asks to move what the query names; records
# named by whose they are ("Tom's and Ines's entries") are opened, and
# "who" with a verb ("who likes tea") searches. Two tables of generic
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

# The values a parameter's type allows (Literal['error', 'success']; from
# the signature the cell carries): a query naming one asks for the tool
# that takes it ("weather in Chicago" where location is one of 'New York',
# 'Chicago', 'Los Angeles').
VALUES_FIELD_WEIGHT = 3.0
_LITERAL = re.compile(r"Literal\[([^\]]*)\]")
_LITERAL_VALUE = re.compile(r"'([^']{1,60})'|\"([^\"]{1,60})\"")
# A question asking what is (not how to do something) wants a tool that
# reads: a tool whose name opens with a verb that changes something
# (MUTATING_VERBS) has its score multiplied by this.
MUTATING_IN_QUESTION = 0.7
# A request opening with a verb that changes something (CHANGING_VERBS:
# "create hello.py containing ...") does not want a tool whose name opens
# with a reading verb: its score is multiplied by this.
READING_IN_CHANGE = 0.7
# A request asking to take something away does not want a tool that makes
# or adds, nor the other way round (REMOVING_VERBS, MAKING_VERBS): its
# score is multiplied by this.
OPPOSITE_ACTION = 0.5
# A request about a knowledge graph's relation, observation or entity
# (search_graph.GraphReading) favours the tool that makes or removes that
# kind of thing: its score is multiplied by this.
GRAPH_OBJECT = 1.5
# A query saying it does not want something a tool's name holds ("the
# files of src, no sizes") does not want that tool: its score is
# multiplied by this.
UNWANTED_IN_NAME = 0.5
# The stems of the kinds of thing a knowledge graph's tools name.
GRAPH_OBJECTS = {"entity": "entity", "relat": "relation", "observ": "observation"}
# A query asking for all of something ("all entities", "everything")
# favours the tools that need no argument: their score is multiplied by this.
WHOLE_NO_ARGUMENT = 1.3
# A question or reading request naming all the fields a tool's result
# holds has the tool's score multiplied by 1 + this (by less for fewer).
RESULT_COVER_BONUS = 0.5
# A query holding values (file names, paths, quoted text, numbers) wants a
# tool that takes arguments: one that takes none has its score multiplied
# by this.
VALUES_NO_ARGUMENT = 0.7
# A tool requiring a value of a kind (a path, a URL: PARAMETER_KINDS) that
# the query shows no sign of ("save that link" with no file in sight) has
# its score multiplied by this.
KIND_NOT_SHOWN = 0.8
# A query naming a file does not want a tool that takes arguments but no
# path ("open notes/setup.md" is no open_nodes): its score is multiplied
# by this.
FILE_NOT_TAKEN = 0.7
# The tools of the server a query names best have their score multiplied
# by 1 + this (the tools of a server it names less, by less).
SERVER_BONUS = 1.0
# A query naming a file and no folder ("how big is video.mp4") weighs down
# tools whose name says they work on a directory.
FILE_NOT_DIRECTORY = 0.8
# A query speaking of a server's domain (the words most of its tools hold
# and few other tools: memory's "entity", "graph") favours that server's
# tools: their score is multiplied by up to 1 + this. A word held by more
# than DOMAIN_SHARE of the catalog's tools is no server's own.
DOMAIN_BONUS = 0.3
DOMAIN_SHARE = 0.375
# A sentence found in the descriptions of this many differently named tools
# is left out of them (boilerplate).
BOILERPLATE_TOOLS = 3
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
# Field -> (weight, length normalisation b). The name, title and server are
# short, so their length matters little.
SEARCH_FIELDS = {
    "name": (4.0, 0.3),
    "title": (1.0, 0.3),
    "server": (0.6, 0.0),
    "description": (1.0, 0.75),
    "params": (0.5, 0.3),
    "param_text": (0.3, 0.6),
    "output": (0.6, 0.3),
    "values": (VALUES_FIELD_WEIGHT, 0.3),
}
SEARCH_K1 = 1.2
# How much a tool gains when the query names all of its name's words.
NAME_COVER_BONUS = 0.3
# A tool holding more of the query's words is preferred: its score is
# multiplied by (the share of the query it holds) to this power.
COORDINATION = 0.25
# A tool whose title or description says it is deprecated has its score
# multiplied by this: when it ties with its replacement, the replacement
# comes first.
DEPRECATED_FACTOR = 0.8
# A word standing alone in a query: letters between spaces or sentence
# punctuation, not part of a file name, path, identifier or address.
_SAID_WORD = re.compile(r"(?<![\w./\\@#-])[A-Za-z]+(?![\w./\\@-]|\.\w)")
# Words asking for the old tool: the deprecated one gains as much instead.
OLD_WORDS = frozenset("deprecated legacy obsolete old older outdated replaced superseded predecessor".split())


def _boilerplate(tools):
    """The sentences (lower case) that the descriptions of at least
    BOILERPLATE_TOOLS differently named tools share ("Only works within
    allowed directories."): they tell these tools from no other, and would
    make their words common."""
    carriers = {}
    for tool in tools:
        search = tool.get("search") or {}
        name = search.get("name") or tool.get("name")
        for sentence in _SENTENCE_END.split(search.get("description") or ""):
            carriers.setdefault(sentence.strip().lower(), set()).add(name)
    return {s for s, names in carriers.items() if s and len(names) >= BOILERPLATE_TOOLS}


def _common(word):
    """True for an everyday English word (COMMON_WORDS), also with a plural,
    past or -ing ending: "leads", "needed", "signing"."""
    if word in COMMON_WORDS:
        return True
    for ending, base in (("s", ""), ("es", ""), ("ed", ""), ("ed", "e"), ("ing", ""), ("ing", "e"), ("ies", "y")):
        if word.endswith(ending) and len(word) > len(ending) + 2 and word[:-len(ending)] + base in COMMON_WORDS:
            return True
    return False


class SearchIndex:
    """BM25F over the tools' search fields, built once per cell on first use."""

    def __init__(self, tools):
        self.names = []
        self.summaries = []
        self.copies = []  # per tool: its listed name and description (a copy's are equal)
        self.exact = {}  # a tool's Python or listed name, lower-cased -> index
        self.called = {}  # a tool's name as a query may write it ("read_file") -> every tool so named
        self.exact_words = {}  # the words of a tool's Python or listed name -> index
        self.postings = {}  # word -> {tool index: its weighted, normalised count}
        self.lengths = []  # per tool: {field: words}
        self.name_words = []  # per tool: the distinct words of its name
        self.factors = []  # per tool: 1, or DEPRECATED_FACTOR
        self.mutating = []  # per tool: its name opens with a verb that changes something
        self.reading = []  # per tool: its name opens with a verb that reads (READING_VERBS)
        self.objects = []  # per tool that makes or removes: "entity", "relation" or "observation"
        self.actions = []  # per tool: "remove" or "make" when its name opens with such a verb
        self.arguments = []  # per tool: (parameters it takes, parameters it requires)
        self.servers = []  # per tool: the words of its server's name
        self.kinds = []  # per tool: the kinds of value (PARAMETER_KINDS) it requires
        self.paths = []  # per tool: it takes a path
        self.results = []  # per tool: the stems of its result's field names
        self.corrections = {}  # (stem, word) -> what correct() said
        self.named = set()  # raw words of tools' and servers' names
        spellings = {}  # raw word of any field -> its stem
        totals = dict.fromkeys(SEARCH_FIELDS, 0)
        boilerplate = _boilerplate(tools)
        for index, tool in enumerate(tools):
            name = tool["name"]
            search = tool.get("search") or {}
            summary = tool.get("summary") or ""
            if summary.startswith(name):
                summary = summary[len(name):]  # "(a: int, b: int) -> {sum: int}  What it does."
            self.names.append(name)
            self.summaries.append(summary)
            self.copies.append((search.get("name") or name, search.get("description") or ""))
            self.exact.setdefault(name.lower(), index)
            self.exact_words.setdefault(" ".join(_raw_words(name)), index)
            listed = search.get("name") or ""
            for called in {name.lower(), listed.lower()} - {""}:
                if _TOOL_NAME.fullmatch(called):
                    self.called.setdefault(called, []).append(index)
            if listed:
                self.exact.setdefault(listed.lower(), index)
                self.exact_words.setdefault(" ".join(_raw_words(listed)), index)
            texts = {field: search.get(field) or "" for field in SEARCH_FIELDS}
            signature = tool.get("signature") or {}
            params = [p for p in signature.get("params") or () if isinstance(p, dict)]
            texts["values"] = " ".join(
                a or b for p in params for literal in _LITERAL.findall(str(p.get("type") or ""))
                for a, b in _LITERAL_VALUE.findall(literal))
            self.arguments.append((len(params), sum(1 for p in params if p.get("required"))))
            self.paths.append(any(
                set(_raw_words(str(p.get("name") or ""))) & QUERY.TABLES.FILE_PARAMETERS for p in params))
            self.kinds.append(frozenset(
                QUERY.PARAMETER_KIND[p.get("name")] for p in params
                if p.get("required") and p.get("name") in QUERY.PARAMETER_KIND))
            if not texts["name"]:
                texts["name"] = name
            if not texts["description"]:
                texts["description"] = tool.get("stub") or ""
            elif boilerplate:
                texts["description"] = " ".join(
                    s for s in _SENTENCE_END.split(texts["description"]) if s.strip().lower() not in boilerplate)
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
                    self.named.update(spellings[spelling] for spelling in raw)  # and their stems
            self.lengths.append(lengths)
            self.name_words.append(tuple(set(search_words(texts["name"]))))
            self.servers.append(frozenset(_raw_words(texts["server"])))
            self.results.append(frozenset(
                _stem(w) for line in texts["output"].splitlines() for w in _raw_words(line.split(" ", 1)[0])
                if w not in STOP_WORDS))
            verb = _raw_words(texts["name"])[:1]
            self.mutating.append(bool(verb) and verb[0] in MUTATING_VERBS)
            self.reading.append(bool(verb) and verb[0] in QUERY.READING_VERBS)
            changing = verb and (verb[0] in QUERY.REMOVING_VERBS or verb[0] in QUERY.MAKING_VERBS)
            self.objects.append(next(
                (GRAPH_OBJECTS[w] for w in map(_stem, _raw_words(texts["name"])) if w in GRAPH_OBJECTS), None)
                if changing else None)
            self.actions.append(
                "remove" if verb and verb[0] in QUERY.REMOVING_VERBS else
                "make" if verb and verb[0] in QUERY.MAKING_VERBS else None)
            deprecated = "deprecat" in (texts["title"] + " " + texts["description"]).lower()
            self.factors.append(DEPRECATED_FACTOR if deprecated else 1.0)
        count = max(1, len(tools))
        self.average = {f: max(1.0, totals[f] / count) for f in SEARCH_FIELDS}
        self.count = len(tools)
        # Each server's own words (its domain): words at least half of its
        # tools hold (three tools or more) and at most DOMAIN_SHARE of the
        # catalog's: memory's "entity", "relation", "graph", "knowledge".
        members = {}
        for index, server in enumerate(self.servers):
            members.setdefault(server, []).append(index)
        self.domains = {}  # stem -> {server words: 1}
        for word, tools_fields in self.postings.items():
            if len(tools_fields) > DOMAIN_SHARE * self.count:
                continue
            held = {}
            for index in tools_fields:
                held[self.servers[index]] = held.get(self.servers[index], 0) + 1
            for server, count in held.items():
                if len(members[server]) >= 3 and count * 2 >= len(members[server]) and word not in server:
                    self.domains.setdefault(word, set()).add(server)
        for tools_fields in self.postings.values():
            for index, fields in tools_fields.items():
                tools_fields[index] = self._tf(index, fields)
        # Spellings a typo may stand for: the catalog's words and the tables'.
        self.spellings = {w: s for w, s in spellings.items() if w.isalpha() and len(w) >= 3}
        self.grams = _gram_index(w for w in self.spellings if w not in _LEXICON_WORDS)

    def knows(self, word):
        """Whether ``word`` (as written, lower case) is a word of the
        catalog, of the tables, or one that says nothing."""
        stem = _stem(word)
        return (word in STOP_WORDS or word in self.spellings or word in _LEXICON_WORDS or stem in self.postings
                or stem in LEXICON or word in COMPOUND_WORDS or not word.isalpha())

    def unknown(self, word):
        """Whether ``word`` is neither known nor a typo of a known word (a
        name: "Bob")."""
        return not self.knows(word) and self.correct(_stem(word), word) is None

    def function_word(self, word, first=False):
        """``word``, or the question word or word that says nothing it is a
        typo of ("waht" -> "what", "teh" -> "the"): one letter wrong in a
        word of three letters or more that nothing else knows. Opening the
        query, a question word wins over a known word as near ("waht" is
        "what", not "wait"); elsewhere a known word wins."""
        if len(word) < 3 or self.knows(word) or _common(word):
            return word
        near = sorted(known for variant in _deletions(word) for known in _FUNCTION_DELETIONS.get(variant, ())
                      if _typo_distance(word, known, 1) <= 1)
        if not near:
            return word
        if first:
            for known in near:
                if known in QUESTION_WORDS:
                    return known
        if self.correct(_stem(word), word) is not None:
            return word
        return near[0]

    def correct(self, stem, word):
        """See _correct; remembered per word (a query asks it more than once)."""
        key = (stem, word)
        if key not in self.corrections:
            self.corrections[key] = self._correct(stem, word)
        return self.corrections[key]

    def _correct(self, stem, word):
        """``(letters wrong, {stems})`` for a word (``stem`` as stemmed,
        ``word`` as written) neither the catalog nor the tables know: the
        known words closest to it, one letter away, or two when one of the
        two words is longer than TYPO_SHORT letters and neither shorter; a
        word of two or three letters only stands for a word of a tool's or
        server's name. ``None`` when there is none."""
        if (len(word) < 2 or len(word) > TYPO_LONGEST or stem in self.postings or stem in LEXICON
                or word in STOP_WORDS or word in self.spellings or word in _LEXICON_WORDS
                or _common(word)):
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
            # People rarely mistype a word's first letter, and a word with
            # another first letter is most often another real word ("take"
            # is not "make", "wrong" not "long"): the first letter must
            # match, or the first two be swapped.
            if known[0] != word[0] and known[:2] != word[1::-1]:
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
        # A word three or more known words are equally near to is not a
        # slip of one of them, but most often a word of its own ("call",
        # "hand", "home"): no guess.
        if not found or best > bound or len(found) > 2:
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
        read = read_query(query, self)
        domain = {}  # server words -> how much the query speaks of its domain
        for weight, members in read.groups:
            spoken = {}
            for word, member in members.items():
                for server in self.domains.get(word, ()):
                    spoken[server] = max(spoken.get(server, 0.0), weight * member)
            for server, much in spoken.items():
                domain[server] = domain.get(server, 0.0) + much
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
        # A query naming a server ("bravo memory", "memory_bravo", "the
        # time server") asks for its tools: the tools of the servers it
        # names best gain. A word that says how much ("everything") names
        # a server only beside another word of its name or "server".
        named = {}
        # A server's name said anywhere as a word of its own ("... called
        # sandbox on github") names it, but not inside a value
        # ("memory.md", "'time'").
        said = read.words | {w.lower() for w in _SAID_WORD.findall(_QUOTED.sub(" ", query))}
        if said:
            scoped = "server" in said
            for words in set(self.servers):
                hits = words & said
                if hits and (scoped or len(hits) > 1 or not hits <= WHOLE_WORDS):
                    named[words] = len(hits)
        # A word the query also asks for in full ("resource_link blocks,
        # not embedded resources") is not unwanted.
        unwanted = {word for word in read.unwanted if asked.get(word, 0.0) < 1.0}
        most = max(named.values(), default=0)
        loudest = max(domain.values(), default=0.0)
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
                if unwanted.intersection(words):
                    score *= UNWANTED_IN_NAME
            factor = self.factors[index]
            if factor != 1.0 and any(_stem(w) not in read.unwanted for w in read.words & OLD_WORDS):
                factor = 1.0 / factor  # "the legacy reader" (not "not the legacy one"): a deprecated tool is asked for
            score *= factor * (matched[index] / total_weight) ** COORDINATION
            if read.question and self.mutating[index]:
                score *= MUTATING_IN_QUESTION
            elif read.changes and self.reading[index]:
                score *= READING_IN_CHANGE
            if read.action and self.actions[index] and read.action != self.actions[index]:
                score *= OPPOSITE_ACTION
            if read.about and read.about == self.objects[index] and (read.action or not read.question):
                score *= GRAPH_OBJECT
            if most:
                score *= 1.0 + SERVER_BONUS * named.get(self.servers[index], 0) / most
            if loudest:
                score *= 1.0 + DOMAIN_BONUS * domain.get(self.servers[index], 0.0) / loudest
            results = self.results[index]
            if read.question and results:
                # A question or a reading request naming what a tool returns
                # ("list all entities and relations") asks for that tool.
                cover = sum(min(1.0, asked.get(word, 0.0)) for word in results) / len(results)
                score *= 1.0 + RESULT_COVER_BONUS * cover
            takes, requires = self.arguments[index]
            if read.whole and not requires:
                score *= WHOLE_NO_ARGUMENT
            if read.values and not takes:
                score *= VALUES_NO_ARGUMENT
            if self.kinds[index] - read.signs:
                score *= KIND_NOT_SHOWN
            if read.files and takes and not self.paths[index]:
                score *= FILE_NOT_TAKEN
            if read.files and words and "directory" in words and asked.get("directory", 0.0) < 0.5:
                score *= FILE_NOT_DIRECTORY
            ranked.append((-score, index))
        ranked.sort()
        order = [index for _, index in ranked]
        self.scores = {index: -score for score, index in ranked}
        # A query that is exactly a tool's name, or its words, finds that
        # tool first.
        exact = self.exact.get(query.strip().lower())
        if exact is None:
            exact = self.exact_words.get(" ".join(_raw_words(query)))
        self.exact_hit = exact is not None
        if exact is not None:
            order = [exact] + [i for i in order if i != exact]
        elif self.called:
            # One tool named as the one to use in a longer request ("read
            # /etc/hosts with read_file", "call get_sum on 2 and 3"; not
            # "the one before read_text_file"): that tool first, its
            # copies in their order.
            named = {token.lower() for token in _TOOL_NAME.findall(query)
                     if token.lower() in self.called and _said_to_use(query, token)}
            if len(named) == 1:
                chosen = set(self.called[named.pop()])
                order = [i for i in order if i in chosen] + [i for i in order if i not in chosen]
                self.exact_hit = True  # named: meaning need not be asked
        return order

    def unsure(self):
        """After ``rank``: true when its words leave the question open (no
        tool scored, or the next tool that is no copy of the first scored
        within ``MEANING_GATE`` of it) and meaning should be asked. A tool
        named exactly, or alone in scoring (with its copies), is sure."""
        if self.exact_hit:
            return False
        if not self.scores:
            return True
        ranked = sorted(self.scores.items(), key=lambda item: -item[1])
        first, top = ranked[0]
        # Copies of the first (the same tool on another server: the same
        # listed name and description) tie with it in meaning too.
        second = next((score for index, score in ranked[1:]
                       if self.copies[index] != self.copies[first]), None)
        return second is not None and second >= MEANING_GATE * top

    def blend(self, near):
        """After ``rank``: every tool, best first, by its words' score (the
        best's as 1) plus ``MEANING_WEIGHT`` times its cosine with the
        question (``near``: name -> cosine, from the host's encoder)."""
        top = max(self.scores.values(), default=0.0) or 1.0
        scores = self.scores
        combined = [(-(scores.get(i, 0.0) / top + MEANING_WEIGHT * near.get(name, 0.0)), i)
                    for i, name in enumerate(self.names)]
        combined.sort()
        return [index for _, index in combined]


def read_near(near):
    """The host's answer by meaning (``[[name, cosine], ...]``) as a dict
    from name to cosine; None when it is none or holds no pair."""
    if not isinstance(near, list):
        return None
    pairs = {}
    for pair in near:
        if (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)
                and isinstance(pair[1], (int, float)) and not isinstance(pair[1], bool)):
            pairs[pair[0]] = float(pair[1])
    return pairs or None


# Search by meaning (issue 43): when words leave the two best tools
# within this ratio of each other (or match none), the host's sentence
# encoder is asked how near the question is to each tool, and each tool's
# words score (the best's as 1) gains this weight times its cosine. Chosen
# on the tuning sets, measured once on servers nobody tuned for
# (testing/search-eval/README.md).
MEANING_GATE = 0.8
MEANING_WEIGHT = 1.0


# A name as tools have them: words joined by "_", "-" or ".", or camel
# case ("read_file", "get-env", "getEnv"); and the words before one that
# say it is the tool to use.
_TOOL_NAME = re.compile(r"\b[A-Za-z][a-z0-9]*(?:[_.-][A-Za-z0-9]+|[A-Z][a-z0-9]+)+\b")
_TO_USE = re.compile(r"\b(?:with|use|using|call|calling|via|run|invoke|through|try)\s+(?:the\s+)?"
                     r"(?:(?:old|deprecated|legacy|plain|original|basic)\s+)?(?:tool\s+)?[`'\"]?$",
                     re.I)
# What says a tool named did not do ("read_file failed on the folder").
_FAILED = re.compile(r"\b(?:fail(?:s|ed)?|returned\s+nothing|instead|errors?|error(?:ed|s)|broke|broken|didn'?t|did\s+not"
                     r"|doesn'?t|does\s+not|won'?t|can'?t|cannot)\b", re.I)
_TURNED_AWAY = re.compile(r"(?:\b(?:not|never|no|dont|instead\s+of|rather\s+than|without|except|avoid)|n['’]t)\s+(?:\w+\s+)?\S*$",
                          re.I)


def _said_to_use(query, token):
    """Whether the words before ``token`` (a tool's name) in ``query`` say it
    is the one to use ("read it with", "call", or none: the name opens the
    request and nothing after says it failed), not one to avoid ("not
    with")."""
    at = query.find(token)
    before = query[:at][-32:]
    if _TURNED_AWAY.search(before) is not None:
        return False
    if not before.strip():
        return _FAILED.search(query, at + len(token)) is None  # "search_files returned nothing, so list /tmp instead"
    return _TO_USE.search(before) is not None


def make_search_tools(tools, meaning=None):
    """``search_tools(query, limit=5)`` over ``tools`` (the cell's list of
    ``{"name", "stub", "summary", "search"}``); ``meaning(query)``, when
    given, asks the host for each tool's nearness in meaning (a dict from
    name to cosine, or None when it cannot say)."""
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
        are left out. When words leave it open and the gateway has a
        sentence encoder, nearness in meaning decides too (then every tool
        may be returned, up to ``limit``).
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
        if meaning is not None and found.unsure():
            near = meaning(query)
            if near:
                order = found.blend(near)
        if limit is not None:
            order = order[:max(0, limit)]
        return {found.names[i]: found.summaries[i] for i in order}

    return search_tools
