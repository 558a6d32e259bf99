//! Issue 43, round 17: requests that say what they want in a form of their
//! own (an SQL statement, a graph pattern, a bare extension, shorthand, an
//! idiom) rank the tool they ask for first. Each question here is new,
//! written for this test (not from a question set), and each ranked the
//! wanted tool below another before round 17 read its form.
//!
//! Like `search.rs`, these rank with `runner.py`'s own `search_tools` on
//! the host's `python3` over the catalog the bridge builds from the real
//! servers' `tools/list`.

use crate::search_eval::{REAL_TOOLS, catalog_of, cell_tools, python, rank};

#[test]
fn sql_statements_graph_patterns_bare_extensions_and_shorthand_rank_the_tool_they_ask_for_first() {
    let Some(python) = python() else { return };
    let tools = cell_tools(&catalog_of(REAL_TOOLS));
    let cases = [
        // An SQL statement's verb says what it does.
        ("DELETE FROM people WHERE name = 'Rosa'", "memory__delete_entities"),
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
    let texts: Vec<&str> = cases.iter().map(|(query, _)| *query).collect();
    let found = rank(&python, &tools, &texts, 3);
    let wrong: Vec<String> = cases
        .iter()
        .zip(&found)
        .filter(|((_, want), names)| names.first().map(String::as_str) != Some(*want))
        .map(|((query, want), names)| format!("{query:?} wants {want}, got {names:?}"))
        .collect();
    assert!(wrong.is_empty(), "ranked another tool first:\n{}", wrong.join("\n"));
}
