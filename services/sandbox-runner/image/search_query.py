"""Reading for search_tools: the words of a text and what a query asks.

Words are split at snake, kebab and camel case, lower-cased and lightly
stemmed; a query is read into weighted groups of words (with their synonyms
and related words from ``search_tables.py``), its values (file names, paths,
quoted text, numbers, names) apart. ``tool_search.py`` ranks the catalog's
tools by what this returns; it loads this file, and this file the tables,
from their own folder (``/opt/code-mode`` in the image, not on the code's
``sys.path``).
"""

import importlib.util
import os
import re

def _load_beside(name):
    """``name``.py from this file's folder (not on ``sys.path``)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), name + ".py")
    spec = importlib.util.spec_from_file_location("code_mode_" + name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TABLES = _load_beside("search_tables")
# What a request about named things is about (search_graph.py).
GRAPH = _load_beside("search_graph").GraphReading(TABLES)
# A request in another language, read in English (search_languages.py).
_in_english = _load_beside("search_languages").in_english
# How text becomes words: split, stemmed, misspelt (search_words.py).
WORDS = _load_beside("search_words")
_stem, _raw_words, _STEMS = WORDS.stem, WORDS.raw_words, WORDS.STEMS
_grams, _gram_index, _typo_distance, _deletions = WORDS.grams, WORDS.gram_index, WORDS.typo_distance, WORDS.deletions
QUESTION_WORDS, RECALL_WORDS = TABLES.QUESTION_WORDS, TABLES.RECALL_WORDS
NAMING_WORDS, HOW_WORDS, STOP_WORDS = TABLES.NAMING_WORDS, TABLES.HOW_WORDS, TABLES.STOP_WORDS
COMPOUND_WORDS, LEADING_VERBS, PHRASES = TABLES.COMPOUND_WORDS, TABLES.LEADING_VERBS, TABLES.PHRASES
PARTICLE_VERBS = TABLES.PARTICLE_VERBS
RELATION_WORDS, NEW_THING_WORDS, FACT_WORDS = TABLES.RELATION_WORDS, TABLES.NEW_THING_WORDS, TABLES.FACT_WORDS
FILE_THING_WORDS, WHOLLY_WORDS, FOLDER_NAMES = TABLES.FILE_THING_WORDS, TABLES.WHOLLY_WORDS, TABLES.FOLDER_NAMES
NOW_WORDS, CONVERT_WORDS = TABLES.NOW_WORDS, TABLES.CONVERT_WORDS
NEGATING_WORDS, SUBJECT_WORDS, PAST_FORMS = TABLES.NEGATING_WORDS, TABLES.SUBJECT_WORDS, TABLES.PAST_FORMS
COLLECTION_WORDS = TABLES.COLLECTION_WORDS
BE_FORMS = TABLES.BE_FORMS
REMOVING_VERBS, MAKING_VERBS = TABLES.REMOVING_VERBS, TABLES.MAKING_VERBS
SYNONYM_GROUPS, RELATED_GROUPS = TABLES.SYNONYM_GROUPS, TABLES.RELATED_GROUPS
ZONE_ABBREVIATIONS, ZONE_WORDS, TIME_WORDS = TABLES.ZONE_ABBREVIATIONS, TABLES.ZONE_WORDS, TABLES.TIME_WORDS
CLOCK_WORDS, EXTENSION_KINDS, EXTENSION_HINTS = TABLES.CLOCK_WORDS, TABLES.EXTENSION_KINDS, TABLES.EXTENSION_HINTS
READING_QUESTIONS, WHOLE_WORDS, MUTATING_VERBS = TABLES.READING_QUESTIONS, TABLES.WHOLE_WORDS, TABLES.MUTATING_VERBS
READING_VERBS, ASIDE_WORDS, PERMISSION_WORDS = TABLES.READING_VERBS, TABLES.ASIDE_WORDS, TABLES.PERMISSION_WORDS
LINKING_WORDS, PARAMETER_KINDS, KIND_SIGNS = TABLES.LINKING_WORDS, TABLES.PARAMETER_KINDS, TABLES.KIND_SIGNS
CHANGING_VERBS, PLACE_QUESTIONS, MODAL_WORDS = TABLES.CHANGING_VERBS, TABLES.PLACE_QUESTIONS, TABLES.MODAL_WORDS
PLACING_VERBS, FOLDER_WORDS = TABLES.PLACING_VERBS, TABLES.FOLDER_WORDS
TEXT_THINGS, RENAMING_VERBS, FILLING_WORDS = TABLES.TEXT_THINGS, TABLES.RENAMING_VERBS, TABLES.FILLING_WORDS
FILE_COMMANDS, LINK_WORDS, LISTING_COMMANDS = TABLES.FILE_COMMANDS, TABLES.LINK_WORDS, TABLES.LISTING_COMMANDS
LOG_LEVELS, KNOWN_FILES, ENVIRONMENT_NAMES = TABLES.LOG_LEVELS, TABLES.KNOWN_FILES, TABLES.ENVIRONMENT_NAMES
METADATA_WORDS, GRAPH_WORDS = TABLES.METADATA_WORDS, TABLES.GRAPH_WORDS
PLACE_UNKNOWN, SEARCH_VERBS, SHELL_COMMANDS = TABLES.PLACE_UNKNOWN, TABLES.SEARCH_VERBS, TABLES.SHELL_COMMANDS
CONTENT_WORDS, PROPERTY_QUESTIONS, KNOWN_EXTENSIONS = TABLES.CONTENT_WORDS, TABLES.PROPERTY_QUESTIONS, TABLES.KNOWN_EXTENSIONS
IMAGE_WORDS, SHOWING_WORDS, POINTERS, RESOURCE_WORDS = TABLES.IMAGE_WORDS, TABLES.SHOWING_WORDS, TABLES.POINTERS, TABLES.RESOURCE_WORDS

# --------------------------------------------------------------------------
# Words, and what a query asks
# --------------------------------------------------------------------------

# A synonym counts this much of the word itself; a word of the same need
# (RELATED_GROUPS) this much.
SYNONYM_WEIGHT = 0.5
RELATED_WEIGHT = 0.3
# A word asking for all of something ("everything", "entire") says how much
# is wanted, not what: it weighs this much ("list everything" is no
# question to server-everything).
WHOLE_WORD_WEIGHT = 0.3
# A query asking for all of something asks for a tool reading the entire
# thing: "entire" joins it at this weight.
WHOLE_HINT_WEIGHT = 0.625
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
# An image asked for to see it shown, without any file, path or value
# naming one ("need an image content block to test my UI"), is any image:
# the tiny sample: "tiny" joins the query at this weight.
ANY_IMAGE_WEIGHT = 0.5
# Pointers to resources, several ("clickable references to several
# resources", "sample URIs as links"): "links" joins the query at this
# weight.
POINTERS_WEIGHT = 0.6
# A question asking where or which is allowed ("where can you write
# files?") asks for what is allowed: "allowed" joins it at this weight.
PERMISSION_QUESTION_WEIGHT = 1.0
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
# Two log levels or more ("debug, warning, error") ask for messages of
# several levels: "level" joins the query at this weight.
LOG_LEVELS_WEIGHT = 0.5
# How many words after a negating word ("no", "without") say what is not
# wanted: they weigh as arguments.
NEGATED_WORDS = 2
# What a request about named things is about ("relation", "observation",
# "entity") joins it as a word at this weight.
GRAPH_HINT_WEIGHT = 1.0


_PHRASE = re.compile(r"\b(" + "|".join(sorted((re.escape(p) for p in PHRASES), key=len, reverse=True)) + r")\b", re.I)
_CODE_CALL = re.compile(r"\b([A-Za-z_][\w.]*)\((?=[^()]*\))")
# A shell redirection (">" or ">>") before a file or path; no tag's ">" ("<target>").
_REDIRECT = re.compile(r"</?[A-Za-z][\w:.-]{0,40}(?:\s[^<>]{0,80})?>|(?<![>=-])(>>?)(?=\s*[\w./~])")
# A verb, at most three plain words, then its particle: "take it out".
_PARTICLE_VERB = re.compile(
    r"\b(" + "|".join(sorted({re.escape(v) for v, _ in PARTICLE_VERBS})) + r")\b((?:\s+[\w'-]+){0,3}?)\s+("
    + "|".join(sorted({re.escape(p) for _, p in PARTICLE_VERBS})) + r")\b", re.I)
# After an object, "off the desktop", "out of the folder" is a preposition
# before a place, not the verb's particle ("take it off her node" still
# removes, and so does "clean out the old notes").
_PLACE_AFTER = re.compile(r"\s+(?:the|a|an|this|that|these|those|of)\b", re.I)
# "anything (in memory) about ...": a search, with up to three words between.
_ANYTHING_ABOUT = re.compile(r"\b(?:any(?:thing)?|something)\b(?:\s+[\w'-]+){0,4}?\s+(?:about|on|regarding|concerning)\b",
                             re.I)


# An MCP method's name: its namespace, a slash, the method (camel case).
_MCP_METHOD = re.compile(
    r"^(?:notifications/)?(?:roots|sampling|elicitation|tools|resources|prompts|completion|logging|tasks|"
    r"notifications|ping|initialize)/[A-Za-z][A-Za-z_/]*$")
_MIME_TYPE = re.compile(r"^(?:image|audio|video|text|application|font)/[A-Za-z0-9][\w.+-]*$", re.I)
# A listing piped into a filter ("ls -R | grep csv", "find . | rg test"):
# a search.
_PIPED_FILTER = re.compile(r"\|\s*(?:grep|egrep|fgrep|rg|ag)\b")
_ANYONE_WHO = re.compile(
    r"\b(?:anyone|anybody|someone|somebody|any (?:one|person|people|contacts?|entit(?:y|ies)|nodes?|records?))\b"
    r"[^.?!;]{0,30}?\b(?:who|whose|that|which)\b|\b(?:anyone|anybody|anything)\s+(?:connected|related|linked)\s+to\b"
    r"|\b(?:notes?|anything|something|info)\s+(?:on|about)\s+(?:someone|somebody|anyone|anybody)\b", re.I)


def _particle_verb(match):
    """ "take it out" -> "remove it"; a verb and a particle that are no pair
    stay as written."""
    asked = PARTICLE_VERBS.get((match.group(1).lower(), match.group(3).lower()))
    if asked and match.group(2).strip() and _PLACE_AFTER.match(match.string, match.end()):
        return match.group(0)
    return asked + match.group(2) if asked else match.group(0)


# An IANA time zone name: "Europe/Madrid", "America/Argentina/Salta".
_IANA_ZONE = re.compile(r"^(?:Africa|America|Antarctica|Arctic|Asia|Atlantic|Australia|Europe|Indian|Pacific|Etc)"
                        r"/[A-Za-z_+-]+(?:/[A-Za-z_+-]+)?$", re.I)
# One time zone and no clock time ("time in UTC+9") asks for the time
# there now: "current" joins the query at this weight.
ONE_ZONE_CURRENT = 0.5
# Someone said to be in a zone, as the memory keeps it ("did I say Ana
# was on CET", "the remark about Chidi being in PST"): a fact, no time
# asked for.
_ZONE_OF_SOMEONE = re.compile(r"\b(?:is|was|were|are|being|been|lives?|lived|works?|worked|based)\s+(?:on|in)\s+"
                              r"((?-i:[A-Z]{2,5}))\b(?!\s+(?:time|now|hours?)\b)", re.I)
# The memory said besides RECALL_WORDS ("did I say", "the remark", "his entry").
_RECALLED = re.compile(r"\b(?:did\s+(?:i|we)\s+(?:say|note|write|record|tell)|noted|remark|entry|record(?:ed)?|memory)\b",
                       re.I)
# A zone as an offset from UTC: "UTC+9", "GMT-05:00", "utc+5:30".
_ZONE_OFFSET = re.compile(r"^(?:utc|gmt)[+-]\d{1,2}(?::?\d{2})?$", re.I)
# A time of day: "4pm", "9:30", "14:30", "10am".
_CLOCK = re.compile(r"^\d{1,2}(?::\d{2})?(?:am|pm|h)$|^\d{1,2}:\d{2}$", re.I)
# An SQL statement: a query of a database, its words are values. Its
# keywords in capitals ("SELECT count(*) FROM users", "DELETE FROM jobs"),
# or in lower case opening the query with what only SQL writes ("delete
# from jobs where ...", "update users set plan = 'pro'"), so that "delete
# from memory the entity Bob" stays English.
_SQL = re.compile(
    r"\b(?:SELECT\b.+\bFROM|INSERT\s+INTO|UPDATE\s+\S+\s+SET|DELETE\s+FROM|CREATE\s+TABLE|ALTER\s+TABLE)\b"
    r"|^\s*(?i:(?:select|insert\s+into|update\s+\S+\s+set|delete\s+from|create\s+table|alter\s+table)\b.*(?:[*=(;]|\bwhere\b))",
    re.S)
_SQL_VERB = re.compile(r"\s*(select|insert|update|delete|create|alter)\b", re.I)
# A condition on the name ("WHERE name = 'Dana'", "name IN (...)").
_SQL_BY_NAME = re.compile(r"\bwhere\s+(?:\w+\.)?name\s*(?:=|in\b)", re.I)
# A SELECT of no table computes its expression.
_SELECT_ONLY = re.compile(r"\s*select\b(?![^;]*\bfrom\b)", re.I)
# "SELECT * FROM t" with no condition: every row.
_SQL_EVERYTHING = re.compile(r"\s*select\s+\*\s+from\s+\S+\s*;?\s*$", re.I)
SQL_VERBS = TABLES.SQL_VERBS
# Shorthands read as what they ask (search_rewrites.py), in order.
# "<binary-extensions>" in a pattern: the extensions of files that are not
# text; "<extensions>": those of every file.
_BINARY_EXTENSIONS = "|".join(sorted({re.escape(e) for k, exts in EXTENSION_KINDS.items() if k != "text" for e in exts.split()}))
_EXTENSIONS = "|".join(sorted({re.escape(e) for exts in EXTENSION_KINDS.values() for e in exts.split()}))
_RULES = _load_beside("search_rewrites")  # loaded once: its rewrites and its first reading (BEFORE)
_REWRITES, _BEFORE = ([(re.compile(pattern.replace("<binary-extensions>", _BINARY_EXTENSIONS)
                                   .replace("<extensions>", _EXTENSIONS), re.I), by) for pattern, by in rules]
                      for rules in (_RULES.REWRITES, _RULES.BEFORE))
# A chat channel ("#general", "#ops-alerts"), not a number ("#42").
_CHANNEL = re.compile(r"(?<![\w#&])#([A-Za-z][\w-]*)")
# Two numbers or one-letter symbols added: "2+2", "19.5 + 0.5", "x + y"
# (not "C++" or "foo+bar").
_SUM = re.compile(r"(?:\d|\b[A-Za-z])\s*\+\s*(?:\.?\d|[A-Za-z]\b)")
# A file name ("notes.txt", "main.py", ".env") or a bare extension (".gz").
_FILE_NAME = re.compile(r"^[\w-]*(?:\.[A-Za-z0-9]{1,5})?\.[A-Za-z][A-Za-z0-9]{0,4}$|^\.[A-Za-z][\w.-]{0,40}$")
# A file name starting with digits that has a word in it (2024-06-01-notes.txt).
_DATED_NAME = re.compile(r"^[\d_-]*[A-Za-z]")
# A folder by the Unix custom of a ".d" ending ("conf.d", "sites.d").
_DOT_D_FOLDER = re.compile(r"^[\w-]+\.d/?$", re.I)
# The last part of a path with a longer extension than a file name's
# ("api.service"), or in a ".d" folder ("sudoers.d/admins"): a file too.
_FILE_AT_END = re.compile(r"(?:^|/)[\w-]+\.[A-Za-z]{6,10}$|\.d/[^/]+$", re.I)
# A possessive after a value ("notes.txt's").
_POSSESSIVE = re.compile(r"^(.+?)['\u2019]s$")
# "rename the function foo to bar": renaming a thing inside a file's text.
_RENAMING_TEXT = re.compile(
    r"\b(?:rename|renaming|renamed)\s+(?:(?:the|a|an|this|that|my|our|its|every|all|each)\s+)?("
    + "|".join(sorted(TEXT_THINGS, key=len, reverse=True)) + r")\b", re.I)
EXTENSIONS = {ext: kind for kind, exts in EXTENSION_KINDS.items() for ext in exts.split()}
# Kinds of file whose extension, written as a word ("a wav file"), says
# what the file is.
MEDIA_KINDS = ("image", "audio", "video")
BARE_EXTENSION = 0.5
# A path whose last part names no file ("node_modules/lodash", "./build",
# "src/") is a folder: "directory" joins the query at this weight (as
# "file" does for a file name).
FOLDER_PATH_WEIGHT = 1.0
# Punctuation that ends a clause of a query, after a word.
_CLAUSE_ENDS = ",;:!?."
# Punctuation around a token of the query.
_EDGE_PUNCTUATION = "\"'`()[]{}<>,;:!?."

# A parenthesis of examples in a description: "(e.g., 'Asia/Tokyo')". Its
# values show a format, not what the tool is for.
_EXAMPLES = re.compile(r"\((?:e\.g\.|eg\b|for example|such as)[^)]*\)", re.I)
# A capitalised word (not an acronym): "Tokyo", "Alice".
_PROPER_NAME = re.compile(r"\b[A-Z][a-z]+\b")
# Capitalised words in a row: "New York", "Los Angeles".
_PROPER_RUN = re.compile(r"\b[A-Z][a-z]+(?: [A-Z][a-z]+)+\b")
# A word in capitals ("PATH", "NODE_ENV").
_CAPITALS = re.compile(r"\b[A-Z][A-Z_]{1,}\b")
# Clauses: after punctuation, or a dash standing between words ("echo
# memory server - who works at Globex").
_CLAUSES = re.compile(r"[,;:.!?]+\s|\s[-\u2013\u2014]{1,2}\s|\u2014")
# An object in braces (one level of braces inside).
_OBJECT = re.compile(r"\{[^{}]*(?:\{[^{}]*\}[^{}]*)*\}")
# Where a value stood in the text, after a naming word ("a file called
# schema.sql somewhere": the name given, so the word after it stays a
# word) or opening a clause ("..., 3 is fine": no question).
_VALUE_GIVEN = "\x01"
# Nouns after a quoted word that make it the name of a feature asked for
# ("the 'roots' thing"), not a value.
FEATURE_NOUNS = frozenset("thing feature capability mechanism stuff".split())
# Something said to be over: what it was is to be taken away.
_ENDED = re.compile(r"\bno\s+longer\b|\banymore\b|\bbe\s+removed\b", re.I)
# Words joined by slashes as alternatives, not a path ("audience/priority", "PDF/A", "TCP/IP").
_ALTERNATIVES = re.compile(r"^[A-Za-z]{3,}(?:/[A-Za-z]{3,}){1,2}$|^[A-Z]{1,5}/[A-Z0-9]{1,5}$")
# A request relayed in someone's words ("user: 'can you open my notes.txt
# and tell me what it says'", "helpdesk: user asks 'is there a way to
# ...'"): the quoted words are the request, not a value of it. The words
# before name a person and end in a colon or a verb of saying; none of
# them acts on text (so "echo what the user typed: '...'" keeps its value).
_TEXT_VERBS = "echo|repeat|send|write|save|store|search|find|grep|put|add|append|note|remember|record|log|annotate" \
    "|quote|forward|reply|answer"
_PEOPLE = "user|users|customer|client|caller|requester|colleague|boss|manager|someone|they|she|he|helpdesk|support|ticket"
_SAYING = "says?|said|asks?|asked|asking|wrote|writes|wants|wanted|requests?|requested|reports?|reported|types?|typed"
_NO_TEXT_VERB = rf"(?:(?!\b(?:{_TEXT_VERBS})\b)[^'\"\n])"
_RELAYED = re.compile(
    rf"^(?P<lead>{_NO_TEXT_VERB}{{0,60}}?\b(?:{_PEOPLE})\b{_NO_TEXT_VERB}{{0,30}}?(?::|\b(?:{_SAYING})\b:?))"
    r"\s*(?P<quote>['\"])(?P<request>[^'\"\n]+)(?P=quote)(?P<tail>\s*[.!?]?\s*(?:\([^()]{0,40}\))?\s*)$", re.I)
_RELAYING_WORDS = re.compile(rf"\b(?:{_PEOPLE}|{_SAYING})\b:?|:", re.I)
_FILE_EXTENSION = lambda ext: ext in KNOWN_EXTENSIONS or 1 < len(ext) < 5 and not _english(ext)  # noqa: E731
_CMDLET, _COMMAND_ARGUMENT = re.compile(r"[A-Z][a-z]+-[A-Z][A-Za-z]+\b"), re.compile(r"$|[-./~\d]|\S*[/.]")  # PowerShell's
# Quotation marks of other kinds, read as straight ones.
_OTHER_QUOTES = re.compile(r"[«“„「『]\s*([^«»“”„「」『』'\"`]{1,120}?)\s*[»”“」』]")
# Quoted text in a query: 'likes tea', "Project X", `main`.
_QUOTED = re.compile(r"(?<!\w)(['\"`])([^'\"`]{1,120})\1(?!\w)")


def _content_words(text):
    """The raw words of ``text`` that count: no stop words, no single
    letters, no example values in parentheses."""
    return [w for w in _raw_words(_EXAMPLES.sub(" ", text))
            if w not in STOP_WORDS and (len(w) >= 2 or w.isdigit())]


def search_words(text):
    """The stemmed words of ``text``, in order, without stop words, single
    letters, or example values in parentheses."""
    return [_stem(word) for word in _content_words(text)]


LEXICON = WORDS.lexicon(((RELATED_GROUPS, RELATED_WEIGHT), (SYNONYM_GROUPS, SYNONYM_WEIGHT)))
# Words of the tables: a capitalised one is no name ("Read", "Echo"); built
# once, not per query.
_TABLE_WORDS = frozenset(LEXICON) | frozenset(COMPOUND_WORDS)
# Words that open a request in capitals as any first word does, not as a name.
_KNOWN_OPENERS = frozenset(LEXICON) | STOP_WORDS | QUESTION_WORDS
# Kept for the words test and for readers: the synonyms alone.
SYNONYMS = {stem: {o for o, w in others.items() if w == SYNONYM_WEIGHT} for stem, others in LEXICON.items()}


# Words the tables know (their raw spellings), which a typo may stand for,
# and their letter pairs: built once, before any cell.
_LEXICON_WORDS = frozenset(
    w for groups in (SYNONYM_GROUPS, RELATED_GROUPS) for group in groups for w in group.split()
    if w.isalpha() and len(w) >= 3)
_LEXICON_GRAMS = _gram_index(_LEXICON_WORDS)


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

    Returns ``(text, arguments, hints, files, kinds)``: the text left for
    words, the words of values (quoted text, paths, globs, URLs, file
    names, numbers), words the values ask for with their weights
    (``("file", 1.0)`` for a file name), how many files the query names,
    and the words a named file's kind asks for (``("image", 0.6)`` for
    photo.png: what reading it needs).
    Identifiers with ``_`` stay in the text marked with a leading NUL:
    whether they name a tool is for the index to say."""
    arguments, hints, kinds = [], [], []
    zones = clocks = numbers = 0
    file_names = []  # every file named, as written: how many files the query names (below)
    maybe_zones = []  # "pst" in lower case: a zone if the query is about time
    zones_said = []  # "CET": zones by their letters

    def quoted(match):
        after = match.string[match.end():].split(None, 1)[:1]
        if after and after[0].strip(_EDGE_PUNCTUATION).lower() in FEATURE_NOUNS and match.group(2).isalpha():
            return f" {match.group(2)} "  # "the 'roots' thing": a feature named, its word asked for
        before = match.string[:match.start()].rstrip().rpartition(" ")[2].lower()
        line = match.group(2).split() + [""]  # a command ("basically `cat .env`"), the one file named ("open 'a.jpg'"):
        if (match.group(1) == "`" and (line[0].lower() in SHELL_COMMANDS and _COMMAND_ARGUMENT.match(line[1])
                                       or _CMDLET.match(line[0])) or before not in NAMING_WORDS and quoted_files == [match.group(2)]):
            return f" {match.group(2)} "  # the request's words, as if unquoted
        arguments.extend(_raw_words(match.group(2)))
        return f" {_VALUE_GIVEN} " if before in NAMING_WORDS else " "

    # An object written out ("[{name: 'Acme', observations: []}]"): the
    # call's arguments, its keys too; before quoted text, which it holds.
    text = _OBJECT.sub(lambda m: arguments.extend(_raw_words(m.group(0))) or " ", query)
    text = _OTHER_QUOTES.sub(lambda m: ' "' + m.group(1) + '" ', text)  # « bonjour », “hi”, 「x」を: quoted
    relayed = _RELAYED.match(text)
    if relayed and len(relayed.group("request").split()) >= 3:  # who relayed it, and how, are no part of it
        lead = _RELAYING_WORDS.sub(" ", relayed.group("lead"))
        text = f"{lead} {relayed.group('request')} {relayed.group('tail')}"
    quoted_files = [m.group(2) for m in _QUOTED.finditer(text)  # not "x.m", "document.title": names, code
                    if _FILE_NAME.match(m.group(2)) and _FILE_EXTENSION(m.group(2).rpartition(".")[2].lower())
                    ] if GRAPH_WORDS.isdisjoint(_raw_words(text)) else []
    text = _QUOTED.sub(quoted, text)

    def called(match):
        if not match.string[:match.start()].strip() and match.string[match.end():].strip() in ("", ")", ");"):
            return f" {match.group(1)} ("  # the request is the call ("getenv()"): its name is what is asked
        arguments.extend(_raw_words(match.group(1)))
        return " ("

    # Code in a request ("containing print('hi')"): a function called is a
    # value of the request, not a word of the tool.
    text = _CODE_CALL.sub(called, text)
    # A shell redirection into a file ("echo hi > notes.txt") writes it;
    # ">>" appends to it.
    text = _REDIRECT.sub(lambda m: m.group(0) if not m.group(1) else " append " if m.group(1) == ">>" else " write ", text)
    piped = _PIPED_FILTER.search(text)
    if piped and LISTING_COMMANDS.intersection(text[:piped.start()].lower().split()):
        # A listing of files piped into a filter: the listing is the means,
        # only its paths stay ("printenv | grep X" keeps its command).
        means = [t for t in text[:piped.start()].split() if "/" in t or t.startswith("~")]
        text = " ".join(means) + " " + text[piped.end():]
        hints += [("search", 1.0), ("pattern", 0.5)]
    sql = _SQL.search(text)
    if sql and _SELECT_ONLY.match(text[sql.start():]):
        sql = None  # "SELECT 1024 + 768;": a sum, no table read
    if sql:
        statement = text[sql.start():]
        arguments.extend(_raw_words(statement))
        # The statement's verb (every statement _SQL finds opens with one)
        # says what it does, on any store: SELECT reads, INSERT makes,
        # DELETE takes away; not "query", which pulls the searches.
        does = SQL_VERBS.get(_SQL_VERB.match(statement).group(1).lower(), "")  # "ſelect": "s" only as re.I folds it
        if does == SQL_VERBS["select"] and _SQL_EVERYTHING.match(statement):
            does += " all"
        elif does == SQL_VERBS["select"] and _SQL_BY_NAME.search(statement):
            does += " by their names"  # "WHERE name IN ('Dana', 'Eve')": the named ones
        text = text[:sql.start()] + f" {does} "
        hints += [("sql", 1.0), ("query", 0.5)]

    def channel(match):
        arguments.extend(_raw_words(match.group(1)))
        hints.append(("channel", 1.0))
        return " "

    text = _CHANNEL.sub(channel, text)
    for pattern, by in _REWRITES:
        text = pattern.sub(by, text)
    if _SUM.search(text):
        hints.append(("sum", 1.0))
        text = text.replace("+", " + ")
    if _PROJECT_PLACE.search(text) and any(
            _FILE_NAME.match(t.rstrip(_EDGE_PUNCTUATION) if t.startswith(".") else t.strip(_EDGE_PUNCTUATION))
            for t in text.split()):
        # "the .env at the repo root": where a named file is, not a folder
        # to list.
        text = _PROJECT_PLACE.sub(" ", text)
    text = _FIND_NAME.sub(lambda m: "search files " + m.group(1), text)  # find /srv -name '*.hprof'
    text = _RENAMING_TEXT.sub(lambda m: "replace text of the " + m.group(1), text)
    text = _PHRASE.sub(lambda m: PHRASES.get(m.group(1).lower(), m.group(1)), text)  # "log ın": no key
    text = _PARTICLE_VERB.sub(_particle_verb, text)
    if _ANYTHING_ABOUT.search(text) or _ANYONE_WHO.search(text):
        # "do you have anything in memory about kubernetes?", "anyone in
        # memory who works in finance?": whatever matches.
        hints.append(("search", 1.0))
    plain = []

    def file_name(bare, path=None):
        """Read ``bare`` as a file name or a bare extension, if it is one
        (``path``: the path it ends)."""
        if not _FILE_NAME.match(bare) or _DOT_D_FOLDER.match(bare):
            return False
        if bare[0].isdigit() and not _DATED_NAME.match(bare) and bare.rpartition(".")[2].lower() not in EXTENSIONS:
            return False  # 3.5, 1.2: numbers, not files (2024-06-01-notes.txt and 001.sql are)
        name, _, extension = bare.lower().rpartition(".")
        kind = EXTENSIONS.get(extension)
        if name or kind is None:  # a file (notes.txt, .env), not a bare extension (.gz)
            file_names.append((path or bare).lower())
            arguments.extend(_raw_words(name or extension))
            hints.append(("file", 1.0))
            kinds.extend(EXTENSION_HINTS.get(kind or "text", ()))
        else:
            plain.append(extension)
            if kind in MEDIA_KINDS:  # ".wav", ".png": the kind of file, as "a wav file" says
                hints.extend((word, weight * BARE_EXTENSION) for word, weight in EXTENSION_HINTS[kind])
        return True

    for token in text.split():
        previous = plain[-1].lower() if plain else None  # the word before
        held = len(plain)  # the words before this token
        if token == _VALUE_GIVEN:
            if previous in NAMING_WORDS:
                plain.append(token)  # "a file called 'x' somewhere": the name given, not "somewhere"
            continue
        if token.startswith("."):
            bare = token.rstrip(_EDGE_PUNCTUATION)
        else:
            bare = token.strip(_EDGE_PUNCTUATION)
        possessive = _POSSESSIVE.match(bare)
        if possessive and _FILE_NAME.match(possessive.group(1)):
            bare = possessive.group(1)  # "notes.txt's filename": the file
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
        elif _IANA_ZONE.match(bare) or _ZONE_OFFSET.match(bare):
            zones += 1
        elif lower in ZONE_ABBREVIATIONS and bare.isupper():
            zones += 1
            zones_said.append(bare)
        elif lower in ZONE_ABBREVIATIONS and lower not in ZONE_WORDS:
            maybe_zones.append(bare)
        elif _CLOCK.match(bare) or lower in CLOCK_WORDS:
            clocks += 1
        elif lower in ("am", "pm") and plain and plain[-1].isdigit():
            plain.pop()
            clocks += 1
        elif lower in FOLDER_NAMES or _DOT_D_FOLDER.match(bare):
            arguments.extend(_raw_words(bare))
            hints.append(("directory", FOLDER_PATH_WEIGHT))  # node_modules, __pycache__: folders
        elif "*" in bare:
            arguments.extend(_raw_words(bare))
            hints += [("pattern", 1.0), ("file", 0.5)]
        elif file_name(bare):
            pass
        elif lower in ("w/", "w/o"):
            plain.append("with" if lower == "w/" else "without")  # shorthand, not a folder
        elif _MIME_TYPE.match(bare):
            # "image/png", "audio/wav": a kind of content, not a path.
            kind, _, subtype = lower.partition("/")
            plain.append(kind)
            arguments.extend(_raw_words(subtype))
        elif _MCP_METHOD.match(bare):
            # "elicitation/create", "roots/list", "sampling/createMessage":
            # an MCP method named, its words asked for (not a folder path).
            plain.extend(_raw_words(bare))
        elif "/" in bare and LOG_LEVELS.issuperset(bare.lower().split("/")):
            plain.extend(bare.split("/"))  # "debug/info/error": log levels, not a path
        elif _ALTERNATIVES.match(bare) and all(_stem(p) in LEXICON for p in lower.split("/")):
            plain.extend(bare.split("/"))  # "audience/priority", "accept/decline": words, not a path
        elif "/" in bare and len(bare) > 1:
            *folders, last = bare.split("/")
            arguments.extend(w for f in folders for w in _raw_words(f))
            if (previous in FILE_COMMANDS or last.lower() in KNOWN_FILES or _FILE_AT_END.search(bare)) and last \
                    and last.lower() not in FOLDER_NAMES and not _FILE_NAME.match(last):
                # "cat /etc/hosts", "tail /var/log/syslog": after a command
                # that reads files, a file; so "/etc/passwd" and
                # "/etc/systemd/system/api.service" anywhere.
                file_names.append(bare.lower())
                arguments.extend(_raw_words(last))
                hints.append(("file", 1.0))
                kinds.extend(EXTENSION_HINTS["text"])
            elif last.lower() in FOLDER_NAMES or not file_name(last, bare):
                arguments.extend(_raw_words(last))
                hints.append(("directory", FOLDER_PATH_WEIGHT))  # node_modules/lodash, ./build, src/
        elif bare.lstrip("+-\u2212").replace(".", "").replace(",", "").isdigit():  # 42, -17, 3.5
            arguments.append(bare)
            numbers += 1
        elif "_" in bare.strip("_"):
            plain.append("\0" + bare)  # an identifier: the index decides
        else:
            plain.append(bare)
            kind = EXTENSIONS.get(lower)
            if kind in MEDIA_KINDS:  # "a wav file", "PNG image": less than a file's name says
                hints.extend((word, weight * BARE_EXTENSION) for word, weight in EXTENSION_HINTS[kind])
        if len(plain) == held and (previous in NAMING_WORDS or previous in (None, ",")):
            # "a file called schema.sql somewhere": its name was this value;
            # "..., 3 is fine": a clause opening with a value asks nothing.
            plain.append(_VALUE_GIVEN)
        if end:
            plain.append(end)
    if maybe_zones:
        if zones or clocks or TIME_WORDS.intersection(w.lower() for w in plain):
            zones += len(maybe_zones)
        else:
            plain += maybe_zones  # "edt file": a misspelt word, not a zone
    # Each file once: one named twice in the same letters is one; a name
    # without folders that ends just one path named is that file said again
    # (".env ... /srv/app/.env"), with two such paths it is a third file
    # (Cargo.toml, api/Cargo.toml, cli/Cargo.toml).
    named = set(file_names)
    files = len(named) - sum(
        1 for name in named if "/" not in name and sum(n.endswith("/" + name) for n in named) == 1)
    if files >= 2:
        hints.append(("multiple", 0.8))
    if numbers >= 2:
        hints.append(("number", NUMBERS_WEIGHT))
    if ENVIRONMENT_NAMES.intersection(_CAPITALS.findall(query)):
        hints.append(("environment", 1.0))  # "what PATH and HOME did it get": its environment
    if len(LOG_LEVELS.intersection(_raw_words(text))) >= 2:
        hints.append(("level", LOG_LEVELS_WEIGHT))  # "debug, warning, error": messages of several levels
    someones = zones == len(zones_said) == 1 and not clocks and _ZONE_OF_SOMEONE.search(query)
    if someones and someones.group(1) == zones_said[0] \
            and (RECALL_WORDS.intersection(_raw_words(query)) or _RECALLED.search(query)) \
            and not TIME_WORDS.intersection(w.lower() for w in plain):
        zones = 0  # "which maintainer did I say was on CET": where someone is, a fact kept
        arguments.append(zones_said[0].lower())
    if zones:
        hints += [("timezone", 1.0), ("time", 0.5)]
    if clocks and files:
        clocks = 0  # "crashed around 3am" in a request about a log: when, not a time to convert
    if clocks and zones < 2 and NOW_WORDS.intersection(w.lower() for w in plain):
        hints += [("time", 1.0), ("current", 1.0)]  # "is it past midnight in Auckland yet"
    elif clocks:
        hints += [("time", 1.0), ("convert", 0.8)]
    elif zones >= 2:
        hints.append(("convert", 1.0))
    elif zones:
        hints.append(("current", ONE_ZONE_CURRENT))  # "time in UTC+9": no time to convert
    elif "time" in (w.lower() for w in plain) and not CONVERT_WORDS.intersection(w.lower() for w in plain):
        hints.append(("current", ONE_ZONE_CURRENT))  # "time in Rome": no time to convert, no zone
    return " ".join(plain), arguments, hints, files, kinds


_KIND_SIGNS = {kind: frozenset(words.split()) for kind, words in KIND_SIGNS.items()}
# Parameter name -> the kind of value it takes.
PARAMETER_KIND = {name: kind for kind, names in PARAMETER_KINDS.items() for name in names.split()}

# Marks a word of the query that is a name (matched as written, without
# synonyms).
NAME = object()


def query_terms(query, index=None):
    """The query as weighted groups of stemmed words: for each word of the
    query, ``(weight, {word: 1, synonym: SYNONYM_WEIGHT, related word:
    RELATED_WEIGHT, ...})``. ``index`` (a SearchIndex) says which words
    the catalog knows; without it no word is read as a typo."""
    return read_query(query, index).groups


class Query:
    """What a query asks: its weighted word groups, whether it is a
    question, and what its values are."""

    __slots__ = ("groups", "question", "files", "values", "whole", "words", "signs", "changes", "action", "about",
                 "unwanted")

    def __init__(self, groups, question, files, values, whole, words, signs, changes, action=None, about=None,
                 unwanted=frozenset()):
        self.groups = groups
        self.question = question  # asks what is, not to change anything
        self.files = files  # how many file names it holds
        self.values = values  # how many values (file names, paths, URLs, numbers, quotes) it holds
        self.whole = whole  # asks for all of something ("all", "everything")
        self.words = words  # its words as written (lower case), names of tools and servers too
        self.signs = signs  # the kinds of value (PARAMETER_KINDS) it shows
        self.changes = changes  # opens with a verb asking to change something
        self.action = action  # "remove" or "make": what the first clause opening with such a verb asks
        self.about = about  # "relation", "observation", "entity": what of a knowledge graph it is about
        self.unwanted = unwanted  # stems of the words it says it does not want ("no sizes")


# Named things' records asked for by name ("pull up Tom's and Ines's
# entries", "by exact name"): opening them, not searching.
_NAMED_RECORDS = re.compile(
    r"\b[A-Z][a-z]+'s (?:and [A-Z][a-z]+'s )?(?:\w+ )?(?:entries|entry|records|record|nodes|node|profiles|profile)\b"
    r"|\bby (?:their |its |exact )?names?\b|(?<!sure of the )(?<!forget the )(?<!forgot the )\bexact names?\b|\bexactly (?:these|those) (?:\w+ )?names\b"
    r"|\b(?:entry|record|node|profile|card|page)s? (?:for|of|on) ['\"][A-Z]"
    r"|\b(?:titled|named|called) exactly\b|\bknows? (?:the |their )?(?:exact )?names\b")
# The name of a file as the object of a change: "the file name", "the
# folder's name", "notes.txt's name", "the name of draft.txt".
_FILES_NAME = re.compile(r"\b(?:file|folder|directory|dir)(?:['\u2019]s)?\s+name\b|['\u2019]s\s+name\b"
                         r"|\bname of (?:the |this |that |my )?(?:file|folder|directory|dir|\S+\.\w{1,5}\b)", re.I)
# Where in a project something is ("at the repo root", "in the root of
# the project").
_PROJECT_PLACE = re.compile(
    r"\b(?:at|in|under|inside|from)\s+(?:the\s+|my\s+|our\s+)?(?:root\s+of\s+(?:the\s+|my\s+|our\s+)?)?"
    r"(?:repo|repository|project)(?:\s+root|\s+folder|\s+directory|\s+dir)?\b", re.I)
_FIND_NAME = re.compile(r"\bfind\s+(\S+)\s+-i?(?:name|path|wholename)\b")
def _unglued(word, index):
    """``word``, or the two known words it glues (search_words.unglued) when
    nothing knows it, nor a word it is a typo of."""
    if len(word) < 6 or not word.isalpha() or index.knows(word) or index.correct(_stem(word), word) is not None:
        return (word,)
    known = (lambda part: part not in STOP_WORDS and (part in _LEXICON_WORDS or part in index.spellings))
    return WORDS.unglued(word, known) or (word,)


def _english(word):
    """Whether the tables read ``word`` (lower case) as English."""
    return _stem(word) in LEXICON or word in TABLES.COMMON_WORDS


def read_query(query, index=None):
    """Read ``query`` (see query_terms) into a Query."""
    query = _in_english(query, _english if index is None else lambda word: _english(word) or index.knows(word))
    for pattern, by in _BEFORE:
        query = pattern.sub(by, query)
    named = index.named if index is not None else None
    correct = index.correct if index is not None else None
    text, arguments, extra, files, kinds = _query_tokens(query)
    values = files + len(arguments)
    tokens, named_words = [], []
    given = False  # the name after a naming word was read
    for token in text.split():
        if token.startswith("\0"):  # an identifier: a name, or an argument
            words = _raw_words(token[1:])
            if named is not None and words and all(w in named or _stem(w) in named for w in words):
                named_words += words
            else:
                arguments.extend(words)
            continue
        if tokens and tokens[-1].lower() in NAMING_WORDS and not given:
            arguments.extend(_raw_words(token))  # "a folder called logs"
            given = True  # the name: one word ("called logs in src": "in src" are words again)
            continue
        given = False
        tokens.append(token)
    text = " ".join(tokens)
    raw = []
    action = None
    placing = renames = False
    opener = None  # the clause that asks a question ("charlie memory, who is Ivy"): its words
    clauses = set()  # where in raw each clause starts
    glued = WORDS.code_words(query)  # "os.listdir", "getenv()": may glue two words
    for clause in _CLAUSES.split(text):
        words = _raw_words(clause)
        if index is not None and glued:
            words = [part for word in words for part in (_unglued(word, index) if word in glued else (word,))]
        if words and index is not None:
            words[0] = index.function_word(words[0], first=True)
        # The verb opening the clause, after words that only link it ("also
        # remember ...", "and then link ...").
        lead = 0
        while lead < len(words) - 1 and words[lead] in LINKING_WORDS:
            lead += 1
        if words and words[lead] in LEADING_VERBS:
            words[lead:lead + 1] = LEADING_VERBS[words[lead]].split()
        if any(w in PLACING_VERBS and (i == lead or words[i - 1] in LINKING_WORDS and w != "file")
               for i, w in enumerate(words)):
            placing = True  # "..., put it into Finance/2024", "take x.png off the desktop and put it in ..."
        if RENAMING_VERBS.intersection(words) and ("filename" in words or _FILES_NAME.search(clause)):
            renames = True  # "change notes.txt's filename to ...": if a file is named, a rename
        if words and action is None:
            action = "remove" if words[lead] in REMOVING_VERBS else "make" if words[lead] in MAKING_VERBS else None
        if words and (not raw or words[0] in QUESTION_WORDS and not (opener and opener[0] in QUESTION_WORDS)
                      and not clause.lstrip().startswith(_VALUE_GIVEN)):
            opener = words
        clauses.add(len(raw))  # where this clause's words start
        raw += words
    if action is None and _ENDED.search(text):
        action = "remove"  # "Ana doesn't report to Li anymore", "the link should go"
    if index is not None:
        raw = [index.function_word(w) for w in raw]
    opener = opener or []
    question = opener[:1] != [] and opener[0] in QUESTION_WORDS
    reads = opener[:1] != [] and (opener[0] in READING_VERBS or opener[0] in READING_QUESTIONS
                                  and not (opener[0] == "how" and opener[1:2] == ["do"]))
    # A request opening with a verb that changes or takes away ("cut the
    # link between ..."); not one that makes, as "add" may ask for a sum.
    changes = not question and opener[:1] != [] and (opener[0] in CHANGING_VERBS or opener[0] in REMOVING_VERBS)
    pathed = any(word == "directory" for word, _ in extra)  # a folder path: src/, ./build
    if ((files or pathed) and (not question or placing) and opener[:1] != [] and (opener[0] in PLACING_VERBS or placing)
            and (FOLDER_WORDS.intersection(raw) or pathed)):
        extra.append(("move", 1.0))  # "put report.pdf into the archive folder"
    if renames and (files or pathed or FILE_THING_WORDS.intersection(raw)):
        extra.append(("rename", 1.0))
    if action == "make" and files and not question and FILLING_WORDS.intersection(raw):
        extra.append(("write", 1.0))  # "make a todo.txt with my list in it": a file with its content
    # "where can you read and write files?": what is allowed; the verbs
    # after the modal word weigh as arguments.
    modal = question and opener[0] in PLACE_QUESTIONS and next(
        (i for i, w in enumerate(opener[1:6], 1) if w in MODAL_WORDS), None)
    if modal and SEARCH_VERBS.intersection(opener[modal:]):
        modal = None  # "where can I find the config": a search
    if modal:
        extra.append(("allowed", PERMISSION_QUESTION_WEIGHT))
    verbs_after = opener[modal:] if modal else ()
    if not files and not pathed and not arguments and IMAGE_WORDS.intersection(raw) and SHOWING_WORDS.intersection(raw):
        extra.append(("tiny", ANY_IMAGE_WEIGHT))  # "return an image content block": no image of the user's
    not_wanted = WORDS.not_wanted(raw, clauses, NEGATING_WORDS, STOP_WORDS, COLLECTION_WORDS, NEGATED_WORDS)
    if POINTERS.intersection(w for at, w in enumerate(raw) if at not in not_wanted) and RESOURCE_WORDS.intersection(raw):
        extra.append(("links", POINTERS_WEIGHT))  # "several URIs to text and blob resources": links, not one
    # All of one named record ("the full card for 'Julie Martin'") is no
    # whole store.
    named_records = _NAMED_RECORDS.search(query) is not None  # "Julie Martin's card": records read as they are
    whole = bool(WHOLE_WORDS.intersection(raw)) and not named_records
    if whole:
        extra.append(("entire", WHOLE_HINT_WEIGHT))  # "all", "every": a tool reading the entire thing
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
    names -= _TABLE_WORDS  # "Read", "Echo": words, not names
    for run in _PROPER_RUN.findall(text):
        # "New York", "Los Angeles": a name of several words, each a name
        # when one of them is no word of the tables ("Read Text File" is
        # no name).
        words = run.lower().split()
        if any(_stem(w) not in LEXICON and w not in STOP_WORDS and w not in COMPOUND_WORDS for w in words):
            names.update(words)
    if not (question and opener[0] in PROPERTY_QUESTIONS) and not METADATA_WORDS.intersection(raw):
        extra += kinds  # what reading a named file needs; not when its size or dates are asked
    if question:
        extra += [(QUESTION_SUBJECTS[word], 1.0) for word in opener[:1] if word in QUESTION_SUBJECTS]
        extra += [(WHERE_HINT, WHERE_WEIGHT) for word in opener[:1] if word == "where" and not modal]
        if PLACE_UNKNOWN.intersection(raw):
            extra.append((WHERE_HINT, WHERE_WEIGHT))  # "is there a file called x.sql somewhere": find it
        elif files == 1 and opener[0] != "where" and not CONTENT_WORDS.intersection(raw):
            # "how big is notes.txt": its metadata; "what's inside notes.txt": its text.
            extra.append((ONE_FILE_QUESTION_HINT, ONE_FILE_QUESTION_WEIGHT))
        if names or RECALL_WORDS.intersection(raw):
            extra.append((NAMED_QUESTION_HINT, NAMED_QUESTION_WEIGHT))
    elif names:
        extra.append((NAMED_HINT, NAMED_HINT_WEIGHT))
    # A misspelt word counts as the word it stands for ("new direcotry" is
    # a new folder, no new thing of the graph).
    query = _OBJECT.sub(" ", query)  # the words of an object written out are its values
    said = set(_raw_words(query))
    if correct is not None:
        for word in [w for w in said if w.isalpha() and not index.knows(w)]:
            near = correct(_stem(word), word)
            said.update(w for w in FILE_THING_WORDS | LINK_WORDS if near and _stem(w) in near[1])
    about = GRAPH.object_of(query, said, _KNOWN_OPENERS, action, files)
    if not action and named_records:
        extra.append(("open", GRAPH_HINT_WEIGHT))  # read named records as they are
    if question and opener[0] == "who" and len(opener) > 2 and opener[1] not in ("is", "are", "was", "were"):
        extra.append(("search", GRAPH_HINT_WEIGHT))  # "who in memory likes tea": whoever matches
    if about and (action or not reads) and not (question and _ANYTHING_ABOUT.search(text)):
        # (A question for anything about something is a search, whatever
        # it names: "do I have any notes about dentists?")
        extra.append((about, GRAPH_HINT_WEIGHT))
        if action is None and not question and not REMOVING_VERBS.intersection(raw):
            action = "make"  # "Omar's record: he is now team lead": a fact to keep  # the kind of thing, as the tools name it
    weighted = []  # (stem, weight, the word as written if it may be a typo, or NAME)
    previous = before = None
    unwanted_stems = set()
    for at, word in enumerate(raw):
        if word in NEGATING_WORDS:
            previous = word
            continue
        # "just the names, no sizes", "don't go into subfolders": what is
        # not wanted weighs as an argument, not as the need.
        unwanted = at in not_wanted
        if unwanted:
            unwanted_stems.add(_stem(word))
        if previous == "how" and word in HOW_WORDS:
            previous = word
            continue  # "how many": a question, not "many" things
        # The verb after "allowed to" or "before" is not what is asked for
        # ("where am I allowed to save files", "ask before deleting").
        aside = previous in ASIDE_WORDS or (previous == "to" and before in PERMISSION_WORDS) or (
            before in ASIDE_WORDS and previous in SUBJECT_WORDS) or (
            word in verbs_after and (word in READING_VERBS or word in CHANGING_VERBS))
        # A verb in the past after its subject tells what happened ("Marta
        # moved to Valencia", "what I wrote yesterday"), not what to do;
        # what someone said or told is a question of memory and counts, and
        # so does a state asked of the subject ("are you sandboxed").
        if (previous in SUBJECT_WORDS or previous in names) and word not in RECALL_WORDS and before not in BE_FORMS and (
                word in PAST_FORMS or len(word) > 4 and word.endswith("ed")):
            aside = True
        aside = aside or unwanted
        before, previous = previous, word
        expansion = COMPOUND_WORDS.get(word)
        for part in (expansion.split() if expansion else [word]):
            if part in STOP_WORDS or (len(part) < 2 and not part.isdigit()):
                continue
            if word in names:
                weighted.append((_stem(part), PROPER_NAME_WEIGHT, NAME))
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
        if written is NAME:
            members = {word: 1.0}  # a name means itself: "New" of "New York" is no "create"
        elif written is not None and correct is not None:
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
    # The kinds of value the query shows (a file name, a URL, a word of
    # files or of the web), for the tools that require one.
    shown = set(raw) | set(arguments) | {word for word, _ in extra}
    shown |= {word + "s" for word in shown}
    signs = frozenset(kind for kind, words in _KIND_SIGNS.items() if files and kind == "path" or shown & words)
    return Query(list(groups.values()), reads, files, values, whole, frozenset(raw), signs, changes, action, about,
                 frozenset(unwanted_stems))
