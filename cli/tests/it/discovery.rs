//! What the model finds of four real servers' tools from inside a cell:
//! `search_tools` on questions phrased as a model asks them, and result
//! shapes in `TOOLS`, through the real `code-mode run --config`, the real
//! sandbox and the reference servers (npm `@modelcontextprotocol/server-
//! everything`, `-memory`, `-filesystem`, PyPI `mcp-server-time`).
//!
//! The full evaluation (100 questions, recall printed) runs the same
//! `runner.py` code on the host: `services/bridge/tests/it/search.rs`.

use std::process::{Command, Stdio};

use code_mode_core::testing::peers::{npm_bin, venv_bin};
use serde_json::{Value, json};

use crate::support::{self, Ran, run_prepared};

#[test]
fn in_the_sandbox_search_tools_finds_real_tools_from_questions_and_stubs_show_their_result_fields() {
    if !support::sandbox_available() {
        return;
    }
    let Some((scratch, config)) = support::four_reference_servers("discovery") else { return };
    let code = r#"import json
questions = ["what time is it in Tokyo", "make a new folder", "apply line edits to a file",
             "add two numbers", "forget an entity from the knowledge graph"]
now = json.loads(await time__get_current_time({"timezone": "Asia/Tokyo"}))
print(json.dumps({
    "first": [list(search_tools(q, limit=1)) for q in questions],
    "summary": search_tools("what time is it in Tokyo", limit=1),
    "stub": TOOLS["time__get_current_time"],
    "keys": sorted(now),
}))"#;
    let mut cmd = Command::new(support::code_mode());
    cmd.args(["run", "--deadline", "60", "--config"]).arg(&config).arg("--code").arg(code);
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let ran: Ran = run_prepared(cmd);
    let seen: Value = serde_json::from_str(ran.ok()).unwrap_or_else(|e| panic!("{e}: {}", ran.stdout()));
    assert_eq!(
        seen["first"],
        json!([
            ["time__get_current_time"],
            ["filesystem__create_directory"],
            ["filesystem__edit_file"],
            ["everything__get_sum"],
            ["memory__delete_entities"]
        ])
    );
    assert_eq!(
        seen["summary"],
        json!({"time__get_current_time": "(timezone: str) -> {timezone: str, datetime: str, day_of_week: str, is_dst: bool}  Get current time in a specific timezone"})
    );
    // The stub says what the JSON result holds, and the result holds that.
    let stub = seen["stub"].as_str().unwrap();
    assert!(
        stub.contains("\n    returns JSON:\n        timezone: str\n        datetime: str\n        day_of_week: str\n        is_dst: bool\n"),
        "{stub}"
    );
    assert_eq!(seen["keys"], json!(["datetime", "day_of_week", "is_dst", "timezone"]));
    let _ = std::fs::remove_dir_all(&scratch);
}

/// The fenced block of `kind` after `heading` in `docs/what-the-model-reads.md`.
fn doc_block(doc: &str, heading: &str, kind: &str) -> String {
    let after = &doc[doc.find(heading).unwrap_or_else(|| panic!("{heading} is in the doc"))..];
    let start = after.find(&format!("```{kind}\n")).expect("a fenced block") + kind.len() + 4;
    let end = after[start..].find("\n```").expect("the block ends") + start;
    after[start..end].to_string()
}

#[test]
fn the_first_cell_of_the_task_runs_as_written_from_the_description_in_the_docs() {
    if !support::sandbox_available() {
        return;
    }
    let (Some(memory), Some(filesystem), Some(time)) =
        (npm_bin("mcp-server-memory"), npm_bin("mcp-server-filesystem"), venv_bin("mcp-server-time"))
    else {
        return;
    };
    let doc_path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/what-the-model-reads.md");
    let doc = std::fs::read_to_string(&doc_path).unwrap();
    let scratch = std::env::temp_dir().join(format!("code-mode-task-{}", uuid::Uuid::new_v4().simple()));
    let notes = scratch.join("notes");
    std::fs::create_dir_all(&notes).unwrap();
    std::fs::write(notes.join("a.txt"), "one two three").unwrap();
    std::fs::write(notes.join("b.md"), "four five\nsix seven eight").unwrap();
    let config = scratch.join("servers.json");
    let servers = json!({"mcpServers": {
        "memory": {"command": memory, "env": {"MEMORY_FILE_PATH": scratch.join("memory.jsonl")}},
        "fs": {"command": filesystem, "args": [&notes]},
        "time": {"command": time}
    }});
    std::fs::write(&config, servers.to_string()).unwrap();

    // The description in the docs is the one these servers get.
    let out = Command::new(support::code_mode())
        .args(["describe", "--json", "--config"])
        .arg(&config)
        .output()
        .expect("describe runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let described: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(described["tier"], "typed");
    assert_eq!(
        described["description"].as_str().unwrap(),
        doc_block(&doc, "## The description", "text"),
        "docs/what-the-model-reads.md holds an old description"
    );

    // The cell, as the docs write it, with the folder the task names.
    let cell = doc_block(&doc, "## The first cell", "python").replace("/data/notes", notes.to_str().unwrap());
    let mut cmd = Command::new(support::code_mode());
    cmd.args(["run", "--deadline", "60", "--config"]).arg(&config).arg("--code").arg(&cell);
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let ran: Ran = run_prepared(cmd);
    let seen: Value = serde_json::from_str(ran.ok()).unwrap_or_else(|e| panic!("{e}: {}", ran.stdout()));
    assert_eq!(seen["words"], json!({"a.txt": 3, "b.md": 5}));
    assert!(seen["tokyo"].as_str().unwrap().contains("+09:00"), "{seen}");
    let memory = std::fs::read_to_string(scratch.join("memory.jsonl")).unwrap();
    assert!(memory.contains("a.txt: 3 words") && memory.contains("b.md: 5 words"), "{memory}");
    let _ = std::fs::remove_dir_all(&scratch);
}
