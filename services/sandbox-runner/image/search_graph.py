"""What a request about named things is about, as a knowledge graph holds it.

A link between two named things ("Falcon depends on Hawk": a relation), a
fact about one ("put that on her entry": an observation), or a thing
itself ("a new person", "Dana is a designer", "forget Kevin completely":
an entity). ``search_query.py`` loads this file from beside it with its
tables (``search_tables.py``) and reads every query's ``about`` here;
``tool_search.py`` favours the knowledge-graph tool that makes or removes
what a request is about.
"""

import re

# A thing named by one capital letter or a number ("service A", "node B",
# "unit 4B").
_LETTER_NAME = re.compile(r"\b(?:service|node|entity|person|project|team|server|user|company|module|component|system|building|unit"
                          r"|block|wing|flat|apartment|room|suite|lot)\s+(?:[A-Z]|\d+[A-Z]?)\b")
# Months and days: capitalised, but no things of the graph ("lead for
# January").
_CALENDAR_NAMES = frozenset(
    "january february march april may june july august september october november december "
    "monday tuesday wednesday thursday friday saturday sunday".split())
# A name: capitalised words in a run ("Acme Corp"), a firm's "& Sons" with
# them ("Kessler & Sons").
_NAME_UNIT = re.compile(r"\b[A-ZÀ-ÖØ-Þ][a-zß-öø-ÿ]+(?:\s+[A-ZÀ-ÖØ-Þ][a-zß-öø-ÿ]+)*"
                        r"(?:\s+&\s+(?:Sons|Daughters|Co|Partners|Associates|Brothers|Bros|Sisters|Friends)\b)?\b")  # "Léo", "Ærø"
# A name as machines and tickets are named: words joined by hyphens ending
# in a number ("lb-edge-1", "test-01", "INC-4471"); not a text encoding or
# a model ("utf-8", "gpt-4").
_NUMBERED_NAME = re.compile(r"\b(?!(?:utf|gpt|sha|md|x86|iso|base|ipv|ucs|latin)-)[a-z][a-z0-9]*(?:-[a-z0-9]+)*-\d+\b", re.I)
# A flat or a room named by its number and letter, as it is rented
# ("rents 4B", "leases 12A"; "unit 4B" is a _LETTER_NAME).
_UNIT_CODE = re.compile(r"\b(?i:rents|rented|leases|leased|rent|lease)\s+#?(\d{1,4}[A-Z])\b")
_ABOUT_ONE = re.compile(
    r"\b(?:(?:on|to|from|in|off|into|under) (?:her|his|its|their|[A-Z][a-z]+'s) (?:existing )?"
    r"(?:entry|node|record|profile|card|page|notes?)"
    r"|[A-Z][a-z]+'s (?:\w+ )?(?:entry|node|record|profile|card|page)|[A-Z][a-z]+'s notes\s*:"
    r"|(?:on|to|against|into) the existing (?:entry|node|record|profile|card|entity)\b"
    r"|(?:have|know|keep|stored|saved) (?:on|about) (?:him|her|them|it)\b"
    r"|(?:fact|detail|note|thing)s? (?:about|on|for) "
    r"|\bto what (?:you|we) (?:know|have|remember|keep) (?:about|on) "
    r"|\b(?:to|on|onto|into) the (?:record|entry|card|profile|node) (?:of|for) )", re.I)
_LINKING_LEAD = re.compile(r"(?:^|[,:;]\s)\W*(?:(?:please|pls|now|then|also)\s+)?(?:disconnect|unlink|detach|relate|interlink)\b",
                           re.I)
_WITH_ITS = re.compile(r"\balong with (?:its|his|her|their|all)\b"
                       r"|\band (?:everything|all|anything) (?:linked|connected|related|attached) to (?:him|her|it|them)\b"
                       r"|\bincluding (?:all )?(?:its|his|her|their) (?:links|relations|relationships|edges|connections)\b"
                       r"|\b(?:and|with) (?:all )?(?:its|his|her|their) (?:links|relations|relationships|edges|connections)\b"
                       r"|\band (?:every|each|all|any) (?:links?|relations?|relationships?|edges?|connections?)"
                       r" (?:hanging off|attached to|going to|pointing at|pointing to|to|from|of|on) (?:it|him|her|them)\b"
                       r"|\balong with (?:every|each|all|any) (?:links?|relations?|relationships?|edges?|connections?)\b", re.I)
# Something the memory does not hold yet ("you don't know her yet", "met
# him for the first time"): a new thing to record.
_NOT_KNOWN_YET = re.compile(
    r"\b(?:don'?t|do not|doesn'?t|does not|didn'?t|haven'?t|have not|never)\s+(?:know|knew|have|met|heard|saved|"
    r"stored|remember|logged|recorded|noted)\b[^.;!?]{0,40}?\b(?:yet|before)\b"
    r"|\b(?:not|(?:neither|none)(?: of (?:them|those|these|the two))? (?:is|are)) (?:in|stored in|saved in) (?:your |the |my )?"
    r"(?:memory|graph|knowledge graph|there) (?:at all )?yet\b"
    r"|\bfirst time\b", re.I)
# One named thing's record ("append facts to the Acme node"); two named
# records are a relation ("connect the Acme node to the Berlin node").
_A_RECORD = (r"(?:the|my|our|his|her|their) (?:existing |current )?['\"]?[A-Z][\w-]*(?: [A-Z][\w-]*){0,2}['\"]?"
             r" (?:entry|node|record|profile|card|page)\b")
_ON_ITS_RECORD = re.compile(r"\b(?:on|to|from|in|into) " + _A_RECORD)
_NAMED_RECORD = re.compile(r"\b" + _A_RECORD)
# Two things the memory holds already: what is new is how they relate.
_BOTH_KNOWN = re.compile(r"\bboth (?:\w+ )?(?:already exist|exist already|are already|already in|(?:are )?in (?:the )?memory"
                         r"|(?:are )?(?:already )?(?:stored|saved))"
                         r"|\b\w+ and \w+ (?:are|exist) (?:both )?already (?:there|stored|saved|in|known)\b"
                         r"|\bboth (?:of them )?(?:you )?already know\b|\balready know (?:them )?both\b"
                         r"|\b(?:entities|nodes|records) ['\"]?[\w -]{1,40}['\"]? and ['\"]?[\w -]{1,40}['\"]? (?:already )?exist\b"
                         r"|\b(?:you|we) already (?:know|have|stored|saved) (?:about )?(?-i:[A-Z])[\w-]*(?: (?-i:[A-Z])[\w-]*)*"
                         r" and (?-i:[A-Z])", re.I)
# A removal that keeps the thing itself: what goes is what is said of it.
_KEEPS_THE_THING = re.compile(
    r"\bwithout (?:otherwise )?(?:deleting|removing|altering|changing|touching) (?:the |that |this )?(?:entity|node|record|person"
    r"|thing|it|entry)\b"
    r"|\b(?:record|entity|node|person) itself stays\b"
    r"|\bkeep(?:ing)? (?:the |that |his |her |their |its |my |our |your )?(?:entity|node|record|person|company|organi[sz]ation|contact"
    r"|customer|client|profile|entry)\b|\bkeep(?:ing)? (?:everything|all|anything) else\b|\bkeep(?:ing)? the rest\b"
    r"|\bkeep(?:ing)? [A-Z][a-z]+ (?:herself|himself|itself|themselves)\b"
    r"|\bleav(?:e|ing) (?:her|him|it|them|the (?:entity|node|record|person|entry)) (?:otherwise )?(?:intact|alone|be)\b",
    re.I)
# A removal that keeps both things: what goes is the link between them.
_KEEPS_BOTH = re.compile(r"\b(?:keep(?:ing)?|leav(?:e|ing))\s+(?:both|the\s+two)(?:\s+(?:nodes|people|persons|entities|things|records|of\s+them))?\b",
                         re.I)
# A thing the memory already holds: what is added goes on its record.
_ALREADY_KNOWN = re.compile(r"\b(?:already (?:exists?|stored|saved|known|in (?:the |your |my )?(?:memory|graph|knowledge graph))"
                            r"|(?:is|are) already (?:there|in|stored|saved)|(?:who|whom|which) (?:you|we) already (?:know|have)"
                            r"|the existing (?:entity|node|record|person|contact|entry)"
                            r"|already (?:have|has|got) an? (?:entry|node|record|profile) (?:for|on))\b",
                            re.I)
# An entity something goes on ("add 'likes tea' to the entity Sam").
_ON_ENTITY = re.compile(r"\b(?:to|on|onto|into|for|of|in)\s+(?:the|that|this|an?|its)\s+entit(?:y|ies)\b", re.I)
# Whom a record is of, said before their name ("adopter Tom Reyes").
_ROLES = (r"(?:adopter|tenant|supplier|guest|client|customer|patient|student|volunteer|vendor|donor|candidate|patron"
          r"|caller|buyer|resident|applicant|subscriber|lender|borrower)")
# Something added to a named thing, no file ("append to Project Phoenix:
# 'deadline slipped'", "... to guest Ahmed Siddiqui", "append to TC-02:",
# "a note to adopter Tom Reyes"):
# a fact on its record.
_ADDED_TO_NAME = re.compile(r"\b(?i:append|add|attach|tack)\b(?:\s+[\w'-]+){0,4}?\s+(?i:to|onto)\s+(?:the\s+)?"
                            r"(?:" + _ROLES + r"\s+)?[A-Z][a-z]+(?:\s+[A-Z][a-z]+){0,5}\b(?![.\w/])"
                            r"|\b(?i:append|add|attach|tack)\s+(?:'[^']{1,80}'|\"[^\"]{1,80}\")\s+(?i:to|onto)\s+(?:the\s+)?"
                            r"(?:[a-z]+\s+)?[A-Z][a-z]+(?:\s+[A-Z][a-z]+){0,5}\b(?![.\w/])"
                            r"|\b(?i:append|add|attach|tack)\s+(?i:to|onto)\s+[A-Z][A-Z0-9]*-\d+\s*:"
                            r"|\b(?i:append|add|attach|tack)\s+(?i:to|onto)\s+(?:the\s+)?(?i:entity|node|record)\s+['\"]?[\w-]+"
                            r"|\b(?i:update)\s+(?:the\s+)?[A-Z][a-z]+(?:\s+[A-Z][a-z]+){0,5}(?:\s+(?i:record|entry|node|profile|card))?"
                            r"\s*(?::|\bwith\b)")
# The link itself pointed at ("delete that connection", "remove the
# 'reports to' edge"): when removed, a relation.
_THAT_LINK = re.compile(r"\b(?:that|this|the|those|these)\s+(?:'[^']{1,40}'\s+|\"[^\"]{1,40}\"\s+|[\w-]+\s+)?"
                        r"(?:connection|link|edge|relation|relationship)s?\b", re.I)
# Removing a link, the things stay ("the people stay").
_THINGS_STAY = re.compile(r"\b(?:people|persons|nodes|entities|things|records|both)\s+(?:stay|remain)\b"
                          r"|\bstill\s+exist\b", re.I)
# A thing told of with its name ("a dog named Biscuit"): a new thing.
_A_NAMED_THING = re.compile(r"\b(?i:a|an)\s+(?:new\s+)?[a-z]+\s+(?i:named|called)\s+['\"]?[A-Z]"
                            r"|\b(?i:my|our)\s+(?:new\s+)?[a-z]+\s*[:,-]\s*(?i:name|named|called)\s+[A-Z]")
# Two services named in kebab case and how one uses the other
# ("api-gateway calls auth-service", "app-01 runs_on host-07"), or in
# snake case ("glossary_v3 supersedes glossary_v2"): a relation between
# them. (At most nine parts to a name: a run of "a-b_" is read once.)
_SERVICES_LINKED = re.compile(
    r"(?<![\w-])[a-z0-9]+(?:[-_][a-z0-9]+){1,8}\s+(?:depends\s+on|calls|uses|talks\s+to|reads\s+from|writes\s+to"
    r"|connects\s+to|sends\s+to|feeds|consumes|relies\s+on|is\s+behind|sits\s+behind|supersedes|succeeds"
    r"|[a-z]+_[a-z_]+)\s+[a-z0-9]+(?:[-_][a-z0-9]+){1,8}\b", re.I)
# How two things are linked, said by a verb that needs both ("Marc
# introduced me to Heron", "turnout 7 is wired to decoder B", "the honey
# came from Hive 7", "record that Molino Rossi supplies our bakery", "our
# town is twinned with Saint-Malo"), or a
# relation announced ("note the relationship: ..."), told or asked to be
# kept: a relation, whether or not both are names.
_LINKED_BY = re.compile(r"\bintroduc(?:ed|es)\s+(?:(?:me|him|her|them|us|[\w-]+)\s+)?to\b"
                        r"|\b(?-i:[A-Z])[\w'-]{0,40}\s+(?:trains|coaches|supplies|sponsors|mentors|employs|rents|leases|supervises)"
                        r"\s+(?:the|our|my|their)\b"
                        r"|\b(?:is|are|was|were)\s+twinned\s+with\b"
                        r"|\b(?:is|are|was|were)\s+(?:wired|hooked\s+up|plugged\s+in(?:to)?|attached)\s+to\b"
                        r"|\b(?:came|comes)\s+from\s+(?-i:[A-Z])|\bpowers\s+the\b"
                        r"|\b(?:note|record|save|add|store|log)\s+(?:the|a|this|that)\s+(?:relationship|relation|connection|link)\s*:",
                        re.I)
# What one named thing does to another, said by a verb that needs both
# ("Dr. Patel treats Luna", "Ana drives truck T-90", "Vos couriers the
# Rijksmuseum loan", "Acme ships from the Fresno depot", "partners with
# our shelter"): a relation, when the second is a name or ours.
_DOES_TO = re.compile(r"\b(?-i:[A-Z])[\w'-]{0,40}\s+(?:treats|drives|couriers|partners\s+with|ships\s+(?:from|to|for))\s+"
                      r"(?:(?:our|my|their)\b|(?:the\s+)?(?-i:(?:[a-z]{2,20}\s+)?(?:[A-Z][a-z]|[A-Z]+-\d)))", re.I)
# A relation's type as code names one ("works_at", "produced_by",
# "manager_of"): a relation.
_RELATION_TYPE = re.compile(r"\b[a-z]+_(?:at|by|of|to|in|on|from|with|for|into)\b")
# A line said of a thing (no file): one fact of it.
_A_LINE = re.compile(r"\b(?:the|that|this|one)\s+(?:\w+\s+)?line\b", re.I)
# One named thing's role to another ("Initech is a customer of Globex",
# "Sam is the plus-one of Alex").
_ROLE_OF = re.compile(r"\b[A-Z][\w-]+\s+(?:is|are|was|were)\s+(?:a|an|the|our)\s+(?:[\w-]+\s+)?(?:of|at|for)\s+[A-Z]")
# All that is held on one thing ("everything you remember about him").
_ALL_ABOUT = re.compile(r"\b(?:everything|all|anything)\s+(?:(?:that\s+)?(?:you|we|i)\s+(?:know|remember|have|kept|keep"
                        r"|stored|saved|noted)\s+|(?:stored|saved|noted|known)\s+)?(?:about|on|of)\b", re.I)
# Something new of a thing already known ("his new phone", "Acme's new
# office"): a fact about it, not a new thing.
_THEIR_NEW = re.compile(r"\b(?:his|her|their|its|[A-Z][a-z]+'s)\s+new\b|\bnew\s+(?:note|fact|detail|observation)s?\b")
# Things listed to keep ("these people: ...", "the following
# companies"): each a thing of its own.
_THESE_THINGS = re.compile(
    r"\b(?:these|those|the\s+following|following)\s+(?:\d+\s+|two\s+|three\s+|new\s+)?(?:people|persons|contacts"
    r"|entities|companies|organi[sz]ations|customers|clients|employees|colleagues|coworkers|projects)\b"
    r"|\b(?:add|create|store|register|save|record)\s+(?:my\s+|our\s+)?(?:two|three|four|five|six|\d+|some|a\s+few|several)\s+"
    r"(?:new\s+|fresh\s+)?(?:people|persons|contacts|companies|customers|clients|employees|colleagues|coworkers|projects|pets|cats"
    r"|dogs|animals|friends|children|kids|relatives|neighbou?rs)\b"
    r"|\b(?:my|our)\s+(?:new\s+)?(?:[\w-]+\s+)?(?:members|players|teammates|people|contacts|employees|students|pets)\s*:"
    r"|\b(?:create|add|make)\s+(?:entries|records|nodes|entities)\s+for\s+(?:our\s+|my\s+|the\s+)?(?:two|three|four|five|six"
    r"|\d+|several|some)\s+(?:new\s+)?\w+\s*:"
    r"|\beach\s+(?:one\s+|of\s+(?:them|those|these)\s+)?as\s+(?:its|their|a|an)\s+(?:own\s+|separate\s+)?"
    r"(?:item|entity|entry|node|record|thing)\b", re.I)
# One's own ("each as its own item"): whose it is, no owner.
_ONES_OWN = re.compile(r"\b(?:its|their|his|her|my|your|our)\s+own\b", re.I)
# New facts on a thing: "new info about entity Northwind".
_NEW_ABOUT = re.compile(r"\bnew\s+(?:info|information|details?|facts?|data|notes?)\s+(?:about|on|for|regarding)\b"
                        r"|\bupdates?\s+(?:on|about|for|regarding)\s+(?-i:[A-Z])[\w-]*\s*:", re.I)
# Things to make, said as such: "create entities for our new hires".
_MAKE_THINGS = re.compile(r"^\s*(?:please\s+)?(?:create|add|make|register|store)\s+(?:a\s+|an\s+|some\s+|two\s+|three\s+)?"
                          r"(?:new\s+)?(?:entit(?:y|ies)|nodes?)(?:\s+(?:(?:for|of|called|named)\b|['\"\u201c]|(?-i:[A-Z]))|\s*:)"
                          r"|\badd\s+(?:them|these|those|both)\s+as\s+(?:new\s+)?(?:entit(?:y|ies)|nodes)\b", re.I)
# Taken out of the whole store ("erase jdoe from the knowledge graph").
_FROM_STORE = re.compile(r"\b(?:from|out of) (?:the |your |my )?(?:knowledge graph|graph|memory|kg)\b", re.I)
# What is quoted: said of a thing, the names in it are no things of the
# request ("Priya is already in the graph, append: 'moved to Berlin'").
_QUOTED = re.compile(r"'[^']{1,200}'|\"[^\"]{1,200}\"|\u2018[^\u2019]{1,200}\u2019|\u201c[^\u201d]{1,200}\u201d")
# A named thing said to be of a kind the graph holds ("Priya is a person
# who leads ..."): the thing, whatever else is said of it.
_OF_A_KIND = re.compile(r"\b[A-Z][a-z]+\s+(?:is|are)\s+(?:a|an)\s+(?:person|company|organi[sz]ation|project|team|place|product)\b")
# One named thing said to be of a kind ("Dana is a designer", "it's a
# customer of ours", "she's an engineer"): the thing and its kind.
_IS_A = re.compile(r"\b(?:is|was|'s|’s)\s+(?:a|an)\s+(?!lot\b|bit\b|few\b)\w", re.I)


def _named(text, known):
    """How many things ``text`` names (capitalised runs, "service A",
    "lb-edge-1", "4B"); a capitalised first word that ``known`` holds is no name."""
    units = [m.group(0) for m in _NAME_UNIT.finditer(text) if m.group(0).lower() not in _CALENDAR_NAMES]
    # The first word of the request is capitalised as any first word.
    if units and text.lstrip().startswith(units[0]) and units[0].lower() in known:
        units = units[1:]
    return len({u.lower() for u in units} | {m.group(0).lower() for m in _LETTER_NAME.finditer(text)}
               | {m.group(0).lower() for m in _NUMBERED_NAME.finditer(text)}
               | {m.group(1) for m in _UNIT_CODE.finditer(_QUOTED.sub(" ", text))})


class GraphReading:
    """The reading, with the word tables it needs (``search_tables``)."""

    def __init__(self, tables):
        self.tables = tables
        self.new_thing = re.compile(
            r"\bnew (?:\w+ |'[^']{1,40}' |\"[^\"]{1,40}\" )?(?:" + "|".join(sorted(tables.NEW_THING_WORDS)) + r")\b", re.I)

    def object_of(self, text, words, known, action, files):
        """What a request about named things is about, as a knowledge graph
        holds it: ``"relation"`` (two named things and a word of how they
        relate: "Falcon depends on Hawk"), ``"observation"`` (a fact about one:
        "put that on her entry", "one more fact about Falcon"), ``"entity"`` (a
        new thing, or one named thing wholly: "a new person", "forget Kevin
        completely"), or None. ``words`` are the query's words in lower case,
        ``known`` the words that are no names when they open it."""
        tables = self.tables
        named = _named(text, known)
        if _MAKE_THINGS.search(text):
            return "entity"  # "create entities for our three new hires: Tom, Priya and Ken"
        if _NEW_ABOUT.search(text) and not files and not tables.FILE_THING_WORDS.intersection(words):
            return "observation"  # "new info about entity Northwind": facts on a thing known
        if self.new_thing.search(text) and not tables.FILE_THING_WORDS.intersection(words):
            return "entity"  # "a new person", "new entry for Jonas"
        if action == "make" and _A_NAMED_THING.search(text) and not files \
                and not tables.FILE_THING_WORDS.intersection(words):
            return "entity"  # "I just adopted a dog named Biscuit, remember him"
        if action == "make" and _THESE_THINGS.search(text) and not files:
            return "entity"  # "store these people in memory: Bob (manager), Carol (designer)"
        if _NOT_KNOWN_YET.search(text) and not tables.FILE_THING_WORDS.intersection(words) and not files \
                and not tables.LINK_WORDS.intersection(words):
            return "entity"  # "you don't know her yet": a new thing
        if _ABOUT_ONE.search(text) or _ON_ITS_RECORD.search(text) and len(_NAMED_RECORD.findall(text)) == 1:
            return "observation"  # "put that on her entry", "add that to what you have on him"
        if _ADDED_TO_NAME.search(text) and not files and not tables.FILE_THING_WORDS.intersection(words):
            return "observation"  # "append to Project Phoenix: 'deadline slipped'"
        if _SERVICES_LINKED.search(text) and not files:
            return "relation"  # "record that billing-service depends on postgres-main"
        if action in ("make", None) and _LINKED_BY.search(text) and not files:
            return "relation"  # "note that Marc Li introduced me to the whistleblower Heron"
        if action in ("make", None) and _DOES_TO.search(text) and not files \
                and not tables.FILE_THING_WORDS.intersection(words):
            return "relation"  # "record that Dr. Patel treats Luna"
        if _RELATION_TYPE.search(text) and not files:
            return "relation"  # "Dave works_at Acme", "remove the manager_of link"
        if _BOTH_KNOWN.search(text) and not files:
            return "relation"  # "Berlin is located in Germany (both nodes exist already)": what links them
        if action == "remove" and _KEEPS_BOTH.search(text):
            return "relation"  # "delete the edge ..., keep both nodes": only what links them
        if action == "remove" and _KEEPS_THE_THING.search(text):
            return "observation"  # "erase the phone number we noted on Globex; the record itself stays"
        if action == "remove" and (named >= 1 or tables.WHOLLY_WORDS.intersection(words)) and _WITH_ITS.search(text):
            return "entity"  # "drop the nodes Foo and Bar along with their links": the things themselves
        if action == "make" and _OF_A_KIND.search(text) and not files:
            return "entity"  # "remember that Priya is a person who leads the billing team"
        relating = tables.RELATION_WORDS
        # Words said only inside quotes ("remove the observation 'works
        # Fridays'") are what is stored, no relation asked for.
        quoted = set(re.findall(r"[^\W\d_]+", " ".join(q for q in _QUOTED.findall(text) if len(q.split()) <= 5).lower()))
        quoted -= set(re.findall(r"[^\W\d_]+", _QUOTED.sub(" ", text).lower()))
        if named >= 2 and any((w in relating or w[-1:] == "s" and w[:-1] in relating)
                              and not (w == "own" and _ONES_OWN.search(text)) for w in words - quoted):
            return "relation"
        if "between" in words and tables.LINK_WORDS.intersection(words) and not files:
            return "relation"  # "the relationship between two entities"
        if _LINKING_LEAD.search(text) and not files and not tables.FILE_THING_WORDS.intersection(words):
            return "relation"  # "disconnect the two entities": what links them
        if action == "remove" and _A_LINE.search(text) and not files and not tables.FILE_THING_WORDS.intersection(words):
            return "observation"  # "take out the line about Tom moving to Berlin": one fact
        if _ROLE_OF.search(text) and not files:
            return "relation"  # "note that Initech is a customer of Globex"
        if action == "remove" and (_THAT_LINK.search(text) or _THINGS_STAY.search(text)):
            return "relation"  # "delete that connection", "remove the 'reports to' link, the people stay"
        if action and _ALREADY_KNOWN.search(text) and (named <= 1 or _named(_QUOTED.sub(" ", text), known) <= 1):
            return "observation"  # "Acme has 200 employees (Acme is already stored)": on its record
        if action and tables.FACT_WORDS.intersection(words):
            return "observation"
        if action and _THEIR_NEW.search(text) and not files and not tables.FILE_THING_WORDS.intersection(words):
            return "observation"  # "update Bob with his new phone number": new of a thing known
        if action == "make" and ("entity" in words or "entities" in words) and not files and not _ON_ENTITY.search(text):
            return "entity"  # "register the entity 'postgres-prod' of type database"
        if "new" in words and not files and not tables.FILE_THING_WORDS.intersection(words) and (
                tables.NEW_THING_WORDS.intersection(words) or action == "make"):
            return "entity"
        if action == "remove" and _ALL_ABOUT.search(text) and not _KEEPS_THE_THING.search(text):
            return "entity"  # "wipe everything you remember about my ex": the thing itself
        if action == "remove" and (named == 1 or tables.WHOLLY_WORDS.intersection(words)) and _FROM_STORE.search(text):
            return "entity"  # "erase jdoe from the knowledge graph", "delete these from the graph outright"
        if named == 1 and _IS_A.search(text) and not files and not tables.FILE_THING_WORDS.intersection(words):
            return "entity"  # "remember that Dana is a designer": what a thing is, its kind
        if named == 1 and (tables.WHOLLY_WORDS.intersection(words) or _WITH_ITS.search(text)):
            return "entity"  # "forget Kevin completely", "drop Phoenix along with its links"
        return None
