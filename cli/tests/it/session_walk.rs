//! A property of the threat model: no per-session control lasts less than
//! the definition says ([`code_mode_mcp_frontend::lifetimes`],
//! docs/sessions.md), for any protocol version the server offers, over stdio or
//! over HTTP.
//!
//! The walk takes every version rmcp knows (the server negotiates each of
//! them) and every [`Control`]; a version or control added later is walked
//! as soon as it exists, and a control the walk cannot try fails it. Each
//! version gets one client over stdio (its own `serve`) and one over HTTP
//! (its own identity on one `serve --http` with every control on), rmcp's
//! client with that version pinned; for what lasts for an identity, a
//! second client of the same identity must still see it.

#![allow(deprecated)] // MCP logging (deprecated from 2026-07-28 on) is one of the controls walked.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use code_mode_mcp_frontend::lifetimes::{ClientKind, Control, Lasts};
use rmcp::ClientHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult,
    ElicitationAction, ElicitationCapability, FormElicitationCapability, LoggingLevel, LoggingMessageNotificationParam,
    ProtocolVersion, RequestMetaObject, SetLevelRequestParams,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, NotificationContext, RequestContext, RoleClient};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

use crate::auth::{Client as Token, TokenFile, serve, token_new};
use crate::support::{self, log_path, report};

/// `add` once a day per session; `echo` needs approval; `get_env` is private.
const POLICY: &str = r#"{"version": "1", "default": "allow", "tools": {
    "add": {"limits": [{"counter": "adds", "window": "day", "max": 1, "scope": "grant"}]},
    "echo": {"action": "approve"}}}"#;

/// A client that approves every question (counting them), hears log
/// notifications, and speaks one protocol version.
#[derive(Debug, Clone)]
struct Walker {
    version: ProtocolVersion,
    asked: Arc<Mutex<u32>>,
    heard: Arc<Mutex<Vec<Value>>>,
}

impl Walker {
    fn new(version: &ProtocolVersion) -> Self {
        Self { version: version.clone(), asked: Arc::default(), heard: Arc::default() }
    }

    fn asked(&self) -> u32 {
        *self.asked.lock().unwrap()
    }

    /// Whether a `cell_started` notification arrived (waiting up to 3 s).
    async fn heard_a_cell_start(&self) -> bool {
        for _ in 0..30 {
            if self.heard.lock().unwrap().iter().any(|d| d["event"] == "cell_started") {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    }

    fn lifecycle(&self) -> ClientLifecycleMode {
        if self.version.has_initialize() {
            ClientLifecycleMode::Initialize
        } else {
            ClientLifecycleMode::Discover { preferred_versions: vec![self.version.clone()] }
        }
    }
}

impl ClientHandler for Walker {
    async fn create_elicitation(
        &self,
        _request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        *self.asked.lock().unwrap() += 1;
        Ok(ElicitResult::new(ElicitationAction::Accept).with_content(json!({})))
    }

    async fn on_logging_message(&self, params: LoggingMessageNotificationParam, _: NotificationContext<RoleClient>) {
        self.heard.lock().unwrap().push(params.data);
    }

    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation = Some(ElicitationCapability::new().with_form(FormElicitationCapability::default()));
        let mut info = ClientConfig::default();
        info.capabilities = capabilities;
        info.protocol_version = self.version.clone();
        info
    }
}

type Running = rmcp::service::RunningService<RoleClient, Walker>;

/// How to reach the server: one `serve` per client over stdio, or the
/// shared HTTP endpoint as one identity.
enum Way {
    Stdio(Vec<String>),
    Http { url: String, token: String },
}

impl Way {
    async fn connect(&self, walker: Walker) -> Running {
        let lifecycle = walker.lifecycle();
        match self {
            Way::Stdio(args) => {
                let mut serve = tokio::process::Command::new(support::code_mode());
                serve.arg("serve").args(args).arg("--").arg(support::test_server());
                support::connect_client_lifecycle(serve, walker, lifecycle).await.0
            }
            Way::Http { url, token } => {
                let _ = rustls::crypto::ring::default_provider().install_default();
                let config = StreamableHttpClientTransportConfig::with_uri(url.clone()).auth_header(token.clone());
                let transport = StreamableHttpClientTransport::from_config(config);
                walker.serve_with_lifecycle(transport, lifecycle).await.expect("the walker connects")
            }
        }
    }
}

/// Call `tool` with `arguments` (and `meta`); the result, an MCP error as
/// an error result's text.
async fn call(client: &Running, tool: &str, arguments: Value, meta: Option<RequestMetaObject>) -> CallToolResult {
    let mut params = CallToolRequestParams::new(tool.to_string());
    params.arguments = arguments.as_object().cloned();
    params.meta = meta;
    client
        .call_tool(params)
        .await
        .unwrap_or_else(|e| CallToolResult::error(vec![rmcp::model::ContentBlock::text(e.to_string())]))
}

async fn cell(client: &Running, code: &str) -> CallToolResult {
    call(client, "run_python", json!({"code": code}), None).await
}

/// What a cell printed, or the text of an error result.
fn said(result: &CallToolResult) -> String {
    match &result.structured_content {
        Some(_) => {
            let report = report(result);
            format!("{}{}", report["stdout"].as_str().unwrap_or(""), report["error"].as_str().unwrap_or(""))
        }
        None => result.content.iter().filter_map(|c| c.as_text()).map(|t| t.text.clone()).collect(),
    }
}

/// Whether `control` was still in force on the client's later call (and,
/// for what lasts for an identity, on a new client of that identity): the
/// `Lasts` it showed, checked against what it must.
async fn walk(control: Control, kind: ClientKind, way: &Way, version: &ProtocolVersion) {
    let must = control.lasts(kind);
    let walker = Walker::new(version);
    let client = way.connect(walker.clone()).await;
    let what =
        format!("{control:?} under {version} over {}", if matches!(way, Way::Stdio(_)) { "stdio" } else { "HTTP" });
    // Whether the control holds on `probe`'s client, and on a new client of
    // the identity when it must last for the identity.
    let held = |text: String, expected: &str| {
        assert!(text.contains(expected), "{what} did not last as long as it must ({must:?}): {text}");
    };
    match control {
        Control::PrivateData => {
            assert!(!said(&cell(&client, "print(await get_env(name='HOME'))").await).contains("Error"));
            let probe = "try:\n    print(await count())\nexcept ToolError as e:\n    print('refused:', e)";
            held(said(&cell(&client, probe).await), "refused by the private-data rule");
            if must == Lasts::Identity {
                let again = way.connect(Walker::new(version)).await;
                held(said(&cell(&again, probe).await), "refused by the private-data rule");
                again.cancel().await.ok();
            }
        }
        Control::GrantLimits => {
            // Not across midnight (UTC), where the day's window starts anew.
            crate::policy::inside_one_window(86_400, 30);
            let probe = "try:\n    print(await add(a=1, b=2))\nexcept ToolError as e:\n    print('refused:', e)";
            assert_eq!(said(&cell(&client, probe).await), "{\"sum\":3}\n", "{what}: the first add passes");
            held(said(&cell(&client, probe).await), "rate limit adds");
            if must == Lasts::Identity {
                let again = way.connect(Walker::new(version)).await;
                held(said(&cell(&again, probe).await), "rate limit adds");
                again.cancel().await.ok();
            }
        }
        Control::KeptVariables => {
            let first = match must {
                Lasts::Handle => call(&client, "run_python", json!({"code": "x = 41", "session": "new"}), None).await,
                _ => cell(&client, "x = 41").await,
            };
            let arguments = match must {
                Lasts::Handle => {
                    let handle = report(&first)["session"].as_str().map(str::to_string);
                    let handle = handle.unwrap_or_else(|| panic!("{what}: no handle in {first:?}"));
                    json!({"code": "print(x + 1)", "session": handle})
                }
                _ => json!({"code": "print(x + 1)"}),
            };
            held(said(&call(&client, "run_python", arguments, None).await), "42");
        }
        Control::CellsPerSession => {
            let other = match must {
                Lasts::Identity => Some(way.connect(Walker::new(version)).await),
                _ => None,
            };
            let second_client = other.as_ref().unwrap_or(&client);
            let slow = cell(&client, "import asyncio\nawait asyncio.sleep(2)");
            let quick = async {
                tokio::time::sleep(Duration::from_millis(700)).await;
                said(&cell(second_client, "print(1)").await)
            };
            let (_, quick) = tokio::join!(slow, quick);
            held(quick, "cell(s) at once (--max-cells-per-session)");
            if let Some(other) = other {
                other.cancel().await.ok();
            }
        }
        Control::DirectCalls => {
            assert!(!call(&client, "count", json!({}), None).await.is_error.unwrap_or(false), "{what}: one passes");
            held(said(&call(&client, "count", json!({}), None).await), "direct tool calls (--max-direct-calls)");
            if must == Lasts::Identity {
                let again = way.connect(Walker::new(version)).await;
                held(said(&call(&again, "count", json!({}), None).await), "direct tool calls (--max-direct-calls)");
                again.cancel().await.ok();
            }
        }
        Control::LogLevel => {
            let meta = match must {
                // The level travels with the request that wants it.
                Lasts::Request => {
                    let mut meta = RequestMetaObject::new();
                    meta.set_log_level(LoggingLevel::Debug);
                    Some(meta)
                }
                _ => {
                    client.peer().set_level(SetLevelRequestParams::new(LoggingLevel::Debug)).await.expect("setLevel");
                    // A later request, carrying nothing.
                    None
                }
            };
            call(&client, "run_python", json!({"code": "print(1)"}), meta).await;
            assert!(walker.heard_a_cell_start().await, "{what} did not last as long as it must ({must:?})");
        }
        Control::Approvals => {
            for _ in 0..2 {
                assert_eq!(said(&cell(&client, "print(await echo(text='a'))").await), "a\n", "{what}: approved");
            }
            assert_eq!(walker.asked(), 2, "{what}: each call is asked ({must:?}), an answer covers one call");
        }
    }
    client.cancel().await.ok();
}

/// The flags of a server with every control on (`policy`: [`POLICY`]).
fn every_control(policy: &std::path::Path) -> Vec<String> {
    [
        "--private",
        "get_env",
        "--policy",
        policy.to_str().unwrap(),
        "--keep-variables",
        "--max-cells-per-session",
        "1",
        "--expose-tools",
        "--max-direct-calls",
        "1",
    ]
    .map(str::to_string)
    .to_vec()
}

/// The policy file of the walk, written afresh.
fn policy_file(name: &str) -> std::path::PathBuf {
    let policy = log_path(name).with_extension("json");
    std::fs::write(&policy, POLICY).unwrap();
    policy
}

#[tokio::test]
async fn over_stdio_no_per_session_control_lasts_less_than_the_definition_under_any_protocol_version() {
    if !support::sandbox_available() {
        return;
    }
    let policy = policy_file("walk-stdio-policy");
    let flags = every_control(&policy);
    for version in ProtocolVersion::KNOWN_VERSIONS {
        for control in Control::ALL {
            walk(control, ClientKind::of(false, version), &Way::Stdio(flags.clone()), version).await;
        }
    }
    let _ = std::fs::remove_file(&policy);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_http_no_per_session_control_lasts_less_than_the_definition_under_any_protocol_version() {
    if !support::sandbox_available() {
        return;
    }
    let policy = policy_file("walk-http-policy");
    // One identity per version and control, so that each walk starts from
    // a clean scope.
    let versions = ProtocolVersion::KNOWN_VERSIONS;
    let tokens: Vec<Vec<Token>> = versions
        .iter()
        .map(|v| Control::ALL.iter().map(|c| token_new(&format!("walker-{v}-{c:?}"))).collect())
        .collect();
    let file = TokenFile::of(&tokens.iter().flatten().collect::<Vec<_>>());
    let flags = every_control(&policy);
    let mut http_flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    http_flags.extend(["--auth-tokens", file.arg()]);
    let (_serve, url, _log) = serve(&http_flags).await;
    for (version, tokens) in versions.iter().zip(&tokens) {
        for (control, token) in Control::ALL.iter().zip(tokens) {
            let http = Way::Http { url: url.clone(), token: token.token.clone() };
            walk(*control, ClientKind::of(true, version), &http, version).await;
        }
    }
    let _ = std::fs::remove_file(&policy);
}
