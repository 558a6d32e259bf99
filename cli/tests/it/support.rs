//! Helpers: run `code-mode` against the test server and read its report;
//! start a whole deployment (all in one, or the three services over NATS)
//! behind an MCP client.

#![allow(dead_code)]

use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use code_mode_core::testing::{NatsServer, NatsUsers};
use code_mode_sandbox_runner::container::Runtime;
use rmcp::ClientHandler;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RoleClient, RunningService};
use serde_json::{Value, json};

/// The `code-mode` binary under test.
pub fn code_mode() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_code-mode"))
}

/// The test MCP server binary.
pub fn test_server() -> PathBuf {
    code_mode_core::testing::workspace_binary("code-mode-test-server")
}

thread_local! {
    /// The runtime the current test runs its sandboxes under (see [`under`]).
    static RUNTIME: Cell<Option<Runtime>> = const { Cell::new(None) };
}

/// Run `test` with every `code-mode run` it starts ([`command`], [`run`])
/// under `runtime`, and [`sandbox_available`] checking that runtime: the
/// harness behind the threat model's `runc::*` and `runsc::*` tests.
pub fn under(runtime: Runtime, test: impl FnOnce()) {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            RUNTIME.set(None);
        }
    }
    RUNTIME.set(Some(runtime));
    let _reset = Reset;
    test();
}

/// [`sandbox_available`] under runsc, for a test outside the matrix.
pub fn under_runsc_available() -> bool {
    RUNTIME.set(Some(Runtime::Runsc));
    let available = sandbox_available();
    RUNTIME.set(None);
    available
}

thread_local! {
    /// The requirements file, and its image's tag, whose image every
    /// `code-mode run` of the current test uses (see [`under_packages`]).
    static PACKAGES: RefCell<Option<(PathBuf, String)>> = const { RefCell::new(None) };
}

/// The data-science set the package tests build (numpy, pandas and
/// matplotlib, pinned): `testing/packages/data-science.txt`.
pub fn data_science() -> PathBuf {
    code_mode_core::testing::peers::workspace_root().join("testing/packages/data-science.txt")
}

/// The tag of the sandbox image of `requirements`, built by `code-mode
/// build-image --requirements` when missing. Test processes take turns
/// through a lock file, so the first builds it and the others find it (a
/// build of a set that exists is a no-op).
pub fn package_image(requirements: &Path) -> String {
    let lock = std::fs::File::create(std::env::temp_dir().join("code-mode-test-package-image.lock"))
        .expect("the lock file is created");
    lock.lock().expect("the lock is taken");
    let out = Command::new(code_mode())
        .args(["build-image", "--requirements"])
        .arg(requirements)
        .stdin(Stdio::null())
        .output()
        .expect("build-image runs");
    assert!(
        out.status.success(),
        "build-image --requirements {} failed: {}",
        requirements.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("the tag is text").trim().to_string()
}

/// [`under`] `runtime`, with every `code-mode run` the test starts on the
/// image of `requirements` (`--requirements`), built first when missing:
/// the harness behind the threat model's `packages_runc::*` and
/// `packages_runsc::*` tests.
pub fn under_packages(runtime: Runtime, requirements: PathBuf, test: impl FnOnce()) {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            PACKAGES.set(None);
        }
    }
    under(runtime, || {
        if !sandbox_available() {
            return;
        }
        let tag = package_image(&requirements);
        PACKAGES.set(Some((requirements.clone(), tag)));
        let _reset = Reset;
        test();
    });
}

/// The sandbox image of the current test: the package image
/// [`under_packages`] set, else this version's default image.
pub fn image() -> String {
    PACKAGES
        .with_borrow(|p| p.as_ref().map(|(_, tag)| tag.clone()))
        .unwrap_or_else(code_mode_sandbox_runner::image::default_image_tag)
}

/// The runtime of the current test: the one [`under`] set, else runc.
pub fn runtime() -> Runtime {
    RUNTIME.get().unwrap_or_default()
}

/// True when a Docker engine answers, the default sandbox image exists and
/// the current test's [`runtime`] is registered as the lockdown needs it.
/// Under CI a missing one fails the test; elsewhere the test does not run.
pub fn sandbox_available() -> bool {
    static STATE: [OnceLock<Result<(), String>>; 2] = [OnceLock::new(), OnceLock::new()];
    let runtime = runtime();
    let slot = Runtime::ALL.iter().position(|r| *r == runtime).expect("a known runtime");
    // Checked on a thread of its own, so async tests can call this too.
    let state =
        STATE[slot].get_or_init(|| std::thread::spawn(move || check_sandbox(runtime)).join().expect("the check ran"));
    match state {
        Ok(()) => true,
        Err(why) => {
            code_mode_core::testing::unavailable(&format!("a Docker engine with the sandbox image and {runtime}"), why)
        }
    }
}

fn check_sandbox(runtime: Runtime) -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let docker = code_mode_sandbox_runner::connect_docker().await.map_err(|e| e.to_string())?;
        code_mode_sandbox_runner::container::check_runtime(&docker, runtime).await.map_err(|e| e.to_string())?;
        let image = code_mode_sandbox_runner::image::default_image_tag();
        match code_mode_sandbox_runner::image::image_exists(&docker, &image).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(format!("the sandbox image {image} is missing: run `code-mode build-image`")),
            Err(e) => Err(e.to_string()),
        }
    })
}

/// What `code-mode run` printed and how it exited.
#[derive(Debug)]
pub struct Ran {
    /// The parsed report (Null when stdout was not JSON).
    pub report: Value,
    /// The process output.
    pub output: Output,
}

impl Ran {
    pub fn stdout(&self) -> &str {
        self.report["stdout"].as_str().unwrap_or_else(|| panic!("no stdout in {self:?}"))
    }
    pub fn error(&self) -> Option<&str> {
        self.report["error"].as_str()
    }
    pub fn stopped(&self) -> bool {
        self.report["stopped"].as_bool().unwrap()
    }
    pub fn truncated(&self) -> bool {
        self.report["truncated"].as_bool().unwrap()
    }
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }
    /// Assert the cell finished without an error and return its stdout.
    pub fn ok(&self) -> &str {
        assert_eq!(self.report["error"], Value::Null, "the cell failed: {self:#?}\nstderr: {}", self.stderr());
        self.stdout()
    }
}

/// `code-mode run [args] --code CODE -- <test server> [server_args]`.
pub fn run(args: &[&str], code: &str, server_args: &[&str]) -> Ran {
    run_prepared(command(args, code, server_args))
}

/// Run a prepared `code-mode run` command and parse its report; it must exit 0.
pub fn run_prepared(mut command: Command) -> Ran {
    let output = command.output().expect("code-mode runs");
    let report = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    let ran = Ran { report, output };
    assert!(
        ran.output.status.success() && ran.report.is_object(),
        "code-mode run failed: {:?}\nstdout: {}\nstderr: {}",
        ran.output.status,
        String::from_utf8_lossy(&ran.output.stdout),
        ran.stderr()
    );
    ran
}

/// The `--runtime` of the runtime a test runs under, if it chose one.
pub fn runtime_flag() -> Option<&'static str> {
    RUNTIME.get().map(|r| r.name())
}

/// The command line of [`run`], for tests that need the process itself.
pub fn command(args: &[&str], code: &str, server_args: &[&str]) -> Command {
    let mut cmd = Command::new(code_mode());
    cmd.arg("run");
    if let Some(runtime) = RUNTIME.get() {
        cmd.args(["--runtime", runtime.name()]);
    }
    if let Some((requirements, _)) = PACKAGES.with_borrow(|p| p.clone()) {
        cmd.arg("--requirements").arg(requirements);
    }
    cmd.args(args).arg("--code").arg(code).arg("--").arg(test_server()).args(server_args);
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd
}

/// A fresh temporary file path for the test server's request log.
pub fn log_path(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!("code-mode-test-{tag}-{}.log", uuid::Uuid::new_v4().simple()))
}

/// The `tools/call` lines the test server logged.
pub fn logged_calls(path: &PathBuf) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("tools/call"))
        .map(str::to_string)
        .collect()
}

/// Ids of sandbox containers (running or not) whose owner label has `pid`.
pub fn containers_of(pid: u32) -> Vec<String> {
    let out = Command::new("docker")
        .args(["ps", "-a", "--filter", "label=code-mode.sandbox", "--format", "{{.ID}} {{.Label \"code-mode.owner\"}}"])
        .output()
        .expect("docker ps runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (id, owner) = l.split_once(' ')?;
            let owner_pid = owner.rsplit(':').nth(1)?;
            (owner_pid == pid.to_string()).then(|| id.to_string())
        })
        .collect()
}

/// An MCP client connected to a frontend.
pub type Client = RunningService<RoleClient, ()>;

/// Where the three services run.
#[derive(Debug, Clone, Copy)]
pub enum Deployment {
    /// `code-mode serve`: one process, in-process bus.
    AllInOne,
    /// `code-mode frontend|bridge|sandbox-runner`, three processes over a
    /// real nats-server.
    OverNats,
}

/// What must live as long as the client: the nats-server and the bridge and
/// runner processes of a split deployment (killed on drop).
pub struct Guards {
    /// The nats-server (split deployment).
    pub nats: Option<NatsServer>,
    /// `code-mode bridge` (split deployment).
    pub bridge: Option<tokio::process::Child>,
    /// `code-mode sandbox-runner` (split deployment).
    pub runner: Option<tokio::process::Child>,
    /// The NATS users of the services (split deployment).
    pub users: Option<NatsUsers>,
}

impl Guards {
    /// The nats-server's URL, or the test fails.
    pub fn nats_url(&self) -> String {
        self.nats.as_ref().expect("a split deployment").url()
    }

    /// The services' NATS users, or the test fails.
    pub fn users(&self) -> &NatsUsers {
        self.users.as_ref().expect("a split deployment")
    }
}

/// Which service takes an option (and how many values follow it).
fn service_of(flag: &str) -> &'static str {
    match flag {
        "--allow" | "--env" | "--max-calls" | "--call-timeout" | "--private" | "--policy" | "--audit"
        | "--approval-timeout" | "--offer-denied" => "bridge",
        "--image" | "--base" | "--warm" | "--requirements" | "--apt" | "--wheels" => "runner",
        _ => "frontend",
    }
}

/// A nats-server with the deployment's users and permissions that carries
/// messages of at most `max_payload` bytes: a larger report is refused on
/// its way, as a lost report would be. `None` where the test may skip.
pub fn nats_with_max_payload(users: &NatsUsers, max_payload: usize) -> Option<code_mode_core::testing::NatsServer> {
    let deploy = std::fs::read_to_string(code_mode_core::testing::deploy_nats_config()).expect("the nats config");
    let config = std::env::temp_dir().join(format!("code-mode-test-{}-nats.conf", uuid::Uuid::new_v4().simple()));
    std::fs::write(&config, format!("{deploy}\nmax_payload: {max_payload}\n")).unwrap();
    let nats =
        code_mode_core::testing::NatsServer::start_with_env(&["-c", config.to_str().unwrap()], &users.server_env());
    let _ = std::fs::remove_file(&config);
    nats
}

/// Start `code-mode <service> --nats URL [extra]` as its NATS user of
/// `deploy/nats-server.conf`, with `-- <test server> [server_args]` when
/// `server_args` is given (the bridge). Its stdin is null, its stderr
/// inherited; it is killed on drop.
pub fn spawn_service(
    nats_url: &str,
    users: &NatsUsers,
    service: &str,
    extra: &[&str],
    server_args: Option<&[&str]>,
) -> tokio::process::Child {
    service_command(nats_url, users, service, extra, server_args).spawn().expect("the service starts")
}

/// The command of [`spawn_service`], to adjust before spawning.
pub fn service_command(
    nats_url: &str,
    users: &NatsUsers,
    service: &str,
    extra: &[&str],
    server_args: Option<&[&str]>,
) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(code_mode());
    cmd.arg(service).args(["--nats", nats_url]).args(extra);
    cmd.env("CODE_MODE_NATS_USER", service).env("CODE_MODE_NATS_PASSWORD", users.password(service));
    if let Some(server_args) = server_args {
        cmd.arg("--").arg(test_server()).args(server_args);
    }
    cmd.stdin(Stdio::null()).kill_on_drop(true);
    cmd
}

/// The Python SDK client's command line for a frontend over NATS on its
/// stdio, as the `frontend` user: `--stdio code-mode frontend --nats URL
/// --nats-user frontend --nats-password P [args] --`.
pub fn frontend_stdio(nats_url: &str, users: &NatsUsers, args: &[&str]) -> Vec<String> {
    let mut line: Vec<String> = vec!["--stdio".into(), code_mode().display().to_string(), "frontend".into()];
    line.extend(
        ["--nats", nats_url, "--nats-user", "frontend", "--nats-password", users.password("frontend")]
            .map(String::from),
    );
    line.extend(args.iter().map(|a| a.to_string()));
    line.push("--".into());
    line
}

/// The Python client's command line for `code-mode serve --expose-tools=only
/// [serve_args] -- <test server> [server_args] --` over stdio.
pub fn gateway_stdio(serve_args: &[&str], server_args: &[String]) -> Vec<String> {
    let mut line: Vec<String> = vec!["--stdio".into(), code_mode().display().to_string(), "serve".into()];
    line.push("--expose-tools=only".into());
    line.extend(serve_args.iter().map(|a| a.to_string()));
    line.push("--".into());
    line.push(test_server().display().to_string());
    line.extend(server_args.iter().cloned());
    line.push("--".into());
    line
}

/// A split deployment serving MCP over HTTP with bearer tokens, for a test
/// of sandboxed cells: its nats-server with the deployment's users and
/// grants, the bridge and the sandbox-runner started by
/// [`SplitHttp::services`], each frontend replica by [`SplitHttp::frontend`].
pub struct SplitHttp {
    /// The nats-server (a test may stop and restart it).
    pub nats: NatsServer,
    /// The services' NATS users.
    pub users: NatsUsers,
}

impl SplitHttp {
    /// The nats-server, started once the sandbox is there: `None` where the
    /// test may skip ([`sandbox_available`]; under CI a missing sandbox
    /// fails the test), and a nats-server that does not start fails it.
    pub fn start() -> Option<SplitHttp> {
        if !sandbox_available() {
            return None;
        }
        let Some((nats, users)) = NatsServer::start_secured() else { panic!("nats-server is needed") };
        Some(SplitHttp { nats, users })
    }

    /// `code-mode bridge [bridge_args] -- <test server> [server_args]` and
    /// `code-mode sandbox-runner [runner_args]`, each as its NATS user and
    /// killed on drop: the bridge, then the runner.
    pub fn services(
        &self,
        bridge_args: &[&str],
        server_args: &[&str],
        runner_args: &[&str],
    ) -> (tokio::process::Child, tokio::process::Child) {
        let bridge = spawn_service(&self.nats.url(), &self.users, "bridge", bridge_args, Some(server_args));
        let runner = spawn_service(&self.nats.url(), &self.users, "sandbox-runner", runner_args, None);
        (bridge, runner)
    }

    /// A frontend serving HTTP with `tokens`: the child and its URL.
    pub async fn frontend(&self, tokens: &crate::auth::TokenFile) -> (tokio::process::Child, String) {
        self.frontend_with(tokens, &[]).await
    }

    /// [`SplitHttp::frontend`] with more options (`extra`) after
    /// `--http 127.0.0.1:0 --auth-tokens FILE`.
    pub async fn frontend_with(
        &self,
        tokens: &crate::auth::TokenFile,
        extra: &[&str],
    ) -> (tokio::process::Child, String) {
        let mut args = vec!["--http", "127.0.0.1:0", "--auth-tokens", tokens.arg()];
        args.extend_from_slice(extra);
        let mut command = service_command(&self.nats.url(), &self.users, "frontend", &args, None);
        let (child, url, _log) = crate::http::spawn_http(&mut command).await;
        (child, url)
    }
}

/// Alice's token (`code-mode token new alice`) and a token file naming
/// only her.
pub fn alice() -> (crate::auth::Client, crate::auth::TokenFile) {
    let alice = crate::auth::token_new("alice");
    let tokens = crate::auth::TokenFile::of(&[&alice]);
    (alice, tokens)
}

/// Start `code-mode serve [args] -- <test server> [server_args]` as a child
/// (or the three services over NATS, each option routed to the service that
/// takes it) and connect an MCP client over the frontend's stdin and stdout.
/// Returns the client, the frontend's process id and the guards. Cancelling
/// the client closes the frontend's stdin: the client has gone away.
pub async fn start(deployment: Deployment, args: &[&str], server_args: &[&str]) -> (Client, u32, Guards) {
    start_with(deployment, args, server_args, ()).await
}

/// [`start`] with `handler` as the MCP client's handler (to see the
/// notifications the frontend sends).
pub async fn start_with<H: ClientHandler>(
    deployment: Deployment,
    args: &[&str],
    server_args: &[&str],
    handler: H,
) -> (RunningService<RoleClient, H>, u32, Guards) {
    start_with_lifecycle(deployment, args, server_args, handler, ClientLifecycleMode::Initialize).await
}

/// [`start_with`], the client starting its session as `lifecycle` says
/// (`Initialize`: protocol 2025-11-25 and before; `Discover`: the
/// stateless 2026-07-28).
pub async fn start_with_lifecycle<H: ClientHandler>(
    deployment: Deployment,
    args: &[&str],
    server_args: &[&str],
    handler: H,
    lifecycle: ClientLifecycleMode,
) -> (RunningService<RoleClient, H>, u32, Guards) {
    start_wrapping(deployment, args, Wrapped::TestServer(server_args), handler, lifecycle).await
}

/// [`start_with`] wrapping the remote MCP server at `url` (`--url`)
/// instead of the test server over stdio.
pub async fn start_remote_with<H: ClientHandler>(
    deployment: Deployment,
    args: &[&str],
    url: &str,
    handler: H,
) -> (RunningService<RoleClient, H>, u32, Guards) {
    start_wrapping(deployment, args, Wrapped::Url(url), handler, ClientLifecycleMode::Initialize).await
}

/// The server a deployment wraps.
enum Wrapped<'a> {
    /// The test server over stdio, with these arguments.
    TestServer(&'a [&'a str]),
    /// A remote server (streamable HTTP) at this URL.
    Url(&'a str),
}

async fn start_wrapping<H: ClientHandler>(
    deployment: Deployment,
    args: &[&str],
    wrapped: Wrapped<'_>,
    handler: H,
    lifecycle: ClientLifecycleMode,
) -> (RunningService<RoleClient, H>, u32, Guards) {
    let mut frontend = tokio::process::Command::new(code_mode());
    let guards = match deployment {
        Deployment::AllInOne => {
            frontend.arg("serve").args(args);
            match wrapped {
                Wrapped::TestServer(server_args) => frontend.arg("--").arg(test_server()).args(server_args),
                Wrapped::Url(url) => frontend.args(["--url", url]),
            };
            Guards { nats: None, bridge: None, runner: None, users: None }
        }
        Deployment::OverNats => {
            // The deployment's nats-server config: one user per service.
            let Some((nats, users)) = NatsServer::start_secured() else {
                panic!("nats-server is needed for the split deployment");
            };
            let (mut bridge_args, mut runner_args, mut frontend_args) = (vec![], vec![], vec![]);
            let mut rest = args;
            while let Some((&flag, after)) = rest.split_first() {
                // Flags that take no value stand alone; the others have one.
                let takes = usize::from(
                    !flag.contains('=') && !matches!(flag, "--keep-variables" | "--offer-denied" | "--expose-tools"),
                );
                let (value, next) = after.split_at(takes);
                rest = next;
                let target = match service_of(flag) {
                    "bridge" => &mut bridge_args,
                    "runner" => &mut runner_args,
                    _ => &mut frontend_args,
                };
                target.push(flag);
                target.extend_from_slice(value);
                if flag == "--max-concurrent" {
                    runner_args.extend_from_slice(&["--capacity", value[0]]);
                }
                // Both write audit records: the runner its cells, the bridge its calls.
                if flag == "--audit" {
                    runner_args.push(flag);
                    runner_args.extend_from_slice(value);
                }
            }
            let bridge = match wrapped {
                Wrapped::TestServer(server_args) => {
                    spawn_service(&nats.url(), &users, "bridge", &bridge_args, Some(server_args))
                }
                Wrapped::Url(url) => {
                    bridge_args.extend_from_slice(&["--url", url]);
                    spawn_service(&nats.url(), &users, "bridge", &bridge_args, None)
                }
            };
            let runner = spawn_service(&nats.url(), &users, "sandbox-runner", &runner_args, None);
            frontend.arg("frontend").args(["--nats", &nats.url()]).args(&frontend_args);
            frontend.env("CODE_MODE_NATS_USER", "frontend").env("CODE_MODE_NATS_PASSWORD", users.password("frontend"));
            Guards { nats: Some(nats), bridge: Some(bridge), runner: Some(runner), users: Some(users) }
        }
    };
    let (client, pid) = connect_client_lifecycle(frontend, handler, lifecycle).await;
    (client, pid, guards)
}

/// Spawn a frontend (`serve` or `frontend`) command and connect an MCP
/// client over its stdin and stdout.
pub async fn connect_client(frontend: tokio::process::Command) -> (Client, u32) {
    connect_client_with(frontend, ()).await
}

/// [`connect_client`] with `handler` as the client's handler.
pub async fn connect_client_with<H: ClientHandler>(
    frontend: tokio::process::Command,
    handler: H,
) -> (RunningService<RoleClient, H>, u32) {
    connect_client_lifecycle(frontend, handler, ClientLifecycleMode::Initialize).await
}

/// [`connect_client_with`], starting the session as `lifecycle` says.
pub async fn connect_client_lifecycle<H: ClientHandler>(
    mut frontend: tokio::process::Command,
    handler: H,
    lifecycle: ClientLifecycleMode,
) -> (RunningService<RoleClient, H>, u32) {
    let mut child = frontend
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("the frontend starts");
    let pid = child.id().expect("the frontend has a pid");
    let transport = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
    // Reap the process in the background once it exits.
    tokio::spawn(async move {
        let _ = child.wait().await;
    });
    let client = handler.serve_with_lifecycle(transport, lifecycle).await.expect("the MCP handshake succeeds");
    (client, pid)
}

/// The stdout of a cell that must have ended without an error.
pub fn stdout_of(result: &CallToolResult) -> String {
    let report = report(result);
    assert_eq!(report["error"], Value::Null, "the cell failed: {report}");
    report["stdout"].as_str().expect("stdout").to_string()
}

/// `kill -s KILL <pid>`.
pub fn kill9(pid: u32) {
    let status = Command::new("kill").args(["-s", "KILL", &pid.to_string()]).status().expect("kill runs");
    assert!(status.success(), "kill -s KILL {pid}");
}

/// Call `run_python` with `code`; the call itself must answer.
pub async fn run_python(client: &Client, code: &str) -> CallToolResult {
    let mut params = CallToolRequestParams::new("run_python");
    params.arguments = Some(json!({ "code": code }).as_object().unwrap().clone());
    client.peer().call_tool(params).await.expect("run_python answers")
}

/// What a `run_python` call came back with: the report's stdout and error,
/// or the tool error's text.
pub fn outcome(result: &CallToolResult) -> Result<(String, Option<String>), String> {
    if result.is_error == Some(true) {
        return Err(result.content.iter().find_map(|c| c.as_text()).map(|t| t.text.clone()).unwrap_or_default());
    }
    let report = report(result);
    Ok((report["stdout"].as_str().unwrap_or_default().to_string(), report["error"].as_str().map(str::to_string)))
}

/// Run `code` in `client`'s session, again while a call in it was refused
/// fail closed (after a nats-server died, a JetStream stream that had its
/// leader there refuses until it elects another), for at most `within`:
/// what the last run printed and how many runs before it were refused. A
/// fail-closed refusal counts and taints nothing, so the runs before the
/// last change nothing the last one sees.
pub async fn printed_once_not_fail_closed(client: &Client, code: &str, within: Duration) -> (String, u32) {
    let started = std::time::Instant::now();
    let mut refused = 0;
    loop {
        let (stdout, error) = outcome(&run_python(client, code).await).expect("a report");
        assert_eq!(error, None, "the cell runs: {stdout}");
        if !stdout.contains("(fail closed)") {
            return (stdout, refused);
        }
        refused += 1;
        assert!(started.elapsed() < within, "still refused fail closed after {within:?}: {stdout}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// One call of `test__add`, or what refused it.
pub const ADD_ONCE: &str =
    "try:\n    await test__add({'a': 1, 'b': 1})\nexcept ToolError as e:\n    print('refused:', e)";

/// One call of `test__count`, or what refused it.
pub const COUNT_ONCE: &str = "try:\n    print(await test__count({}))\nexcept ToolError as e:\n    print('refused:', e)";

/// After a nats-server's death: `tainted` (tainted by the private tool
/// `tainted_by`) is still refused `test__add`, and `counted` (one `count`
/// today of a limit of 2 a day) may call `count` once more, then no more.
/// `what` names the test in its progress lines.
pub async fn the_taint_and_the_count_held(tainted: &Client, tainted_by: &str, counted: &Client, what: &str) {
    let within = Duration::from_secs(30);
    let (stdout, refused_runs) = printed_once_not_fail_closed(tainted, ADD_ONCE, within).await;
    let taint = format!("has called the private tool {tainted_by}");
    assert!(stdout.contains(&taint), "still tainted after the kill: {stdout}");
    eprintln!("{what}: the taint check ran after {refused_runs} run(s) refused fail closed");
    let (stdout, refused_runs) = printed_once_not_fail_closed(counted, COUNT_ONCE, within).await;
    assert!(!stdout.starts_with("refused"), "the second call of the day is allowed: {stdout}");
    eprintln!("{what}: the second count ran after {refused_runs} run(s) refused fail closed");
    let (stdout, _) = printed_once_not_fail_closed(counted, COUNT_ONCE, within).await;
    assert!(stdout.contains("rate limit counts: at most 2 calls per day"), "the third is over the limit: {stdout}");
}

/// True when a cell's failure around a nats-server's death says so clearly:
/// the bridge's call timed out or had nobody to answer, the services were
/// between connections, the runner's report was lost, or a call was refused
/// fail closed because the state store or the audit stream had no leader yet.
pub fn a_clear_bus_failure(failure: &str) -> bool {
    ["BridgeTimeout", "BridgeUnavailable", "not connected to NATS", "was lost", "unavailable", "(fail closed)"]
        .iter()
        .any(|c| failure.contains(c))
}

/// The structured report, checked against the text block.
pub fn report(result: &CallToolResult) -> Value {
    let structured = result.structured_content.clone().expect("structured content");
    let text = result.content.iter().find_map(|c| c.as_text()).expect("a text block").text.clone();
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), structured, "the text block holds the same JSON");
    structured
}

/// True while `pid` runs (a zombie counts as gone).
pub fn pid_alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default().contains(") Z ")
}

/// Children of `parent`, from /proc.
pub fn children_of(parent: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) else { continue };
        if rest.split_whitespace().nth(1) == Some(&parent.to_string()) {
            out.push(pid);
        }
    }
    out
}

/// Send SIGTERM to `pid` (a child of this test) with the `kill` command:
/// the workspace forbids `unsafe`.
pub fn terminate(pid: u32) {
    let status = std::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status().expect("kill runs");
    assert!(status.success(), "kill -TERM {pid}: {status}");
}

/// A Prometheus `GET /api/v1/query?query=...` (already URL-encoded): the
/// `data.result` array of a successful answer, else `None` (not up yet, or
/// an error).
pub async fn prometheus_query(web: std::net::SocketAddr, encoded: &str) -> Option<Value> {
    let path = format!("/api/v1/query?query={encoded}");
    let response =
        tokio::task::spawn_blocking(move || code_mode_telemetry::scrape::http_get(web, &path)).await.unwrap().ok()?;
    if response.status != 200 {
        return None;
    }
    let body: Value = serde_json::from_str(&response.body).ok()?;
    (body["status"] == "success").then(|| body["data"]["result"].clone())
}

/// Run the official Python MCP SDK (`testing/peers/mcp_client.py`) with
/// `args` (`--url URL`, `--header ...`, `--mode ...`) over `steps` (a JSON
/// list, see the script); one JSON value per step, and its stderr. `None`
/// (after `unavailable`: a panic under CI) when the SDK is not installed.
pub async fn python_sdk(args: &[&str], steps: &Value) -> Option<(Vec<Value>, String)> {
    let python = code_mode_core::testing::peers::venv_bin("python")?;
    let script = code_mode_core::testing::peers::workspace_root().join("testing/peers/mcp_client.py");
    let out = tokio::process::Command::new(python)
        .arg(script)
        .args(args)
        .arg(steps.to_string())
        .kill_on_drop(true)
        .output()
        .await
        .expect("the Python SDK client runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "the Python SDK client failed: {stderr}");
    let results = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("a JSON line ({e}): {l}")))
        .collect();
    Some((results, stderr))
}

/// One HTTP/1.1 request to `authority` (`host:port`) over a plain socket,
/// so a test controls every header (and sends malformed or forged ones):
/// the status, the headers (names in lower case) and the body.
pub fn raw_http(
    authority: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, Vec<(String, String)>, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(authority).expect("the server listens");
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    // A server may close the connection before reading everything (a TLS
    // port hearing plain HTTP does): that is an answer too, with no status.
    if write!(stream, "{head}\r\n{body}").is_err() {
        return (0, Vec::new(), String::new());
    }
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    http_answer(&answer)
}

/// An HTTP/1.1 answer read off a socket: the status (0 when there is none),
/// the headers (names in lower case) and the body.
pub fn http_answer(answer: &[u8]) -> (u16, Vec<(String, String)>, String) {
    let answer = String::from_utf8_lossy(answer).into_owned();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let mut lines = head.lines();
    let status = lines.next().and_then(|l| l.split(' ').nth(1)).and_then(|s| s.parse().ok()).unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    (status, headers, body.to_string())
}

/// Poll `check` every 100 ms until it holds, up to `within`; true if it did.
pub async fn eventually(within: Duration, mut check: impl FnMut() -> bool) -> bool {
    let give_up = std::time::Instant::now() + within;
    loop {
        if check() {
            return true;
        }
        if std::time::Instant::now() >= give_up {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Wait up to `within` for a line starting with `start` in the log file
/// `log` a test server writes (one line per message it receives).
pub async fn server_logged(log: &std::path::Path, start: &str, within: Duration) -> bool {
    eventually(within, || std::fs::read_to_string(log).unwrap_or_default().lines().any(|l| l.starts_with(start))).await
}

/// Whether a line the process wrote to its log satisfies `wanted` within
/// ten seconds: the log is read by a thread, so a line written just before
/// an answer may reach the test just after it.
pub async fn log_shows(log: &std::sync::Mutex<Vec<String>>, wanted: impl Fn(&str) -> bool) -> bool {
    eventually(Duration::from_secs(10), || log.lock().unwrap().iter().any(|l| wanted(l))).await
}

/// A scratch folder `code-mode-<tag>-<uuid>` and in it the `--config` file
/// of the four reference servers (npm server-everything, -memory and
/// -filesystem over that folder, PyPI mcp-server-time), or `None` (a panic
/// under CI) when `scripts/setup.sh` has not installed them.
pub fn four_reference_servers(tag: &str) -> Option<(PathBuf, PathBuf)> {
    use code_mode_core::testing::peers::{npm_bin, venv_bin};
    let (Some(everything), Some(memory), Some(filesystem), Some(time)) = (
        npm_bin("mcp-server-everything"),
        npm_bin("mcp-server-memory"),
        npm_bin("mcp-server-filesystem"),
        venv_bin("mcp-server-time"),
    ) else {
        return None;
    };
    let scratch = std::env::temp_dir().join(format!("code-mode-{tag}-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&scratch).expect("the scratch folder is made");
    let config = scratch.join("servers.json");
    let servers = json!({"mcpServers": {
        "everything": {"command": everything, "args": ["stdio"]},
        "memory": {"command": memory, "env": {"MEMORY_FILE_PATH": scratch.join("memory.jsonl")}},
        "filesystem": {"command": filesystem, "args": [&scratch]},
        "time": {"command": time}
    }});
    std::fs::write(&config, servers.to_string()).expect("the config file is written");
    Some((scratch, config))
}

/// The first JWT in `text`: a base64url JSON header (`eyJ…`), a dot, a
/// base64url JSON payload (`eyJ…`) and a dot. Random ids in a debug log
/// hold "eyJ" now and then (one in 64³ places), so a leak is looked for
/// by this shape, never by those three letters alone.
pub fn jwt_in(text: &str) -> Option<&str> {
    let b64 = |c: u8| c.is_ascii_alphanumeric() || c == b'-' || c == b'_';
    let bytes = text.as_bytes();
    let segment = |from: usize| from + bytes[from..].iter().take_while(|&&c| b64(c)).count();
    text.match_indices("eyJ").find_map(|(at, _)| {
        let header = segment(at);
        if bytes.get(header) != Some(&b'.') || !text[header + 1..].starts_with("eyJ") {
            return None;
        }
        let end = segment(header + 1);
        (end - header > 8 && bytes.get(end) == Some(&b'.')).then(|| &text[at..end])
    })
}

#[test]
fn a_jwt_is_found_by_its_shape_and_a_random_id_holding_eyj_is_not_one() {
    let jwt = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhZGEifQ.c2lnbmF0dXJl";
    assert_eq!(jwt_in(&format!("token={jwt} rest")), Some("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhZGEifQ"));
    let log = format!("flow=Qx3eyJk9_aZ then {jwt}");
    let found = jwt_in(&log);
    assert_eq!(found, Some("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhZGEifQ"), "the id before it is passed over");
    for clean in ["flow=Qx3eyJk9_aZ-Lm", "a.eyJ.b", "eyJabc.notjson.x", "eyJabc.eyJ", "ends with eyJ"] {
        assert_eq!(jwt_in(clean), None, "{clean}");
    }
}
