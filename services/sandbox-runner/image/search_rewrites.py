"""Shorthands a search request is rewritten by before it is read.

Each entry is a regular expression (matched ignoring case) and what
replaces its match, applied in order to the request's text
("un-remember" reads as "forget", "what's in the src folder" as "list
files in the src folder"). ``search_query.py`` loads this file from
beside it; it holds only this list and the hour words one entry reads
(a pattern's ``<binary-extensions>`` and ``<extensions>`` are filled in
there from ``search_tables.EXTENSION_KINDS``).
"""

_HOUR_WORDS = "one two three four five six seven eight nine ten eleven twelve".split()
# An address ahead: a URL, "www." or the local host.
_ADDRESS_AHEAD = r"(?=https?://|www\.|localhost\b|127\.0\.0\.1\b)"
# Participles whose verb is no "-ed" taken off (a request written in the
# passive: "that the note be struck", "be withdrawn").
_IRREGULAR = dict(pair.split(":") for pair in (
    "struck:strike stricken:strike withdrawn:withdraw written:write kept:keep shown:show given:give made:make "
    "taken:take sent:send put:put set:set read:read held:hold found:find brought:bring told:tell run:run done:do "
    "drawn:draw torn:tear cut:cut undone:undo redone:redo rewritten:rewrite forgotten:forget shut:shut "
    "created:create added:add edited:edit opened:open entered:enter ordered:order filtered:filter "
    "rendered:render registered:register visited:visit limited:limit exhibited:exhibit deposited:deposit "
    "credited:credit audited:audit developed:develop exited:exit inherited:inherit totaled:total pinged:ping "
    "synced:sync pasted:paste typed:type freed:free agreed:agree used:use overwritten:overwrite hidden:hide "
    "chosen:choose known:know thrown:throw broken:break cancelled:cancel").split())


# PowerShell's commands, as what they do.
_CMDLETS = {"get-childitem env:": "print environment variables", "get-childitem": "list directory",
            "gci": "list directory", "get-content": "read file", "set-content": "write file", "out-file": "write file",
            "get-date": "current time", "move-item": "move", "rename-item": "move", "get-item": "file metadata",
            "select-string": "search", "compress-archive": "compress"}


def _verb_of(participle):
    """The verb of an English participle ("recorded" record, "noted" note,
    "logged" log, "copied" copy), as near as spelling tells it."""
    word = participle.lower()
    if word in _IRREGULAR:
        return _IRREGULAR[word]
    if word.endswith("ied") and len(word) > 4:
        return word[:-3] + "y"
    if not word.endswith("ed") or len(word) < 5:
        return word
    stem = word[:-2]
    if stem[-1] == stem[-2] and stem[-1] in "bgmnprt":
        return stem[:-1]  # "logged", "zipped"
    vowels = "aeiou"
    if (stem[-1] in "vczu" or stem.endswith(("rg", "ng", "dg", "rs", "ws", "ps", "ns", "uir", "eas", "aus", "ais", "eus"))
            or stem[-1] == "l" and stem[-2] not in vowels + "lwy"
            or stem[-1] not in vowels + "wxy" and stem[-2] in "aiou" and stem[-3] not in vowels
            or stem.endswith("et") and stem[-3] not in vowels[1:] or stem.endswith(("iat", "uat"))):
        return stem + "e"  # "retrieved", "merged", "noted", "stored", "deleted", "enabled", "released", "queued"
    return stem


# What is read before anything else, by the words and by the graph
# reading alike: a title or an initial before a name ("Ms. Patel", "R.
# Patel") is part of the name, no end of a sentence; and each form below
# whose reading the graph needs as much as the words do.
BEFORE = [(r"\b(?-i:(Mr|Ms|Mrs|Mx|Dr|Prof|Mme|Mlle|Sr|Sra|Hr|Fr|[A-Z]))\.\s+(?=(?-i:[A-Z][a-z]))", r"\1 "),
          # The whole of a thing asked for, "not just a fact about him":
          # the thing itself, no fact of it.
          (r"\bnot\s+(?:just|only|merely)\s+(?:a|one|the)\s+(?:single\s+)?(?:fact|note|observation)s?"
           r"(?:\s+(?:about|on|of)\s+(?:him|her|them|it)\b)?", "entirely"),
          # The memory exported whole ("a full export of the memory").
          (r"\b(?:full|complete|whole|entire)\s+(?:export|dump|copy|backup|snapshot)\s+of\s+(?:the\s+|your\s+|my\s+)?"
           r"(?:memory|graph|knowledge\s+graph)\b", "read the whole knowledge graph"),
          # A date written with slashes ("done 14/05", "filed 4/15") and a
          # vessel's letters before its name ("R/V Falkor"): no path.
          (r"(?<![\w/.])(\d{1,2})/(\d{1,2})(?:/(?:\d{4}|\d{2}))?(?![\w/]|\.\w)", r"\1-\2"),
          (r"(?<![\w/.])(?-i:([A-Z])/([A-Z]))(?=\s+(?-i:[A-Z][a-z]))", r"\1\2"),
          # Newcomers saying who they are ("new secretary here."): no new thing.
          (r"^\W{0,3}new\s+(?!(?:file|folder|directory|person|entry|note|record|entity|node|thing)s?\b)(?:[\w-]+\s+){0,2}?here\b"
           r"(?=\s*[.,:;!-])", "i am here")]
# Home folders by name ("my downloads"): read as folders by the rewrite
# below, never as a name before the word "folder".
_HOME_FOLDERS = r"(?:downloads|documents|desktop|pictures|music|videos|photos|pics)"
# Words before "folder" that say which folder, not its name ("the new
# folder", "the parent directory").
_NO_FOLDER_NAME = (r"(?:new|whole|entire|full|allowed|permitted|accessible|same|current|root|home|top|parent|empty|nested"
                   r"|sub|shared|other|right|wrong|given|following|working|base|project|repo|main|one|only|last|first|next"
                   r"|previous|biggest|largest|smallest|exact|specific|particular|actual|real|big|large|small|existing|old)")
REWRITES = [
    # Chat shorthand for "you" and "your" ("have i told u about ...").
    (r"(?<![\w'./-])u(?![\w'./-])", "you"),
    (r"(?<![\w'./-])ur(?![\w'./-])", "your"),
    # A request written in the passive, as offices write them: "it is
    # requested that the note be struck from ...", "the undersigned asks
    # that those be produced" ask to strike the note, to produce those;
    # "it be recorded that ..." to record that.
    (r"\b(?:(?:the\s+undersigned|i|we)\s+(?:hereby\s+|kindly\s+|respectfully\s+)?"
     r"(?:requests?|asks?|directs?|requires?)|it\s+is\s+(?:hereby\s+|kindly\s+|respectfully\s+|further\s+)?"
     r"(?:requested|asked|desired|directed|required)|(?:and\s+)?(?:requests?|asks?))\s+that\s+"
     r"(?:((?:in|on)\s+[\w-]+),?\s+)?(.{1,160}?)\s+(?:be|is\s+to\s+be|are\s+to\s+be)\s+"
     r"(?:now\s+|duly\s+|formally\s+|promptly\s+|hereby\s+)?([a-z]+(?:ed|en|wn)|struck|read|set|put|sent|kept|made"
     r"|held|found|run|cut|shut|done)\b",
     lambda m: " ".join(part for part in (_verb_of(m.group(3)), m.group(1),
                                          None if m.group(2).lower() == "it" else m.group(2)) if part)),
    (r"\b(?:the\s+undersigned|i|we)\s+(?:wish(?:es)?|would\s+like|wants?|intends?)\s+to\s+have\s+"
     r"([a-z]+(?:ed|en|wn)|struck|read|set|put|sent|kept|made|held|found|run|cut|shut|done)\b",
     lambda m: _verb_of(m.group(1))),
    (r"\bthe\s+undersigned\b", "I"),
    # A box on the computer, as people new to one call a folder ("the box
    # where my letters are kept"); not a box that pops up or one to type
    # in, a box of something, or a name ("Box Inc").
    # A box one is on is a machine ("what's in .env on the app box").
    (r"(\bon\s+(?:the|this|that|my|our|a|each|every)\s+(?:[\w-]+\s+)?)box(es)?\b", r"\1machine\2"),
    (r"(?<!pop-up )(?<!popup )(?<!dialog )(?<!text )(?<!input )(?<!message )(?<!check )(?<!search )(?<!combo )"
     r"(?<!chat )(?<!comment )(?<!select )(?<!list )(?<!machine)\b(?-i:box(es)?)\b"
     r"(?!\s+(?:pops?|appears?|asks?|asking|comes?\s+up|shows?\s+up|of)\b)",
     lambda m: "folders" if m.group(1) else "folder"),
    # Folders within folders: the tree ("boxes inside boxes"), as "all the
    # way down".
    (r"\bfolders?\s+(?:inside|within|in)\s+folders?\b|\bsub-?sub-?(?:folders?|director(?:y|ies)|dirs?)\b",
     "nested folders tree"),
    (r"\ball\s+the\s+way\s+down\b", "recursively"),
    # A home folder by its name ("what's in my downloads"): the folder.
    (r"\b(my|the|your)\s+(" + _HOME_FOLDERS + r")\b"
     r"(?!\s+(?:folders?|director(?:y|ies)|dirs?)\b)", r"\1 \2 folder"),
    (r"\b((?-i:in|from|under|inside|into))\s+((?-i:Downloads|Documents|Desktop|Pictures|Music|Videos|Photos))\b"
     r"(?!\s+(?:folders?|director(?:y|ies)|dirs?)\b)", r"\1 the \2 folder"),
    # How far along something is ("keeps reporting how far along it is"):
    # its progress.
    (r"\bhow\s+far\s+along\b(?:\s+(?:it|they|this|that)\s+(?:is|are|was|were|got|gets)\b)?", "progress"),
    # What a verb of changing made, handed back ("gzip it up and hand it
    # back to me"): its result, no echo.
    (r"\b((?:gzip|zip|compress|squash|shrink|deflate|pack|archive|sum|total|add|convert|compute|calculate|encode|decode"
     r"|sort|format|hash|resize|translate)\s+(?:it|them|this|that)(?:\s+up)?)"
     r"\s+and\s+(?:hand|give|pass)\s+(?:it|them)\s+back(?:\s+to\s+(?:me|us))?\b", r"\1"),
    # Text given back as it went ("returns it unchanged"): an echo.
    (r"\breturns?\s+(?:it|them|that|this)\s+(?:back\s+)?(?:unchanged|as\s+is|untouched|intact|verbatim)\b"
     r"|\b(?:get|have)\s+(?:the\s+)?(?:exact\s+|very\s+)?(?:same|identical)\s+(?:thing|text|string|message|bytes)"
     r"\s+(?:back|returned)\b"
     r"|\b(?:returned|sent\s+back|given\s+back|repeated(?:\s+back)?)\s+(?:exactly\s+|just\s+)?as\s+(?:submitted|sent"
     r"|given|written|typed|entered|provided|supplied)\b(?!\s+(?!(?:and|but|so|to|by|with|or)\b)[a-z])",
     "echo back"),
    # A string said to come back as it went ("returns the supplied string
    # unaltered"): an echo.
    (r"\breturns?\s+(?:the\s+|my\s+|a\s+|our\s+)?(?:\w+\s+)?(?:string|text|message|input|payload)\s+(?:back\s+)?"
     r"(?:unchanged|unaltered|unmodified|verbatim|as\s+is|intact|untouched)\b", "echo back"),
    # What is to happen later ("..., before we start deleting stale
    # records", "... before asking the user again"): not what is asked now.
    (r"(?<=[\w'\")\]])\s+before\s+(?:(?:we|i)\s+(?:start|begin)\s+\w+ing|asking)\b[^.;:,!?]{0,80}", ""),
    # A folder made sure of ("ensure /var/quarantine exists"): made.
    (r"\b(?:ensure|make\s+sure)\s+(?=\S*/\S*\s+exists\b)", "create "),
    # Appended in code's shorthand ("obs += 'done'").
    (r"\s\+=\s", " append "),
    # Burnt bridges ("burn the bridge between Kees and Sanne"): a link
    # removed.
    (r"\bburn\s+(?:the|that|this|our|their|my)\s+bridges?\b", "remove the link"),
    # Something that rings a bell is something remembered: "does 'Phoenix'
    # ring any bells in the graph".
    (r"\b(?:ring|rings)\s+(?:any|a)\s+bells?\b", "come up in a search"),
    # A sum asked as what two numbers come to ("what do 17 and 25 come to").
    (r"\bwhat\s+(?:do|does|would|will)\s+(?=[\d.,]+\s+(?:and|\+|plus)\s+[\d.,]+\s+(?:come\s+to|make|add\s+up\s+to|total)\b)",
     "what is the sum of "),
    # A fresh record, file or card: a new one.
    (r"\bfresh\s+(?=(?:card|entry|node|record|file|folder|directory|page|note)\b)", "new "),
    # An hour of the day in words ("8 in the evening"): the hour as a clock
    # writes it.
    (r"\b(\d{1,2})\s+in\s+the\s+(evening|afternoon|morning)\b",
     lambda m: m.group(1) + ("am" if m.group(2).lower() == "morning" else "pm")),
    # Quizzed by the program, a pop-up collecting details: input asked of
    # the user.
    (r"\bquiz\s+(?:me|us|the\s+user)\b", "ask the user for input"),
    (r"\bpop-?ups?\b", "form"),
    # A website's address is a URL.
    (r"\b(?:website|web\s+site|web)\s+address\b", "URL"),
    # Pings that should stop ("make them stop"): turned off.
    (r"\bmake\s+(?:them|it|those|these)\s+stop\b", "turn off"),
    # Taken out of the memory: removed from it.
    (r"\btake\s+(him|her|them|it|[A-Z][\w-]*)\s+out\s+of\s+(?:the\s+|my\s+|your\s+)?(memory|graph|knowledge\s+graph)\b",
     r"remove \1 from \2"),
    # A file taken out of one folder to go elsewhere: moved.
    (r"\btake\s+(?=\S+\.\w{1,5}\s+out\s+of\b)", "move "),
    # Unhooked, untied: disconnected.
    (r"\b(?:unhook|untie|unpair)\b", "disconnect"),
    # A line between two things links them ("the 'owns' line between me
    # and Biscuit").
    (r"\bline\s+(?=between\s)", "link "),
    # What a user reports is what follows, no one reporting to anyone
    # ("User reports the export fails").
    (r"\b(?:the\s+)?(?:user|customer|client|caller|tester|someone)s?\s+(?:reports|reported|report)(?:\s+that)?\b"
     r"(?!\s+to\b)", ""),
    # Ever mentioned before, by anyone ("if they've ever mentioned X
    # before"): what was mentioned.
    (r"\b(?:they|he|she|you)(?:'ve|\s+have|'s|\s+has)\s+ever\s+(?:mentioned|talked\s+about|brought\s+up)\b"
     r"|\b(?:(?:check|see|find\s+out)\s+)?(?:whether|if)\s+(?:(?:i|we|you|they|he|she)(?:'ve|\s+have|\s+has)?\s+ever|(?:i|we|you|they|he|she)"
     r"(?:'ve|\s+have|\s+has)?|ever)\s+(?:mentioned|told\s+you\s+about|talked\s+about|brought\s+up)\b",
     "have we mentioned"),
    # Prior mentions looked for: a search ("check memory for prior
    # mentions of a keyword").
    (r"\bcheck\s+(?:the\s+)?(memory|graph)\s+for\s+(?:prior\s+|earlier\s+|previous\s+|any\s+)?mentions\s+of\b",
     r"search \1 for"),
    # Replaced wholly: written anew ("replace it entirely with the clean
    # version").
    (r"\breplace\s+(?:it|that|this|them|the\s+file)\s+(?:entirely|completely|wholesale|in\s+full)\b", "overwrite it"),
    # A line that "should become" another: an edit.
    (r"\bshould\s+(?:become|be\s+changed\s+to)\b", "change to"),
    # Old-fashioned words: "is there aught in your recollection touching
    # upon beekeeping".
    (r"\baught\b", "anything"),
    (r"\brecollection\b", "memory"),
    (r"\btouching\s+(?:up)?on\b", "about"),
    # A line drawn from one thing to another links them.
    (r"\bdraw\s+(?:a|the)\s+line\s+(?=from\s|between\s)", "link "),
    # Keeping begun ("start remembering my recipes"): the keeping asked.
    (r"\b(?:start|begin)\s+(?:(remember|record|track)|(sav|stor|not))ing\b",
     lambda m: m.group(1) or m.group(2) + "e"),
    # One's own ("each one as its own item"): whose it is, no owner.
    (r"\b(its|their|his|her|my|your|our)\s+own\b", r"\1"),
    # Had back as it went ("have it returned verbatim", "sent back to me
    # unchanged"): an echo.
    (r"\b(?:returned|sent\s+back|given\s+back|handed\s+back)\s+(?:to\s+(?:me|us)\s+)?"
     r"(?:verbatim|unchanged|as\s+is|untouched|intact|byte\s+for\s+byte)\b",
     "echo back"),
    # Whatever is sent coming back as it went: an echo ("what I send should
    # come back verbatim", "returns whatever message I pass in").
    (r"\b(?:what(?:ever)?|anything)\s+(?:text\s+|message\s+|string\s+)?(?:i|we|you)\s+(?:send|pass|give|type"
     r"|write|put)(?:\s+(?:in|it))?\s+(?:should\s+|must\s+|will\s+|to\s+)?(?:come|comes|get|gets)\s+back\b"
     r"|\breturns?\s+(?:back\s+)?whatever\s+(?:\w+\s+)?(?:i|we|you)\s+(?:send|pass|give|type)\b",
     "echo back"),
    # One path to another by an arrow ("docs -> website/docs", "a.txt =>
    # b.txt"): a move, when a letter and a path's slash or a file's dot
    # stand in what is on the right.
    (r"(?<![\w\])>-])((?=[\w.~/-]*[a-z])[\w.~/-]+)\s*(?:->|=>|\u2192)\s*((?=[\w.~-]*[/.])(?=[\w.~/-]*[a-z])[\w.~/-]+)",
     r"move \1 to \2"),
    # A pasted shell session before the ask ("$ ls inbox/", its output,
    # then "put invoice_001.pdf into archive/"): the commands were run,
    # they are not what is asked; their arguments stay.
    # (A later line that is not a command: anything, a line break, then a
    # line starting with something other than "$".)
    (r"(?m)^[^\S\n]*\$[^\S\n]+[\w.-]+(?=(?s:.*)\n[^\S\n]*[^\s$])", " "),
    # A file name said aloud, as dictation writes it ("readme dot md",
    # "the dot env file"): the name as it is written. (<extensions>: every
    # extension of search_tables.EXTENSION_KINDS.)
    (r"(?<![\w-])([\w-]+)\s+dot\s+(<extensions>)\b", r"\1.\2"),
    (r"\b(the|a|my|our|your|that|this)\s+dot\s+(env|gitignore|dockerignore|bashrc|zshrc|profile|npmrc|editorconfig)\b",
     r"\1 .\2"),
    # "only that one", "just this one": one thing, not one of several.
    (r"\b(?:only|just)\s+(?:that|this|the)\s+one\b(?!\s+(?:by|at)\b)", "only"),
    # An hour said in words ("five pm", "nine a.m."): a clock's.
    (r"\b(one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)\s*(am|pm|a\.m\.|p\.m\.)(?!\w)",
     lambda m: (str(_HOUR_WORDS.index(m.group(1).lower()) + 1) if m.group(1).lower() in _HOUR_WORDS else m.group(1))
     + m.group(2)),  # ("fıve pm": re.I folds "ı" to "i", lower() does not)
    # A name then a file's extension, as said aloud ("the photo called
    # beach jpeg"): the file.
    (r"\b(called|named)\s+([\w-]+)\s+(<extensions>)\b", r"\1 \2.\3"),
    # Forgetting a whole someone: "forget dave", "wipe project falcon
    # completely out of memory" (no fact or link of theirs named).
    (r"\bforget\s+(?:about\s+)?(?=[^\W\d_][\w-]*\s*[.!]?\s*$)", "delete the entity "),
    (r"\b(?:forget|wipe|erase|purge|scrub|remove|delete|drop)\b(?=[^.?!]{0,50}?\b(?:completely|entirely|altogether|for\s+good)\b)"
     r"(?![^.?!]{0,60}\b(?:observations?|facts?|notes?|relations?|links?|edges?|that|lines?|text|files?|folders?)\b)",
     "delete the whole entity"),
    # Joining two named things: "link those two", "connect them".
    (r"\b(?:link|connect|relate|tie)\s+(?:them|(?:those|these|the)\s+two|both)(?:\s+together|\s+up)?"
     r"(?=\s*(?:$|[.?!,;]|(?:in|on|into|together|up|please|for|as)\b))",
     "create a relation between them"),
    # Taking a link between two apart: "break the link between tom and acme".
    (r"\b(?:break|sever|cut|undo|drop)\s+(?:the\s+)?(?:link|connection|tie|relation(?:ship)?|edge)\s+between\b",
     "delete the relation between"),
    # A fact put on someone's record: "tack that onto her info".
    (r"\b(?:tack|stick|pin)\s+(?:that|this|it)\s+on(?:to)?\b", "add an observation to"),
    # Someone not kept yet: "he's not in there yet" (a new entity).
    (r"\b(?:(?:he|she|they|it)(?:'s|\s+is|\s+are|'re)|is|are)\s*(?:n't|\s+not)\s+in\s+(?:there|here|memory|the\s+graph)\s+yet\b",
     "a new entity"),
    # Who may read or write a file: its permissions.
    (r"\bwho(?:'s|\s+is)\s+allowed\s+to\s+(?:read|write|open|edit|access|run)\b", "permissions"),
    # "add 17 and 25" (and, once their words read as English, "dodaj 125
    # i 380", "suma 3 y 4", "somma 3 e 4", "und", "et"): two numbers summed.
    (r"\badd\s+(?=(?:[a-z]\w*\s*=\s*)?-?\d[\d.]*\s*(?:,\s*|and\s+|[iye]\s+|und\s+|et\s+|\+\s*|plus\s+|to\s+|\s)\s*"
     r"(?:[a-z]\w*\s*=\s*)?-?\d)",
     "sum "),
    # All of a file's text replaced: the file written anew.
    (r"\breplace\s+(?:the\s+)?(?:whole|entire|full|complete|all(?:\s+the)?)\s+(?:content|contents|text)\s+of\b"
     r"|\b(?:completely|entirely|fully)\s+replace\s+(?:the\s+)?(?:content|contents|text)\s+of\b",
     "overwrite the whole file"),
    # "only names", "names only": a listing without sizes.
    (r"\b(?:only|just)\s+(?:the\s+)?(?:file\s+)?names\b(?!\s+(?:of|matching|that|which|starting|ending|containing)\b)"
     r"|\bnames\s+only\b", "names only, no sizes"),
    # Named ones, no search: "exactly these two entities".
    (r"\b(?:exactly|precisely|only|just)\s+(?:these|those)\s+(?:two\s+|three\s+|\d+\s+)?(?:entities|nodes|people|records)\b",
     "open these entities by name"),
    # The same text sent back: "send to me back the same text".
    (r"\bsend\s+(?:it\s+|them\s+)?(?:to\s+me\s+|me\s+)?back\s+(?:to\s+me\s+)?(?:the\s+)?(?:same|exact|identical)\b",
     "echo back the same"),
    # A program's environment as code reads it ("process.env",
    # "os.environ", "System.getenv"): its variables.
    (r"\b(?:process\.env|os\.environ|os\.getenv|System\.getenv|ENV\[)", "environment variables "),
    # The paths a server may use, in a name's words ("getAllowedPaths").
    (r"allowed[\s_-]*(?:paths|dirs|directories|folders|roots)\b", " allowed directories"),
    # Folders the server may use: "which folders you have permission to use".
    (r"\b(?:folders|directories|dirs|paths|places)\s+(?:that\s+)?(?:do\s+|does\s+)?(?:you|it|the\s+server)\s+(?:have\s+(?:the\s+)?permission|are\s+allowed"
     r"|is\s+allowed|may|can|get)\s+(?:to\s+)?(?:use|access|read|see|touch|look\s+(?:at|in|into))\b", "allowed directories"),
    # Whether a connection works: "check the link is alive" (a ping, no link of a graph).
    (r"\b(?:the\s+)?(?:link|connection|line)\s+(?:is\s+)?(?:still\s+)?(?:alive|up|working|live)\b", "ping"),
    # Nothing of it changed: "without changing anything" (given back verbatim).
    (r"\bwithout\s+(?:changing|altering|modifying|editing|touching)\s+(?:anything|a\s+thing|it|a\s+word|a\s+letter)\b", "verbatim"),
    # One removed with what joins it: "together with its relations".
    (r"\b(?:together|along)\s+with\s+(?:all\s+)?(?:its|their|his|her)\s+(?:relations|relationships|connections|links|edges)\b",
     "as a whole entity"),
    # Someone not kept yet: "there is no record for Biscuit in memory yet",
    # "if there's no node for Vega".
    (r"\bthere(?:'s|\s+is)\s+no\s+(?:record|entry|entity|node)\s+(?:yet\s+)?(?:for|of|on)\b", "a new entity for"),
    # Whether someone of a name was ever mentioned: "have I told you about
    # anyone named Okafor" searches what was told (no one opened by name).
    (r"\bhave\s+(i|we)\s+(?:ever\s+)?(?:told\s+you\s+about|mentioned|talked\s+about)\s+(?:anyone|anybody|someone|somebody"
     r"|an?\s+\w+)\s+(?:named|called)\b", r"have \1 mentioned"),
    # Asking whether there is a way to do a thing asks for it ("is there a
    # way to unlink A from B?", "is it possible to ...").
    (r"^\s*(?:is\s+there\s+(?:a|any|some)\s+way\s+(?:to|for\s+(?:me|you|us)\s+to|(?:i|you|we)\s+(?:can|could)|of)"
     r"|is\s+it\s+possible\s+(?:to|for\s+(?:me|you|us)\s+to))\s+", ""),
    # Whether a file changed: when it was last modified.
    (r"\b(?:whether|if)\s+(\S+(?:\s+(?:on|in|at|under)\s+\S+)?)\s+(?:has\s+|have\s+|was\s+|got\s+)?(?:changed|modified|updated"
     r"|edited|touched)\b",
     r"\1 metadata, last modified time"),
    # Not waking someone far away: what time it is where they are.
    (r"\b(?:wake|waking)\s+(?:her|him|them|anyone|anybody|someone|somebody|(?:my|our)\s+\w+)(?:\s+up)?\b",
     "what time is it there now"),
    # Someone new to the store: "people you've never heard of".
    (r"\b(?:you'?ve|you\s+have)\s+never\s+heard\s+of\b", "new entities not in memory yet"),
    # A thing that should not be in memory at all: the entity removed.
    (r"\b(?:shouldn'?t|should\s+not|mustn'?t|must\s+not)\s+(?:exist|be)\s+(?:anywhere\s+)?in\s+(?:your\s+|the\s+)?"
     r"(?:memory|graph|knowledge\s+graph)(?:\s+at\s+all)?\b", "delete the whole entity from memory"),
    # A folder that is not there yet is to be made ("the 'tmp/cache'
    # folder isn't there", "I need an exports/2026 folder", "need a
    # folder for my pics", "the folder structure src/ui in place").
    (r"\b(folder|directory|dir)\s+(?:isn'?t\s+there|is\s+not\s+there|doesn'?t\s+exist|does\s+not\s+exist|is\s+missing)\b",
     r"\1 is missing, create it"),
    (r"\bneed\s+an?\s+(?:new\s+)?((?:\S+\s+)?)(folder|directory|dir)\b(?!\s+(?:listed|listing|tree|contents|sizes))",
     r"create a \1\2"),
    (r"\b(?:folder|directory)\s+(?:structure|tree|path)\b(?=[^.?!]{0,60}?\bin\s+place\b)", "create directory"),
    # No such file yet, to be made: "there's no LICENSE file yet".
    (r"\bthere(?:'s|\s+is)\s+no\s+(\S+)\s+file\s+yet\b", r"write a new file \1"),
    # What arrives on the other side, as it was sent: an echo.
    (r"\bwhat\s+(?:arrives|comes\s+out|gets\s+through)\s+on\s+the\s+other\s+(?:side|end)\b", "echo back"),
    # Phone and chat shorthand: "w/" (with); "hes a" (he is a); "right a
    # file" (write one).
    (r"(?<!\S)w/(?=\s)", "with"),
    (r"\b(he|she)s\s+(?=(?:a|an|the)\b)", r"\1 is "),
    (r"\bright\s+(?=(?:a|an|the|this|to)\s+(?:new\s+)?(?:file|\S+\.\w{1,5})\b)", "write "),
    # Text poured into a file: "dump this text into output.csv" writes it.
    (r"\bdump\b(?=[^.?!]{0,40}?\binto\s+\S+\.\w{1,5}\b)", "write"),
    # A list of names each with its kind ("Alice (person), payments-api
    # (service)"): things to store. (Each name from where its run of
    # letters starts: the search stays linear in a long word.)
    (r"(?<![\w.-])([\w.-]+\s+\(\w[\w -]{0,20}\)\s*,\s*(?:and\s+)?[\w.-]+\s+\(\w[\w -]{0,20}\))", r"create entities: \1"),
    # Unlinking one thing from another takes their relation away.
    (r"\bunlink\s+(\S+)\s+from\b", r"delete the relation between \1 and"),
    # A fact after "I told you about Priya before;": added to her record.
    (r"\bi\s+(?:told|mentioned)\s+(?:to\s+)?(?:you\s+)?about\s+(\w+)\s+before\s*[;:,.-]+", r"add an observation to \1:"),
    # One more fact on something stored: "one more detail about Atlas".
    (r"\b(?:one\s+more|another|an\s+extra|a\s+new|an\s+additional)\s+(?:detail|fact|note|tidbit|thing)\s+(?:about|on|for)\b",
     "add an observation about"),
    # Not the whole graph but one thing: "not the whole graph, just Ana".
    (r"\bnot\s+the\s+(?:whole|entire|full|complete)\s+(?:graph|memory|knowledge\s+graph|thing)\s*[,;:-]?\s*(?:just|only)\b",
     "open only"),
    # Sizes left out: "don't include sizes".
    (r"\b(?:don'?t|do\s+not|without)\s+(?:include|including|show|showing|add|adding|give|giving)\s+(?:the\s+|any\s+)?sizes\b",
     "no sizes"),
    # "if the folder exists, ...": a condition, nothing to make.
    (r"\bif\s+(?:the\s+|that\s+|this\s+)?(?:folder|directory|dir|file|path)\s+(?:\S+\s+)?(?:exists|is\s+there)\s*,?", " "),
    # The whole node wiped: the entity itself.
    (r"\b(?:wipe|delete|remove|erase|drop|purge|scrub|nuke)\s+(?:the\s+)?(?:whole|entire|complete)\s+(?:node|entity|record)\b",
     "delete the whole entity"),
    # "unlike last time": no time asked about; "not just a fact": more than one.
    (r"\b(?:unlike|like|same\s+as|as)\s+last\s+time\b", " "),
    (r"\bnot\s+just\s+(?:a|one|the)\s+(?:fact|note|observation|detail)\b", " "),
    # "create one of type project": an entity of a kind.
    (r"\bcreate\s+(?:one|it|them)\s+(?:of|with)\s+(?:the\s+)?(?:type|kind|entity\s+type)\b", "create an entity of type"),
    # Leaving someone and their relations alone: only a fact of theirs goes.
    (r"\b(?:don'?t|do\s+not)\s+touch\s+(?:\w+\s+or\s+)?(?:her|his|their|its|the)\s+(?:relations|relationships|links|connections)\b",
     "the record itself stays"),
    # "one at a time": one by one, no time of day.
    (r"\bone\s+at\s+a\s+time\b", "one by one"),
    # Looking something over is reading it, not a search.
    (r"\blook\s+(?:it|them|this|that|everything|things)\s+over\b|\blook\s+over\b", "review"),
    # Seen before, asked of what was stored ("have we seen 'OOMKilled'
    # before?"): what was mentioned.
    (r"\bha(?:ve|s)\s+(we|i|you)\s+(?:ever\s+)?(?:seen|encountered|come\s+across|run\s+into|hit)\b"
     r"(?=[^.?!\n]*\bbefore\b)", r"have \1 mentioned"),
    # One level of a folder ("top level only", "just this level"): its
    # listing, not the tree below it.
    (r"\b(?:top|first|this|one|current|single|outer)[\s-]+level(?:\s+only)?\b(?!\s*(?:domain|log|logging|heading))",
     "directory listing only"),
    # The whole graph wanted, whatever it is for ("I need the entire graph
    # to count how many nodes ..."): reading it.
    (r"\b(?:need|want|give\s+me|get|fetch|grab)\s+(?:the\s+|your\s+)?(entire|whole|full|complete)\s+(?:knowledge\s+)?graph\b",
     r"read the \1 graph"),
    # What is "sitting" in a place is what is in it.
    (r"\bwhat(?:'s|\s+is|\s+are)\s+(?:actually\s+|currently\s+|really\s+|even\s+)?(?:sitting|lying|living)\s+in\b",
     "what's in"),
    # How many two counts make together ("37 ... and 58 ..., how many is
    # that altogether"): their sum.
    (r"\bhow\s+many\s+(?:is\s+that|does\s+that\s+make|is\s+it|are\s+they|do\s+(?:i|we)\s+have)\s+"
     r"(?:altogether|all\s+together|together|in\s+total|combined|total)\b", "what is the sum"),
    # A server that "turns around" and asks does not toggle anything.
    (r"\bturns?\s+around\s+and\b", "then"),
    # "Do you remember what I said about X": a question of what was told.
    (r"\bdo\s+you\s+(?:remember|recall)\s+what\s+(i|we)\s+(?:said|told\s+you|mentioned|wrote)\s+about\b",
     r"what did \1 tell you about"),
    # A file saved in the wrong folder is to be moved.
    (r"\b(?:to|in|into)\s+the\s+wrong\s+(?:folder|directory|dir|place|location)\b", "in the wrong folder, move it"),
    # When a file was made: its creation time, nothing to make.
    (r"\bwhen\s+(?:did|was|were)\s+(?:i|we|you|it|they)\s+(?:make|made|create|created)\b", "its creation date"),
    # A legacy, obsolete or outdated tool is a deprecated one ("the legacy
    # file reader", "legacy read_file"); a legacy file is only old.
    (r"\b(?:legacy|obsolete|outdated)(?=(?:[\s-]+\w+){0,2}?[\s-]+(?:tools?|reader|read_file|call|one|version"
     r"|function|method|api|endpoint)\b)", "deprecated"),
    # Backing something up ("so I can back it up") is no echo.
    (r"\bback\s+(?:it|them|this|that|everything|all)\s+up\b", "backup"),
    # Files of a kind asked for anywhere ("any .csv files under data/"):
    # a search by pattern.
    (r"\b(?:any|all|every|which)\s+\.(\w{1,6})\s+files\b", r"files matching the pattern *.\1"),
    # The process's environment: its variables.
    (r"\bprocess(?:'s)?\s+env(?:ironment)?\b", "environment variables"),
    # Paths "in scope" for the server are those it may use.
    (r"\b(?:paths|folders|directories|dirs)\s+(?:are\s+)?(?:in|within)\s+(?:your\s+|the\s+)?scope\b", "allowed directories"),
    # Files of a name asked for anywhere ("any files named Makefile"): a search.
    (r"\b(?:any|all|every)\s+files?\s+(?=(?:named|called)\b)", "search for files "),
    # Notes on anyone of a kind: a search of what is stored.
    (r"\b(?:do|does)\s+(?:we|you|i)\s+have\s+(?:any\s+)?(?:notes?|info|information|anything|records?|entries)\s+"
     r"(?:on|about)\s+(?=(?:anyone|anybody|someone|somebody|people|any)\b)", "search memory for "),
    # Tracking or hunting something down finds it ("track them all down").
    (r"\b(?:track|hunt)(?:ing)?\s+(?:(?:it|them|this|that|those|these|him|her)\s+)?(?:all\s+)?down\b", "find"),
    # Shifting something over to a folder moves it.
    (r"\bshift\b(?=(?:[^.?!;]|\.(?=\S)){1,80}?\b(?:to|into)\s+(?:(?:the|my|our|an?|that)\s+)?(?:[\w./~-]*\s*(?:folder|directory"
     r"|dir)\b|[\w.~-]*/[\w./~-]*))", "move"),
    # A thing put under a new name is renamed ("put a.docx under a new name").
    (r"\b(?:put|save|keep|store|file)\s+(\S+)\s+under\s+(?:a\s+)?(?:new|different|another|other)\s+name\b",
     r"rename \1"),
    # Pointing at resources by URI instead of embedding them: links.
    (r"\bpoints?\s+(?:at|to)\s+(?:(?:a\s+few|several|some|many|\d+)\s+)?resources\b|\bclickable\s+(?:resource\s+)?(?:uris?|references?|refs|pointers?)\b",
     "resource links"),
    # Names that start or end with something: a search by pattern.
    (r"\b(?:names?|filenames?)\s+(?:all\s+)?(?:start|starts|begin|begins|end|ends)\s+with\b", "names matching the pattern"),
    # Content meant for the user or for the assistant, who should see it:
    # annotations (their audience).
    (r"\b(?:meant|intended|destined)\s+for\s+(?:the\s+)?(?:user|assistant|model|human)\b"
     r"|\bwho\s+(?:should|may|can)\s+see\s+it\b", "annotated for an audience"),
    # "I don't care how big anything is": no sizes.
    (r"\b(?:don'?t|do\s+not)\s+care\s+(?:how\s+(?:big|large)|about\s+(?:the\s+)?sizes?)\b", "no sizes"),
    # "just this level", "only the top level": one level listed.
    (r"\b(?:just|only)\s+(?:this|that|the\s+top|the\s+first|one)\s+level\b", "listing one level"),
    # "doesn't matter which image": any image, none turned away.
    (r"\b(?:(?:it\s+)?(?:doesn'?t|does\s+not|don'?t|do\s+not)|no)\s+matter\s+which\b", "any"),
    # Asking a server to act is no question for its user ("ask the delta server to add 7 and 8").
    (r"\bask\s+(?=(?:the\s+)?(?:[\w'-]+\s+){0,2}(?:server|instance|tool)\s+to\b)", "have "),
    # Taking back what was learnt: "un-remember that I'm vegetarian".
    (r"\bun-?(?:remember|learn|memorize|memorise)\b", "forget"),
    # Not knowing where one put a thing asks to find it ("I forgot where I
    # put the png named logo").
    (r"\b(?:i|we)\s+(?:forgot|forget|can'?t\s+remember|don'?t\s+remember|lost\s+track\s+of)\s+where\s+(?:i|we)\s+"
     r"(?:put|saved|stored|left|kept|dropped)\b", "find where is"),
    # A kind of file and its name: "the png named logo" is a file.
    (r"\b(png|jpe?g|gif|svg|pdf|csv|tsv|json|ya?ml|toml|txt|md|docx?|xlsx?|pptx?|zip|tar|html?|xml|mp3|mp4|wav)"
     r"\s+(?=(?:named|called)\b)", r"\1 file "),
    # One resource put in the reply itself ("return one resource inline",
    # "an embedded resource"): a reference to it, not links.
    # (No file is asked for: "a pdf as an embedded resource" is the file.
    # <binary-extensions> stands for search_tables' image, audio, video and
    # compressed file extensions, filled in where this list is loaded.)
    (r"(?s)^(?!.*\b(?:files?|pdf|gzip|<binary-extensions>|urls?|binary|media|images?|audio|video)\b)"
     r"(.*?)(?:\b(?:embedded|inline|inlined)\s+(?:\w+\s+)?resource\b|\bresource\s+(?:embedding|inline|inlined)\b"
     r"|\bresource\s+(?=(?:\w+\s+){0,2}?inline\b))", r"\1resource reference "),
    # Links to resources: "generate some links to demo resources".
    (r"\blinks\s+to\s+(?:(?:some|a\s+few|several|the|sample|demo|example|test)\s+){0,2}resources\b", "resource links"),
    # Resources given as links: "list some sample URIs as links".
    (r"\b(?:uris?|urls?|resources?)\s+as\s+links\b", "resource links"),
    # The user's own forgetting is no removal ("I keep forgetting what I told you").
    (r"\b(i|we)\s+(?:keep\s+|always\s+)?(?:forgetting|forget|forgot)\b", r"\1 lost track of"),
    # A link or thing that "should go" is to be removed.
    (r"\b(?:should|must|has\s+to|have\s+to|needs?\s+to)\s+go\b(?!\s+(?:to|into|in|on|under|back)\b)", "be removed"),
    # The sampling request's method named bare; the client's model asked.
    (r"\bcreateMessage\b", "sampling createMessage"),
    (r"\bask\s+(?:my|the|your|our|its)\s+(?:model|llm|ai)\b", "sampling request to the model"),
    # "the current (non-deprecated) reader": no old one.
    (r"\bnon-?deprecated\b|\bnot\s+deprecated\b", "current"),
    # "not recursive", "no recursion": one level listed.
    (r"\b(?:not|non|no)[\s-]+recursive(?:ly)?\b|\b(?:no|without)\s+recursion\b"
     r"|\b(?:no\s+need\s+to|don'?t|do\s+not|without)\s+recurs(?:e|ing)\b", "listing one level"),
    # "make sure ./out/reports exists": a folder made if missing.
    (r"\bmake\s+sure\s+(?:the\s+(?:path|folder|directory|dir)\s+)?(\S*/\S*)\s+(?:exists|is\s+there)\b",
     r"create the directory \1 if missing"),
    # "the big picture" of a project: its whole layout.
    (r"\bbig\s+picture\b", "overview"),
    # The sandbox's roots are the folders file tools may use, not the roots a client gave.
    (r"\bsandbox(?:'s)?\s+roots?(?:\s+(?:dirs?|directories|folders))?\b", "sandbox allowed directories"),
    # "what's in the src folder?": its entries listed.
    (r"\bwhat(?:'s|\u2019s|s|\s+is)\s+(?:sitting\s+|lying\s+|living\s+|kept\s+)?(in|inside)\s+"
     r"(?=(?:(?:the|my|our|this|that|your)\s+)?(?:[\w.~/-]+\s+)?"
     r"(?:folder|directory|dir)\b)", r"list files \1 "),
    # "what's in /home/dev/project?": a path with no file's extension is a
    # folder whose entries are asked for.
    (r"\bwhat(?:'s|\u2019s|s|\s+is)\s+(in|inside)\s+(?=(?:~|\.\.?)?/[\w/-]*(?:[\s?!,]|$))", r"list files \1 "),
    # Anything a few words on "related to" a subject asks about it, no
    # relation: "anything in memory related to invoices?".
    (r"\b(any(?:thing)?|something|everything)\b((?:\s+[\w'-]+){1,4}?)\s+(?:(?:related|relating|pertaining)\s+to"
     r"|(?:has|have|had)\s+to\s+do\s+with)\b", r"\1\2 about"),
    # Things that "have anything to do with" a subject mention it.
    (r"\b(?:has|have|had)\s+anything\s+to\s+do\s+with\b", "mention"),
    # "update what we know about Dr. Kim: ...": a fact added.
    (r"\b(?:update|add\s+to)\s+what\s+(?:we|you|i)\s+(?:already\s+)?(?:know|have|remember|recall"
     r"|(?:have\s+)?(?:stored|saved|noted|kept))\s+(?:about|on|of)\b",
     "add a new fact about"),
    # A server prompting its user asks them (elicitation), no model.
    (r"\bprompt\s+(?:me|us|the\s+user|the\s+human)\s+for\b", "ask the user for input of"),
    # "which entities have an observation containing ...": a search.
    (r"\bwhich\s+(?:entities|nodes|people|records|contacts)\s+(?=(?:have|has|mention|contain)\b)", "search entities that "),
    # Whether anything held mentions something ("check whether anything
    # mentions 'x'", "whether any stored observation references y"): a
    # search.
    (r"\b(?:whether|if)\s+(?:anything|any\s+(?:stored\s+|saved\s+)?(?:observation|note|entry|record|node|entity|fact)s?)\s+"
     r"(?:mentions|references|cites|names)\b", "search for what mentions"),
    # Opening or filing a tracker's item makes one: "open an issue", "file
    # a github bug", "raise a PR" ("open the issue" reads one).
    (r"\b(?:open|opening|file|filing|raise|raising|submit|log)\s+(?:(?:a|an)\s+(?:new\s+)?(?:[\w-]+\s+)??|new\s+)?"
     r"(issues?|tickets?|bugs?|prs?|pull\s+requests?|mrs?|merge\s+requests?)\b", r"create \1"),
    # Going to an address in a browser: "go to https://...", "head to
    # www...", "point the browser at localhost:3000".
    (r"\b(?:(?:go|browse|head|navigate)\s+to|point\s+(?:the|a|my)\s+(?:\w+\s+)?browser\s+(?:at|to))\s+"
     + _ADDRESS_AHEAD, "navigate to "),
    # "open localhost:3000/login in the browser".
    (r"\b(?:open|load|visit)\s+" + _ADDRESS_AHEAD
     + r"(?=\S+\s+in\s+(?:(?:the|a|my)\s+)?(?:\w+\s+)?(?:browser|tab)\b)", "navigate to "),
    # A participle saying when, not what to do: "the most recently updated
    # issues" lists them, updates nothing.
    (r"\b(?:most\s+)?(?:recently|newly|lately)\s+(?:updated|created|modified|changed|edited|added|closed|merged"
     r"|opened|touched)\b", "recent"),
    # A note left on an item is a comment on it ("leave a note on the ticket").
    (r"\bleave\s+(?:a|an)\s+(?:short\s+)?(?:note|comment|reply)\s+(?=on|in|under)\b", "add comment "),
    # A Cypher query reads: every node and relation with no condition
    # ("MATCH (n)-[r]->(m) RETURN n, r, m"), a search with one.
    (r"^\s*match\s*\((?!.*\bwhere\b).*\breturn\b.*$", "read the whole graph"),
    (r"^\s*match\s*\(.*\bwhere\b.*\breturn\b.*$", "search the graph"),
    # A graph pattern, "(user)-[OWNS]->(Biscuit)": two nodes and the
    # relation between them.
    (r"\(\s*([\w:' -]*)\)\s*<?-\s*\[\s*:?\s*([\w' -]*)\]\s*->?\s*\(\s*([\w:' -]*)\)", r"\1 \2 \3 relation"),
    # Replacing whatever a file held is writing it anew, not an edit:
    # "save it as report.md, replacing whatever is there".
    (r"\breplac(?:e|es|ing)\s+(?:whatever|what|anything|everything)(?:'s|\s+is|\s+was|\s+exists)?\s+"
     r"(?:already\s+)?(?:there|in\s+it|inside)\b", "overwrite"),
    # Updating what the memory holds on someone adds to it: "update my
    # profile with: allergic to peanuts", "update memory: X moved".
    (r"\bupdat(?:e|ing)\s+(?=(?:(?:my|your|the|his|her|their|our|its)\s+)?(?:\w+\s+)?"
     r"(?:memory|profile|record|entry|node|what\s+you\s+know)\b)", "add to "),
    # The same text given back, exactly what was sent: an echo.
    (r"\b(?:(?:give|send|hand)\s+(?:me\s+)?back|return(?:\s+back)?|repeat)\s+(?:exactly\s+)?(?:the\s+)?same\s+"
     r"(?:text|message|string|words|input)\b|\bexactly\s+what\s+i\s+(?:type|send|say|write|give)\b"
     r"|\b(?:(?:give|send|hand)\s+(?:me\s+)?back|return(?:\s+back)?)\s+(?:exactly|verbatim|as\s+is)\s+(?:the\s+|this\s+|my\s+)?"
     r"(?:text|message|string|words|input)\b", "echo"),
    # Opening one named thing's record reads it: "open Priya's entry".
    (r"\bopen\s+(?=(?:[A-Z][\w-]*'s|the\s+[A-Z][\w-]*|his|her|their)\s+(?:\w+\s+)?(?:entry|node|record|profile|card)\b)",
     "view "),
    # Nodes + edges, entities & relations: "and" written short.
    (r"\b(nodes?|entit(?:y|ies))\s*[+&]\s*(edges?|relations?|relationships?|links?)\b", r"\1 and \2"),
    # A name not known for sure asks to search: "not sure of the name".
    (r"\b(?:not\s+sure\s+(?:of|about)|(?:don'?t|do\s+not|can'?t|cannot)\s+(?:remember|recall)|forgot|forget)\s+"
     r"(?:the|its|his|her|their)\s+(?:exact\s+)?(?:names?|titles?)\b"
     r"|\bnot\s+sure\s+(?:what|how)\s+(?:i|we)\s+(?:called|named|saved|filed)\s+(?:him|her|it|them)\b", "search"),
    # Kept "on file" about someone: held in the memory ("do we have
    # anything on file about my landlord").
    (r"\bon\s+file\s+(?=(?:about|regarding|for)\s+(?:my|our|his|her|their|[A-Z]))", "in memory "),
    # Switched "on/off": toggled.
    (r"\b(?:on\s*/\s*off|off\s*/\s*on)\b", "toggle"),
    # Every node and every link: the whole graph ("all entities and all
    # relations").
    (r"\b(?:all|every)\s+(?:the\s+)?(?:nodes?|entit(?:y|ies))\s+(?:and|&|\+)\s+(?:all\s+|every\s+)?(?:the\s+)?"
     r"(?:edges?|relations?|relationships?|links?|connections?)\b", "entire graph"),
    # A name said to hold a word ("every STL whose name has 'enclosure' in
    # it"): names matching a pattern.
    (r"\b(?:whose|with\s+a|with)\s+(?:file\s*)?names?\s+(?:has|have|contains?|includes?|containing|including)\b",
     "whose names match the pattern"),
    # Text and blob together ("mixed text and blob"): resources of
    # different types, as links to several are.
    (r"\b(?:mixed\s+|both\s+)?(?:text\s+(?:and|&|\+|/)\s+blobs?|blobs?\s+(?:and|&|\+|/)\s+text)(?:\s+(?:mixed|both|alike))?\b",
     "different types"),
    # PowerShell's commands, as people name what they want done:
    # "Get-ChildItem Env:" lists the environment, "Get-ChildItem" a folder.
    (r"\b(?:Get-ChildItem\s+Env:|(?:Get-ChildItem|gci|Get-Content|Set-Content|Out-File|Get-Date|Move-Item|Rename-Item"
     r"|Get-Item(?:Property)?|Select-String|Compress-Archive)\b)",
     lambda m: _CMDLETS.get(" ".join(m.group(0).lower().split()).replace("property", ""), m.group(0))),
    # The clock as Unix asks it ("date -u").
    (r"\bdate\s+(?:-u|--utc)\b", "current time utc"),
    # A file filed again is moved ("refile deed.pdf under donors/").
    (r"\brefil(?:e|es|ed|ing)\b", "move"),
    # A channel checked ("just to check the connection"): no link of a
    # graph.
    (r"\b(check(?:ing)?|test(?:ing)?|verify(?:ing)?|confirm(?:ing)?)(?:\s*,)?\s+(?:that\s+|whether\s+|if\s+|ob\s+)?"
     r"(?:the\s+|our\s+|my\s+|a\s+|die\s+)?connection(?!\s+(?:between|from|of)\b)", r"\1 connectivity"),
    # A file's compressed copy by its extension ("make a .gz of the log").
    (r"\b(?:a|an)\s+\.(?:gz|gzip)\b", "a gzip compressed copy"),
    # Time something takes ("an operation that takes some time"): how
    # long it runs, no clock.
    (r"\b(takes?|taking|took|lasts?|lasting)\s+(?:some|a\s+(?:bit\s+of|lot\s+of|long))\s+time\b", r"\1 a long while"),
    # What a result is for, in an office's words ("..., for attachment to
    # the file"): a case's file, no file to act on.
    (r"\bfor\s+(?:attachment|inclusion|addition)\s+(?:to|in)\s+(?:the\s+|our\s+)?(?:case\s+)?files?\b", " "),
    # What is not wanted, set apart ("... (not the server's allowed
    # folders)"): each of its words.
    (r"\(\s*(?:not|rather\s+than|instead\s+of)\s+([^(),;]{1,80})\)",
     lambda m: " ".join("no " + w for w in m.group(1).split() if w.lower() not in ("the", "a", "an"))),
    # What is not wanted said after it ("names only; sizes not required"):
    # no sizes.
    (r"\b(sizes?|dates?|timestamps?|contents?|details|metadata|sub-?folders|sub-?directories|recursion|processing"
     r"|formatting|links|relations|observations|permissions)\s+(?:(?:is|are)\s+)?(?:not\s+(?:required|needed|necessary"
     r"|wanted|desired)|unnecessary|unneeded)\b", r"no \1"),
    # A bird, no echo ("a tenant with a parrot").
    (r"\b(a|the|my|his|her|their|our)\s+(?:pet\s+)?parrots?\b", r"\1 bird"),
    # Moving in or out, a tenancy's step ("the move-in checklists"): no
    # file moved.
    (r"\bmove-(?:in|out)\b", "tenancy"),
    # A sum asked as a total of two counts ("total of 18 units and 27
    # units") or as a line of sums ("742 new words + 1589 matches = ?").
    (r"\btotal\s+of\s+(?=\d[\d.,]*\s+(?:[^\W\d]+\s+){0,2}(?:and|\+|plus)\s+\d)", "sum of "),
    (r"(?<![\d.,])\d[\d.,]{0,20}\s+(?:[^\W\d]+\s+){1,3}\+\s*\d[\d.,]{0,20}\s+(?:[^\W\d]+\s+){0,3}=\s*\?",
     "sum of two numbers"),
    # The variables a running process has ("the variables the running
    # process has"): its environment.
    (r"\bvariables\s+(?=(?:the\s+|that\s+)?(?:running\s+)?(?:server\s+|process\s+)(?:\w+\s+){0,3}?"
     r"(?:has|have|sees|gets|got|is\s+using)\b)", "environment variables "),
    # A link to a browser said not to be wanted ("a form in the chat, not
    # a browser link"): no URL.
    (r"\bnot\s+(?:via\s+|through\s+|with\s+)?(?:a\s+|an\s+|the\s+)?(?:browser|web)\s+(?:link|page|url|redirect)\b",
     "no url"),
    # "Names are enough": only names.
    (r"\bnames\s+(?:are|is)\s+(?:enough|fine|sufficient|plenty|all\s+i\s+need)\b", "names only, no sizes"),
    # Someone with a word in their notes ("anyone in memory with 'vegan'
    # in their notes?"): a search of the nodes (not "anyone with access").
    (r"\b(?:anyone|anybody|someone|somebody)\s+(?:in\s+(?:memory|the\s+graph|the\s+knowledge\s+graph)\s+with\s+"
     r"|with\s+(?=[^.?!]{1,60}?\bin\s+(?:their|his|her)\s+(?:notes|entry|entries|records?|profiles?)\b))",
     "search the nodes for anyone with "),
    # All that is remembered, dumped ("dump everything you remember"):
    # the whole graph.
    (r"\b(?:dump|export|list|show|print|give\s+me)\s+(?:out\s+)?(?:everything|all)\s+(?:that\s+)?(?:you|we)\s+(?:remember|know"
     r"|have\s+stored|stored)\b(?!\s+(?:about|on|of|regarding)\b)", "read the whole knowledge graph"),
    # The server asking its user ("make the server request info from me
    # mid-task"): an elicitation.
    (r"\brequest\s+(?:some\s+)?(?:info|information|input|details?|data)\s+from\s+(?:me|the\s+user|the\s+client)\b",
     "elicitation request for input from the user"),
    # A paper filed into a folder is moved there ("file the signed 8879
    # into the 2026 folder").
    (r"^\W{0,3}file\s+(?=(?:the|this|that|my|our|these|those)\s+[^.?!]{1,60}?\s+(?:into|under|to)\s+(?:the\s+|my\s+|our\s+)?"
     r"[\w.-]+\s+(?:folder|directory|dir)\b)", "move "),
    # Allowed ones asked after an access error ("which ones ARE
    # allowed?"): the allowed folders.
    (r"\bwhich\s+(?:ones|dirs|folders|directories|paths|locations)\s+(?:are|am\s+i|is\s+it)\s+(?:actually\s+)?allowed\b",
     "list allowed directories"),
    # Turkish: "adını ... olarak değiştir", its name changed: a rename.
    (r"\badını\s+(?:\S+\s+){0,4}?(?:olarak\s+)?değiştir\w*", "rename"),
    # Someone asked after by name ("anyone named Fitzgerald", "find
    # anyone I've noted as ..."): a search of the nodes.
    (r"\b(?:anyone|anybody|someone|somebody)\s+(?=(?:named|called)\s+['\"]?(?-i:[A-Z]))", "search the nodes for anyone "),
    (r"\bfind\s+(?:anyone|anybody|everyone|everybody|someone|people)\b(?!['’]s\b|[.-]\w)", "search the nodes for anyone"),
    # The full picture: the whole of it, no picture.
    (r"\b(?:the\s+)?(?:full|whole|complete|bigger|entire)\s+picture\b", "the whole"),
    # Scans kept ("my scans folder"): scanned papers, no search.
    (r"\b(my|our|the|his|her|their|those|these)\s+scans\b", r"\1 papers"),
    # One named entry shown ("the exact entry for Malik Osei"): that node.
    (r"\b(?:exact|specific)\s+(?:entry|record|node|card)\s+(?:for|of|on)\s+(?=(?-i:[A-Z]))(?!(?:jan|feb|mar|apr|may|jun|jul"
     r"|aug|sep|oct|nov|dec|mon|tue|wed|thu|fri|sat|sun)[a-z]*\b)", "node named "),
    # Files of a kind wherever they are ("find every .jpg"): files with
    # that extension.
    (r"\b(every|all|any)\s+\.(<extensions>)\b", r"\1 \2 files"),
    # A variable named as code names it, asked whether it is set
    # ("is PLAYER_DB_URL actually set?"): the environment.
    (r"\bis\s+(?-i:[A-Z][A-Z0-9]*_[A-Z0-9_]+)\s+(?:actually\s+|really\s+|even\s+)?(?:set|defined|exported)\b",
     "is the environment variable set"),
    # Who is "on file" is who is remembered.
    (r"\bwho\s+(?:do|have|did)\s+(?:we|i)\s+(?:have|got)\s+on\s+file\b", "search memory for anyone"),
    # A channel known to work ("so I know the connection works"): no link
    # of a graph.
    (r"\b(know|see|sure|confirm)\s+(?:that\s+|if\s+|whether\s+)?the\s+connection\s+(?:to\s+(?:the\s+)?server\s+)?"
     r"(?:works|is\s+(?:up|working|alive|ok|fine))\b", r"\1 connectivity works"),
    # Three log levels or more joined by slashes ("debug/info/warning/error"),
    # standing alone: levels of logging, no path.
    (r"(?<![\w/.])(?:debug|info|notice|warn|warning|error|critical)(?:\s*/\s*(?:debug|info|notice|warn|warning|error|critical)){2,6}"
     r"(?![\w/.])",
     "log levels"),
    # Every level of a folder ("every level deep"): the whole tree.
    (r"\b(?:every|all|each)\s+levels?\s+(?:deep|down)\b", "the whole nested tree"),
    # The same text given back ("get that exact same text returned"): an
    # echo.
    (r"\b(?:get|have)\s+(?:that|the|this)\s+(?:exact\s+)?(?:same\s+)?(?:text|message|string|line)\s+(?:returned|back|echoed)\b"
     r"(?!\s+from\b)", "echo it back"),
    # What someone wrote in a file ("what the night shift wrote"): what it
    # says, nothing to write.
    (r"\bwhat\s+(?:the\s+|our\s+|my\s+)(?:[\w-]+\s+){1,2}?(?:wrote|noted|logged)\b", "what it says"),
    # A file put into a folder and taken out of another: moved.
    (r"\bput\s+(?=(?:the|this|that|my|our)\s+[^.?!]{1,60}?\s+(?:into|in)\s+(?:the\s+)?[\w.-]+\s+(?:folder|directory|dir)\s+and"
     r"\s+(?:take|remove|get)\s+it\s+(?:out\s+of|from)\b)", "move "),
    # Where a file server may go, asked after ("what locations is the fs
    # server configured for"): its allowed folders.
    (r"\bwhat\s+(?:locations|folders|directories|dirs|paths)\s+(?:is|are)\s+(?:the\s+)?(?:fs\s+|file\s+|filesystem\s+)?server"
     r"\s+(?:configured|set\s+up|allowed|limited)\b", "list allowed directories"),
    # A file looked for by its name somewhere ("a file named X somewhere
    # on the drive"): a search.
    (r"\bfile\s+(?:named|called)\s+(\S+)\s+(?:somewhere|anywhere)\b", r"file named \1 somewhere, search files"),
    # kubectl's usual alias: "k get pods".
    (r"^\s*k\s+(?=(?:get|describe|apply|delete|logs|exec|scale|rollout|top|edit|patch|create|port-forward)\b)",
     "kubectl "),
    # (Last: the rewrites above read the folder as written.) A folder by
    # its name before the word ("the incoming scans folder",
    # "ls the permits directory"): the name, no word of the request. (Not a
    # home folder: "the desktop folder" is read as such above.)
    (r"\b(the|my|our|your|this|that)\s+(?!" + _NO_FOLDER_NAME + r"\b)"
     r"((?-i:[a-z])[\w-]{2,30}\s+(?!" + _NO_FOLDER_NAME + r"\b))?"
     r"(?!" + _HOME_FOLDERS + r"\s)((?-i:[a-z])[\w-]{2,30})\s+(folder|directory|dir)\b"
     r"(?!\s+(?:called|named|titled|tree|structure|listing|contents?|sizes?|names?|path|of|is|are|has|have|exists?)\b)",
     r"\1 \2\4 called \3"),
]
