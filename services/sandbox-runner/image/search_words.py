"""How text becomes words for the search: names split at snake, kebab and
camel case, a light stemmer, letter pairs and the typo distance.

``search_query.py`` loads this file from beside it; nothing here knows a
table or a tool.
"""

import re

_CAMEL_LOWER_UPPER = re.compile(r"([a-z0-9])([A-Z])")
# An acronym's plural is one word: "PRs", "URLs", "IDs" (not "P" and "Rs").
_CAMEL_ACRONYM = re.compile(r"([A-Z]+)([A-Z](?!s(?![a-z]))[a-z])")
# Letters of the Latin script (accented too) apart from those of other
# scripts: "MCPロゴ画像" is "mcp" and "ロゴ画像".
_WORD = re.compile(r"[A-Za-z\u00c0-\u024f]+|[^\W\d_A-Za-z\u00c0-\u024f]+|\d+")
_ASCII_WORD = re.compile(r"[A-Z]{2,}s(?![a-z])|[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


# Suffixes that make a word of another (longest first), each with the
# letters the rest must keep (and how many letters of the suffix stay):
# "observation" -> "observ", "creation" -> "creat" (not "cre"),
# "compression" -> "compress", "readable" -> "read", "recursively" ->
# "recursive".
_DERIVED = (("ation", 5), ("tion", 4, 1), ("sion", 4, 1), ("able", 4), ("ly", 5))
_BRITISH = ("isations", "isation", "ising", "ised", "ises", "ise", "ysing", "ysed", "yses", "yse")
STEMS = {}  # word -> its stem: catalogs repeat their words
# Words ending in "s" that are no plural: "news" is not "new".
_NOT_PLURALS = frozenset("news series species lens".split())


def stem(word):
    """A light stemmer: plurals, -ing, -ed, a final -e; never below 3 letters."""
    found = STEMS.get(word)
    if found is None:
        found = STEMS[word] = stem_word(word)
    return found


def stem_word(word):
    if len(word) <= 3 or not word.isalpha() or word in _NOT_PLURALS:
        return word
    # British spelling reads as American: "memorised", "organisation",
    # "summarising", "analysed" stem as "memorized", "organization",
    # "summarizing", "analyzed".
    for suffix in _BRITISH:
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            word = word[:-len(suffix)] + suffix[0] + "z" + suffix[2:]
            break
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


# A word of a code's name: after "name." or before "(" ("os.listdir",
# "getenv()"); or a request of one word (of at most 24 letters).
_CODE_WORD = re.compile(r"(?<=[A-Za-z0-9]\.)[a-z]{6,24}\b|\b[a-z]{6,24}(?=\()|^\s*[a-z]{6,24}\s*$")


def code_words(text):
    """The words of ``text`` written as code writes a name ("os.listdir",
    "getenv()"), or its one word: those that may glue two words together."""
    return {word.strip().lower() for word in _CODE_WORD.findall(text)}


def unglued(word, known):
    """The two words ``word`` glues together as code's names do ("listdir":
    "list" and "dir"), each of three letters or more and ``known``; None
    when it glues no such two."""
    cuts = ((word[:cut], word[cut:]) for cut in range(len(word) - 3, 2, -1))
    return next((pair for pair in cuts if known(pair[0]) and known(pair[1])), None)


def raw_words(text):
    """Lower-cased words of ``text``, names split at snake, kebab and camel
    case, letters and digits apart."""
    if text.isascii():
        # One pass: an acronym before a capitalised word ("HTTPServer"),
        # a capitalised or lower-case word, an acronym, digits.
        return [w[:-1].lower() if len(w) > 2 and w[-1] == "s" and w[:-1].isupper() else w.lower()
                for w in _ASCII_WORD.findall(text)]
    text = _CAMEL_LOWER_UPPER.sub(r"\1 \2", text)
    text = _CAMEL_ACRONYM.sub(r"\1 \2", text)
    return _WORD.findall(text.lower())


def grams(word):
    """The letter pairs of ``word`` with its ends marked: "^c", "ca", "at", "t$"."""
    padded = "^" + word + "$"
    return {padded[i:i + 2] for i in range(len(padded) - 1)}


def gram_index(words, index=None):
    """Letter pair -> the words holding it (added to ``index``)."""
    index = {} if index is None else index
    for word in words:
        for gram in grams(word):
            index.setdefault(gram, set()).add(word)
    return index


def typo_distance(a, b, bound):
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


def deletions(word):
    """``word`` and each spelling of it with one letter left out."""
    return {word} | {word[:i] + word[i + 1:] for i in range(len(word))}


def lexicon(groups_by_weight):
    """Stemmed word -> {other stemmed word: weight} from groups of words
    that mean alike, each ``(groups, weight)``; a later weight wins over an
    earlier one where it is higher (a synonym's over a related word's)."""
    table = {}
    for groups, weight in groups_by_weight:
        for group in groups:
            stems = {stem(w) for w in group.split()}
            for one in stems:
                others = table.setdefault(one, {})
                for other in stems - {one}:
                    others[other] = max(weight, others.get(other, 0.0))
    return table


def not_wanted(words, clauses, negating, stop, collections, reach):
    """Where in ``words`` (their clauses starting at ``clauses``) the words
    say what is not wanted: ``reach`` words after one of ``negating``, not
    counting ``stop`` words, within its clause ("not a tarball, just gzip
    it"); what one of ``collections`` negated is "of" too ("not a whole list
    of links")."""
    found, negated, first = set(), 0, None
    for at, word in enumerate(words):
        if at in clauses:
            negated = 0
        if word in negating:
            negated, first = reach, None
        elif negated and word not in stop:
            negated -= 1
            found.add(at)
            first = at if first is None else first
        elif word == "of" and at - 1 in found and words[at - 1] in collections and not {at, at + 1} & clauses and (
                at - 1 == first or words[first] in _SIZES):
            negated = 1  # the collection itself negated, not a thing before it ("no tree, just the list of ...")
    return found


# Words of how big a collection is ("not a whole list of links").
_SIZES = frozenset("whole entire full long big huge complete".split())
