"""The vocabulary ``tool_search.py`` reads queries with: words that say
nothing, command words and phrases, synonyms and words of the same need,
time zone abbreviations, what a file's extension says it is.

Generic vocabulary of tool catalogs (files, records, time, actions and MCP's
own), not any one server's; ``testing/search-eval/README.md`` says how it
was written and what tuning changed. Data only: ``search_query.py`` loads
this file from its own folder, as ``runner.py`` loads ``tool_search.py``.
"""

# A query opening with one of these is a question (tool_search.py's
# QUESTION_HINTS).
QUESTION_WORDS = frozenset(
    "what what's whats which when where who whose how is are does do did have has".split())

# A question opening with one of these asks what is (a tool that reads),
# unless it asks how to do something ("how do I ...").
READING_QUESTIONS = frozenset(
    "what what's whats which when where who whose is are was were does did has have how".split())

# Verbs that, opening a request, ask to read, not to change anything.
READING_VERBS = frozenset("get list show read view display fetch print find search lookup locate".split())

# After one of these, a verb says when or whether, not what is asked for
# ("before deleting"); so after one of PERMISSION_WORDS and "to"
# ("allowed to save").
ASIDE_WORDS = frozenset("before after instead".split())
PERMISSION_WORDS = frozenset("allowed permitted able supposed".split())

# A question asking where or which, with one of these among its first
# words ("where can you write files?", "which folders am I allowed to
# read"), asks what is allowed; its verbs say what for.
PLACE_QUESTIONS = frozenset("where which what".split())
MODAL_WORDS = frozenset("can could may allowed permitted able".split())

# Words asking for all of something.
WHOLE_WORDS = frozenset("all every everything entire whole complete full".split())

# Verbs that, opening a tool's name, say it changes something.
MUTATING_VERBS = frozenset(
    "create add delete remove write edit move rename update set put insert append patch drop clear".split())

# Verbs that, opening a request, ask to change something: a tool whose
# name opens with a reading verb (READING_VERBS) is not what is asked for.
CHANGING_VERBS = frozenset(
    "create write save store put delete remove erase rename move edit update modify change replace append insert "
    "overwrite".split())

# Verbs that, opening a request naming a file and a folder ("put
# report.pdf into the archive folder"), ask to move the file there.
PLACING_VERBS = frozenset("put place stick drop send shift file".split())
FOLDER_WORDS = frozenset("folder folders directory directories dir dirs subfolder subdirectory".split())

# Words of a question that asks what is known or was said.
RECALL_WORDS = frozenset("remember remembered recall told mention mentioned said stored know known".split())

# The word after one of these is a name the call is given ("a folder
# called logs"): an argument.
NAMING_WORDS = frozenset("called named titled".split())

# After "how", these words make the question ("how many", "how long").
HOW_WORDS = frozenset("many much long often".split())

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
doesn don isn aren wasn weren won didn hasn haven can cannot couldn wouldn
shouldn under over within across below above between through per upon
beneath beside near
""".split())

# Words that stand for several (command names, shorthand): they join the
# query as the words they stand for.
COMPOUND_WORDS = {
    "mkdir": "make directory",
    "rmdir": "remove directory",
    "ls": "list files",
    "rm": "remove",
    "mv": "move",
    "cp": "copy",
    "cat": "read",
    "grep": "search",
    "unlink": "remove link relation",
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
    "disconnect": "remove connection relation",
    "tail": "read last lines",
    "head": "read first lines",
    "detach": "remove link",
    # Shorthand people type.
    "sz": "size",
    "mtime": "modified timestamp metadata",
    "ctime": "creation timestamp metadata",
    "atime": "access timestamp metadata",
    "fs": "filesystem file",
    "perms": "permission",
    "msg": "message",
    "msgs": "message",
    "img": "image",
    "pic": "image",
    "pics": "image",
    "pwd": "current directory",
    "cwd": "current directory",
    "tmp": "temporary",
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

# Parameters whose values are of one kind (a tool's required parameter
# names, as the signature gives them), and the words of a query that show
# it speaks of such a value: a query showing none of them gives no value
# of that kind, and a tool requiring one weighs less.
PARAMETER_KINDS = {
    "path": "path paths",
    "url": "url uri",
}
KIND_SIGNS = {
    "path": "file files filename document folder folders directory directories dir dirs subfolder subdirectory "
            "path paths filesystem disk drive repo repository project source src code script log logs config "
            "text image picture photo audio video media content contents line lines tree",
    "url": "url uri link links browser web page website site http https login oauth",
}

# Words that link a clause to what came before ("also remember ...",
# "and then link ..."): the verb after them opens the clause.
LINKING_WORDS = frozenset("also and then please pls just so but plus additionally too".split())

# Phrases read as one word before the query is split.
PHRASES = {
    "log in": "login",
    "log into": "login",
    "sign in": "login",
    "logged in": "login",
    "in one go": "together",
    "at once": "together",
    "at the same time": "together",
    "which files": "list directory files",
    "what files": "list directory files",
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
    "pull up": "show",
    "jot down": "note",
    "keep track of": "remember",
    "keep in mind": "remember",
    "make a note": "note",
    "bring up": "show",
    "look for": "search",
    "current folder": "folder",
    "current directory": "directory",
    "project root": "folder",
    "root folder": "folder",
    "root directory": "directory",
    "take out": "remove",
    "get rid of": "remove",
    "change the filename": "rename file",
    "change the file name": "rename file",
    "change the name": "rename",
    "change its name": "rename",
    "in the name": "pattern",
    "in its name": "pattern",
    "in their name": "pattern",
    "in the filename": "pattern",
    "search and replace": "replace",
    "replace the entire": "overwrite",
    "replace the whole": "overwrite",
    "replace everything in": "overwrite",
    "find and replace": "replace",
    "language model": "llm",
    "fill in": "form",
    "fill out": "form",
    "looking for": "search",
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

# Groups of words that name one thing or action in tool catalogs: generic
# vocabulary of files, records, time and actions, written before tuning
# (testing/search-eval/README.md lists what tuning changed).
SYNONYM_GROUPS = [
    "create make new add generate build init initialize setup scaffold",
    "add sum plus total addition",
    "delete remove erase drop forget destroy purge clear wipe retract discard nuke scrap trash ditch",
    "read get fetch load open view show display retrieve see print peek inspect examine grab",
    "write save store put overwrite persist stash",
    "edit modify change update patch alter replace amend tweak fix correct swap revise adjust substitute refactor",
    "list enumerate browse entries",
    "search find lookup look locate query match filter seek hunt scan",
    "directory folder dir subfolder subdirectory",
    "file document",
    "move rename relocate transfer",
    "time clock hour minute date datetime timestamp",
    "current now present today latest",
    "timezone zone tz",
    "convert translate transform conversion",
    "size big large bytes huge heavy weight weigh footprint",
    "metadata info information details stat stats attributes properties",
    "compress zip gzip gz pack archive bundle squash",
    "image picture photo png jpg jpeg gif icon screenshot thumbnail",
    "media audio video sound",
    "environment env config configuration settings",
    "variable var",
    "echo repeat parrot",
    "message text string word",
    "toggle switch enable disable turn activate deactivate",
    "trigger start run launch begin kick",
    "observation fact note detail trait habit",
    "entity node person people organization thing contact",
    "relation relationship link connect connection edge associate",
    "research investigate investigation study explore analyze",
    "number integer digit",
    "slow long lengthy",
    "operation task job process",
    "tree hierarchy recursive",
    "allowed allow access permitted accessible",
    "permission privilege mode owner own owns readonly executable chmod",
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
    "search anywhere somewhere wherever",
    "time morning afternoon evening night noon midnight tonight day week weekday weekend "
    "monday tuesday wednesday thursday friday saturday sunday",
    "dst daylight saving summer",
    "convert difference ahead behind equivalent",
    "timezone utc gmt offset",
    "read contents content inside say says written tail head body",
    "list contents inside items children contain contains containing inventory catalog",
    "current local",
    "media binary base64 song music voice podcast clip movie film",
    "edit insert append prepend",
    "size kb mb gb megabytes kilobytes",
    "metadata timestamps age old older newer newest oldest recent recently",
    "reference ref pointer",
    "elicitation confirm confirmation questionnaire survey",
    "entity record entry profile customer coworker teammate company org concept",
    "multiple both compare",
    "entire whole everything complete full dump export backup snapshot",
    "size space usage disk biggest largest smallest",
    "tree layout overview organised organized nested",
    "knowledge memory memories remember recall told mention mentioned stored memorize memorized",
    "relation reports manages married works belongs owns member friend parent child "
    "sibling spouse colleague boss employee employer partner",
    "observation preference prefers likes dislikes speaks lives favourite favorite allergy allergic birthday hobby role",
    "echo ping back unchanged mirror say bounce",
    "annotation annotated priority audience",
    "edit diff comment uncomment",
    "delete unlink break detach disconnect",
    "allowed reach touch sandbox may",
    "create empty blank fresh",
    "exclude skip skipping ignore except excluding",
    "count handful few",
    "weather temperature humidity conditions rain sunny climate hot cold warm chilly snow humid",
    "sum add plus total calculate compute arithmetic math addition",
    "tiny small little sample logo",
    "compress shrink deflate",
    "log spam verbose level levels noisy noise",
    "subscription subscribe subscriber subscribed notification notifications notify changed",
    "long progress steps duration wait while",
    "research topic deep synthesize findings summarize analysis",
    "elicitation ask prompt input form fill answer question",
    "url browser web page login oauth consent authorize redirect visit",
    "sampling llm model completion prompt tokens ai gpt haiku poem story",
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

CLOCK_WORDS = frozenset("noon midnight".split())

# What a file name's extension says the file is.
EXTENSION_KINDS = {
    "image": "png jpg jpeg gif bmp webp svg tif tiff ico heic",
    "audio": "mp3 wav ogg flac m4a aac opus",
    "video": "mp4 mov avi mkv webm",
    "text": "txt md markdown json csv tsv log yaml yml toml ini cfg conf py rs js ts "
            "html xml sh sql c h go java rb",
    "compress": "gz zip tgz tar bz2 xz 7z",
}

# The words a kind of file adds to a query, with their weights.
EXTENSION_HINTS = {
    "image": (("image", 0.6), ("media", 0.5)),
    "audio": (("audio", 0.6), ("media", 0.5)),
    "video": (("video", 0.6), ("media", 0.5)),
    "text": (("text", 0.5),),
    "compress": (),
}
