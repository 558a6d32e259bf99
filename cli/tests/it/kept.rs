//! Kept sessions (`--keep-variables`) end to end: real MCP clients, the real
//! sandbox, the test server; all in one process and over NATS.
//!
//! Each cell of a client session runs in the session's one container, so
//! what a cell leaves (variables, imports, files in /tmp) is there for the
//! next; each cell keeps its own deadline, output caps and call budget;
//! nothing of one session reaches another; the container goes when the
//! session ends, when it idles, or when a cell is stopped, and the next
//! cell then says that earlier variables are gone.

use std::time::Duration;

use code_mode_core::testing::NatsServer;
use rmcp::model::CallToolResult;

use crate::http::{LEGACY, connect, spawn_http, stdout};
use crate::support::{
    self, Client, Deployment, containers_of, log_path, logged_calls, pid_alive, report, run_python, service_command,
    spawn_service, start,
};

/// The report's stdout and error; the cell must have answered.
fn out(result: &CallToolResult) -> (String, Option<String>) {
    let report = report(result);
    (report["stdout"].as_str().unwrap().to_string(), report["error"].as_str().map(str::to_string))
}

/// What a cell printed; it must have finished without an error.
async fn cell(client: &Client, code: &str) -> String {
    let (stdout, error) = out(&run_python(client, code).await);
    assert_eq!(error, None, "the cell failed: {stdout}");
    stdout
}

/// Wait until `pid` owns `n` sandbox containers (at most `within`).
async fn until_containers(pid: u32, n: usize, within: Duration) -> bool {
    let give_up = std::time::Instant::now() + within;
    while std::time::Instant::now() < give_up {
        if containers_of(pid).len() == n {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    false
}

const LOST: &str = "code-mode: the session's sandbox is gone";

mod all_in_one {
    #[tokio::test]
    async fn a_variable_an_import_and_a_file_set_in_one_cell_are_there_in_the_next() {
        super::a_variable_an_import_and_a_file_set_in_one_cell_are_there_in_the_next(super::Deployment::AllInOne).await
    }
}

mod over_nats {
    #[tokio::test]
    async fn a_variable_an_import_and_a_file_set_in_one_cell_are_there_in_the_next() {
        super::a_variable_an_import_and_a_file_set_in_one_cell_are_there_in_the_next(super::Deployment::OverNats).await
    }
}

async fn a_variable_an_import_and_a_file_set_in_one_cell_are_there_in_the_next(deployment: Deployment) {
    if !support::sandbox_available() {
        return;
    }
    let (client, _, _guards) = start(deployment, &["--keep-variables"], &[]).await;
    let tools = client.peer().list_all_tools().await.unwrap();
    let description = tools[0].description.as_deref().unwrap();
    assert!(description.contains("Variables, imports and files in /tmp persist between the runs"), "{description}");
    assert!(!description.contains("nothing kept between runs"), "{description}");
    let first = "import json\nx = 41\nopen('/tmp/note', 'w').write('kept')\n\
                 total = json.loads(await add({'a': 1, 'b': 2}))['sum']";
    assert_eq!(cell(&client, first).await, "");
    let second = "print(x + 1, open('/tmp/note').read(), total, json.dumps([True]))";
    assert_eq!(cell(&client, second).await, "42 kept 3 [true]\n");
    // A function defined in one cell fails in a later one with its own
    // source line in the traceback.
    assert_eq!(cell(&client, "def half(n):\n    return 1 / n").await, "");
    let (_, error) = out(&run_python(&client, "half(0)").await);
    let error = error.expect("the cell raised");
    assert!(error.contains("return 1 / n") && error.contains("ZeroDivisionError"), "{error}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn two_concurrent_sessions_using_the_same_names_never_see_each_others_values_or_files() {
    if !support::sandbox_available() {
        return;
    }
    let mut serve = tokio::process::Command::new(support::code_mode());
    serve.args(["serve", "--keep-variables", "--warm", "0", "--http", "127.0.0.1:0", "--"]).arg(support::test_server());
    serve.stdin(std::process::Stdio::null()).kill_on_drop(true);
    let (serve, url, _log) = spawn_http(&mut serve).await;
    let (a, b) = tokio::join!(connect(&url, (), LEGACY()), connect(&url, (), LEGACY()));
    let mine = |name: &'static str| {
        format!(
            "import os\nprint('secret' in globals(), os.path.exists('/tmp/secret'))\n\
             secret = '{name}'\nopen('/tmp/secret', 'w').write('{name}')"
        )
    };
    let (alice, bob) = (mine("alice"), mine("bob"));
    let (first_a, first_b) = tokio::join!(crate::http::run_python(&a, &alice), crate::http::run_python(&b, &bob));
    assert_eq!(stdout(&first_a), "False False\n", "a new session starts empty");
    assert_eq!(stdout(&first_b), "False False\n", "a new session starts empty");
    let read = "print(secret, open('/tmp/secret').read())";
    let (then_a, then_b) = tokio::join!(crate::http::run_python(&a, read), crate::http::run_python(&b, read));
    assert_eq!(stdout(&then_a), "alice alice\n");
    assert_eq!(stdout(&then_b), "bob bob\n");
    let pid = serve.id().unwrap();
    assert_eq!(containers_of(pid).len(), 2, "one container per session");
    // When every session ends no container is left, while serve still runs.
    a.cancel().await.ok();
    b.cancel().await.ok();
    assert!(until_containers(pid, 0, Duration::from_secs(20)).await, "left: {:?}", containers_of(pid));
    assert!(pid_alive(pid));
}

#[tokio::test]
async fn an_idle_sessions_container_is_removed_and_its_next_cell_says_its_variables_are_gone() {
    if !support::sandbox_available() {
        return;
    }
    let args = ["--keep-variables", "--session-idle", "2", "--warm", "0"];
    let (client, pid, _guards) = start(Deployment::AllInOne, &args, &[]).await;
    assert_eq!(cell(&client, "x = 1").await, "");
    assert_eq!(containers_of(pid).len(), 1, "the session's container lives between cells");
    assert!(until_containers(pid, 0, Duration::from_secs(20)).await, "the idle container was removed");
    let next = cell(&client, "print('x' in globals())").await;
    let lines: Vec<&str> = next.lines().collect();
    assert!(lines[0].starts_with(LOST) && lines[0].contains("without a run (--session-idle)"), "{next}");
    assert_eq!(lines[1], "False");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_deadline_in_a_kept_container_ends_it_and_the_next_cell_says_its_variables_are_gone() {
    if !support::sandbox_available() {
        return;
    }
    let args = ["--keep-variables", "--deadline", "6", "--warm", "0"];
    let (client, pid, _guards) = start(Deployment::AllInOne, &args, &[]).await;
    assert_eq!(cell(&client, "x = 1").await, "");
    let (_, error) = out(&run_python(&client, "while True:\n    pass").await);
    let error = error.expect("the run was stopped");
    assert!(error.contains("deadline") && error.contains("the session's sandbox was removed with this run"), "{error}");
    // What to do with a job longer than a run: split it, the variables
    // carry it (from the next run on); the operator's --deadline.
    assert!(
        error.contains(
            "For a longer job, do it in shorter runs: this session keeps its variables from one run to the next"
        ) && error.contains("--deadline"),
        "{error}"
    );
    assert!(until_containers(pid, 0, Duration::from_secs(10)).await, "the stopped cell's container was removed");
    let next = cell(&client, "print('x' in globals())").await;
    let lines: Vec<&str> = next.lines().collect();
    assert!(lines[0].starts_with(LOST) && lines[0].contains("the previous run was stopped"), "{next}");
    assert_eq!(lines[1], "False");
    assert_eq!(cell(&client, "print('x' in globals())").await, "False\n", "the notice is said once");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn memory_stays_bounded_by_the_containers_limit_across_many_cells() {
    if !support::sandbox_available() {
        return;
    }
    let (client, _, _guards) = start(Deployment::AllInOne, &["--keep-variables", "--warm", "0"], &[]).await;
    // Memory a cell frees is there for the next: 12 cells of 150 MiB each.
    let temporary = "data = b'x' * (150 * 2**20)\ndel data\nprint('ok')";
    for _ in 0..12 {
        assert_eq!(cell(&client, temporary).await, "ok\n");
    }
    // Memory kept across cells adds up against the one 256 MiB limit.
    let hoard = "hoard = globals().setdefault('hoard', [])\nhoard.append(b'x' * (60 * 2**20))\nprint(len(hoard))";
    let mut held = 0;
    let stopped = loop {
        let (stdout, error) = out(&run_python(&client, hoard).await);
        match error {
            None => held = stdout.trim().parse::<u32>().unwrap(),
            Some(error) => break error,
        }
        assert!(held < 5, "5 x 60 MiB fit in a 256 MiB container");
    };
    assert!(stopped.contains("ran out of memory"), "{stopped}");
    assert!(held >= 2, "two cells of 60 MiB fit: {held}");
    let next = cell(&client, "print('hoard' in globals())").await;
    assert!(next.starts_with(LOST) && next.ends_with("False\n"), "{next}");
    client.cancel().await.unwrap();
}

/// A cell that leaves a thread calling `add` and printing in a loop (after
/// a pause, so it starts once its cell has ended).
const LEAVE_A_THREAD: &str = "\
import asyncio, threading, time
def leak():
    time.sleep(0.5)
    while True:
        print('leak')
        try:
            asyncio.run(add({'a': 100, 'b': 1}))
        except ToolError:
            pass
        time.sleep(0.02)
threading.Thread(target=leak, daemon=True).start()
";

#[tokio::test]
async fn a_thread_left_calling_a_tool_and_printing_counts_for_no_later_cell() {
    if !support::sandbox_available() {
        return;
    }
    let log = log_path("kept-thread");
    let args = ["--keep-variables", "--max-calls", "3"];
    let (client, _, _guards) = start(Deployment::AllInOne, &args, &["--log", log.to_str().unwrap()]).await;
    assert_eq!(cell(&client, LEAVE_A_THREAD).await, "");
    tokio::time::sleep(Duration::from_secs(1)).await;
    // The next cell runs while the thread loops: none of its text or calls
    // count here, so this cell has its whole budget of three calls.
    let code = "import time\ntime.sleep(1)\nfor i in range(3):\n    print(await add({'a': i, 'b': 1}))\nprint('clean')";
    assert_eq!(cell(&client, code).await, "{\"sum\":1}\n{\"sum\":2}\n{\"sum\":3}\nclean\n");
    let calls = logged_calls(&log);
    assert_eq!(calls.len(), 3, "only the cell's own calls reached the server: {calls:?}");
    assert!(calls.iter().all(|c| !c.contains("100")), "{calls:?}");
    client.cancel().await.unwrap();
    let _ = std::fs::remove_file(&log);
}

/// A cell that leaves a thread writing a call and some text straight onto
/// the protocol pipe (as tampering code could), once its cell has ended.
const FORGE_BETWEEN_CELLS: &str = "\
import gc, json, os, threading, time
channel = next(o for o in gc.get_objects() if type(o).__name__ == 'Channel')
def forge():
    time.sleep(0.5)
    for i in range(5):
        os.write(channel._out_fd, (json.dumps({'type': 'output', 'data': 'forged'}) + '\\n').encode())
        os.write(channel._out_fd, (json.dumps({'type': 'call', 'id': 9000 + i, 'tool': 'add', 'arguments': {'a': 100, 'b': 1}}) + '\\n').encode())
threading.Thread(target=forge, daemon=True).start()
";

#[tokio::test]
async fn a_call_or_text_written_on_the_protocol_between_cells_never_reaches_the_bridge_or_the_next_cell() {
    if !support::sandbox_available() {
        return;
    }
    let log = log_path("kept-forge");
    let (client, _, _guards) =
        start(Deployment::AllInOne, &["--keep-variables"], &["--log", log.to_str().unwrap()]).await;
    assert_eq!(cell(&client, FORGE_BETWEEN_CELLS).await, "");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(cell(&client, "print('next', 'channel' in globals())").await, "next True\n", "the container lives on");
    assert!(logged_calls(&log).is_empty(), "no forged call reached the server: {:?}", logged_calls(&log));
    client.cancel().await.unwrap();
    let _ = std::fs::remove_file(&log);
}

/// A runner killed (SIGKILL) in the middle of a kept session's cell: the
/// cell fails within seconds (the runner held the cell's lease, as for a
/// fresh cell), not at its 60 s deadline; the next cell says the variables
/// are gone and runs on the other runner, which also reaps the dead
/// runner's kept container. Then that runner is killed between cells: the
/// next cell runs on a third, saying the variables are gone.
#[tokio::test]
async fn over_nats_a_runner_killed_mid_kept_cell_fails_it_within_5_s_and_killed_mid_or_between_cells_the_next_says_its_variables_are_gone()
 {
    if !support::sandbox_available() {
        return;
    }
    let Some((nats, users)) = NatsServer::start_secured() else { return };
    let url = nats.url();
    let log = log_path("kept-runner-killed");
    let _bridge = spawn_service(&url, &users, "bridge", &[], Some(&["--log", log.to_str().unwrap()]));
    let mut runners: Vec<_> =
        (0..2).map(|_| spawn_service(&url, &users, "sandbox-runner", &["--warm", "0"], None)).collect();
    let mut frontend = service_command(&url, &users, "frontend", &["--keep-variables", "--deadline", "60"], None);
    frontend.stdin(std::process::Stdio::piped());
    let (client, _) = support::connect_client(frontend).await;
    assert_eq!(cell(&client, "x = 1").await, "");
    let pids: Vec<u32> = runners.iter().map(|r| r.id().unwrap()).collect();
    let holder = pids.iter().position(|&p| containers_of(p).len() == 1).expect("one runner holds the container");
    let kept = containers_of(pids[holder]);

    // The cell makes a call (so it surely runs in the kept container), then
    // sleeps far longer than the test waits. The runner is killed 4 s after
    // the call: longer than a lease may go unanswered, so a cell that
    // fails before the kill means its lease was not held.
    let sent = tokio::time::Instant::now();
    let killed = async {
        let give_up = tokio::time::Instant::now() + Duration::from_secs(30);
        while logged_calls(&log).is_empty() {
            assert!(tokio::time::Instant::now() < give_up, "the kept cell's call never reached the server");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tokio::time::sleep(code_mode_core::lease::LOST_AFTER + Duration::from_secs(1)).await;
        runners[holder].start_kill().unwrap();
        let killed_at = tokio::time::Instant::now();
        let _ = runners[holder].wait().await;
        killed_at
    };
    let code = "await add({'a': 1, 'b': 1})\nimport time\ntime.sleep(50)";
    let answered = async { (run_python(&client, code).await, tokio::time::Instant::now()) };
    let ((result, answered_at), killed_at) =
        tokio::time::timeout(Duration::from_secs(40), async { tokio::join!(answered, killed) })
            .await
            .expect("the kept cell is answered long before its 60 s deadline");
    assert_eq!(result.is_error, Some(true), "{result:?}");
    let text = &result.content[0].as_text().unwrap().text;
    assert!(answered_at > killed_at, "the kept cell failed before its runner was killed: {text}");
    let (seen, total) = (answered_at - killed_at, answered_at - sent);
    assert!(text.contains("sandbox-runner") && text.contains("stopped answering"), "{text}");
    assert!(seen <= Duration::from_secs(5), "the cell's error came {seen:?} after the kill: {text}");
    assert!(total < Duration::from_secs(15), "the cell's error came {total:?} after it was sent: {text}");
    eprintln!("kept cell: the client had its error {seen:?} after the kill, {total:?} after sending it");

    let next = cell(&client, "print('x' in globals())\ny = 5").await;
    let lines: Vec<&str> = next.lines().collect();
    assert!(lines[0].starts_with(LOST) && lines[0].contains("was lost during an earlier run"), "{next}");
    assert_eq!(lines[1], "False");
    let other = pids[1 - holder];
    assert_eq!(containers_of(other).len(), 1, "the session's new container is on the other runner");
    assert_eq!(cell(&client, "print(y)").await, "5\n", "and it keeps variables again");

    // The live runner removes the dead one's kept container.
    let reaped =
        until_containers(pids[holder], 0, code_mode_sandbox_runner::REAP_EVERY + Duration::from_secs(10)).await;
    if !reaped {
        for id in &kept {
            let _ = std::process::Command::new("docker").args(["rm", "-f", id]).output();
        }
    }
    assert!(reaped, "the killed runner's kept container {kept:?} was left");

    // Killed between cells: the next cell finds nobody on the runner's
    // subject and starts fresh on a third runner, saying so.
    let third = spawn_service(&url, &users, "sandbox-runner", &["--warm", "0"], None);
    let third_pid = third.id().unwrap();
    runners[1 - holder].start_kill().unwrap();
    let _ = runners[1 - holder].wait().await;
    let next = cell(&client, "print('y' in globals())").await;
    let lines: Vec<&str> = next.lines().collect();
    assert!(lines[0].starts_with(LOST) && lines[0].contains("its sandbox-runner stopped or restarted"), "{next}");
    assert_eq!(lines[1], "False");
    assert_eq!(containers_of(third_pid).len(), 1, "the session's new container is on the third runner");
    client.cancel().await.unwrap();
    assert!(until_containers(third_pid, 0, Duration::from_secs(20)).await, "the session's end removed its container");
    let reaped = until_containers(other, 0, code_mode_sandbox_runner::REAP_EVERY + Duration::from_secs(10)).await;
    assert!(reaped, "the third runner reaped the second one's kept container");
    let _ = std::fs::remove_file(&log);
}

/// A kept session's first cell whose report is lost on its way (nats-server
/// refuses to carry it: larger than its `max_payload`) fails within
/// seconds, and its container is not left behind until `--session-idle`:
/// the runner's lease named it, so the next cell runs in it and sees what
/// the lost cell set, the runner holds that one container only, and it goes
/// when the session ends.
#[tokio::test]
async fn over_nats_when_a_kept_sessions_first_report_is_lost_the_next_cell_runs_in_its_container_and_none_is_left_behind()
 {
    if !support::sandbox_available() {
        return;
    }
    let users = code_mode_core::testing::NatsUsers::generate();
    let Some(nats) = support::nats_with_max_payload(&users, 16384) else { return };
    let url = nats.url();
    let _bridge = spawn_service(&url, &users, "bridge", &[], Some(&[]));
    let runner = spawn_service(&url, &users, "sandbox-runner", &["--warm", "0"], None);
    let runner_pid = runner.id().unwrap();
    let mut frontend = service_command(&url, &users, "frontend", &["--keep-variables", "--deadline", "60"], None);
    frontend.stdin(std::process::Stdio::piped());
    let (client, _) = support::connect_client(frontend).await;

    // About 48 KB of report (each control character is six bytes as JSON).
    let lost = tokio::time::timeout(Duration::from_secs(40), run_python(&client, "x = 41\nprint('\\x01' * 8000)"))
        .await
        .expect("the cell is answered long before its 60 s deadline");
    assert_eq!(lost.is_error, Some(true), "{lost:?}");
    let text = lost.content.iter().find_map(|c| c.as_text()).map(|t| t.text.clone()).unwrap_or_default();
    assert!(text.contains("report of this cell was lost"), "{text}");
    assert_eq!(containers_of(runner_pid).len(), 1, "the session's container");

    let (stdout, error) = out(&run_python(&client, "print(x + 1)").await);
    assert_eq!((stdout.as_str(), error), ("42\n", None), "the next cell ran in the lost cell's container");
    assert_eq!(containers_of(runner_pid).len(), 1, "no second container was started");

    client.cancel().await.unwrap();
    assert!(until_containers(runner_pid, 0, Duration::from_secs(30)).await, "the container went with the session");
}

#[tokio::test]
async fn over_nats_with_every_slot_held_by_kept_sessions_a_new_cell_gets_a_clear_no_capacity_error() {
    if !support::sandbox_available() {
        return;
    }
    let Some((nats, users)) = NatsServer::start_secured() else { return };
    let url = nats.url();
    let _bridge = spawn_service(&url, &users, "bridge", &[], Some(&[]));
    let _runner = spawn_service(&url, &users, "sandbox-runner", &["--capacity", "1", "--warm", "0"], None);
    let frontend = || {
        let mut cmd = service_command(&url, &users, "frontend", &["--keep-variables", "--capacity-wait", "1"], None);
        cmd.stdin(std::process::Stdio::piped());
        cmd
    };
    let (holder, _) = support::connect_client(frontend()).await;
    let (other, _) = support::connect_client(frontend()).await;
    assert_eq!(cell(&holder, "x = 1").await, "");
    // The idle kept container holds the runner's only slot.
    let refused = run_python(&other, "print('other')").await;
    assert_eq!(refused.is_error, Some(true));
    let text = &refused.content[0].as_text().unwrap().text;
    assert!(text.contains("no sandbox-runner had room for the cell"), "{text}");
    // The holder's own next cell runs in its container.
    assert_eq!(cell(&holder, "print(x)").await, "1\n");
    // Once the holder's session ends, the slot is free again.
    holder.cancel().await.unwrap();
    let mut ran = None;
    for _ in 0..20 {
        let result = run_python(&other, "print('other')").await;
        if result.is_error != Some(true) {
            ran = Some(result);
            break;
        }
    }
    assert_eq!(stdout(&ran.expect("the freed slot takes the cell")), "other\n");
    other.cancel().await.unwrap();
}
