//! The audit chain through the real sinks: a file written by the writer
//! task, edited, cut, reordered and padded by hand, each change found at
//! its position; rotation and restarts keep one chain; a file made
//! immutable and a killed nats-server stop writes (fail closed); replicas
//! appending to one JetStream stream at once make one chain.

// A panic in a test is the test failing.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use code_mode_audit::record::{Body, CellFacts, CellStart, line_hash};
use code_mode_audit::show::read_files;
use code_mode_audit::verify::{ProblemKind, SourceLine, VerifyOptions, verify};
use code_mode_audit::{AuditError, AuditSink, Durability, SinkOptions, jetstream};
use code_mode_core::testing::{NatsServer, TempDir};

fn options(writer: &str) -> SinkOptions {
    SinkOptions { writer: writer.into(), checkpoint_every: 1000, checkpoint_interval: Duration::from_secs(3600) }
}

fn cell(n: usize) -> Body {
    Body::CellStart(CellStart {
        cell: CellFacts {
            session: format!("session-{}", n % 3),
            identity: None,
            cell: format!("cell-{n}"),
            code_bytes: 8,
            code_sha256: "0".repeat(64),
            runtime: "runc".into(),
            image: "code-mode-sandbox:test".into(),
        },
        inputs: vec![],
    })
}

/// A file with an open record, `n` cell records and a closing checkpoint.
async fn written(dir: &TempDir, n: usize) -> PathBuf {
    let path = dir.0.join("audit.jsonl");
    let sink = AuditSink::file(&path, None, options("test")).await.expect("the file opens");
    for i in 0..n {
        sink.append(cell(i), Durability::Written).await.expect("a record is written");
    }
    sink.close().await;
    path
}

fn lines_of(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path).unwrap().lines().map(str::to_string).collect()
}

fn check(lines: &[String]) -> Option<(ProblemKind, usize)> {
    let source: Vec<SourceLine> = lines
        .iter()
        .enumerate()
        .map(|(i, t)| SourceLine { source: "audit.jsonl".into(), line: i as u64 + 1, text: t.clone() })
        .collect();
    verify(&source, &VerifyOptions::default()).problem.map(|p| (p.kind, p.position))
}

#[tokio::test]
async fn edits_deletions_swaps_and_insertions_are_each_found_at_their_position() {
    let dir = TempDir::new("audit-chain");
    let path = written(&dir, 10).await;
    let original = lines_of(&path);
    assert_eq!(original.len(), 12, "open, ten cells, a checkpoint");
    assert_eq!(check(&original), None, "the file as written verifies");

    // An edit: another session in record 5, the JSON still canonical.
    let mut edited = original.clone();
    edited[4] =
        edited[4].replace("session-0", "session-9").replace("session-1", "session-9").replace("session-2", "session-9");
    assert_ne!(edited[4], original[4]);
    assert_eq!(check(&edited), Some((ProblemKind::Altered, 5)));

    // An edit that re-serializes the record (spaces after commas).
    let mut spaced = original.clone();
    spaced[6] = spaced[6].replace(",\"", ", \"");
    assert_eq!(check(&spaced), Some((ProblemKind::Altered, 7)));

    // A deletion: record 6 is gone.
    let mut deleted = original.clone();
    deleted.remove(5);
    assert_eq!(check(&deleted), Some((ProblemKind::Missing, 6)));

    // A swap of records 7 and 8.
    let mut swapped = original.clone();
    swapped.swap(6, 7);
    assert_eq!(check(&swapped), Some((ProblemKind::Reordered, 7)));

    // An insertion of a copy of record 3 after record 8.
    let mut copied = original.clone();
    copied.insert(8, original[2].clone());
    assert_eq!(check(&copied), Some((ProblemKind::Inserted, 9)));

    // An insertion of a forged record that chains correctly to the one
    // before it and takes the next seq: the record after it gives it away.
    let mut forged = original.clone();
    let mut fake: serde_json::Value = serde_json::from_str(&original[4]).unwrap();
    fake["prev"] = serde_json::Value::String(line_hash(&original[3]));
    fake["cell"] = "cell-forged".into();
    forged.insert(4, code_mode_audit::record::canonical(&fake));
    assert_eq!(check(&forged), Some((ProblemKind::Inserted, 5)));
}

#[tokio::test]
async fn a_restarted_writer_continues_the_chain_of_its_file() {
    let dir = TempDir::new("audit-resume");
    let path = written(&dir, 3).await;
    let sink = AuditSink::file(&path, None, options("again")).await.expect("the file opens again");
    sink.append(cell(9), Durability::Synced).await.unwrap();
    sink.close().await;
    let lines = lines_of(&path);
    assert_eq!(check(&lines), None);
    let reopened: serde_json::Value = serde_json::from_str(&lines[5]).unwrap();
    assert_eq!((reopened["kind"].as_str(), reopened["resumed"].as_bool()), (Some("open"), Some(true)));
}

#[tokio::test]
async fn a_file_ending_in_a_torn_line_is_refused_naming_the_line() {
    let dir = TempDir::new("audit-torn");
    let path = written(&dir, 2).await;
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str("{\"v\":1,\"seq\":");
    std::fs::write(&path, text).unwrap();
    let err = AuditSink::file(&path, None, options("t")).await.unwrap_err();
    assert!(matches!(&err, AuditError::Corrupt { line: 5, .. }), "{err}");
    assert!(err.to_string().contains("incomplete"), "{err}");
}

#[tokio::test]
async fn rotation_keeps_one_chain_across_files() {
    let dir = TempDir::new("audit-rotate");
    let path = dir.0.join("audit.jsonl");
    let sink = AuditSink::file(&path, Some(1500), options("rot")).await.unwrap();
    for i in 0..12 {
        sink.append(cell(i), Durability::Written).await.unwrap();
    }
    sink.close().await;
    let mut files = code_mode_audit::file::rotated_files(&path).unwrap();
    assert!(files.len() >= 2, "several files: {files:?}");
    files.push(path.clone());
    let all = read_files(&files).unwrap();
    let report = verify(&all, &VerifyOptions::default());
    assert!(report.ok(), "{:?}", report.problem);
    // Each new file starts with a checkpoint naming the previous file's head.
    let second = lines_of(&files[1]);
    assert!(second[0].contains("\"kind\":\"checkpoint\""), "{}", second[0]);
    // Leaving out a middle file is found.
    let mut gap = files.clone();
    gap.remove(1);
    let report = verify(&read_files(&gap).unwrap(), &VerifyOptions::default());
    assert_eq!(report.problem.map(|p| p.kind), Some(ProblemKind::Missing));
    // A writer started later continues the chain of the newest file.
    let sink = AuditSink::file(&path, Some(1500), options("rot2")).await.unwrap();
    sink.append(cell(99), Durability::Written).await.unwrap();
    sink.close().await;
    let mut files = code_mode_audit::file::rotated_files(&path).unwrap();
    files.push(path.clone());
    assert!(verify(&read_files(&files).unwrap(), &VerifyOptions::default()).ok());
}

/// `chattr` on `path`; false when the filesystem or user cannot.
fn chattr(flag: &str, path: &Path) -> bool {
    std::process::Command::new("chattr").arg(flag).arg(path).status().is_ok_and(|s| s.success())
}

#[tokio::test]
async fn a_file_made_immutable_fails_every_write_until_it_is_writable_again() {
    let dir = TempDir::new("audit-immutable");
    let path = dir.0.join("audit.jsonl");
    let sink = AuditSink::file(&path, None, options("imm")).await.unwrap();
    sink.append(cell(0), Durability::Synced).await.unwrap();
    if !chattr("+i", &path) {
        code_mode_core::testing::unavailable(
            "chattr +i (root on a filesystem with the immutable flag)",
            "chattr failed",
        );
        return;
    }
    let err = sink.append(cell(1), Durability::Synced).await.unwrap_err();
    let ready = sink.ready().await;
    chattr("-i", &path);
    assert!(matches!(err, AuditError::Unwritable { .. }), "{err}");
    assert!(err.to_string().contains("fail closed"), "{err}");
    assert!(ready.is_err(), "a probe of an immutable file fails");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    sink.ready().await.expect("writable again once the flag is off");
    sink.append(cell(2), Durability::Synced).await.unwrap();
    sink.close().await;
    let lines = lines_of(&path);
    assert_eq!(check(&lines), None, "the refused record left nothing behind");
    assert!(!lines.iter().any(|l| l.contains("cell-1")), "{lines:?}");
}

async fn client(server: &NatsServer) -> async_nats::Client {
    async_nats::connect(server.url()).await.expect("connects to the test nats-server")
}

async fn stream_lines(server: &NatsServer) -> Vec<SourceLine> {
    let (records, _) = jetstream::read_all(client(server).await, jetstream::STREAM).await.unwrap();
    records
        .into_iter()
        .map(|(seq, text)| SourceLine { source: "nats:CODEMODE_AUDIT".into(), line: seq, text })
        .collect()
}

#[tokio::test]
async fn replicas_appending_to_one_stream_at_once_make_one_chain_in_stream_order() {
    let Some(server) = NatsServer::start(&[]) else { return };
    // Started at once, so their opening records race for the first seq too.
    let mut starting = tokio::task::JoinSet::new();
    for w in 0..3 {
        let client = client(&server).await;
        starting
            .spawn(async move { AuditSink::nats(client, Default::default(), options(&format!("replica-{w}"))).await });
    }
    let mut sinks = Vec::new();
    while let Some(started) = starting.join_next().await {
        sinks.push(started.unwrap().expect("the stream opens"));
    }
    let mut tasks = tokio::task::JoinSet::new();
    for (w, sink) in sinks.iter().enumerate() {
        for i in 0..20 {
            let sink = sink.clone();
            tasks.spawn(async move { sink.append(cell(w * 100 + i), Durability::Written).await });
        }
    }
    let mut seqs = Vec::new();
    while let Some(done) = tasks.join_next().await {
        seqs.push(done.unwrap().expect("every append lands"));
    }
    seqs.sort_unstable();
    seqs.dedup();
    assert_eq!(seqs.len(), 60, "sixty distinct sequence numbers");
    for sink in &sinks {
        sink.close().await;
    }
    let lines = stream_lines(&server).await;
    let report = verify(&lines, &VerifyOptions::default());
    assert!(
        report.ok(),
        "{:?}\n{}",
        report.problem,
        lines.iter().take(4).map(|l| l.text.clone()).collect::<Vec<_>>().join("\n")
    );
    // 3 opens + 60 cells + 3 closing checkpoints; every seq is the stream's.
    assert_eq!(lines.len(), 66);
    for l in &lines {
        let v: serde_json::Value = serde_json::from_str(&l.text).unwrap();
        assert_eq!(v["seq"].as_u64(), Some(l.line), "the record's seq is its stream sequence");
    }
}

#[tokio::test]
async fn with_nats_server_killed_writes_fail_and_come_back_with_it() {
    let Some(mut server) = NatsServer::start(&[]) else { return };
    let sink = AuditSink::nats(client(&server).await, Default::default(), options("k")).await.unwrap();
    sink.append(cell(0), Durability::Written).await.unwrap();
    let metrics = code_mode_telemetry::metrics();
    let failed = || metrics.audit_records.with_label_values(&["failed"]).get();
    let failed_before = failed();
    assert_eq!(metrics.audit_sink_up.get(), 1, "codemode_audit_sink_up: the sink takes records");
    server.stop();
    let err = sink.append(cell(1), Durability::Written).await.unwrap_err();
    assert!(matches!(err, AuditError::Unwritable { .. }), "{err}");
    assert_eq!((metrics.audit_sink_up.get(), failed()), (0, failed_before + 1), "the failed write shows");
    assert!(sink.ready().await.is_err());
    server.restart();
    let mut back = false;
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        if sink.ready().await.is_ok() {
            back = true;
            break;
        }
    }
    assert!(back, "the sink is writable again once nats-server is back");
    assert_eq!(metrics.audit_sink_up.get(), 1, "the probe that found it writable shows it up");
    sink.append(cell(2), Durability::Written).await.unwrap();
    sink.close().await;
    let lines = stream_lines(&server).await;
    assert!(verify(&lines, &VerifyOptions::default()).ok());
}

#[tokio::test]
async fn checkpoints_come_every_n_records_and_after_a_quiet_interval_each_naming_the_head_before_it() {
    let dir = TempDir::new("audit-checkpoints");
    let path = dir.0.join("audit.jsonl");
    let options =
        SinkOptions { writer: "cp".into(), checkpoint_every: 3, checkpoint_interval: Duration::from_millis(300) };
    let sink = AuditSink::file(&path, None, options).await.unwrap();
    for i in 0..2 {
        sink.append(cell(i), Durability::Written).await.unwrap();
    }
    // The open record and two cells make three: a checkpoint follows.
    let kinds = |p: &Path| -> Vec<String> {
        lines_of(p)
            .iter()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["kind"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(kinds(&path).last().map(String::as_str), Some("checkpoint"), "{:?}", kinds(&path));
    sink.append(cell(3), Durability::Written).await.unwrap();
    tokio::time::sleep(Duration::from_millis(800)).await;
    let lines = lines_of(&path);
    let last: serde_json::Value = serde_json::from_str(lines.last().unwrap()).unwrap();
    assert_eq!(last["kind"], "checkpoint", "a quiet interval after a record brings a checkpoint: {:?}", kinds(&path));
    assert_eq!(last["head"].as_str(), Some(line_hash(&lines[lines.len() - 2]).as_str()));
    assert_eq!(last["records"].as_u64(), Some(lines.len() as u64 - 1));
    let before = lines.len();
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(lines_of(&path).len(), before, "no checkpoint without new records");
    sink.close().await;
    assert_eq!(check(&lines_of(&path)), None);
}

#[tokio::test]
async fn the_stream_is_made_with_the_retention_setting_and_refuses_deleting_or_purging_records() {
    let Some(server) = NatsServer::start(&[]) else { return };
    let config = jetstream::StreamConfig { retention: Some(Duration::from_secs(7 * 86_400)), ..Default::default() };
    let sink = AuditSink::nats(client(&server).await, config, options("r")).await.unwrap();
    sink.append(cell(0), Durability::Written).await.unwrap();
    let js = async_nats::jetstream::new(client(&server).await);
    let mut stream = js.get_stream(jetstream::STREAM).await.unwrap();
    let info = stream.info().await.unwrap().clone();
    assert_eq!(info.config.max_age, Duration::from_secs(7 * 86_400));
    assert!(info.config.deny_delete && info.config.deny_purge);
    // Even a user the server lets do anything cannot remove a record.
    assert!(stream.delete_message(1).await.is_err(), "deleting a record is refused");
    assert!(stream.purge().await.is_err(), "purging the stream is refused");
    sink.close().await;
    assert!(verify(&stream_lines(&server).await, &VerifyOptions::default()).ok());
}
