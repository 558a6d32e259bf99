//! MCP over streamable HTTP: the same `run_python` tool at `POST /mcp`,
//! served by actix-web through `rmcp-actix-web`, for clients that connect
//! to a URL instead of starting a process.
//!
//! Each MCP session gets its own [`Frontend`] (a session actor) from the
//! [`FrontendFactory`]: its own session id (so the private-data taint, the
//! `grant` rate limits and approval questions stay per session), the
//! process's shared cell slots. A client of protocol 2025-11-25 and older
//! holds a session (`Mcp-Session-Id`) across calls; one without a request
//! for [`code_mode_core::defaults::HTTP_SESSION_IDLE`] is closed. The
//! stateless protocol 2026-07-28 has no sessions: each request gets a new
//! session object, which counts its cells in the caller's identity's scope
//! and keeps variables only behind a handle ([`crate::lifetimes`],
//! [`crate::handle`]); an approval's retried call finds its parked cell
//! through the factory, not the session.
//!
//! With [`TlsFiles`] it serves HTTPS (rustls, [`crate::tls`]) on the same
//! address; a plain HTTP request there fails the handshake. TLS does not
//! replace authentication: the rule below holds with or without it.
//!
//! When clients authenticate, the web console ([`crate::console`]) is
//! served beside `/mcp` under `/console`, on the same address, TLS and
//! `Host` check: there a team approves the calls of rules that name
//! approvers.
//!
//! Requests whose `Host` is not allowed are refused (403): loopback only by
//! default, against DNS rebinding; name the hosts the server is reached by.
//! A malformed `Host` (or absolute-form target) gets 400 first, and an
//! absolute-form target's authority stands for `Host` ([`crate::host`]).
//! Before the transport, every request passes the [`auth`](crate::auth)
//! gate: origin, bearer token, session owner and session limits. An
//! address that is not loopback is served only with authentication, or
//! with `--insecure-no-auth`.

use std::net::SocketAddr;
use std::sync::Arc;

use actix_web::middleware::from_fn;
use actix_web::{App, HttpServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp_actix_web::transport::StreamableHttpService;
use tokio_util::sync::CancellationToken;

use crate::auth::{self, AuthError, AuthOptions, Gate};
use crate::console::Console;
pub use crate::console::ConsoleOptions;
use crate::resumable::Resumable;
pub use crate::tls::TlsFiles;
use crate::{Frontend, FrontendError, FrontendFactory};

/// The path the MCP endpoint is served at.
pub const MCP_PATH: &str = "/mcp";

/// Where and for whom to serve.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// `host:port` to listen on (port 0 picks a free one).
    pub addr: String,
    /// Accepted `Host` header values (`host` or `host:port`); empty keeps
    /// the loopback-only default.
    pub allowed_hosts: Vec<String>,
    /// Who may call, and how many sessions they may hold.
    pub auth: AuthOptions,
    /// Largest request body accepted (`--max-body`); larger ones get 413.
    /// `None`: rmcp's default, 4 MiB.
    pub max_body: Option<usize>,
    /// Serve HTTPS with this certificate and key (`--tls-cert`,
    /// `--tls-key`); `None`: plain HTTP.
    pub tls: Option<TlsFiles>,
    /// The web console's settings (served only when clients
    /// authenticate).
    pub console: ConsoleOptions,
}

/// Whether every address `addr` resolves to is a loopback address.
async fn is_loopback(addr: &str) -> bool {
    match tokio::net::lookup_host(addr).await {
        Ok(addrs) => {
            let addrs: Vec<SocketAddr> = addrs.collect();
            !addrs.is_empty() && addrs.iter().all(|a| a.ip().is_loopback())
        }
        Err(_) => false,
    }
}

/// Check what can be checked before anything starts: an address that is not
/// loopback needs authentication (or `--insecure-no-auth`, logged as a
/// warning when the server starts), the token file must read, and the TLS
/// certificate and key must make a usable pair.
pub async fn preflight(options: &HttpOptions) -> Result<(), FrontendError> {
    if let Some(path) = &options.auth.tokens_file {
        crate::auth::static_tokens::TokenSet::read(path)?;
    }
    if let Some(files) = &options.tls {
        crate::tls::server_config(files)?;
    }
    if !options.auth.authenticates() && !options.auth.insecure_no_auth && !is_loopback(&options.addr).await {
        return Err(AuthError::Unauthenticated { addr: options.addr.clone() }.into());
    }
    Ok(())
}

/// Answer a session's `DELETE` with 200 OK instead of the transport's 202
/// Accepted: the session is gone when the answer leaves, and clients (the
/// official Python SDK) take only 200 or 204 as a clean end and warn on
/// every exit otherwise.
fn session_end_is_ok<S>(
    request: actix_web::dev::ServiceRequest,
    service: &S,
) -> impl std::future::Future<Output = Result<actix_web::dev::ServiceResponse, actix_web::Error>> + use<S>
where
    S: actix_web::dev::Service<
            actix_web::dev::ServiceRequest,
            Response = actix_web::dev::ServiceResponse,
            Error = actix_web::Error,
        >,
{
    let delete = request.method() == actix_web::http::Method::DELETE;
    let answer = service.call(request);
    async move {
        let mut response = answer.await?;
        if delete && response.status() == actix_web::http::StatusCode::ACCEPTED {
            *response.response_mut().status_mut() = actix_web::http::StatusCode::OK;
        }
        Ok(response)
    }
}

/// A running MCP HTTP server.
#[derive(Debug)]
pub struct McpHttpServer {
    addr: SocketAddr,
    /// Whether it serves HTTPS.
    tls: bool,
    task: tokio::task::JoinHandle<()>,
}

impl McpHttpServer {
    /// Bind `options.addr` and serve MCP at [`MCP_PATH`] until `cancel`
    /// fires (sessions are closed then, and the server stops).
    pub async fn start(
        factory: FrontendFactory,
        options: &HttpOptions,
        cancel: CancellationToken,
    ) -> Result<Self, FrontendError> {
        let bind_error = |reason: std::io::Error| FrontendError::Http { addr: options.addr.clone(), reason };
        preflight(options).await?;
        let tls = options.tls.as_ref().map(crate::tls::server_config).transpose()?;
        if options.auth.insecure_no_auth && !options.auth.authenticates() {
            tracing::warn!(
                addr = %options.addr,
                "--insecure-no-auth: MCP over HTTP without authentication; anyone who reaches the port can run code \
                 and call every tool"
            );
        }
        let gate = Gate::new(&options.auth, cancel.clone()).await?.reading_bodies_up_to(options.max_body);
        // The Protected Resource Metadata (RFC 9728), outside the gate: a
        // client reads it before it has a token.
        let metadata = gate.oauth().map(|o| (o.metadata_url(), o.metadata()));
        // The console, only where every caller has an identity.
        let console = options.auth.authenticates().then(|| {
            Console::new(&factory, gate.clone(), &options.console, options.allowed_hosts.clone(), tls.is_some())
        });
        let shared = factory.shared.clone();
        let sessions = factory;
        // An empty list would switch the check off: keep the default then.
        let hosts = (!options.allowed_hosts.is_empty()).then(|| options.allowed_hosts.clone());
        // An MCP session without a request for this long is closed (and
        // its state forgotten): the shortest a stateless scope may last.
        // Its request streams' event ids name their request, so a frontend
        // started after this one answers a resume with a clear error
        // ([`crate::resumable`]).
        let mut manager = LocalSessionManager::default();
        manager.session_config.keep_alive = Some(code_mode_core::defaults::HTTP_SESSION_IDLE);
        let service = StreamableHttpService::builder()
            .service_factory(Arc::new(move || -> Result<Frontend, std::io::Error> { Ok(sessions.http_session()) }))
            .session_manager(Arc::new(Resumable::new(manager)))
            .cancellation_token(cancel.child_token())
            .maybe_allowed_hosts(hosts)
            .on_request_fn(|request, extensions| {
                auth::carry_caller(request, extensions);
                crate::closed::carry(request, extensions);
            })
            .maybe_max_request_body_bytes(options.max_body)
            .build();
        let server = HttpServer::new(move || {
            let gate = gate.clone();
            let guarded = service
                .clone()
                .scope_with_path(MCP_PATH)
                // Inside the gate, which marks the reads to answer as JSON.
                .wrap_fn(crate::json_reads::answered)
                .wrap(from_fn(move |request, next| auth::gate(gate.clone(), request, next)))
                .wrap_fn(crate::closed::watched);
            let mut app = App::new().wrap_fn(session_end_is_ok).wrap_fn(crate::host::checked).service(guarded);
            if let Some(console) = &console {
                app = app.configure(|config| console.configure(config));
            }
            if let Some((url, document)) = &metadata {
                let (_, path) = url.split_at(url.find(auth::oauth::METADATA_PATH).unwrap_or(0));
                for path in [path.to_string(), auth::oauth::METADATA_PATH.to_string()] {
                    let document = document.clone();
                    app = app.route(
                        &path,
                        actix_web::web::get().to(move || {
                            let document = document.clone();
                            async move { actix_web::HttpResponse::Ok().json(document) }
                        }),
                    );
                }
            }
            app
        })
        .workers(1)
        // A client that closes its side of the connection is gone: its
        // request's response is dropped, which is how a 2026-07-28 client's
        // cancel (and a vanished client) reaches the request (`closed`).
        .h1_allow_half_closed(false)
        .shutdown_timeout(2)
        .shutdown_signal(cancel.clone().cancelled_owned());
        let secure = tls.is_some();
        let server = match tls {
            Some(config) => server.bind_rustls_0_23(&options.addr, config),
            None => server.bind(&options.addr),
        }
        .map_err(bind_error)?;
        let addr = *server
            .addrs()
            .first()
            .ok_or_else(|| bind_error(std::io::Error::other("the address resolved to nothing")))?;
        if options.auth.authenticates() {
            let base = crate::console::base_url(options.console.public_url.as_deref(), addr, secure);
            tracing::info!(url = %format!("{base}{}", crate::console::PATH), "serving the web console");
            let _ = shared.console_base.set(base);
        }
        let running = server.run();
        let task = tokio::spawn(async move {
            if let Err(e) = running.await {
                tracing::warn!(error = %e, "the MCP HTTP server stopped with an error");
            }
        });
        tracing::info!(%addr, path = MCP_PATH, tls = secure, "serving MCP over streamable HTTP");
        Ok(Self { addr, tls: secure, task })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The MCP endpoint's URL (`https://` with TLS), by the address it
    /// listens on.
    pub fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}{MCP_PATH}", self.addr)
    }

    /// Wait until the server has stopped (after the token fired).
    pub async fn stopped(self) {
        let _ = self.task.await;
    }
}
