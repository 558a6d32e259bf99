//! Files in over NATS (issue 42), with the frontend, the bridge and the
//! sandbox-runner as separate processes: a file in past the NATS server's
//! 1 MiB message bound (a wrapped server's 5 MB resource, a tool's 5 MB
//! text) reaches the cell whole, its hash the host's, through the shared
//! store the bridge writes and the runners read; a file past the files-in
//! limit is refused naming it; a bridge killed (`kill -9`) while it writes
//! such a file's chunks ends the cell before its code runs, naming the file,
//! within the run's deadline, and a new bridge serves the next cell; a
//! bucket too full for a file (an operator's, 1 MiB and no max age, filled)
//! ends the cell before its code naming the bucket and what frees it, the
//! file's chunks written so far purged, and once room frees the same cell
//! gets the file whole. Real nats-server (the deployment's users and
//! permissions, its default `max_payload`), real Docker, rmcp's client.

use std::time::Duration;

use serde_json::json;
use tokio::time::Instant;

use crate::auth::connect_as;
use crate::files_in::{error_of, run_with_files, sha256};
use crate::support::{self, SplitHttp};

/// Each file under `/tmp/in`: its name, size and SHA-256.
const HASH_INPUTS: &str = r#"
import hashlib, os
for name in sorted(os.listdir("/tmp/in")):
    data = open(os.path.join("/tmp/in", name), "rb").read()
    print(name, len(data), hashlib.sha256(data).hexdigest())
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_nats_a_5_mb_file_in_from_a_resource_or_a_tool_reaches_the_cell_whole_and_one_past_the_limit_is_refused() {
    let Some(split) = SplitHttp::start() else { return };
    let (alice, tokens) = support::alice();
    let (_bridge, _runner) = split.services(&[], &["--resources", "--resource-host", "wiki"], &["--warm", "0"]);
    let (_frontend, url) = split.frontend(&tokens).await;
    let client = connect_as(&url, &alice, ()).await;

    // A wrapped server's 5 MB resource: five times the NATS message bound.
    let resource = "x".repeat(5_000_000);
    let result =
        run_with_files(&client, HASH_INPUTS, json!([{"uri": "test://wiki/big/5000000", "name": "big.txt"}])).await;
    let report = support::report(&result);
    assert_eq!(report["error"], serde_json::Value::Null, "{report}");
    assert_eq!(report["stdout"], format!("big.txt 5000000 {}\n", sha256(resource.as_bytes())), "{report}");

    // A tool's 5 MB text (echo repeated), and a small resource beside it.
    let text = "abcd".repeat(1_250_000);
    let files = json!([
        {"tool": "echo", "arguments": {"text": "abcd", "repeat": 1_250_000}, "name": "echo.txt"},
        {"uri": "test://wiki/small", "name": "small"},
    ]);
    let result = run_with_files(&client, HASH_INPUTS, files).await;
    let report = support::report(&result);
    assert_eq!(report["error"], serde_json::Value::Null, "{report}");
    let expected = format!("echo.txt 5000000 {}\nsmall 5 {}\n", sha256(text.as_bytes()), sha256(b"small"));
    assert_eq!(report["stdout"], expected.as_str(), "{report}");

    // Past the files-in limit: refused naming it, no code run.
    let result = run_with_files(&client, "print('ran')", json!([{"uri": "test://wiki/big/8388609"}])).await;
    let error = error_of(&result);
    assert!(
        error.contains(
            "files[0] (test://wiki/big/8388609): resources/read test://wiki/big/8388609: the file is 8388609 bytes, \
             over the 8388608 byte limit of files in (refused, not cut)"
        ),
        "{error}"
    );
    if let Some(report) = &result.structured_content {
        assert_eq!(report["stdout"], "", "the code ran: {report}");
    }
    client.cancel().await.ok();

    // The bytes went through the bucket codemode_files_in: bounded and
    // expiring, its chunks there for the runners (who read it), while the
    // frontends cannot even look at it.
    let runner = jetstream_as(&split.nats, &split.users, "sandbox-runner").await;
    let mut stream = runner.get_stream("KV_codemode_files_in").await.expect("the runners see the files-in bucket");
    let info = stream.info().await.expect("its info");
    assert_eq!(info.config.max_age, code_mode_core::files_in_shared::INPUTS_TTL);
    assert_eq!(info.config.max_bytes, code_mode_core::files_in_shared::INPUTS_MAX_BYTES);
    assert!(info.state.messages >= 40, "two 5 MB files in 256 KiB chunks: {:?}", info.state);
    let frontend = jetstream_as(&split.nats, &split.users, "frontend").await;
    assert!(frontend.get_stream("KV_codemode_files_in").await.is_err(), "a frontend may not read files in");
}

/// Chunks of a 5,000,000-byte file in the bucket (256 KiB each).
const CHUNKS_OF_5_MB: usize = 5_000_000usize.div_ceil(code_mode_core::files_in_shared::CHUNK_BYTES);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_nats_a_bridge_killed_while_it_writes_a_files_chunks_ends_the_cell_before_its_code_naming_the_file_and_a_new_bridge_serves_the_next()
 {
    let Some(split) = SplitHttp::start() else { return };
    let (alice, tokens) = support::alice();
    // The bridge at its defaults (a call may take 30 s), the run's deadline
    // shorter: reading the file before the code starts counts in it.
    let server_args = ["--resources", "--resource-host", "wiki"];
    let (mut bridge, runner) = split.services(&[], &server_args, &["--warm", "0"]);
    let runner_pid = runner.id().expect("the runner runs");
    let (_frontend, url) = split.frontend_with(&tokens, &["--deadline", "10"]).await;
    let client = connect_as(&url, &alice, ()).await;
    let files = json!([{"uri": "test://wiki/big/5000000", "name": "big.txt"}]);
    let code = format!("print('ran')\n{HASH_INPUTS}");

    // The kill: as soon as a first chunk of the file is in the bucket, seen
    // through the runners' own view of it (stream info, polled). On a busy
    // machine the test may see it only after the bridge stored the last
    // one: then it tries again with a new bridge (at most 3 times).
    let js = jetstream_as(&split.nats, &split.users, "sandbox-runner").await;
    let mut attempt = 1;
    let (result, written, ended_after) = loop {
        let before = crate::files_faults::keys_of(&js, "codemode_files_in").await;
        let bridge_pid = bridge.id().expect("the bridge runs");
        let killed = async {
            let give_up = Instant::now() + Duration::from_secs(60);
            loop {
                if let Ok(mut stream) = js.get_stream("KV_codemode_files_in").await {
                    while stream.info().await.map(|i| i.state.messages).unwrap_or(0) <= before.len() as u64 {
                        assert!(Instant::now() < give_up, "no chunk reached the bucket within 60 s");
                    }
                    break;
                }
                assert!(Instant::now() < give_up, "the bridge made no files-in bucket within 60 s");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            support::kill9(bridge_pid);
            bridge.wait().await.expect("the killed bridge is reaped");
            Instant::now()
        };
        let (result, killed_at) = tokio::time::timeout(Duration::from_secs(120), async {
            tokio::join!(run_with_files(&client, &code, files.clone()), killed)
        })
        .await
        .expect("the client gets an answer for the cell, never a hang");
        let ended_after = killed_at.elapsed();
        let keys = crate::files_faults::keys_of(&js, "codemode_files_in").await;
        let written: Vec<String> = keys.into_iter().filter(|k| !before.contains(k)).collect();
        if written.len() < CHUNKS_OF_5_MB {
            break (result, written, ended_after);
        }
        assert!(attempt < 3, "in 3 attempts the kill came only after the bridge's last chunk: {written:?}");
        eprintln!("attempt {attempt}: the kill came after the bridge's last chunk; again with a new bridge");
        attempt += 1;
        bridge = support::spawn_service(&split.nats.url(), &split.users, "bridge", &[], Some(&server_args));
        serving(&client).await;
    };

    // The bridge was killed in the middle of its writes: some of the file's
    // chunks are there, not all, under one id, and nothing else.
    let id = written.first().and_then(|k| k.split_once('.')).map(|(id, _)| id.to_string()).unwrap_or_default();
    assert!(!written.is_empty(), "no chunk written");
    assert!(written.iter().all(|k| k.starts_with(&format!("{id}.c"))), "only the file's chunks: {written:?}");

    // The cell ended before its code ran, naming the file, within its
    // deadline (a lost bridge's call ends no later), with no container left.
    let error = error_of(&result);
    assert!(
        error.contains(
            "files[0] (test://wiki/big/5000000): no answer from the bridge within the run's deadline (10 s), \
             before the code started"
        ),
        "{error}"
    );
    if let Some(report) = &result.structured_content {
        assert_eq!(report["stdout"], "", "the code ran: {report}");
    }
    assert!(ended_after < Duration::from_secs(11), "the cell ended {ended_after:?} after the kill");
    let gone = support::eventually(Duration::from_secs(10), || support::containers_of(runner_pid).is_empty()).await;
    assert!(gone, "a container of the cell is left: {:?}", support::containers_of(runner_pid));
    eprintln!(
        "measured: the bridge killed (attempt {attempt}) with {} of {CHUNKS_OF_5_MB} chunks written; the cell ended \
         {ended_after:?} after",
        written.len()
    );

    // A new bridge serves the next cell's file in whole.
    let _again = support::spawn_service(&split.nats.url(), &split.users, "bridge", &[], Some(&server_args));
    serving(&client).await;
    let expected = format!("ran\nbig.txt 5000000 {}\n", sha256("x".repeat(5_000_000).as_bytes()));
    let report = support::report(&run_with_files(&client, &code, files).await);
    assert_eq!(report["error"], serde_json::Value::Null, "{report}");
    assert_eq!(report["stdout"], expected.as_str(), "{report}");
    client.cancel().await.ok();
}

/// Bytes the bridges' bucket holds in the full-bucket test: 1 MiB, created
/// so by the test before the bridge starts (the bridge opens a bucket that
/// is there as it is).
const SMALL_BUCKET_BYTES: i64 = 1024 * 1024;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_nats_a_resource_file_the_full_bridges_bucket_cannot_hold_ends_the_cell_before_its_code_naming_the_bucket_leaves_nothing_and_runs_once_space_frees()
 {
    use async_nats::jetstream::kv;
    use code_mode_core::files_in_shared::{CHUNK_BYTES, INPUTS_BUCKET};
    let Some(split) = SplitHttp::start() else { return };
    let (alice, tokens) = support::alice();

    // The bucket, created before the bridge starts by the bridges' own NATS
    // user as an operator might: 1 MiB, and no max age (its entries never
    // expire); then filled with two chunks' worth of other calls' bytes.
    let as_bridge = jetstream_as(&split.nats, &split.users, "bridge").await;
    let store = as_bridge
        .create_key_value(kv::Config {
            bucket: INPUTS_BUCKET.to_string(),
            history: 1,
            max_value_size: (CHUNK_BYTES + 4096) as i32,
            max_bytes: SMALL_BUCKET_BYTES,
            storage: async_nats::jetstream::stream::StorageType::File,
            ..Default::default()
        })
        .await
        .expect("the bridges' user creates its bucket");
    let junk = ["0123456789abcdef0123456789abcdef.c0", "0123456789abcdef0123456789abcdef.c1"];
    for key in junk {
        store.put(key, vec![7u8; CHUNK_BYTES].into()).await.expect("a junk chunk fits");
    }
    let (_bridge, runner) = split.services(&[], &["--resources", "--resource-host", "wiki"], &["--warm", "0"]);
    let runner_pid = runner.id().expect("the runner runs");
    let (_frontend, url) = split.frontend(&tokens).await;
    let client = connect_as(&url, &alice, ()).await;
    let js = jetstream_as(&split.nats, &split.users, "sandbox-runner").await;
    let before = crate::files_faults::keys_of(&js, INPUTS_BUCKET).await;
    assert_eq!(before, junk, "only the junk is in the bucket");

    // A wrapped server's 600,000-byte resource, past the bridge's reply
    // bound: its first chunk fits in the room left, its second does not.
    let files = json!([{"uri": "test://wiki/big/600000", "name": "big.txt"}]);
    let code = format!("print('ran')\n{HASH_INPUTS}");
    let started = Instant::now();
    let result = run_with_files(&client, &code, files.clone()).await;
    let took = started.elapsed();
    let error = error_of(&result);
    eprintln!("measured: the cell whose file the full bridges' bucket cannot hold ended in {took:?}: {error}");
    assert!(error.contains("files[0] (test://wiki/big/600000)"), "the error names the file: {error}");
    assert!(error.contains(&format!("the files-in bucket {INPUTS_BUCKET} is full")), "{error}");
    assert!(error.contains(&format!("at most {SMALL_BUCKET_BYTES} bytes")), "{error}");
    assert!(
        error.contains("stay until deleted")
            && error.contains("an operator must purge the bucket or raise its max bytes"),
        "the error says what frees a bucket without max age: {error}"
    );
    assert!(!error.contains("within 0 s"), "{error}");
    assert!(took < Duration::from_secs(30), "the refusal took {took:?}");
    if let Some(report) = &result.structured_content {
        assert_eq!(report["stdout"], "", "the code ran: {report}");
    }
    let gone = support::eventually(Duration::from_secs(10), || support::containers_of(runner_pid).is_empty()).await;
    assert!(gone, "a container of the cell is left: {:?}", support::containers_of(runner_pid));

    // The bridge wrote the file's first chunk and purged it when the second
    // did not fit: nothing of the file is readable (only a purge marker).
    let keys = crate::files_faults::keys_of(&js, INPUTS_BUCKET).await;
    let written: Vec<&String> = keys.iter().filter(|k| !before.contains(k)).collect();
    assert_eq!(written.len(), 1, "the file's first chunk: {written:?}");
    let as_runner = js.get_key_value(INPUTS_BUCKET).await.expect("the runner opens the bucket");
    for key in written {
        let left = as_runner.get(key).await.expect("the runner reads the bucket");
        assert!(left.is_none(), "{key} of the refused file is still in the bucket ({} bytes)", left.unwrap().len());
    }

    // Room frees (the junk purged, as an operator would): the same cell
    // gets its file whole.
    for key in junk {
        store.purge(key).await.expect("the bridges' user purges the junk");
    }
    let report = support::report(&run_with_files(&client, &code, files).await);
    assert_eq!(report["error"], serde_json::Value::Null, "{report}");
    let expected = format!("ran\nbig.txt 600000 {}\n", sha256("x".repeat(600_000).as_bytes()));
    assert_eq!(report["stdout"], expected.as_str(), "{report}");
    client.cancel().await.ok();
}

/// Once a cell given a small resource as a file in runs (a bridge serves
/// files in again); at most 30 s.
async fn serving(client: &rmcp::service::RunningService<rmcp::service::RoleClient, ()>) {
    let give_up = Instant::now() + Duration::from_secs(30);
    loop {
        let result = run_with_files(client, "print('ok')", json!([{"uri": "test://wiki/small"}])).await;
        if result.is_error != Some(true) {
            return;
        }
        assert!(Instant::now() < give_up, "no bridge serves files in within 30 s: {result:?}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// JetStream as `user` of the deployment's NATS configuration.
pub(crate) async fn jetstream_as(
    nats: &code_mode_core::testing::NatsServer,
    users: &code_mode_core::testing::NatsUsers,
    user: &str,
) -> async_nats::jetstream::Context {
    let client = async_nats::ConnectOptions::with_user_and_password(user.into(), users.password(user).into())
        .custom_inbox_prefix(format!("_INBOX.{user}"))
        .connect(nats.url())
        .await
        .expect("the test connects as a service's user");
    let mut context = async_nats::jetstream::new(client);
    context.set_timeout(std::time::Duration::from_secs(3));
    context
}
