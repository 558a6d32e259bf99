//! A wrapped server that exits on its own is started again by its owner
//! actor, with a growing delay; calls in the meantime fail at once.

use std::path::Path;
use std::time::Duration;

use code_mode_proto::{ErrorKind, ToolReply};
use serde_json::json;

use crate::support::{Harness, Setup, child_with_arg, ok, read_proc, test_server, unique_path};

/// Call `add` until it answers, up to `within`; every failed try must be a
/// bare fault of the restart (never a hang, never details).
async fn add_once_back(h: &Harness, within: Duration) -> String {
    let give_up = tokio::time::Instant::now() + within;
    loop {
        let reply = tokio::time::timeout(Duration::from_secs(5), h.call("add", json!({"a": 1, "b": 2})))
            .await
            .expect("a call answers at once while the server is down");
        match reply {
            ToolReply::Ok { value } => return value,
            ToolReply::Fault { kind } => {
                // Until the actor has seen the exit, calls still reach the dead session.
                assert!(
                    matches!(kind, ErrorKind::ServerRestarting | ErrorKind::TransportClosed),
                    "unexpected fault {kind}"
                );
            }
            other => panic!("unexpected reply {other:?}"),
        }
        assert!(tokio::time::Instant::now() < give_up, "the server was not back within {within:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_crashed_server_is_started_again_and_later_calls_reach_the_new_process() {
    let h = Harness::with_args(&[]).await;
    let log = h.log.display().to_string();
    let first = child_with_arg(&log).expect("the test server is a child of this process");
    let metrics = code_mode_telemetry::metrics();
    let exits = || metrics.server_exits.with_label_values(&["test"]).get();
    let exits_before = exits();
    assert_eq!(metrics.server_up.with_label_values(&["test"]).get(), 1, "a started server is up");

    assert_eq!(h.call("crash", json!({})).await, ToolReply::Fault { kind: ErrorKind::TransportClosed });
    assert_eq!(add_once_back(&h, Duration::from_secs(10)).await, r#"{"sum":3}"#);
    assert_eq!(exits(), exits_before + 1, "the exit is counted (what the restart-loop alert watches)");
    assert_eq!(metrics.server_up.with_label_values(&["test"]).get(), 1, "up again");

    let second = child_with_arg(&log).expect("a new test server runs");
    assert_ne!(second.pid, first.pid, "a new process");
    assert!(read_proc(first.pid).is_none(), "the crashed process was reaped: {:?}", read_proc(first.pid));
    // The new process has seen one call: the `add` that came back.
    assert_eq!(ok(h.call("count", json!({})).await), "2");
    assert_eq!(h.calls_seen(), ["crash", "add", "count"]);

    // The restarted server is closed on shutdown like the first one.
    h.close().await;
    assert!(read_proc(second.pid).is_none(), "after closed(): {:?}", read_proc(second.pid));
}

/// Start times (seconds since the epoch) a wrapper script wrote, one a line.
fn attempts(path: &Path) -> Vec<f64> {
    std::fs::read_to_string(path).unwrap_or_default().lines().filter_map(|l| l.trim().parse().ok()).collect()
}

#[tokio::test]
async fn while_a_server_cannot_start_again_calls_fail_at_once_and_the_retries_back_off() {
    // The wrapper notes each start, then fails while `block` exists.
    let (tries, block) = (unique_path("tries"), unique_path("block"));
    let setup = Setup::default();
    let script = r#"date +%s.%N >> "$0"; [ -e "$1" ] && exit 1; exec "$2" --log "$3""#;
    let args = vec![
        "-c".to_string(),
        script.to_string(),
        tries.display().to_string(),
        block.display().to_string(),
        test_server(),
        setup.log.display().to_string(),
    ];
    let h = Setup { command: Some(("sh".into(), args)), ..setup }.start().await.expect("the bridge starts");

    std::fs::write(&block, "").unwrap();
    assert_eq!(h.call("crash", json!({})).await, ToolReply::Fault { kind: ErrorKind::TransportClosed });

    // Four failed restarts: with delays of 100, 200, 400 and 800 ms.
    let give_up = tokio::time::Instant::now() + Duration::from_secs(15);
    while attempts(&tries).len() < 5 {
        assert!(tokio::time::Instant::now() < give_up, "restarts: {:?}", attempts(&tries));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Down: a call fails at once (the call timeout is 10 s) with a bare kind.
    let reply = tokio::time::timeout(Duration::from_secs(2), h.call("add", json!({"a": 1, "b": 2})))
        .await
        .expect("a call while the server is down fails at once");
    assert_eq!(reply, ToolReply::Fault { kind: ErrorKind::ServerRestarting });

    let starts = attempts(&tries);
    let gaps: Vec<f64> = starts.windows(2).skip(1).map(|w| w[1] - w[0]).collect();
    // Each gap is at least its delay (load can only lengthen it).
    for (gap, min) in gaps.iter().zip([0.2, 0.4, 0.8]) {
        assert!(*gap >= min, "restart gaps {gaps:?} do not double from 100 ms");
    }

    std::fs::remove_file(&block).unwrap();
    assert_eq!(add_once_back(&h, Duration::from_secs(20)).await, r#"{"sum":3}"#);
    assert_eq!(h.calls_seen(), ["crash", "add"], "no call reached the server while it was down");
    h.close().await;
    let _ = std::fs::remove_file(&tries);
}
