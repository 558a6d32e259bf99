//! `code-mode-test-server`: a small MCP server that speaks MCP over stdio, for
//! the code-mode integration tests to run as a wrapped stdio MCP server.
//!
//! It offers tools that behave in known ways (`add`, `echo`, `sleep`, `huge`,
//! `fail`, `protocol_error`, `crash`, `get_env`, `count`), tools with names
//! and input schemas that are awkward to turn into code, and flags that add
//! more of them (`--many`, `--long-descriptions`, `--clash`, `--deep-schema`).
//! `--log FILE` records every request that reaches the server, so tests can
//! prove what got through; `--exit-on-start` makes it fail before serving.
//! `--add-tool` adds `add_tool {name}`, which adds a tool at runtime
//! (answering `ok <name>`) and sends `notifications/tools/list_changed`.
//! `--reports` adds `report {owner, secret}`, which answers with nested JSON
//! text and declares no output schema. `--ask-on-reads` makes it ask its
//! client questions (`roots/list`, `elicitation/create`) in the middle of
//! a resource read, a prompt or a completion, as some servers do with
//! requests of their own that belong to no call; `--handshake-only` keeps
//! it to the revisions with an initialize handshake. `--linger` keeps it running after
//! its input closes, until SIGTERM.
//!
//! Stdout is the MCP channel: logs go to stderr only. With `--http ADDR` it
//! serves the same tools plus `get_header` over streamable HTTP instead, at
//! any path, prints `listening on http://HOST:PORT/mcp` as the one line of
//! stdout, and serves until killed. With `--oauth-issuer URL` it is an
//! OAuth resource server too (`oauth.rs`): tokens of that issuer only,
//! the tool `whoami` added. With `--tasks` it offers instead the fixtures of
//! the conformance suite's `tasks-*` scenarios (`tasks.rs`: MCP Tasks, with
//! rmcp's task manager), over stdio or `--http`.

mod catalog;
mod oauth;
mod server;
mod tasks;

use std::{fs::OpenOptions, io::Write as _, net::SocketAddr, path::PathBuf, sync::Arc};

use anyhow::Context as _;
use clap::Parser;
use rmcp::ServiceExt as _;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};

use crate::{
    catalog::{Catalog, CatalogOptions},
    server::{HttpLog, LogFile, RequestLog, TestServer},
};

/// A stdio MCP server with awkward tools, for the code-mode integration tests.
#[derive(Debug, Parser)]
#[command(name = "code-mode-test-server", version)]
struct Args {
    /// Append `<method> <tool name or ->` to FILE for every request received.
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    /// Add N tools named `extra_tool_0000`, `extra_tool_0001`, ...
    #[arg(long, value_name = "N", default_value_t = 0)]
    many: usize,
    /// Add a tool with this name (repeatable), taking `path` and `verbose`
    /// and answering with its arguments as JSON (for policies written for
    /// other servers' tools).
    #[arg(long = "tool", value_name = "NAME")]
    tools: Vec<String>,
    /// Give `echo` a 10,000-character description and add `long_desc_tool`
    /// (50,000 characters).
    #[arg(long)]
    long_descriptions: bool,
    /// Add tools `a-b` and `a_b`, whose names clash once made identifiers.
    #[arg(long)]
    clash: bool,
    /// Add tools `deep`, `bad_schema` and `hostile_schema`.
    #[arg(long)]
    deep_schema: bool,
    /// How many object levels the `deep` tool's schema nests (deeper than about 60 and an
    /// rmcp client, which parses with serde_json's 128-level limit, cannot read tools/list).
    #[arg(long, value_name = "N", default_value_t = 40)]
    deep_depth: usize,
    /// Exit with code 2 before serving.
    #[arg(long)]
    exit_on_start: bool,
    /// Serve over streamable HTTP on ADDR (e.g. `127.0.0.1:0`) instead of stdio,
    /// with the extra tool `get_header`.
    #[arg(long, value_name = "ADDR")]
    http: Option<SocketAddr>,
    /// Add the tool `add_tool {name}`, which adds a tool at runtime and sends
    /// `notifications/tools/list_changed`.
    #[arg(long)]
    add_tool: bool,
    /// Offer resources (`test://small`, `test://secret`, `test://image`), a
    /// template (`test://big/{bytes}`: that many bytes of text), a prompt
    /// (`greet {name}`) and completions of its argument, and add the tool
    /// `ask_model {prompt}`, which asks the client's model (sampling).
    #[arg(long)]
    resources: bool,
    /// With `--resources`, put NAME in every URI (`test://NAME/small`,
    /// `test://NAME/big/{bytes}`), so two servers offer different ones.
    #[arg(long, value_name = "NAME")]
    resource_host: Option<String>,
    /// Add the tool `report {owner, secret}`, which declares no output
    /// schema and answers with nested JSON text holding both values (for
    /// result shapes learned from results).
    #[arg(long)]
    reports: bool,
    /// With `--resources`: before answering a `resources/read`,
    /// `prompts/get` or `completion/complete`, ask the client `roots/list`
    /// (when it declared roots) and `elicitation/create` (when it declared
    /// elicitation), then answer as usual; each outcome goes to the `--log`
    /// file as `asked <method> <answer or error CODE>`.
    #[arg(long, requires = "resources")]
    ask_on_reads: bool,
    /// Speak only the revisions with an initialize handshake (2025-11-25
    /// and older), as server-everything 2026.8.31 does: a stateless client's
    /// requests then reach it over a session of their own, where its
    /// questions are requests of its own, not input-required results.
    #[arg(long)]
    handshake_only: bool,
    /// Keep running after the input closes (as some servers do) until
    /// SIGTERM, which is then recorded in the `--log` file as `SIGTERM -`.
    #[arg(long)]
    linger: bool,
    /// With `--http`: require bearer tokens (RS256 JWTs) of this OAuth
    /// issuer for this server (audience `http://HOST:PORT/mcp`), answer 401
    /// with a challenge naming the Protected Resource Metadata, and add
    /// `whoami`.
    #[arg(long, value_name = "URL", requires = "http")]
    oauth_issuer: Option<String>,
    /// With `--oauth-issuer`: a scope every request needs (repeatable).
    #[arg(long = "oauth-scope", value_name = "SCOPE", requires = "oauth_issuer")]
    oauth_scopes: Vec<String>,
    /// With `--oauth-issuer`: calling TOOL needs SCOPE too, else 403
    /// insufficient_scope (`TOOL=SCOPE`, repeatable).
    #[arg(long = "require-scope", value_name = "TOOL=SCOPE", requires = "oauth_issuer")]
    require_scopes: Vec<String>,
    /// With `--oauth-issuer`: the `resource` its metadata names (default:
    /// its own URL), to test clients that must refuse another.
    #[arg(long, value_name = "URL", requires = "oauth_issuer")]
    oauth_resource: Option<String>,
    /// With `--oauth-issuer`: accept tokens for this audience instead of its
    /// own URL (a server that takes tokens meant for another).
    #[arg(long, value_name = "URL", requires = "oauth_issuer")]
    oauth_audience: Option<String>,
    /// Offer only the task fixtures of the conformance suite's `tasks-*`
    /// scenarios (`greet`, `slow_compute`, `failing_job`,
    /// `protocol_error_job`, `confirm_delete`, `multi_input`,
    /// `test_tool_with_task`) and the tasks extension; `--log` records
    /// `tools/call` and `tasks/*` requests.
    #[arg(long, conflicts_with_all = ["resources", "oauth_issuer", "many"])]
    tasks: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();

    let args = Args::parse();
    if args.exit_on_start {
        eprintln!("code-mode-test-server: --exit-on-start given, exiting with code 2");
        std::process::exit(2);
    }

    let log = match &args.log {
        Some(path) => Some(
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("cannot open the request log {}", path.display()))?,
        ),
        None => None,
    };

    if args.tasks {
        let fixtures = tasks::TaskFixtures::new(log.map(|file| Arc::new(LogFile::new(file))));
        return match args.http {
            Some(addr) => serve_tasks_http(addr, fixtures).await,
            None => {
                tracing::info!("serving the task fixtures over stdio");
                let service =
                    fixtures.serve(rmcp::transport::stdio_pipes()).await.context("MCP initialization failed")?;
                service.waiting().await.context("MCP service failed")?;
                Ok(())
            }
        };
    }

    let catalog = Catalog::build(&CatalogOptions {
        many: args.many,
        named: args.tools,
        long_descriptions: args.long_descriptions,
        clash: args.clash,
        deep_schema: args.deep_schema,
        deep_depth: args.deep_depth,
        http: args.http.is_some(),
        add_tool: args.add_tool,
        resources: args.resources,
        reports: args.reports,
        whoami: args.oauth_issuer.is_some(),
    });
    if let Some(addr) = args.http {
        let server = TestServer::new(catalog).with_resources(args.resources, args.resource_host.as_deref());
        let mut required = std::collections::HashMap::new();
        for pair in &args.require_scopes {
            let (tool, scope) = pair.split_once('=').context("--require-scope takes TOOL=SCOPE")?;
            required.insert(tool.to_string(), scope.to_string());
        }
        let gate = args.oauth_issuer.clone().map(|issuer| GateSettings {
            issuer,
            scopes: args.oauth_scopes.clone(),
            required,
            resource: args.oauth_resource.clone(),
            audience: args.oauth_audience.clone(),
        });
        return serve_http(addr, server, log.map(|file| Arc::new(LogFile::new(file))), gate).await;
    }
    tracing::info!(tools = catalog.tools.len(), "serving MCP over stdio");

    let asks_log = match (args.ask_on_reads, &args.log) {
        (true, Some(path)) => Some(Arc::new(LogFile::new(
            OpenOptions::new()
                .append(true)
                .open(path)
                .with_context(|| format!("cannot open the request log {}", path.display()))?,
        ))),
        _ => None,
    };
    let server = TestServer::new(catalog)
        .with_resources(args.resources, args.resource_host.as_deref())
        .asking_on_reads(args.ask_on_reads, asks_log)
        .handshake_only(args.handshake_only);
    // Set up before serving, so that a SIGTERM at any time is recorded
    // (only when lingering: otherwise SIGTERM ends the server at once).
    let term = match args.linger {
        true => Some((tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?, args.log.clone())),
        false => None,
    };
    let service = RequestLog::new(server, log)
        .serve(rmcp::transport::stdio_pipes())
        .await
        .context("MCP initialization failed")?;
    service.waiting().await.context("MCP service failed")?;
    if let Some((mut term, log)) = term {
        tracing::info!("the input closed: lingering until SIGTERM");
        term.recv().await;
        if let Some(path) = log {
            OpenOptions::new().append(true).open(path)?.write_all(b"SIGTERM -\n")?;
        }
    }
    Ok(())
}

/// Serve the task fixtures over streamable HTTP on `addr` until killed.
async fn serve_tasks_http(addr: SocketAddr, fixtures: tasks::TaskFixtures) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| format!("cannot listen on {addr}"))?;
    let bound = listener.local_addr()?;
    let service = StreamableHttpService::new(
        move || Ok(fixtures.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let mut stdout = std::io::stdout();
    writeln!(stdout, "listening on http://{bound}/mcp")?;
    stdout.flush()?;
    tracing::info!(%bound, "serving the task fixtures over streamable HTTP");
    loop {
        let (stream, _) = listener.accept().await.context("accept failed")?;
        let io = hyper_util::rt::TokioIo::new(stream);
        let service = hyper_util::service::TowerToHyperService::new(service.clone());
        tokio::spawn(async move {
            if let Err(error) = hyper::server::conn::http1::Builder::new().serve_connection(io, service).await {
                tracing::debug!(%error, "HTTP connection ended");
            }
        });
    }
}

/// The resource-server settings (`--oauth-issuer` and its companions).
struct GateSettings {
    issuer: String,
    scopes: Vec<String>,
    required: std::collections::HashMap<String, String>,
    resource: Option<String>,
    audience: Option<String>,
}

/// Serve `server` over streamable HTTP (HTTP/1.1) on `addr` until killed;
/// behind an OAuth gate with `gate`.
async fn serve_http(
    addr: SocketAddr,
    server: TestServer,
    log: Option<Arc<LogFile>>,
    gate: Option<GateSettings>,
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| format!("cannot listen on {addr}"))?;
    let bound = listener.local_addr()?;
    let service = StreamableHttpService::new(
        move || Ok(HttpLog::new(server.clone(), log.clone())),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let gate = gate.map(|settings| {
        let resource = format!("http://{bound}/mcp");
        let mut gate = oauth::Gate::new(settings.issuer, resource.clone(), settings.scopes, settings.required);
        gate.advertised = settings.resource.unwrap_or_else(|| resource.clone());
        gate.audience = settings.audience.unwrap_or(resource);
        Arc::new(gate)
    });
    let mut stdout = std::io::stdout();
    writeln!(stdout, "listening on http://{bound}/mcp")?;
    stdout.flush()?;
    tracing::info!(%bound, oauth = gate.is_some(), "serving MCP over streamable HTTP");
    loop {
        let (stream, _) = listener.accept().await.context("accept failed")?;
        let io = hyper_util::rt::TokioIo::new(stream);
        let Some(gate) = gate.clone() else {
            let service = hyper_util::service::TowerToHyperService::new(service.clone());
            tokio::spawn(async move {
                if let Err(error) = hyper::server::conn::http1::Builder::new().serve_connection(io, service).await {
                    tracing::debug!(%error, "HTTP connection ended");
                }
            });
            continue;
        };
        let service = service.clone();
        let handler = hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
            let (gate, mut service) = (gate.clone(), service.clone());
            async move { Ok::<_, std::convert::Infallible>(guarded(&gate, &mut service, request).await) }
        });
        tokio::spawn(async move {
            if let Err(error) = hyper::server::conn::http1::Builder::new().serve_connection(io, handler).await {
                tracing::debug!(%error, "HTTP connection ended");
            }
        });
    }
}

type Body = http_body_util::combinators::BoxBody<bytes::Bytes, std::convert::Infallible>;

/// One request through the OAuth gate: the metadata, a refusal, or the MCP
/// service.
async fn guarded<S>(
    gate: &oauth::Gate,
    service: &mut S,
    request: hyper::Request<hyper::body::Incoming>,
) -> http::Response<Body>
where
    S: tower_service::Service<
            http::Request<http_body_util::Full<bytes::Bytes>>,
            Response = http::Response<Body>,
            Error = std::convert::Infallible,
        >,
{
    use http_body_util::BodyExt as _;
    let respond = |status: u16, challenge: Option<String>, body: String| {
        let mut response =
            http::Response::builder().status(status).header(http::header::CONTENT_TYPE, "application/json");
        if let Some(challenge) = challenge {
            response = response.header(http::header::WWW_AUTHENTICATE, challenge);
        }
        response
            .body(http_body_util::Full::new(bytes::Bytes::from(body)).boxed())
            .unwrap_or_else(|_| http::Response::new(http_body_util::Empty::new().boxed()))
    };
    if request.uri().path().starts_with("/.well-known/oauth-protected-resource") {
        return respond(200, None, gate.metadata().to_string());
    }
    let (parts, body) = request.into_parts();
    let bytes = body.collect().await.map(|collected| collected.to_bytes()).unwrap_or_default();
    let authorization = parts.headers.get(http::header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    if let Err(refusal) = gate.check(authorization, &bytes).await {
        return respond(refusal.status, Some(refusal.challenge), refusal.body);
    }
    let request = http::Request::from_parts(parts, http_body_util::Full::new(bytes));
    match service.call(request).await {
        Ok(response) => response,
        Err(never) => match never {},
    }
}
