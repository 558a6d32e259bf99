//! Issue 43, round 13: how `search_tools` ranks the tools of servers no
//! rule of the ranker was written for and no tuning question asked about.
//!
//! Every rule and weight of the ranker was tuned on questions over the
//! four reference servers until round 13. A gateway's servers are mostly
//! others, so this measures the ranker on the real `tools/list` of eleven
//! more servers
//! (`testing/search-eval/unseen/`: npm `@modelcontextprotocol/server-github`
//! and its siblings, `@notionhq/notion-mcp-server`, PyPI `mcp-server-git`
//! and `mcp-server-fetch`) with questions a helper wrote from those lists
//! alone (`unseen-43.json`), held out in round 13. Round 13's rules for
//! these servers came from the lead's own questions
//! (`unseen-tune-43.json`). Nine further servers (`unseen2/`,
//! `unseen2-43.json`) had no rule and no question written with them in
//! view when measured: what a server nobody looked at gets. Round 14 tuned
//! rules for any server on both sets (they are tuning sets since) and
//! measured them on ten more servers no rule was written with in view
//! (`unseen3/`, `unseen3-43.json`), held out.
//!
//! `DUMP_UNSEEN_TOOLS=<folder>` writes each set's cell tool list (what
//! `search_tools` ranks) as `<folder>/<set folder>.json`, for measuring
//! other rankers on the same tools outside the test.

use std::collections::BTreeMap;

use code_mode_bridge::catalog::{Catalog, CatalogLimits};
use serde::Deserialize;

use crate::search_eval::{
    cell_tools, encoder, eval_dir, listed_in, nearness, python, rank, rank_with_meaning, server_tools,
};

/// A set of servers and the held-out questions over them.
struct Unseen {
    /// The folder of their `tools/list` fixtures, each a file of its server's name.
    folder: &'static str,
    servers: &'static [&'static str],
    /// The questions' file.
    questions: &'static str,
}

/// Eleven servers; round 13's rules were written from the lead's own
/// questions over them (`unseen-tune-43.json`).
const ELEVEN: Unseen = Unseen {
    folder: "unseen",
    servers: &[
        "brave_search",
        "fetch",
        "git",
        "github",
        "gitlab",
        "google_maps",
        "notion",
        "postgres",
        "puppeteer",
        "sequential_thinking",
        "slack",
    ],
    questions: "unseen-43.json",
};

/// Nine servers nobody wrote a rule or a question for before the set was
/// measured.
const NINE: Unseen = Unseen {
    folder: "unseen2",
    servers: &[
        "aws_kb",
        "circleci",
        "context7",
        "everart",
        "firecrawl",
        "kubernetes",
        "playwright",
        "sentry",
        "todoist",
    ],
    questions: "unseen2-43.json",
};

/// Ten more servers (`unseen3/`), with questions a helper wrote in round
/// 14 from their lists alone, measured before anyone read them.
const TEN: Unseen = Unseen {
    folder: "unseen3",
    servers: &[
        "airtable", "heroku", "hubspot", "mongodb", "obsidian", "redis", "sqlite", "stripe", "supabase", "tavily",
    ],
    questions: "unseen3-43.json",
};

/// One question of `unseen-43.json`: the server and the tool as it lists it.
#[derive(Debug, Deserialize)]
struct Question {
    query: String,
    server: String,
    tool: String,
}

fn unseen_catalog(set: &Unseen) -> Catalog {
    let servers: Vec<_> = set.servers.iter().map(|s| server_tools(s, listed_in(set.folder, s))).collect();
    Catalog::build(&servers, &CatalogLimits::default()).expect("the unseen servers' tools make a catalog")
}

fn unseen_questions(set: &Unseen) -> Vec<Question> {
    #[derive(Deserialize)]
    struct File {
        queries: Vec<Question>,
    }
    let path = eval_dir().join(set.questions);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str::<File>(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display())).queries
}

/// Asks every question of `set` of its catalog; fails on a question naming
/// no listed tool, and unless every tool is asked for. Returns (questions,
/// wanted first, wanted in the top three, the questions answered with no
/// tool), after printing them by server.
fn measure(python: &str, set: &Unseen, tools_at_least: usize) -> (usize, usize, usize, Vec<String>) {
    measure_with(python, set, tools_at_least, None)
}

/// As [`measure`], and with `meaning`, `search_tools` asks the encoder when
/// unsure, as a cell asks the bridge.
fn measure_with(
    python: &str,
    set: &Unseen,
    tools_at_least: usize,
    meaning: Option<&code_mode_encoder::Encoder>,
) -> (usize, usize, usize, Vec<String>) {
    let tools = cell_tools(&unseen_catalog(set));
    // For measuring outside the test: the cell's tool list of each set,
    // as `DUMP_UNSEEN_TOOLS/<folder>.json` (testing/search-eval/README.md).
    if let Some(dir) = std::env::var_os("DUMP_UNSEEN_TOOLS") {
        let path = std::path::Path::new(&dir).join(format!("{}.json", set.folder));
        std::fs::write(&path, serde_json::to_string(&tools).expect("cell tools serialize"))
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
    // (server, tool as listed) -> the name a cell calls it by.
    let names: BTreeMap<(&str, &str), &str> =
        tools.iter().map(|t| ((t.search.server.as_str(), t.search.name.as_str()), t.name.as_str())).collect();
    assert!(tools.len() >= tools_at_least, "{} tools in {}", tools.len(), set.folder);
    let questions = unseen_questions(set);
    let wanted: Vec<&str> = questions
        .iter()
        .map(|q| {
            *names.get(&(q.server.as_str(), q.tool.as_str())).unwrap_or_else(|| {
                panic!("{:?} wants {}/{}, which {} does not list", q.query, q.server, q.tool, set.folder)
            })
        })
        .collect();
    let asked: std::collections::BTreeSet<&str> = wanted.iter().copied().collect();
    assert_eq!(asked.len(), tools.len(), "every tool of {} is asked for at least once", set.folder);
    let texts: Vec<&str> = questions.iter().map(|q| q.query.as_str()).collect();
    let found = match meaning {
        None => rank(python, &tools, &texts, 10),
        Some(encoder) => {
            let near = nearness(encoder, &tools, &texts);
            let (found, asked) = rank_with_meaning(python, &tools, &texts, &near, 10);
            println!("{}: meaning asked for {asked} of {} questions", set.questions, texts.len());
            found
        }
    };
    let position = |want: &str, names: &[String]| names.iter().position(|n| n == want).map_or(99, |p| p + 1);
    let ranks: Vec<usize> = wanted.iter().zip(&found).map(|(want, names)| position(want, names)).collect();
    let n = ranks.len();
    let first = ranks.iter().filter(|r| **r == 1).count();
    let top3 = ranks.iter().filter(|r| **r <= 3).count();
    let percent = |part: usize| 100.0 * part as f64 / n as f64;
    println!(
        "{}: {n} questions, first {first} ({:.1}%), top three {top3} ({:.1}%)",
        set.questions,
        percent(first),
        percent(top3)
    );
    for server in set.servers {
        let of: Vec<usize> =
            questions.iter().zip(&ranks).filter(|(q, _)| q.server == *server).map(|(_, r)| *r).collect();
        let hit = of.iter().filter(|r| **r == 1).count();
        println!("  {server:<20} {:>3} questions, first {hit:>3}", of.len());
    }
    if std::env::var_os("SHOW_UNSEEN_MISSES").is_some() {
        for ((q, want), (rank, names)) in questions.iter().zip(&wanted).zip(ranks.iter().zip(&found)) {
            if *rank > 1 {
                println!("  {:?} wants {want} (rank {rank}), got {:?}", q.query, &names[..3.min(names.len())]);
            }
        }
    }
    let empty = texts.iter().zip(&found).filter(|(_, names)| names.is_empty()).map(|(q, _)| q.to_string()).collect();
    (n, first, top3, empty)
}

fn percent(part: usize, whole: usize) -> f64 {
    100.0 * part as f64 / whole.max(1) as f64
}

/// The floor on the eleven servers, in percent (first, top three). Round
/// 12's ranker, before any rule was written with these servers in view,
/// finds the wanted tool first for 90 of 178 (50.6 %) and in the top three
/// for 127 (71.3 %), with one empty answer; the ranker before issue 43's
/// rounds, 93 (52.2 %) and 129 (72.5 %). Round 13's, measured once after
/// its rules (written from the lead's own questions,
/// `unseen-tune-43.json`, without reading this set): 113 (63.5 %) and 144
/// (80.9 %), no empty answer. Round 14 then tuned its rules for any server
/// on these questions (no longer held out): 123 (69.1 %) and 157 (88.2 %).
/// Issue 43's round 24 reads a dash between words as a clause's end: one
/// question ranks its tool higher ("GitHub PR #311 - is it mergeable",
/// third to second), one lower ("... 2.2945 E - which address is that?",
/// third to fourth, its question word now opening a clause); round 26's
/// browser words put "execute some JS in the open tab ..." first (from
/// third): 124 (69.7 %) and 156 (87.6 %).
const FIRST_FLOOR: f64 = 69.0;
const TOP3_FLOOR: f64 = 87.6;

#[test]
fn on_questions_over_eleven_other_real_servers_search_tools_finds_the_wanted_tool_first_for_69_in_100_and_never_answers_empty()
 {
    let Some(python) = python() else { return };
    let (n, first, top3, empty) = measure(&python, &ELEVEN, 90);
    assert!(empty.is_empty(), "{} questions get no tool: {empty:?}", empty.len());
    assert!(percent(first, n) >= FIRST_FLOOR, "the wanted tool is first for only {first} of {n}");
    assert!(percent(top3, n) >= TOP3_FLOOR, "the wanted tool is in the top three for only {top3} of {n}");
}

/// The floor on the nine servers, in percent (first, top three), and the
/// empty answers allowed. Measured once, before anyone read the set: the
/// ranker before issue 43 finds the wanted tool first for 123 of 190
/// (64.7 %) and in the top three for 151 (79.5 %), with two empty
/// answers; round 12's and round 13's both 123 (64.7 %) and 153 (80.5 %),
/// with one. Round 13's rules for any server, written from questions over
/// the eleven, moved nothing here: what rules gain stays with the servers
/// they were written with in view. Round 14 then tuned its rules for any
/// server on these questions (no longer held out): 141 (74.2 %) and 165
/// (86.8 %), no empty answer.
const NINE_FIRST_FLOOR: f64 = 74.1;
const NINE_TOP3_FLOOR: f64 = 86.7;

#[test]
fn on_questions_over_nine_other_real_servers_search_tools_finds_the_wanted_tool_first_for_74_in_100_and_never_answers_empty()
 {
    let Some(python) = python() else { return };
    let (n, first, top3, empty) = measure(&python, &NINE, 130);
    assert!(empty.is_empty(), "{} questions get no tool: {empty:?}", empty.len());
    assert!(percent(first, n) >= NINE_FIRST_FLOOR, "the wanted tool is first for only {first} of {n}");
    assert!(percent(top3, n) >= NINE_TOP3_FLOOR, "the wanted tool is in the top three for only {top3} of {n}");
}

/// The floor on the ten servers of round 14, in percent (first, top
/// three). Measured once, before anyone read the questions: round 13's
/// ranker finds the wanted tool first for 114 of 199 (57.3 %) and in the
/// top three for 161 (80.9 %), with no empty answer; the ranker before
/// issue 43's rounds, 97 (48.7 %) and 144 (72.4 %), with one. Round 14's,
/// measured once after its rules (tuned on the eleven and the nine): 115
/// (57.8 %) and 162 (81.4 %), no empty answer.
const TEN_FIRST_FLOOR: f64 = 57.7;
const TEN_TOP3_FLOOR: f64 = 81.3;

#[test]
fn on_held_out_questions_over_ten_more_servers_search_tools_finds_the_wanted_tool_first_for_57_in_100_and_never_answers_empty()
 {
    let Some(python) = python() else { return };
    let (n, first, top3, empty) = measure(&python, &TEN, 150);
    assert!(empty.is_empty(), "{} questions get no tool: {empty:?}", empty.len());
    assert!(percent(first, n) >= TEN_FIRST_FLOOR, "the wanted tool is first for only {first} of {n}");
    assert!(percent(top3, n) >= TEN_TOP3_FLOOR, "the wanted tool is in the top three for only {top3} of {n}");
}

/// The floors with the sentence encoder (`--search-model`), in percent
/// (first, top three), on the ten servers' held-out questions. Measured
/// once in round 14 with a numpy pass on round 14's ranker (the encoder's
/// setting chosen before, on the tuning sets): 124 (62.3 %) and 168
/// (84.4 %); round 15's encoder, as the bridge runs it, gives the same
/// (words alone: 115 and 162). Meaning is asked for 99 of the 199.
const TEN_MEANING_FIRST_FLOOR: f64 = 62.2;
const TEN_MEANING_TOP3_FLOOR: f64 = 84.3;

#[test]
fn with_the_sentence_encoder_search_tools_finds_more_wanted_tools_first_on_ten_servers_nobody_tuned_for_and_never_answers_empty()
 {
    let Some(python) = python() else { return };
    let Some(encoder) = encoder() else { return };
    let (n, words_first, _, _) = measure(&python, &TEN, 150);
    let (_, first, top3, empty) = measure_with(&python, &TEN, 150, Some(&encoder));
    assert!(empty.is_empty(), "{} questions get no tool: {empty:?}", empty.len());
    assert!(first > words_first, "meaning ranks {first} of {n} first, words alone {words_first}");
    assert!(percent(first, n) >= TEN_MEANING_FIRST_FLOOR, "the wanted tool is first for only {first} of {n}");
    assert!(percent(top3, n) >= TEN_MEANING_TOP3_FLOOR, "the wanted tool is in the top three for only {top3} of {n}");
}

/// The floors with the encoder on the two tuning sets of other servers,
/// in percent (first, top three): eleven servers 127 of 178 (71.3 %) and
/// 161 (90.4 %), words alone 123 and 157; nine servers 147 of 190
/// (77.4 %) and 173 (91.1 %), words alone 141 and 165 (round 14). Round 58
/// cost the nine one question in the top three (172, 90.5 %): "how to set
/// up middleware in Next.js 15 — latest docs from /vercel/next.js" named
/// "next.js" twice, read as two files before; as one file, the
/// documentation tool fell from first to fourth with meaning.
const ELEVEN_MEANING_FLOORS: (f64, f64) = (71.3, 90.4);
const NINE_MEANING_FLOORS: (f64, f64) = (77.3, 90.5);

#[test]
fn with_the_sentence_encoder_search_tools_finds_more_wanted_tools_first_on_the_eleven_and_nine_other_servers() {
    let Some(python) = python() else { return };
    let Some(encoder) = encoder() else { return };
    for (set, at_least, (first_floor, top3_floor)) in
        [(&ELEVEN, 90, ELEVEN_MEANING_FLOORS), (&NINE, 130, NINE_MEANING_FLOORS)]
    {
        let (n, words_first, _, _) = measure(&python, set, at_least);
        let (_, first, top3, empty) = measure_with(&python, set, at_least, Some(&encoder));
        assert!(empty.is_empty(), "{}: {} questions get no tool: {empty:?}", set.questions, empty.len());
        assert!(
            first > words_first,
            "{}: meaning ranks {first} of {n} first, words alone {words_first}",
            set.questions
        );
        assert!(
            percent(first, n) >= first_floor,
            "{}: the wanted tool is first for only {first} of {n}",
            set.questions
        );
        assert!(percent(top3, n) >= top3_floor, "{}: in the top three for only {top3} of {n}", set.questions);
    }
}

/// Round 13's readings for any server, each asked in words of no question
/// file over the unseen servers' catalog; round 12's ranker ranks each
/// wrong (and answers the channel one with nothing): an SQL statement is a
/// database query, `#name` a chat channel, opening or logging a tracker's
/// item makes one, heading to an address navigates, "choose ... from the
/// dropdown" selects, and a server named after a name given ("called
/// infra-tools, private, on github") still names it.
#[test]
fn search_tools_reads_sql_statements_chat_channels_new_tracker_items_addresses_to_visit_and_a_server_named_last() {
    let Some(python) = python() else { return };
    let tools = cell_tools(&unseen_catalog(&ELEVEN));
    let first = [
        ("INSERT INTO audit_log VALUES (1, 'x')", "postgres__query"),
        ("log a ticket on github for the flaky test", "github__create_issue"),
        ("head to https://status.example.com", "puppeteer__puppeteer_navigate"),
        ("choose \"Express\" from the shipping dropdown", "puppeteer__puppeteer_select"),
        ("make a repo called infra-tools, private, on github", "github__create_repository"),
    ];
    let texts: Vec<&str> = first.iter().map(|(q, _)| *q).collect();
    let wrong: Vec<String> = first
        .iter()
        .zip(rank(&python, &tools, &texts, 3))
        .filter(|((_, want), names)| names.first().map(String::as_str) != Some(*want))
        .map(|((q, want), names)| format!("{q:?} wants {want} first, got {names:?}"))
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    let channel = rank(&python, &tools, &["tell #deploys the rollout is paused"], 3);
    assert!(channel[0].iter().any(|n| n == "slack__slack_post_message"), "a #channel is Slack's: {:?}", channel[0]);
}

/// Round 14's readings for any server, each asked in words of no question
/// file; round 13's ranker puts the wanted tool first for 2 of these 11:
/// ticking off or adding a reminder to a to-do list, opening an address
/// "in the browser", `k` for kubectl, leaving a comment on an item,
/// mousing over, `git diff --staged` and `git checkout -b`, filing "a
/// github bug", news (not "new"), and an acronym's plural ("PRs").
#[test]
fn search_tools_reads_to_do_lists_browser_visits_kubectl_and_git_shorthands_comments_news_and_acronym_plurals() {
    let Some(python) = python() else { return };
    let wrong_of = |set: &Unseen, asked: &[(&str, &str)]| {
        let tools = cell_tools(&unseen_catalog(set));
        let texts: Vec<&str> = asked.iter().map(|(q, _)| *q).collect();
        asked
            .iter()
            .zip(rank(&python, &tools, &texts, 3))
            .filter(|((_, want), names)| names.first().map(String::as_str) != Some(*want))
            .map(|((q, want), names)| format!("{q:?} wants {want} first, got {names:?}"))
            .collect::<Vec<String>>()
    };
    let mut wrong = wrong_of(
        &NINE,
        &[
            ("tick off 'water the plants' in my todo list", "todoist__close_tasks"),
            ("add a reminder to renew the car insurance", "todoist__create_tasks"),
            ("visit localhost:8080/admin in the browser", "playwright__browser_navigate"),
            ("k describe deployment web -n staging", "kubernetes__kubectl_describe"),
            ("leave a comment on the todo: blocked by legal", "todoist__create_comments"),
            ("mouse over the Settings menu", "playwright__browser_hover"),
        ],
    );
    wrong.extend(wrong_of(
        &ELEVEN,
        &[
            ("git diff --staged", "git__git_diff_staged"),
            ("git checkout -b spike/search", "git__git_create_branch"),
            ("file a github bug: search box crashes on emoji", "github__create_issue"),
            ("news about the EU chips act", "brave_search__brave_web_search"),
            ("which PRs are still waiting in acme/api on github", "github__list_pull_requests"),
        ],
    ));
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Round 13's readings leave English alone: "delete from" or "update ...
/// set" in words is no SQL statement, and "open the issue" reads one. Each
/// was read wrong by round 13's first rules (found reading them again).
#[test]
fn sql_and_tracker_readings_leave_plain_english_requests_to_the_tools_they_name() {
    let Some(python) = python() else { return };
    let first = |tools: &[code_mode_proto::ToolStub], asked: &[(&str, &str)]| {
        let texts: Vec<&str> = asked.iter().map(|(q, _)| *q).collect();
        asked
            .iter()
            .zip(rank(&python, tools, &texts, 3))
            .filter(|((_, want), names)| names.first().map(String::as_str) != Some(*want))
            .map(|((q, want), names)| format!("{q:?} wants {want} first, got {names:?}"))
            .collect::<Vec<String>>()
    };
    let mut wrong = first(
        &cell_tools(&crate::search_eval::catalog_of(crate::search_eval::REAL_TOOLS)),
        &[
            ("delete from memory the entity Bob", "memory__delete_entities"),
            ("update the config so debug is set to true in settings.json", "filesystem__edit_file"),
        ],
    );
    wrong.extend(first(
        &cell_tools(&unseen_catalog(&ELEVEN)),
        &[
            ("open the issue 17 on github", "github__get_issue"),
            ("delete from sessions where expired", "postgres__query"),
        ],
    ));
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
