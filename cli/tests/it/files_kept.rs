//! Files in and out of kept sessions, tasks and keyed runs (issue 42),
//! end to end through `serve --http` with two token identities, the real
//! sandbox and the test server offering resources: in a kept session
//! (`--keep-variables`) `/tmp/out` and `/tmp/in` stay from cell to cell,
//! each cell's result links only the files it made or changed, and those
//! links stay readable while the session lives, then `--files-ttl` more;
//! a kept session's cells, a task's cell and a run under an idempotency
//! key take `files` (the same key with other files is refused). Over NATS
//! (the services apart, real nats-server) the same, and a runner killed
//! (`kill -9`) while it holds a session's files leaves them readable by
//! their identity alone until `--files-ttl` after its last rewrite. The
//! official Python SDK, `mcp.Client` at its defaults (a kept session by
//! its handle) and `ClientSession` (by its MCP session), reads every link
//! of a kept session's two cells byte for byte.

use std::time::Duration;

use base64::Engine as _;
use rmcp::model::{CallToolRequestParams, CallToolResponse, CallToolResult, ReadResourceRequestParams, TaskStatus};
use rmcp::service::{RoleClient, RunningService};
use serde_json::{Value, json};

use crate::auth::{TokenFile, connect_as, token_new};
use crate::files_out::{links, read_back};
use crate::support::{self, SplitHttp};

/// `serve --http` with `args`, wrapping the test server offering resources
/// (`test://wiki/...`); the child, its URL.
async fn serve(args: &[&str]) -> (tokio::process::Child, String) {
    let mut serve = tokio::process::Command::new(support::code_mode());
    serve.args(["serve", "--http", "127.0.0.1:0", "--warm", "0"]).args(args).arg("--");
    serve.arg(support::test_server()).args(["--resources", "--resource-host", "wiki"]);
    serve.stdin(std::process::Stdio::null()).kill_on_drop(true);
    let (child, url, _log) = crate::http::spawn_http(&mut serve).await;
    (child, url)
}

fn params(code: &str, files: Value) -> CallToolRequestParams {
    let mut params = CallToolRequestParams::new("run_python");
    params.arguments = Some(json!({ "code": code, "files": files }).as_object().unwrap().clone());
    params
}

async fn run_with_files<H: rmcp::ClientHandler>(
    client: &RunningService<RoleClient, H>,
    code: &str,
    files: Value,
) -> CallToolResult {
    client.call_tool(params(code, files)).await.expect("run_python answers")
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The names of a result's links, and name -> URI.
fn named(result: &CallToolResult) -> (Vec<String>, std::collections::HashMap<String, String>) {
    let links = links(result);
    (links.iter().map(|l| l.0.clone()).collect(), links.into_iter().map(|l| (l.0, l.1)).collect())
}

/// A read that must fail as an unknown resource, the answer for a URI
/// that never existed.
async fn unknown<H: rmcp::ClientHandler>(client: &RunningService<RoleClient, H>, uri: &str) -> String {
    let refused = client.read_resource(ReadResourceRequestParams::new(uri)).await.expect_err("unknown");
    let text = refused.to_string();
    assert!(text.contains(&format!("unknown resource: {uri} (no such file, or expired)")), "{text}");
    text
}

const FIRST: &str = r#"
import os
print(sorted(os.listdir("/tmp/in")), open("/tmp/in/first.txt").read())
open("/tmp/out/a.txt", "w").write("one")
save_file("b.csv", "x\n1\n")
"#;

/// Reads what the first cell wrote back, and its files in (the first
/// cell's still there), then writes one file and changes another.
const SECOND: &str = r#"
import os
print(sorted(os.listdir("/tmp/in")), open("/tmp/in/small").read(), len(open("/tmp/in/blob.bin", "rb").read()))
print(sorted(os.listdir("/tmp/out")), open("/tmp/out/a.txt").read())
open("/tmp/out/c.txt", "w").write(open("/tmp/out/a.txt").read() + " two")
with open("/tmp/out/b.csv", "a") as f:
    f.write("2\n")
"#;

#[tokio::test]
async fn a_kept_sessions_folders_stay_each_cell_links_what_it_made_or_changed_and_links_live_until_the_session_ends_plus_the_ttl()
 {
    if !support::sandbox_available() {
        return;
    }
    const TTL: u64 = 4;
    let (alice, bob) = (token_new("alice"), token_new("bob"));
    let tokens = TokenFile::of(&[&alice, &bob]);
    let ttl = TTL.to_string();
    let (serve, url) = serve(&["--keep-variables", "--auth-tokens", tokens.arg(), "--files-ttl", &ttl]).await;
    let pid = serve.id().unwrap();
    let client = connect_as(&url, &alice, ()).await;

    // Cell 1: a file in for a kept session's first cell; two files out.
    let first = run_with_files(&client, FIRST, json!([{"name": "first.txt", "data": b64(b"first")}])).await;
    let report = support::report(&first);
    assert_eq!(report["stdout"], "['first.txt'] first\n", "{report}");
    let (names, one) = named(&first);
    assert_eq!(names, ["a.txt", "b.csv"], "{report}");

    // Cell 2: files in for a kept session's later cell (a wrapped server's
    // resource and an inline blob) join the first's; it reads the first's
    // file back, writes c.txt and changes b.csv: only those two come back.
    let blob: Vec<u8> = (0..200_000u32).map(|i| (i * 13 % 256) as u8).collect();
    let files = json!([{"uri": "test://wiki/small", "name": "small"}, {"name": "blob.bin", "data": b64(&blob)}]);
    let second = run_with_files(&client, SECOND, files).await;
    let report = support::report(&second);
    assert_eq!(
        report["stdout"], "['blob.bin', 'first.txt', 'small'] small 200000\n['a.txt', 'b.csv'] one\n",
        "{report}"
    );
    let (names, two) = named(&second);
    assert_eq!(names, ["b.csv", "c.txt"], "only what cell 2 made or changed: {report}");

    // Byte for byte, each link as its cell left the file.
    assert_eq!(read_back(&client, &one["a.txt"]).await, b"one");
    assert_eq!(read_back(&client, &one["b.csv"]).await, b"x\n1\n");
    assert_eq!(read_back(&client, &two["b.csv"]).await, b"x\n1\n2\n");
    assert_eq!(read_back(&client, &two["c.txt"]).await, b"one two");

    // Another identity: unknown, as a URI that never existed.
    let bob_client = connect_as(&url, &bob, ()).await;
    for uri in one.values().chain(two.values()) {
        unknown(&bob_client, uri).await;
    }
    bob_client.cancel().await.ok();

    // Past the time a one-shot cell's link lives, the session lives: the
    // links still work.
    tokio::time::sleep(Duration::from_secs(TTL + 2)).await;
    assert_eq!(read_back(&client, &one["a.txt"]).await, b"one", "read while the session lives");

    // The session ends (its container goes); its links live --files-ttl more.
    client.cancel().await.ok();
    let ended = std::time::Instant::now();
    let give_up = ended + Duration::from_secs(20);
    while !support::containers_of(pid).is_empty() && std::time::Instant::now() < give_up {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(support::containers_of(pid).is_empty(), "the session's container went");
    let again = connect_as(&url, &alice, ()).await;
    assert_eq!(read_back(&again, &two["c.txt"]).await, b"one two", "read just after the session ended");
    tokio::time::sleep(Duration::from_secs(TTL + 1).saturating_sub(ended.elapsed())).await;
    for uri in one.values().chain(two.values()) {
        unknown(&again, uri).await;
    }
    again.cancel().await.ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_cell_and_a_keyed_run_take_files_in_and_the_same_key_with_other_files_is_refused() {
    if !support::sandbox_available() {
        return;
    }
    let (alice, tokens) = support::alice();
    let (_serve, url) = serve(&["--auth-tokens", tokens.arg()]).await;
    let reads = "import os\nprint(sorted(os.listdir('/tmp/in')), open('/tmp/in/small').read(), \
                 open('/tmp/in/given.txt').read())";
    let files = json!([{"uri": "test://wiki/small"}, {"name": "given.txt", "data": b64(b"given")}]);

    // A task's cell.
    let tasks = crate::task_cells::connect_as(&url, &alice, crate::task_cells::stateless()).await;
    let answer = tasks.peer().call_tool_once(params(reads, files.clone())).await.expect("run_python answers");
    let CallToolResponse::Task(created) = answer else { panic!("a task handle, not {answer:?}") };
    let id = created.task.task_id;
    let (done, _) = crate::task_cells::settled(&tasks, &id, Duration::from_secs(60)).await;
    assert_eq!(done.task.status(), TaskStatus::Completed, "{done:?}");
    assert_eq!(crate::task_cells::report_of(&done)["stdout"], "['given.txt', 'small'] small given\n");
    tasks.cancel().await.ok();

    // A run under an idempotency key: its files are part of what the key
    // names. The same key and files give the earlier result (nothing runs
    // again); the same key with other files is refused.
    let client = connect_as(&url, &alice, ()).await;
    let keyed = |files: Value| {
        let mut params = params("import time\nprint(open('/tmp/in/given.txt').read(), time.time_ns())", files);
        let meta = json!({"io.code-mode/idempotency-key": "files-key"});
        params.meta = Some(rmcp::model::RequestMetaObject::from(meta.as_object().unwrap().clone()));
        params
    };
    let given = json!([{"name": "given.txt", "data": b64(b"given")}]);
    let once = client.call_tool(keyed(given.clone())).await.expect("run_python answers");
    let printed = support::report(&once)["stdout"].as_str().unwrap().to_string();
    assert!(printed.starts_with("given "), "{printed}");
    let twice = client.call_tool(keyed(given)).await.expect("run_python answers");
    assert_eq!(support::report(&twice)["stdout"], printed.as_str(), "the same key and files: the earlier result");
    let other = json!([{"name": "given.txt", "data": b64(b"other")}]);
    let refused = client.call_tool(keyed(other)).await.expect_err("the same key with other files is refused");
    assert!(refused.to_string().contains("other code or other files"), "{refused}");
    client.cancel().await.ok();
}

/// How long after `ended` a read of `uri` first failed (read every 250 ms,
/// at most four `ttl`s).
async fn gone_after<H: rmcp::ClientHandler>(
    client: &RunningService<RoleClient, H>,
    uri: &str,
    ended: std::time::Instant,
    ttl: u64,
) -> Duration {
    loop {
        match client.read_resource(ReadResourceRequestParams::new(uri)).await {
            Err(_) => return ended.elapsed(),
            Ok(_) => {
                let elapsed = ended.elapsed();
                assert!(elapsed < Duration::from_secs(4 * ttl), "{uri} still read {elapsed:?} after the end");
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_nats_a_kept_sessions_links_outlive_the_files_ttl_while_it_lives_and_go_the_ttl_after_it_ends() {
    const TTL: u64 = 6;
    let Some(split) = SplitHttp::start() else { return };
    let (alice, bob) = (token_new("alice"), token_new("bob"));
    let tokens = TokenFile::of(&[&alice, &bob]);
    let ttl = TTL.to_string();
    let resources = ["--resources", "--resource-host", "wiki"];
    let (_bridge, _runner) = split.services(&[], &resources, &["--warm", "0", "--files-ttl", &ttl]);
    let (_frontend, url) = split.frontend_with(&tokens, &["--keep-variables", "--files-ttl", &ttl]).await;
    let client = connect_as(&url, &alice, ()).await;

    let first = crate::http::run_python(&client, "open('/tmp/out/a.txt', 'w').write('one')").await;
    let (names, one) = named(&first);
    assert_eq!(names, ["a.txt"], "{:?}", support::report(&first));
    // A later kept cell's files in over NATS: a resource past 128 KiB (it
    // comes through codemode_files_in) and an inline file.
    let code = "import os\nprint(sorted(os.listdir('/tmp/in')), len(open('/tmp/in/big').read()))\n\
                open('/tmp/out/c.txt', 'w').write(open('/tmp/out/a.txt').read() + ' two')";
    let files = json!([{"uri": "test://wiki/big/300000", "name": "big"}, {"name": "given.txt", "data": b64(b"given")}]);
    let second = run_with_files(&client, code, files).await;
    assert_eq!(support::report(&second)["stdout"], "['big', 'given.txt'] 300000\n", "{:?}", support::report(&second));
    let (names, two) = named(&second);
    assert_eq!(names, ["c.txt"], "only what cell 2 made: {:?}", support::report(&second));
    assert_eq!(read_back(&client, &one["a.txt"]).await, b"one");
    assert_eq!(read_back(&client, &two["c.txt"]).await, b"one two");
    let bob_client = connect_as(&url, &bob, ()).await;
    unknown(&bob_client, &two["c.txt"]).await;
    bob_client.cancel().await.ok();

    // Past the bucket's max_age the session still lives: its runner wrote
    // its files again, so the links still work.
    tokio::time::sleep(Duration::from_secs(TTL + 3)).await;
    assert_eq!(read_back(&client, &one["a.txt"]).await, b"one", "read while the session lives");

    // The session ends; its links live --files-ttl more, then are unknown.
    client.cancel().await.ok();
    let ended = std::time::Instant::now();
    let again = connect_as(&url, &alice, ()).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(read_back(&again, &two["c.txt"]).await, b"one two", "read just after the session ended");
    // Each link goes on its own: the runner wrote the session's files again
    // one after another when it ended, so one may outlive another by the
    // time a write takes and the bucket's sweep.
    for uri in [&one["a.txt"], &two["c.txt"]] {
        let gone_after = gone_after(&again, uri, ended, TTL).await;
        eprintln!(
            "measured: a kept session's link {uri} was unknown {gone_after:?} after the session ended (--files-ttl {TTL})"
        );
        assert!(gone_after >= Duration::from_secs(TTL - 1), "gone {gone_after:?} after the end, before --files-ttl");
        unknown(&again, uri).await;
    }
    again.cancel().await.ok();
}

/// The names of the links of the SDK driver's step `step` (a cell that
/// must have run without error).
fn links_of(api: &str, ran: &[Value], step: usize, stderr: &str) -> Vec<String> {
    let result = &ran[step]["result"];
    assert_ne!(result["isError"], true, "{api}: step {step}: {} {stderr}", ran[step]);
    assert!(result["structuredContent"]["error"].is_null(), "{api}: step {step}: {result}");
    let content = result["content"].as_array().cloned().unwrap_or_default();
    content.iter().filter(|c| c["type"] == "resource_link").map(|c| c["name"].as_str().unwrap().into()).collect()
}

/// The bytes each `resources/read` of the driver's `read_links` step `step`
/// gave.
fn reads_of(api: &str, ran: &[Value], step: usize, stderr: &str) -> Vec<Vec<u8>> {
    let reads = ran[step]["result"].as_array().unwrap_or_else(|| panic!("{api}: step {step}: {} {stderr}", ran[step]));
    let result = |read: &Value| serde_json::from_value(read.clone()).expect("a resources/read result");
    reads.iter().map(|read| crate::files_out::bytes_of(&result(read))).collect()
}

/// A kept session's first cell for the Python SDK's clients: a text file
/// and a binary one.
const FIRST_PY: &str = r#"
open("/tmp/out/a.txt", "w").write("one")
save_file("b.bin", bytes(range(256)) * 4)
"#;

/// Its second cell: reads the first's text back, writes a file from it and
/// appends to the binary.
const SECOND_PY: &str = r#"
print(open("/tmp/out/a.txt").read())
open("/tmp/out/c.txt", "w").write(open("/tmp/out/a.txt").read() + " two")
with open("/tmp/out/b.bin", "ab") as f:
    f.write(bytes([0, 255]))
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_python_sdk_clients_at_their_defaults_read_every_link_of_both_cells_of_a_kept_session_byte_for_byte() {
    if !support::sandbox_available() {
        return;
    }
    let (alice, tokens) = support::alice();
    let (_serve, url) = serve(&["--keep-variables", "--auth-tokens", tokens.arg()]).await;
    let bearer = format!("Authorization: {}", crate::auth::bearer(&alice));
    let first_bin: Vec<u8> = (0..4).flat_map(|_| 0..=255u8).collect();
    let second_bin: Vec<u8> = first_bin.iter().copied().chain([0, 255]).collect();
    // `mcp.Client` at its defaults speaks the stateless protocol: its kept
    // session is the handle the first result carries, sent back with the
    // second cell; `ClientSession`'s is its MCP session.
    for (api, first, second) in [
        ("client", json!({"code": FIRST_PY, "session": "new"}), json!({"code": SECOND_PY})),
        ("session", json!({"code": FIRST_PY}), json!({"code": SECOND_PY})),
    ] {
        let steps = json!([
            {"op": "call", "tool": "run_python", "arguments": first},
            {"op": "read_links"},
            {"op": "call", "tool": "run_python", "arguments": second, "session_from_last": api == "client"},
            {"op": "read_links"},
            {"op": "read_links", "of_step": 0},
        ]);
        let args = ["--url", url.as_str(), "--header", &bearer, "--api", api];
        let Some((ran, stderr)) = support::python_sdk(&args, &steps).await else { return };
        let (names, read) = (|step| links_of(api, &ran, step, &stderr), |step| reads_of(api, &ran, step, &stderr));
        assert_eq!(names(0), ["a.txt", "b.bin"], "{api}");
        assert_eq!(read(1), [b"one".to_vec(), first_bin.clone()], "{api}: the first cell's links");
        assert_eq!(names(2), ["b.bin", "c.txt"], "{api}: only what the second cell made or changed");
        assert_eq!(
            ran[2]["result"]["structuredContent"]["stdout"], "one\n",
            "{api}: the second cell read the first's file"
        );
        assert_eq!(read(3), [second_bin.clone(), b"one two".to_vec()], "{api}: the second cell's links");
        assert_eq!(read(4), [b"one".to_vec(), first_bin.clone()], "{api}: the first cell's links keep their bytes");
    }
}

/// When the entries of the file `id` in the bucket `codemode_files` were
/// last written, as the runners' user reads them: the oldest and the
/// newest (Unix time).
async fn written(js: &async_nats::jetstream::Context, id: &str) -> (Duration, Duration) {
    let store = js.get_key_value("codemode_files").await.expect("the runners open the files bucket");
    let mut times = Vec::new();
    for key in crate::files_faults::keys_of(js, "codemode_files").await {
        if key.starts_with(&format!("{id}.")) {
            let entry = store.entry(key.clone()).await.expect("an entry is read").expect("the entry is there");
            times.push(Duration::from_nanos(entry.created.unix_timestamp_nanos() as u64));
        }
    }
    assert!(times.len() >= 2, "the file's chunks and description: {times:?}");
    (*times.iter().min().unwrap(), *times.iter().max().unwrap())
}

fn unix_now() -> Duration {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("after 1970")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_nats_a_runner_killed_while_it_holds_a_kept_sessions_files_leaves_their_links_to_their_identity_until_the_files_ttl_after_its_last_rewrite()
 {
    const TTL: u64 = 6;
    let Some(split) = SplitHttp::start() else { return };
    let (alice, bob) = (token_new("alice"), token_new("bob"));
    let tokens = TokenFile::of(&[&alice, &bob]);
    let ttl = TTL.to_string();
    let (_bridge, mut runner) = split.services(&[], &[], &["--warm", "0", "--files-ttl", &ttl]);
    let (_frontend, url) = split.frontend_with(&tokens, &["--keep-variables", "--files-ttl", &ttl]).await;
    let client = connect_as(&url, &alice, ()).await;
    // A 1 MiB file: four chunks and a description in the bucket.
    let first = crate::http::run_python(&client, "save_file('a.bin', bytes(range(256)) * 4096)").await;
    let (names, one) = named(&first);
    assert_eq!(names, ["a.bin"], "{:?}", support::report(&first));
    let uri = one["a.bin"].clone();
    let id = uri.trim_start_matches("code-mode://files/").split('/').next().unwrap().to_string();
    let bytes: Vec<u8> = (0..4096).flat_map(|_| 0..=255u8).collect();

    // Past the bucket's max_age the runner has written the file again.
    tokio::time::sleep(Duration::from_secs(TTL + 1)).await;
    assert!(read_back(&client, &uri).await == bytes, "read while the session lives");

    // The runner holding the session's container is killed.
    let runner_pid = runner.id().expect("the runner runs");
    assert_eq!(support::containers_of(runner_pid).len(), 1, "the session's container");
    support::kill9(runner_pid);
    runner.wait().await.expect("the killed runner is reaped");
    let killed_at = unix_now();
    let js = crate::files_in_nats::jetstream_as(&split.nats, &split.users, "sandbox-runner").await;
    let (oldest, last_rewrite) = written(&js, &id).await;
    assert!(last_rewrite <= killed_at, "written after the kill: {last_rewrite:?} > {killed_at:?}");
    assert!(
        killed_at - last_rewrite <= Duration::from_secs(TTL / 2 + 1),
        "no rewrite in the last half TTL before the kill: {:?}",
        killed_at - last_rewrite
    );

    // Until it expires, alice reads it byte for byte and bob reads nothing.
    let bob = connect_as(&url, &bob, ()).await;
    let mut reads = 0;
    let gone_at = loop {
        match client.read_resource(ReadResourceRequestParams::new(uri.clone())).await {
            Ok(read) => {
                assert!(crate::files_out::bytes_of(&read) == bytes, "read back differs after the kill");
                reads += 1;
                unknown(&bob, &uri).await;
                assert!(unix_now() < last_rewrite + Duration::from_secs(3 * TTL), "still read long after the TTL");
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(_) => break unix_now(),
        }
    };
    unknown(&client, &uri).await;
    unknown(&bob, &uri).await;
    let after_rewrite = gone_at.saturating_sub(last_rewrite);
    eprintln!(
        "measured: the runner killed {:?} after its last rewrite; alice read the link {reads} times after the \
         kill; unknown {after_rewrite:?} after the last rewrite (--files-ttl {TTL})",
        killed_at - last_rewrite
    );
    assert!(reads > 0, "the link was unknown at once after the kill");
    assert!(after_rewrite <= Duration::from_secs(TTL + 2), "unknown only {after_rewrite:?} after the last rewrite");
    assert!(gone_at + Duration::from_secs(1) >= oldest + Duration::from_secs(TTL), "gone before its TTL");

    // The session's container, left by the killed runner, is reaped by the
    // next runner on the engine.
    let _next = support::spawn_service(&split.nats.url(), &split.users, "sandbox-runner", &["--warm", "0"], None);
    let reaped = support::eventually(Duration::from_secs(20), || support::containers_of(runner_pid).is_empty()).await;
    assert!(reaped, "the killed runner's container is left: {:?}", support::containers_of(runner_pid));
    client.cancel().await.ok();
    bob.cancel().await.ok();
}
