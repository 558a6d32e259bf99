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


def _load_tables():
    """``search_tables.py`` from this file's folder (not on ``sys.path``)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "search_tables.py")
    spec = importlib.util.spec_from_file_location("code_mode_search_tables", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TABLES = _load_tables()
QUESTION_WORDS, RECALL_WORDS = TABLES.QUESTION_WORDS, TABLES.RECALL_WORDS
NAMING_WORDS, HOW_WORDS, STOP_WORDS = TABLES.NAMING_WORDS, TABLES.HOW_WORDS, TABLES.STOP_WORDS
COMPOUND_WORDS, LEADING_VERBS, PHRASES = TABLES.COMPOUND_WORDS, TABLES.LEADING_VERBS, TABLES.PHRASES
SYNONYM_GROUPS, RELATED_GROUPS = TABLES.SYNONYM_GROUPS, TABLES.RELATED_GROUPS
ZONE_ABBREVIATIONS, ZONE_WORDS, TIME_WORDS = TABLES.ZONE_ABBREVIATIONS, TABLES.ZONE_WORDS, TABLES.TIME_WORDS
CLOCK_WORDS, EXTENSION_KINDS, EXTENSION_HINTS = TABLES.CLOCK_WORDS, TABLES.EXTENSION_KINDS, TABLES.EXTENSION_HINTS
READING_QUESTIONS, WHOLE_WORDS, MUTATING_VERBS = TABLES.READING_QUESTIONS, TABLES.WHOLE_WORDS, TABLES.MUTATING_VERBS
READING_VERBS, ASIDE_WORDS, PERMISSION_WORDS = TABLES.READING_VERBS, TABLES.ASIDE_WORDS, TABLES.PERMISSION_WORDS

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
# A query asking for all of something ("all entities", "everything")
# favours the tools that need no argument: their score is multiplied by this.
WHOLE_NO_ARGUMENT = 1.3
# A word asking for all of something ("everything", "entire") says how much
# is wanted, not what: it weighs this much ("list everything" is no
# question to server-everything).
WHOLE_WORD_WEIGHT = 0.3
# A query holding values (file names, paths, quoted text, numbers) wants a
# tool that takes arguments: one that takes none has its score multiplied
# by this.
VALUES_NO_ARGUMENT = 0.7
# The tools of the server a query names best have their score multiplied
# by 1 + this (the tools of a server it names less, by less).
SERVER_BONUS = 1.0
# A query speaking of a server's domain (the words most of its tools hold
# and few other tools: memory's "entity", "graph") favours that server's
# tools: their score is multiplied by up to 1 + this. A word held by more
# than DOMAIN_SHARE of the catalog's tools is no server's own.
DOMAIN_BONUS = 0.3
DOMAIN_SHARE = 0.3
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
    "output": (0.6, 0.6),
    "values": (VALUES_FIELD_WEIGHT, 0.3),
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
DEPRECATED_FACTOR = 0.8
# A question (QUESTION_WORDS: what, which, when, ...) asks for something to
# be read: these words join the query at this weight ("what time is it" ->
# get the time).
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
ONE_FILE_QUESTION_WEIGHT = 0.8
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


_PHRASE = re.compile(r"\b(" + "|".join(sorted((re.escape(p) for p in PHRASES), key=len, reverse=True)) + r")\b", re.I)


# An IANA time zone name: "Europe/Madrid", "America/Argentina/Salta".
_IANA_ZONE = re.compile(r"^(?:Africa|America|Antarctica|Arctic|Asia|Atlantic|Australia|Europe|Indian|Pacific|Etc)"
                        r"/[A-Za-z_+-]+(?:/[A-Za-z_+-]+)?$", re.I)
# A time of day: "4pm", "9:30", "14:30", "10am".
_CLOCK = re.compile(r"^\d{1,2}(?::\d{2})?(?:am|pm|h)$|^\d{1,2}:\d{2}$", re.I)
# Two numbers added: "2+2", "19.5 + 0.5".
_SUM = re.compile(r"\d\s*\+\s*\.?\d")
# A file name ("notes.txt", "main.py", ".env") or a bare extension (".gz").
_FILE_NAME = re.compile(r"^[\w-]*\.[A-Za-z][A-Za-z0-9]{0,4}$|^\.[A-Za-z][\w.-]{0,40}$")
EXTENSIONS = {ext: kind for kind, exts in EXTENSION_KINDS.items() for ext in exts.split()}
# Kinds of file whose extension, written as a word ("a wav file"), says
# what the file is.
MEDIA_KINDS = ("image", "audio", "video")
BARE_EXTENSION = 0.5
# Punctuation that ends a clause of a query, after a word.
_CLAUSE_ENDS = ",;:!?."
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
# Capitalised words in a row: "New York", "Los Angeles".
_PROPER_RUN = re.compile(r"\b[A-Z][a-z]+(?: [A-Z][a-z]+)+\b")
# Where a clause of a query ends.
_CLAUSES = re.compile(r"[,;:.!?]+\s")
# Quoted text in a query: 'likes tea', "Project X", `main`.
_QUOTED = re.compile(r"(?<!\w)(['\"`])([^'\"`]{1,120})\1(?!\w)")


# Suffixes that make a word of another (longest first), each with the
# letters the rest must keep (and how many letters of the suffix stay):
# "observation" -> "observ", "creation" -> "creat" (not "cre"),
# "compression" -> "compress", "readable" -> "read", "recursively" ->
# "recursive".
_DERIVED = (("ation", 5), ("tion", 4, 1), ("sion", 4, 1), ("able", 4), ("ly", 5))
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
    # Words made from a verb read as the verb: "creation", "deletion",
    # "compression", "observation", "readable", "recursively".
    if word.endswith("ication") and len(word) >= 10:
        word = word[:-7] + "y"  # "modification" -> "modify", "notifications" -> "notify"
    for suffix, keep, *back in _DERIVED:
        cut = len(suffix) - (back[0] if back else 0)  # "tion" leaves its "t"
        if word.endswith(suffix) and len(word) - cut >= keep:
            word = word[:-cut]
            break
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
    if word.endswith("at") and len(word) >= 7:
        word = word[:-2]  # "simulate", "simulated" -> "simul", as "simulation"
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
def _deletions(word):
    """``word`` and each spelling of it with one letter left out."""
    return {word} | {word[:i] + word[i + 1:] for i in range(len(word))}


# Words that say nothing, long enough to be read through a typo, by each
# of their spellings with a letter left out: a word one letter away from
# one shares such a spelling with it.
_FUNCTION_DELETIONS = {}
for _word in STOP_WORDS | QUESTION_WORDS:
    if _word.isalpha() and len(_word) >= 3:
        for _variant in _deletions(_word):
            _FUNCTION_DELETIONS.setdefault(_variant, set()).add(_word)


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
        if token[-1] in _CLAUSE_ENDS and bare[-1] not in _CLAUSE_ENDS:
            end = ","  # where a clause ends: after this token
        else:
            end = None
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
            kind = EXTENSIONS.get(lower)
            if kind in MEDIA_KINDS:  # "a wav file", "PNG image": less than a file's name says
                hints.extend((word, weight * BARE_EXTENSION) for word, weight in EXTENSION_HINTS[kind])
        if end:
            plain.append(end)
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


def query_terms(query, index=None):
    """The query as weighted groups of stemmed words: for each word of the
    query, ``(weight, {word: 1, synonym: SYNONYM_WEIGHT, related word:
    RELATED_WEIGHT, ...})``. ``index`` (a SearchIndex) says which words
    the catalog knows; without it no word is read as a typo."""
    return read_query(query, index).groups


class Query:
    """What a query asks: its weighted word groups, whether it is a
    question, and what its values are."""

    __slots__ = ("groups", "question", "files", "values", "whole", "words")

    def __init__(self, groups, question, files, values, whole, words):
        self.groups = groups
        self.question = question  # asks what is, not to change anything
        self.files = files  # how many file names it holds
        self.values = values  # how many values (file names, paths, URLs, numbers, quotes) it holds
        self.whole = whole  # asks for all of something ("all", "everything")
        self.words = words  # its words as written (lower case), names of tools and servers too


def read_query(query, index=None):
    """Read ``query`` (see query_terms) into a Query."""
    named = index.named if index is not None else None
    correct = index.correct if index is not None else None
    text, arguments, extra, files = _query_tokens(query)
    values = files + len(arguments)
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
    opener = None  # the clause that asks a question ("charlie memory, who is Ivy"): its words
    for clause in _CLAUSES.split(text):
        words = _raw_words(clause)
        if words and index is not None:
            words[0] = index.function_word(words[0], first=True)
        if words and words[0] in LEADING_VERBS:
            words[:1] = LEADING_VERBS[words[0]].split()
        if words and (not raw or words[0] in QUESTION_WORDS and not (opener and opener[0] in QUESTION_WORDS)):
            opener = words
        raw += words
    if index is not None:
        raw = [index.function_word(w) for w in raw]
    opener = opener or []
    question = opener[:1] != [] and opener[0] in QUESTION_WORDS
    reads = opener[:1] != [] and (opener[0] in READING_VERBS or opener[0] in READING_QUESTIONS
                                  and not (opener[0] == "how" and opener[1:2] == ["do"]))
    whole = bool(WHOLE_WORDS.intersection(raw))
    raw += named_words
    if question:
        extra += [(word, QUESTION_WEIGHT) for word in QUESTION_HINTS]
    # Capitalised words after the first are names (Tokyo, New York,
    # Alice): arguments of the call, not words of the tool.
    names = {w.lower() for w in _PROPER_NAME.findall(text)[1:]}
    first = _PROPER_NAME.match(text.lstrip())
    if first is None:
        names |= {w.lower() for w in _PROPER_NAME.findall(text)[:1]}
    elif index is not None and index.unknown(first.group(0).lower()):
        names.add(first.group(0).lower())  # "Bob reports to Alice"
    names -= LEXICON.keys() | set(COMPOUND_WORDS)  # "Read", "Echo": words, not names
    for run in _PROPER_RUN.findall(text):
        # "New York", "Los Angeles": a name of several words, each a name
        # when one of them is no word of the tables ("Read Text File" is
        # no name).
        words = run.lower().split()
        if any(_stem(w) not in LEXICON and w not in STOP_WORDS and w not in COMPOUND_WORDS for w in words):
            names.update(words)
    if question:
        extra += [(QUESTION_SUBJECTS[word], 1.0) for word in opener[:1] if word in QUESTION_SUBJECTS]
        extra += [(WHERE_HINT, WHERE_WEIGHT) for word in opener[:1] if word == "where"]
        if files == 1 and opener[0] != "where":
            extra.append((ONE_FILE_QUESTION_HINT, ONE_FILE_QUESTION_WEIGHT))
        if names or RECALL_WORDS.intersection(raw):
            extra.append((NAMED_QUESTION_HINT, NAMED_QUESTION_WEIGHT))
    elif names:
        extra.append((NAMED_HINT, NAMED_HINT_WEIGHT))
    weighted = []  # (stem, weight, the word as written if it may be a typo)
    previous = before = None
    for word in raw:
        if previous == "how" and word in HOW_WORDS:
            previous = word
            continue  # "how many": a question, not "many" things
        # The verb after "allowed to" or "before" is not what is asked for
        # ("where am I allowed to save files", "ask before deleting").
        aside = previous in ASIDE_WORDS or (previous == "to" and before in PERMISSION_WORDS)
        before, previous = previous, word
        expansion = COMPOUND_WORDS.get(word)
        for part in (expansion.split() if expansion else [word]):
            if part in STOP_WORDS or (len(part) < 2 and not part.isdigit()):
                continue
            if word in names:
                weighted.append((_stem(part), PROPER_NAME_WEIGHT, None))
            elif aside:
                weighted.append((_stem(part), ARGUMENT_WEIGHT, None))
            elif part in WHOLE_WORDS:
                weighted.append((_stem(part), WHOLE_WORD_WEIGHT, None))  # how much, not what
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
    return Query(list(groups.values()), reads, files, values, whole, frozenset(raw))


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
        self.mutating = []  # per tool: its name opens with a verb that changes something
        self.arguments = []  # per tool: (parameters it takes, parameters it requires)
        self.servers = []  # per tool: the words of its server's name
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
            self.exact.setdefault(name.lower(), index)
            self.exact_words.setdefault(" ".join(_raw_words(name)), index)
            listed = search.get("name") or ""
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
            self.lengths.append(lengths)
            self.name_words.append(tuple(set(search_words(texts["name"]))))
            self.servers.append(frozenset(_raw_words(texts["server"])))
            verb = _raw_words(texts["name"])[:1]
            self.mutating.append(bool(verb) and verb[0] in MUTATING_VERBS)
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
        if len(word) < 3 or self.knows(word):
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
        if read.words:
            scoped = "server" in read.words
            for words in set(self.servers):
                hits = words & read.words
                if hits and (scoped or len(hits) > 1 or not hits <= WHOLE_WORDS):
                    named[words] = len(hits)
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
            score *= self.factors[index] * (matched[index] / total_weight) ** COORDINATION
            if read.question and self.mutating[index]:
                score *= MUTATING_IN_QUESTION
            if most:
                score *= 1.0 + SERVER_BONUS * named.get(self.servers[index], 0) / most
            if loudest:
                score *= 1.0 + DOMAIN_BONUS * domain.get(self.servers[index], 0.0) / loudest
            takes, requires = self.arguments[index]
            if read.whole and not requires:
                score *= WHOLE_NO_ARGUMENT
            if read.values and not takes:
                score *= VALUES_NO_ARGUMENT
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
