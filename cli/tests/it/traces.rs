//! Traces (`docs/tracing.md`): one cell's spans from the frontend, the
//! sandbox-runner and the bridge (three processes over a real nats-server)
//! reach an OTLP receiver as real http/protobuf export requests, decoded
//! with the official protobuf definitions (`opentelemetry-proto`), share one
//! trace and nest; no span carries the call's argument, the client's token
//! or its identity. Without the variables nothing is exported.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use code_mode_core::testing::NatsServer;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use rmcp::service::ClientServiceExt;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::auth::{TokenFile, token_new};
use crate::http::{LEGACY, run_python, spawn_http, stdout};
use crate::support::{self, connect_client};

/// A value no span may carry: the argument of the cell's one call.
const ARGUMENT: &str = "argument-value-5f3c9e";

/// One decoded span and the `service.name` of the process that sent it.
#[derive(Debug, Clone)]
struct Received {
    service: String,
    span: Span,
    /// Every attribute value of the span, its events and its resource, as
    /// text.
    values: Vec<String>,
}

/// A tiny OTLP/HTTP receiver: `POST /v1/traces` with an
/// `application/x-protobuf` body, decoded as `ExportTraceServiceRequest`.
struct Receiver {
    addr: SocketAddr,
    spans: Arc<Mutex<Vec<Received>>>,
    /// Requests that were not http/protobuf export requests.
    strange: Arc<Mutex<Vec<String>>>,
}

/// The port an OTLP/HTTP exporter sends to when no endpoint is set
/// (`http://localhost:4318`).
const OTLP_DEFAULT_PORT: u16 = 4318;

impl Receiver {
    /// A receiver on a free loopback port.
    async fn start() -> Receiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        Self::serving(vec![listener])
    }

    /// A receiver where an exporter with no endpoint set would send:
    /// port 4318 of `localhost`, on 127.0.0.1 and (where the host has it)
    /// ::1. The port is machine-wide: another test or collector holding it
    /// is waited for up to 60 s, then fails the test, since a receiver
    /// elsewhere could not see what a default exporter sends.
    async fn on_the_default_port() -> Receiver {
        let started = Instant::now();
        let v4 = loop {
            match tokio::net::TcpListener::bind(("127.0.0.1", OTLP_DEFAULT_PORT)).await {
                Ok(listener) => break listener,
                Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && started.elapsed() < Duration::from_secs(60) => {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(e) => panic!(
                    "127.0.0.1:{OTLP_DEFAULT_PORT} (the OTLP default) is needed to see that nothing is exported there, \
                     and stayed taken for {:?}: {e}",
                    started.elapsed()
                ),
            }
        };
        let mut listeners = vec![v4];
        match tokio::net::TcpListener::bind(("::1", OTLP_DEFAULT_PORT)).await {
            Ok(v6) => listeners.push(v6),
            // A host without IPv6 on loopback: localhost is 127.0.0.1 alone.
            Err(e) if e.kind() == std::io::ErrorKind::AddrNotAvailable => {}
            Err(e) => panic!("[::1]:{OTLP_DEFAULT_PORT} (the OTLP default) is taken: {e}"),
        }
        Self::serving(listeners)
    }

    fn serving(listeners: Vec<tokio::net::TcpListener>) -> Receiver {
        let addr = listeners[0].local_addr().unwrap();
        let spans = Arc::new(Mutex::new(Vec::new()));
        let strange = Arc::new(Mutex::new(Vec::new()));
        for listener in listeners {
            let (kept, odd) = (spans.clone(), strange.clone());
            tokio::spawn(async move {
                while let Ok((socket, _)) = listener.accept().await {
                    tokio::spawn(serve_connection(socket, kept.clone(), odd.clone()));
                }
            });
        }
        Receiver { addr, spans, strange }
    }

    fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn spans(&self) -> Vec<Received> {
        self.spans.lock().unwrap().clone()
    }

    /// Wait until `done` holds of the spans received, or fail saying what
    /// arrived.
    async fn until(&self, within: Duration, done: impl Fn(&[Received]) -> bool) -> Vec<Received> {
        let give_up = Instant::now() + within;
        loop {
            let spans = self.spans();
            if done(&spans) {
                return spans;
            }
            assert!(Instant::now() < give_up, "not all spans arrived within {within:?}: {:#?}", names(&spans));
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

fn names(spans: &[Received]) -> Vec<(String, String)> {
    spans.iter().map(|r| (r.service.clone(), r.span.name.clone())).collect()
}

/// Serve HTTP/1.1 requests on one connection (the exporter keeps it open).
async fn serve_connection(
    mut socket: tokio::net::TcpStream,
    spans: Arc<Mutex<Vec<Received>>>,
    strange: Arc<Mutex<Vec<String>>>,
) {
    let mut buf = Vec::new();
    loop {
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            match socket.read_buf(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
        let header = |name: &str| {
            head.lines().find_map(|l| {
                let (n, v) = l.split_once(':')?;
                n.trim().eq_ignore_ascii_case(name).then(|| v.trim().to_string())
            })
        };
        let length: usize = header("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
        while buf.len() < head_end + length {
            match socket.read_buf(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
        let body: Vec<u8> = buf.drain(..head_end + length).skip(head_end).collect();
        let line = head.lines().next().unwrap_or_default().to_string();
        let protobuf = header("content-type").as_deref() == Some("application/x-protobuf");
        let status = match ExportTraceServiceRequest::decode(body.as_slice()) {
            Ok(request) if line.starts_with("POST /v1/traces ") && protobuf => {
                spans.lock().unwrap().extend(received(request));
                "200 OK"
            }
            _ => {
                strange.lock().unwrap().push(line);
                "400 Bad Request"
            }
        };
        let answer = format!("HTTP/1.1 {status}\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n");
        if socket.write_all(answer.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// The spans of one export request, with their resource's service name.
fn received(request: ExportTraceServiceRequest) -> Vec<Received> {
    let mut out = Vec::new();
    for resource_spans in request.resource_spans {
        let resource = resource_spans.resource.map(|r| r.attributes).unwrap_or_default();
        let service = resource
            .iter()
            .find(|kv| kv.key == "service.name")
            .and_then(|kv| kv.value.as_ref())
            .map(text)
            .unwrap_or_default();
        for scope in resource_spans.scope_spans {
            for span in scope.spans {
                let mut values: Vec<String> = resource.iter().chain(&span.attributes).map(value_of).collect();
                for event in &span.events {
                    values.push(event.name.clone());
                    values.extend(event.attributes.iter().map(value_of));
                }
                for link in &span.links {
                    values.extend(link.attributes.iter().map(value_of));
                }
                if let Some(status) = &span.status {
                    values.push(status.message.clone());
                }
                out.push(Received { service: service.clone(), span, values });
            }
        }
    }
    out
}

fn value_of(kv: &KeyValue) -> String {
    format!("{}={}", kv.key, kv.value.as_ref().map(text).unwrap_or_default())
}

fn text(value: &AnyValue) -> String {
    match &value.value {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

fn attribute(r: &Received, key: &str) -> Option<String> {
    r.span.attributes.iter().find(|kv| kv.key == key).and_then(|kv| kv.value.as_ref()).map(text)
}

/// Export to `receiver` every 100 ms.
fn exporting_to(cmd: &mut tokio::process::Command, receiver: &Receiver) {
    cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint())
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .env_remove("OTEL_SERVICE_NAME")
        .env_remove("OTEL_SDK_DISABLED")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
}

/// The one span named `name` sent by `service`.
fn one<'a>(spans: &'a [Received], service: &str, name: &str) -> &'a Received {
    let found: Vec<&Received> = spans.iter().filter(|r| r.service == service && r.span.name == name).collect();
    assert_eq!(found.len(), 1, "one {name} span from {service}: {:#?}", names(spans));
    found[0]
}

/// `child` starts and ends within `parent` (times in nanoseconds since
/// the epoch; the spans of one process share its clock, and a child sent
/// by another process is allowed no slack either: the services of these
/// tests share one host's clock).
fn within(child: &Received, parent: &Received) {
    let (c, p) = (&child.span, &parent.span);
    assert!(
        c.start_time_unix_nano >= p.start_time_unix_nano && c.end_time_unix_nano <= p.end_time_unix_nano,
        "{} ({} to {}) is not within its parent {} ({} to {}): it starts {} ns after and ends {} ns after",
        c.name,
        c.start_time_unix_nano,
        c.end_time_unix_nano,
        p.name,
        p.start_time_unix_nano,
        p.end_time_unix_nano,
        c.start_time_unix_nano as i128 - p.start_time_unix_nano as i128,
        c.end_time_unix_nano as i128 - p.end_time_unix_nano as i128,
    );
}

fn has(spans: &[Received], service: &str, name: &str) -> bool {
    spans.iter().any(|r| r.service == service && r.span.name == name)
}

#[tokio::test]
async fn one_cells_spans_from_frontend_runner_and_bridge_share_a_trace_nest_and_carry_no_argument_token_or_identity() {
    if !support::sandbox_available() {
        return;
    }
    let Some((nats, users)) = NatsServer::start_secured() else { return };
    let url = nats.url();
    let receiver = Receiver::start().await;
    let mut bridge = support::service_command(&url, &users, "bridge", &["--allow", "echo"], Some(&[]));
    exporting_to(&mut bridge, &receiver);
    let _bridge = bridge.spawn().expect("the bridge starts");
    let mut runner = support::service_command(&url, &users, "sandbox-runner", &["--warm", "1"], None);
    exporting_to(&mut runner, &receiver);
    let _runner = runner.spawn().expect("the runner starts");
    let alice = token_new("alice");
    let tokens = TokenFile::of(&[&alice]);
    let http = ["--http", "127.0.0.1:0", "--auth-tokens", tokens.arg()];
    let mut frontend = support::service_command(&url, &users, "frontend", &http, None);
    exporting_to(&mut frontend, &receiver);
    let (_frontend, mcp, _log) = spawn_http(&mut frontend).await;

    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = StreamableHttpClientTransportConfig::with_uri(mcp.clone()).auth_header(alice.token.clone());
    let client = ().serve_with_lifecycle(StreamableHttpClientTransport::from_config(config), LEGACY()).await.unwrap();
    let out = stdout(&run_python(&client, &format!("print(await echo({{'text': '{ARGUMENT}'}}))")).await);
    assert!(out.contains(ARGUMENT), "the call went through: {out}");

    let (frontend, runner, bridge) = ("code-mode-frontend", "code-mode-sandbox-runner", "code-mode-bridge");
    let spans = receiver
        .until(Duration::from_secs(30), |s| {
            has(s, frontend, "cell")
                && has(s, runner, "cell.run")
                && has(s, bridge, "tool_call")
                && has(s, bridge, "wrapped_call")
        })
        .await;
    client.cancel().await.ok();
    let cell = one(&spans, frontend, "cell");
    let run = one(&spans, runner, "cell.run");
    let call = one(&spans, bridge, "tool_call");
    let wrapped = one(&spans, bridge, "wrapped_call");

    // One trace, nested frontend -> runner -> bridge -> wrapped server.
    for span in [run, call, wrapped] {
        assert_eq!(span.span.trace_id, cell.span.trace_id, "{} shares the cell's trace", span.span.name);
    }
    assert!(cell.span.parent_span_id.is_empty(), "the frontend's cell is the root");
    assert_eq!(run.span.parent_span_id, cell.span.span_id, "cell.run is the cell's child");
    assert_eq!(call.span.parent_span_id, run.span.span_id, "tool_call is cell.run's child");
    assert_eq!(wrapped.span.parent_span_id, call.span.span_id, "wrapped_call is tool_call's child");
    // Each child within its parent's time.
    within(wrapped, call);
    within(call, run);
    within(run, cell);

    // What they say: the tool, its server, the outcome.
    assert_eq!(attribute(call, "tool").as_deref(), Some("echo"));
    assert_eq!(attribute(call, "outcome").as_deref(), Some("ok"));
    assert_eq!(attribute(wrapped, "tool").as_deref(), Some("echo"));
    assert_eq!(attribute(cell, "outcome").as_deref(), Some("ok"));
    assert_eq!(attribute(run, "outcome").as_deref(), Some("ok"));
    assert_eq!(attribute(run, "cell.id"), attribute(cell, "cell.id"), "both name the same cell");

    // Nothing any process sent carries the argument, the token or the identity.
    let all = receiver.spans();
    for r in &all {
        for value in &r.values {
            for secret in [ARGUMENT, alice.token.as_str(), "alice"] {
                assert!(!value.contains(secret), "{} of {} carries {secret:?}: {value}", r.span.name, r.service);
            }
        }
    }
    let spans_named: std::collections::BTreeSet<&str> = all.iter().map(|r| r.span.name.as_str()).collect();
    assert!(
        spans_named.iter().all(|n| ["cell", "cell.run", "tool_call", "wrapped_call"].contains(n)),
        "only the documented spans are exported: {spans_named:?}"
    );
    assert!(receiver.strange.lock().unwrap().is_empty(), "every request was http/protobuf to /v1/traces");
}

#[tokio::test]
async fn serve_in_one_process_gives_one_trace_through_the_in_process_bus() {
    if !support::sandbox_available() {
        return;
    }
    let receiver = Receiver::start().await;
    let mut serve = tokio::process::Command::new(support::code_mode());
    serve.args(["serve", "--allow", "add", "--"]).arg(support::test_server());
    exporting_to(&mut serve, &receiver);
    let (client, _pid) = connect_client(serve).await;
    let out = support::stdout_of(&support::run_python(&client, "print(await add({'a': 1, 'b': 2}))").await);
    assert_eq!(out, "{\"sum\":3}\n");
    let spans = receiver
        .until(Duration::from_secs(30), |s| {
            ["cell", "cell.run", "tool_call", "wrapped_call"].iter().all(|n| has(s, "code-mode", n))
        })
        .await;
    client.cancel().await.ok();
    let (cell, run) = (one(&spans, "code-mode", "cell"), one(&spans, "code-mode", "cell.run"));
    let (call, wrapped) = (one(&spans, "code-mode", "tool_call"), one(&spans, "code-mode", "wrapped_call"));
    assert_eq!(run.span.parent_span_id, cell.span.span_id);
    assert_eq!(call.span.parent_span_id, run.span.span_id);
    assert_eq!(wrapped.span.parent_span_id, call.span.span_id);
    assert!([run, call, wrapped].iter().all(|s| s.span.trace_id == cell.span.trace_id));
    within(wrapped, call);
    within(call, run);
    within(run, cell);
}

#[tokio::test]
async fn without_an_endpoint_or_with_the_sdk_disabled_nothing_is_exported_and_nothing_complains() {
    if !support::sandbox_available() {
        return;
    }
    // On the OTLP default port: an exporter started without an endpoint
    // would send there, so "nothing exported" can fail for the unset case.
    let receiver = Receiver::on_the_default_port().await;
    // Disabled with an endpoint set: nothing goes to it.
    let mut disabled = tokio::process::Command::new(support::code_mode());
    disabled.args(["serve", "--http", "127.0.0.1:0", "--allow", "add", "--"]).arg(support::test_server());
    exporting_to(&mut disabled, &receiver);
    disabled.env("OTEL_SDK_DISABLED", "true").stdin(std::process::Stdio::null()).kill_on_drop(true);
    // No variable at all.
    let mut unset = tokio::process::Command::new(support::code_mode());
    unset.args(["serve", "--http", "127.0.0.1:0", "--allow", "add", "--"]).arg(support::test_server());
    for var in [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_TRACES_EXPORTER",
        "OTEL_SDK_DISABLED",
    ] {
        unset.env_remove(var);
    }
    // Were an exporter made anyway, it would send within the wait below.
    unset.env("OTEL_BSP_SCHEDULE_DELAY", "100");
    unset.stdin(std::process::Stdio::null()).kill_on_drop(true);
    for mut cmd in [disabled, unset] {
        let (_serve, mcp, log) = spawn_http(&mut cmd).await;
        let client = crate::http::connect(&mcp, (), LEGACY()).await;
        assert_eq!(stdout(&run_python(&client, "print(await add({'a': 2, 'b': 2}))").await), "{\"sum\":4}\n");
        client.cancel().await.ok();
        // Ten times the export delay (100 ms) an exporter would have here.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let log = log.lock().unwrap().join("\n");
        assert!(!log.to_lowercase().contains("trace"), "no word about traces: {log}");
    }
    assert!(receiver.spans().is_empty(), "nothing was exported: {:#?}", names(&receiver.spans()));
    assert!(receiver.strange.lock().unwrap().is_empty());
}

/// Every span whose parent arrived too lies within it.
fn all_within(spans: &[Received]) -> usize {
    let mut checked = 0;
    for child in spans {
        if let Some(parent) = spans.iter().find(|p| p.span.span_id == child.span.parent_span_id) {
            within(child, parent);
            checked += 1;
        }
    }
    checked
}

#[tokio::test]
async fn over_nats_every_span_of_concurrent_and_sequential_calls_lies_within_its_parent() {
    if !support::sandbox_available() {
        return;
    }
    let Some((nats, users)) = NatsServer::start_secured() else { return };
    let url = nats.url();
    let receiver = Receiver::start().await;
    let mut bridge = support::service_command(
        &url,
        &users,
        "bridge",
        &["--allow", "echo", "--allow", "add", "--audit", "nats"],
        Some(&[]),
    );
    exporting_to(&mut bridge, &receiver);
    let _bridge = bridge.spawn().expect("the bridge starts");
    let mut runner = support::service_command(&url, &users, "sandbox-runner", &["--warm", "1"], None);
    exporting_to(&mut runner, &receiver);
    let _runner = runner.spawn().expect("the runner starts");
    let mut frontend =
        support::service_command(&url, &users, "frontend", &["--http", "127.0.0.1:0", "--insecure-no-auth"], None);
    exporting_to(&mut frontend, &receiver);
    let (_frontend, mcp, _log) = spawn_http(&mut frontend).await;
    let client = crate::http::connect(&mcp, (), LEGACY()).await;
    let code = "import asyncio\n\
                await asyncio.gather(*[echo(text=str(i)) for i in range(10)])\n\
                for i in range(10):\n    await add(a=i, b=1)\nprint('done')";
    assert_eq!(stdout(&run_python(&client, code).await), "done\n");
    // The Python SDK's clients, which can be asked questions: their calls
    // go over sessions of their own with the wrapped server.
    let steps = serde_json::json!([{"op": "call", "tool": "run_python", "arguments": {"code": code}}]);
    for mode in ["legacy", "auto"] {
        let Some((results, stderr)) = support::python_sdk(&["--url", &mcp, "--mode", mode], &steps).await else {
            return;
        };
        assert_eq!(results[0]["result"]["structuredContent"]["stdout"], "done\n", "{results:?} {stderr}");
    }
    let spans = receiver
        .until(Duration::from_secs(30), |s| {
            s.iter().filter(|r| r.span.name == "wrapped_call").count() == 60
                && s.iter().filter(|r| r.span.name == "cell").count() == 3
        })
        .await;
    client.cancel().await.ok();
    assert!(all_within(&spans) >= 123, "every call's spans were checked");
}

/// Write each span on stderr (`OTEL_TRACES_EXPORTER=console`), no collector.
fn console_spans(cmd: &mut tokio::process::Command) {
    cmd.env("OTEL_TRACES_EXPORTER", "console")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env_remove("OTEL_SDK_DISABLED")
        .env_remove("OTEL_SERVICE_NAME");
}

/// Spawn `cmd` with its stderr lines kept (and passed on to ours).
fn spawn_reading_stderr(cmd: &mut tokio::process::Command) -> (tokio::process::Child, Arc<Mutex<Vec<String>>>) {
    use std::io::BufRead;
    let lines = Arc::new(Mutex::new(Vec::new()));
    let kept = lines.clone();
    let mut child = cmd.stderr(std::process::Stdio::piped()).spawn().expect("the service starts");
    let stderr = child.stderr.take().unwrap().into_owned_fd().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(std::fs::File::from(stderr)).lines().map_while(Result::ok) {
            eprintln!("service: {line}");
            kept.lock().unwrap().push(line);
        }
    });
    (child, lines)
}

/// A console span line's `key=value` words (after `span`).
fn console_line(line: &str) -> std::collections::BTreeMap<String, String> {
    let mut words = line.split(' ');
    assert_eq!(words.next(), Some("span"), "{line}");
    words
        .map(|w| {
            let (k, v) = w.split_once('=').unwrap_or_else(|| panic!("a key=value word: {w:?} in {line}"));
            (k.to_string(), v.to_string())
        })
        .collect()
}

#[tokio::test]
async fn with_the_console_exporter_each_service_writes_its_spans_on_stderr_and_the_lines_make_one_trace() {
    if !support::sandbox_available() {
        return;
    }
    let Some((nats, users)) = NatsServer::start_secured() else { return };
    let url = nats.url();
    let mut bridge = support::service_command(&url, &users, "bridge", &["--allow", "echo"], Some(&[]));
    console_spans(&mut bridge);
    let (_bridge, bridge_log) = spawn_reading_stderr(&mut bridge);
    let mut runner = support::service_command(&url, &users, "sandbox-runner", &["--warm", "1"], None);
    console_spans(&mut runner);
    let (_runner, runner_log) = spawn_reading_stderr(&mut runner);
    let mut frontend =
        support::service_command(&url, &users, "frontend", &["--http", "127.0.0.1:0", "--insecure-no-auth"], None);
    console_spans(&mut frontend);
    let (_frontend, mcp, frontend_log) = spawn_http(&mut frontend).await;
    let client = crate::http::connect(&mcp, (), LEGACY()).await;
    let out = stdout(&run_python(&client, &format!("print(await echo({{'text': '{ARGUMENT}'}}))")).await);
    assert!(out.contains(ARGUMENT), "{out}");
    client.cancel().await.ok();
    // What `grep '^span '` of the three logs shows.
    let spans = |log: &Arc<Mutex<Vec<String>>>| -> Vec<String> {
        log.lock().unwrap().iter().filter(|l| l.starts_with("span ")).cloned().collect()
    };
    let give_up = Instant::now() + Duration::from_secs(20);
    let lines = loop {
        let lines: Vec<String> = [&frontend_log, &runner_log, &bridge_log].into_iter().flat_map(spans).collect();
        if lines.len() >= 4 || Instant::now() > give_up {
            break lines;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(lines.len(), 4, "cell, cell.run, tool_call, wrapped_call: {lines:#?}");
    for line in &lines {
        assert!(!line.contains(ARGUMENT), "a span line carries the argument: {line}");
    }
    let parsed: Vec<_> = lines.iter().map(|l| console_line(l)).collect();
    let named = |name: &str| parsed.iter().find(|p| p["name"] == name).unwrap_or_else(|| panic!("{name}: {lines:#?}"));
    let (cell, run, call, wrapped) = (named("cell"), named("cell.run"), named("tool_call"), named("wrapped_call"));
    assert_eq!(cell["service"], "code-mode-frontend");
    assert_eq!(run["service"], "code-mode-sandbox-runner");
    assert_eq!((call["service"].as_str(), wrapped["service"].as_str()), ("code-mode-bridge", "code-mode-bridge"));
    assert!(parsed.iter().all(|p| p["trace"] == cell["trace"]), "one trace: {lines:#?}");
    assert_eq!(cell["parent"], "-", "the cell is the root");
    assert_eq!(run["parent"], cell["id"]);
    assert_eq!(call["parent"], run["id"]);
    assert_eq!(wrapped["parent"], call["id"]);
    assert_eq!((call["tool"].as_str(), call["outcome"].as_str()), ("echo", "ok"));
    assert!(parsed.iter().all(|p| p["duration_ms"].parse::<f64>().is_ok() && p["start_us"].parse::<u64>().is_ok()));
}
