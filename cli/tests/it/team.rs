//! Approvals for a team, over NATS: a rule names approvers, the call waits
//! on the approval board in the JetStream key-value store, its cell held
//! (container paused, deadline stopped), and a decision taken through the
//! bridges' console subject reaches the waiting code. The services are the
//! real processes; the test speaks on the bus as the frontend's console
//! does, with the `frontend` user's permissions, and through a frontend's
//! console over HTTP where a person signs in (an approver whose own code
//! made the call, as a client of that frontend with her token).

use std::time::{Duration, Instant};

use code_mode_core::bus::Bus;
use code_mode_core::nats::{NatsOptions, NatsTransport};
use code_mode_proto::{ConsoleReply, ConsoleRequest, Viewer, WaitingCall, subjects};
use serde_json::Value;

use crate::support::{self, Deployment, Guards, log_path};

/// `echo` waits for alice or the security group; everything else goes.
pub(crate) const TEAM_POLICY: &str = r#"{"version": "1", "default": "allow", "tools": {"echo": {
    "action": "approve", "approvers": ["alice", "group:security"], "reason": "echo speaks for the team"}}}"#;

pub(crate) fn viewer(name: &str, groups: &[&str]) -> Viewer {
    Viewer { name: name.into(), groups: groups.iter().map(|g| g.to_string()).collect() }
}

/// A bus client as the frontend's NATS user (what the console uses).
async fn console_bus(guards: &Guards) -> Bus {
    let options = NatsOptions {
        url: guards.nats_url(),
        credentials: Some(("frontend".into(), guards.users().password("frontend").into())),
        inbox_prefix: Some("_INBOX.frontend".into()),
        ..Default::default()
    };
    Bus::new(NatsTransport::connect(&options).await.expect("the test connects as the frontend user"))
}

async fn board(bus: &Bus, viewer: &Viewer) -> (Vec<WaitingCall>, u32, Vec<code_mode_proto::Decision>) {
    let request = ConsoleRequest::Board { viewer: viewer.clone() };
    match bus.call::<_, ConsoleReply>(subjects::APPROVALS, &request, Duration::from_secs(5)).await {
        Ok(ConsoleReply::Board { waiting, others, recent }) => (waiting, others, recent),
        other => panic!("the board: {other:?}"),
    }
}

/// The first call waiting for `viewer`, within `within`.
pub(crate) async fn first_waiting(bus: &Bus, viewer: &Viewer, within: Duration) -> WaitingCall {
    let started = Instant::now();
    loop {
        if let Some(first) = board(bus, viewer).await.0.into_iter().next() {
            return first;
        }
        assert!(started.elapsed() < within, "no call waited for {} within {within:?}", viewer.name);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The sandbox container of a cell.
pub(crate) fn container_of_cell(cell: &str) -> String {
    let out = std::process::Command::new("docker")
        .args(["ps", "-q", "--no-trunc", "--filter", &format!("label=code-mode.cell={cell}")])
        .output()
        .expect("docker ps runs");
    let ids = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(!ids.is_empty() && !ids.contains('\n'), "one container runs the cell {cell}: {ids:?}");
    ids
}

/// The container's state as the engine says (`paused`, `running`).
pub(crate) fn state_of(container: &str) -> String {
    let out = std::process::Command::new("docker")
        .args(["inspect", "-f", "{{.State.Status}}", container])
        .output()
        .expect("docker inspect runs");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// CPU time the container's processes used, in nanoseconds, read from its
/// cgroup (v1 `cpuacct.usage`, or v2 `cpu.stat`'s `usage_usec`).
pub(crate) fn cpu_used_ns(container: &str) -> u64 {
    let out = std::process::Command::new("docker")
        .args(["inspect", "-f", "{{.State.Pid}}", container])
        .output()
        .expect("docker inspect runs");
    let pid = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).expect("the container's cgroups");
    for line in cgroups.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next(), parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        if controllers.split(',').any(|c| c == "cpuacct") {
            let usage = std::fs::read_to_string(format!("/sys/fs/cgroup/cpuacct{path}/cpuacct.usage"))
                .expect("cpuacct.usage of the container");
            return usage.trim().parse().expect("a number of nanoseconds");
        }
        if controllers.is_empty() {
            let stat = std::fs::read_to_string(format!("/sys/fs/cgroup{path}/cpu.stat")).expect("cpu.stat");
            let usec = stat
                .lines()
                .find_map(|l| l.strip_prefix("usage_usec "))
                .and_then(|v| v.trim().parse::<u64>().ok())
                .expect("usage_usec");
            return usec * 1000;
        }
    }
    panic!("no CPU accounting cgroup for the container: {cgroups}");
}

fn policy_file(tag: &str, policy: &str) -> std::path::PathBuf {
    let path = log_path(tag).with_extension("json");
    std::fs::write(&path, policy).expect("the policy is written");
    path
}

const ECHO_ONCE: &str = "\
try:
    print(await echo({'text': 'launch-code-4711'}))
except ToolError as e:
    print('refused:', e)
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_approved_three_minutes_after_it_was_asked_completes_in_a_cell_whose_deadline_is_20_seconds_its_container_paused_and_using_no_cpu_meanwhile()
 {
    if !support::sandbox_available() {
        return;
    }
    let policy = policy_file("team-policy", TEAM_POLICY);
    let audit = log_path("team-audit");
    // No warm pool: the cell's own container carries its id as a label
    // (a warm one was labelled before any cell was known).
    let args = [
        "--policy",
        policy.to_str().unwrap(),
        "--deadline",
        "20",
        "--approval-timeout",
        "600",
        "--audit",
        audit.to_str().unwrap(),
        "--warm",
        "0",
    ];
    let (client, _pid, guards) = support::start(Deployment::OverNats, &args, &[]).await;
    let bus = console_bus(&guards).await;
    let cell = tokio::spawn(async move {
        let result = support::run_python(&client, ECHO_ONCE).await;
        (support::report(&result), client)
    });
    let alice = viewer("alice", &[]);
    let waiting = first_waiting(&bus, &alice, Duration::from_secs(60)).await;
    assert!(waiting.server.ends_with("code-mode-test-server") && waiting.tool == "echo", "{waiting:?}");
    assert_eq!(waiting.reason.as_deref(), Some("echo speaks for the team"));
    assert!(waiting.arguments.contains("launch-code-4711"), "{waiting:?}");
    // Nobody outside the approvers sees it.
    let (theirs, others, _) = board(&bus, &viewer("mallory", &["dev"])).await;
    assert!(theirs.is_empty() && others == 1, "mallory sees {theirs:?} ({others} others)");
    let container = container_of_cell(&waiting.cell_id);
    // The hold reaches the runner within a renewal.
    let started = Instant::now();
    while state_of(&container) != "paused" {
        assert!(started.elapsed() < Duration::from_secs(20), "the container was not paused");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let cpu_before = cpu_used_ns(&container);
    let asked = Instant::now();
    tokio::time::sleep(Duration::from_secs(180)).await;
    let cpu_after = cpu_used_ns(&container);
    assert_eq!(state_of(&container), "paused", "still paused after 3 minutes");
    assert_eq!(cpu_after, cpu_before, "a paused container uses no CPU ({cpu_before} ns, then {cpu_after} ns)");
    let decided = bus
        .call::<_, ConsoleReply>(
            subjects::APPROVALS,
            &ConsoleRequest::Decide {
                viewer: alice.clone(),
                id: waiting.id.clone(),
                approve: true,
                note: "fine".into(),
            },
            Duration::from_secs(5),
        )
        .await
        .expect("alice's decision is taken");
    assert!(matches!(&decided, ConsoleReply::Decided(d) if d.outcome == "approved"), "{decided:?}");
    let (report, client) = cell.await.unwrap();
    assert!(report["error"].is_null(), "the cell ended well: {report}");
    assert_eq!(report["stdout"].as_str().unwrap().trim(), "launch-code-4711", "{report}");
    eprintln!("approved after {:?}; the cell's CPU time stayed at {cpu_before} ns while paused", asked.elapsed());
    // The decision is an audit record: who, when, the note, the question's hash.
    let text = std::fs::read_to_string(&audit).unwrap_or_default();
    let record: Value = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|r| r["kind"] == "call" && r["tool"] == "echo")
        .unwrap_or_else(|| panic!("a call record for echo in {text}"));
    let approval = &record["approval"];
    assert_eq!((approval["outcome"].as_str(), approval["by"].as_str()), (Some("approved"), Some("alice")), "{record}");
    assert_eq!(approval["note"], "fine");
    assert_eq!(approval["question_sha256"].as_str(), Some(waiting.question_sha256.as_str()));
    assert!(approval["waited_ms"].as_u64().unwrap() >= 180_000, "{record}");
    assert_eq!(record["decision"], "approved");
    // Nothing waits any more, and the decision is among the recent ones.
    let (left, _, recent) = board(&bus, &alice).await;
    assert!(left.is_empty(), "{left:?}");
    assert_eq!(recent.first().map(|d| d.id.as_str()), Some(waiting.id.as_str()));
    client.cancel().await.ok();
    let _ = std::fs::remove_file(&policy);
    let _ = std::fs::remove_file(&audit);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declined_call_raises_a_tool_error_carrying_the_approvers_note_and_the_caller_cannot_approve_their_own_call()
{
    if !support::sandbox_available() {
        return;
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let policy = policy_file("team-decline", TEAM_POLICY);
    let calls = log_path("team-decline-calls");
    let args = ["--policy", policy.to_str().unwrap(), "--approval-timeout", "120"];
    // nats-server, the bridge and a runner (`start`'s own stdio frontend
    // stays unused: its client has no identity).
    let (_unused, _pid, guards) =
        support::start(Deployment::OverNats, &args, &["--log", calls.to_str().unwrap()]).await;
    let bus = console_bus(&guards).await;
    // Alice is an approver by name, and the caller: her code runs over
    // HTTP with her token, so the question carries her identity. Bob
    // approves as a member of the security group.
    let alice = crate::auth::token_new("alice");
    let mut bob = crate::auth::token_new("bob");
    bob.line.push_str(" groups=security");
    let tokens = crate::auth::TokenFile::of(&[&alice, &bob]);
    let mut frontend = support::service_command(
        &guards.nats_url(),
        guards.users(),
        "frontend",
        &["--http", "127.0.0.1:0", "--auth-tokens", tokens.arg()],
        None,
    );
    let (_frontend, url, _log) = crate::http::spawn_http(&mut frontend).await;
    let base = url.trim_end_matches("/mcp").to_string();
    let client = crate::auth::connect_as(&url, &alice, ()).await;
    let cell = tokio::spawn(async move {
        let result = crate::http::run_python(&client, ECHO_ONCE).await;
        (crate::http::stdout(&result), client)
    });
    let bob_viewer = viewer("bob", &["security"]);
    let waiting = first_waiting(&bus, &bob_viewer, Duration::from_secs(60)).await;
    assert_eq!(waiting.identity.as_deref(), Some("alice"), "the question names its caller: {waiting:?}");
    assert!(waiting.approvers.contains(&"alice".to_string()), "alice is among the approvers: {waiting:?}");

    // Alice signs in to the console and approves her own call: refused,
    // saying why.
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let cookie = crate::console::login(&http, &base, &alice.token).await;
    let page = http.get(format!("{base}/console")).header("cookie", &cookie).send().await.unwrap();
    let csrf = crate::console::csrf_in(&page.text().await.unwrap());
    let link = format!("/console/approvals/{}", waiting.id);
    let refused = crate::console::decide(&http, &base, &cookie, &link, "approve", "my+own", &csrf).await;
    assert_eq!(refused.status(), 409, "alice's approval of her own call is refused");
    let page = refused.text().await.unwrap();
    let why = "alice made this call, and the rule does not let anyone approve their own calls";
    assert!(page.contains(why), "{page}");
    // The same on the bus, as the console asks the bridges.
    let own = ConsoleRequest::Decide {
        viewer: viewer("alice", &[]),
        id: waiting.id.clone(),
        approve: true,
        note: String::new(),
    };
    let refused = bus
        .call::<_, ConsoleReply>(subjects::APPROVALS, &own, Duration::from_secs(5))
        .await
        .expect_err("the caller is refused her own call");
    assert!(refused.to_string().contains(why), "{refused}");
    // Eve is no approver at all.
    let refused = bus
        .call::<_, ConsoleReply>(
            subjects::APPROVALS,
            &ConsoleRequest::Decide {
                viewer: viewer("eve", &["dev"]),
                id: waiting.id.clone(),
                approve: true,
                note: String::new(),
            },
            Duration::from_secs(5),
        )
        .await
        .expect_err("eve is no approver");
    assert!(refused.to_string().contains("eve is not among this rule's approvers"), "{refused}");
    // The call still waits: on bob's board and decided by nobody, its
    // cell running, the server not called.
    let (still, _, recent) = board(&bus, &bob_viewer).await;
    assert!(still.iter().any(|c| c.id == waiting.id), "the call no longer waits: {still:?}");
    assert!(!recent.iter().any(|d| d.id == waiting.id), "the call was decided: {recent:?}");
    assert!(!cell.is_finished(), "the cell ended while its call waited");
    assert!(!support::logged_calls(&calls).iter().any(|c| c == "tools/call echo"), "echo reached the server");

    bus.call::<_, ConsoleReply>(
        subjects::APPROVALS,
        &ConsoleRequest::Decide {
            viewer: bob_viewer,
            id: waiting.id.clone(),
            approve: false,
            note: "not on a Friday".into(),
        },
        Duration::from_secs(5),
    )
    .await
    .expect("bob's decision is taken");
    let (stdout, client) = cell.await.unwrap();
    assert!(
        stdout.contains("refused:") && stdout.contains("declined by bob: not on a Friday"),
        "the code's ToolError carries the note: {stdout}"
    );
    assert!(
        !support::logged_calls(&calls).iter().any(|c| c == "tools/call echo"),
        "a declined echo reached the server"
    );
    client.cancel().await.ok();
    let _ = std::fs::remove_file(&policy);
    let _ = std::fs::remove_file(&calls);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runner_killed_while_its_cell_waits_ends_the_question_with_a_clear_message() {
    if !support::sandbox_available() {
        return;
    }
    let policy = policy_file("team-runner", TEAM_POLICY);
    let args = ["--policy", policy.to_str().unwrap(), "--approval-timeout", "300"];
    let (client, _pid, mut guards) = support::start(Deployment::OverNats, &args, &[]).await;
    let bus = console_bus(&guards).await;
    let cell = tokio::spawn(async move {
        let result = support::run_python(&client, ECHO_ONCE).await;
        (support::outcome(&result), client)
    });
    let alice = viewer("alice", &[]);
    let waiting = first_waiting(&bus, &alice, Duration::from_secs(60)).await;
    let runner = guards.runner.as_mut().unwrap();
    support::kill9(runner.id().unwrap());
    let started = Instant::now();
    let gone = loop {
        let (left, _, recent) = board(&bus, &alice).await;
        if left.is_empty()
            && let Some(decision) = recent.into_iter().find(|d| d.id == waiting.id)
        {
            break decision;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "the question stayed on the board");
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert_eq!(gone.outcome, "withdrawn", "{gone:?}");
    assert!(gone.note.contains("sandbox-runner running it stopped answering"), "{gone:?}");
    eprintln!("withdrawn {:?} after the runner was killed", started.elapsed());
    let (outcome, client) = cell.await.unwrap();
    let lost = outcome.expect_err("the cell's outcome is unknown");
    assert!(lost.contains("sandbox-runner running this cell was lost"), "{lost}");
    client.cancel().await.ok();
    let _ = std::fs::remove_file(&policy);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_frontend_killed_while_a_call_waits_a_new_one_shows_the_same_question_and_its_approval_reaches_the_cell() {
    if !support::sandbox_available() {
        return;
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let policy = policy_file("team-restart", TEAM_POLICY);
    let calls = log_path("team-restart-calls");
    let args = ["--policy", policy.to_str().unwrap(), "--approval-timeout", "300"];
    let (client, frontend_pid, guards) =
        support::start(Deployment::OverNats, &args, &["--log", calls.to_str().unwrap()]).await;
    let cell = tokio::spawn(async move {
        let result = support::run_python(&client, ECHO_ONCE).await;
        (support::outcome(&result), client)
    });
    let bus = console_bus(&guards).await;
    let alice = viewer("alice", &[]);
    let waiting = first_waiting(&bus, &alice, Duration::from_secs(60)).await;
    // The frontend that ran the cell dies; its client's request goes with it.
    support::kill9(frontend_pid);
    let _ = cell.await;
    // Another frontend, with the console, over the same NATS.
    let mut token = crate::auth::token_new("alice");
    token.line.push_str(" groups=operators");
    let tokens = crate::auth::TokenFile::of(&[&token]);
    let mut second = support::service_command(
        &guards.nats_url(),
        guards.users(),
        "frontend",
        &["--http", "127.0.0.1:0", "--auth-tokens", tokens.arg()],
        None,
    );
    let (_second, url, _log) = crate::http::spawn_http(&mut second).await;
    let base = url.trim_end_matches("/mcp").to_string();
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let cookie = crate::console::login(&http, &base, &token.token).await;
    let page = http.get(format!("{base}/console")).header("cookie", &cookie).send().await.unwrap();
    let page = page.text().await.unwrap();
    let link = format!("/console/approvals/{}", waiting.id);
    assert!(page.contains(&link), "the new frontend shows the same question {}: {page}", waiting.id);
    let csrf = crate::console::csrf_in(&page);
    let decided = crate::console::decide(&http, &base, &cookie, &link, "approve", "after+the+restart", &csrf).await;
    assert_eq!(decided.status(), 200);
    // The approval reaches the cell: the call goes out to the server.
    let started = Instant::now();
    loop {
        let logged = support::logged_calls(&calls);
        if logged.iter().any(|c| c == "tools/call echo") {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "the approved call never reached the server: {logged:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (left, _, recent) = board(&bus, &alice).await;
    assert!(left.is_empty(), "{left:?}");
    let decision = recent.iter().find(|d| d.id == waiting.id).expect("the decision is kept");
    // Alice is an operator: the runner's slots are on the operations view.
    // A runner reports every 5 s (its first report may precede the bridge).
    let started = Instant::now();
    loop {
        let page = http.get(format!("{base}/console/operations")).header("cookie", &cookie).send().await.unwrap();
        let page = page.text().await.unwrap();
        let runners = &page[page.find("<h2>Sandbox-runners</h2>").expect("the runners' section")..];
        if runners.contains("<th>Free slots</th>") && runners.contains("<td><code>") {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "no runner on the operations view: {runners}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!((decision.outcome.as_str(), decision.by.as_deref()), ("approved", Some("alice")));
    let _ = std::fs::remove_file(&policy);
    let _ = std::fs::remove_file(&calls);
}
