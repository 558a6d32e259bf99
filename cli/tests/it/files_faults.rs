//! Files out over NATS under faults and at the bucket's bounds (issue 42),
//! with the real processes: a sandbox-runner killed while it hands a cell's
//! files to the bucket `codemode_files`, a frontend killed and started
//! again between the result and the read, the bucket full
//! (`--files-max-bytes`), and one identity past its quota across the
//! bucket (`--files-quota`) while another still gets files. Real
//! nats-server (the deployment's users and permissions), real Docker,
//! rmcp's client.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Duration;

use futures::StreamExt;
use rmcp::model::ReadResourceRequestParams;
use rmcp::service::{RoleClient, RunningService};
use serde_json::json;
use tokio::io::AsyncBufReadExt;
use tokio::time::Instant;

use crate::auth::{TokenFile, connect_as, token_new};
use crate::files_out::{links, read_back};
use crate::http::run_python;
use crate::support;
use code_mode_core::testing::{NatsServer, NatsUsers};

/// A frontend over `nats` with `extra` options: the child and its URL.
async fn frontend(
    nats: &NatsServer,
    users: &NatsUsers,
    tokens: &TokenFile,
    extra: &[&str],
) -> (tokio::process::Child, String) {
    let mut args = vec!["--http", "127.0.0.1:0", "--auth-tokens", tokens.arg()];
    args.extend_from_slice(extra);
    let mut command = support::service_command(&nats.url(), users, "frontend", &args, None);
    let (child, url, _log) = crate::http::spawn_http(&mut command).await;
    (child, url)
}

/// JetStream as the runners' NATS user: the test's own view of the
/// bucket, not a frontend's.
async fn as_runner(nats: &NatsServer, users: &NatsUsers) -> async_nats::jetstream::Context {
    let client = async_nats::ConnectOptions::with_user_and_password(
        "sandbox-runner".into(),
        users.password("sandbox-runner").into(),
    )
    .custom_inbox_prefix("_INBOX.sandbox-runner")
    .connect(nats.url())
    .await
    .expect("the test connects as the runners' user");
    async_nats::jetstream::new(client)
}

/// The keys of the bucket of files out now.
async fn bucket_keys(js: &async_nats::jetstream::Context) -> Vec<String> {
    keys_of(js, "codemode_files").await
}

/// The keys of the key-value bucket `bucket` now (its stream info with
/// subjects), sorted; none when it does not exist.
pub(crate) async fn keys_of(js: &async_nats::jetstream::Context, bucket: &str) -> Vec<String> {
    let Ok(stream) = js.get_stream(format!("KV_{bucket}")).await else { return Vec::new() };
    let mut subjects = stream.info_with_subjects(">").await.expect("the bucket's subjects are read");
    let prefix = format!("$KV.{bucket}.");
    let mut keys = Vec::new();
    while let Some(subject) = subjects.next().await {
        let (subject, _) = subject.expect("a subject");
        keys.push(subject.trim_start_matches(&prefix).to_string());
    }
    keys.sort();
    keys
}

/// The error text of a read that must fail.
async fn read_refused<H: rmcp::ClientHandler>(client: &RunningService<RoleClient, H>, uri: &str) -> String {
    client.read_resource(ReadResourceRequestParams::new(uri)).await.expect_err("the read is refused").to_string()
}

/// Six files of 2 MiB (8 chunks each): 48 chunks and 6 descriptions to
/// hand out, long enough to kill the runner in the middle.
const SIX_FILES: &str = r#"
block = bytes(range(256)) * 8192
for i in range(6):
    save_file(f"f{i}.bin", block)
print("written")
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_nats_a_runner_killed_while_handing_out_files_fails_the_cell_saying_so_and_no_cut_file_is_offered() {
    if !support::sandbox_available() {
        return;
    }
    let Some((nats, users)) = NatsServer::start_secured() else { panic!("nats-server is needed") };
    let alice = token_new("alice");
    let tokens = TokenFile::of(&[&alice]);
    let _bridge = support::spawn_service(&nats.url(), &users, "bridge", &[], Some(&[]));
    let mut command = support::service_command(&nats.url(), &users, "sandbox-runner", &["--warm", "0"], None);
    command.env("RUST_LOG", "warn,code_mode_sandbox_runner=info").stderr(Stdio::piped());
    let mut runner = command.spawn().expect("the runner starts");
    let runner_pid = runner.id().expect("the runner runs");
    let mut lines = tokio::io::BufReader::new(runner.stderr.take().expect("piped")).lines();
    let (handing, mut handing_heard) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains("handing a cell's files out to the bucket codemode_files") {
                handing.send_replace(true);
            }
            eprintln!("runner: {line}");
        }
    });
    let (_frontend, url) = frontend(&nats, &users, &tokens, &[]).await;
    let client = connect_as(&url, &alice, ()).await;

    // The kill: once the runner says it hands the files out and the first
    // chunk is in the bucket.
    let js = as_runner(&nats, &users).await;
    let killed = async {
        handing_heard.wait_for(|heard| *heard).await.expect("the runner's log is read");
        let give_up = Instant::now() + Duration::from_secs(30);
        while !bucket_keys(&js).await.iter().any(|k| k.ends_with(".c0")) {
            assert!(Instant::now() < give_up, "no chunk reached the bucket within 30 s");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        support::kill9(runner_pid);
        runner.wait().await.expect("the killed runner is reaped");
    };
    let (result, ()) =
        tokio::time::timeout(Duration::from_secs(120), async { tokio::join!(run_python(&client, SIX_FILES), killed) })
            .await
            .expect("the client gets an answer for the cell, never a hang");

    // The result says the runner was lost, and offers no link.
    assert_eq!(result.is_error, Some(true), "{result:?}");
    let text = result.content.iter().find_map(|c| c.as_text()).expect("a text block").text.clone();
    assert!(text.contains("sandbox-runner") && text.contains("was lost"), "{text}");
    assert!(links(&result).is_empty(), "{result:?}");

    // In the bucket: the hand-off began and did not end; every file with a
    // description has all its chunks, and a file without one is unknown.
    let keys = bucket_keys(&js).await;
    let mut files: BTreeMap<String, (u32, bool)> = BTreeMap::new();
    for key in keys.iter().filter(|k| !k.starts_with("q.")) {
        let (id, part) = key.split_once('.').expect("<id>.<part>");
        let file = files.entry(id.to_string()).or_default();
        if part == "meta" {
            file.1 = true;
        } else {
            file.0 += 1;
        }
    }
    let described = files.values().filter(|f| f.1).count();
    assert!(described < 6, "the runner was killed after the hand-off ended: {keys:?}");
    assert!(files.values().filter(|f| f.1).all(|f| f.0 == 8), "a described file lacks chunks: {keys:?}");
    let cut: Vec<&String> = files.iter().filter(|(_, f)| !f.1).map(|(id, _)| id).collect();
    eprintln!("killed during the hand-off: {described} of 6 files described, {} cut: {files:?}", cut.len());
    for id in &cut {
        for name in (0..6).map(|i| format!("f{i}.bin")) {
            let uri = format!("code-mode://files/{id}/{name}");
            let refused = read_refused(&client, &uri).await;
            assert!(refused.contains(&format!("unknown resource: {uri} (no such file, or expired)")), "{refused}");
        }
    }
    client.cancel().await.ok();
}

const TWO_FILES: &str = r#"
with open("/tmp/out/table.csv", "w") as f:
    f.write("n,square\n" + "".join(f"{n},{n * n}\n" for n in range(2000)))
save_file("blob.bin", bytes(range(256)) * 4096)
print("written")
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_nats_a_link_is_read_through_a_restarted_frontend_and_after_the_files_ttl_is_unknown_as_expired() {
    if !support::sandbox_available() {
        return;
    }
    let Some((nats, users)) = NatsServer::start_secured() else { panic!("nats-server is needed") };
    let alice = token_new("alice");
    let tokens = TokenFile::of(&[&alice]);
    let ttl = ["--files-ttl", "20"];
    let _bridge = support::spawn_service(&nats.url(), &users, "bridge", &[], Some(&[]));
    let _runner = support::spawn_service(&nats.url(), &users, "sandbox-runner", &["--warm", "0", ttl[0], ttl[1]], None);
    let (mut first, url) = frontend(&nats, &users, &tokens, &ttl).await;
    let client = connect_as(&url, &alice, ()).await;
    let result = run_python(&client, TWO_FILES).await;
    let kept_at = Instant::now();
    let report = support::report(&result);
    assert_eq!(report["stdout"], "written\n", "{report}");
    let links = links(&result);
    let names: Vec<&str> = links.iter().map(|l| l.0.as_str()).collect();
    assert_eq!(names, ["blob.bin", "table.csv"], "{result:?}");
    client.cancel().await.ok();

    // The frontend that gave the links is killed and started again.
    support::kill9(first.id().expect("the frontend runs"));
    first.wait().await.expect("the killed frontend is reaped");
    let (_again, url) = frontend(&nats, &users, &tokens, &ttl).await;
    let client = connect_as(&url, &alice, ()).await;
    let csv: String =
        std::iter::once("n,square\n".to_string()).chain((0..2000).map(|n| format!("{n},{}\n", n * n))).collect();
    assert!(read_back(&client, &links[1].1).await == csv.as_bytes(), "the CSV read back differs");
    let blob: Vec<u8> = (0..4096).flat_map(|_| 0..=255u8).collect();
    assert!(read_back(&client, &links[0].1).await == blob, "the blob read back differs");
    let read_within = kept_at.elapsed();
    assert!(read_within < Duration::from_secs(20), "read after the TTL already: {read_within:?}");

    // After --files-ttl (20 s; JetStream drops an entry at its max_age),
    // the same read is refused as unknown, saying it may have expired.
    let uri = &links[0].1;
    let give_up = kept_at + Duration::from_secs(60);
    let refused = loop {
        match client.read_resource(ReadResourceRequestParams::new(uri.clone())).await {
            Err(e) => break e.to_string(),
            Ok(_) => {
                assert!(Instant::now() < give_up, "the file is still read 60 s after it was kept");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    };
    let gone_after = kept_at.elapsed();
    assert!(gone_after >= Duration::from_secs(19), "gone before its TTL: {gone_after:?}");
    assert!(refused.contains(&format!("unknown resource: {uri} (no such file, or expired)")), "{refused}");
    eprintln!("read through the restarted frontend {read_within:?} after the cell; unknown {gone_after:?} after");
    client.cancel().await.ok();
}

/// `name` of `mib` MiB, written with `save_file`.
fn write(name: &str, mib: usize) -> String {
    format!("save_file({name:?}, bytes(range(256)) * (4096 * {mib}))\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_nats_a_full_files_bucket_ends_the_cells_file_collection_with_a_line_and_offers_nothing_cut() {
    if !support::sandbox_available() {
        return;
    }
    let Some((nats, users)) = NatsServer::start_secured() else { panic!("nats-server is needed") };
    let alice = token_new("alice");
    let tokens = TokenFile::of(&[&alice]);
    let bound = ["--files-max-bytes", "4194304"];
    let _bridge = support::spawn_service(&nats.url(), &users, "bridge", &[], Some(&[]));
    let _runner =
        support::spawn_service(&nats.url(), &users, "sandbox-runner", &["--warm", "0", bound[0], bound[1]], None);
    let (_frontend, url) = frontend(&nats, &users, &tokens, &bound).await;
    let client = connect_as(&url, &alice, ()).await;

    let code = write("a.bin", 3) + &write("b.bin", 3) + "save_file('c.txt', 'small')\n";
    let result = run_python(&client, &code).await;
    let report = support::report(&result);
    let offered = links(&result);
    let names: Vec<&str> = offered.iter().map(|l| l.0.as_str()).collect();
    assert_eq!(names, ["a.bin"], "{report}");
    assert_eq!(
        report["files_notes"],
        json!([
            "'b.bin' and any later files not handed out: the files bucket codemode_files is full (it holds at most \
             4194304 bytes, until older files expire)"
        ]),
        "{report}"
    );
    let a: Vec<u8> = (0..4096 * 3).flat_map(|_| 0..=255u8).collect();
    assert!(read_back(&client, &offered[0].1).await == a, "a.bin read back differs");
    // Nothing of b.bin or c.txt is in the bucket: one file (12 chunks, a
    // description) and alice's quota entry.
    let js = as_runner(&nats, &users).await;
    let keys = bucket_keys(&js).await;
    assert_eq!(keys.len(), 12 + 1 + 1, "{keys:?}");
    client.cancel().await.ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_nats_alice_past_her_quota_across_the_bucket_is_refused_saying_so_while_bob_still_gets_files() {
    if !support::sandbox_available() {
        return;
    }
    let Some((nats, users)) = NatsServer::start_secured() else { panic!("nats-server is needed") };
    let (alice, bob) = (token_new("alice"), token_new("bob"));
    let tokens = TokenFile::of(&[&alice, &bob]);
    let quota = ["--files-quota", "5000000"];
    let _bridge = support::spawn_service(&nats.url(), &users, "bridge", &[], Some(&[]));
    // Two runners: the quota holds across the bucket, whichever runs a cell.
    let runner_args = ["--warm", "0", "--capacity", "1", quota[0], quota[1]];
    let _first = support::spawn_service(&nats.url(), &users, "sandbox-runner", &runner_args, None);
    let _second = support::spawn_service(&nats.url(), &users, "sandbox-runner", &runner_args, None);
    let (_frontend, url) = frontend(&nats, &users, &tokens, &quota).await;

    let alice_client = connect_as(&url, &alice, ()).await;
    let first = run_python(&alice_client, &write("a.bin", 3)).await;
    assert_eq!(links(&first).len(), 1, "{}", support::report(&first));
    let second = run_python(&alice_client, &(write("b.bin", 3) + &write("c.bin", 1))).await;
    let report = support::report(&second);
    assert!(links(&second).is_empty(), "{report}");
    assert_eq!(
        report["files_notes"],
        json!(["'b.bin' and any later files not handed out: this identity's files in codemode_files reached their \
             quota (5000000 bytes, until older ones expire)"]),
        "{report}"
    );

    let bob_client = connect_as(&url, &bob, ()).await;
    let bobs = run_python(&bob_client, &write("b.bin", 3)).await;
    let offered = links(&bobs);
    assert_eq!(offered.len(), 1, "{}", support::report(&bobs));
    let b: Vec<u8> = (0..4096 * 3).flat_map(|_| 0..=255u8).collect();
    assert!(read_back(&bob_client, &offered[0].1).await == b, "bob's b.bin read back differs");
    // Alice still reads what she kept before her quota was reached.
    let a = read_back(&alice_client, &links(&first)[0].1).await;
    assert_eq!(a.len(), 3 * 1024 * 1024);
    alice_client.cancel().await.ok();
    bob_client.cancel().await.ok();
}
