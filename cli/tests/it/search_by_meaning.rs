//! Search by meaning (issue 43) through the real thing: `code-mode run` and
//! the split services over a secured nats-server, the real sandbox, the
//! four reference servers, and the sentence encoder loaded from the
//! directory `scripts/get-model.sh` fills (`--search-model`).
//!
//! The questions are tuning questions (`tune-43.json`) that words alone
//! rank wrong over these servers and meaning ranks right; each test checks
//! both sides, so it fails if the cell never asks, the bridge never
//! answers, or the answer is not used.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use code_mode_core::testing::NatsServer;
use code_mode_core::testing::peers::search_model;
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

use crate::support::{self, Ran, connect_client, kill9, report, run_prepared, run_python, service_command};

/// (question, the tool meant): words alone rank another tool first.
const ASKED: [(&str, &str); 3] = [
    ("have the connected client's model draft a two-line slogan for a bakery", "everything__trigger_sampling_request"),
    ("peek at the first few rows of this csv before I load it into pandas", "filesystem__read_text_file"),
    ("bob doesnt like jazz anymore", "memory__delete_observations"),
];

/// The cell's code: the first tool `search_tools` gives for each question.
fn code() -> String {
    let questions: Vec<&str> = ASKED.iter().map(|(q, _)| *q).collect();
    format!("import json\nprint(json.dumps([list(search_tools(q, limit=1)) for q in {}]))", json!(questions))
}

fn meant() -> Value {
    json!(ASKED.iter().map(|(_, tool)| vec![*tool]).collect::<Vec<_>>())
}

/// `code-mode run --config config [extra]` of the cell's code, optionally
/// inside a network namespace of its own (no interface but loopback).
fn run(config: &Path, extra: &[&std::ffi::OsStr], no_network: bool) -> Ran {
    let mut cmd = if no_network {
        let mut cmd = Command::new("unshare");
        cmd.args(["--net", "--"]).arg(support::code_mode());
        cmd
    } else {
        Command::new(support::code_mode())
    };
    cmd.args(["run", "--deadline", "60", "--config"]).arg(config).args(extra).arg("--code").arg(code());
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    run_prepared(cmd)
}

fn firsts(ran: &Ran) -> Value {
    serde_json::from_str(ran.ok()).unwrap_or_else(|e| panic!("{e}: {} {}", ran.stdout(), ran.stderr()))
}

#[test]
fn with_a_search_model_a_cell_finds_by_meaning_the_tools_words_alone_rank_lower_with_no_network_at_all() {
    if !support::sandbox_available() {
        return;
    }
    let Some(model) = search_model() else { return };
    let Some((scratch, config)) = support::four_reference_servers("meaning") else { return };
    let words = firsts(&run(&config, &[], false));
    for (got, (question, tool)) in words.as_array().unwrap().iter().zip(ASKED) {
        assert_ne!(got, &json!([tool]), "words alone already rank {tool} first for {question:?}");
    }
    // The model is read from its directory only: in a network namespace
    // with no way out (a fetch would fail), meaning still ranks.
    let model_flag = [std::ffi::OsStr::new("--search-model"), model.as_os_str()];
    let ran = run(&config, &model_flag, true);
    assert_eq!(firsts(&ran), meant(), "{}", ran.stderr());
    let _ = std::fs::remove_dir_all(&scratch);
}

#[test]
fn a_search_model_directory_without_the_models_files_stops_startup_naming_the_file() {
    let empty = std::env::temp_dir().join(format!("code-mode-no-model-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&empty).unwrap();
    let out = Command::new(support::code_mode())
        .args(["run", "--code", "print(1)", "--search-model"])
        .arg(&empty)
        .arg("--")
        .arg(support::test_server())
        .stdin(Stdio::null())
        .output()
        .expect("code-mode runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "startup stops: {stderr}");
    assert!(
        stderr.contains("--search-model") && stderr.contains(&empty.join("config.json").display().to_string()),
        "the error names the flag and the file: {stderr}"
    );
    let _ = std::fs::remove_dir_all(&empty);
}

/// A bridge over NATS with `extra` flags and `env`, and a task that says
/// when its catalog's tools are read for search by meaning.
fn bridge(
    url: &str,
    users: &code_mode_core::testing::NatsUsers,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (tokio::process::Child, tokio::sync::watch::Receiver<bool>) {
    let mut cmd = service_command(url, users, "bridge", extra, None);
    cmd.envs(env.iter().copied()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("the bridge starts");
    let (read, seen) = tokio::sync::watch::channel(false);
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains("search by meaning: the catalog's tools are read") {
                let _ = read.send(true);
            }
        }
    });
    (child, seen)
}

async fn read_within(mut seen: tokio::sync::watch::Receiver<bool>, within: Duration) {
    tokio::time::timeout(within, seen.wait_for(|read| *read))
        .await
        .expect("the bridge reads its catalog's tools in time")
        .expect("the bridge's log is read");
}

#[tokio::test]
async fn over_nats_search_falls_back_to_words_while_no_bridge_has_the_model_and_ranks_by_meaning_again_after_one_returns()
 {
    if !support::sandbox_available() {
        return;
    }
    let Some(model) = search_model() else { return };
    let Some((scratch, config)) = support::four_reference_servers("meaning") else { return };
    let Some((nats, users)) = NatsServer::start_secured() else { return };
    let url = nats.url();
    let config = config.to_str().unwrap();
    let model = model.to_str().unwrap();
    let with_model = ["--config", config, "--search-model", model];
    let (first, read) = bridge(&url, &users, &with_model, &[]);
    read_within(read, Duration::from_secs(60)).await;
    let _runner = support::spawn_service(&url, &users, "sandbox-runner", &[], None);
    let mut cmd = tokio::process::Command::new(support::code_mode());
    cmd.arg("frontend").args(["--nats", &url]);
    cmd.env("CODE_MODE_NATS_USER", "frontend").env("CODE_MODE_NATS_PASSWORD", users.password("frontend"));
    let client = connect_client(cmd).await.0;
    let printed = |result: &rmcp::model::CallToolResult| -> Value {
        let stdout = report(result)["stdout"].as_str().unwrap_or_default().to_string();
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {}", report(result)))
    };
    // The runner asks the bridge through the deployment's permissions.
    assert_eq!(printed(&run_python(&client, &code()).await), meant(), "by meaning over NATS");

    // The bridge with the model dies; one without it serves.
    let (_plain, _) = bridge(&url, &users, &["--config", config], &[]);
    tokio::time::sleep(Duration::from_secs(3)).await;
    kill9(first.id().expect("the bridge runs"));
    let words = printed(&run_python(&client, &code()).await);
    for (got, (question, tool)) in words.as_array().unwrap().iter().zip(ASKED) {
        assert_ne!(got, &json!([tool]), "no bridge has the model, yet {tool} is first for {question:?}");
    }

    // A bridge with the model comes back, given it by the settings
    // variable the compose override uses (docs/deployment.md): meaning
    // ranks again.
    let by_variable = [("CODE_MODE_BRIDGE__SEARCH_MODEL", model)];
    let (_again, read) = bridge(&url, &users, &["--config", config], &by_variable);
    read_within(read, Duration::from_secs(60)).await;
    drop(_plain);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(printed(&run_python(&client, &code()).await), meant(), "by meaning once a bridge has the model again");
    client.cancel().await.unwrap();
    let _ = std::fs::remove_dir_all(&scratch);
}

/// Hostile code asks the host's encoder as often as it likes, straight
/// through the runner's own object (code shares its process): the runner
/// passes 200 questions of a cell to the bridge and answers later ones
/// with nothing itself, and none of them spends the cell's call budget.
#[test]
fn a_cell_flooding_questions_by_meaning_gets_answers_for_200_then_nothing_and_keeps_its_call_budget() {
    if !support::sandbox_available() {
        return;
    }
    let Some(model) = search_model() else { return };
    let code = r#"import gc, json, time
caller = next(o for o in gc.get_objects() if type(o).__name__ == 'ToolCaller')
answered = []
started = time.monotonic()
while len(answered) < 250:
    caller._meaning_off = False
    near = caller.meaning("add two integers")
    answered.append(near is not None)
    if not any(answered) and time.monotonic() - started > 20:
        break
first = answered.index(True) if True in answered else -1
print(json.dumps({"first": first, "asked": len(answered),
                  "after_first_to_200": all(answered[first:200]),
                  "past_200": any(answered[200:])}))
print(await add({"a": 2, "b": 3}))"#;
    let mut cmd = Command::new(support::code_mode());
    cmd.args(["run", "--deadline", "90", "--max-calls", "1", "--search-model"]).arg(&model);
    cmd.arg("--code").arg(code).arg("--").arg(support::test_server());
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let ran = run_prepared(cmd);
    let printed = ran.ok().to_string();
    let mut lines = printed.lines();
    let seen: Value =
        serde_json::from_str(lines.next().unwrap_or_default()).unwrap_or_else(|e| panic!("{e}: {printed}"));
    assert_eq!(seen["asked"], 250, "{seen}");
    let first = seen["first"].as_i64().unwrap();
    assert!((0..200).contains(&first), "some question within the first 200 is answered: {seen}");
    assert_eq!(seen["after_first_to_200"], true, "every question up to the 200th is answered once one is: {seen}");
    assert_eq!(seen["past_200"], false, "no question past the 200th is answered: {seen}");
    assert_eq!(lines.next(), Some(r#"{"sum":5}"#), "the one call the budget allows still runs: {printed}");
}

/// A kept session (`--keep-variables`) under `serve`: each cell of the
/// session's one container asks by meaning anew, even after a cell whose
/// searches got no answer (a cell stops asking after an empty answer; the
/// next cell starts asking again).
#[tokio::test]
async fn in_a_kept_session_every_cell_ranks_by_meaning_and_one_without_an_answer_does_not_stop_the_next() {
    if !support::sandbox_available() {
        return;
    }
    let Some(model) = search_model() else { return };
    let Some((scratch, config)) = support::four_reference_servers("meaning") else { return };
    let mut serve = tokio::process::Command::new(support::code_mode());
    serve.args(["serve", "--keep-variables", "--warm", "0", "--config"]).arg(&config).arg("--search-model").arg(&model);
    let client = connect_client(serve).await.0;
    let printed = |result: &rmcp::model::CallToolResult| -> Value {
        let stdout = report(result)["stdout"].as_str().unwrap_or_default().to_string();
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {}", report(result)))
    };
    // A cell whose host says "no answer": the runner's own object told so
    // (what a cell sees when the bridge has no model or is still reading).
    let silenced = format!(
        "import gc\ncaller = next(o for o in gc.get_objects() if type(o).__name__ == 'ToolCaller')\n\
         caller._meaning_off = True\n{}",
        code()
    );
    let words = printed(&run_python(&client, &silenced).await);
    assert_ne!(words, meant(), "a cell told there is no answer ranks by words alone");
    // The next cells of the same session ask again (the bridge may still
    // be reading its tools: a few tries).
    let mut by_meaning = Value::Null;
    for _ in 0..20 {
        by_meaning = printed(&run_python(&client, &format!("kept = 'yes'\n{}", code())).await);
        if by_meaning == meant() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(by_meaning, meant(), "a later cell of the kept session ranks by meaning");
    let again = printed(&run_python(&client, &format!("assert kept == 'yes'\n{}", code())).await);
    assert_eq!(again, meant(), "and the one after it, in the same container");
    client.cancel().await.unwrap();
    let _ = std::fs::remove_dir_all(&scratch);
}
