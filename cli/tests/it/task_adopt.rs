//! A `run_python` task's result survives the frontend that drove it, over
//! NATS: the runner keeps a task cell's final report in the bucket
//! `codemode_cell_reports`, and any frontend replica that finds the task's
//! driver silent settles the task from it, or follows the cell while it
//! runs; a task whose cell is gone with no report fails saying so. And the
//! faults around it: nats-server restarted while a task's cell runs, and a
//! task store that is full when a task is made. Real nats-server (the
//! deployment's users and permissions), real Docker, rmcp's client.

use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, TaskPayload, TaskStatus};
use serde_json::json;

use crate::auth::{TokenFile, token_new};
use crate::support::{self, SplitHttp};
use crate::task_cells::{connect_as, get, report_of, settled, start, stateless};

/// A whole-seconds setting of a test from the environment, else `default`.
fn secs_from_env(var: &str, default: u64) -> u64 {
    std::env::var(var).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// A cell that runs `total` seconds, saying its progress every 10 s.
fn long_cell(total: u64) -> String {
    format!(
        "import time\ntotal = {total}\nfor second in range(0, total, 10):\n    \
         report_progress(second, total, 'running')\n    time.sleep(min(10, total - second))\nprint(f'ran {{total}} s')\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ten_minute_task_cell_keeps_its_result_when_its_frontend_is_killed_at_minute_three_and_another_identity_finds_nothing()
 {
    let Some(split) = SplitHttp::start() else { return };
    // CODE_MODE_TEST_TASK_CELL_SECS / _KILL_AT_SECS shorten it by hand.
    let total = secs_from_env("CODE_MODE_TEST_TASK_CELL_SECS", 600);
    let kill_at = secs_from_env("CODE_MODE_TEST_TASK_KILL_AT_SECS", 180);
    let (alice, bob) = (token_new("alice"), token_new("bob"));
    let tokens = TokenFile::of(&[&alice, &bob]);
    let (_bridge, _runner) = split.services(&[], &[], &[]);
    let (mut first, first_url) = split.frontend(&tokens).await;
    let through_first = connect_as(&first_url, &alice, stateless()).await;
    let (id, _) = start(&through_first, &long_cell(total), None).await;
    let started = Instant::now();

    // Polled through the frontend that drives it, until minute three.
    let mut said = String::new();
    while started.elapsed() < Duration::from_secs(kill_at) {
        let now = get(&through_first, &id).await.expect("tasks/get answers while the cell runs");
        assert_eq!(now.task.status(), TaskStatus::Working, "{now:?}");
        said = now.task.task.status_message.clone().unwrap_or_default();
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
    assert!(said.contains("progress"), "the cell ran and said so: {said}");
    support::kill9(first.id().unwrap());
    let killed = Instant::now();
    first.wait().await.ok();
    through_first.cancel().await.ok();

    // A new frontend: it answers for the task, adopts it once its driver
    // is silent, and hands over the result when the cell ends.
    let (_second, second_url) = split.frontend(&tokens).await;
    let through_second = connect_as(&second_url, &alice, stateless()).await;
    let up = killed.elapsed();
    // The record stays as its dead driver last wrote it until a frontend
    // adopts the task and writes it again.
    let mut answered = None;
    let mut frozen = None;
    let mut adopted = None;
    let result = loop {
        let now = get(&through_second, &id).await.expect("the new frontend answers tasks/get");
        answered.get_or_insert_with(|| killed.elapsed());
        let said = now.task.task.status_message.clone().unwrap_or_default();
        let frozen = frozen.get_or_insert_with(|| said.clone());
        if adopted.is_none() && now.task.status() == TaskStatus::Working && said != *frozen {
            adopted = Some(killed.elapsed());
            eprintln!("measured: adopted {} ms after the kill: {said}", killed.elapsed().as_millis());
        }
        if now.task.status().is_terminal() {
            break now;
        }
        assert_eq!(now.task.status(), TaskStatus::Working, "the task goes on while its cell runs: {now:?}");
        let left = Duration::from_secs(total).saturating_sub(started.elapsed());
        assert!(started.elapsed() < Duration::from_secs(total + 120), "no result {left:?} after the cell's end");
        tokio::time::sleep(Duration::from_secs(2)).await;
    };
    let late = started.elapsed().saturating_sub(Duration::from_secs(total));
    eprintln!(
        "measured: a new frontend was up {} ms after the kill and answered tasks/get {} ms after it, adopted the \
         task after {:?}; the result came {} ms after the cell's {total} s",
        up.as_millis(),
        answered.unwrap_or_default().as_millis(),
        adopted,
        late.as_millis()
    );
    assert_eq!(result.task.status(), TaskStatus::Completed, "{result:?}");
    assert_eq!(report_of(&result)["stdout"], format!("ran {total} s\n"), "{result:?}");
    assert!(adopted.is_some(), "the task said it was followed by the new frontend while its cell ran");

    // Another identity: "not found", as an id nobody made.
    let bobs = connect_as(&second_url, &bob, stateless()).await;
    let stolen = get(&bobs, &id).await.expect_err("bob cannot read alice's task");
    assert!(stolen.to_string().contains("no task"), "{stolen}");
    assert_eq!(get(&through_second, &id).await.unwrap().task.status(), TaskStatus::Completed);
    through_second.cancel().await.ok();
    bobs.cancel().await.ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_nats_a_task_whose_frontend_and_runner_both_die_fails_saying_no_report_of_its_cell_was_kept() {
    let Some(split) = SplitHttp::start() else { return };
    let (alice, tokens) = support::alice();
    let (_bridge, mut runner) = split.services(&[], &[], &[]);
    let (mut first, first_url) = split.frontend(&tokens).await;
    let through_first = connect_as(&first_url, &alice, stateless()).await;
    let (id, _) = start(&through_first, &long_cell(120), None).await;
    let started = Instant::now();
    while !get(&through_first, &id).await.unwrap().task.task.status_message.unwrap_or_default().contains("progress") {
        assert!(started.elapsed() < Duration::from_secs(30), "the cell never ran");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    support::kill9(first.id().unwrap());
    support::kill9(runner.id().unwrap());
    let killed = Instant::now();
    first.wait().await.ok();
    runner.wait().await.ok();
    let (_second, second_url) = split.frontend(&tokens).await;
    let through_second = connect_as(&second_url, &alice, stateless()).await;
    let (failed, _) = settled(&through_second, &id, Duration::from_secs(60)).await;
    eprintln!("measured: failed {} ms after its frontend and runner were killed", killed.elapsed().as_millis());
    assert_eq!(failed.task.status(), TaskStatus::Failed, "{failed:?}");
    let TaskPayload::Failed { error } = &failed.task.payload else { unreachable!() };
    let message = error["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("sandbox-runner no longer answers") && message.contains("no report of the cell was kept"),
        "the error says why the result is lost: {message}"
    );
    through_second.cancel().await.ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_nats_a_task_whose_cell_runs_while_nats_server_restarts_still_ends_with_its_result() {
    let Some(mut split) = SplitHttp::start() else { return };
    let (alice, tokens) = support::alice();
    let (_bridge, _runner) = split.services(&[], &[], &[]);
    let (_frontend, url) = split.frontend(&tokens).await;
    let client = connect_as(&url, &alice, stateless()).await;
    let (id, _) = start(&client, &long_cell(30), None).await;
    let started = Instant::now();
    while !get(&client, &id).await.unwrap().task.task.status_message.unwrap_or_default().contains("progress") {
        assert!(started.elapsed() < Duration::from_secs(30), "the cell never ran");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    // Down long enough for every lease question to go unanswered.
    split.nats.stop();
    let stopped = Instant::now();
    tokio::time::sleep(Duration::from_secs(8)).await;
    split.nats.restart();
    eprintln!("measured: nats-server was down {} ms", stopped.elapsed().as_millis());
    // While it comes back, tasks/get may fail (the store does not answer).
    let done = loop {
        match get(&client, &id).await {
            Ok(now) if now.task.status().is_terminal() => break now,
            Ok(_) => {}
            Err(e) => eprintln!("tasks/get while nats-server comes back: {e}"),
        }
        assert!(started.elapsed() < Duration::from_secs(120), "the task never settled");
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    eprintln!("measured: the task settled {} ms after the cell started", started.elapsed().as_millis());
    assert_eq!(done.task.status(), TaskStatus::Completed, "{done:?}");
    assert_eq!(report_of(&done)["stdout"], "ran 30 s\n", "{done:?}");
    client.cancel().await.ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_nats_a_full_task_store_refuses_the_task_at_its_creation_saying_so() {
    let Some(split) = SplitHttp::start() else { return };
    // The tasks' bucket made (as the frontend's user may) far too small
    // for any task's record.
    let client =
        async_nats::ConnectOptions::with_user_and_password("frontend".into(), split.users.password("frontend").into())
            .custom_inbox_prefix("_INBOX.frontend")
            .connect(split.nats.url())
            .await
            .expect("the frontend user connects");
    let tiny = async_nats::jetstream::kv::Config {
        bucket: "codemode_tasks".into(),
        history: 1,
        max_bytes: 200,
        storage: async_nats::jetstream::stream::StorageType::File,
        ..Default::default()
    };
    async_nats::jetstream::new(client).create_key_value(tiny).await.expect("the tiny bucket is made");
    let (alice, tokens) = support::alice();
    let (_bridge, _runner) = split.services(&[], &[], &[]);
    let (_frontend, url) = split.frontend(&tokens).await;
    let client = connect_as(&url, &alice, stateless()).await;
    let mut params = CallToolRequestParams::new("run_python");
    params.arguments = Some(json!({ "code": "print('never kept')" }).as_object().unwrap().clone());
    let sent = Instant::now();
    let refused = client.peer().call_tool_once(params).await.expect_err("no task handle from a full store");
    eprintln!("measured: refused {} ms after the call: {refused}", sent.elapsed().as_millis());
    let said = refused.to_string();
    assert!(said.contains("the task store cannot be used") && said.contains("-32603"), "{said}");
    assert!(said.contains("maximum bytes"), "the error names the full store: {said}");
    client.cancel().await.ok();
}
