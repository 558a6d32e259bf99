//! Issue 43: `search_tools` finds what people mean, not only the words a
//! description used, on questions written the way people write a need
//! (`testing/search-eval/tune-43.json` and the held-out
//! `heldout-43-round13.json`), with typos in a tool's key word, and without an
//! empty answer for a real need.
//!
//! Like `search.rs`, these rank with `runner.py`'s own `search_tools` on
//! the host's `python3` over the catalog the bridge builds from the real
//! servers' `tools/list` (`search_eval`).

use std::collections::BTreeMap;

use code_mode_bridge::catalog::{Catalog, CatalogLimits, ListedTool, ServerTools};
use code_mode_proto::ToolStub;

use crate::search_eval::{
    Query, REAL_TOOLS, SERVERS, catalog_of, cell_tools, encoder, listed, nearness, python, queries, questions, rank,
    rank_with_meaning, server_tools, words,
};

/// The rank of the wanted tool for each question (1 for first, 99 when not
/// in the top ten), each question asked of its own catalog, and the names
/// each returned.
pub(crate) fn ranks(python: &str, questions: &[Query]) -> Vec<(usize, Vec<String>)> {
    ranks_with(python, questions, None)
}

/// As [`ranks`]; with `meaning`, `search_tools` asks the encoder when
/// unsure, as a cell asks the bridge.
pub(crate) fn ranks_with(
    python: &str,
    questions: &[Query],
    meaning: Option<&code_mode_encoder::Encoder>,
) -> Vec<(usize, Vec<String>)> {
    let mut tools: BTreeMap<usize, Vec<ToolStub>> = BTreeMap::new();
    let mut out = vec![(0, vec![]); questions.len()];
    for size in questions.iter().map(|q| q.catalog).collect::<std::collections::BTreeSet<_>>() {
        let catalog = catalog_of(size);
        let stubs = tools.entry(size).or_insert_with(|| cell_tools(&catalog));
        let chosen: Vec<usize> = (0..questions.len()).filter(|&i| questions[i].catalog == size).collect();
        for i in &chosen {
            let want = &questions[*i].want;
            assert!(
                catalog.get(want).is_some(),
                "{:?} wants {want}, not in the {size}-tool catalog",
                questions[*i].query
            );
        }
        let texts: Vec<&str> = chosen.iter().map(|&i| questions[i].query.as_str()).collect();
        let found = match meaning {
            None => rank(python, stubs, &texts, 10),
            Some(encoder) => {
                let near = nearness(encoder, stubs, &texts);
                let (found, asked) = rank_with_meaning(python, stubs, &texts, &near, 10);
                println!("{size} tools: meaning asked for {asked} of {} questions", texts.len());
                found
            }
        };
        for (i, names) in chosen.iter().zip(found) {
            let position = names.iter().position(|n| *n == questions[*i].want).map_or(99, |p| p + 1);
            out[*i] = (position, names);
        }
    }
    out
}

/// (questions, wanted first, wanted in the top three).
pub(crate) fn recall(ranks: &[(usize, Vec<String>)]) -> (usize, usize, usize) {
    let first = ranks.iter().filter(|(r, _)| *r == 1).count();
    let top3 = ranks.iter().filter(|(r, _)| *r <= 3).count();
    (ranks.len(), first, top3)
}

pub(crate) fn percent(part: usize, whole: usize) -> f64 {
    100.0 * part as f64 / whole.max(1) as f64
}

pub(crate) fn print_row(label: &str, (n, first, top3): (usize, usize, usize)) {
    println!("{label:<34} {n:>5} {first:>6} {:>6.1}% {top3:>6} {:>6.1}%", percent(first, n), percent(top3, n));
}

pub(crate) fn print_misses(label: &str, questions: &[Query], ranks: &[(usize, Vec<String>)]) {
    for (q, (rank, names)) in questions.iter().zip(ranks) {
        if *rank > 1 {
            let top: Vec<&str> = names.iter().take(3).map(String::as_str).collect();
            println!("  [{label}] {:?} wants {} (rank {rank}), got {top:?}", q.query, q.want);
        }
    }
}

/// The file of the held-out questions (issue 43, round 13): written before
/// round 13 measured any change to the ranker, never tuned on.
const HELD_OUT: &str = "heldout-43-round13.json";

/// The floor of the held-out test, in percent: first, and in the top three.
const FIRST_FLOOR: f64 = 90.5;
const TOP3_FLOOR: f64 = 96.4;

/// The note of the tuning questions held out in an earlier round (measured,
/// their misses read: tuning material since): "held out in round N".
const HELD_OUT_IN_ROUND: &str = "held out in round ";

/// The last round whose held-out questions joined `tune-43.json`.
const LAST_JOINED_ROUND: usize = 12;

/// Issue 43 asked for 95 % first and 99 % in the top three on held-out
/// questions. On round 2's held-out set (tuning material since, marked
/// "held out in round 2") the ranker of round 1 found the wanted tool first
/// for 129 of 159 (81.1 %) and in the top three for 143 (89.9 %); round 2's
/// ranker found it first for 139 (87.4 %) and in the top three for 155
/// (97.5 %). On round 3's held-out set, written before round 3 changed the
/// ranker, round 2's ranker finds it first for 117 of 145 (80.7 %) and in
/// the top three for 135 (93.1 %); round 3's ranker, measured once at the
/// round's end, first for 120 (82.8 %) and in the top three for 139
/// (95.9 %). On round 4's held-out set (225, written before round 4
/// changed the ranker), round 3's ranker finds it first for 188 (83.6 %)
/// and in the top three for 214 (95.1 %); round 4's ranker, measured once
/// at the round's end, first for 195 (86.7 %) and in the top three for 215
/// (95.6 %). On round 5's held-out set (256), round 4's ranker finds it
/// first for 221 (86.3 %) and in the top three for 248 (96.9 %); round 5's
/// ranker, measured once at the round's end, first for 230 (89.8 %) and in
/// the top three for 249 (97.3 %). On round 6's held-out set (232), round
/// 5's ranker finds it first for 213 (91.8 %) and in the top three for 227
/// (97.8 %); round 6's ranker, measured once at the round's end, first for
/// 215 (92.7 %) and in the top three for 229 (98.7 %). On round 7's
/// held-out set (241), round 6's ranker finds it first for 216 (89.6 %)
/// and in the top three for 231 (95.9 %); round 7's ranker, measured once
/// at the round's end, first for 219 (90.9 %) and in the top three for 232
/// (96.3 %). On round 8's held-out set (242), round 7's ranker finds it
/// first for 219 (90.5 %) and in the top three for 235 (97.1 %); round 8's
/// ranker, measured once at the round's end, first for 219 (90.5 %) and in
/// the top three for 236 (97.5 %). On round 9's held-out set (250), round
/// 8's ranker finds it first for 230 (92.0 %) and in the top three for 242
/// (96.8 %); round 9's ranker, measured once at the round's end, the same
/// (230 and 242). On round 10's held-out set (247), round 9's ranker finds
/// it first for 232 (93.9 %) and in the top three for 241 (97.6 %); round
/// 10's ranker, measured once at the round's end, first for 233 (94.3 %)
/// and in the top three for 242 (98.0 %). On round 11's held-out set
/// (258), round 10's ranker finds it first for 241 (93.4 %) and in the top
/// three for 251 (97.3 %); round 11's ranker, measured once at the round's
/// end, the same (241 and 251). On round 12's held-out set (256), round
/// 11's ranker finds it first for 239 (93.4 %) and in the top three for
/// 250 (97.7 %); round 12's ranker, measured once at the round's end, the
/// same (239 and 250). On round 13's held-out set (254), round 12's ranker
/// finds it first for 230 (90.6 %) and in the top three for 245 (96.5 %);
/// round 13 kept that ranker (a table learned from the tuning questions
/// was measured and not adopted: `testing/search-eval/README.md`, round
/// 13). This holds the floor measured, so that a change cannot lose what
/// was gained; raise it with the ranker.
#[test]
fn on_held_out_questions_people_wrote_search_tools_ranks_the_wanted_tool_first_for_90_in_100_and_top_three_for_96() {
    let Some(python) = python() else { return };
    let old = queries();
    let tune = questions("tune-43.json");
    let held = questions(HELD_OUT);
    assert!(held.iter().all(|q| q.set == "heldout") && tune.iter().all(|q| q.set == "tune"));
    let real = held.iter().filter(|q| q.catalog == REAL_TOOLS).count();
    assert!(
        real >= 80 && held.len() - real >= 15,
        "{real} held-out questions over the 42 tools, {} in all",
        held.len()
    );
    let (old_ranks, tune_ranks, held_ranks) = (ranks(&python, &old), ranks(&python, &tune), ranks(&python, &held));
    let part =
        |qs: &[Query], rs: &[(usize, Vec<String>)], keep: &dyn Fn(&Query) -> bool| -> Vec<(usize, Vec<String>)> {
            qs.iter().zip(rs).filter(|(q, _)| keep(q)).map(|(_, r)| r.clone()).collect()
        };
    let round = |n: usize| move |q: &Query| q.note == format!("{HELD_OUT_IN_ROUND}{n}");
    let earlier = |q: &Query| q.note.starts_with(HELD_OUT_IN_ROUND);
    assert!(
        (1..=LAST_JOINED_ROUND).all(|n| tune.iter().any(round(n))),
        "every earlier round's held-out questions are in tune-43.json"
    );
    println!("{:<34} {:>5} {:>14} {:>14}", "questions", "n", "wanted first", "in top three");
    print_row("queries.json tune", recall(&part(&old, &old_ranks, &|q| q.set == "tune")));
    print_row("queries.json holdout (seen)", recall(&part(&old, &old_ranks, &|q| q.set == "holdout")));
    print_row("tune-43, 42 tools", recall(&part(&tune, &tune_ranks, &|q| q.catalog == REAL_TOOLS && !earlier(q))));
    print_row("tune-43, 300 tools", recall(&part(&tune, &tune_ranks, &|q| q.catalog != REAL_TOOLS && !earlier(q))));
    for n in 1..=LAST_JOINED_ROUND {
        let held_in = round(n);
        print_row(
            &format!("tune-43 held out in round {n}, 42"),
            recall(&part(&tune, &tune_ranks, &|q| q.catalog == REAL_TOOLS && held_in(q))),
        );
        print_row(
            &format!("tune-43 held out in round {n}, 300"),
            recall(&part(&tune, &tune_ranks, &|q| q.catalog != REAL_TOOLS && held_in(q))),
        );
    }
    print_row("tune, all", recall(&[old_ranks.clone(), tune_ranks.clone()].concat()));
    print_row("heldout round 13, 42 tools", recall(&part(&held, &held_ranks, &|q| q.catalog == REAL_TOOLS)));
    print_row("heldout round 13, 300 tools", recall(&part(&held, &held_ranks, &|q| q.catalog != REAL_TOOLS)));
    let (n, first, top3) = recall(&held_ranks);
    print_row("heldout round 13, all", (n, first, top3));
    print_misses("queries.json", &old, &old_ranks);
    print_misses("tune-43", &tune, &tune_ranks);
    if std::env::var_os("SHOW_HELD_OUT_MISSES").is_some() {
        // Only for the docs, after the last measurement: never to tune on.
        print_misses("held out", &held, &held_ranks);
    }
    assert!(percent(first, n) >= FIRST_FLOOR, "held out: the wanted tool is first for only {first} of {n}");
    assert!(percent(top3, n) >= TOP3_FLOOR, "held out: the wanted tool is in the top three for only {top3} of {n}");
}

/// The floor with the sentence encoder (`--search-model`) on the same
/// held-out questions, in percent (first, top three). Measured with a
/// numpy pass in round 14 on round 14's ranker, and the same with round
/// 15's encoder as the bridge runs it: 234 of 254 (92.1 %) first and 246
/// (96.9 %) in the top three (words alone: 232 and 246); meaning is asked
/// for 45 of the 254.
const MEANING_FIRST_FLOOR: f64 = 92.0;
const MEANING_TOP3_FLOOR: f64 = 96.8;

#[test]
fn with_the_sentence_encoder_search_tools_ranks_more_held_out_questions_first_than_by_words_alone() {
    let Some(python) = python() else { return };
    let Some(encoder) = encoder() else { return };
    let held = questions(HELD_OUT);
    let (n, words_first, words_top3) = recall(&ranks(&python, &held));
    let (_, first, top3) = recall(&ranks_with(&python, &held, Some(&encoder)));
    print_row("heldout round 13, words alone", (n, words_first, words_top3));
    print_row("heldout round 13, with meaning", (n, first, top3));
    assert!(first > words_first, "meaning ranks {first} of {n} first, words alone {words_first}");
    assert!(percent(first, n) >= MEANING_FIRST_FLOOR, "held out: the wanted tool is first for only {first} of {n}");
    assert!(
        percent(top3, n) >= MEANING_TOP3_FLOOR,
        "held out: the wanted tool is in the top three for only {top3} of {n}"
    );
}

/// Misspellings of `word` one letter wrong (a letter dropped, two swapped,
/// one replaced, one doubled) and, for words of five letters or more, two
/// letters wrong; each differs from `word`.
fn typos(word: &str) -> Vec<(usize, String)> {
    let w: Vec<char> = word.chars().collect();
    let n = w.len();
    let m = n / 2;
    let s = |v: Vec<char>| v.into_iter().collect::<String>();
    let next = |c: char| if c == 'z' { 'a' } else { (c as u8 + 1) as char };
    let mut out = vec![];
    let mut dropped = w.clone();
    dropped.remove(m);
    out.push((1, s(dropped)));
    let mut swapped = w.clone();
    swapped.swap(m - 1, m);
    out.push((1, s(swapped)));
    let mut replaced = w.clone();
    replaced[m] = next(w[m]);
    out.push((1, s(replaced)));
    let mut doubled = w.clone();
    doubled.insert(m, w[m]);
    out.push((1, s(doubled)));
    if n >= 5 {
        let mut two = w.clone();
        two.swap(n - 3, n - 2);
        two.remove(1);
        out.push((2, s(two)));
        let mut two = w.clone();
        two[1] = next(w[1]);
        two.pop();
        out.push((2, s(two)));
    }
    out.retain(|(_, t)| t != word);
    out
}

#[test]
fn a_tool_is_still_in_the_top_three_when_its_key_word_has_one_or_two_letters_wrong() {
    let Some(python) = python() else { return };
    let catalog = catalog_of(REAL_TOOLS);
    let tools = cell_tools(&catalog);
    let mut asked: Vec<(String, String)> = vec![];
    for tool in &tools {
        if tool.search.description.contains("DEPRECATED") {
            continue; // its replacement may come first
        }
        // The tool's own name words; its key word is the longest (the first
        // of the longest): "get current time" -> "current", "edit file" -> "edit".
        let words: Vec<String> = tool.search.name.split(['_', '-']).map(str::to_lowercase).collect();
        let key = words.iter().rev().max_by_key(|w| w.len()).unwrap().clone();
        for (_, typo) in typos(&key) {
            let query: Vec<&str> = words.iter().map(|w| if *w == key { typo.as_str() } else { w.as_str() }).collect();
            asked.push((query.join(" "), tool.name.clone()));
        }
    }
    let texts: Vec<&str> = asked.iter().map(|(q, _)| q.as_str()).collect();
    let ranked = rank(&python, &tools, &texts, 3);
    let missed: Vec<String> = asked
        .iter()
        .zip(&ranked)
        .filter(|((_, want), found)| !found.contains(want))
        .map(|((q, want), found)| format!("{q:?} wants {want}, got {found:?}"))
        .collect();
    println!("{} misspelt names, {} without the tool in the top three", asked.len(), missed.len());
    assert!(asked.len() > 200, "{} queries", asked.len());
    assert!(missed.is_empty(), "{}", missed.join("\n"));
}

#[test]
fn no_question_naming_a_real_need_of_a_listed_tool_gets_an_empty_answer() {
    let Some(python) = python() else { return };
    let mut all = queries();
    all.extend(questions("tune-43.json"));
    all.extend(questions(HELD_OUT));
    let empty: Vec<&str> = all
        .iter()
        .zip(ranks(&python, &all))
        .filter(|(_, (_, names))| names.is_empty())
        .map(|(q, _)| q.query.as_str())
        .collect();
    assert!(empty.is_empty(), "{} of {} questions get no tool: {empty:?}", empty.len(), all.len());
}

#[test]
fn search_tools_finds_each_of_300_real_tools_first_from_its_server_and_tool_name_words() {
    let Some(python) = python() else { return };
    let catalog = catalog_of(300);
    let entries = catalog.entries(true, false);
    let tools = cell_tools(&catalog);
    let queries: Vec<String> =
        entries.iter().map(|e| format!("{} {}", e.search.server, e.search.name).replace(['_', '-'], " ")).collect();
    let texts: Vec<&str> = queries.iter().map(String::as_str).collect();
    let ranked = rank(&python, &tools, &texts, 3);
    let missed: Vec<String> = entries
        .iter()
        .zip(&queries)
        .zip(&ranked)
        .filter(|((e, _), found)| match found.iter().position(|n| *n == e.name) {
            Some(0) => false,
            Some(_) => !e.search.description.contains("DEPRECATED"),
            None => true,
        })
        .map(|((e, q), found)| format!("{q:?} does not find {} first: {found:?}", e.name))
        .collect();
    assert!(missed.is_empty(), "{} of 300:\n{}", missed.len(), missed.join("\n"));
}

#[test]
fn a_description_stuffed_with_every_word_of_the_tuning_questions_comes_first_for_few_of_them() {
    let Some(python) = python() else { return };
    let mut asked = queries();
    asked.extend(questions("tune-43.json").into_iter().filter(|q| q.catalog == REAL_TOOLS));
    // A hostile server's tool whose description holds every word the
    // questions use, cut by the bridge at 2 KiB as any description: the
    // words of the tables of synonyms and needs match it too.
    let mut words: Vec<String> = Vec::new();
    for q in &asked {
        for w in q.query.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
            let w = w.to_lowercase();
            if !words.contains(&w) {
                words.push(w);
            }
        }
    }
    let stuffed = ListedTool {
        name: "do_anything".into(),
        description: Some(words.join(" ")),
        input_schema: serde_json::json!({"type": "object", "properties": {}}),
        output_schema: None,
        title: None,
        annotations: None,
    };
    let mut servers: Vec<ServerTools> = SERVERS.iter().map(|s| server_tools(s, listed(s))).collect();
    servers.push(server_tools("evil", vec![stuffed]));
    let catalog = Catalog::build(&servers, &CatalogLimits::default()).unwrap();
    let tools = cell_tools(&catalog);
    let texts: Vec<&str> = asked.iter().map(|q| q.query.as_str()).collect();
    let ranked = rank(&python, &tools, &texts, 3);
    let evil_first = ranked.iter().filter(|r| r.first().map(String::as_str) == Some("evil__do_anything")).count();
    let top3 = asked.iter().zip(&ranked).filter(|(q, r)| r.contains(&q.want)).count();
    println!(
        "a tool stuffed with {} words comes first for {evil_first} of {} questions; the wanted tool is in the top three for {top3}",
        words.len(),
        asked.len()
    );
    assert!(evil_first * 100 <= 2 * asked.len(), "the stuffed tool comes first for {evil_first} questions");
    assert!(top3 * 100 >= 95 * asked.len(), "the wanted tool is in the top three for only {top3}");
}

/// A need of a behaviour test: `query` wants `want` in the `catalog`.
pub(crate) fn asked_in(query: &str, want: &str, catalog: usize) -> Query {
    Query { query: query.into(), want: want.into(), set: "tune".into(), catalog, note: String::new() }
}

/// Fails naming every question whose wanted tool is not ranked first.
pub(crate) fn each_first(python: &str, questions: &[Query]) {
    let found = ranks(python, questions);
    let wrong: Vec<String> = questions
        .iter()
        .zip(&found)
        .filter(|(_, (rank, _))| *rank != 1)
        .map(|(q, (rank, names))| {
            format!("{:?} wants {} (rank {rank}), got {:?}", q.query, q.want, &names[..3.min(names.len())])
        })
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Issue 43, round 2: what the ranker reads of a query beyond its words.
/// Each of these was ranked wrong by round 1's ranker.
#[test]
fn search_tools_reads_clauses_misspelt_question_words_names_signatures_and_the_server_a_query_names() {
    let Some(python) = python() else { return };
    let asked = asked_in;
    let questions = [
        // The verb opening a later clause ("record that": create).
        asked("Bob reports to Alice, record that", "memory__create_relations", REAL_TOOLS),
        // A misspelt question word is still a question.
        asked("waht time is it in london", "time__get_current_time", REAL_TOOLS),
        // "New York" is a name (no "new" thing to create) and one of the
        // values the weather tool's `location` takes.
        asked("weather report for New York", "everything__get_structured_content", REAL_TOOLS),
        // A value of a parameter's Literal type.
        asked("show me a debug message", "everything__get_annotated_message", REAL_TOOLS),
        // The verb after "before" is not what is asked for.
        asked(
            "request confirmation from the person before deleting",
            "everything__trigger_elicitation_request",
            REAL_TOOLS,
        ),
        // "modification" is the "modified" of the file's metadata.
        asked("last modification date of schema.sql", "filesystem__get_file_info", REAL_TOOLS),
        // The server a query names, and a question in its second clause.
        asked("charlie memory, who is Ivy", "memory_charlie__search_nodes", 300),
    ];
    each_first(&python, &questions);
}

/// Issue 43, round 3: classes of need the ranker of round 2 misread, each
/// asked in words of no question file (none is a tuning or held-out
/// question). Each of these was ranked wrong by round 2's ranker.
#[test]
fn search_tools_reads_property_questions_folder_paths_zone_offsets_shorthand_and_what_a_signature_needs() {
    let Some(python) = python() else { return };
    let asked = |query: &str, want: &str| asked_in(query, want, REAL_TOOLS);
    let questions = [
        // A question of how big a file is asks for its metadata, whatever its kind.
        asked("how big is clip.mp4", "filesystem__get_file_info"),
        // A path whose last part names no file is a folder.
        asked("what's in vendor/lodash", "filesystem__list_directory"),
        // A verb opening a clause after a linking word.
        asked("Dana is in memory already; also remember she likes tea", "memory__add_observations"),
        // Shorthand, and a folder path.
        asked("sz of the files in ./dist", "filesystem__list_directory_with_sizes"),
        // A tool requiring a path weighs less when no file is in sight.
        asked("Eve and Finn are cousins, save that link", "memory__create_relations"),
        // Where something may be done asks what is allowed.
        asked("where can you write files?", "filesystem__list_allowed_directories"),
        // Putting a file into a folder moves it.
        asked("put invoice.pdf into the billing folder", "filesystem__move_file"),
        // A zone as an offset, and no clock time: the time there now.
        asked("time in GMT+2", "time__get_current_time"),
        // A request to change something does not want a reading tool.
        asked("create app.py containing print(1)", "filesystem__write_file"),
        // An everyday word of the tables (no longer read as a typo of "task").
        asked("trash the entity named Old Project", "memory__delete_entities"),
    ];
    each_first(&python, &questions);
}

/// Issue 43, round 4: what the ranker of round 3 misread, each asked in
/// words of no question file (none is a tuning or held-out question), and
/// each ranked wrong by round 3's ranker.
#[test]
fn search_tools_reads_particles_after_objects_what_takes_away_shell_commands_and_nodes_and_edges() {
    let Some(python) = python() else { return };
    let asked = |query: &str, want: &str| asked_in(query, want, REAL_TOOLS);
    let questions = [
        // A verb's particle after its object ("take it off"): it removes.
        asked("the note that Eve is vegan is outdated, take it off her node", "memory__delete_observations"),
        // A request to take something away: no tool that makes or gets
        // comes first ("cut" is no misspelt "but" either).
        asked("cut the link between Eve and Finn", "memory__delete_relations"),
        // Shell commands typed as a request.
        asked("printenv", "everything__get_env"),
        asked("ls -R docs", "filesystem__directory_tree"),
        // All the nodes and edges are the whole graph.
        asked("show all the nodes and edges you hold", "memory__read_graph"),
        asked("dump the knowledge base", "memory__read_graph"),
        // A folder path put under a folder moves it.
        asked("shift reports/2022 into the archive folder", "filesystem__move_file"),
        // Whether people are awake is a question of their time now.
        asked("is it bedtime in Seoul yet", "time__get_current_time"),
        // "should be called" renames.
        asked("the handle of that file is wrong, it should be called notes-final.md", "filesystem__move_file"),
    ];
    each_first(&python, &questions);
}

/// Issue 43, round 5: what a request about named things is about (a fact
/// about one, a new one, a link between two), what it says it does not
/// want, and what it tells happened, each asked in words of no question
/// file and each ranked wrong by round 4's ranker.
#[test]
fn search_tools_reads_what_of_a_graph_a_request_is_about_what_it_does_not_want_and_what_it_tells_happened() {
    let Some(python) = python() else { return };
    let asked = |query: &str, want: &str| asked_in(query, want, REAL_TOOLS);
    let questions = [
        // A fact about one named thing, on its record.
        asked("Ines switched teams last week, add that to her record", "memory__add_observations"),
        asked("Acme's record: put down that they moved HQ", "memory__add_observations"),
        // A new thing.
        asked("save a new contact: Ines, product manager at Zalando", "memory__create_entities"),
        // Two named things and how they relate.
        asked("Ramon and Ines are cousins, remember that", "memory__create_relations"),
        // What someone did before is not what is asked now.
        asked("yesterday I wrote a poem into poem.txt, show it to me", "filesystem__read_text_file"),
        // A listing's flags that show sizes.
        asked("ls -lh ~/Videos", "filesystem__list_directory_with_sizes"),
    ];
    each_first(&python, &questions);
}

/// Issue 43, round 6: a file named in a request (a clock time in it is
/// when something happened; a tool taking no path is not wanted), folders
/// every project has, what a clock time beside "yet" or "already" asks,
/// more verbs that take away or change, each asked in words of no question
/// file and each ranked wrong by round 5's ranker.
#[test]
fn search_tools_reads_a_named_file_clock_times_beside_it_project_folders_and_more_verbs() {
    let Some(python) = python() else { return };
    let asked = |query: &str, want: &str| asked_in(query, want, REAL_TOOLS);
    let questions = [
        asked("view the log from last night, build.log; it failed at 2am", "filesystem__read_text_file"),
        asked("is it past 6pm in Berlin already?", "time__get_current_time"),
        asked("top level of dist, no recursion", "filesystem__list_directory"),
        asked("strip Bob's outdated job title from his record", "memory__delete_observations"),
        asked("clean out the old observations about Acme", "memory__delete_observations"),
        asked("remove Globex along with its relations", "memory__delete_entities"),
        asked("bump the version in package.json to 2.0.0", "filesystem__edit_file"),
        asked("anything mentioning Postgres in memory?", "memory__search_nodes"),
    ];
    each_first(&python, &questions);
}

/// Issue 43, round 7: a fact stated about one named thing's record, what a
/// question about a file's contents asks, "anything saved about", a
/// permission question with words between, each asked in words of no
/// question file and each ranked wrong by round 6's ranker.
#[test]
fn search_tools_reads_a_fact_on_a_record_what_is_in_a_file_anything_saved_and_where_one_may_write() {
    let Some(python) = python() else { return };
    let asked = |query: &str, want: &str| asked_in(query, want, REAL_TOOLS);
    let questions = [
        asked("whats in config.toml", "filesystem__read_text_file"),
        asked("Omar's work record: he is now team lead", "memory__add_observations"),
        asked("anything saved about Omar's kids?", "memory__search_nodes"),
        asked("where exactly am I allowed to write?", "filesystem__list_allowed_directories"),
    ];
    each_first(&python, &questions);
}

/// Issue 43, round 8: a placing verb after "and" or in a later clause, a
/// preposition that looks like a particle, "who" with a verb asking for
/// whoever matches, the time somewhere with no clock time, each asked in
/// words of no question file and each ranked wrong by round 7's ranker.
#[test]
fn search_tools_reads_a_later_placing_verb_a_preposition_after_a_verb_who_does_what_and_the_time_somewhere() {
    let Some(python) = python() else { return };
    let asked = |query: &str, want: &str| asked_in(query, want, REAL_TOOLS);
    let questions = [
        asked("grab report.pdf from Downloads and put it in archive/", "filesystem__move_file"),
        asked("take the logo off the homepage folder and drop it into assets/", "filesystem__move_file"),
        asked("who in my contacts plays tennis?", "memory__search_nodes"),
        asked("give me the time in Rome", "time__get_current_time"),
    ];
    each_first(&python, &questions);
}

/// Issue 43, round 9: renaming a thing inside a file's text, a file's name
/// changed, what kind of thing a path is, a file name of two extensions, a
/// thing memory does not know yet, "anybody ... whose", a new file given
/// its content, a path after a command that reads files, "let me see";
/// each asked in words of no question file and each ranked wrong by round
/// 8's ranker.
#[test]
fn search_tools_reads_renamed_code_a_changed_file_name_a_paths_kind_new_things_and_files_given_their_content() {
    let Some(python) = python() else { return };
    let asked = |query: &str, want: &str| asked_in(query, want, REAL_TOOLS);
    let questions = [
        asked("rename the method parse to parse_args in cli.py", "filesystem__edit_file"),
        asked("rename the class Foo to Bar throughout models.py", "filesystem__edit_file"),
        asked("correct the filename of draft_v1.txt to final.txt", "filesystem__move_file"),
        asked("is logs a file or a dir?", "filesystem__get_file_info"),
        asked("what size is archive.tar.gz", "filesystem__get_file_info"),
        asked("you don't know my cat Miso yet, she's a tabby", "memory__create_entities"),
        asked("anybody in memory whose job is design?", "memory__search_nodes"),
        asked("create recipes.md with grandma's pancake recipe in it", "filesystem__write_file"),
        asked("make a settings.yaml holding the line debug: true", "filesystem__write_file"),
        asked("less /var/log/auth", "filesystem__read_text_file"),
        asked("let me see the source of server.rb", "filesystem__read_text_file"),
    ];
    each_first(&python, &questions);
}

/// Issue 43, round 10: an MCP method named in a request, a call renamed
/// in a file's text, `ls -al`, the link between two things taken away, a
/// request for the legacy tool; each asked in words of no question file
/// and each ranked wrong by round 9's ranker.
#[test]
fn search_tools_reads_mcp_method_names_ls_al_the_link_between_two_things_and_a_request_for_the_legacy_tool() {
    let Some(python) = python() else { return };
    let asked = |query: &str, want: &str| asked_in(query, want, REAL_TOOLS);
    let questions = [
        asked("my client now supports sampling/createMessage, send it one", "everything__trigger_sampling_request"),
        asked("my IDE answers roots/list now, check what it sends", "everything__get_roots_list"),
        asked("rename the call foo to bar in main.c", "filesystem__edit_file"),
        asked("ls -al ~/code/site", "filesystem__list_directory_with_sizes"),
        asked("remove the connection between the two records", "memory__delete_relations"),
        asked("unlink those two contacts in memory", "memory__delete_relations"),
        asked("which legacy tool reads a file the old way", "filesystem__read_file"),
    ];
    each_first(&python, &questions);
}

/// Issue 43, round 11: an identifier made of a tool's name words
/// (`resource_link`), a listing piped into `grep`, a MIME type, "any ...
/// about" in a question; each asked in words of no question file and each
/// ranked wrong by round 10's ranker.
#[test]
fn search_tools_reads_name_word_identifiers_a_listing_piped_into_grep_mime_types_and_any_thing_about() {
    let Some(python) = python() else { return };
    let asked = |query: &str, want: &str| asked_in(query, want, REAL_TOOLS);
    let questions = [
        asked("I need resource_link blocks back from a tool", "everything__get_resource_links"),
        asked("ls -R docs | grep -i draft", "filesystem__search_files"),
        asked("my client should draw an image/png it gets from a tool, send a tiny one", "everything__get_tiny_image"),
        asked("are there any entries about badminton clubs in memory?", "memory__search_nodes"),
    ];
    each_first(&python, &questions);
}

/// Issue 43, round 12: "tomorrow" somewhere is a time, a name changed in a
/// file's text is an edit (not a rename of the file), "the root of the
/// project" is a folder, `find DIR -name`, "roundtrip"; each asked in words
/// of no question file and each ranked wrong by round 11's ranker.
#[test]
fn search_tools_reads_tomorrow_somewhere_a_name_inside_a_file_the_projects_root_find_name_and_roundtrip() {
    let Some(python) = python() else { return };
    let asked = |query: &str, want: &str| asked_in(query, want, REAL_TOOLS);
    let questions = [
        asked("is it already tomorrow over in Samoa?", "time__get_current_time"),
        asked("update the guest name in party-plan.md, the rest stays", "filesystem__edit_file"),
        asked("what sits in the root of the project?", "filesystem__list_directory"),
        asked("find ~/logs -name '*.gz'", "filesystem__search_files"),
        asked("roundtrip my test string via the server", "everything__echo"),
    ];
    each_first(&python, &questions);
}

/// Round 11 read whatever came before a pipe into `grep` as a listing of
/// files; only a command that lists files is (`ls`, `find`, `tree`...):
/// the environment filtered stays the environment. Found reading round
/// 12's held-out misses after its measurement.
#[test]
fn a_pipe_into_grep_searches_files_after_a_listing_and_keeps_any_other_command() {
    let Some(python) = python() else { return };
    let asked = |query: &str, want: &str| asked_in(query, want, REAL_TOOLS);
    let questions = [
        asked("env | grep -i proxy", "everything__get_env"),
        asked("ls -R docs | grep -i draft", "filesystem__search_files"),
    ];
    each_first(&python, &questions);
}

/// Two one-letter symbols added ("x + y") ask for the sum as two numbers
/// do, and a language's name with a plus in it does not. Found when round
/// 13's held-out set got its one empty answer ("a+b") in the test above.
#[test]
fn a_sum_of_two_symbols_asks_for_the_sum_tool_and_a_plus_in_a_name_does_not() {
    let Some(python) = python() else { return };
    let asked = |query: &str, want: &str| asked_in(query, want, REAL_TOOLS);
    each_first(&python, &[asked("x + y with x=7, y=5", "everything__get_sum"), asked("p+q", "everything__get_sum")]);
    let cpp = rank(&python, &cell_tools(&catalog_of(REAL_TOOLS)), &["grep the C++ sources under src for TODO"], 3);
    assert!(cpp[0].first().is_some_and(|n| n != "everything__get_sum"), "a plus in \"C++\" is no sum: {:?}", cpp[0]);
}

/// An everyday English word is meant as written: it is not read as a
/// misspelling of a catalog word one or two letters away, while a real
/// misspelling still is.
#[test]
fn an_everyday_word_is_not_read_as_a_misspelt_catalog_word_and_a_real_misspelling_still_is() {
    let Some(python) = python() else { return };
    let catalog = catalog_of(REAL_TOOLS);
    let tools = cell_tools(&catalog);
    let ranked = rank(&python, &tools, &["take", "wrong", "hand", "call", "embed", "curent", "directroy", "lsit"], 42);
    // Each everyday word matches no tool's words: nothing comes back, where
    // round 3 read "take" as "make", "wrong" as "long", "hand" as "handle".
    for (word, found) in ["take", "wrong", "hand", "call", "embed"].iter().zip(&ranked) {
        assert!(found.is_empty(), "{word:?} was read as another word: {found:?}");
    }
    assert_eq!(ranked[5].first().map(String::as_str), Some("time__get_current_time"), "{:?}", ranked[5]);
    assert!(ranked[6].iter().take(3).any(|n| n.contains("director")), "{:?}", ranked[6]);
    assert!(ranked[7].iter().take(3).any(|n| n.contains("list")), "{:?}", ranked[7]);
}

#[test]
fn words_made_from_a_verb_stem_as_the_verb() {
    let Some(python) = python() else { return };
    let seen =
        words(&python, &["creation deletion simulated simulation notifications modification readable recursively"]);
    assert_eq!(
        seen[0]["index"],
        serde_json::json!(["creat", "delet", "simul", "simul", "notify", "modify", "read", "recursiv"])
    );
    // British spellings stem as American ones.
    let seen = words(&python, &["memorised organisation analysed"]);
    assert_eq!(seen[0]["index"], serde_json::json!(["memoriz", "organiz", "analyz"]));
}

#[test]
fn an_acronyms_plural_is_one_word_and_news_is_no_plural_of_new() {
    let Some(python) = python() else { return };
    // Round 13 split "PRs" as "P" and "Rs" and stemmed "news" as "new".
    let seen = words(&python, &["which PRs touch these URLs and userIDs", "latest news", "As Is STATUS HTTPServer"]);
    assert_eq!(seen[0]["index"], serde_json::json!(["pr", "touch", "url", "user", "id"]));
    assert_eq!(seen[1]["index"], serde_json::json!(["latest", "news"]));
    // A capital and a lower-case "s" is a word, capitals alone too, and a
    // capitalised word after an acronym still splits.
    assert_eq!(seen[2]["index"], serde_json::json!(["status", "http", "server"]));
}

#[test]
fn tools_of_one_server_sharing_a_description_stuffed_with_the_tuning_questions_words_come_first_for_none_of_them() {
    let Some(python) = python() else { return };
    let mut asked = queries();
    asked.extend(questions("tune-43.json").into_iter().filter(|q| q.catalog == REAL_TOOLS));
    let mut words: Vec<String> = Vec::new();
    for q in &asked {
        for w in q.query.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
            let w = w.to_lowercase();
            if !words.contains(&w) {
                words.push(w);
            }
        }
    }
    // Five tools of a hostile server, each with the same stuffed
    // description: a sentence that many tools share tells them apart from
    // nothing, and is left out of what they are ranked by.
    let stuffed: Vec<ListedTool> = (0..5)
        .map(|i| ListedTool {
            name: format!("tool_{i}"),
            description: Some(words.join(" ")),
            input_schema: serde_json::json!({"type": "object", "properties": {}}),
            output_schema: None,
            title: None,
            annotations: None,
        })
        .collect();
    let mut servers: Vec<ServerTools> = SERVERS.iter().map(|s| server_tools(s, listed(s))).collect();
    servers.push(server_tools("evil", stuffed));
    let catalog = Catalog::build(&servers, &CatalogLimits::default()).unwrap();
    let tools = cell_tools(&catalog);
    let texts: Vec<&str> = asked.iter().map(|q| q.query.as_str()).collect();
    let ranked = rank(&python, &tools, &texts, 3);
    let evil_first = ranked.iter().filter(|r| r.first().is_some_and(|n| n.starts_with("evil__"))).count();
    println!("five tools stuffed alike with {} words come first for {evil_first} of {}", words.len(), asked.len());
    assert_eq!(evil_first, 0, "the stuffed tools come first for {evil_first} questions");
}
