//! What the model reads of real servers' tools, over their real `tools/list`.
//!
//! `testing/search-eval/tools/*.json` holds what four real reference servers
//! list (npm `@modelcontextprotocol/server-everything`, `-memory`,
//! `-filesystem`, PyPI `mcp-server-time`); one test starts them and checks
//! the files are still exactly that (`UPDATE_FIXTURES=1` rewrites them, and
//! fails the test under `CI=true`).

use std::path::PathBuf;
use std::time::Duration;

use code_mode_bridge::server::{self, ServerSpec, StdioSpec, Transport};
use code_mode_core::testing::peers::{npm_bin, venv_bin};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use code_mode_bridge::catalog::{Catalog, CatalogLimits, ListedTool, ServerTools};

use crate::search_eval::{
    Query, SERVERS, catalog_of, cell_tools, eval_dir, listed, python, queries, rank, real_catalog, server_tools, words,
};

/// A folder for the filesystem and memory servers, removed after the test.
fn scratch() -> PathBuf {
    std::env::temp_dir().join(format!("code-mode-search-fixtures-{}", std::process::id()))
}

/// How to start one real server: its name, command, arguments and
/// environment.
type RealServer = (&'static str, String, Vec<String>, Vec<(String, String)>);

/// The four real servers, by the names their tools get as a prefix, in the
/// order of the catalog; `None` off CI when a server is not installed. A
/// scratch folder that cannot be made fails the test (it is no missing
/// component).
fn real_servers() -> Option<Vec<RealServer>> {
    let scratch = scratch();
    std::fs::create_dir_all(&scratch).unwrap_or_else(|e| panic!("the scratch folder {}: {e}", scratch.display()));
    let memory_file = scratch.join("memory.jsonl").display().to_string();
    Some(vec![
        ("everything", npm_bin("mcp-server-everything")?.display().to_string(), vec!["stdio".into()], vec![]),
        (
            "memory",
            npm_bin("mcp-server-memory")?.display().to_string(),
            vec![],
            vec![("MEMORY_FILE_PATH".into(), memory_file)],
        ),
        (
            "filesystem",
            npm_bin("mcp-server-filesystem")?.display().to_string(),
            vec![scratch.display().to_string()],
            vec![],
        ),
        ("time", venv_bin("mcp-server-time")?.display().to_string(), vec![], vec![]),
    ])
}

#[tokio::test]
async fn the_committed_tool_lists_are_what_the_real_servers_list() {
    let Some(servers) = real_servers() else { return };
    let update = code_mode_core::testing::rewrite_golden("UPDATE_FIXTURES");
    for (name, command, args, set_env) in servers {
        let spec = ServerSpec {
            name: name.into(),
            transport: Transport::Stdio(StdioSpec { command, args, pass_env: vec![], set_env }),
            start_timeout: Duration::from_secs(60),
        };
        let cancel = CancellationToken::new();
        let (handle, tools, actor) = server::start(&spec, cancel.clone()).await.expect("the real server starts");
        cancel.cancel();
        drop(handle);
        let _ = actor.await;
        let listed = serde_json::to_value(&tools).expect("tools are JSON");
        let path = eval_dir().join("tools").join(format!("{name}.json"));
        if update {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, serde_json::to_string_pretty(&listed).unwrap() + "\n").unwrap();
            continue;
        }
        let committed: Value = serde_json::from_str(&std::fs::read_to_string(&path).expect("the fixture exists"))
            .expect("the fixture is JSON");
        assert_eq!(listed, committed, "{name} lists other tools than {}: rerun with UPDATE_FIXTURES=1", path.display());
    }
    let _ = std::fs::remove_dir_all(scratch());
}

/// Recall of one set: (questions, wanted tool first, wanted tool in the top three).
fn recall(results: &[(&Query, usize)], set: Option<&str>) -> (usize, usize, usize) {
    let chosen: Vec<usize> =
        results.iter().filter(|(q, _)| set.is_none_or(|s| q.set == s)).map(|(_, rank)| *rank).collect();
    (chosen.len(), chosen.iter().filter(|&&r| r == 1).count(), chosen.iter().filter(|&&r| r <= 3).count())
}

fn percent(part: usize, whole: usize) -> f64 {
    100.0 * part as f64 / whole.max(1) as f64
}

#[test]
fn search_tools_ranks_the_wanted_tool_first_for_nine_questions_in_ten_and_in_the_top_three_for_98_in_100() {
    let Some(python) = python() else { return };
    let catalog = real_catalog();
    let tools = cell_tools(&catalog);
    assert_eq!(tools.len(), crate::search_eval::REAL_TOOLS);
    let queries = queries();
    assert!(queries.len() >= 60, "{} questions", queries.len());
    for q in &queries {
        assert!(catalog.get(&q.want).is_some(), "{:?} wants {}, which the catalog does not hold", q.query, q.want);
    }
    let texts: Vec<&str> = queries.iter().map(|q| q.query.as_str()).collect();
    let ranked = rank(&python, &tools, &texts, 10);
    // The rank of the wanted tool, 1 for first; 99 when not in the top ten.
    let results: Vec<(&Query, usize)> = queries
        .iter()
        .zip(&ranked)
        .map(|(q, names)| (q, names.iter().position(|n| *n == q.want).map_or(99, |p| p + 1)))
        .collect();
    println!("search_tools over the {} tools of 4 real servers (testing/search-eval):", crate::search_eval::REAL_TOOLS);
    println!("{:<8} {:>9} {:>16} {:>16}", "set", "questions", "wanted first", "wanted in top 3");
    for (label, set) in [("tune", Some("tune")), ("holdout", Some("holdout")), ("all", None)] {
        let (n, first, top3) = recall(&results, set);
        println!("{label:<8} {n:>9} {:>8} {:>6.1}% {:>8} {:>6.1}%", first, percent(first, n), top3, percent(top3, n));
    }
    for ((q, rank), names) in results.iter().zip(&ranked) {
        if *rank > 1 {
            let top: Vec<&str> = names.iter().take(3).map(String::as_str).collect();
            println!("  [{}] {:?} wants {} (rank {rank}), got {top:?}", q.set, q.query, q.want);
        }
    }
    let (n, first, top3) = recall(&results, None);
    assert!(percent(first, n) >= 90.0, "the wanted tool is first for only {first} of {n}");
    assert!(percent(top3, n) >= 98.0, "the wanted tool is in the top three for only {top3} of {n}");
}

/// Where the catalog of 300 real tools is committed, as the frontend
/// receives it (`Catalog` entries, JSON): what the frontend's description
/// tests and benchmark read, since the frontend builds no catalog itself.
fn catalog_fixture() -> PathBuf {
    eval_dir().join("catalog-300.json")
}

#[test]
fn the_committed_catalog_of_300_real_tools_is_what_the_bridge_builds() {
    let entries = catalog_of(300).entries(true, false);
    let text = serde_json::to_string_pretty(&entries).expect("entries are JSON") + "\n";
    if code_mode_core::testing::rewrite_golden("UPDATE_FIXTURES") {
        std::fs::write(catalog_fixture(), &text).expect("the fixture is written");
    }
    let committed = std::fs::read_to_string(catalog_fixture()).unwrap_or_default();
    assert!(
        committed == text,
        "{} is not what the bridge builds now: rerun with UPDATE_FIXTURES=1 after a deliberate change",
        catalog_fixture().display()
    );
}

#[test]
fn search_tools_finds_each_of_150_real_tools_first_from_its_server_and_tool_name_words() {
    let Some(python) = python() else { return };
    // The words the names tier of the description shows for each tool: its
    // server's and its own ("everything bravo get sum"). Only a deprecated
    // tool may come after its replacement.
    let catalog = catalog_of(150);
    let entries = catalog.entries(true, false);
    let tools = cell_tools(&catalog);
    let queries: Vec<String> =
        entries.iter().map(|e| format!("{} {}", e.search.server, e.search.name).replace(['_', '-'], " ")).collect();
    let texts: Vec<&str> = queries.iter().map(String::as_str).collect();
    let ranked = rank(&python, &tools, &texts, 3);
    let mut first = 0;
    for ((entry, query), found) in entries.iter().zip(&queries).zip(&ranked) {
        let deprecated = entry.search.description.contains("DEPRECATED");
        match found.iter().position(|n| *n == entry.name) {
            Some(0) => first += 1,
            Some(_) if deprecated => {}
            _ => panic!("{query:?} does not find {} first: {found:?}", entry.name),
        }
    }
    println!("search_tools(<server and tool name words>) finds {first} of 150 first, all in the top three");
}

#[test]
fn a_description_stuffed_with_every_word_of_the_questions_wins_few_of_them() {
    let Some(python) = python() else { return };
    let queries = queries();
    // A hostile server's tool whose description holds every word the
    // questions use (cut by the bridge at 2 KiB, as any description).
    let mut words: Vec<String> = Vec::new();
    for q in &queries {
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
    let texts: Vec<&str> = queries.iter().map(|q| q.query.as_str()).collect();
    let ranked = rank(&python, &tools, &texts, 3);
    let evil_first = ranked.iter().filter(|r| r.first().map(String::as_str) == Some("evil__do_anything")).count();
    let first = queries.iter().zip(&ranked).filter(|(q, r)| r.first() == Some(&q.want)).count();
    let top3 = queries.iter().zip(&ranked).filter(|(q, r)| r.contains(&q.want)).count();
    println!(
        "with a tool stuffed with all {} words of the questions: it comes first for {evil_first} of {}; \
         the wanted tool is first for {first}, in the top three for {top3}",
        words.len(),
        queries.len()
    );
    assert!(evil_first <= 5, "the stuffed tool comes first for {evil_first} questions");
    assert!(top3 * 100 >= 95 * queries.len(), "the wanted tool is in the top three for only {top3}");
}

#[test]
fn search_splits_names_at_every_case_stems_lightly_and_reads_questions_names_and_file_names() {
    let Some(python) = python() else { return };
    let texts = [
        "getCurrentTime list_directory_with_sizes get-resource-links HTTPServer",
        "Creating directories; created files, edits, logging",
        "IANA timezone name (e.g., 'Asia/Tokyo', 'Europe/London').",
        "what time is it in Tokyo",
        "show me notes.txt",
        "how many hours",
        "mkdir -p out",
    ];
    let seen = words(&python, &texts);
    let index = |i: usize| seen[i]["index"].clone();
    assert_eq!(
        index(0),
        serde_json::json!([
            "get",
            "current",
            "tim",
            "list",
            "directory",
            "siz",
            "get",
            "resourc",
            "link",
            "http",
            "server"
        ])
    );
    assert_eq!(index(1), serde_json::json!(["creat", "directory", "creat", "fil", "edit", "log"]));
    // Example values in parentheses are not indexed.
    assert_eq!(index(2), serde_json::json!(["iana", "timezon", "nam"]));
    let query = |i: usize| seen[i]["query"].as_array().unwrap().clone();
    // A question asks a little for getters; a capitalised name weighs little.
    let asked = query(3);
    assert_eq!(asked[0][0], 1.0);
    assert!(asked[0][1].as_array().unwrap().contains(&"tim".into()), "{asked:?}");
    assert!(asked[0][1].as_array().unwrap().contains(&"clock".into()), "a synonym joins: {asked:?}");
    assert_eq!(asked[1], serde_json::json!([0.3, ["tokyo"]]));
    assert!(asked.iter().any(|g| g[0] == 0.3 && g[1].as_array().unwrap().contains(&"get".into())), "{asked:?}");
    // A file name asks for a file.
    assert!(query(4).iter().any(|g| g[0] == 1.0 && g[1].as_array().unwrap().contains(&"fil".into())));
    // "how many" is the question, not "many" things.
    assert_eq!(query(5).len(), 1 + 3, "hours and the three question hints: {:?}", query(5));
    // A command stands for its words.
    let mkdir: Vec<String> = query(6).iter().map(|g| g[1].to_string()).collect();
    assert!(mkdir.iter().any(|g| g.contains("\"directory\"")) && mkdir.iter().any(|g| g.contains("\"mak\"")));
}

#[tokio::test]
async fn policy_labels_and_the_private_label_reach_the_frontend_as_short_marks() {
    let mut setup = crate::support::Setup::default().private(&["count"]).policy(
        r#"{"version": "1", "default": "allow",
            "tools": {"add": {"limits": [{"counter": "add_rate", "window": "minute", "max": 2}]},
                      "sleep": {"action": "approve"},
                      "huge": {"action": "approve", "limits": [{"counter": "h", "window": "hour", "max": 1}]},
                      "echo": {"action": "deny", "reason": "echo leaks text"}}}"#,
    );
    setup.policy_options.offer_denied = true;
    let h = setup.start().await.expect("the bridge starts");
    let message = h.bridge.catalog_message();
    let mark = |name: &str| message.tools.iter().find(|t| t.name == name).map(|t| t.mark.clone()).unwrap();
    assert_eq!(mark("add"), "limited");
    assert_eq!(mark("sleep"), "approval");
    assert_eq!(mark("huge"), "approval,limited");
    assert_eq!(mark("echo"), "denied");
    assert_eq!(mark("count"), "private");
    assert_eq!(mark("fail"), "");
    // The stub keeps the full label the mark stands for.
    let stub = |name: &str| message.tools.iter().find(|t| t.name == name).map(|t| t.stub.clone()).unwrap();
    assert!(stub("echo").contains("[denied: echo leaks text]") && stub("add").contains("[2 per minute]"));
    h.close().await;
}
