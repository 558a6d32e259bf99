//! The split deployment's scaling rules: sandbox-runners form a queue group,
//! each runs at most its capacity, and a cell no runner can take fails with
//! a clear "no capacity" error instead of hanging.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use code_mode_core::testing::NatsServer;
use tokio::io::AsyncBufReadExt;

use crate::support::{self, Client, connect_client, report, run_python, service_command, spawn_service};

/// A runner whose stderr is read to count the cells it ran.
fn counting_runner(
    nats: &str,
    users: &code_mode_core::testing::NatsUsers,
    capacity: &str,
) -> (tokio::process::Child, Arc<AtomicUsize>) {
    let mut cmd = service_command(nats, users, "sandbox-runner", &["--capacity", capacity], None);
    cmd.stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("the runner starts");
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains("cell ended") {
                seen.fetch_add(1, Ordering::SeqCst);
            }
        }
    });
    (child, count)
}

async fn frontend(nats: &str, users: &code_mode_core::testing::NatsUsers, extra: &[&str]) -> Client {
    let mut cmd = tokio::process::Command::new(support::code_mode());
    cmd.arg("frontend").args(["--nats", nats]).args(extra);
    cmd.env("CODE_MODE_NATS_USER", "frontend").env("CODE_MODE_NATS_PASSWORD", users.password("frontend"));
    connect_client(cmd).await.0
}

#[tokio::test]
async fn cells_spread_across_the_runners_of_the_queue_group() {
    if !support::sandbox_available() {
        return;
    }
    let Some((nats, users)) = NatsServer::start_secured() else { return };
    let url = nats.url();
    let _bridge = spawn_service(&url, &users, "bridge", &[], Some(&[]));
    let runners: Vec<_> = (0..3).map(|_| counting_runner(&url, &users, "2")).collect();
    let client = frontend(&url, &users, &["--max-concurrent", "6"]).await;
    let cells = 24;
    let results = futures::future::join_all((0..cells).map(|i| {
        let client = &client;
        async move { run_python(client, &format!("print({i})")).await }
    }))
    .await;
    for (i, r) in results.iter().enumerate() {
        assert_eq!(report(r)["stdout"], format!("{i}\n"));
    }
    // Give the last log lines a moment to arrive.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let counts: Vec<usize> = runners.iter().map(|(_, c)| c.load(Ordering::SeqCst)).collect();
    assert_eq!(counts.iter().sum::<usize>(), cells, "every cell ran exactly once: {counts:?}");
    assert!(counts.iter().all(|&c| c > 0), "each of the three runners ran some cells: {counts:?}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_cell_no_runner_can_take_fails_with_a_clear_no_capacity_error() {
    if !support::sandbox_available() {
        return;
    }
    let Some((nats, users)) = NatsServer::start_secured() else { return };
    let url = nats.url();
    let _bridge = spawn_service(&url, &users, "bridge", &[], Some(&[]));
    let _runner = spawn_service(&url, &users, "sandbox-runner", &["--capacity", "1"], None);
    let client = frontend(&url, &users, &["--max-concurrent", "2", "--capacity-wait", "1"]).await;
    let long = run_python(&client, "import time\ntime.sleep(6)\nprint('long done')");
    let refused = async {
        // Let the long cell take the only slot first.
        tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
        run_python(&client, "print('second')").await
    };
    let (long, refused) = tokio::join!(long, refused);
    assert_eq!(report(&long)["stdout"], "long done\n", "the running cell is not disturbed");
    assert_eq!(refused.is_error, Some(true));
    let text = &refused.content[0].as_text().unwrap().text;
    assert!(text.contains("no sandbox-runner had room for the cell"), "{text}");
    // Once the slot is free, cells run again.
    assert_eq!(report(&run_python(&client, "print('again')").await)["stdout"], "again\n");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn without_any_runner_a_cell_fails_saying_nobody_serves_it() {
    if !support::sandbox_available() {
        return;
    }
    let Some((nats, users)) = NatsServer::start_secured() else { return };
    let url = nats.url();
    let _bridge = spawn_service(&url, &users, "bridge", &[], Some(&[]));
    let client = frontend(&url, &users, &["--capacity-wait", "1"]).await;
    let result = run_python(&client, "print(1)").await;
    assert_eq!(result.is_error, Some(true));
    let text = &result.content[0].as_text().unwrap().text;
    assert!(
        text.contains("no sandbox-runner answers for cells") && text.contains("codemode.v1.cell.run"),
        "the error says no runner serves cells, and on which subject: {text}"
    );
    assert!(text.contains("code-mode sandbox-runner"), "the error says what to start: {text}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn tool_calls_spread_across_bridge_replicas() {
    if !support::sandbox_available() {
        return;
    }
    let Some((nats, users)) = NatsServer::start_secured() else { return };
    let url = nats.url();
    // Two bridge replicas, each wrapping its own server process with its own log.
    let logs: Vec<_> = (0..2).map(|i| support::log_path(&format!("replica-{i}"))).collect();
    let _bridges: Vec<_> = logs
        .iter()
        .map(|log| spawn_service(&url, &users, "bridge", &[], Some(&["--log", log.to_str().unwrap()])))
        .collect();
    let _runner = spawn_service(&url, &users, "sandbox-runner", &[], None);
    let client = frontend(&url, &users, &[]).await;
    let code = "import json\ntotal = 0\nfor i in range(40):\n    total += json.loads(await add({'a': i, 'b': 1}))['sum']\nprint(total)";
    let result = run_python(&client, code).await;
    assert_eq!(report(&result)["stdout"], "820\n", "every call answered once, by one replica or the other");
    let calls: Vec<usize> = logs.iter().map(|l| support::logged_calls(l).len()).collect();
    assert_eq!(calls.iter().sum::<usize>(), 40, "{calls:?}");
    assert!(calls.iter().all(|&c| c > 0), "both replicas served calls: {calls:?}");
    client.cancel().await.unwrap();
    for log in &logs {
        let _ = std::fs::remove_file(log);
    }
}
