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
READING_VERBS = frozenset("get give list show read view display fetch pull export print find search lookup locate retrieve".split())

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
WHOLE_WORDS = frozenset("all every everything entire entirety whole complete full".split())

# Verbs that, opening a tool's name, say it changes something.
MUTATING_VERBS = frozenset(
    "create add delete remove write edit move rename update set put insert append patch drop clear".split())

# Verbs that, opening a request, ask to change something: a tool whose
# name opens with a reading verb (READING_VERBS) is not what is asked for.
CHANGING_VERBS = frozenset(
    "create write save store put delete remove erase rename move edit update modify change replace append insert "
    "overwrite".split())

# Words that say what is not wanted ("no sizes", "without subfolders",
# "don't recurse"): the words after them weigh as arguments.
NEGATING_WORDS = frozenset("no not without never nothing don doesn didn isn dont doesnt didnt isnt".split())
# Words of a collection of things: negated, what they are of is not
# wanted either ("not a whole list of links").
COLLECTION_WORDS = frozenset("list lists bunch set sets pile batch group collection array series lot lots".split())
# Subjects of a verb that tells what happened ("I wrote", "we made").
SUBJECT_WORDS = frozenset("i we you he she they it someone somebody".split())
# Forms of "be" before a subject: a question of its state, no past event
# ("are you sandboxed", "is Bob married").
BE_FORMS = frozenset("am are is was were r".split())
# Past forms that do not end in -ed.
PAST_FORMS = frozenset("wrote made sent took gave saw got left brought bought found kept held thought ran "
                       "began broke chose drew drove fell felt forgot grew hid knew lost met paid rode rose "
                       "sold set shut sat slept spent stood stole swam taught threw understood woke won "
                       "came went became".split())

# Folders every project has, named without a slash ("list node_modules").
FOLDER_NAMES = frozenset(
    "node_modules __pycache__ site-packages .venv venv .git .github dist build target vendor .bin bin".split())
# Words asking for what a file system knows of a file, not what it holds:
# the file's kind (an image, a video) then says nothing of the tool.
METADATA_WORDS = frozenset("size sizes bytes weigh weighs modified created permissions owner metadata timestamp".split())
# Environment variables every process has, as written in capitals ("what
# PATH and HOME did it get"): a question about the environment.
ENVIRONMENT_NAMES = frozenset("PATH HOME USER SHELL LANG PWD TMPDIR HOSTNAME TERM EDITOR PYTHONPATH NODE_ENV".split())
# Files every system or project has, named without an extension: the last
# part of a path so named is a file ("/etc/hosts"), not a folder.
KNOWN_FILES = frozenset("""
hosts passwd shadow gshadow fstab hostname sudoers crontab motd authorized_keys known_hosts id_rsa id_ed25519 bashrc zshrc
sshd_config ssh_config gitconfig vimrc inputrc
license readme makefile dockerfile changelog procfile gemfile jenkinsfile vagrantfile brewfile
""".split())
# Words of a parameter's name that take a file or a folder.
FILE_PARAMETERS = frozenset(
    "path paths file files filename source destination src dest target dir directory folder uri".split())
# Words that, beside a clock time, ask whether it is that time now ("is it
# past midnight in Auckland yet").
NOW_WORDS = frozenset("yet already past still".split())
# Words that ask to convert a time, though no clock time is given.
CONVERT_WORDS = frozenset(
    "convert conversion converted difference differ ahead behind equivalent equals offset between vs versus".split())

# What a request about named things in a knowledge graph is about
# (search_graph.py): words of how two things relate, things
# that "a new ..." makes, words of a fact, words of files (a new file is
# no new thing of the graph), words that take away a thing wholly.
RELATION_WORDS = frozenset("""
depends depend reports report manages manage managed married marry works work worked belongs belong owns own owned
member friend friends parent child sibling sister brother spouse wife husband colleague colleagues boss employee
employer partner partners cousin uncle aunt mother father son daughter mentor mentors founded founder leads lead
between linked link links connection connections connected relationship relationships related join joins joined
hired hires employs employ employed acquired acquires acquire funded funds sponsored sponsors financed
supplies supply supplied represents represent represented trains trained teaches taught advises advised coaches
coached mentored supervises supervise supervised handles handled rents rent rented leases leased subsidiary
""".split())
NEW_THING_WORDS = frozenset("""
person people entry entries project contact client customer company entity entities node record colleague friend
employee records members collaborator hire hires
""".split())
# Shell commands that list files: piped into grep, a search for files
# ("ls -R | grep csv").
LISTING_COMMANDS = frozenset("ls find tree du locate fd dir".split())
# Words for a link itself ("the relationship between ...").
LINK_WORDS = frozenset("relationship relationships relation relations connection connections link links edge edges association associations".split())
FACT_WORDS = frozenset("fact facts detail details observation observations".split())
FILE_THING_WORDS = frozenset("file files folder folders directory directories dir".split())
WHOLLY_WORDS = frozenset("completely entirely altogether totally wholly outright".split())

# Verbs that ask to take something away, and verbs that ask to make or
# add something: a request opening a clause with one of them does not
# want a tool whose name opens with one of the other kind ("take it out"
# is no add_observations, "store that connection" no delete_relations).
REMOVING_VERBS = frozenset(
    "delete remove erase drop forget destroy purge clear wipe retract discard nuke scrap trash ditch unlink "
    "disconnect detach cut strike strip eliminate kill scrub undo expunge sever scratch break weed withdraw".split())
MAKING_VERBS = frozenset(
    "create make add new generate build store save record remember note insert register log set attach append put jot".split())

# Verbs that, opening a request naming a file and a folder ("put
# report.pdf into the archive folder"), ask to move the file there.
PLACING_VERBS = frozenset("put place stick drop send shift file".split())
FOLDER_WORDS = frozenset("folder folders directory directories dir dirs subfolder subdirectory".split())
# Things inside a file's text that a request may rename ("rename the
# function foo to bar"): an edit of the text, not a move of the file.
TEXT_THINGS = frozenset("""
function functions func fn call calls method methods variable variables var vars class classes field fields
symbol symbols parameter parameters param params constant constants const heading headings title
key keys column columns identifier identifiers property properties prop props label labels import
imports type types struct enum argument arguments arg args attribute attributes selector component
""".split())
# Changing verbs that, with a file's name as their object, ask to rename
# it ("change notes.txt's filename to ...", "fix the folder's name").
RENAMING_VERBS = frozenset("change fix correct update alter edit modify".split())
# Shell commands that read a file's text: the path after one is a file
# ("cat /etc/hosts", "tail /var/log/syslog").
FILE_COMMANDS = frozenset("cat less more head tail bat nano vim vi".split())
# Words that give a new file its content ("a todo.txt with my list in it",
# "a .gitignore containing target/").
FILLING_WORDS = frozenset("with containing contains holding holds saying says content contents text listing".split())

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
lol lmao ngl tbh fr plz thx ty dunno idk pretty
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
    "lmk": "tell me",
    "mk": "make",
    "replacement": "replace",
    "replacements": "replace",
    "smth": "something",
    "sth": "something",
    "ppl": "people",
    "b4": "before",
    "atm": "now",
    "filename": "file name",
    "pr": "pull request",
    "prs": "pull requests",
    "mr": "merge request",
    "mrs": "merge requests",
    "repo": "repository",
    "repos": "repositories",
    "db": "database",
    "sql": "sql query",
    "dirs": "directory",
    "envs": "environment",
    "environ": "environment",
    "llm": "llm model",
    "chatbot": "llm model",
    "readme": "text file",
    "license": "file",
    "makefile": "text file",
    "dockerfile": "text file",
    "changelog": "text file",
    "disconnect": "remove connection relation",
    "tail": "read last lines",
    "head": "read first lines",
    "detach": "remove link",
    # Shorthand people type.
    "sz": "size",
    "op": "operation",
    "roundtrip": "echo",
    "memorize": "remember",
    "memorise": "remember",
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
    # More shell commands people type as a request.
    "printenv": "print environment variables",
    "mentioning": "search mention",
    "diff": "compare diff",
    "tar": "archive compress",
    "gunzip": "decompress",
    "sed": "edit replace",
    "mkdirs": "make directory",
    "rmrf": "remove",
    "anymore": "remove",
    "del": "delete",
    "fenced": "allowed restricted",
    "accession": "record",
    "accessions": "records",
    "obs": "observations",
    "rel": "relation",
    "rels": "relations",
}

# Verbs that, opening the query or a clause of it, ask for more than
# their word: "link Alice to Acme" creates a link, "remember that ..."
# stores something.
LEADING_VERBS = {
    "touch": "touch create file",
    "link": "link create",
    "connect": "connect create",
    "remember": "remember add",
    "memorize": "remember add",
    "memorise": "remember add",
    "note": "note add",
    "record": "record create",
    "glob": "glob search",
    "dir": "list directory",
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
LINKING_WORDS = frozenset("also and then please pls just so but plus additionally too kindly".split())

# Phrases read as one word before the query is split.
PHRASES = {
    "log in": "login",
    "open up": "open",
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
    "above sea level": "elevation",
    "who am i": "get self user",
    "lat/lng": "latitude longitude",
    "lat/long": "latitude longitude",
    "lat/lon": "latitude longitude",
    "how far": "how distance",
    "sea level": "elevation",
    "how high": "how height",
    "how tall": "how height",
    "at the moment": "now",
    "take up space": "size",
    "taking up space": "size",
    "off limits": "allowed",
    "no longer": "remove",
    "clean up": "remove",
    "knowledge graph": "graph",
    "look at": "view",
    "pull up": "show",
    "jot down": "note",
    "keep track of": "remember",
    "keeping track of": "remember",
    "keep in mind": "remember",
    "make a note": "note",
    "bring up": "show",
    "look for": "search",
    "current folder": "folder",
    "current directory": "directory",
    "project root": "folder",
    "repo root": "folder",
    "repository root": "folder",
    "root of the repo": "folder",
    "root of the repository": "folder",
    "root of the project": "folder",
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
    "round trip": "echo",
    "round-trip": "echo",
    "peek at": "view",
    "peek into": "view inside",
    "deep dive": "research",
    "forget that": "forget fact",
    "let me": "allowed",
    "let me see": "show",
    "let me look at": "view",
    "let me view": "view",
    "file or folder": "metadata type",
    "file or a folder": "metadata type",
    "file or directory": "metadata type",
    "file or a directory": "metadata type",
    "be called": "rename",
    "be named": "rename",
    "be renamed": "rename",
    "ask the user": "elicit ask",
    "ask the human": "elicit ask",
    "ask the person": "elicit ask",
    "ask a human": "elicit ask",
    "ask me": "elicit ask",
    "prompt the user": "elicit ask",
    "prompt the human": "elicit ask",
    "ask the model": "sampling",
    "ask the llm": "sampling",
    "ask the ai": "sampling",
    "client's model": "sampling",
    "client model": "sampling",
    "nodes and edges": "entire graph",
    "nodes and relations": "entire graph",
    "entities and relations": "entire graph",
    "node and edge": "entire graph",
    "entity and relation": "entire graph",
    "nodes and links": "entire graph",
    "entities and relationships": "entire graph",
    "nodes and relationships": "entire graph",
    "node and relationship": "entire graph",
    "node and relation": "entire graph",
    "anything on": "search",
    "what do we have on": "search",
    "anything related to": "anything about",
    "something related to": "anything about",
    "everything related to": "everything about",
    "lying around": "anywhere search",
    "what do you have on": "search",
    "what have we got on": "search",
    "anything about": "search",
    "anything regarding": "search",
    "all the way down": "recursive",
    "map out": "overview",
    "levels deep": "recursive",
    "top level": "list",
    "just the names": "list no sizes",
    "creation date": "metadata timestamp",
    "in total": "entire",
    "no filter": "entire",
    "nothing filtered": "entire",
    "unfiltered": "entire",
    "the full thing": "entire",
    "the whole thing": "entire",
    "of type": "matching",
    "creation time": "metadata timestamp",
    "modification date": "metadata timestamp",
    "anything stored": "search",
    "anything saved": "search",
    "in the morning": "am",
    "in the evening": "pm",
    "in the afternoon": "pm",
    "at night": "pm",
    "what's in": "contents",
    "whats in": "contents",
    "what is in": "contents",
    "only the names": "list no sizes",
    "names only": "list no sizes",
    "just names": "list no sizes",
    "one level": "list",
    "first level": "list",
    "all levels": "recursive",
    "every level": "recursive",
    "fix the filename": "rename file",
    "fix the file name": "rename file",
    "fix the name": "rename",
    "did i tell": "did i told",
    "did i say": "did i said",
    "did i mention": "did i mentioned",
    "did i ever tell": "did i told",
    "did i ever say": "did i said",
    "did i ever mention": "did i mentioned",
    "did i already tell": "did i told",
    "did i already say": "did i said",
    "did i already mention": "did i mentioned",
    "fix its name": "rename",
    "fix its filename": "rename file",
    "fix its file name": "rename file",
    "first time": "new",
    "tack on": "add",
    "tack onto": "add to",
    "lets me": "allowed to",
    "let me read": "allowed to read",
    "find out where": "where",
    "in their filename": "search whose file name matches",
    "in the filename": "search whose file name matches",
    "in the file name": "search whose file name matches",
    "in their name": "search whose name matches",
    "what we know about": "the facts about",
    "what you know about": "the facts about",
    "what i said about": "the facts about",
    "break the connection": "remove the connection",
    "over time": "gradually",
    "a single call": "together",
    "top-level": "list",
    "should live in": "move into",
    "ls -lh": "list sizes",
    "ls -lhs": "list sizes",
    "ls -lah": "list sizes",
    "ls -alh": "list sizes",
    "ls -ls": "list sizes",
    "ls -l": "list sizes",
    "ls -la": "list sizes",
    "ls -al": "list sizes",
    "ls -lha": "list sizes",
    "ls -s": "list sizes",
    "knowledge base": "graph kb",
    "git diff --cached": "git diff staged",
    "git diff --staged": "git diff staged",
    "git checkout -b": "git create branch",
    "git switch -c": "git create branch",
    "ls -r": "directory tree recursive",
    "ls -lr": "directory tree recursive",
    "find . -name": "search files",
    "find -name": "search files",
    # What kind of thing a path is: its metadata.
    "a file or a directory": "metadata type",
    "a file or a folder": "metadata type",
    "a file or a dir": "metadata type",
    "file or dir": "metadata type",
    "a directory or a file": "metadata type",
    "a folder or a file": "metadata type",
    "directory or file": "metadata type",
    "folder or file": "metadata type",
}

# Log levels: joined by slashes ("debug/info/error") they are words, not
# a path.
LOG_LEVELS = frozenset("trace debug info notice warn warning error critical alert emergency fatal".split())

# What an SQL statement's verb asks, written as a request.
SQL_VERBS = {
    "select": "read",
    "insert": "insert new",
    "update": "update",
    "delete": "delete",
    "create": "create",
    "alter": "alter",
}


# Verbs whose particle may stand after their object ("take it out",
# "cross Bob off", "turn the logs on"): (verb, particle) -> what they
# ask, with the object (at most three words) kept after it.
PARTICLE_VERBS = {
    ("take", "out"): "remove",
    ("take", "off"): "remove",
    ("take", "back"): "remove",
    ("clean", "off"): "remove",
    ("cut", "off"): "remove",
    ("cut", "out"): "remove",
    ("strike", "off"): "remove",
    ("strike", "out"): "remove",
    ("cross", "off"): "remove",
    ("cross", "out"): "remove",
    ("wipe", "out"): "remove",
    ("weed", "out"): "remove",
    ("throw", "away"): "remove",
    ("throw", "out"): "remove",
    ("rip", "out"): "remove",
    ("scratch", "off"): "remove",
    ("clean", "out"): "remove",
    ("clear", "out"): "remove",
    ("turn", "on"): "enable",
    ("turn", "off"): "disable",
    ("switch", "on"): "enable",
    ("switch", "off"): "disable",
    ("shut", "off"): "disable",
    ("look", "up"): "lookup",
    ("hunt", "down"): "search",
    ("write", "down"): "note",
    ("put", "down"): "note",
    ("jot", "down"): "note",
    ("note", "down"): "note",
    ("pull", "up"): "show",
    ("bring", "up"): "show",
    ("set", "up"): "create",
    # Round 14: finishing an item of a list.
    ("mark", "done"): "close",
    ("mark", "complete"): "close",
    ("mark", "completed"): "close",
    ("mark", "finished"): "close",
    ("tick", "off"): "close",
    ("check", "off"): "close",
}


# Everyday English words: a query word among them is meant as written,
# never read as a misspelling of a catalog word that happens to be one or
# two letters away ("take" is no "make", "wrong" no "long", "hand" no
# "handle"). Written for issue 43's fourth round from general English,
# not from any question.
COMMON_WORDS = frozenset("""
emit emits emitted emitting
able about above across act acted action actual actually added after again against age ago agree
ahead air alive almost alone along already also although always among amount animal answer anyone anything
anyway apart apple april area arm army around arrive art aside asked attach attack august aunt
autumn avoid awake away baby bad bag ball band bank bar base basic battle beach bear
beat beautiful became because become bed been beer began behave being believe bell below belt bench
bend benefit best better beyond bill bird bit bite bits black blame blind block blood blow
blue board boat body bone bonus book boot border born borrow bottle bottom bought bowl box
boy brain branch brand brave bread break breakfast brick bridge brief bright bring broad broke brother
brown brush budget bug bunch burn bus business busy buy cable cake call called calm came
camera camp can car card care career careful carry case cash cast cat catch cause cell
center central certain chain chair chance channel charge cheap check cheese chess chest chicken chief choice
church circle claim class clean clear clever client climb close cloth cloud club coach coast coat
coffee coin collect college color colour come comfort common company complain concern condition cook cool copy
corner cost cotton could country couple course court cousin cover cow crash crazy cream credit crew
crime crop cross crowd cry cup cure curve customer cut cycle dad damage dance danger dark
daughter dead deal dear death debt decide deep deer defend degree deliver demand demo depend desk
dessert dinner direction dirty discuss dish doc doctor does dog doing dollar done door double doubt down
dozen draw dream dress drink drive driver dry duck due during dust duty each ear early
earn earth east easy eat eaten eating edge egg eight either else email embed emergency employ
end enemy energy engine enjoy enough enter equal error escape essay even event ever evidence exact
exam example excellent exchange excited excuse exercise expect expensive expert explain express extra eye face fact
factor fail fair fake fall family famous fan far farm fast fat father fault fear feature
feed feel fell felt female fence few field fight figure final finally fine finger finish fire
firm first fish fit five flat flight floor flow flower fly focus folk folks follow following
food foot force forest forever forget fork former forward found four frame free fresh fridge friend
front fruit fuel fun fund funny future gain game garage garden gas gate gave general gentle
gift girl give given glad glass goal goat god gold golf gone good goods got govern
grab grade grand grass great green grew ground group grow guard guess guest guide gun guy
habit hair half hall hand handle hang happen happy hard harm hat hate have head health
hear heard heart heat heavy held hell hello help her here hero hide high hill him
hire his history hit hobby hold hole holiday home honest hope horse host hotel hour house
how huge human hungry hurry hurt husband ice idea if ill image impact improve inch include
income increase indeed inform injury inner insect instead intend invite iron island issue item jacket job
join joke jot journey judge juice jump junior just keen keep keeps kept kid kill kind king
kiss kitchen knee knife knock lab labour lack lady lake land lands lane language large last
late later laugh law lawyer lay lazy lead leads learn least leave led left leg legal
lend less lesson let letter lie life lift light like likely lime line lion lip liquid
listen little live loan lock lonely look lookin loose lord lose loss lost lot loud love
low luck lunch machine mad made mail main major make male mall man manage manner many
map mark market marry mass master match mate matter may maybe meal mean meat medical meet
meeting member memo mention menu mess metal method middle might mild milk mind mine minor miss
mistake mix mixed mobile moment money month mood moon more morning most mother motor mountain mouse
mouth movie much mud music must nation nature near nearly neck need needed neither nerve never
nice niece night nine noise none nor normal north nose nothing notice novel nurse object obvious
occur ocean odd offer office officer often oil okay old once only onto open opinion order
other ought our out outside oven over owe own owner pack page pain paint pair palace
pale pan panel paper parent park part parts party pass past path patient pay payment peace
pen pencil people pepper per perfect perhaps period person pet phone piano pick picnic piece pig
pile pilot pin pink pipe pitch place plan plane plant plate play player please plenty plus
pocket poet point police polite pool poor pop port pose position post pot pound pour power
practice pray prefer present press pretty price pride priest prince print prison private prize problem promise
proof proper proud prove pull pump punch pupil purple purpose push quality quarter queen quick quiet
quite race radio rail rain raise range rare rate rather raw reach ready real really reason
receive recent red reefs refer region relax rely remain rent repair repeat reply repo report respond
rest result return rice rich ride right ring rise risk river road rock role roll roof
room rope rose rough round route row royal rule run rush sad safe sail salad salary
sale salt same sand save saw say scale scene school science score scrub sea seat second
secret see seed seem seen sell send senior sense sent series serious serve service session settle
seven several shake shall shape share shared sharp she sheep sheet shelf shell shift shine ship
shirt shock shoe shoot shop short shot should shout show shower shut shy sick side sight
sign signal signing silly silver simple since sing single sink sir sister sit site six skill
skin sky sleep slice slide slip slow small smart smell smile smoke snake soap social sock
soft soil soldier solid solve some son song soon sore sorry sort soul soup south space
spare speak special speech speed spell spend spirit spoon sport spot spread spring square staff stage
stair stale stamp stand star stare state station stay steal steam steel step stick still stock
stone stood stop storage storm story stove straight strange street stress strike strong student study stuff
stupid style subject succeed such sudden sugar suit summary summer sun supply support sure surface surprise
sweet swim table tail take taken takes talk tall taste tax tea teach team tear temp
tend tent term test than thank that theft their them theme then theory there these they
thick thin thing think third this those though thought three throat through throw thus ticket tidy
tie tight till title toe together toilet told tomorrow tone tongue too took tool tooth top
topic total touch tough tour tower town toy track trade traffic train travel treat trial trick
trip trouble truck true trust truth try tube tune turn twice twin type typo ugly uncle
under unit until upon upper upset urge use used useful user usual valley value van vast
very view village visit voice vote wage wait wake walk wall want war warm warn wash
waste watch water wave way weak wear wedding week weird well went were west wet whale
what wheel when whether which while whip white who whole why wide wife wild will win
wind window wine wing winter wise wish with within without woman wonder wood wool word wore
work world worry worse worth would wound wrap wrong yard year yellow yes yet young youth
zero
""".split())


# Groups of words that name one thing or action in tool catalogs: generic
# vocabulary of files, records, time and actions, written before tuning
# (testing/search-eval/README.md lists what tuning changed).
SYNONYM_GROUPS = [
    "simulated simulate simulation pretend fake mock",
    "create make new add generate build init initialize setup scaffold register establish",
    "add sum plus total addition",
    "delete remove erase drop forget destroy purge clear wipe retract discard nuke scrap trash ditch strip scrub expunge sever strike withdraw",
    "read get fetch load open view show display retrieve see print peek inspect examine grab peruse slurp",
    "write save store put overwrite persist stash clobber",
    "edit modify change update patch alter replace amend tweak fix correct swap revise adjust substitute refactor bump",
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
    "echo repeat parrot loopback",
    "message text string word",
    "toggle switch enable disable turn activate deactivate flip",
    "trigger start run launch begin kick",
    "observation fact note detail trait habit",
    "entity node person people organization thing contact",
    "relation relationship link connect connection edge associate",
    "research investigate investigation study explore analyze",
    "number integer digit",
    "slow long lengthy",
    "operation task job process",
    "tree hierarchy hierarchical recursive",
    "allowed allow access permitted accessible whitelisted whitelist allowlist allowlisted",
    "permission privilege mode owner own owns readonly executable chmod",
    "pattern glob wildcard regex",
    "multiple several many batch bulk together simultaneously",
    "know knowledge",
    "weather forecast",
    "elicitation elicit",
    "sampling completion",
    "url uri",
    "root roots",
    "deprecated superseded",
]

# Groups of words people use for one kind of need, though they do not
# mean the same: a member matches the others at RELATED_WEIGHT.
RELATED_GROUPS = [
    "elicitation popup dialog form prompt",
    "user human",
    "browser oauth auth login signin sso redirect consent",
    "search anywhere somewhere wherever",
    "time morning afternoon evening night noon midnight tonight tomorrow yesterday day week weekday weekend awake "
    "asleep bedtime "
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
    "echo ping back unchanged mirror say bounce reflect reflected untouched unaltered unmodified",
    "annotation annotated priority audience tag tagged",
    "edit diff comment uncomment",
    "delete unlink break detach disconnect",
    "allowed reach touch sandbox may",
    "create empty blank fresh",
    "exclude skip skipping ignore except excluding",
    "count handful few",
    "weather temperature humidity conditions rain sunny climate hot cold warm chilly snow humid",
    "sum add plus total calculate compute arithmetic math addition",
    "tiny small little sample logo minimal",
    "compress shrink deflate",
    "log spam verbose level levels noisy noise severity severities",
    "subscription subscribe subscriber subscribed notification notifications notify changed",
    "long progress steps duration wait while",
    "research topic deep synthesize findings summarize analysis stage stages phase phases",
    "elicitation ask prompt input form fill answer question",
    "url browser web page login oauth consent authorize redirect visit",
    "sampling llm model completion prompt tokens ai gpt haiku poem story",
    "root workspace",
    "fetch download scrape crawl",
    "database sql table tables row rows column columns schema records",
    "channel channels room",
    "issue ticket bug",
    "navigate visit goto",
    "elevation altitude height",
    "reset undo revert rollback unstage",
    "select pick choose dropdown option",
    "evaluate execute javascript js script eval",
    "user users everyone members member",
    "status ci passing failing",
    "coordinates latitude longitude lat lng gps geocode",
    "directions route drive driving walking transit commute",
    # Round 14, from questions over other servers: words of to-do lists,
    # browsers, crawlers, threads and clusters any server of their trade uses.
    "task tasks todo todos reminder reminders remind chore chores errand errands",
    "complete completed finish finished close closed tick ticked accomplished",
    "uncomplete reopen undone unfinished",
    "hover mouseover mouse tooltip",
    "resize viewport window",
    "crawl spider crawler",
    "fetch curl wget",
    "comment reply replies respond",
    "kubernetes k8s kubectl cluster pod pods namespace ns",
    "scale replicas",
    "screenshot capture screengrab screencap",
    "click tap press",
    "status uncommitted untracked dirty",
    "user users people",
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

# Words of a place not known ("is there a file called schema.sql
# somewhere?"): a question with one asks where, as "where" does.
PLACE_UNKNOWN = frozenset("somewhere anywhere".split())
# Verbs asking to find something: after "where can I" a search, not a
# permission.
SEARCH_VERBS = frozenset("find locate search look lookup seek".split())
# Words asking what a file holds, not about it.
CONTENT_WORDS = frozenset("inside written say says said content contents contain contains".split())
# A question opening with one of these asks where a file is, when it
# changed or how big it is, not what it holds: what the kind of a file it
# names says (photo.png: an image to read) is left out.
PROPERTY_QUESTIONS = frozenset(("where", "when", "how"))
# Commands whose line, in backquotes, is the request ("`du -sh logs`").
# (A command only when what follows it is a flag, a path, a file or a
# number: "`head of sales`" is a value.)
SHELL_COMMANDS = FILE_COMMANDS | frozenset("ls mkdir rmdir rm mv cp grep du stat printenv tar gunzip gzip sed date expr echo "
                                           "tree find file touch wc".split())
# Words of the knowledge graph: a quoted file name beside one is a value
# stored there ("search my knowledge graph for 'invoice.pdf'").
GRAPH_WORDS = frozenset("graph node nodes entity entities observation observations memory memories remember know knowledge "
                        "relation relations".split())
# Words of an image, and of showing one (search_query.ANY_IMAGE_WEIGHT).
IMAGE_WORDS = frozenset("image images img picture pic png".split())
SHOWING_WORDS = frozenset("content block blocks item render renders rendering renderer display displays shows inline".split())
# Pointers, and what they point to (search_query.POINTERS_WEIGHT).
POINTERS = frozenset("links uris urls references pointers chips".split())
RESOURCE_WORDS = frozenset("resource resources uri uris url urls".split())
# The extensions of EXTENSION_KINDS, every kind.
KNOWN_EXTENSIONS = frozenset(" ".join(EXTENSION_KINDS.values()).split())
