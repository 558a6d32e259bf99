//! Issue 43, rounds 17 to 23: requests that say what they want in a form
//! of their own (an SQL statement, a graph pattern, a bare extension,
//! shorthand, an idiom) rank the tool they ask for first. Each question in
//! the lists is new, written for these tests, or (marked) one the round
//! read from an earlier held-out set; each ranked the wanted tool below
//! another before its round read its form.
//!
//! Like `search.rs`, these rank with `runner.py`'s own `search_tools` on
//! the host's `python3` over the catalog the bridge builds from the real
//! servers' `tools/list`.

use crate::search_eval::{
    REAL_TOOLS, catalog_of, cell_tools, encoder, nearness, python, rank, rank_with_meaning, runner_py, words,
};
use crate::search_meaning::{asked_in, each_first};

#[test]
fn sql_statements_graph_patterns_bare_extensions_and_shorthand_rank_the_tool_they_ask_for_first() {
    let Some(python) = python() else { return };
    let cases = [
        // An SQL statement's verb says what it does.
        ("DELETE FROM people WHERE name = 'Rosa'", "memory__delete_entities"),
        ("INSERT INTO graph (name, type) VALUES ('Initech', 'company')", "memory__create_entities"),
        // A graph pattern is two nodes and the relation between them.
        ("step 2: persist (order)-[SHIPS_TO]->(Lisbon)", "memory__create_relations"),
        ("step 4/4: (invoice)-[PAID_BY]->(Acme)", "memory__create_relations"),
        // A bare extension says the kind of file.
        ("open the .flac take from the sessions folder", "filesystem__read_media_file"),
        ("fetch the .wav interview in uploads", "filesystem__read_media_file"),
        // Shorthand: "del", "obs", "kg:".
        ("del obs 'likes jazz' from Rosa", "memory__delete_observations"),
        ("del the link between Rosa and Tom", "memory__delete_relations"),
        // One named thing said to be of a kind is a new thing of that kind.
        ("remember that Rosa is a violinist", "memory__create_entities"),
        // Idioms: "did I already tell you", "misnamed", "first time", "tack on".
        ("did I already tell you where I park?", "memory__search_nodes"),
        ("the file is misnamed, fix its name to final.pdf", "filesystem__move_file"),
        ("agent step: first time we see user 'k9', register them", "memory__create_entities"),
        ("tack on 'plays cello' to Rosa", "memory__add_observations"),
        // "employs" relates two named things.
        ("record that Globex employs Rosa", "memory__create_relations"),
    ];
    each_first(&python, &cases.map(|(query, want)| asked_in(query, want, REAL_TOOLS)));
}

#[test]
fn named_text_files_permission_idioms_name_matches_old_tools_leading_commands_and_half_negated_words_rank_the_tool_asked_for_first()
 {
    let Some(python) = python() else { return };
    let cases = [
        // A file people know by its bare name is a text file.
        ("what does the Makefile do on install", "filesystem__read_text_file"),
        // "lets me": what is allowed.
        ("where does this server lets me write", "filesystem__list_allowed_directories"),
        // A word asked for in the file's name: a search by name.
        ("which files have 'draft' in their filename", "filesystem__search_files"),
        ("files with 2024 in the file name", "filesystem__search_files"),
        // "the predecessor of" a tool: the deprecated one.
        ("use the predecessor of read_text_file on notes.md", "filesystem__read_file"),
        // Commands opening a request: glob searches, dir lists.
        ("glob for md files recursively, skip vendor", "filesystem__search_files"),
        ("dir D:/projects", "filesystem__list_directory"),
        // A word asked for in full is not unwanted for being negated too.
        ("resource_link blocks in the result, not embedded resources", "everything__get_resource_links"),
    ];
    each_first(&python, &cases.map(|(query, want)| asked_in(query, want, REAL_TOOLS)));
}

#[test]
fn things_said_before_numbered_files_known_things_retractions_and_pretend_features_rank_the_tool_asked_for_first() {
    let Some(python) = python() else { return };
    let cases = [
        // "something saved about": what the memory holds, not a write.
        ("do you have something saved about my cousin's birthday?", "memory__search_nodes"),
        // A file name may open with a digit (round 18's set).
        ("pull in all three migrations together: 001.sql, 002.sql, 003.sql", "filesystem__read_multiple_files"),
        // A thing "already stored" takes the fact on its record (round 18's set).
        ("remember also that Acme has 200 employees (Acme is already stored)", "memory__add_observations"),
        // Removing named things "along with their links": the things.
        ("remove the nodes Alpha and Beta along with their links", "memory__delete_entities"),
        // "take back what I said about": a fact taken off a record.
        ("take back what I said about Omar's address", "memory__delete_observations"),
        // "find out where ... allowed": what is allowed.
        ("step 1: find out where the file server is allowed to write", "filesystem__list_allowed_directories"),
        // "fake", "pretend" for simulated; "flip" for toggle.
        ("flip the fake logger on", "everything__toggle_simulated_logging"),
        ("flip the pretend logger on", "everything__toggle_simulated_logging"),
        // "tag" for annotate (round 18's set).
        (
            "how does a server tag content blocks with who-it's-for and how important? give an example",
            "everything__get_annotated_message",
        ),
        // An SQL statement reads as its verb, not as a search.
        ("SELECT * FROM memory", "memory__read_graph"),
    ];
    each_first(&python, &cases.map(|(query, want)| asked_in(query, want, REAL_TOOLS)));
    // A clause opening with "unlink" after a server's name relates (round
    // 18's set), over the 300-tool catalog.
    each_first(
        &python,
        &[asked_in(
            "on bravo memory, unlink ServiceA from DB (keep both entities)",
            "memory_bravo__delete_relations",
            300,
        )],
    );
}

#[test]
fn a_select_of_no_table_acquisitions_broken_connections_progress_over_time_and_a_known_thing_rank_the_tool_asked_for_first()
 {
    let Some(python) = python() else { return };
    let cases = [
        // A SELECT of no table computes its expression.
        ("SELECT 512 + 256;", "everything__get_sum"),
        // "acquired" relates two named things.
        ("record that Initech acquired Hooli", "memory__create_relations"),
        // "break the connection": a relation removed.
        ("break the connection between those two nodes, keep the nodes", "memory__delete_relations"),
        // "over time" is no clock time.
        ("I need a call that reports its progress over time", "everything__trigger_long_running_operation"),
        // A thing already stored, even unnamed, takes the fact (round 19's set).
        ("attach new notes to an entity that's already stored", "memory__add_observations"),
    ];
    each_first(&python, &cases.map(|(query, want)| asked_in(query, want, REAL_TOOLS)));
}

#[test]
fn one_call_a_new_home_a_named_record_a_select_by_name_and_log_levels_rank_the_tool_asked_for_first() {
    let Some(python) = python() else { return };
    let cases = [
        // "in a single call": together.
        ("review the three migration scripts in a single call", "filesystem__read_multiple_files"),
        // "should live in": a move.
        ("the invoice is sitting in Inbox but should live in Archive/2024", "filesystem__move_file"),
        // One named record ("the Acme node") takes the facts (round 21's set).
        ("append facts to the Acme node: founded 1999, HQ in Oslo", "memory__add_observations"),
        // A SELECT on the name reads the named ones.
        ("SELECT * FROM people WHERE name = 'Rosa'", "memory__open_nodes"),
        // Log levels joined by slashes are words, not a path (round 21's set).
        ("make the server start producing fake debug/info/error log lines", "everything__toggle_simulated_logging"),
    ];
    each_first(&python, &cases.map(|(query, want)| asked_in(query, want, REAL_TOOLS)));
    // "top-level" reads as "top level" does (a listing), not as the word
    // "level", which pulls the logging tools.
    let seen = words(&python, &["show the top-level contents of /var/www"]);
    let groups = seen[0]["query"].as_array().unwrap();
    let holds = |word: &str| groups.iter().any(|g| g[1].as_array().unwrap().contains(&word.into()));
    assert!(!holds("level") && !holds("top") && holds("list"), "{}", seen[0]["query"]);
}

#[test]
fn two_known_things_a_cypher_read_and_removals_that_keep_the_thing_rank_the_tool_asked_for_first() {
    let Some(python) = python() else { return };
    let cases = [
        // Both things known already: what is new is how they relate.
        ("note that Lyon is located in France (both nodes exist already)", "memory__create_relations"),
        // A Cypher MATCH ... RETURN with no condition reads the whole graph.
        ("MATCH (a)-[r]->(b) RETURN a, r, b", "memory__read_graph"),
        // ... and with a condition, a search.
        ("MATCH (p) WHERE p.name CONTAINS 'Ana' RETURN p", "memory__search_nodes"),
        // "clean ... off" takes away.
        ("clean the old facts off Omar's node", "memory__delete_observations"),
        // A removal that keeps the thing itself takes what is said of it.
        ("remove the phone number we stored on Initech; the record itself stays", "memory__delete_observations"),
        ("delete an outdated remark on a node without deleting the node", "memory__delete_observations"),
    ];
    each_first(&python, &cases.map(|(query, want)| asked_in(query, want, REAL_TOOLS)));
}

/// Round 24: a request in Spanish, French, German, Portuguese or Italian
/// is read in English (its nouns capitalised in German are no names); a
/// misspelt folder after "new" is a new folder, not a new thing of the
/// graph; a clause after a dash opens as a clause after a comma does. An
/// English request with a word another language also has stays as it is.
/// New questions; each but the last two ranked the wanted tool lower on
/// the ranker before round 24.
#[test]
fn requests_in_other_languages_a_misspelt_new_folder_and_a_question_after_a_dash_rank_the_tool_asked_for_first() {
    let Some(python) = python() else { return };
    let cases = [
        asked_in("qué hora es ahora en Buenos Aires", "time__get_current_time", REAL_TOOLS),
        asked_in("lista los archivos de la carpeta docs", "filesystem__list_directory", REAL_TOOLS),
        asked_in("affiche le contenu du fichier notes.txt", "filesystem__read_text_file", REAL_TOOLS),
        asked_in("crée un dossier nommé archives", "filesystem__create_directory", REAL_TOOLS),
        asked_in("Verschiebe die Datei a.txt in den Ordner archiv", "filesystem__move_file", REAL_TOOLS),
        asked_in("wie spät ist es in Sydney?", "time__get_current_time", REAL_TOOLS),
        asked_in("procure arquivos .csv na pasta dados", "filesystem__search_files", REAL_TOOLS),
        asked_in("che ore sono adesso a Roma", "time__get_current_time", REAL_TOOLS),
        asked_in("new fodler for the screenshots", "filesystem__create_directory", REAL_TOOLS),
        asked_in("on the echo memory server - who do I know at Initech?", "memory_echo__search_nodes", 300),
        asked_in("the actual time in de Bilt", "time__get_current_time", REAL_TOOLS),
        asked_in("what is the current time in LA", "time__get_current_time", REAL_TOOLS),
    ];
    each_first(&python, &cases);
}

/// Round 25: a negative number is a number ("add -40 and 2"); replacing
/// whatever a file held writes it anew; the same text given back is an
/// echo; every node and edge is the whole graph; updating what the memory
/// holds on someone, or naming their new something, adds a fact; "these
/// people: ..." are things of their own; "emit" is a word (no typo of
/// "edit") and two log levels ask for messages of several levels; more
/// Spanish words. New questions; each ranked the wanted tool lower on the
/// ranker before round 25.
#[test]
fn negative_numbers_whole_rewrites_echoes_updates_on_known_things_listed_people_and_log_levels_rank_the_tool_asked_for_first()
 {
    let Some(python) = python() else { return };
    let cases = [
        ("add -40 and 2", "everything__get_sum"),
        ("dump the build log into out/run.log, replace whatever is there", "filesystem__write_file"),
        ("return exactly the same text I send", "everything__echo"),
        ("make it say exactly what I write", "everything__echo"),
        ("print each node and edge you keep", "memory__read_graph"),
        ("list every node and relationship you know", "memory__read_graph"),
        ("update memory: the launch slipped to June", "memory__add_observations"),
        ("update her profile: now lives in Oslo", "memory__add_observations"),
        ("note Bob's new phone number: 555-0101", "memory__add_observations"),
        ("keep in mind her new email is dana@acme.io", "memory__add_observations"),
        ("remember these three colleagues: Ana, Raj and Mei", "memory__create_entities"),
        (
            "can the server emit info and error notifications so my log viewer shows them",
            "everything__toggle_simulated_logging",
        ),
        ("cambia el nombre de la carpeta viejo a nuevo", "filesystem__move_file"),
        ("quita del grafo la entidad 'Proveedor X'", "memory__delete_entities"),
    ];
    each_first(&python, &cases.map(|(query, want)| asked_in(query, want, REAL_TOOLS)));
}

/// Round 26: opening one named thing's record reads it; removing
/// everything known about someone removes them; a removal that keeps
/// everything else, or keeps the company, takes a fact; "nodes+edges" is
/// the whole graph; a name not known for sure asks to search; making an
/// entity of a type makes one; an OAuth sign-in is a browser flow. New
/// questions; each ranked the wanted tool lower on round 25's ranker.
#[test]
fn opened_records_removals_of_all_or_of_one_fact_short_ands_half_known_names_typed_entities_and_sign_ins_rank_the_tool_asked_for_first()
 {
    let Some(python) = python() else { return };
    let cases = [
        ("open Marco's record", "memory__open_nodes"),
        ("erase everything you know about my old landlord", "memory__delete_entities"),
        ("drop his old phone number but keep everything else", "memory__delete_observations"),
        ("strip the 'former partner' remark from Hooli and keep the organization", "memory__delete_observations"),
        ("dump nodes+edges", "memory__read_graph"),
        ("is there a contact called something like Jen? not sure of the name", "memory__search_nodes"),
        ("add an entity 'orders-db' of type database", "memory__create_entities"),
        ("register 'queue-worker' as an entity of type service", "memory__create_entities"),
        ("test how my client handles an OAuth sign-in the server kicks off", "everything__trigger_url_elicitation"),
    ];
    each_first(&python, &cases.map(|(query, want)| asked_in(query, want, REAL_TOOLS)));
}

/// Round 28: more words of other languages (forget, add, simulate, ask,
/// form, weather, structured, whole...), phrases ("merk dir", "qué tiempo
/// hace", "por completo"), and a short request with one such word
/// ("umbenennen: a.txt -> b.txt"); a tool named as the one to use ("call
/// read_file on ...") ranks first, unless the request turns it away ("but
/// not with read_file"); a path ending in a file every system has
/// (`/etc/fstab`, `authorized_keys`) names a file, not a folder. New
/// questions; each ranked the wanted tool lower on round 26's ranker.
#[test]
fn more_words_of_other_languages_a_tool_named_as_the_one_to_use_and_well_known_files_rank_the_tool_asked_for_first() {
    let Some(python) = python() else { return };
    let cases = [
        ("oublie complètement Julien", "memory__delete_entities"),
        ("vergiss Thomas vollständig", "memory__delete_entities"),
        ("merke dir: Lena ist eine neue Kundin", "memory__create_entities"),
        ("simula una petición de datos al usuario con un formulario", "everything__trigger_elicitation_request"),
        ("qué tiempo hace en Sevilla? como contenido estructurado", "everything__get_structured_content"),
        ("umbenennen: bericht.txt -> report.txt", "filesystem__move_file"),
        ("olvida a Pedro por completo", "memory__delete_entities"),
        ("zeig mir den ganzen Wissensgraph", "memory__read_graph"),
        ("call read_file on /etc/hostname", "filesystem__read_file"),
        ("read /etc/hosts but not with read_file", "filesystem__read_text_file"),
        ("show me /etc/fstab", "filesystem__read_text_file"),
        ("what's in ~/.ssh/authorized_keys", "filesystem__read_text_file"),
    ];
    each_first(&python, &cases.map(|(query, want)| asked_in(query, want, REAL_TOOLS)));
}

/// Round 30: Latin letters apart from another script's ("MCPロゴ画像" holds
/// "mcp"); a word of another language with its ending ("recuerdas",
/// "elencali") reads as the word; what a request does not want ends with
/// its clause ("not a tarball, just gzip ..."); "whitelisted" is allowed;
/// "all nodes and all edges" is the graph; "what do we have on" searches;
/// PATH or HOME in capitals ask for the environment; a dialog for the
/// human's input is an elicitation; "le droit de" is being allowed; "pesa"
/// weighs. New questions; each ranked the wanted tool lower on round 28's
/// ranker.
#[test]
fn other_scripts_word_endings_clause_bound_negation_allowlists_environment_names_and_dialogs_rank_the_tool_asked_for_first()
 {
    let Some(python) = python() else { return };
    let cases = [
        asked_in("小さいMCPロゴ画像をください", "everything__get_tiny_image", REAL_TOOLS),
        asked_in("¿qué recuerdas acerca de mi dentista?", "memory__search_nodes", REAL_TOOLS),
        asked_in(
            "not a tarball, just gzip report.txt into a resource",
            "everything__gzip_file_as_resource",
            REAL_TOOLS,
        ),
        asked_in("which dirs are whitelisted for you", "filesystem__list_allowed_directories", REAL_TOOLS),
        asked_in("give me all nodes and all edges", "memory__read_graph", REAL_TOOLS),
        asked_in("what do we have on the Falcon launch?", "memory__search_nodes", REAL_TOOLS),
        asked_in("memory_delta: what do you have on 'pricing'?", "memory_delta__search_nodes", 300),
        asked_in("which HOME and USER does the server see?", "everything__get_env", REAL_TOOLS),
        asked_in(
            "show me the dialog a server opens to get input from the human",
            "everything__trigger_elicitation_request",
            REAL_TOOLS,
        ),
        asked_in("où ai-je le droit d'écrire ?", "filesystem__list_allowed_directories", REAL_TOOLS),
        asked_in("quanto pesa ogni file in /srv/logs?", "filesystem__list_directory_with_sizes", REAL_TOOLS),
    ];
    each_first(&python, &cases);
}

/// Round 32: "scrub" removes; "anything related to" asks about, not for a
/// relation; files "lying around" are searched for; text given back "as
/// is" or "verbatim" is an echo; a thing named "service A" is a named
/// thing; "contiene", "tal cual"; a named file's size or dates ask for its
/// metadata, whatever kind the file is; a new note on a known thing, all
/// about someone removed, and a removal keeping both things read as round
/// 30's set says (its three questions, read after its measurement, marked
/// below). Each case ranked the wanted tool lower on round 30's ranker.
#[test]
fn scrubs_related_questions_stray_files_verbatim_echoes_lettered_names_and_a_media_files_size_rank_the_tool_asked_for_first()
 {
    let Some(python) = python() else { return };
    let cases = [
        ("scrub the old address fact from Leo's record", "memory__delete_observations"),
        ("anything related to the Q3 budget in memory?", "memory__search_nodes"),
        ("are there backup files lying around in /var/tmp?", "filesystem__search_files"),
        ("return as is the text I send you", "everything__echo"),
        ("drop Falcon and all its relations", "memory__delete_entities"),
        ("remember service A depends on service B", "memory__create_relations"),
        ("store that node X reports to node Y", "memory__create_relations"),
        ("¿qué contiene el fichero notas.txt?", "filesystem__read_text_file"),
        ("devuélveme tal cual el texto 'hola'", "everything__echo"),
        ("what is the size of intro.mp4", "filesystem__get_file_info"),
        ("what's the size of song.mp3?", "filesystem__get_file_info"),
        // Round 30's set, read after its measurement.
        ("update the Atlas node with a new note: deadline moved to March", "memory__add_observations"),
        ("forget everything about Tomás, remove him from the graph completely", "memory__delete_entities"),
        ("delete the edge Tomás works_at Acme, he left; keep both nodes", "memory__delete_relations"),
    ];
    each_first(&python, &cases.map(|(query, want)| asked_in(query, want, REAL_TOOLS)));
}

/// Round 34 (read sets only): a value after "called" is the name it gives,
/// so the word after it is a word again ("a file called schema.sql
/// somewhere"); a question saying somewhere or anywhere asks where; an
/// object written out is the call's values; words of other languages for
/// stored, something and all; `os.environ`; "anything ... related to" asks
/// about; something added to a named thing is a fact on it; the sandbox's
/// roots are the allowed folders; an image asked for to see it shown,
/// naming none, is the sample; "delete that connection" and "the people
/// stay" remove a link. Each but the last two of the files' questions
/// ranked lower before.
#[test]
fn named_values_places_unknown_objects_written_out_sandbox_roots_any_image_and_links_pointed_at_rank_the_tool_asked_for_first()
 {
    let Some(python) = python() else { return };
    let cases = [
        ("is there a file called schema.sql somewhere in this repo?", "filesystem__search_files"),
        ("is there a file named 'deploy.yaml' anywhere under infra?", "filesystem__search_files"),
        ("os.environ of the running server, all of it", "everything__get_env"),
        ("was hast du alles gespeichert? komplette Liste", "memory__read_graph"),
        ("¿hay algo guardado sobre 'facturación'?", "memory__search_nodes"),
        ("graph: insert entities [{name: 'Acme', entityType: 'company', observations: []}]", "memory__create_entities"),
        ("anything in memory related to invoices?", "memory__search_nodes"),
        ("append to Project Phoenix: 'deadline slipped to March'", "memory__add_observations"),
        ("before we start, show me the sandbox roots for file operations", "filesystem__list_allowed_directories"),
        ("return a small png so I can check image content blocks render in the chat", "everything__get_tiny_image"),
        (
            "org change: the Berlin office doesn't report to HQ anymore, delete that connection",
            "memory__delete_relations",
        ),
        ("remove the 'reports to' connection, the people stay", "memory__delete_relations"),
        (
            "Berlin is not the capital of Germany in my test graph anymore — undo that connection only",
            "memory__delete_relations",
        ),
        // The word after a name given stays a word: "docs" after a list's
        // comma is no typo of "does" asking a question.
        ("create a file called TODO.md with these three bullet points: tests, docs, release", "filesystem__write_file"),
        ("whats inside my Downloads folder", "filesystem__list_directory"),
    ];
    each_first(&python, &cases.map(|(query, want)| asked_in(query, want, REAL_TOOLS)));
    // "what's in the src folder?" left three listers within a hair by
    // words, and the encoder chose the allowed folders before round 34.
    let Some(encoder) = encoder() else { return };
    let tools = cell_tools(&catalog_of(REAL_TOOLS));
    let texts = ["what's in the src folder?"];
    let (found, _) = rank_with_meaning(&python, &tools, &texts, &nearness(&encoder, &tools, &texts), 3);
    assert_eq!(found[0].first().map(String::as_str), Some("filesystem__list_directory"), "{:?}", found[0]);
}

/// Round 36 (rounds 34 and 35's sets, read after their measurements):
/// words of other scripts read in English wherever they stand (Chinese,
/// Japanese, Korean, Russian, Hindi, Arabic: "几点", "размер", "बजे"),
/// quotation marks of other kinds, more words of the Latin table; "update
/// Project Atlas: ...", "a dog named Biscuit", "un-remember", "keep my
/// profile", "I keep forgetting", "doesn't ... anymore", "should go",
/// "still exist", `createMessage`, "ask my model", "non-deprecated", "not
/// recursive", "the big picture", words joined by a slash as alternatives
/// ("audience/priority"). Each ranked lower before but one (a copy's
/// lister, first already, now for its own reason).
#[test]
fn other_scripts_facts_on_named_things_ends_of_links_sampling_asked_bare_and_slashed_alternatives_rank_the_tool_asked_for_first()
 {
    let Some(python) = python() else { return };
    let cases = [
        ("现在北京几点了？", "time__get_current_time", REAL_TOOLS),
        (
            "Когда последний раз изменялся файл report.docx и какой у него размер?",
            "filesystem__get_file_info",
            REAL_TOOLS,
        ),
        (
            "「再生可能エネルギー」についての調査をシミュレートしてください。",
            "everything__simulate_research_query",
            REAL_TOOLS,
        ),
        ("अभी दिल्ली में कितने बजे हैं?", "time__get_current_time", REAL_TOOLS),
        (
            "Renvoie-moi simplement le texte « bonjour » tel quel, c'est pour tester la connexion.",
            "everything__echo",
            REAL_TOOLS,
        ),
        (
            "Togli solo l'informazione che Luca vive a Roma, il resto lascialo",
            "memory__delete_observations",
            REAL_TOOLS,
        ),
        ("Che file ci sono nella cartella Documenti?", "filesystem__list_directory", REAL_TOOLS),
        ("update Project Atlas: deadline moved to April", "memory__add_observations", REAL_TOOLS),
        ("un-remember that I'm vegetarian (keep my profile though)", "memory__delete_observations", REAL_TOOLS),
        (
            "I keep forgetting what I've told you over time. dump everything you remember",
            "memory__read_graph",
            REAL_TOOLS,
        ),
        ("Ana doesn't report to Li anymore, fix the graph", "memory__delete_relations", REAL_TOOLS),
        ("Jan and Acme still exist, but the link between them should go", "memory__delete_relations", REAL_TOOLS),
        ("I just adopted a dog named Biscuit, please remember him from now on", "memory__create_entities", REAL_TOOLS),
        (
            "I'm implementing createMessage on the client side; need the server to call it",
            "everything__trigger_sampling_request",
            REAL_TOOLS,
        ),
        (
            "have the delta everything server ask my model to write a limerick",
            "everything_delta__trigger_sampling_request",
            300,
        ),
        (
            "what's at the bottom of server.log? last 100 lines, with the current (non-deprecated) reader",
            "filesystem__read_text_file",
            REAL_TOOLS,
        ),
        (
            "list /home/me on filesystem_echo, just names, no sizes, not recursive",
            "filesystem_echo__list_directory",
            300,
        ),
        (
            "new to this codebase, can you give me the big picture of how everything is organised — all the folders and subfolders",
            "filesystem__directory_tree",
            REAL_TOOLS,
        ),
        (
            "what does an MCP message with audience/priority hints on it look like? produce one",
            "everything__get_annotated_message",
            REAL_TOOLS,
        ),
    ];
    each_first(&python, &cases.map(|(query, want, catalog)| asked_in(query, want, catalog)));
}

/// Round 37 (round 36's set, read after its measurement): an hour written
/// after its number in Chinese, Japanese or Korean ("晚上8点") is a clock
/// time to convert; more words of other scripts (progress, notification,
/// operation, run, tool, test) and of the Latin table ("devuelva",
/// "herramienta", "qualquer coisa", "relacionada com", "estruturada");
/// "what's sitting in", "no need to recurse"; "make sure ./out/reports
/// exists" makes the folder, and a verb after "before I" is aside; "jot"
/// makes; a record named in quotes ("my 'Mom' node") takes the fact; a
/// month is no named thing; two kebab-case services and how one uses the
/// other are a relation. Each ranked lower before.
#[test]
fn script_hours_more_words_folders_made_sure_of_quoted_records_months_and_linked_services_rank_the_tool_asked_for_first()
 {
    let Some(python) = python() else { return };
    let cases = [
        ("北京时间晚上8点是纽约几点？", "time__convert_time"),
        (
            "¿Hay alguna herramienta que me devuelva el mismo texto que le envío? Solo quiero comprobar que la conexión funciona.",
            "everything__echo",
        ),
        (
            "進捗通知を送りながら時間のかかる処理を実行して、クライアントのプログレスバーをテストしたい",
            "everything__trigger_long_running_operation",
        ),
        ("Procura na memória qualquer coisa relacionada com 'férias'.", "memory__search_nodes"),
        ("I'm new to this repo, what's sitting in the scripts dir? no need to recurse", "filesystem__list_directory"),
        ("make sure ./out/reports exists before I write anything into it", "filesystem__create_directory"),
        ("jot another detail onto my 'Mom' node — birthday is 14 June", "memory__add_observations"),
        (
            "remember that Priya Shah is new on the data team — she's a person, on-call lead for January",
            "memory__create_entities",
        ),
        ("record in memory that billing-service depends on postgres-main", "memory__create_relations"),
        (
            "Quero testar a validação de saída estruturada no meu cliente MCP: me dá a temperatura e a umidade de Los Angeles.",
            "everything__get_structured_content",
        ),
    ];
    each_first(&python, &cases.map(|(query, want)| asked_in(query, want, REAL_TOOLS)));
}

/// Round 39 (rounds 37 and 38's sets, read after their measurements):
/// "op"; words of other scripts for what a client gives, roots, which,
/// allowed ("アクセスできる") and show; Portuguese and Spanish for open,
/// nodes, called, browser, address, several and "a la vez"; asking a
/// server to do something is no question for its user; "doesn't matter
/// which image" turns no image away, and an image asked for to see it
/// shown is the tiny one. Each ranked lower before.
#[test]
fn ops_roots_in_other_scripts_open_named_nodes_servers_asked_to_act_and_any_image_rank_the_tool_asked_for_first() {
    let Some(python) = python() else { return };
    let cases = [
        ("simulate a 30s op with 10 steps", "everything__trigger_long_running_operation", REAL_TOOLS),
        ("クライアントが提供しているルートの一覧を見せて", "everything__get_roots_list", REAL_TOOLS),
        (
            "Faça o servidor pedir ao cliente para abrir um endereço no navegador do usuário.",
            "everything__trigger_url_elicitation",
            REAL_TOOLS,
        ),
        ("Abra os nós chamados 'Ana' e 'Pedro' no grafo de conhecimento.", "memory__open_nodes", REAL_TOOLS),
        ("ask the everything-delta server to add 7 and 8", "everything_delta__get_sum", 300),
        (
            "leer varios archivos a la vez: index.html, style.css y app.js",
            "filesystem__read_multiple_files",
            REAL_TOOLS,
        ),
        ("ファイルサーバーがアクセスできるディレクトリはどれ？", "filesystem__list_allowed_directories", REAL_TOOLS),
        (
            "I need any image content block from the server to test rendering, doesn't matter which image",
            "everything__get_tiny_image",
            REAL_TOOLS,
        ),
    ];
    each_first(&python, &cases.map(|(query, want, catalog)| asked_in(query, want, catalog)));
}

/// Round 41 (rounds 39 and 40's sets, read after their measurements):
/// Italian, Swedish and Portuguese words (give back, text, link, between,
/// keep, the people, "o que tem na"), German's "Zeile" and "18 Uhr" (a
/// clock time), Japanese for the knowledge graph, contains and search;
/// text "returned unchanged" is an echo; a role between two named things
/// ("Initech is a customer of Globex") a relation; a line taken out of a
/// thing, no file in sight, one fact; the card of a name in quotes is
/// opened, not the whole store; "a brand new 'Berlin office' entry" is a
/// new thing; "just this level" lists one level; a misspelt link word
/// ("conections") still says what links. Each ranked lower before.
#[test]
fn more_languages_clock_hours_unchanged_text_roles_lines_cards_and_misspelt_links_rank_the_tool_asked_for_first() {
    let Some(python) = python() else { return };
    let cases = [
        ("rimandami indietro lo stesso testo, voglio verificare che il client non lo modifichi", "everything__echo"),
        (
            "does my client mangle unicode? send 'naïve café 🚀' through something that returns it unchanged",
            "everything__echo",
        ),
        ("note that Initech is a customer of Globex", "memory__create_relations"),
        ("take out the line about Tom moving to Berlin, it was wrong", "memory__delete_observations"),
        ("ta bort kopplingen mellan Anna och Erik men behåll personerna", "memory__delete_relations"),
        ("知識グラフで「ベルリン」を含むものを探して", "memory__search_nodes"),
        ("show me the full card for 'Julie Martin'", "memory__open_nodes"),
        ("show the files and subfolders in /var/www, just this level, no sizes", "filesystem__list_directory"),
        ("Wie spät ist es in Los Angeles, wenn es in München 18 Uhr ist?", "time__convert_time"),
        ("store a brand new 'Berlin office' entry with a couple of facts", "memory__create_entities"),
        ("the entity is fine but one line of it is wrong, get rid of that line", "memory__delete_observations"),
        ("ersetze in settings.py die Zeile TIMEOUT=30 durch TIMEOUT=60", "filesystem__edit_file"),
        ("o que tem na pasta downloads?", "filesystem__list_directory"),
        ("delete conections between entities", "memory__delete_relations"),
    ];
    each_first(&python, &cases.map(|(query, want)| asked_in(query, want, REAL_TOOLS)));
}

/// Round 43 (rounds 41 and 42's sets, read after their measurements): the
/// Latin table's words for Dutch, Polish and Swedish (files, folders,
/// reading, writing, deleting, moving, renaming, search, size, time,
/// memory, relations, research, simulate, birthday ...) and more French,
/// German and Italian; a request of at most five words counting one and a
/// half is read in English ("Rinomina il file 'a' in 'b'"); the same text
/// "returned" is an echo. Each but the last of the files' ranked lower
/// before (a Japanese tree, first already, now read as one).
#[test]
fn dutch_polish_and_swedish_words_short_renames_and_the_same_text_returned_rank_the_tool_asked_for_first() {
    let Some(python) = python() else { return };
    let cases = [
        (
            "Przeprowadź symulowane badanie na temat 'energia geotermalna', chcę zobaczyć etapy zadania.",
            "everything__simulate_research_query",
        ),
        ("lance une recherche approfondie sur les abeilles", "everything__simulate_research_query"),
        ("füge bei Oma hinzu, dass ihr Geburtstag am 12. Mai ist", "memory__add_observations"),
        (
            "verwijder de relatie 'getrouwd met' tussen Eva en Jan, maar bewaar beide personen",
            "memory__delete_relations",
        ),
        ("Rinomina il file 'bozza.docx' in 'contratto_finale.docx'.", "filesystem__move_file"),
        (
            "sanity check that unicode survives the MCP hop: send 'naïve café 🚀' and get the exact same thing returned",
            "everything__echo",
        ),
        (
            "プロジェクトフォルダのディレクトリ構造をサブフォルダまで全部ツリー形式で見せて",
            "filesystem__directory_tree",
        ),
    ];
    each_first(&python, &cases.map(|(query, want)| asked_in(query, want, REAL_TOOLS)));
}

/// Round 46 (rounds 43 to 45's sets, read after their measurements): "update
/// what we know about ..." adds a fact (and a request is no SQL for
/// opening with "update" and holding a parenthesis); "anything ... that
/// has to do with" asks about; "under his existing node" takes the fact;
/// text "reflected" or "untouched" is an echo; Polish, Swedish and German
/// words, and words of other scripts for forms, input, the user, the
/// server and a request; pointers to resources, several ("clickable
/// references to several server resources"), are links. Each ranked lower
/// before.
#[test]
fn updates_of_what_is_known_things_to_do_with_reflected_text_more_words_and_several_pointers_rank_the_tool_asked_for_first()
 {
    let Some(python) = python() else { return };
    let cases = [
        (
            "update what we know about Dr. Kim: now head of radiology (keep the old notes)",
            "memory__add_observations",
            REAL_TOOLS,
        ),
        ("anything in your memories that has to do with Berlin?", "memory__search_nodes", REAL_TOOLS),
        (
            "I learned something new about my neighbour Tom, save it under his existing node",
            "memory__add_observations",
            REAL_TOOLS,
        ),
        (
            "I want to see if the server returns my input untouched — send 'hello world' and get it reflected",
            "everything__echo",
            REAL_TOOLS,
        ),
        (
            "Uruchom długą operację z powiadomieniami o postępie, żeby przetestować pasek postępu",
            "everything__trigger_long_running_operation",
            REAL_TOOLS,
        ),
        ("Öppna noderna 'Stockholm' och 'Göteborg' i minnet", "memory__open_nodes", REAL_TOOLS),
        ("Durchsuche den Gedächtnis-Server golf nach allem, was 'Rechnung' erwähnt", "memory_golf__search_nodes", 300),
        (
            "サーバーからユーザーにフォーム入力を求めるリクエストを送らせて、クライアントの表示を確認したい",
            "everything__trigger_elicitation_request",
            REAL_TOOLS,
        ),
        (
            "my chat UI should show clickable references to several server resources — produce a batch of sample ones",
            "everything__get_resource_links",
            REAL_TOOLS,
        ),
    ];
    each_first(&python, &cases.map(|(query, want, catalog)| asked_in(query, want, catalog)));
}

/// Round 47 (round 46's set, read after its measurement): Swedish and Dutch
/// words for entities, observations, existing, completely and the
/// knowledge graph; "keep Carol herself" keeps the thing; "not the legacy
/// one" asks for no deprecated tool; "I don't care how big anything is"
/// wants no sizes. Each ranked second or lower before.
#[test]
fn swedish_and_dutch_graph_words_things_kept_legacy_turned_away_and_sizes_not_cared_for_rank_the_tool_asked_for_first()
{
    let Some(python) = python() else { return };
    let cases = [
        ("ta bort entiteterna 'Stockholm' och 'Göteborg' helt från kunskapsgrafen", "memory__delete_entities"),
        ("voeg nieuwe waarnemingen toe aan de bestaande entiteit 'Jan'", "memory__add_observations"),
        ("forget the remark that Carol is vegetarian (keep Carol herself)", "memory__delete_observations"),
        (
            "open main.rs and show me its contents as text - the recommended tool, not the legacy one",
            "filesystem__read_text_file",
        ),
        (
            "list the contents of this dir, not recursive, and I don't care how big anything is",
            "filesystem__list_directory",
        ),
    ];
    each_first(&python, &cases.map(|(query, want)| asked_in(query, want, REAL_TOOLS)));
}

/// Round 48 (round 47's set, read after its measurement): the identical
/// text "returned" is an echo; a server that prompts its user ("prompt me
/// for some info") asks the user, not a model; "add to what we already
/// know about" adds a fact; "which entities have an observation
/// containing ..." searches; Japanese and Russian words for new, person,
/// register, entity, completely and the knowledge graph; severities are
/// log levels. Each ranked lower before but the last (first already by
/// words; second with meaning).
#[test]
fn identical_text_users_prompted_facts_added_entities_searched_and_graph_words_of_other_scripts_rank_the_tool_asked_for_first()
 {
    let Some(python) = python() else { return };
    let cases = [
        ("MCP client smoke test: send a string and get the identical string returned", "everything__echo"),
        ("make the server prompt me for some info in the middle of a call", "everything__trigger_elicitation_request"),
        ("I want the server to prompt me for my name and age mid-call", "everything__trigger_elicitation_request"),
        ("知識グラフに新しい人物「田中さん」を登録して", "memory__create_entities"),
        ("удали сущность «Проект Х» из графа знаний полностью", "memory__delete_entities"),
        ("add to what we already know about project Apollo: deadline slipped to Q3", "memory__add_observations"),
        ("which entities have an observation containing the word allergy?", "memory__search_nodes"),
        (
            "my client should receive notifications/message at random severities, enable that demo",
            "everything__toggle_simulated_logging",
        ),
    ];
    each_first(&python, &cases.map(|(query, want)| asked_in(query, want, REAL_TOOLS)));
}

/// Round 50 (rounds 43, 45, 48 and 49's sets, read after their
/// measurement, then round 50's and 51's): what "you remember" or "have
/// stored" about a thing takes a fact; shifting things over to a folder
/// moves them, and a file put under a new name is renamed; a thing tracked
/// or hunted down, or one whose place is forgotten, is searched for, and
/// "the pdf called X" is a file; whatever is sent coming back is an echo;
/// URIs "as links" are resource links; a removal that keeps the entity
/// itself "and its relations" takes a fact, not the entity; Polish,
/// German, Dutch, Italian and Japanese words for entity, knowledge graph,
/// file info, permissions, folder, may, research question, observation,
/// resource and links. Each ranked lower by words on round 48's ranker.
#[test]
fn things_remembered_shifted_renamed_tracked_down_or_sent_back_and_more_words_of_other_languages_rank_the_tool_asked_for_first()
 {
    let Some(python) = python() else { return };
    let cases = [
        ("update what you have stored about Project Orion: launch slipped to May", "memory__add_observations"),
        ("shift the screenshots over to the old-builds folder", "filesystem__move_file"),
        ("put draft.md under a new name, final.md", "filesystem__move_file"),
        ("any csv files in the subfolders? track them down", "filesystem__search_files"),
        ("I can't remember where I saved the csv named budget", "filesystem__search_files"),
        ("find the pdf called invoice-march", "filesystem__search_files"),
        ("a loopback tool that returns whatever text I pass in", "everything__echo"),
        ("return sample URIs as links, two of them", "everything__get_resource_links"),
        (
            "clean up one stale observation on Acme, keep the entity itself and its relations",
            "memory__delete_observations",
        ),
        ("new info about entity Initech: they moved to Rust", "memory__add_observations"),
        ("usuń encję 'Kot' z grafu wiedzy", "memory__delete_entities"),
        ("Dateiinfo: Änderungsdatum und Rechte von build.sh", "filesystem__get_file_info"),
        ("Wat staat er in de map 'scripts'?", "filesystem__list_directory"),
        ("Welche Ordner darfst du lesen?", "filesystem__list_allowed_directories"),
        ("Simuleer een onderzoeksvraag over zonne-energie", "everything__simulate_research_query"),
        ("Cancella l'osservazione 'usa Linux' dall'entità Sara, non l'intera entità", "memory__delete_observations"),
        ("リソースリンクを3件ください", "everything__get_resource_links"),
    ];
    each_first(&python, &cases.map(|(query, want)| asked_in(query, want, REAL_TOOLS)));
}

/// Round 51 (misses of rounds 23 to 46's sets, then round 52's, read
/// after their measurement): names that start or end with something ask
/// for a search by pattern; a reply that points at resources, or
/// clickable URIs, are resource links; content meant for the user or the
/// assistant, or who should see it, is an annotation; Russian and Korean
/// words for enabling, logging, random levels, memory, entries, a word
/// and finding; "what's in" a path with no file's extension lists a
/// folder. Each ranked lower by words on round 50's ranker.
#[test]
fn names_starting_with_pointers_to_resources_audiences_paths_asked_into_and_words_of_other_scripts_rank_the_tool_asked_for_first()
 {
    let Some(python) = python() else { return };
    let cases = [
        ("which folder has the report CSVs? their names start with rep_", "filesystem__search_files"),
        ("I need a reply that points at some resources instead of inlining them", "everything__get_resource_links"),
        ("give me a few clickable URIs to demo resources", "everything__get_resource_links"),
        ("show how content can be marked as intended for the assistant only", "everything__get_annotated_message"),
        ("Включи симуляцию логирования", "everything__toggle_simulated_logging"),
        ("메모리에서 '회의'라는 단어가 들어간 항목을 찾아줘", "memory__search_nodes"),
        ("what's in ~/projects/app?", "filesystem__list_directory"),
        ("Покажи содержимое папки /srv/data", "filesystem__list_directory"),
    ];
    each_first(&python, &cases.map(|(query, want)| asked_in(query, want, REAL_TOOLS)));
}

/// Round 52 (rounds 54 and 55's sets, read after their measurement):
/// Chinese, Japanese, Korean and Russian words for a relation, adding,
/// between and allowed; something shifted "into Finance/2026" (a path,
/// after a file named with its extension) is moved; "create entities
/// for ..." and "create a node for ..." make things even when two names
/// or a fact follow. Each ranked lower by words on round 51's ranker.
/// Round 53 (round 56's two questions without a tool by words): Japanese
/// words for sampling, a request, annotations and a message (not found,
/// and seventh, on round 52's ranker). Round 54 (round 59's one question
/// without a tool by words): Dutch "onderzoeksopdracht" (a research task)
/// and "een" (a, counting half) read a short Dutch request (not found,
/// and second, on round 53's ranker).
#[test]
fn relations_and_permissions_in_other_scripts_things_shifted_into_paths_and_entities_created_for_named_things_rank_the_tool_asked_for_first()
 {
    let Some(python) = python() else { return };
    let cases = [
        ("在知识图谱中添加关系：王五 认识 赵六", "memory__create_relations"),
        ("허용된 디렉터리를 보여줘", "filesystem__list_allowed_directories"),
        ("could you shift budget.xlsx (v2) out of Downloads and into Finance/2026", "filesystem__move_file"),
        ("create entities for our new hires: Ana, Raj and Li, type employee", "memory__create_entities"),
        ("create a node for my dog Rex, type pet, noting he's 3 years old", "memory__create_entities"),
        ("サンプリング要求を出して", "everything__trigger_sampling_request"),
        ("アノテーション付きのメッセージを見せて", "everything__get_annotated_message"),
        ("simuleer een onderzoeksopdracht over zonnepanelen", "everything__simulate_research_query"),
        ("maak een nieuwe map 'offertes' aan in /home/piet", "filesystem__create_directory"),
    ];
    each_first(&python, &cases.map(|(query, want)| asked_in(query, want, REAL_TOOLS)));
}

/// Round 55 (rounds 60 and 61's sets, read after their measurement):
/// Turkish, Czech and Polish words for a folder, listing, a file, created,
/// when, simulated, research, a query, running and logging turned on;
/// Portuguese "renomeia", Swedish "observationen" and "från", Polish
/// "notatkę"; Russian "поищи" (search) and "что лежит в" (what is in);
/// an hour in Hindi ("9 बजे") is a clock time; one path to another by an
/// arrow ("src/legacy -> archive/legacy") is a move; "append to entity
/// 'X': ..." adds a fact; "not in your memory at all yet" is a new thing;
/// things that "have anything to do with" a subject mention it. Each
/// ranked lower by words on round 54's ranker (seven not in the top
/// three).
#[test]
fn words_of_turkish_czech_and_polish_paths_joined_by_an_arrow_and_facts_appended_to_an_entity_rank_the_tool_asked_for_first()
 {
    let Some(python) = python() else { return };
    let cases = [
        ("belgeler klasöründe neler var, listele", "filesystem__list_directory"),
        ("proszę, włącz symulowane logowanie", "everything__toggle_simulated_logging"),
        ("kdy byl vytvořen soubor faktura.pdf", "filesystem__get_file_info"),
        ("simüle edilmiş bir araştırma sorgusu çalıştır: güneş enerjisi", "everything__simulate_research_query"),
        ("renomeia relatorio.txt para relatorio-final.txt", "filesystem__move_file"),
        ("поищи в памяти всё про проект Альфа", "memory__search_nodes"),
        ("append to entity 'billing-api': runs on Kubernetes since May", "memory__add_observations"),
        ("do it for me please: src/legacy -> archive/legacy", "filesystem__move_file"),
        ("ta bort observationen 'har en katt' från Lisa", "memory__delete_observations"),
        ("usuń notatkę o adresie z encji 'Marek'", "memory__delete_observations"),
        ("покажи, что лежит в папке src", "filesystem__list_directory"),
        ("दिल्ली में सुबह 9 बजे हों तो लंदन में कितने बजे होंगे", "time__convert_time"),
        ("Ola Berg joined as a designer; she's not in your memory at all yet", "memory__create_entities"),
        ("which people in the graph have anything to do with onboarding?", "memory__search_nodes"),
    ];
    each_first(&python, &cases.map(|(query, want)| asked_in(query, want, REAL_TOOLS)));
}

/// Round 56 (rounds 62 to 65's sets, read after their measurement):
/// words of Turkish, Swedish, Dutch, Finnish, Czech, Portuguese, German,
/// French and romanised Hindi (a new folder or file, created when, turned
/// on, simulated, subscriptions, updates, log messages, access,
/// directories, a long operation, the whole knowledge graph), Korean
/// "한꺼번에" (at once), Japanese "作って" (make), Chinese "目录树" and
/// "整个"; one resource returned inline is a reference; phases are
/// stages of the research demo; two named things "already stored" relate;
/// "you haven't heard of her before" is a new thing; the commands of a
/// pasted shell session are not the ask; backing something up is no
/// echo; "any .log files under var/" searches by pattern. Each ranked
/// lower by words on round 55's ranker (eleven not in the top three).
#[test]
fn words_of_nine_more_languages_inline_resources_pasted_shell_sessions_and_files_of_a_kind_rank_the_tool_asked_for_first()
 {
    let Some(python) = python() else { return };
    let cases = [
        ("Slå på de simulerade loggmeddelandena nu", "everything__toggle_simulated_logging"),
        ("Wann wurde die Datei angebot.docx erstellt?", "filesystem__get_file_info"),
        ("Kaynak aboneliği güncellemelerini aç lütfen", "everything__toggle_subscriber_updates"),
        ("masaüstünde 'notlar' adında yeni bir klasör oluştur", "filesystem__create_directory"),
        ("testing embedding: return one resource inline in the result", "everything__get_resource_reference"),
        ("a demo call that runs through several phases and returns a report", "everything__simulate_research_query"),
        ("src 폴더의 a.py와 b.py를 한꺼번에 읽어줘", "filesystem__read_multiple_files"),
        ("Corrige la ligne 12 dans app.conf sans réécrire le fichier", "filesystem__edit_file"),
        ("lena and omar are already stored; note they are siblings", "memory__create_relations"),
        ("keep in mind Marta is my accountant, you haven't heard of her before", "memory__create_entities"),
        ("サーバー直下に logs というフォルダを作って", "filesystem__create_directory"),
        ("Ukaž mi celý znalostní graf – entity i vztahy", "memory__read_graph"),
        ("naya entity banao 'Pune Office', type location", "memory__create_entities"),
        ("ek naya file banao notes.md jisme todo list ho", "filesystem__write_file"),
        ("Acrescenta ao Pedro, que já está salvo, que ele mudou de emprego", "memory__add_observations"),
        ("Quando foi criado o arquivo dados.csv?", "filesystem__get_file_info"),
        ("$ ls downloads/\nreport.pdf  photo.jpg\nput report.pdf into documents/ please", "filesystem__move_file"),
        ("export the whole KG so we can back it up tonight", "memory__read_graph"),
        ("Gör en simulerad djupresearch om solceller", "everything__simulate_research_query"),
        ("Mihin hakemistoihin sinulla on pääsy tällä palvelimella?", "filesystem__list_allowed_directories"),
        ("Schakel de gesimuleerde logberichten uit alsjeblieft", "everything__toggle_simulated_logging"),
        ("Uzun süren bir işlem başlat, ilerleme bildirimleri gelsin", "everything__trigger_long_running_operation"),
        ("给我看整个项目的目录树结构", "filesystem__directory_tree"),
        ("any .log files under var/ or below?", "filesystem__search_files"),
        ("Hangi dizinlere erişim iznin var bu sunucuda?", "filesystem__list_allowed_directories"),
    ];
    each_first(&python, &cases.map(|(query, want)| asked_in(query, want, REAL_TOOLS)));
}

/// Round 57 (rounds 66 to 70's sets, read after their measurement):
/// folders "in scope" are those the server may use; "any files named X"
/// asks for a search; notes "on anyone from" a place are searched for;
/// "create entity 'X' of type ..." makes the thing even when facts
/// follow; words of Czech, Turkish, Dutch and romanised Hindi (move, edit,
/// the rest, leave be, contents, sizes, delete, a relation, between, file
/// size, created, date, a tree, a structure, subfolders, a brother or
/// sister, where, find, whole); Korean "노드", "이름으로" and "열어" (nodes,
/// by name, open). Each ranked lower by words on round 56's ranker (three
/// not in the top ten).
#[test]
fn folders_in_scope_files_named_anywhere_and_words_of_czech_turkish_dutch_and_korean_rank_the_tool_asked_for_first() {
    let Some(python) = python() else { return };
    let cases = [
        ("what dirs are in scope for you? I keep getting permission denied", "filesystem__list_allowed_directories"),
        ("přesuň soubor zprava.docx do složky archiv", "filesystem__move_file"),
        ("Ali ile Ayşe arasındaki 'knows' ilişkisini sil", "memory__delete_relations"),
        ("are there any files named Makefile in here?", "filesystem__search_files"),
        ("do we have notes on anyone from the Oslo team?", "memory__search_nodes"),
        ("Bu dosyanın boyutu ve oluşturulma tarihi nedir: fatura.pdf", "filesystem__get_file_info"),
        ("create entity 'Project Heron' of type project with two facts", "memory__create_entities"),
        ("Uprav v souboru README.md jen první řádek, zbytek nech být", "filesystem__edit_file"),
        ("노드 'Busan Office'를 이름으로 열어줘", "memory__open_nodes"),
        ("Eva is de zus van Tom, leg die relatie vast", "memory__create_relations"),
        ("kahan hai mera package.json? poore repo mein dhundo", "filesystem__search_files"),
        ("klasörün tüm alt klasörleriyle ağaç yapısını göster", "filesystem__directory_tree"),
        ("Vypiš obsah složky src i s velikostmi souborů", "filesystem__list_directory_with_sizes"),
    ];
    each_first(&python, &cases.map(|(query, want)| asked_in(query, want, REAL_TOOLS)));
}

/// Round 58 (sets 72 to 75, written by an engineer mid-incident, a
/// non-programmer, an analyst and a student, with words of twenty-odd
/// languages): a folder by the ".d" custom, a path ending in a longer
/// extension, one file named twice, one level of a folder, a feature named
/// in quotes, a host or ticket name ending in a number, "seen before" of
/// what was stored, "returned verbatim", two counts "in total", a chatbot
/// asked, clickable references, an outdated tool as a deprecated one, and
/// words of Romanian, Vietnamese, Indonesian, Malay, Hungarian, Finnish,
/// Greek, Ukrainian, Hebrew, Arabic and Thai. Each of these but the one
/// marked ranked the wanted tool below first by words, or not at all, on
/// round 57's ranker.
#[test]
fn folders_by_the_dot_d_custom_a_file_named_twice_numbered_host_names_and_words_of_eleven_more_languages_rank_the_tool_asked_for_first()
 {
    let Some(python) = python() else { return };
    let cases = [
        ("ls /etc/apache2/mods.d", "filesystem__list_directory"),
        ("show what /lib/systemd/system/cron.service says", "filesystem__read_text_file"),
        ("push 'x1' through and have it returned verbatim, I suspect the proxy alters bytes", "everything__echo"),
        ("how do I try the 'roots' feature of the demo server", "everything__get_roots_list"),
        ("dump everything you remember so I can look it over", "memory__read_graph"),
        ("have you run into 'disk quota exceeded' before? check your notes", "memory__search_nodes"),
        ("retire db-replica-3: wipe it from memory entirely", "memory__delete_entities"),
        ("what does config.yaml say? it's at /opt/svc/config.yaml", "filesystem__read_text_file"),
        // Held before too: three paths ending in one name stay three files.
        ("cat Cargo.toml api/Cargo.toml cli/Cargo.toml", "filesystem__read_multiple_files"),
        ("show me the contents of assets, top level only", "filesystem__list_directory"),
        ("what's actually sitting in the out folder", "filesystem__list_directory"),
        ("mută fișierul raport.pdf în arhiva/", "filesystem__move_file"),
        ("tìm tệp báo cáo trong thư mục", "filesystem__search_files"),
        ("cari di memori catatan tentang Budi", "memory__search_nodes"),
        ("pukul berapa sekarang di Jakarta", "time__get_current_time"),
        ("Hány óra van most Tokióban?", "time__get_current_time"),
        ("Adj vissza egy hivatkozást a 3-as erőforrásra", "everything__get_resource_reference"),
        ("toista viesti takaisin sellaisenaan: hei", "everything__echo"),
        ("prosím vypni simulované logování serveru", "everything__toggle_simulated_logging"),
        ("bilgi grafiğinin tamamını göster", "memory__read_graph"),
        ("βρες αρχεία .csv στον φάκελο data", "filesystem__search_files"),
        ("відкрий вузли Олена та Петро за назвою", "memory__open_nodes"),
        ("сколько будет 7 вечера по Берлину в Токио", "time__convert_time"),
        ("תבקש מהשרת בקשת דגימה מהמודל", "everything__trigger_sampling_request"),
        ("اطلب من المستخدم فتح رابط في المتصفح", "everything__trigger_url_elicitation"),
        ("จำลองการค้นคว้าเรื่องชา", "everything__simulate_research_query"),
        ("東京の天気と気温を項目ごとに", "everything__get_structured_content"),
        ("xoá quan hệ giữa Lan và Minh", "memory__delete_relations"),
        ("12 people signed up on Monday and 9 on Tuesday, how many is that in total", "everything__get_sum"),
        ("record that the Orchard Fund sponsored the Harbor Project", "memory__create_relations"),
        (
            "let the server turn around and put a question to the chatbot: 'what is 2 cubed'",
            "everything__trigger_sampling_request",
        ),
        ("a few clickable references to the server's sample documents please", "everything__get_resource_links"),
        ("I want the outdated reader tool on todo.txt, not read_text_file", "filesystem__read_file"),
    ];
    each_first(&python, &cases.map(|(query, want)| asked_in(query, want, REAL_TOOLS)));
}

/// Round 59 (sets 76 and 77, a team of developers over a week and an
/// agent planning sub-goals beside a help desk relaying users' words): a
/// request relayed in someone's words in quotes ("customer says: '...'")
/// is the request, not a value of it; "do you remember what I said about"
/// asks what was told; a file in the wrong folder is to be moved; "when
/// did I make it" asks a file's creation date; words of Hindi, Czech,
/// Arabic, Hungarian, Indonesian, Greek, Dutch and Polish, and Chinese
/// "相加" (round 79's one question without a tool). Each ranked the wanted
/// tool below first by words, or not at all, on round 58's ranker.
#[test]
fn a_request_relayed_in_quotes_a_file_in_the_wrong_folder_and_words_of_eight_more_languages_rank_the_tool_asked_for_first()
 {
    let Some(python) = python() else { return };
    let cases = [
        ("customer says: 'can you show me what is inside my Pictures folder?'", "filesystem__list_directory"),
        ("support ticket: user asks 'is it possible to get the time in Sydney right now?'", "time__get_current_time"),
        (
            "helpdesk: she wants 'the server to pop up a little form asking for my name'",
            "everything__trigger_elicitation_request",
        ),
        ("do you remember what I said about my sister's allergy?", "memory__search_nodes"),
        ("oops, I put the contract in the wrong directory, it belongs in legal/", "filesystem__move_file"),
        ("my voice memo, how big is it and when did I make it?", "filesystem__get_file_info"),
        ("मेमोरी से 'टीम बी' एंटिटी पूरी तरह हटा दो", "memory__delete_entities"),
        ("otevři v paměti záznam s názvem 'Praha'", "memory__open_nodes"),
        ("نفّذ بحثًا تجريبيًا حول الذكاء الاصطناعي", "everything__simulate_research_query"),
        ("kapcsold ki a szimulált naplózást", "everything__toggle_simulated_logging"),
        ("simulasikan riset mendalam tentang kopi", "everything__simulate_research_query"),
        ("Σύνδεσε την Άννα με το έργο Hermes", "memory__create_relations"),
        ("geef een verwijzing naar resource 3", "everything__get_resource_reference"),
        ("dodaj nową osobę do grafu: Anna Kowalska", "memory__create_entities"),
        ("请把两个数相加：40 和 2", "everything__get_sum"),
    ];
    each_first(&python, &cases.map(|(query, want)| asked_in(query, want, REAL_TOOLS)));
}

/// Round 60 (sets 80 and 81, people typing a few words in a hurry or
/// dictating by voice, and people writing English as a second language or
/// mixing two languages): a file name said aloud ("notes dot txt", "the
/// dot gitignore file", "named sunset png"); an hour in words ("seven
/// pm"); forgetting someone whole ("forget marcus", "completely"); linking
/// or parting two ("link those two", "sever the connection between");
/// a fact tacked onto a record; someone not in memory yet; who may write a
/// file; "add 8 and 13"; "rel" for a relation; all of a file's text
/// replaced; "only names"; compounds of German ("ordnergrößen"); one word
/// of another language in an English request ("verschiebe"); words of
/// Czech, Dutch, romanised Hindi, Hindi, Russian and Italian. Each ranked
/// the wanted tool below first by words, or not at all, on round 59's
/// ranker.
#[test]
fn a_file_name_said_aloud_an_hour_in_words_a_whole_someone_forgotten_and_compound_or_mixed_language_words_rank_the_tool_asked_for_first()
 {
    let Some(python) = python() else { return };
    let cases = [
        ("please open notes dot txt and read it out", "filesystem__read_text_file"),
        ("can you show me the dot gitignore file", "filesystem__read_text_file"),
        ("pull up the picture named sunset png", "filesystem__read_media_file"),
        ("ok so if it's seven pm in denver what time is it in seoul", "time__convert_time"),
        ("forget marcus", "memory__delete_entities"),
        ("scrub the acme account completely from memory", "memory__delete_entities"),
        ("ana and the billing team work together, can you link those two", "memory__create_relations"),
        ("sever the connection between ana and billing", "memory__delete_relations"),
        ("she just adopted a cat, stick that onto her record", "memory__add_observations"),
        ("add my dentist dr patel, she isn't in memory yet", "memory__create_entities"),
        ("who's allowed to write to deploy.sh and how big is it", "filesystem__get_file_info"),
        ("Step 2: add 8 and 13, expect 21", "everything__get_sum"),
        ("rel anna mentors ben", "memory__create_relations"),
        ("replace all the text of todo.md with an empty list", "filesystem__write_file"),
        ("what's in the music folder? only names", "filesystem__list_directory"),
        ("ordnergrößen anzeigen", "filesystem__list_directory_with_sizes"),
        ("simulovat výzkum o kávě", "everything__simulate_research_query"),
        ("tel 5 en 7 bij elkaar op", "everything__get_sum"),
        ("abhi Delhi mein kitne baje hain", "time__get_current_time"),
        ("docs नाम का नया फोल्डर बना दो", "filesystem__create_directory"),
        ("verschiebe report.pdf into the archive folder", "filesystem__move_file"),
        ("сохранено ли в памяти что-нибудь про мой велосипед?", "memory__search_nodes"),
        ("elimina del tutto giulia dalla memoria", "memory__delete_entities"),
    ];
    each_first(&python, &cases.map(|(query, want)| asked_in(query, want, REAL_TOOLS)));
}

/// Round 61 (sets 82 and 83, an agent searching mid-task in capability
/// phrases, guessed tool names and lines of its plan, and people of other
/// trades and very polite ones): a code's name gluing two words
/// ("os.getenv", "listdir()"), or reading the environment
/// ("process.env"); the folders a server may use; a connection checked
/// alive (a ping, no link of a graph); one removed together with its
/// relations; no entry for someone yet; "one at a time" (no time of day);
/// a relation by its verb ("represents"); the deprecated tool asked for in
/// German; words of Czech, Chinese, German (a compound with a joining
/// "s"), Swedish and Polish. Each ranked the wanted tool below first by
/// words, or not at all, on round 60's ranker.
#[test]
fn a_code_name_gluing_two_words_a_connection_checked_alive_and_a_relation_by_its_verb_rank_the_tool_asked_for_first() {
    let Some(python) = python() else { return };
    let cases = [
        ("os.getenv", "everything__get_env"),
        ("listdir()", "filesystem__list_directory"),
        ("print process.env for me", "everything__get_env"),
        ("which folders do you have permission to use", "filesystem__list_allowed_directories"),
        ("what places does the server get to touch", "filesystem__list_allowed_directories"),
        ("reply with 'ok' so I know the connection is alive", "everything__echo"),
        ("remove the supplier Nordfisk together with its relations", "memory__delete_entities"),
        ("save that I have a cat named Pixel; there's no entry for Pixel yet", "memory__create_entities"),
        ("send me links to the sample resources so I can open them one at a time", "everything__get_resource_links"),
        ("note that Li represents Globex", "memory__create_relations"),
        ("mit dem veralteten read_file die Datei a.txt lesen", "filesystem__read_file"),
        ("načti uzly podle jména: Praha, Brno", "memory__open_nodes"),
        ("让大模型生成一首诗", "everything__trigger_sampling_request"),
        ("Dateigröße und Erstellungsdatum von bericht.pdf", "filesystem__get_file_info"),
        ("Visa mappen /bilder, bara namnen", "filesystem__list_directory"),
        ("Usuń klienta 'Kowal' razem z jego powiązaniami", "memory__delete_entities"),
    ];
    each_first(&python, &cases.map(|(query, want)| asked_in(query, want, REAL_TOOLS)));
}

/// Round 62 (sets 84 and 85, people describing a problem or asking
/// whether there is a way, and chat or phone writing with slang and
/// autocorrect's wrong words): "is it possible to" asks for the thing;
/// whether a file changed asks its metadata; not waking someone far away
/// asks the time there; a fact after "I told you about Omar before;";
/// something that should not be in memory at all; no such file yet;
/// what comes out on the other side (an echo); "right a file", "w/",
/// "shes a"; text dumped into a file; names each with its kind in
/// parentheses; a home folder by its name ("my documents"); "replacement";
/// words of Czech, Japanese and Hindi. Each ranked the wanted tool below
/// first by words, or not at all, on round 61's ranker.
#[test]
fn a_problem_described_a_way_asked_for_and_chat_shorthand_rank_the_tool_asked_for_first() {
    let Some(python) = python() else { return };
    let cases = [
        ("is it possible to completely replace the contents of notes.txt?", "filesystem__write_file"),
        ("can you check whether app.log changed today", "filesystem__get_file_info"),
        ("I want to phone my brother in Auckland but I don't want to wake him up", "time__get_current_time"),
        ("I told you about Omar before; he got promoted to lead", "memory__add_observations"),
        ("that vendor went bust, it shouldn't be in your memory at all", "memory__delete_entities"),
        ("there's no CHANGELOG file yet, make one with this text", "filesystem__write_file"),
        ("I want to see what comes out on the other side verbatim: 'ünïcödé'", "everything__echo"),
        ("right a file called todo.md w/ three items", "filesystem__write_file"),
        ("dump these lines into out.csv", "filesystem__write_file"),
        ("save these: Ravi (engineer), Lena (designer)", "memory__create_entities"),
        ("yo whats in my documents", "filesystem__list_directory"),
        ("do the same replacement in lib/util.py", "filesystem__edit_file"),
        ("Smaž vztah mezi Petrem a firmou", "memory__delete_relations"),
        ("co je ve složce Dokumenty? jen seznam", "filesystem__list_directory"),
        ("この画像ファイルの作成日時と権限を見せて", "filesystem__get_file_info"),
        ("एक नकली गहन रिसर्च चलाओ", "everything__simulate_research_query"),
    ];
    each_first(&python, &cases.map(|(query, want)| asked_in(query, want, REAL_TOOLS)));
}

/// Round 63 (sets 86 and 87, requests carrying logs, configs and user
/// stories, and needs put through contrasts and conditions): one more
/// fact on something already stored; numbers to add given as `x=7 y=35`;
/// "not the entire graph, only Bruno" (one opened); a condition on a
/// folder existing (nothing to make); words of Swedish, Turkish and
/// Portuguese. Each ranked the wanted tool below first by words, or not at
/// all, on round 62's ranker.
#[test]
fn one_more_fact_numbers_given_by_name_and_a_contrast_with_the_whole_graph_rank_the_tool_asked_for_first() {
    let Some(python) = python() else { return };
    let cases = [
        ("Slå på uppdateringar för prenumererade resurser", "everything__toggle_subscriber_updates"),
        ("Sunucu bana soru sorsun, tetikle", "everything__trigger_elicitation_request"),
        ("Taşı: rapor.pdf dosyasını arşiv klasörüne", "filesystem__move_file"),
        ("one more fact on Orion, which you already have: launch slipped to May", "memory__add_observations"),
        ("add x=7 y=35", "everything__get_sum"),
        ("not the entire graph, only Bruno", "memory__open_nodes"),
        ("if the directory exists, list what's in it: /srv/data", "filesystem__list_directory"),
        ("Preciso de uma referência a um único recurso", "everything__get_resource_reference"),
    ];
    each_first(&python, &cases.map(|(query, want)| asked_in(query, want, REAL_TOOLS)));
}

/// Round 64 (sets 88 to 93: an ordinary day's mix, one server's jargon,
/// household life, audit tickets, idioms and old-fashioned prose,
/// notebook comments), its words of other languages: a Dutch compound and
/// "boom" (tree), Turkish file and sum words and "saat kaç", a file named
/// in Chinese before a full-width comma, German "verschieb" and
/// "bestehende", Portuguese permissions, Russian subscriptions, Dutch
/// "maak ... aan", Czech "both you already know", Spanish "tal cual".
/// Each ranked the wanted tool below first by words, or not at all, on
/// round 63's ranker.
#[test]
fn words_of_other_languages_read_in_round_64_rank_the_tool_asked_for_first() {
    let Some(python) = python() else { return };
    let cases = [
        ("Mostra l'intera mapstructuur come boom", "filesystem__directory_tree"),
        ("tüm .py dosyalarını bul", "filesystem__search_files"),
        ("शिमला के बारे में मेमोरी में कोई जानकारी ढूंढो", "memory__search_nodes"),
        ("saat kaç şu an Ankara'da", "time__get_current_time"),
        ("打开 笔记.txt，看看", "filesystem__read_text_file"),
        ("Verschieb notes.txt in den Ordner Archiv", "filesystem__move_file"),
        ("Füge zur bestehenden Person 'Ida' hinzu: spielt Geige", "memory__add_observations"),
        ("Quais pastas tenho permissão para acessar?", "filesystem__list_allowed_directories"),
        ("Отключи обновления подписок", "everything__toggle_subscriber_updates"),
        ("Maak de map logs aan", "filesystem__create_directory"),
        ("12 ile 30'u topla", "everything__get_sum"),
        ("Zapamatuj si, že Ota je strýc Evy - oba už znáš", "memory__create_relations"),
        ("Repíteme tal cual: hola", "everything__echo"),
    ];
    each_first(&python, &cases.map(|(query, want)| asked_in(query, want, REAL_TOOLS)));
}

/// Round 64 in English: a file put into a folder after a statement of
/// where it is; "on file about" someone; "mk"; switched "on/off"; a path
/// in a `.d` folder and `sshd_config` are files; a text returned
/// "unaltered"; things kept "each as its own entry"; "update on Rex:";
/// a thing removed "and everything connected to him"; two things "you
/// already know"; a relation's type written in code (`reads_from`,
/// `consults_for`); the "existing" record of a numbered name; whether any
/// stored note mentions a word; a later step ("before we start
/// deleting") that is not the ask; old-fashioned and figurative words
/// ("aught", "recollection", "expunge", "burn the bridge", "ring a
/// bell", "peruse the entirety"); what two numbers "come to". Each ranked
/// the wanted tool below first by words, or not at all, on round 63's
/// ranker.
#[test]
fn a_file_put_somewhere_a_relation_typed_in_code_and_old_fashioned_words_rank_the_tool_asked_for_first() {
    let Some(python) = python() else { return };
    let cases = [
        ("invoice.pdf is in Desktop, put it in the Taxes folder", "filesystem__move_file"),
        ("anything on file about my plumber? can't remember what I called him", "memory__search_nodes"),
        ("mk entity 'Board retreat' type=meeting", "memory__create_entities"),
        ("debug/info/error log notifications on/off", "everything__toggle_simulated_logging"),
        ("give me the contents of /etc/ssh/sshd_config", "filesystem__read_text_file"),
        ("check the endpoint returns the given text unaltered", "everything__echo"),
        ("start saving my plants: Fern, Cactus, Orchid - each as its own entry", "memory__create_entities"),
        ("update on Rex: vet visit went fine", "memory__add_observations"),
        ("remove Rex and everything connected to him", "memory__delete_entities"),
        ("you already know Eva and Helix Labs; remember Eva consults there", "memory__create_relations"),
        ("api-01 reads_from cache-03, store that", "memory__create_relations"),
        ("draw a line from Ann to Globex: Ann consults_for Globex", "memory__create_relations"),
        ("attach the finding 'weak cipher' to the existing SEC-12 entry", "memory__add_observations"),
        ("jot down that Mia, who you already know, plays chess", "memory__add_observations"),
        ("verify whether any stored note mentions Kubernetes", "memory__search_nodes"),
        ("Per policy, snapshot the full graph before we start deleting old records", "memory__read_graph"),
        ("is there aught in thy recollection touching upon sailing", "memory__search_nodes"),
        ("Kindly expunge 'owns a boat' from Ken's entry, leaving him otherwise intact", "memory__delete_observations"),
        ("burn the bridge between Ann and Globex but leave both of them", "memory__delete_relations"),
        ("does 'Orion' ring a bell in memory", "memory__search_nodes"),
        ("I'd like to peruse the entirety of the memory", "memory__read_graph"),
        ("what do 19 and 23 come to together?", "everything__get_sum"),
    ];
    each_first(&python, &cases.map(|(query, want)| asked_in(query, want, REAL_TOOLS)));
}

/// Round 65 (sets 94 and 96: people new to computers who describe things
/// by how they look, and requests relayed by support and product people):
/// a "box" for a folder, "boxes inside boxes" and "all the way down" for
/// the tree; an hour "in the evening"; quizzed through a pop-up; pings
/// to "make stop"; taken "out of the memory"; a file taken out of one
/// folder to go elsewhere; unhooked and untied; a line between two;
/// pets counted to store; "User reports" (nobody reporting to anyone); a
/// check for prior mentions; a file replaced entirely; a line that
/// "should become" another; whether someone ever mentioned a word; and
/// words of Swedish, Czech, Korean, Polish, Hindi and Chinese. Each
/// ranked the wanted tool below first by words, or not at all, on round
/// 64's ranker.
#[test]
fn a_box_for_a_folder_a_reported_need_and_a_line_between_two_rank_the_tool_asked_for_first() {
    let Some(python) = python() else { return };
    let cases = [
        ("what's in the box where I keep my recipes", "filesystem__list_directory"),
        ("I put it in the wrong box, shift it over to Pictures", "filesystem__move_file"),
        ("how are things laid out under Music, boxes inside boxes", "filesystem__directory_tree"),
        ("if it's 7 in the evening in Rome, what time is it in Chicago", "time__convert_time"),
        ("quiz me with a pop-up for my address", "everything__trigger_elicitation_request"),
        ("those update pings keep coming, make them stop", "everything__toggle_subscriber_updates"),
        ("Tibbles died, take him out of the memory", "memory__delete_entities"),
        ("take scan.pdf out of Downloads and put it with my receipts", "filesystem__move_file"),
        ("unhook Dr. Okafor from me but keep her in there", "memory__delete_relations"),
        ("cut the 'owns' line between me and Rover", "memory__delete_relations"),
        ("add my two dogs to the memory, Rex and Fido", "memory__create_entities"),
        ("User reports the sync fails; check memory for prior mentions of it", "memory__search_nodes"),
        ("User reports config.yaml is broken; replace it entirely with the version below", "filesystem__write_file"),
        ("in app.ini the line 'debug=true' should become 'debug=false'", "filesystem__edit_file"),
        ("check whether I ever mentioned 'Krakow'", "memory__search_nodes"),
        ("stäng av låtsas-loggmeddelandena", "everything__toggle_simulated_logging"),
        ("uložte do paměti novou osobu: soused Karel", "memory__create_entities"),
        ("'사진'이라는 새 폴더를 만들어 주세요", "filesystem__create_directory"),
        ("Anna rapporterar till Erik, båda finns redan i minnet, koppla ihop dem", "memory__create_relations"),
        ("Klient chce, aby asistent úplně zapomněl na 'Projekt X' včetně vazeb", "memory__delete_entities"),
        ("sprawdź, czy kiedykolwiek wspominał o 'Kraków'", "memory__search_nodes"),
        ("मुझे सभी .md फ़ाइलें ढूँढनी हैं", "filesystem__search_files"),
        ("显示 docs 目录的树状结构", "filesystem__directory_tree"),
    ];
    each_first(&python, &cases.map(|(query, want)| asked_in(query, want, REAL_TOOLS)));
}

/// Round 65 reads a "box" as a folder only where people new to computers
/// mean one: a box of something, a box one types into and a company named
/// Box stay what they are, and a request to keep someone in memory that
/// mentions one is still about that someone.
#[test]
fn a_box_of_something_a_search_box_and_a_company_named_box_are_no_folders() {
    let Some(python) = python() else { return };
    let cases = [
        ("remember my new neighbour Ana, she gave us a box of apples", "memory__create_entities"),
        ("remember that Alice gave me a box of chocolates", "memory__add_observations"),
        ("we have a new customer: Box, the cloud storage company", "memory__create_entities"),
        ("what's in .env on the app box? /srv/app/.env", "filesystem__read_text_file"),
    ];
    each_first(&python, &cases.map(|(query, want)| asked_in(query, want, REAL_TOOLS)));
}

/// Round 66 (sets 100 to 103: records staff, programmers naming what they
/// know from a shell or another language, offices writing in the passive,
/// school-age users) reads a request written in the passive ("it is
/// requested that ... be struck", "the undersigned wishes to have
/// recorded ..."), a command in backquotes ("`cat notes.txt`",
/// "`Get-ChildItem Env:`"), one quoted file name, a title or an initial
/// before a name ("Mrs. Ng", "K. Osei"), a name with accents ("Zoë"),
/// what is not wanted said after it ("sizes not needed"), and members or a
/// pet listed to keep. Each case, written for this test, ranked the wanted
/// tool below first by words on round 65's ranker.
#[test]
fn passive_requests_commands_in_backquotes_and_names_with_titles_rank_the_tool_asked_for_first() {
    let Some(python) = python() else { return };
    let cases = [
        ("It is requested that 17 and 26 be added together for the invoice", "everything__get_sum"),
        (
            "We request that the memo 'awaiting signature' be struck from Carla's record, the record itself to be kept",
            "memory__delete_observations",
        ),
        (
            "The undersigned wishes to have struck the recorded association between Hollis Ltd and the tenant",
            "memory__delete_relations",
        ),
        ("please tell me what is inside /srv/share, names only; sizes not needed", "filesystem__list_directory"),
        (
            "show me a slow task that takes some time, I want to watch the progress",
            "everything__trigger_long_running_operation",
        ),
        (
            "retrieve the records titled exactly 'Iris Holt' and 'Lot 14', for attachment to the file",
            "memory__open_nodes",
        ),
        ("please open the scan 'facade.jpeg' as a picture", "filesystem__read_media_file"),
        ("basically `cat notes.txt`", "filesystem__read_text_file"),
        ("the same as `expr 3 + 4`", "everything__get_sum"),
        ("like PowerShell `Get-ChildItem Env:` on the test server", "everything__get_env"),
        ("refile minutes.docx under board/2026/", "filesystem__move_file"),
        ("update Mrs. Ng with 'prefers email'", "memory__add_observations"),
        ("save that Zoë is Théo's sister in the graph", "memory__create_relations"),
        ("add new band members Kai and Rue", "memory__create_entities"),
        ("remember our choir members: Ada, Bea and Cy, all singers", "memory__create_entities"),
        ("add to what you know about Imre: he cycles to work and speaks Finnish", "memory__add_observations"),
        ("remember my cat: name Pixel, a tabby, 2 years old", "memory__create_entities"),
        ("update the Harbor Project record with one more detail: budget approved", "memory__add_observations"),
        ("withdraw two remarks on Pablo's entry, without otherwise altering the entry", "memory__delete_observations"),
        (
            "It is requested that it be recorded that Adjuster K. Osei handles the Lot 14 claim",
            "memory__create_relations",
        ),
        ("a hierarchical map of the matter folder including sub-subfolders", "filesystem__directory_tree"),
        ("the undersigned needs a message returned exactly as submitted, nothing more", "everything__echo"),
        ("weed the 'Old Catalog' node out completely", "memory__delete_entities"),
        ("like a Redis SET: remember that Bruno is a person who leads the bakery team", "memory__create_entities"),
        ("remove only the observation 'works Sundays' from Lee", "memory__delete_observations"),
        (
            "the undersigned knows the names of both entries and asks that exactly those be produced",
            "memory__open_nodes",
        ),
    ];
    each_first(&python, &cases.map(|(query, want)| asked_in(query, want, REAL_TOOLS)));
}

/// Round 66's words of other languages (Polish, Turkish, Russian,
/// Portuguese, French, Hindi in Latin letters): each case ranked the
/// wanted tool below first by words on round 65's ranker.
#[test]
fn words_of_other_languages_read_in_round_66_rank_the_tool_asked_for_first() {
    let Some(python) = python() else { return };
    let cases = [
        ("pokaż drzewo katalogów rekurencyjnie dla src", "filesystem__directory_tree"),
        ("rapor.txt dosyasını özet.txt olarak yeniden adlandırın", "filesystem__move_file"),
        ("Исправь строку «v1» на «v2» в файле conf.txt", "filesystem__edit_file"),
        ("faça uma pesquisa aprofundada simulada sobre energia solar", "everything__simulate_research_query"),
        ("enregistre que Mme Roux est la supérieure hiérarchique de Paul", "memory__create_relations"),
        ("memory me Aman pehle se hai, usme nayi baat jodo: chai pasand hai", "memory__add_observations"),
        ("podaj datę utworzenia pliku faktura.pdf", "filesystem__get_file_info"),
    ];
    each_first(&python, &cases.map(|(query, want)| asked_in(query, want, REAL_TOOLS)));
}

/// What round 66's readings must leave alone: "returned as typed JSON" is
/// no echo, a relayed request's quoted words still name a relation, an
/// English "date" is no Polish word (which once read "modified" as "edit"),
/// a parenthesis that corrects itself is no list of what is unwanted, and
/// two quoted file names are a rename's two values; and what round 67's
/// must (below). Each ranks first on the ranker before its round and on
/// this one.
#[test]
fn typed_json_a_relayed_relation_a_modified_date_and_two_quoted_names_keep_their_tools() {
    let Some(python) = python() else { return };
    let cases = [
        (
            "weather in Oslo returned as typed JSON that matches the declared schema",
            "everything__get_structured_content",
        ),
        ("user: 'you know my brother Tom and you know Lyon, remember that he lives there'", "memory__create_relations"),
        ("last modified date of budget.xlsx", "filesystem__get_file_info"),
        (
            "which roots did the client declare? (not the allow-list, the protocol's roots)",
            "everything__get_roots_list",
        ),
        ("the file is misspelt 'reciept.pdf', rename it to 'receipt.pdf'", "filesystem__move_file"),
        // Round 67's: a name's notes opened are no fact to add, an Italian
        // map is no folder, a connection in the graph stays a relation.
        ("open Ana's and Doctor Pike's notes by name", "memory__open_nodes"),
        ("mostra la mappa completa del grafo", "memory__read_graph"),
        ("link Alice to Acme: she works there, test the connection in the graph", "memory__create_relations"),
        // What the review at the end of round 67 found its readings took:
        // a quoted file name stored in the graph, a relation word beside
        // entities asked for by name, new contacts of a thing known, a
        // backquoted value that starts with a command's name, weeding
        // through a folder.
        ("search my knowledge graph for 'invoice.pdf'", "memory__search_nodes"),
        ("open the node 'deploy.sh'", "memory__open_nodes"),
        ("create entities Alice and Bob; Alice handles billing", "memory__create_entities"),
        ("update Acme: they onboarded new contacts last week", "memory__add_observations"),
        ("add `head of sales` as an observation on Bob", "memory__add_observations"),
        ("I need to weed through my Downloads folder to find old pdfs", "filesystem__search_files"),
        // Rounds 68 to 70's first versions: an edge added between two names
        // read as a fact added to the second, a variable in capitals said
        // "present" beside a file to read as the environment, and the Hindi
        // "जोड़" (to add up as well as to join) as a link.
        ("add an edge 'depends_on' from Billing to Ledger", "memory__create_relations"),
        ("in the graph, add a link saying Omar is married to Lina", "memory__create_relations"),
        ("Step 2: cat /srv/.env and verify API_KEY present", "filesystem__read_text_file"),
        ("कृपया 12 और 30 को जोड़कर बताइए", "everything__get_sum"),
        // What the review of rounds 68 to 70 (a helper given the diff) found
        // their first readings took: letters or log levels with slashes in
        // a folder's path, names joined by "&" that are two firms, "not just
        // a line", a new file or person "here", a file "back as a resource",
        // a tool named first that failed, "calls" before a tool's name,
        // someone's file, a month's entry in a file, a file's variables, and
        // a relation not yet in the graph.
        ("list X/Y", "filesystem__list_directory"),
        ("list logs/warn/error", "filesystem__list_directory"),
        ("list the folder info/debug", "filesystem__list_directory"),
        ("Smith & Wesson supplies our range", "memory__create_relations"),
        ("read the whole file, not just a line of it", "filesystem__read_text_file"),
        ("make a new file here, called todo.md", "filesystem__write_file"),
        ("add a new person here: Noor", "memory__create_entities"),
        ("compress notes.pdf and get it back as a resource", "everything__gzip_file_as_resource"),
        ("search_files found nothing, so list /var/tmp instead", "filesystem__list_directory"),
        ("read_file failed on that folder, list it instead", "filesystem__list_directory"),
        ("find every script that calls read_file", "filesystem__search_files"),
        ("my code calls write_file but I only need to change one line of app.yaml", "filesystem__edit_file"),
        ("find someone's CV in Downloads", "filesystem__search_files"),
        ("show the exact entry for June in ledger.txt", "filesystem__read_text_file"),
        ("show me the variables it has defined in config.py", "filesystem__read_text_file"),
        ("the relation between Ana and Ben is not in there yet, add it", "memory__create_relations"),
        // And the last read of the change found "anyone with" and "someone
        // called" taken as a search of the graph when they are no such thing.
        ("list the files anyone with the link can open in /srv/public", "filesystem__list_directory"),
        ("which folders can anyone with this server reach?", "filesystem__list_allowed_directories"),
        ("someone called me about the boiler, note that", "memory__add_observations"),
    ];
    each_first(&python, &cases.map(|(query, want)| asked_in(query, want, REAL_TOOLS)));
}

/// Round 67 (sets 104 to 107: farmers and gardeners, journalists,
/// musicians and podcasters, hobbyist makers) reads how two things are
/// linked by a verb that needs both ("came from Nursery 4", "introduced me
/// to", "is wired to", "powers the"), a thing removed "and all its links"
/// though no name is given, notes on someone asked after, a folder a tool
/// is "fenced into", a file "listing" what it holds, a name that "has" a
/// word, "in Downloads", text and blob mixed, a file "in the project
/// folder". Each case, written for this test, ranked the wanted tool below
/// first by words, or not at all, on round 66's ranker.
#[test]
fn a_link_said_by_its_verb_notes_on_someone_and_a_folder_fenced_in_rank_the_tool_asked_for_first() {
    let Some(python) = python() else { return };
    let cases = [
        ("record that the lemon tree came from Nursery 4", "memory__create_relations"),
        ("note that Ines introduced me to the editor", "memory__create_relations"),
        ("note the relationship: pump 2 is wired to relay C", "memory__create_relations"),
        ("record that the inverter powers the garage lights", "memory__create_relations"),
        ("we sold the old tractor, remove it and all its links from memory completely", "memory__delete_entities"),
        ("update Ravi's notes: prefers calls after 5pm", "memory__add_observations"),
        ("which top-level folders is this tool fenced into?", "filesystem__list_allowed_directories"),
        ("hunt down every CSV whose name has 'invoice' in it", "filesystem__search_files"),
        ("what's sitting in Downloads now, names only", "filesystem__list_directory"),
        ("some links to the sample resources, text and blob mixed", "everything__get_resource_links"),
        ("can you make a .gz of the error log at this URL so I can post it", "everything__gzip_file_as_resource"),
        ("have I got notes on someone from the bakery already?", "memory__search_nodes"),
        ("cat config.env in the project folder, what's actually written in it?", "filesystem__read_text_file"),
    ];
    each_first(&python, &cases.map(|(query, want)| asked_in(query, want, REAL_TOOLS)));
}

/// Round 67's words of other languages (Polish, Hindi, Russian, Japanese,
/// Turkish, German, Chinese; a Japanese file name in corner brackets): each
/// case ranked the wanted tool below first by words, or not at all, on
/// round 66's ranker.
#[test]
fn words_of_other_languages_read_in_round_67_rank_the_tool_asked_for_first() {
    let Some(python) = python() else { return };
    let cases = [
        ("Do jakich katalogów masz dostęp?", "filesystem__list_allowed_directories"),
        ("आप किन फ़ोल्डरों तक पहुँच सकते हो?", "filesystem__list_allowed_directories"),
        ("добавь к записи об Иване ещё один факт: любит чай", "memory__add_observations"),
        ("12と30を足すといくつ？", "everything__get_sum"),
        ("'Ada' ve 'Bo' adlı düğümleri göster", "memory__open_nodes"),
        (
            "Kannst du den Satz 'hallo' unverändert zurückgeben? Ich will testen, ob die Verbindung steht.",
            "everything__echo",
        ),
        ("记录一下：王老师把我介绍给了李医生", "memory__create_relations"),
        ("写真「dog.jpg」を画像として見せて", "filesystem__read_media_file"),
    ];
    each_first(&python, &cases.map(|(query, want)| asked_in(query, want, REAL_TOOLS)));
}

/// Round 68 (sets 108 to 111): a link said by a verb of renting, managing or
/// superseding between names, flat numbers ("4B", "block D") or names as code
/// names them ("api_v2"); a role said with a hyphen ("the stand-in of"); a firm
/// whose name holds "&"; a record named in several words ("the existing Blue
/// Fern entry"); a thing removed with "every link attached to it" or wholly,
/// "not only a fact about her"; a tenancy's "move-out"; a total of two counts
/// and a line of sums ending "= ?"; the variables a running process has;
/// "names are fine"; someone "with" a word "in their notes"; the server that
/// should "request information from me"; a paper filed into a folder; "which
/// ones are allowed" after an access error; a tool named first and its sibling
/// set aside ("read_file (not read_text_file)"); a form "not a web page"; a
/// markup tag's ">" that is no redirection. Each case, written for this test,
/// ranked the wanted tool below first by words, or not at all, on round 67's
/// ranker after its review.
#[test]
fn a_link_by_renting_or_superseding_a_line_of_sums_and_a_tool_named_first_rank_the_tool_asked_for_first() {
    let Some(python) = python() else { return };
    let cases = [
        ("note that Omar leases 7C", "memory__create_relations"),
        ("remember that Rosa is the stand-in of Marc", "memory__create_relations"),
        ("log that api_v2 supersedes api_v1", "memory__create_relations"),
        ("Baker & Daughters is already stored, just tack on 'pays late'", "memory__add_observations"),
        ("append a line to the existing Blue Fern entry: pickup moved to 4pm", "memory__add_observations"),
        ("erase 'Oak Lodge' and every link attached to it", "memory__delete_entities"),
        ("wipe the whole entry for Greta from the graph, not only a fact about her", "memory__delete_entities"),
        ("read all the move-out checklists for flats 5A to 5C in one go", "filesystem__read_multiple_files"),
        ("quick count for the seating: 112 adults + 37 kids = ?", "everything__get_sum"),
        ("list the variables the running process has", "everything__get_env"),
        ("which files sit in /srv/photos? names are fine", "filesystem__list_directory"),
        ("anybody in the graph with 'allergic' in their notes?", "memory__search_nodes"),
        (
            "get the server to request information from me halfway through, e.g. my budget",
            "everything__trigger_elicitation_request",
        ),
        ("file the lease scan into the tenants folder", "filesystem__move_file"),
        ("it keeps saying 'outside allowed dirs' — which ones are allowed?", "filesystem__list_allowed_directories"),
        ("read_file (not read_text_file) for /srv/a.log", "filesystem__read_file"),
        ("ask me for input in a form here, not a web page", "everything__trigger_elicitation_request"),
        ("open fr/app.xliff as plain text, I need to check the <source> elements", "filesystem__read_text_file"),
    ];
    each_first(&python, &cases.map(|(query, want)| asked_in(query, want, REAL_TOOLS)));
}

/// Round 68's words of other languages (German, Chinese, Hindi, Turkish: a
/// name changed said verb-last, "adını ... olarak değiştir"): each case ranked
/// the wanted tool below first by words, or not at all, on round 67's ranker
/// after its review.
#[test]
fn words_of_other_languages_read_in_round_68_rank_the_tool_asked_for_first() {
    let Some(python) = python() else { return };
    let cases = [
        ("Halte fest, dass die Weber AG eine Tochterfirma der Weber Gruppe ist", "memory__create_relations"),
        ("帮我模拟一次市场调研", "everything__simulate_research_query"),
        ("找出所有的 .csv 文件", "filesystem__search_files"),
        ("budget.xlsx फ़ाइल कब बनाई गई और साइज़ क्या है?", "filesystem__get_file_info"),
        ("eski.txt dosyasının adını yeni.txt olarak değiştir", "filesystem__move_file"),
        ("starte eine simulierte Tiefenrecherche über Bienen", "everything__simulate_research_query"),
    ];
    each_first(&python, &cases.map(|(query, want)| asked_in(query, want, REAL_TOOLS)));
}

/// Round 69 (sets 112 to 115): someone asked after "called" a name or found
/// by what they were noted as; a new thing "not in the graph yet" or of which
/// "neither is in there yet"; "the full picture"; a folder of scans (no
/// search); a thing wholly removed, "not just one fact"; every file of one
/// extension; a variable named as code names it, asked whether it is set;
/// who is "on file"; a text sent back "so I know the connection works"; a
/// coach who trains a squad and a farm that supplies a kitchen (a link, the
/// second thing no name); a newcomer saying who they are ("new treasurer
/// here"). Each case, written for this test, ranked the wanted tool below
/// first by words, or not at all, on round 67's ranker after its review.
#[test]
fn someone_asked_after_by_name_a_newcomer_a_variable_set_and_a_supplier_of_ours_rank_the_tool_asked_for_first() {
    let Some(python) = python() else { return };
    let cases = [
        ("on the memory, have I saved anybody called Okafor?", "memory__search_nodes"),
        (
            "found a cousin nobody knew about: Ida Berg, born 1902. She's not in the graph yet, add her",
            "memory__create_entities",
        ),
        ("what do you remember overall? give me the full picture, not a search result", "memory__read_graph"),
        ("what's inside our scans folder?", "filesystem__list_directory"),
        ("delete the whole node for Otto Lind, the man himself, not just one fact", "memory__delete_entities"),
        ("is DB_HOST even set for the server process? show what it loaded from .env", "everything__get_env"),
        ("who do we have on file who likes jazz?", "memory__search_nodes"),
        ("send back exactly 'rehearsal at 7' so I know the connection works", "everything__echo"),
        ("record that Coach Ivo trains the junior squad", "memory__create_relations"),
        ("record that Fattoria Verde supplies our kitchen", "memory__create_relations"),
        (
            "create entries for our partner clubs, Rovers Oslo and Lions Kyiv. neither is in there yet",
            "memory__create_entities",
        ),
        ("new treasurer here. can I see the complete memory graph?", "memory__read_graph"),
    ];
    each_first(&python, &cases.map(|(query, want)| asked_in(query, want, REAL_TOOLS)));
}

/// Round 69's words of other languages (Czech, French, Polish, Hindi,
/// Russian, Chinese): each case ranked the wanted tool below first by words,
/// or not at all, on round 67's ranker after its review.
#[test]
fn words_of_other_languages_read_in_round_69_rank_the_tool_asked_for_first() {
    let Some(python) = python() else { return };
    let cases = [
        ("Ke kterým složkám mám přístup?", "filesystem__list_allowed_directories"),
        ("Najdi všechny soubory s příponou .txt v podsložkách", "filesystem__search_files"),
        ("Désactive les journaux simulés", "everything__toggle_simulated_logging"),
        ("Pokaż dane pogodowe w formie ustrukturyzowanej", "everything__get_structured_content"),
        ("अमित को रीना से 'भाई' संबंध के रूप में जोड़ो", "memory__create_relations"),
        ("Пусть сервер попросит модель клиента сгенерировать стихотворение", "everything__trigger_sampling_request"),
        ("模拟一个耗时的操作，分3步", "everything__trigger_long_running_operation"),
        ("Qu'y a-t-il dans le dossier photos ?", "filesystem__list_directory"),
        ("Zapisz powiązanie: Ewa koordynuje kuchnię. Obie pozycje już tam są.", "memory__create_relations"),
        (
            "Supprime seulement la remarque « vegan » de la fiche de Paul, le reste doit rester",
            "memory__delete_observations",
        ),
    ];
    each_first(&python, &cases.map(|(query, want)| asked_in(query, want, REAL_TOOLS)));
}

/// Round 70 (sets 116 to 119): a fact added to a record named with a vessel's
/// letters ("the M/V Aurora entry") or as tickets name things ("PUMP-7:"), to
/// "guest Ines Moreau", or to "an entry we already have"; a date written with
/// slashes ("03/11") that is no path; a new collaborator and three new hires
/// with their roles; the same text "returned"; what a shift "wrote" (to read);
/// a file put into one folder and taken out of another. Each case, written for this test, ranked the wanted tool
/// below first by words, or not at all, on round 67's ranker after its review.
#[test]
fn a_fact_on_a_vessel_or_a_ticket_new_hires_and_a_file_put_in_another_folder_rank_the_tool_asked_for_first() {
    let Some(python) = python() else { return };
    let cases = [
        ("add a note to the M/V Aurora entry: hull repainted 2026-10", "memory__add_observations"),
        ("append to PUMP-7: seal swapped 03/11, next check March", "memory__add_observations"),
        ("append 'prefers the window table' to guest Ines Moreau", "memory__add_observations"),
        ("we already have an entry for the lathe; attach 'belt replaced' to it", "memory__add_observations"),
        (
            "start tracking a new collaborator: Prof. Lena Ortiz, works at the Max Planck Institute",
            "memory__create_entities",
        ),
        ("create entries for three new hires: Ana (bar), Kofi (kitchen), Li (front desk)", "memory__create_entities"),
        ("send 'testing 123' and get that exact same text returned", "everything__echo"),
        ("open /srv/log/handover.md and show me what the day shift wrote", "filesystem__read_text_file"),
        ("put the Rossi invoice pdf into the paid folder and take it out of inbox", "filesystem__move_file"),
    ];
    each_first(&python, &cases.map(|(query, want)| asked_in(query, want, REAL_TOOLS)));
}

/// Round 70's words of other languages (Dutch, Polish, Japanese, Greek): each
/// case ranked the wanted tool below first by words, or not at all, on round
/// 67's ranker after its review.
#[test]
fn words_of_other_languages_read_in_round_70_rank_the_tool_asked_for_first() {
    let Some(python) = python() else { return };
    let cases = [
        ("Hoe laat is het nu in Sydney?", "time__get_current_time"),
        ("Zwróć kilka linków do zasobów", "everything__get_resource_links"),
        ("memo.txt の 'draft' の行だけを 'final' に書き換えて", "filesystem__edit_file"),
        ("Αφαίρεσε τη σύνδεση ανάμεσα στον Νίκο και την Άννα", "memory__delete_relations"),
        ("map Foto's - alleen namen", "filesystem__list_directory"),
    ];
    each_first(&python, &cases.map(|(query, want)| asked_in(query, want, REAL_TOOLS)));
}

/// Round 71: a link told by a verb that needs two things (treats, drives,
/// couriers, ships from, twinned with); a reference asked for with "not a
/// whole list of links" (the negation reaches what a list is of); a folder
/// named by a word before "folder" that is also a word of a tool ("the
/// matches folder", "the permits directory"); a fact appended to someone
/// named after their role ("tenant Joe Park"); a zone said of someone ("Rui
/// being in CET"), no time asked for. Each case, written for this test,
/// ranked the wanted tool below first by words on round 70's ranker.
#[test]
fn a_link_by_what_one_does_to_another_a_folder_named_like_a_tool_and_a_zone_someone_is_in_rank_the_tool_asked_for_first()
 {
    let Some(python) = python() else { return };
    let cases = [
        ("record that Dr. Okafor treats Biscuit", "memory__create_relations"),
        ("remember that Lopes Freight ships from the Porto depot", "memory__create_relations"),
        ("note that Marta drives van V-12", "memory__create_relations"),
        ("our village is twinned with Bad Toelz, keep that in memory", "memory__create_relations"),
        ("record that Kim couriers the Hamburg samples", "memory__create_relations"),
        ("a reference to resource 9, not a whole list of links", "everything__get_resource_reference"),
        ("what's in the matches folder?", "filesystem__list_directory"),
        ("ls the permits directory", "filesystem__list_directory"),
        ("append a line to tenant Joe Park: pays on the 5th", "memory__add_observations"),
        ("what did I record about Rui being in CET?", "memory__search_nodes"),
    ];
    each_first(&python, &cases.map(|(query, want)| asked_in(query, want, REAL_TOOLS)));
}

/// What round 71's readings must leave alone, each passing on round 70's
/// ranker and now: a folder named before "folder" that a verb acts on (made,
/// moved into, searched, drawn as a tree); a zone with a time asked for
/// ("Ana is in PST, what time is it for her"); an echo handed back; links
/// asked for with "not just one reference"; a line appended to a file; a
/// place someone drives to, a fact on their entry; a name that a word of
/// another language, its accents left out, would spell ("Ted", the Czech
/// "teď" without its háček: a first version read it as "now"); and what
/// the review of round 71 found first versions misread: an echo "taken and
/// handed back", a zone with a state asked ("is it lunchtime"), a zone
/// after another capitalised word ("works in HR ... in CET"), a member
/// added "to team Phoenix", a tool's name that "treats the config folder",
/// and a negation of something before "the list of".
#[test]
fn a_folder_acted_on_a_time_asked_in_someones_zone_and_an_echo_handed_back_keep_their_tools() {
    let Some(python) = python() else { return };
    let cases = [
        ("create the reports folder", "filesystem__create_directory"),
        ("move a.txt into the archive folder", "filesystem__move_file"),
        ("search the logs folder for errors", "filesystem__search_files"),
        ("full tree of the src folder", "filesystem__directory_tree"),
        ("Ana is in PST, what time is it for her", "time__get_current_time"),
        ("what time is it in CET now", "time__get_current_time"),
        ("echo 'hi there' and hand it back to me", "everything__echo"),
        ("give me several resource links, not just one reference", "everything__get_resource_links"),
        ("append a line to notes.txt: call Dana", "filesystem__edit_file"),
        ("Marta drives to Porto on Fridays, add that to her entry", "memory__add_observations"),
        ("who is Ted", "memory__search_nodes"),
        ("open the node for Ted", "memory__open_nodes"),
        ("Take this and hand it back to me: hello world", "everything__echo"),
        ("My boss is in EST, is it lunchtime for him?", "time__get_current_time"),
        ("Ana works in HR; is it evening in CET yet?", "time__get_current_time"),
        ("Add a relation from Sam to company Acme", "memory__create_relations"),
        ("Add employee Sam to team Phoenix", "memory__create_relations"),
        ("Python treats the config folder as a package, list it", "filesystem__list_directory"),
        ("no tree just the list of allowed directories", "filesystem__list_allowed_directories"),
    ];
    each_first(&python, &cases.map(|(query, want)| asked_in(query, want, REAL_TOOLS)));
}

/// Round 71's words of other languages (Czech, Swedish, French, Hindi,
/// Japanese): each case ranked the wanted tool below first by words, or not
/// at all, on round 70's ranker.
#[test]
fn words_of_other_languages_read_in_round_71_rank_the_tool_asked_for_first() {
    let Some(python) = python() else { return };
    let cases = [
        ("Kolik je teď hodin v Tokiu?", "time__get_current_time"),
        ("Visa strukturerat innehåll med utdataschema", "everything__get_structured_content"),
        ("Lis en une seule fois les trois rapports", "filesystem__read_multiple_files"),
        ("प्रगति दिखाने वाला लंबा ऑपरेशन चलाओ", "everything__trigger_long_running_operation"),
        ("「Widget」の観察を一つ削除して", "memory__delete_observations"),
        ("記憶から「Acme」を完全に消して", "memory__delete_entities"),
        ("許可されているディレクトリを見せて", "filesystem__list_allowed_directories"),
    ];
    each_first(&python, &cases.map(|(query, want)| asked_in(query, want, REAL_TOOLS)));
}

/// A query is data a cell controls: no length or shape of it makes the
/// search fail. A word of 10,000 letters gluing one table word to itself
/// ("dateidatei…") once ran round 60's compound reading into Python's
/// recursion limit (a `RecursionError` in the cell); so the reading takes
/// two parts of a word of at most 40 letters. Long runs of round 62's
/// forms (names with a kind, a file name said aloud) are answered too, and
/// a compound of two beside them still reads.
#[test]
fn a_query_of_one_table_word_repeated_thousands_of_times_is_answered_without_error() {
    let Some(python) = python() else { return };
    let tools = cell_tools(&catalog_of(REAL_TOOLS));
    let long = [
        "datei".repeat(2000),
        "dateis".repeat(1500),
        "a".repeat(8000),
        "Alice (person), ".repeat(500),
        "readme dot ".repeat(700),
        "dateiordner".repeat(20),
        "ordnerinhalt anzeigen".to_string(),
    ];
    let queries: Vec<&str> = long.iter().map(String::as_str).collect();
    let found = rank(&python, &tools, &queries, 5);
    assert_eq!(found.len(), queries.len(), "one answer per query");
    assert_eq!(found[6].first().map(String::as_str), Some("filesystem__list_directory"), "{:?}", found[6]);
}

/// Python's case-blind matching takes "ı" (dotless i), "ſ" (long s) and
/// "K" (the Kelvin sign) for "i", "s" and "k", but `lower()` keeps them:
/// a table looked up by a match's lower case once raised on them (a
/// `KeyError` in the cell for "log ın", found by the review at the end of
/// round 67 with 129 of 6,000 such variants of the sets' questions; a
/// `ValueError` for "fıve pm"). Each is answered, and read as its letters
/// say where the table has it. Greek and Cyrillic have such letters too
/// ("ς" final sigma for "σ", "ϕ" for "φ", "µ" micro for "μ", "ᲃ" and "ᲂ"
/// for "с" and "о"): the table of other scripts, looked up by lower case,
/// raised `KeyError` on 669 of 810 variants of the sets' Greek and Russian
/// questions on round 67's ranker after its review (found by the review of
/// rounds 68 to 70); it now reads them by case folding.
#[test]
fn letters_that_case_blind_matching_folds_but_lower_case_keeps_are_answered_without_error() {
    let Some(python) = python() else { return };
    let tools = cell_tools(&catalog_of(REAL_TOOLS));
    let queries = [
        "log ın to the server",
        "print out the entitieſ and relationſ you have in memory",
        "Get-ChıldItem Env:",
        "ſet-Content notes.txt hello",
        "ſelect name from users where id = 1",
        "convert fıve pm to utc",
        "weed the 'Old' node out compKetely",
        "Get-ChildItem Env: on the test server",
        "πρόςθεςε παρατήρηςη ςτον Νίκο: αγαπά τον καφέ",
        "αϕαίρεσε τη σύνδεση ανάμεσα στον Νίκο και την Άννα",
        "ᲃгенерируй стихи через мᲂдель клиента",
    ];
    let found = rank(&python, &tools, &queries, 5);
    assert_eq!(found.len(), queries.len(), "one answer per query");
    assert_eq!(found[7].first().map(String::as_str), Some("everything__get_env"), "{:?}", found[7]);
    assert_eq!(found[8].first().map(String::as_str), Some("memory__add_observations"), "{:?}", found[8]);
    assert_eq!(found[9].first().map(String::as_str), Some("memory__delete_relations"), "{:?}", found[9]);
    assert_eq!(found[10].first().map(String::as_str), Some("everything__trigger_sampling_request"), "{:?}", found[10]);
}

/// A question about one named file asks for its metadata ("how big is
/// notes.txt"), unless it asks what the file holds ("what's inside
/// notes.txt"); and a query naming a file and no folder weighs down the
/// tools that work on a directory. Both decide close calls that the
/// sentence encoder settled the wrong way before round 18.
#[test]
fn a_question_about_what_one_file_holds_asks_for_its_text_and_one_about_its_size_for_its_metadata_not_a_directory() {
    let Some(python) = python() else { return };
    let seen = words(&python, &["whats inside config.json", "how big is config.json"]);
    let asks_metadata = |i: usize| {
        seen[i]["query"].as_array().unwrap().iter().any(|g| g[1].as_array().unwrap().contains(&"metadata".into()))
    };
    assert!(!asks_metadata(0), "what a file holds is no metadata: {}", seen[0]["query"]);
    assert!(asks_metadata(1), "a file's size is its metadata: {}", seen[1]["query"]);
    let Some(encoder) = encoder() else { return };
    let tools = cell_tools(&catalog_of(REAL_TOOLS));
    let cases = [
        ("whats inside config.json", "filesystem__read_text_file"),
        ("how big is video.mp4? don't read it", "filesystem__get_file_info"),
    ];
    let texts: Vec<&str> = cases.iter().map(|(query, _)| *query).collect();
    // Round 17's words left both open; the encoder then put the wanted
    // tool second.
    let (found, _) = rank_with_meaning(&python, &tools, &texts, &nearness(&encoder, &tools, &texts), 3);
    for ((query, want), names) in cases.iter().zip(&found) {
        assert_eq!(names.first().map(String::as_str), Some(*want), "{query:?}: {names:?}");
    }
}

/// A table written as a Python dict keeps only the last of two entries with
/// one key, silently: round 18 wrote three phrases a second time, and their
/// first meanings were dead until this test found them. So for a word of
/// another language on two lines of `search_languages.py` (round 24; its
/// table of other scripts since round 36).
#[test]
fn no_table_of_the_search_gives_one_key_twice() {
    let Some(python) = python() else { return };
    for file in ["search_tables.py", "search_languages.py", "search_words.py"] {
        no_key_twice_in(&python, &runner_py().with_file_name(file));
    }
}

fn no_key_twice_in(python: &str, tables: &std::path::Path) {
    let check = r#"
import ast, sys
tree = ast.parse(open(sys.argv[1]).read())
twice = []
for node in ast.walk(tree):
    if isinstance(node, ast.Dict):
        seen = set()
        for key in node.keys:
            if isinstance(key, ast.Constant):
                value = key.value
                if value in seen:
                    twice.append(repr(value) + " at line " + str(key.lineno))
                seen.add(value)
    # Words of other languages, a line per English word: a word on two
    # lines would read as the first only.
    for table in ("FOREIGN_WORDS", "SCRIPT_WORDS"):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == table for t in node.targets):
            seen = set()
            for line in node.value.value.strip().splitlines():
                for word in line.split(":", 1)[1].split():
                    word = word.rstrip("*")
                    if word in seen:
                        twice.append(repr(word) + " in " + table)
                    seen.add(word)
print("\n".join(twice))
"#;
    let out = std::process::Command::new(python).arg("-c").arg(check).arg(tables).output().expect("python3 runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let twice = String::from_utf8_lossy(&out.stdout);
    assert!(twice.trim().is_empty(), "keys given twice in {}:\n{twice}", tables.display());
}

/// Whatever a model writes, `search_tools` answers: thousands of queries
/// made of the fragments its readings look for (SQL, Cypher, paths, file
/// names, log levels, shorthand, words of other languages) in any order,
/// and of any printable characters, each get a list (`rank.py` fails if
/// one raised).
#[test]
fn search_tools_answers_every_query_made_of_the_fragments_it_reads_in_any_order_without_raising() {
    let Some(python) = python() else { return };
    let fragments = [
        "SELECT",
        "select",
        "*",
        "called",
        "named",
        "现在几点",
        "晚上8点",
        "Когда",
        "размер",
        "कितने बजे",
        "ファイル",
        "« bonjour »",
        "“hi”",
        "「x」",
        "audience/priority",
        "un-remember",
        "createMessage",
        "anymore",
        "should go",
        "18 Uhr",
        "verwijder",
        "ta bort",
        "Przeprowadź",
        "get the same thing returned",
        "18h30",
        "知識グラフ",
        "returns it unchanged",
        "just this level",
        "the full card for 'X'",
        "{name: 'x', observations: []}",
        "{",
        "}",
        "\u{1}",
        "somewhere",
        "related to",
        "sandbox roots",
        "image content",
        "that connection",
        "FROM",
        "WHERE",
        "name",
        "=",
        "IN",
        "(",
        ")",
        ";",
        "INSERT INTO",
        "VALUES",
        "UPDATE",
        "SET",
        "DELETE FROM",
        "CREATE TABLE",
        "MATCH",
        "RETURN",
        "-[",
        "]->",
        "(a)",
        "debug/info/error",
        "001.sql",
        ".wav",
        "kg:",
        "del",
        "obs",
        "both",
        "already",
        "exist",
        "the Acme node",
        "'x'",
        "1024",
        "+",
        "768",
        "/",
        "\\",
        "..",
        "a.b",
        "top-level",
        "over time",
        "é",
        "ß",
        "\u{2019}s",
        "Bob's",
        "ls -la",
        "> out.txt",
        "|",
        "grep",
        "PST",
        "3pm",
        "Europe/Madrid",
        "https://x.y",
        "#general",
        "@maria",
        // Rounds 24 to 26: other languages, dashes, negative numbers.
        "qué",
        "hora",
        "Datei",
        "löschen",
        "dossier",
        "l'heure",
        "-",
        "\u{2014}",
        "-17",
        "nodes+edges",
        "replacing whatever is there",
        "update my profile",
        "his new",
        "these people:",
        "everything you remember about",
        // A phrase of the language table in capitals whose lower case is
        // no key of it ("İ" lower-cases to two letters).
        "MERK DİR:",
        // Rounds 66 and 67: backquotes around nothing but a space (round
        // 66's first reading of a command in backquotes raised on it),
        // quoted file names, the passive, titles, a parenthesis of what
        // is not wanted.
        "`",
        "` `",
        "`ls`",
        "`Get-ChildItem Env:`",
        "'a.txt'",
        "it is requested that",
        "be struck",
        "the undersigned",
        "(not",
        "Ms.",
        "R.",
        "sizes not needed",
        "introduced me to",
    ];
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move |n: usize| {
        state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) as usize % n
    };
    let queries: Vec<String> = (0..3_000)
        .map(|i| {
            if i % 5 == 0 {
                (0..next(40)).map(|_| (b' ' + next(95) as u8) as char).collect()
            } else {
                (0..next(13)).map(|_| fragments[next(fragments.len())]).collect::<Vec<_>>().join(" ")
            }
        })
        .collect();
    let texts: Vec<&str> = queries.iter().map(String::as_str).collect();
    let tools = cell_tools(&catalog_of(300));
    let found = rank(&python, &tools, &texts, 3);
    assert_eq!(found.len(), texts.len(), "an answer for every query");
    assert!(found.iter().all(|names| names.len() <= 3), "never more than the limit");
}
