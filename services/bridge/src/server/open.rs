//! Starting a wrapped server's session: spawning a stdio server (its
//! environment, its stderr's last lines kept for a start error) or
//! connecting to a remote one (its authorized HTTP client), the initialize
//! handshake (or the stateless revision's first request) and the first
//! tool list within the start timeout; and a client's own session, started
//! the same way ([`open_own`]).

#[allow(clippy::wildcard_imports)]
use super::*;
use crate::arrivals::Noting;

/// Longest command line quoted in an error, in characters.
pub(super) const MAX_COMMAND_LINE: usize = 200;
/// Lines of a starting server's stderr kept for its start error.
pub(super) const STDERR_TAIL_LINES: usize = 5;
/// Longest stderr line kept for a start error, in characters.
pub(super) const STDERR_TAIL_CHARS: usize = 200;
/// How long a failed start waits for the rest of the server's stderr.
pub(super) const STDERR_DRAIN: Duration = Duration::from_millis(300);
/// How long a started remote session waits at most for its standalone
/// stream to be answered before its first request goes out.
pub(super) const STANDALONE_WAIT: Duration = Duration::from_secs(2);

/// The last lines a stdio server wrote on stderr, kept so that a server
/// that dies while starting can say why (a missing module, a bad flag).
#[derive(Debug, Clone, Default)]
pub(super) struct StderrTail {
    lines: Arc<std::sync::Mutex<std::collections::VecDeque<String>>>,
    /// Set when the server closed its stderr (it exited).
    closed: Arc<Notify>,
}

impl StderrTail {
    pub(super) fn push(&self, line: &str) {
        let mut lines = code_mode_core::sync::lock(&self.lines);
        if lines.len() == STDERR_TAIL_LINES {
            lines.pop_front();
        }
        lines.push_back(crate::stubs::cut_chars(line.trim_end(), STDERR_TAIL_CHARS));
    }

    /// What to add to a start error: the last lines, once the server closed
    /// stderr (or after a short wait), or nothing when it wrote none.
    async fn describe(&self) -> String {
        let _ = tokio::time::timeout(STDERR_DRAIN, self.closed.notified()).await;
        let lines = code_mode_core::sync::lock(&self.lines);
        let lines: Vec<&str> = lines.iter().map(String::as_str).filter(|l| !l.trim().is_empty()).collect();
        if lines.is_empty() { String::new() } else { format!("; its last stderr lines: {}", lines.join(" | ")) }
    }
}

/// Why spawning `command` failed, in words that name the path tried.
pub(super) fn spawn_failure(command: &str, e: &std::io::Error) -> String {
    if e.kind() != std::io::ErrorKind::NotFound {
        return e.to_string();
    }
    if command.contains('/') {
        // `./x` is shown as `<dir>/x`: the `.` steps say nothing.
        let path: std::path::PathBuf =
            std::path::Path::new(command).components().filter(|c| *c != std::path::Component::CurDir).collect();
        match std::env::current_dir() {
            Ok(dir) if path.is_relative() => format!(
                "the program {} does not exist (a relative path is taken from the working directory, {})",
                dir.join(&path).display(),
                dir.display()
            ),
            _ => format!("the program {} does not exist", path.display()),
        }
    } else {
        format!("no program named {command:?} on PATH (give its full path, or add its folder to PATH)")
    }
}

/// Spawn the server (or connect to it) and initialize the server's shared
/// session, whose handler is `relay`, within the start timeout (`deadline`).
///
/// A remote server is asked for the 2026-07-28 revision first
/// (`server/discover`, then every request stateless, with the `Mcp-Method`
/// and `Mcp-Param-*` headers), as MCP's newest clients do, so that what it
/// offers there is what code-mode lists; a server that does not offer it
/// (an error, or no answer within half the time left) gets the 2025-11-25
/// handshake. A stdio server gets the handshake.
pub(super) async fn initialize(spec: &ServerSpec, relay: Relay, deadline: Instant) -> Result<Session, BridgeError> {
    if !matches!(spec.transport, Transport::Http(_)) {
        return initialize_as(spec, relay, deadline, false).await;
    }
    let now = Instant::now();
    let probe = now + deadline.saturating_duration_since(now) / 2;
    match start(spec, relay.clone(), probe, Lifecycle::Stateless).await {
        Ok(session) => {
            tracing::info!(server = %spec.name, "the server speaks the 2026-07-28 revision: spoken statelessly");
            return Ok(session);
        }
        Err(Failed::Final(e)) => return Err(e),
        Err(Failed::Refused(e)) => {
            tracing::info!(server = %spec.name, error = %e, "the server does not offer the 2026-07-28 revision: using the initialize handshake");
        }
    }
    start(spec, relay, deadline, Lifecycle::Handshake { then_stateless: false }).await.map_err(Failed::into_error)
}

/// The same for a client's own session: with the initialize handshake
/// (falling back to the stateless revision for a server that refuses it),
/// or (`stateless`) as a client of the stateless 2026-07-28 revision,
/// which fails with a server that does not speak it.
pub(super) async fn initialize_as(
    spec: &ServerSpec,
    relay: Relay,
    deadline: Instant,
    stateless: bool,
) -> Result<Session, BridgeError> {
    let lifecycle = match stateless {
        true => Lifecycle::Stateless,
        false => Lifecycle::Handshake { then_stateless: true },
    };
    start(spec, relay, deadline, lifecycle).await.map_err(Failed::into_error)
}

/// How a session starts.
#[derive(Debug, Clone, Copy)]
enum Lifecycle {
    /// The initialize handshake; `then_stateless`: the stateless revision
    /// for a remote server that refuses it.
    Handshake { then_stateless: bool },
    /// `server/discover` and the stateless 2026-07-28 revision.
    Stateless,
}

/// Why a session did not start: the server refused (or did not answer)
/// the revision tried, or something no other revision can mend (a login
/// needed, an authorization refused, a program that cannot start).
enum Failed {
    Refused(BridgeError),
    Final(BridgeError),
}

impl Failed {
    fn into_error(self) -> BridgeError {
        match self {
            Failed::Refused(e) | Failed::Final(e) => e,
        }
    }
}

async fn start(spec: &ServerSpec, relay: Relay, deadline: Instant, lifecycle: Lifecycle) -> Result<Session, Failed> {
    let (stateless, then_stateless) = match lifecycle {
        Lifecycle::Stateless => (true, false),
        Lifecycle::Handshake { then_stateless } => (false, then_stateless),
    };
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
    let lifecycle = match stateless {
        false => ClientLifecycleMode::Initialize,
        true => ClientLifecycleMode::Discover { preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28] },
    };
    let start_error =
        |reason: String| BridgeError::ServerStart { server: spec.name.clone(), command: spec.command_line(), reason };
    let final_error = |reason: String| Failed::Final(start_error(reason));
    let stderr = StderrTail::default();
    let initialized = match &spec.transport {
        Transport::Stdio(stdio) => {
            let transport =
                Noting::new(spawn(&spec.name, stdio, stderr.clone()).map_err(Failed::Final)?, relay.arrivals());
            tokio::time::timeout_at(deadline, relay.serve_with_lifecycle(transport, lifecycle)).await
        }
        Transport::Http(http) => {
            let config = http_config(http).map_err(final_error)?;
            // https uses rustls with ring, the provider async-nats already
            // brings; the client needs it installed as the process default.
            let _ = rustls::crypto::ring::default_provider().install_default();
            if let Some(auth) = &http.auth {
                // A login missing, or the tokens unreadable: said before any request.
                let ready = tokio::time::timeout_at(deadline, auth.token()).await;
                match ready {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => return Err(final_error(e.to_string())),
                    Err(_) => return Err(final_error("no access token within the start timeout".into())),
                }
            }
            let client = AuthorizedHttp::new(http.auth.clone());
            let transport = Noting::new(
                StreamableHttpClientTransport::with_client(client.clone(), config.clone()),
                relay.arrivals(),
            );
            let initialized =
                tokio::time::timeout_at(deadline, relay.clone().serve_with_lifecycle(transport, lifecycle)).await;
            if let Ok(Err(e)) = &initialized {
                if http.auth.is_none()
                    && let Some(challenge) = client.challenge()
                {
                    return Err(final_error(code_mode_upstream_auth::login::needs_auth_block(
                        &spec.name, &http.url, &challenge,
                    )));
                }
                if let Some(refusal) = code_mode_upstream_auth::refusal(e) {
                    return Err(final_error(refusal.to_string()));
                }
                if then_stateless {
                    // A server of the stateless revision alone refuses the
                    // handshake: speak that revision to it instead.
                    tracing::info!(server = %spec.name, error = %e, "the server refused the initialize handshake: trying the stateless 2026-07-28 revision");
                    let discover = ClientLifecycleMode::Discover {
                        preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
                    };
                    let transport = Noting::new(
                        StreamableHttpClientTransport::with_client(AuthorizedHttp::new(http.auth.clone()), config),
                        relay.arrivals(),
                    );
                    match tokio::time::timeout_at(deadline, relay.serve_with_lifecycle(transport, discover)).await {
                        Ok(Ok(session)) => {
                            tracing::info!(server = %spec.name, "the server speaks the stateless 2026-07-28 revision");
                            return Ok(session);
                        }
                        Ok(Err(stateless_error)) => {
                            return Err(Failed::Refused(start_error(format!(
                                "MCP initialization failed: {e}; with the stateless 2026-07-28 revision too: {stateless_error}"
                            ))));
                        }
                        Err(_) => {}
                    }
                }
            }
            if let Ok(Ok(_)) = &initialized {
                // A server sends what it asks outside our calls (an
                // elicitation while a tool runs) on the standalone stream
                // alone, and drops it while that stream is not open: the
                // first call must not outrun the stream's GET.
                let within = deadline.saturating_duration_since(Instant::now()).min(STANDALONE_WAIT);
                if !client.standalone_stream_settled(within).await {
                    tracing::debug!(server = %spec.name, "the server's standalone stream did not answer in time: going on without it");
                }
            }
            initialized
        }
    };
    match initialized {
        Ok(Ok(session)) => Ok(session),
        Ok(Err(e)) => {
            Err(Failed::Refused(start_error(format!("MCP initialization failed: {e}{}", stderr.describe().await))))
        }
        Err(_) => Err(Failed::Refused(start_error(format!(
            "no answer to initialize/tools list within {} s",
            spec.start_timeout.as_secs_f64()
        )))),
    }
}

/// Spawn the server, initialize the session and list the tools, all within
/// the start timeout.
pub(super) async fn connect(spec: &ServerSpec, relay: Relay) -> Result<(Session, Vec<Tool>), BridgeError> {
    // One deadline covers initialize and tools/list. A server that never
    // answers is killed: dropping the transport (or closing the session)
    // stops the child (or drops the HTTP connection).
    let deadline = Instant::now() + spec.start_timeout;
    let mut session = initialize(spec, relay, deadline).await?;
    match tokio::time::timeout_at(deadline, session.peer().list_all_tools()).await {
        Ok(Ok(tools)) => {
            listen_for_list_changes(&session, &spec.name);
            Ok((session, tools))
        }
        failed => {
            let _ = session.close_with_timeout(CLOSE_TIMEOUT).await;
            let reason = match failed {
                Ok(Err(e)) => format!("tools/list failed: {e}"),
                _ => format!("no answer to initialize/tools list within {} s", spec.start_timeout.as_secs_f64()),
            };
            Err(BridgeError::ServerStart { server: spec.name.clone(), command: spec.command_line(), reason })
        }
    }
}

/// Whether `session` speaks a revision without the initialize handshake
/// (2026-07-28, stateless).
pub(crate) fn is_stateless(session: &Peer<RoleClient>) -> bool {
    session.peer_info().is_some_and(|info| !info.protocol_version.has_initialize())
}

/// On a stateless (2026-07-28) shared session a server announces its list
/// changes only on a `subscriptions/listen` stream: keep one open while the
/// session lives, so that the catalog follows the server (the relay hears
/// the notifications as over the handshake). A server that refuses it is
/// logged: its catalog is then the one listed at start and at reload.
fn listen_for_list_changes(session: &Session, server: &str) {
    if !is_stateless(session.peer()) {
        return;
    }
    let peer = session.peer().clone();
    let server = server.to_string();
    tokio::spawn(async move {
        let filter = rmcp::model::SubscriptionFilter::builder()
            .tools_list_changed()
            .prompts_list_changed()
            .resources_list_changed()
            .build();
        let request = rmcp::model::ClientRequest::SubscriptionsListenRequest(
            rmcp::model::SubscriptionsListenRequest::new(rmcp::model::SubscriptionsListenRequestParams::new(filter)),
        );
        // It ends when the session closes, or when the server ends it.
        match peer.send_request(request).await {
            Ok(_) => tracing::debug!(%server, "the server ended its list-change stream"),
            Err(e) => tracing::info!(%server, error = %e, "the server's list-change stream ended"),
        }
    });
}

/// A session of one client's own with a wrapped server (see
/// [`crate::upstream`]): started like the shared one (a new child process
/// for a stdio server, a new MCP session for a remote one) with `relay`
/// declaring what that client can answer, and owned by a task that closes
/// it on `cancel` or ends when the server exits. The task's handle ends
/// once the session is closed.
pub(crate) async fn open_own(
    spec: &ServerSpec,
    relay: Relay,
    cancel: CancellationToken,
    stateless: bool,
) -> Result<(Peer<RoleClient>, tokio::task::JoinHandle<()>), BridgeError> {
    let deadline = Instant::now() + spec.start_timeout;
    let session = initialize_as(spec, relay, deadline, stateless).await?;
    if is_stateless(session.peer()) && matches!(spec.transport, Transport::Http(_)) {
        // rmcp's HTTP client mirrors a call's arguments into the
        // `Mcp-Param-*` headers its tool declares from the tools/list it
        // saw on this transport: list once, so that the calls made here
        // carry them (a server checks them, and refuses a call without).
        match tokio::time::timeout_at(deadline, session.peer().list_all_tools()).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                tracing::info!(server = %spec.name, error = %e, "tools/list failed on a stateless session: its calls carry no Mcp-Param-* headers");
            }
            Err(_) => {
                tracing::info!(server = %spec.name, "no tools/list within the start timeout on a stateless session: its calls carry no Mcp-Param-* headers");
            }
        }
    }
    let peer = session.peer().clone();
    let name = spec.name.clone();
    let task = tokio::spawn(async move {
        let stop = session.cancellation_token();
        let ended = session.waiting();
        tokio::pin!(ended);
        tokio::select! {
            _ = &mut ended => {
                tracing::debug!(server = %name, "a client's own session of the server ended");
                return;
            }
            _ = cancel.cancelled() => {}
        }
        stop.cancel();
        if tokio::time::timeout(CLOSE_TIMEOUT, ended).await.is_err() {
            tracing::debug!(server = %name, "a client's own session of the server did not close in time: killed");
        }
    });
    Ok((peer, task))
}

/// The client transport settings of a remote server: its URL and headers.
pub(super) fn http_config(http: &HttpSpec) -> Result<StreamableHttpClientTransportConfig, String> {
    let mut headers = HashMap::with_capacity(http.headers.len());
    for (name, value) in &http.headers {
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|e| format!("header {name:?}: {e}"))?;
        let value = HeaderValue::from_str(value).map_err(|e| format!("header {name:?}: {e}"))?;
        headers.insert(name, value);
    }
    Ok(StreamableHttpClientTransportConfig::with_uri(http.url.clone()).custom_headers(headers))
}

/// Spawn a stdio server with its environment; its stderr goes to the log,
/// and its last lines to `tail`.
pub(super) fn spawn(name: &str, spec: &StdioSpec, tail: StderrTail) -> Result<ChildTransport, BridgeError> {
    let mut cmd = tokio::process::Command::new(&spec.command);
    cmd.args(&spec.args).env_clear().kill_on_drop(true);
    for key in DEFAULT_ENV {
        if let Some(v) = std::env::var_os(key) {
            cmd.env(key, v);
        }
    }
    for key in &spec.pass_env {
        match std::env::var_os(key) {
            Some(v) => {
                cmd.env(key, v);
            }
            None => {
                return Err(BridgeError::EnvMissing { server: name.to_string(), name: key.clone() });
            }
        }
    }
    for (k, v) in &spec.set_env {
        cmd.env(k, v);
    }
    let spawn_error = |e: std::io::Error| BridgeError::ServerStart {
        server: name.to_string(),
        command: crate::stubs::cut_chars(
            &std::iter::once(&spec.command).chain(&spec.args).cloned().collect::<Vec<_>>().join(" "),
            MAX_COMMAND_LINE,
        ),
        reason: spawn_failure(&spec.command, &e),
    };
    let (transport, stderr) = TokioChildProcess::builder(cmd).stderr(Stdio::piped()).spawn().map_err(spawn_error)?;
    if let Some(stderr) = stderr {
        let name = name.to_string();
        // Ends when the child closes stderr (it exited or was killed).
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::info!(server = %name, "{line}");
                tail.push(&line);
            }
            tail.closed.notify_one();
        });
    }
    Ok(ChildTransport::new(transport))
}
