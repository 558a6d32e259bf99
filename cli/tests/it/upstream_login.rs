//! code-mode as an OAuth 2.1 client of a remote MCP server, against a real
//! authorization server (oidc-provider: 5 s access tokens, refresh tokens,
//! open registration) and a real resource server (the test server checking
//! every token, with `whoami`): `code-mode login`, then `serve` over stdio
//! driven by both of the official Python SDK's clients; renewal across
//! expiries; a revoked grant; a scope step-up; a server nobody logged in to;
//! a server without an `auth` block that asks for one; `login --status` and
//! `logout`.

use std::time::Duration;

use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

use crate::support::{self, connect_client};
use crate::upstream::{Server, Upstream, free_port};

/// Whether the tools `client` lists satisfy `check` within `within`.
async fn listed_within(client: &support::Client, within: Duration, check: impl Fn(&[String]) -> bool) -> bool {
    let give_up = std::time::Instant::now() + within;
    loop {
        if let Ok(tools) = client.peer().list_all_tools().await {
            let names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
            if check(&names) {
                return true;
            }
        }
        if std::time::Instant::now() >= give_up {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The text of a tool's result.
fn text(result: &rmcp::model::CallToolResult) -> String {
    result.content.iter().filter_map(|c| c.as_text()).map(|t| t.text.clone()).collect::<Vec<_>>().join("\n")
}

async fn call(client: &support::Client, tool: &str, arguments: Value) -> rmcp::model::CallToolResult {
    let mut params = CallToolRequestParams::new(tool.to_string());
    params.arguments = arguments.as_object().cloned();
    client.peer().call_tool(params).await.expect("the call is answered")
}

#[tokio::test]
async fn after_a_login_both_python_clients_reach_the_server_directly_and_from_a_cell_and_the_token_renews_across_five_expiries()
 {
    let Some(up) = Upstream::start(5, &[]) else { return };
    let (ok, said) = up.login().await;
    assert!(ok, "the login succeeds: {said}");
    assert!(said.contains("logged in to") && said.contains("mcp:read"), "{said}");
    let cells = support::sandbox_available();
    let mut steps = vec![json!({"op": "call", "tool": "whoami", "arguments": {}})];
    if cells {
        steps.push(json!({"op": "call", "tool": "run_python", "arguments": {"code": "print(await whoami())"}}));
    }
    for _ in 0..5 {
        steps.push(json!({"op": "sleep", "seconds": 5.5}));
        steps.push(json!({"op": "call", "tool": "whoami", "arguments": {}}));
    }
    let steps = Value::Array(steps);
    let mut serve = up.env_prefix();
    serve.extend(["serve", "--url", &up.url, "--auth", "oauth", "--expose-tools"].map(String::from));
    for api in ["client", "session"] {
        let refreshed_before = up.counts()["refresh_token"].as_u64().unwrap();
        let mut args: Vec<String> = vec!["--api".into(), api.into(), "--stdio".into()];
        args.extend(serve.iter().cloned());
        args.push("--".into());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let Some((results, stderr)) = support::python_sdk(&args, &steps).await else { return };
        let mut issued = Vec::new();
        for result in &results {
            let result = &result["result"];
            assert_ne!(result["isError"], true, "{api}: {result} {stderr}");
            let structured = &result["structuredContent"];
            if structured.get("sub").is_some() {
                assert_eq!(structured["sub"], "alice", "{api}: {result}");
                issued.push(structured["iat"].as_u64().unwrap());
            }
        }
        assert_eq!(issued.len(), 6, "{api}: six direct calls: {results:?}");
        let mut distinct = issued.clone();
        distinct.dedup();
        assert!(distinct.len() >= 6, "{api}: a new access token after each expiry, no person asked: {issued:?}");
        if cells {
            let cell = results[1]["result"]["structuredContent"]["stdout"].as_str().unwrap_or_default().to_string();
            assert!(cell.contains("\"sub\":\"alice\""), "{api}: the cell reached the server: {:?}", results[1]);
        }
        let refreshed = up.counts()["refresh_token"].as_u64().unwrap() - refreshed_before;
        assert!(refreshed >= 5, "{api}: renewed with the refresh token at least five times: {refreshed}");
    }
    assert_eq!(up.counts()["authorization_code"], 1, "one login, the rest renewals");
}

#[tokio::test]
async fn a_revoked_grant_makes_the_server_ask_for_a_login_and_a_new_login_brings_it_back_to_the_running_serve() {
    let Some(up) = Upstream::start(5, &[]) else { return };
    assert!(up.login().await.0);
    let (client, _) =
        connect_client(up.command(&["serve", "--url", &up.url, "--auth", "oauth", "--expose-tools=only"])).await;
    let first = call(&client, "whoami", json!({})).await;
    assert_ne!(first.is_error, Some(true), "{}", text(&first));
    up.revoke();
    tokio::time::sleep(Duration::from_secs(6)).await;
    let refused = call(&client, "whoami", json!({})).await;
    assert_eq!(refused.is_error, Some(true));
    let why = text(&refused);
    assert!(
        why.contains("needs a login") && why.contains(&format!("code-mode login --url {}", up.url)),
        "the refusal names the login: {why}"
    );
    // The server leaves the list until someone logs in again.
    assert!(
        listed_within(&client, Duration::from_secs(10), |names| names.is_empty()).await,
        "its tools are gone while it needs a login"
    );
    let (ok, said) = up.login().await;
    assert!(ok, "{said}");
    assert!(
        listed_within(&client, Duration::from_secs(15), |names| names.contains(&"whoami".to_string())).await,
        "the running serve picks the new login up"
    );
    let back = call(&client, "whoami", json!({})).await;
    assert_ne!(back.is_error, Some(true), "{}", text(&back));
    assert_eq!(up.counts()["authorization_code"], 2);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_403_insufficient_scope_names_the_scope_and_the_next_login_asks_for_it_too() {
    let Some(up) = Upstream::start(60, &["--require-scope", "add=mcp:write"]) else { return };
    assert!(up.login().await.0);
    let (client, _) =
        connect_client(up.command(&["serve", "--url", &up.url, "--auth", "oauth", "--expose-tools=only"])).await;
    let refused = call(&client, "add", json!({"a": 1, "b": 2})).await;
    let why = text(&refused);
    assert!(
        refused.is_error == Some(true)
            && why.contains("needs more access (scope mcp:write)")
            && why.contains("code-mode login"),
        "{why}"
    );
    let status = up.command(&["login", "--status", "--url", &up.url]).output().await.unwrap();
    let listed = String::from_utf8_lossy(&status.stdout);
    assert!(listed.contains("wants scope mcp:write too"), "{listed}");
    let (ok, said) = up.login().await;
    assert!(ok && said.contains("mcp:read mcp:write"), "the step-up login asks for both: {said}");
    let added = call(&client, "add", json!({"a": 1, "b": 2})).await;
    assert_ne!(added.is_error, Some(true), "{}", text(&added));
    let whoami = call(&client, "whoami", json!({})).await;
    assert_eq!(whoami.structured_content.unwrap()["scope"], "mcp:read mcp:write");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn serve_with_a_server_nobody_logged_in_to_serves_the_others_and_names_the_login_on_stderr_in_the_description_and_in_calls()
 {
    let Some(up) = Upstream::start(60, &[]) else { return };
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
    let login = format!("code-mode login --config {config} tracker");
    let described = up.command(&["describe", "--config", &config]).output().await.unwrap();
    assert!(described.status.success(), "{}", String::from_utf8_lossy(&described.stderr));
    let description = String::from_utf8_lossy(&described.stdout);
    assert!(
        description.contains("\"tracker\" cannot be used now") && description.contains(&login),
        "the description says which server and how to log in: {description}"
    );
    assert!(description.contains("local__add"), "{description}");
    let mut serve = up.command(&["serve", "--config", &config, "--expose-tools=only"]);
    serve.stderr(std::process::Stdio::piped());
    let mut child = serve.stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped()).spawn().unwrap();
    let transport = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
    let stderr = child.stderr.take().unwrap();
    let client = rmcp::ServiceExt::serve((), transport).await.expect("serve starts");
    let tools = client.peer().list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["local__add"], "the other server serves");
    let added = call(&client, "local__add", json!({"a": 1, "b": 2})).await;
    assert_ne!(added.is_error, Some(true));
    let refused = call(&client, "tracker__whoami", json!({})).await;
    assert_eq!(refused.is_error, Some(true));
    assert!(text(&refused).contains(&login), "{}", text(&refused));
    client.cancel().await.unwrap();
    let _ = child.kill().await;
    let mut said = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut tokio::io::BufReader::new(stderr), &mut said).await.unwrap();
    assert!(said.contains("tracker needs a login") && said.contains(&login), "stderr says so: {said}");
}

#[tokio::test]
async fn an_entry_without_auth_whose_server_asks_for_a_login_stops_startup_naming_the_server_and_the_auth_block() {
    let Some(up) = Upstream::start(60, &[]) else { return };
    let config = up.state.with_extension("json");
    std::fs::write(&config, json!({"mcpServers": {"tracker": {"url": up.url}}}).to_string()).unwrap();
    let out = up.command(&["describe", "--config", &config.display().to_string()]).output().await.unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let said = stderr.lines().find(|l| l.starts_with("code-mode:")).unwrap_or_default();
    for wanted in ["\"tracker\"", "401", "OAuth login", "oauth-protected-resource", "\"auth\"", "code-mode login"] {
        assert!(said.contains(wanted), "{wanted:?} in: {stderr}");
    }
    assert!(!said.contains("TransportClosed") && !said.contains("Transport channel closed"), "{said}");
}

#[tokio::test]
async fn login_status_lists_scopes_and_expiry_and_never_a_token_and_logout_forgets_the_login() {
    let Some(up) = Upstream::start(60, &[]) else { return };
    let status = up.command(&["login", "--status", "--url", &up.url]).output().await.unwrap();
    assert!(String::from_utf8_lossy(&status.stdout).contains("not logged in"), "{status:?}");
    assert!(up.login().await.0);
    let grant = up.vault().load(&up.url).await.unwrap().expect("a stored grant");
    let tokens = grant.tokens.clone().unwrap();
    for json_flag in [false, true] {
        let mut args = vec!["login", "--status", "--url", up.url.as_str()];
        if json_flag {
            args.push("--json");
        }
        let out = up.command(&args).output().await.unwrap();
        let listed = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
        assert!(!listed.contains(&tokens.access), "no access token in: {listed}");
        assert!(!listed.contains(tokens.refresh.as_deref().unwrap()), "no refresh token in: {listed}");
        if json_flag {
            let line: Value = serde_json::from_str(listed.lines().next().unwrap()).unwrap();
            assert_eq!(line["state"], "logged_in");
            assert_eq!(line["scopes"], json!(["mcp:read"]));
            assert!(line["expires_in"].as_u64().unwrap() <= 60);
            assert_eq!(line["renewable"], true);
            assert_eq!(line["issuer"], up.issuer.url.as_str());
        } else {
            assert!(listed.contains("logged in (oauth)") && listed.contains("expires in"), "{listed}");
        }
    }
    let out = up.command(&["logout", "--url", &up.url]).output().await.unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("logged out"), "{out:?}");
    assert!(up.vault().load(&up.url).await.unwrap().is_none());
}

#[tokio::test]
async fn stored_tokens_are_encrypted_in_a_private_file_and_a_token_for_one_server_is_never_sent_to_another() {
    let Some(up) = Upstream::start(60, &[]) else { return };
    assert!(up.login().await.0);
    let grant = up.vault().load(&up.url).await.unwrap().expect("a stored grant");
    let tokens = grant.tokens.unwrap();
    let dir = up.state.join("upstream-tokens");
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600, "{path:?}");
        let bytes = std::fs::read_to_string(&path).unwrap();
        assert!(!bytes.contains(&tokens.access) && !bytes.contains(tokens.refresh.as_deref().unwrap()));
        assert!(!bytes.contains(&up.url), "not even the server's URL is in the clear");
    }
    // Server B takes tokens meant for A (it does not check the audience),
    // so only code-mode stands between A's token and B.
    let port = free_port();
    let b = Server::start(port, &["--oauth-issuer", &up.issuer.url, "--oauth-audience", &up.url]);
    let (client, _) =
        connect_client(up.command(&["serve", "--url", &b.url, "--auth", "oauth", "--expose-tools=only"])).await;
    assert!(client.peer().list_all_tools().await.unwrap().is_empty(), "B needs a login of its own");
    let refused = call(&client, "whoami", json!({})).await;
    assert!(text(&refused).contains("needs a login"), "{}", text(&refused));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_person_logs_in_on_the_authorization_servers_own_pages_in_a_real_browser() {
    use tokio::io::AsyncBufReadExt as _;
    let Some(python) = crate::console_browser::browser_available() else { return };
    let Some(up) = Upstream::start_with(60, &["--pages"], &[]) else { return };
    let script = code_mode_core::testing::peers::workspace_root().join("testing/peers/oauth_browser_login.py");
    let mut login = up
        .command(&["login", "--url", &up.url, "--no-browser", "--timeout", "90"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("code-mode login starts");
    let mut lines = tokio::io::BufReader::new(login.stderr.take().unwrap()).lines();
    let (mut said, mut seen) = (String::new(), None);
    while let Some(line) = lines.next_line().await.unwrap() {
        said.push_str(&line);
        said.push('\n');
        if line.starts_with("http://") && seen.is_none() {
            // The person: chromium opens the printed URL, signs in as dora
            // on the authorization server's page and consents on the next.
            let out = tokio::process::Command::new(&python)
                .arg(&script)
                .args(["--url", &line, "--name", "dora"])
                .kill_on_drop(true)
                .output()
                .await
                .expect("the browser script runs");
            let stdout = String::from_utf8_lossy(&out.stdout);
            seen = Some(serde_json::from_str::<Value>(stdout.trim()).unwrap_or_else(|e| {
                panic!("the browser's report ({e}): {stdout} {}", String::from_utf8_lossy(&out.stderr))
            }));
        }
    }
    let status = login.wait().await.unwrap();
    let seen = seen.expect("the login printed an authorization URL");
    assert!(status.success(), "the login succeeds: {said} {seen}");
    assert_eq!(seen["titles"].as_array().map(Vec::len), Some(3), "sign-in, consent, code-mode's page: {seen}");
    let last = seen["last"].as_str().unwrap();
    assert!(last.starts_with("http://127.0.0.1:") && last.ends_with("/callback"), "{seen}");
    assert!(seen["text"].as_str().unwrap().contains("code-mode has the login"), "{seen}");
    // The token is dora's, the name typed on the page.
    let (client, _) =
        connect_client(up.command(&["serve", "--url", &up.url, "--auth", "oauth", "--expose-tools=only"])).await;
    let whoami = call(&client, "whoami", json!({})).await;
    assert_ne!(whoami.is_error, Some(true), "{}", text(&whoami));
    let claims = whoami.structured_content.unwrap();
    assert_eq!(claims["sub"], "dora", "{claims}");
    assert_eq!(claims["scope"], "mcp:read", "{claims}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn over_nats_the_login_lives_in_the_state_store_the_split_bridge_uses_it_and_a_wrong_key_stops_it_naming_the_store()
 {
    let Some(up) = Upstream::start(60, &[]) else { return };
    let Some((nats, users)) = code_mode_core::testing::NatsServer::start_secured() else { return };
    let nats_url = nats.url();
    let as_bridge = [("CODE_MODE_NATS_USER", "bridge"), ("CODE_MODE_NATS_PASSWORD", users.password("bridge"))];
    let login = ["login", "--nats", &nats_url, "--url", &up.url, "--no-browser", "--timeout", "30"];
    let (ok, said) = up.login_command_env(&login, &as_bridge, str::to_string).await;
    assert!(ok, "the login succeeds: {said}");
    assert!(up.vault().load(&up.url).await.unwrap().is_none(), "nothing in the state folder's files");
    let bridge_args = ["--url", up.url.as_str(), "--auth", "oauth"];
    let bridge = |key: &str| {
        let mut command = support::service_command(&nats_url, &users, "bridge", &bridge_args, None);
        command.env("CODE_MODE_TOKEN_KEY", key).env("CODE_MODE_STATE_DIR", &up.state);
        command
    };
    let mut first = bridge(&up.key);
    let _bridge = first.spawn().expect("the bridge starts");
    let mut frontend = tokio::process::Command::new(support::code_mode());
    frontend.args(["frontend", "--nats", &nats_url, "--expose-tools=only"]);
    frontend.env("CODE_MODE_NATS_USER", "frontend").env("CODE_MODE_NATS_PASSWORD", users.password("frontend"));
    let (client, _) = connect_client(frontend).await;
    assert!(
        listed_within(&client, Duration::from_secs(30), |names| names.contains(&"whoami".to_string())).await,
        "the split bridge lists the server with the stored login"
    );
    let whoami = call(&client, "whoami", json!({})).await;
    assert_ne!(whoami.is_error, Some(true), "{}", text(&whoami));
    assert_eq!(whoami.structured_content.unwrap()["sub"], "alice");
    client.cancel().await.unwrap();
    // Another key than the login's: the bridge stops, naming the record's
    // place in the store and the key's source; no plaintext fallback.
    let mut wrong = bridge(&"11".repeat(32));
    let out = tokio::time::timeout(Duration::from_secs(60), wrong.stderr(std::process::Stdio::piped()).output())
        .await
        .expect("the bridge stops at once")
        .unwrap();
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("the state store key")
            && said.contains("cannot be decrypted with the key from CODE_MODE_TOKEN_KEY"),
        "{said}"
    );
}
