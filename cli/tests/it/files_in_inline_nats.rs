//! Inline files in over NATS (issue 42), with the frontend, the bridge and
//! the sandbox-runner as separate processes: bytes a client sends with
//! `run_python` (`files[].data`, base64) up to the inline limit
//! ([`code_mode_proto::MAX_INPUT_BYTES`], 2 MiB in all) reach the cell
//! whole, their hashes the host's, though the cell message is one NATS
//! message under the server's 1 MiB `max_payload`: the frontend writes the
//! larger ones to the bucket `codemode_files_in_inline`, which the runners
//! read, and small ones keep riding in the cell message (no bucket write),
//! in a fresh cell as in a kept session's later cell (sent to the runner
//! holding its container).
//! A frontend killed (`kill -9`) while it writes a file's chunks sends no
//! cell: the chunks it wrote are described by nothing, the client's call
//! ends with the clear "the frontend that held this call stopped" error of
//! the frontend that takes its address, and the same call through it
//! reaches the cell whole.
//! A bucket too full for a call's inline file (created 1 MiB small before
//! the frontend starts, which opens it as it is, and filled) ends the call
//! with an error naming the bucket, its bound and what to do; no cell
//! runs, nothing the call wrote stays readable, and once space frees the
//! same call runs whole.
//! A cell no sandbox-runner takes ends the call with an error saying so,
//! and the chunks its frontend wrote are purged: nobody will read them.
//! So are the chunks of a call a runner took, once it ends (its code
//! failed, ran past its deadline, or ended well): the runner read them
//! before the code started; and of a call its client cancels, or whose
//! session its client ends, while its cell runs.
//! Real nats-server (the deployment's users and permissions, its default
//! `max_payload`), real Docker, rmcp's client.

use std::io::Read as _;

use base64::Engine as _;
use serde_json::json;

use crate::auth::connect_as;
use crate::files_in::{error_of, run_with_files, sha256};
use crate::files_in_nats::jetstream_as;
use crate::support::{self, SplitHttp};

/// Each file under `/tmp/in`: its name, size and SHA-256.
const HASH_INPUTS: &str = r#"
import hashlib, os
for name in sorted(os.listdir("/tmp/in")):
    data = open(os.path.join("/tmp/in", name), "rb").read()
    print(name, len(data), hashlib.sha256(data).hexdigest())
"#;

/// `n` random bytes (the kernel's).
pub(crate) fn random_bytes(n: usize) -> Vec<u8> {
    let mut bytes = vec![0u8; n];
    std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes)).expect("/dev/urandom reads");
    bytes
}

/// A `files` entry of inline bytes.
pub(crate) fn inline(name: &str, bytes: &[u8]) -> serde_json::Value {
    json!({"name": name, "data": base64::engine::general_purpose::STANDARD.encode(bytes)})
}

/// Messages in the inline files-in bucket, as a runner sees them (0 when
/// it does not exist yet).
async fn chunks_in_bucket(js: &async_nats::jetstream::Context) -> u64 {
    match js.get_stream("KV_codemode_files_in_inline").await {
        Ok(mut stream) => stream.info().await.map(|i| i.state.messages).unwrap_or(0),
        Err(_) => 0,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_nats_inline_files_up_to_the_2_mib_inline_limit_reach_the_cell_whole_and_small_ones_stay_in_the_cell_message()
 {
    let Some(split) = SplitHttp::start() else { return };
    let (alice, tokens) = support::alice();
    let (_bridge, _runner) = split.services(&[], &[], &["--warm", "0"]);
    let (_frontend, url) = split.frontend(&tokens).await;
    let client = connect_as(&url, &alice, ()).await;
    let js = jetstream_as(&split.nats, &split.users, "sandbox-runner").await;

    // Small inline files (128 KiB in all): they stay in the cell message,
    // nothing is written to the bucket.
    let small = random_bytes(100_000);
    let tiny = random_bytes(31_072);
    let before = chunks_in_bucket(&js).await;
    let result = run_with_files(&client, HASH_INPUTS, json!([inline("a.bin", &small), inline("b.bin", &tiny)])).await;
    let report = support::report(&result);
    assert_eq!(report["error"], serde_json::Value::Null, "{report}");
    let expected = format!("a.bin 100000 {}\nb.bin 31072 {}\n", sha256(&small), sha256(&tiny));
    assert_eq!(report["stdout"], expected.as_str(), "{report}");
    assert_eq!(chunks_in_bucket(&js).await, before, "small inline files went through the bucket");

    // 2,097,152 bytes in all, the inline limit: twice the NATS message
    // bound, with its base64 nearly three times.
    let big = random_bytes(1_900_000);
    let middle = random_bytes(197_147);
    let note = b"small".to_vec();
    let files = json!([inline("big.bin", &big), inline("middle.bin", &middle), inline("note.txt", &note)]);
    let started = std::time::Instant::now();
    let result = run_with_files(&client, HASH_INPUTS, files).await;
    let took = started.elapsed();
    let report = support::report(&result);
    assert_eq!(report["error"], serde_json::Value::Null, "{report}");
    let expected = format!(
        "big.bin 1900000 {}\nmiddle.bin 197147 {}\nnote.txt 5 {}\n",
        sha256(&big),
        sha256(&middle),
        sha256(&note)
    );
    assert_eq!(report["stdout"], expected.as_str(), "{report}");
    // The two larger files went through the bucket in 256 KiB chunks (8 and
    // 1); the 5 bytes stayed in the message.
    assert_eq!(chunks_in_bucket(&js).await, before + 9, "the chunks of big.bin and middle.bin");
    eprintln!("measured: 2,097,152 inline bytes in three files reached the cell in {took:?} (call to result)");

    // One byte past the inline limit: refused naming it, no code run.
    let result = run_with_files(
        &client,
        "print('ran')",
        json!([inline("big.bin", &big), inline("more.bin", &random_bytes(197_153))]),
    )
    .await;
    let error = error_of(&result);
    assert!(
        error.contains("files[1] (more.bin): the inline files hold 2097153 bytes, over the 2097152 byte limit"),
        "{error}"
    );
    client.cancel().await.ok();
}

/// Chunks of a 2,000,000-byte file in the bucket (256 KiB each).
const CHUNKS_OF_2_MB: usize = 2_000_000usize.div_ceil(code_mode_core::files_in_shared::CHUNK_BYTES);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_nats_a_frontend_killed_while_it_writes_an_inline_files_chunks_sends_no_cell_the_call_ends_with_a_clear_error_and_a_new_frontend_runs_it_whole()
 {
    let Some(split) = SplitHttp::start() else { return };
    let (alice, tokens) = support::alice();
    let (_bridge, runner) = split.services(&[], &[], &["--warm", "0"]);
    let runner_pid = runner.id().expect("the runner runs");
    let js = jetstream_as(&split.nats, &split.users, "sandbox-runner").await;
    let big = random_bytes(2_000_000);
    let files = json!([inline("big.bin", &big)]);

    // The kill: as soon as a first chunk of the file is in the bucket, seen
    // through the runners' own view of it (stream info, polled); a new
    // frontend then starts on the same address (as behind a load balancer).
    // On a busy machine the test may see the chunk only after the frontend
    // stored the last one: then it tries again (at most 3 times).
    let mut attempt = 1;
    let (mut frontend, url) = split.frontend(&tokens).await;
    let (answer, written, ended_after, _again) = loop {
        let client = connect_as(&url, &alice, ()).await;
        let before = crate::files_faults::keys_of(&js, "codemode_files_in_inline").await;
        let frontend_pid = frontend.id().expect("the frontend runs");
        let killed = async {
            let give_up = std::time::Instant::now() + std::time::Duration::from_secs(60);
            while crate::files_faults::keys_of(&js, "codemode_files_in_inline").await.len() <= before.len() {
                assert!(std::time::Instant::now() < give_up, "no chunk reached the bucket within 60 s");
            }
            support::kill9(frontend_pid);
            frontend.wait().await.expect("the killed frontend is reaped");
            let killed_at = std::time::Instant::now();
            let listen = format!("127.0.0.1:{}", reqwest::Url::parse(&url).unwrap().port().expect("a port"));
            let args = ["--http", listen.as_str(), "--auth-tokens", tokens.arg()];
            let mut command = support::service_command(&split.nats.url(), &split.users, "frontend", &args, None);
            let (again, again_url, _log) = crate::http::spawn_http(&mut command).await;
            assert_eq!(again_url, url, "the new frontend serves the same address");
            (killed_at, again)
        };
        let mut params = rmcp::model::CallToolRequestParams::new("run_python");
        params.arguments = Some(json!({"code": HASH_INPUTS, "files": files}).as_object().unwrap().clone());
        // The call's own end, at most 60 s after it started.
        let call = tokio::time::timeout(std::time::Duration::from_secs(60), client.call_tool(params));
        let (answer, (killed_at, again)) = tokio::join!(call, killed);
        let ended_after = killed_at.elapsed();
        let keys = crate::files_faults::keys_of(&js, "codemode_files_in_inline").await;
        let written: Vec<String> = keys.into_iter().filter(|k| !before.contains(k)).collect();
        if written.len() < CHUNKS_OF_2_MB {
            break (answer, written, ended_after, again);
        }
        assert!(attempt < 3, "in 3 attempts the kill came only after the frontend's last chunk: {written:?}");
        eprintln!("attempt {attempt}: the kill came after the frontend's last chunk; again with a new frontend");
        attempt += 1;
        frontend = again;
    };

    // Killed in the middle of its writes: some of the file's chunks are
    // there, not all, under one id, and nothing else; no cell was sent, so
    // no container of the runner is there.
    let id = written.first().and_then(|k| k.split_once('.')).map(|(id, _)| id.to_string()).unwrap_or_default();
    assert!(!written.is_empty(), "no chunk written");
    assert!(written.iter().all(|k| k.starts_with(&format!("{id}.c"))), "only the file's chunks: {written:?}");
    assert!(support::containers_of(runner_pid).is_empty(), "a container ran: {:?}", support::containers_of(runner_pid));
    // The client's call ended with an error, never a result: rmcp resumed
    // the call's stream at the new frontend, which says the frontend
    // holding it stopped.
    let outcome = match &answer {
        Ok(Ok(result)) => panic!("the call got a result from a killed frontend: {result:?}"),
        Ok(Err(e)) => format!("error: {e}"),
        Err(_) => "no end within 60 s".to_string(),
    };
    eprintln!(
        "measured: the frontend killed (attempt {attempt}) with {} of {CHUNKS_OF_2_MB} chunks written; the call ended \
         {ended_after:?} after the kill: {outcome}",
        written.len()
    );
    assert!(outcome.contains("frontend that held this call stopped"), "{outcome}");

    // The new frontend runs the same call: the file reaches the cell whole.
    let client = connect_as(&url, &alice, ()).await;
    let report = support::report(&run_with_files(&client, HASH_INPUTS, files).await);
    assert_eq!(report["error"], serde_json::Value::Null, "{report}");
    assert_eq!(report["stdout"], format!("big.bin 2000000 {}\n", sha256(&big)).as_str(), "{report}");
    client.cancel().await.ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_nats_a_kept_sessions_later_cell_gets_a_large_inline_file_whole_beside_the_earlier_cells_variables_and_its_chunks_leave_the_bucket()
 {
    let Some(split) = SplitHttp::start() else { return };
    let (alice, tokens) = support::alice();
    let (_bridge, _runner) = split.services(&[], &[], &["--warm", "0"]);
    let (_frontend, url) = split.frontend_with(&tokens, &["--keep-variables"]).await;
    let client = connect_as(&url, &alice, ()).await;

    // The first cell makes the container and a variable; the second, sent
    // to the runner holding it, takes 1,500,000 inline bytes (6 chunks).
    let first = crate::http::run_python(&client, "kept = 41").await;
    assert_eq!(support::report(&first)["error"], serde_json::Value::Null, "{:?}", support::report(&first));
    let js = jetstream_as(&split.nats, &split.users, "sandbox-runner").await;
    let before = crate::files_faults::keys_of(&js, code_mode_core::files_in_shared::INLINE_BUCKET).await;
    let bytes = random_bytes(1_500_000);
    let code = format!("print(kept + 1)\n{HASH_INPUTS}");
    let report = support::report(&run_with_files(&client, &code, json!([inline("later.bin", &bytes)])).await);
    assert_eq!(report["error"], serde_json::Value::Null, "{report}");
    assert_eq!(report["stdout"], format!("42\nlater.bin 1500000 {}\n", sha256(&bytes)).as_str(), "{report}");
    // Placed in the kept container, the file's chunks leave the bucket
    // with the call.
    assert_eq!(written_and_purged(&js, &before, "the kept cell").await, 6, "the file's chunks");
    client.cancel().await.ok();
}

/// Bytes the bucket holds in the full-bucket test: 1 MiB, pre-created so by
/// the test (the frontend opens a bucket that is there as it is).
const SMALL_BUCKET_BYTES: i64 = 1024 * 1024;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_nats_an_inline_file_the_full_bucket_cannot_hold_ends_the_call_naming_the_bucket_runs_no_cell_leaves_nothing_and_runs_once_space_frees()
 {
    use async_nats::jetstream::kv;
    use code_mode_core::files_in_shared::{CHUNK_BYTES, INLINE_BUCKET, INPUTS_TTL};
    let Some(split) = SplitHttp::start() else { return };
    let (alice, tokens) = support::alice();
    let (_bridge, runner) = split.services(&[], &[], &["--warm", "0"]);
    let runner_pid = runner.id().expect("the runner runs");

    // The bucket, created before the frontend starts by the frontend's own
    // NATS user as the frontend would create it, but holding 1 MiB; then
    // filled with two chunks' worth of other calls' bytes (junk).
    let as_frontend = jetstream_as(&split.nats, &split.users, "frontend").await;
    let store = as_frontend
        .create_key_value(kv::Config {
            bucket: INLINE_BUCKET.to_string(),
            history: 1,
            max_value_size: (CHUNK_BYTES + 4096) as i32,
            max_bytes: SMALL_BUCKET_BYTES,
            max_age: INPUTS_TTL,
            storage: async_nats::jetstream::stream::StorageType::File,
            ..Default::default()
        })
        .await
        .expect("the frontend's user creates its bucket");
    let junk = ["0123456789abcdef0123456789abcdef.c0", "0123456789abcdef0123456789abcdef.c1"];
    for key in junk {
        store.put(key, random_bytes(CHUNK_BYTES).into()).await.expect("a junk chunk fits");
    }
    let (_frontend, url) = split.frontend(&tokens).await;
    let client = connect_as(&url, &alice, ()).await;
    let js = jetstream_as(&split.nats, &split.users, "sandbox-runner").await;
    let before = crate::files_faults::keys_of(&js, INLINE_BUCKET).await;
    assert_eq!(before, junk, "only the junk is in the bucket");

    // Two inline files (200,000 and 600,000 bytes, both past what the cell
    // message carries): the first fits in the space left, the second's
    // second chunk does not.
    let a = random_bytes(200_000);
    let b = random_bytes(600_000);
    let files = json!([inline("a.bin", &a), inline("b.bin", &b)]);
    let started = std::time::Instant::now();
    let result = run_with_files(&client, HASH_INPUTS, files.clone()).await;
    let took = started.elapsed();
    let error = error_of(&result);
    eprintln!("measured: the call with a file the full bucket cannot hold ended in {took:?}: {error}");
    assert!(error.contains("files[1] (b.bin)") && error.contains(INLINE_BUCKET), "{error}");
    assert!(error.contains("is full") && error.contains(&format!("{SMALL_BUCKET_BYTES} bytes")), "{error}");
    assert!(error.contains("try again"), "the error says what to do: {error}");
    assert!(took < std::time::Duration::from_secs(30), "the refusal took {took:?}");
    // No cell ran; the call wrote a.bin and b.bin's first chunk, and
    // neither is left readable in the bucket (only their purge markers).
    assert!(support::containers_of(runner_pid).is_empty(), "a container ran: {:?}", support::containers_of(runner_pid));
    let keys = crate::files_faults::keys_of(&js, INLINE_BUCKET).await;
    let written: Vec<&String> = keys.iter().filter(|k| !before.contains(k)).collect();
    assert_eq!(written.len(), 2, "a.bin's chunk and b.bin's first: {written:?}");
    let as_runner = js.get_key_value(INLINE_BUCKET).await.expect("the runner opens the bucket");
    for key in written {
        let left = as_runner.get(key).await.expect("the runner reads the bucket");
        assert!(left.is_none(), "{key} of the refused call is still in the bucket ({} bytes)", left.unwrap().len());
    }

    // Space frees (the junk purged, as its expiry would): the same call
    // runs, both files whole.
    for key in junk {
        store.purge(key).await.expect("the frontend's user purges its junk");
    }
    let result = run_with_files(&client, HASH_INPUTS, files).await;
    let report = support::report(&result);
    assert_eq!(report["error"], serde_json::Value::Null, "{report}");
    let expected = format!("a.bin 200000 {}\nb.bin 600000 {}\n", sha256(&a), sha256(&b));
    assert_eq!(report["stdout"], expected.as_str(), "{report}");
    client.cancel().await.ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_nats_a_cell_no_sandbox_runner_takes_ends_the_call_and_leaves_none_of_its_inline_files_readable_in_the_bucket()
 {
    use code_mode_core::files_in_shared::{CHUNK_BYTES, INLINE_BUCKET};
    let Some(split) = SplitHttp::start() else { return };
    let (alice, tokens) = support::alice();
    let (_bridge, mut runner) = split.services(&[], &[], &["--warm", "0"]);
    runner.kill().await.expect("the sandbox-runner is stopped");
    let (_frontend, url) = split.frontend_with(&tokens, &["--capacity-wait", "1"]).await;
    let client = connect_as(&url, &alice, ()).await;
    let js = jetstream_as(&split.nats, &split.users, "sandbox-runner").await;
    let before = crate::files_faults::keys_of(&js, INLINE_BUCKET).await;

    // 600,000 inline bytes, past what the cell message carries: written to
    // the bucket in three chunks, then no runner answers for the cell.
    let big = random_bytes(600_000);
    let result = run_with_files(&client, HASH_INPUTS, json!([inline("big.bin", &big)])).await;
    let error = error_of(&result);
    eprintln!("measured: the call no runner took ended with: {error}");
    assert!(error.contains("sandbox-runner"), "the error says no runner took the cell: {error}");

    // Its chunks were written and are purged: nobody will read them.
    let keys = crate::files_faults::keys_of(&js, INLINE_BUCKET).await;
    let written: Vec<&String> = keys.iter().filter(|k| !before.contains(k)).collect();
    assert_eq!(written.len(), big.len().div_ceil(CHUNK_BYTES), "the file's chunks were written: {written:?}");
    let as_runner = js.get_key_value(INLINE_BUCKET).await.expect("the runner opens the bucket");
    for key in written {
        let left = as_runner.get(key).await.expect("the runner reads the bucket");
        assert!(
            left.is_none(),
            "{key} of the call no runner took is still in the bucket ({} bytes)",
            left.unwrap().len()
        );
    }
    client.cancel().await.ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_nats_a_calls_inline_files_are_purged_from_the_bucket_when_it_ends_failed_past_its_deadline_or_done_after_the_runner_read_them()
 {
    use code_mode_core::files_in_shared::{CHUNK_BYTES, INLINE_BUCKET};
    let Some(split) = SplitHttp::start() else { return };
    let (alice, tokens) = support::alice();
    let (_bridge, _runner) = split.services(&[], &[], &["--warm", "0"]);
    let (_frontend, url) = split.frontend_with(&tokens, &["--deadline", "3"]).await;
    let client = connect_as(&url, &alice, ()).await;
    let js = jetstream_as(&split.nats, &split.users, "sandbox-runner").await;

    // 600,000 inline bytes, past what the cell message carries (three
    // chunks in the bucket). Each cell prints the file's hash (so the
    // runner took the cell and read the chunks), then fails, runs past its
    // 3 s deadline, or ends well.
    let big = random_bytes(600_000);
    let hashed = format!("big.bin 600000 {}\n", sha256(&big));
    let ends = [
        ("failed", "raise SystemExit('the code fails after reading its file')", true),
        ("past its deadline", "import sys, time\nsys.stdout.flush()\ntime.sleep(30)", true),
        ("done", "", false),
    ];
    for (how, tail, fails) in ends {
        let before = crate::files_faults::keys_of(&js, INLINE_BUCKET).await;
        let code = format!("{HASH_INPUTS}{tail}\n");
        let result = run_with_files(&client, &code, json!([inline("big.bin", &big)])).await;
        let report = support::report(&result);
        assert_eq!(report["stdout"], hashed.as_str(), "{how}: the runner read the file whole: {report}");
        assert_eq!(report["error"].is_string(), fails, "{how}: {report}");
        eprintln!("measured: the call {how} ended with error {}", report["error"]);

        // Its chunks were written, and none is readable once the call ended.
        let written = written_and_purged(&js, &before, how).await;
        assert_eq!(written, big.len().div_ceil(CHUNK_BYTES), "{how}: the file's chunks");
    }
    client.cancel().await.ok();
}

/// How many keys of the inline bucket are new since `before`, each
/// asserted unreadable (purged) as the runners see the bucket.
async fn written_and_purged(js: &async_nats::jetstream::Context, before: &[String], call: &str) -> usize {
    use code_mode_core::files_in_shared::INLINE_BUCKET;
    let keys = crate::files_faults::keys_of(js, INLINE_BUCKET).await;
    let written: Vec<&String> = keys.iter().filter(|k| !before.contains(k)).collect();
    let as_runner = js.get_key_value(INLINE_BUCKET).await.expect("the runner opens the bucket");
    for key in &written {
        let left = as_runner.get(*key).await.expect("the runner reads the bucket");
        assert!(
            left.is_none(),
            "{call}: {key} of the ended call is still in the bucket ({} bytes)",
            left.unwrap().len()
        );
    }
    written.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_nats_a_calls_inline_files_are_purged_when_its_client_cancels_it_or_ends_its_session_while_its_cell_runs()
{
    use code_mode_core::files_in_shared::{CHUNK_BYTES, INLINE_BUCKET};
    use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest};
    use rmcp::service::PeerRequestOptions;
    let Some(split) = SplitHttp::start() else { return };
    let (alice, tokens) = support::alice();
    let (_bridge, _runner) = split.services(&[], &[], &["--warm", "0"]);
    let (_frontend, url) = split.frontend_with(&tokens, &["--deadline", "60"]).await;
    let js = jetstream_as(&split.nats, &split.users, "sandbox-runner").await;
    let big = random_bytes(600_000);
    let chunks = big.len().div_ceil(CHUNK_BYTES);
    // The cell reads its file, then sleeps far past the test: the call is
    // still running when its client gives it up.
    let code = format!("{HASH_INPUTS}import sys, time\nsys.stdout.flush()\ntime.sleep(50)\n");
    for how in ["cancelled", "its session ended"] {
        let client = connect_as(&url, &alice, ()).await;
        let before = crate::files_faults::keys_of(&js, INLINE_BUCKET).await;
        let mut params = CallToolRequestParams::new("run_python");
        params.arguments = Some(json!({"code": code, "files": [inline("big.bin", &big)]}).as_object().unwrap().clone());
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let handle = client.peer().send_cancellable_request(request, PeerRequestOptions::no_options()).await.unwrap();
        // The frontend wrote the file's chunks before it sent the cell.
        let give_up = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while crate::files_faults::keys_of(&js, INLINE_BUCKET).await.len() < before.len() + chunks {
            assert!(std::time::Instant::now() < give_up, "{how}: the call's chunks are written within 30 s");
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        // The runner takes the cell and reads them; the code sleeps.
        tokio::time::sleep(std::time::Duration::from_secs(3)).await;
        match how {
            "cancelled" => handle.cancel(Some("the person pressed stop".into())).await.expect("the cancel is sent"),
            _ => client.cancel().await.map(drop).expect("the client ends its session"),
        }
        // Nobody reads the chunks now: none stays readable.
        let give_up = std::time::Instant::now() + std::time::Duration::from_secs(15);
        let as_runner = js.get_key_value(INLINE_BUCKET).await.expect("the runner opens the bucket");
        let keys = crate::files_faults::keys_of(&js, INLINE_BUCKET).await;
        let new: Vec<&String> = keys.iter().filter(|k| !before.contains(k)).collect();
        assert_eq!(new.len(), chunks, "{how}: the file's chunks: {new:?}");
        for key in new {
            while as_runner.get(key).await.expect("the runner reads the bucket").is_some() {
                assert!(
                    std::time::Instant::now() < give_up,
                    "{how}: {key} is still readable 15 s after the call ended"
                );
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
        }
        eprintln!("measured: the call {how}: its {chunks} chunks purged");
    }
}
