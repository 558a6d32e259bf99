//! Attacks on code-mode's upstream login, each tried for real (the threat
//! model's rows), and its faults with the real processes slowed or killed:
//! a forged or replayed `state`, a wrong `iss`, authorization-server
//! metadata naming another issuer, Protected Resource Metadata naming
//! another resource, a redirect off the loopback interface, any token found
//! in the logs, traces, audit records, metrics, error texts or the sandbox
//! after a full run; the authorization server down or slow at login, at
//! renewal and when serve starts, the token file unreadable, the key
//! missing or wrong; an enterprise ID token of another identity provider.

use std::io::{Read as _, Write as _};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

use crate::support::{self, connect_client};
use crate::upstream::{Server, Upstream, free_port};

fn text(result: &rmcp::model::CallToolResult) -> String {
    result.content.iter().filter_map(|c| c.as_text()).map(|t| t.text.clone()).collect::<Vec<_>>().join("\n")
}

async fn call(client: &support::Client, tool: &str, arguments: Value) -> rmcp::model::CallToolResult {
    let mut params = CallToolRequestParams::new(tool.to_string());
    params.arguments = arguments.as_object().cloned();
    client.peer().call_tool(params).await.expect("the call is answered")
}

/// `url` with the query parameter `name` set to `value`.
fn with_param(url: &str, name: &str, value: &str) -> String {
    let mut parsed = reqwest::Url::parse(url).unwrap();
    let kept: Vec<(String, String)> =
        parsed.query_pairs().filter(|(k, _)| k != name).map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
    parsed.query_pairs_mut().clear().extend_pairs(kept).append_pair(name, value);
    parsed.to_string()
}

#[tokio::test]
async fn a_login_redirect_with_a_forged_state_is_ignored_and_the_real_one_still_completes_the_login() {
    let Some(up) = Upstream::start(60, &[]) else { return };
    let forged_status = Arc::new(Mutex::new(None));
    let seen = forged_status.clone();
    let (ok, said) = up
        .login_with(&[], move |real| {
            // An attacker's page sends the browser to the loopback port with
            // a code of its own and a state it made up, before the real one.
            let forged = with_param(&with_param(real, "state", "forged-by-the-attacker"), "code", "attackers-code");
            let parsed = reqwest::Url::parse(&forged).unwrap();
            let authority = format!("127.0.0.1:{}", parsed.port().unwrap());
            let (status, _, page) = support::raw_http(
                &authority,
                "GET",
                &format!("{}?{}", parsed.path(), parsed.query().unwrap()),
                &[],
                "",
            );
            assert!(!page.contains("attackers-code") && !page.contains("forged-by"), "nothing echoed: {page}");
            *seen.lock().unwrap() = Some(status);
            real.to_string()
        })
        .await;
    assert_eq!(*forged_status.lock().unwrap(), Some(400), "the forged redirect is refused");
    assert!(ok, "the real redirect completes the login: {said}");
    assert_eq!(up.counts()["authorization_code"], 1, "only the real code reached the token endpoint");
}

#[tokio::test]
async fn a_replayed_login_redirect_reaches_nothing() {
    let Some(up) = Upstream::start(60, &[]) else { return };
    let captured = Arc::new(Mutex::new(String::new()));
    let keep = captured.clone();
    let (ok, _) = up
        .login_with(&[], move |real| {
            *keep.lock().unwrap() = real.to_string();
            real.to_string()
        })
        .await;
    assert!(ok);
    let replay = captured.lock().unwrap().clone();
    let parsed = reqwest::Url::parse(&replay).unwrap();
    let answered = std::net::TcpStream::connect(("127.0.0.1", parsed.port().unwrap()));
    assert!(answered.is_err(), "the login's loopback listener is gone once it used its code");
    assert_eq!(up.counts()["authorization_code"], 1);
}

#[tokio::test]
async fn a_login_response_naming_another_issuer_is_refused_before_the_token_endpoint() {
    let Some(up) = Upstream::start(60, &[]) else { return };
    let (ok, said) = up.login_with(&[], |real| with_param(real, "iss", "https://evil.example")).await;
    assert!(!ok, "{said}");
    assert!(said.contains("RFC 9207") && said.contains("evil.example"), "{said}");
    assert_eq!(up.counts()["authorization_code"], 0, "the code never reached the token endpoint");
    assert!(up.vault().load(&up.url).await.unwrap().is_none(), "nothing stored");
}

/// A fake authorization server whose metadata names `issuer`, counting
/// every other request it gets (a client that used the metadata would
/// come to its endpoints).
fn fake_authorization_server(issuer: &'static str) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let used = Arc::new(Mutex::new(Vec::new()));
    let (seen, at) = (used.clone(), base.clone());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut buf = [0u8; 4096];
            let n = stream.read(&mut buf).unwrap_or(0);
            let head = String::from_utf8_lossy(&buf[..n]).to_string();
            let path = head.split(' ').nth(1).unwrap_or("").to_string();
            let body = if path.starts_with("/.well-known/") {
                json!({
                    "issuer": issuer,
                    "authorization_endpoint": format!("{at}/authorize"),
                    "token_endpoint": format!("{at}/token"),
                    "registration_endpoint": format!("{at}/register"),
                    "response_types_supported": ["code"],
                    "code_challenge_methods_supported": ["S256"],
                })
                .to_string()
            } else {
                seen.lock().unwrap().push(path);
                "{}".to_string()
            };
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (base, used)
}

#[tokio::test]
async fn authorization_server_metadata_naming_another_issuer_is_refused() {
    let (fake, used) = fake_authorization_server("https://attacker.example");
    let port = free_port();
    let server = Server::start(port, &["--oauth-issuer", &fake]);
    let Some(up) = Upstream::start(60, &[]) else { return };
    let (ok, said) =
        up.login_command(&["login", "--url", &server.url, "--no-browser", "--timeout", "10"], str::to_string).await;
    assert!(!ok, "{said}");
    assert!(said.contains("RFC 8414") && said.contains("attacker.example"), "{said}");
    assert!(
        used.lock().unwrap().is_empty(),
        "no endpoint of the poisoned metadata was used: {:?}",
        used.lock().unwrap()
    );
}

#[tokio::test]
async fn protected_resource_metadata_naming_another_resource_is_refused_before_any_authorization() {
    let Some(up) = Upstream::start(60, &["--oauth-resource", "https://evil.example/mcp"]) else { return };
    let (ok, said) = up.login().await;
    assert!(!ok, "{said}");
    assert!(said.contains("Protected Resource Metadata") && said.contains("evil.example"), "{said}");
    assert!(!said.contains("open this URL"), "no authorization was started: {said}");
}

#[tokio::test]
async fn a_redirect_off_the_loopback_interface_is_refused() {
    let Some(up) = Upstream::start(60, &[]) else { return };
    let config = up.state.with_extension("json");
    std::fs::write(
        &config,
        json!({"mcpServers": {"tracker": {"url": up.url, "auth": {"type": "oauth", "client_id": "c", "redirect_uri": "http://10.0.0.5:8765/callback"}}}})
            .to_string(),
    )
    .unwrap();
    let out = up.command(&["login", "--config", &config.display().to_string()]).output().await.unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(said.contains("\"tracker\"") && said.contains("auth.redirect_uri") && said.contains("loopback"), "{said}");
    let flag = r#"{"type":"oauth","redirect_uri":"https://evil.example/callback"}"#;
    let out = up.command(&["login", "--url", &up.url, "--auth", flag]).output().await.unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("loopback"), "{out:?}");
}

/// A listener that keeps every byte sent to it (an OTLP receiver that only
/// says 200), to search the exported traces.
fn byte_sink() -> (String, Arc<Mutex<Vec<u8>>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let kept = Arc::new(Mutex::new(Vec::new()));
    let sink = kept.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let sink = sink.clone();
            std::thread::spawn(move || {
                stream.set_read_timeout(Some(Duration::from_millis(500))).ok();
                let mut buf = [0u8; 65536];
                loop {
                    match stream.read(&mut buf) {
                        Ok(0) => break,
                        Ok(n) => {
                            sink.lock().unwrap().extend_from_slice(&buf[..n]);
                            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
                        }
                        Err(_) => break,
                    }
                }
            });
        }
    });
    (url, kept)
}

#[tokio::test]
async fn after_a_full_run_no_token_is_in_the_logs_traces_audit_metrics_errors_or_the_sandbox() {
    let Some(up) = Upstream::start(5, &["--require-scope", "add=mcp:write"]) else { return };
    assert!(up.login().await.0);
    let audit = up.state.with_extension("audit");
    let (otlp, exported) = byte_sink();
    let metrics = format!("127.0.0.1:{}", free_port());
    let cells = support::sandbox_available();
    let expose = if cells { "--expose-tools" } else { "--expose-tools=only" };
    let mut serve = up.command(&[
        "serve",
        "--url",
        &up.url,
        "--auth",
        "oauth",
        expose,
        "--audit",
        &audit.display().to_string(),
        "--metrics-addr",
        &metrics,
    ]);
    serve
        .env("RUST_LOG", "debug")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &otlp)
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = serve.spawn().unwrap();
    let transport = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
    let mut stderr = child.stderr.take().unwrap();
    let logged = tokio::spawn(async move {
        let mut all = String::new();
        let _ = tokio::io::AsyncReadExt::read_to_string(&mut stderr, &mut all).await;
        all
    });
    let client = rmcp::ServiceExt::serve((), transport).await.expect("serve starts");
    let mut said = Vec::new();
    said.push(text(&call(&client, "whoami", json!({})).await));
    tokio::time::sleep(Duration::from_secs(6)).await; // one renewal
    said.push(text(&call(&client, "whoami", json!({})).await));
    said.push(text(&call(&client, "add", json!({"a": 1, "b": 2})).await)); // a 403
    if cells {
        let code = "import os, json\nprint(json.dumps(dict(os.environ)))\n\
                    for root, _, files in os.walk('/', onerror=lambda e: None):\n    \
                        if root.startswith(('/proc', '/sys', '/dev', '/usr', '/lib')): continue\n    \
                        for f in files:\n        \
                            try: print(root, f, open(os.path.join(root, f), errors='replace').read()[:100000])\n        \
                            except Exception: pass\n\
                    print(await whoami())";
        said.push(text(&call(&client, "run_python", json!({"code": code})).await));
    }
    let scraped = reqwest::get(format!("http://{metrics}/metrics")).await.unwrap().text().await.unwrap();
    let grant = up.vault().load(&up.url).await.unwrap().expect("a grant");
    let tokens = grant.tokens.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    client.cancel().await.unwrap();
    let _ = child.kill().await;
    let log = logged.await.unwrap();
    let audit = std::fs::read_to_string(&audit).unwrap_or_default();
    let traces = String::from_utf8_lossy(&exported.lock().unwrap()).into_owned();
    assert!(log.contains("renewed the access token"), "a renewal happened: {log}");
    assert!(!audit.is_empty() && !traces.is_empty(), "audit and traces were written");
    let secrets: Vec<&str> = [Some(tokens.access.as_str()), tokens.refresh.as_deref()].into_iter().flatten().collect();
    for (place, content) in [("log", log.as_str()), ("audit", &audit), ("traces", &traces), ("metrics", &scraped)]
        .into_iter()
        .chain(said.iter().map(|s| ("a result or error text", s.as_str())))
    {
        for secret in &secrets {
            // Every access token of the run is a JWT with the same header:
            // its signature part is what makes it this token.
            let signature = secret.rsplit('.').next().unwrap_or(secret);
            assert!(!content.contains(signature), "a token is in the {place}");
        }
        assert!(!content.contains("Bearer ey"), "a bearer header is in the {place}");
    }
}

#[tokio::test]
async fn the_authorization_server_down_at_login_fails_it_clearly_and_quickly() {
    let Some(mut up) = Upstream::start(60, &[]) else { return };
    up.issuer.kill();
    let started = Instant::now();
    let (ok, said) = up.login().await;
    assert!(!ok, "{said}");
    assert!(started.elapsed() < Duration::from_secs(20), "it gave up within {:?}", started.elapsed());
    assert!(said.contains("discovering the authorization server failed") || said.contains(&up.issuer.url), "{said}");
}

#[tokio::test]
async fn the_authorization_server_slow_or_down_at_renewal_fails_the_call_naming_it_within_the_call_timeout() {
    let Some(mut up) = Upstream::start(5, &[]) else { return };
    assert!(up.login().await.0);
    let (client, _) =
        connect_client(up.command(&["serve", "--url", &up.url, "--auth", "oauth", "--expose-tools=only"])).await;
    assert_ne!(call(&client, "whoami", json!({})).await.is_error, Some(true));
    up.slow(60_000);
    tokio::time::sleep(Duration::from_secs(6)).await;
    let started = Instant::now();
    let slow = call(&client, "whoami", json!({})).await;
    let waited = started.elapsed();
    assert_eq!(slow.is_error, Some(true));
    assert!(text(&slow).contains("did not answer within 10 s"), "{}", text(&slow));
    assert!(waited < Duration::from_secs(25), "answered within the 30 s call timeout: {waited:?}");
    up.slow(0);
    let back = call(&client, "whoami", json!({})).await;
    assert_ne!(back.is_error, Some(true), "the login was kept: {}", text(&back));
    up.issuer.kill();
    tokio::time::sleep(Duration::from_secs(6)).await;
    let started = Instant::now();
    let down = call(&client, "whoami", json!({})).await;
    assert_eq!(down.is_error, Some(true));
    assert!(text(&down).contains("authorization server"), "{}", text(&down));
    assert!(!text(&down).contains("needs a login"), "a server that is down is not a login withdrawn");
    assert!(started.elapsed() < Duration::from_secs(25), "{:?}", started.elapsed());
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn an_unreadable_token_file_stops_startup_naming_it() {
    let Some(up) = Upstream::start(60, &[]) else { return };
    assert!(up.login().await.0);
    let file = up.vault().place(&up.url);
    std::fs::remove_file(&file).unwrap();
    std::fs::create_dir(&file).unwrap(); // read fails, as root too
    let out = up.command(&["describe", "--url", &up.url, "--auth", "oauth"]).output().await.unwrap();
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains(&file) && said.contains("cannot be read"), "{said}");
}

#[tokio::test]
async fn a_missing_or_wrong_token_key_stops_startup_and_never_falls_back_to_plaintext() {
    let Some(up) = Upstream::start(60, &[]) else { return };
    assert!(up.login().await.0);
    let mut missing = up.command(&["describe", "--url", &up.url, "--auth", "oauth"]);
    missing.env_remove("CODE_MODE_TOKEN_KEY");
    let out = missing.output().await.unwrap();
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("no key to decrypt") && said.contains("CODE_MODE_TOKEN_KEY"), "{said}");
    let mut wrong = up.command(&["describe", "--url", &up.url, "--auth", "oauth"]);
    wrong.env("CODE_MODE_TOKEN_KEY", "11".repeat(32));
    let out = wrong.output().await.unwrap();
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("cannot be decrypted with the key from CODE_MODE_TOKEN_KEY"), "{said}");
}

#[tokio::test]
async fn a_clients_own_token_to_code_mode_is_never_forwarded_upstream() {
    let Some(up) = Upstream::start(60, &[]) else { return };
    assert!(up.login().await.0);
    let alice = crate::auth::token_new("alice");
    let tokens = crate::auth::TokenFile::of(&[&alice]);
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut serve = up.command(&[
        "serve",
        "--http",
        &listen,
        "--auth-tokens",
        tokens.arg(),
        "--url",
        &up.url,
        // One shared account (with authenticated clients an oauth block is
        // each identity's own by default, issue 41).
        "--auth",
        r#"{"type": "oauth", "per": "deployment"}"#,
        "--expose-tools=only",
    ]);
    let (_child, url, _log) = crate::http::spawn_http(&mut serve).await;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(url)
        .auth_header(alice.token.clone());
    let transport = rmcp::transport::StreamableHttpClientTransport::from_config(config);
    let client = rmcp::ServiceExt::serve((), transport).await.expect("the client connects");
    // The tools say they act as one shared account (issue 41).
    let tools = client.peer().list_all_tools().await.unwrap();
    let tool = tools.iter().find(|t| t.name == "get_header").expect("get_header is listed");
    let description = tool.description.as_deref().unwrap_or_default();
    assert!(description.contains("one shared account"), "{description}");
    let seen = call(&client, "get_header", json!({"name": "authorization"})).await;
    let header = text(&seen);
    assert!(!header.contains(&alice.token), "the client's token reached the upstream: {header}");
    let grant = up.vault().load(&up.url).await.unwrap().unwrap();
    assert_eq!(header, format!("Bearer {}", grant.tokens.unwrap().access), "code-mode's own login went instead");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn the_authorization_server_slow_at_login_fails_it_naming_the_authorization_server_and_nothing_hangs() {
    let Some(up) = Upstream::start(60, &[]) else { return };
    up.slow(120_000);
    let started = Instant::now();
    let (ok, said) = up.login().await;
    let waited = started.elapsed();
    assert!(!ok, "{said}");
    assert!(waited < Duration::from_secs(60), "it gave up within {waited:?}: {said}");
    let named = format!("the code exchange at the authorization server {}", up.issuer.url);
    assert!(said.contains(&named), "the error names the authorization server: {said}");
    assert_eq!(said.matches("open this URL").count(), 1, "one login, not another way after it failed: {said}");
    assert!(up.vault().load(&up.url).await.unwrap().is_none(), "no grant stored");
}

#[tokio::test]
async fn the_authorization_server_slow_or_down_when_serve_starts_with_an_expired_token_stops_startup_naming_it_within_seconds()
 {
    let Some(mut up) = Upstream::start(5, &[]) else { return };
    assert!(up.login().await.0);
    let config = up.state.with_extension("json");
    std::fs::write(
        &config,
        json!({"mcpServers": {
            "local": {"command": support::test_server(), "allow": ["add"]},
            "tracker": {"url": up.url, "auth": {"type": "oauth"}},
        }})
        .to_string(),
    )
    .unwrap();
    let config = config.display().to_string();
    tokio::time::sleep(Duration::from_secs(6)).await; // the access token expired
    for fault in ["slow", "down"] {
        if fault == "slow" {
            up.slow(120_000);
        } else {
            up.issuer.kill();
        }
        let started = Instant::now();
        let mut serve = up.command(&["serve", "--config", &config, "--expose-tools=only"]);
        serve.stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped());
        let out = tokio::time::timeout(Duration::from_secs(45), serve.stderr(std::process::Stdio::piped()).output())
            .await
            .unwrap_or_else(|_| panic!("{fault}: serve hung at startup"))
            .unwrap();
        let waited = started.elapsed();
        assert!(!out.status.success(), "{fault}");
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(
            said.contains("\"tracker\"") && said.contains(&format!("the authorization server {}", up.issuer.url)),
            "{fault}: names the server and its authorization server: {said}"
        );
        assert!(waited < Duration::from_secs(30), "{fault}: stopped within {waited:?}");
        assert!(up.vault().load(&up.url).await.unwrap().unwrap().login_needed.is_none(), "{fault}: the login is kept");
    }
}

/// `code-mode describe --url` of a server whose `enterprise` block gives
/// `id_token` (a JWT of `claims`) or, with `None`, an ID token file that
/// does not exist: what it said on stderr (it must fail).
async fn describe_enterprise(claims: Option<Value>) -> String {
    use base64::Engine as _;
    let state = std::env::temp_dir().join(format!("cm-enterprise-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&state).unwrap();
    let mut block = json!({"type": "enterprise", "client_id": "cm", "idp_issuer": "https://login.example",
        "idp_client_id": "cm-idp"});
    match claims {
        Some(claims) => {
            let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
            block["id_token"] =
                json!(format!("{}.{}.c2ln", b64.encode(br#"{"alg":"ES256"}"#), b64.encode(claims.to_string())));
        }
        None => block["id_token_file"] = json!(state.join("no-such-id-token.jwt").display().to_string()),
    }
    // Nothing listens there: every check below happens before a request.
    let url = format!("http://127.0.0.1:{}/mcp", free_port());
    let out = tokio::process::Command::new(support::code_mode())
        .args(["describe", "--url", &url, "--auth", &block.to_string()])
        .env("CODE_MODE_STATE_DIR", &state)
        .env("CODE_MODE_TOKEN_KEY", "22".repeat(32))
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .unwrap();
    let _ = std::fs::remove_dir_all(&state);
    assert!(!out.status.success());
    String::from_utf8_lossy(&out.stderr).to_string()
}

#[tokio::test]
async fn an_enterprise_id_token_from_another_identity_provider_or_expired_is_never_sent_and_the_error_names_the_key() {
    let said = describe_enterprise(Some(json!({"iss": "https://other-idp.example", "exp": 4_000_000_000u64}))).await;
    assert!(said.contains("enterprise-managed authorization failed") && said.contains("other-idp.example"), "{said}");
    assert!(said.contains("not by the identity provider https://login.example (auth.idp_issuer)"), "{said}");
    let said = describe_enterprise(Some(json!({"iss": "https://login.example", "exp": 1_000_000_000u64}))).await;
    assert!(said.contains("the ID token expired") && said.contains("auth.id_token"), "{said}");
    let said = describe_enterprise(None).await;
    assert!(said.contains("no-such-id-token.jwt (auth.id_token_file) cannot be read"), "{said}");
}
