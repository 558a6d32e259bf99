//! One meaning of a session for every client (docs/sessions.md), driven
//! by the official Python SDK as users run it: its high-level `mcp.Client`
//! at its defaults (which adopts the stateless 2026-07-28 protocol), and
//! its lower-level `ClientSession` (the 2025-11-25 handshake), over stdio
//! and over HTTP, against the real binary, sandbox and test server; and
//! over NATS with two frontend replicas.
//!
//! Over stdio the connection is the session; over HTTP a stateless client's
//! taint, `grant` counts and direct calls live in its identity's scope, and
//! its variables behind the handle a kept cell's result carries.

use std::time::Duration;

use serde_json::{Value, json};

use crate::auth::{TokenFile, bearer, serve, token_new};
use crate::http::spawn_http;
use crate::support::{self, log_path, python_sdk};

/// Call `add`; print its sum, or `refused:` and the ToolError.
const TRY_ADD: &str = "try:\n    print(await add(a=1, b=2))\nexcept ToolError as e:\n    print('refused:', e)";

/// A `run_python` step of the SDK driver.
fn cell(code: &str) -> Value {
    json!({"op": "call", "tool": "run_python", "arguments": {"code": code}})
}

/// The same, passing back the handle the last result carried.
fn cell_in_last_session(code: &str) -> Value {
    json!({"op": "call", "tool": "run_python", "arguments": {"code": code}, "session_from_last": true})
}

/// The structured content of one step's result, or the test fails.
fn content(step: &Value) -> &Value {
    assert!(step.get("error").is_none(), "the step failed: {step}");
    &step["result"]["structuredContent"]
}

/// What a step's cell printed (its report must have no error).
fn printed(step: &Value) -> String {
    let content = content(step);
    assert!(content["error"].is_null(), "the cell failed: {step}");
    content["stdout"].as_str().expect("stdout").to_string()
}

/// The text of an error result (a refused `run_python` call: no cell ran,
/// so there is no report).
fn refused(step: &Value) -> String {
    let result = &step["result"];
    assert_eq!(result["isError"], true, "an error result: {step}");
    assert!(result.get("structuredContent").is_none(), "no cell ran, so no report: {step}");
    result["content"][0]["text"].as_str().expect("a text block").to_string()
}

/// Run the SDK with `args` over `steps`; its results (`None`: the SDK is
/// missing on a developer's machine).
async fn sdk(args: &[&str], steps: &[Value]) -> Option<Vec<Value>> {
    Some(python_sdk(args, &Value::Array(steps.to_vec())).await?.0)
}

/// `--url URL --header 'Authorization: Bearer ...'` for `token`, and the
/// extra arguments.
fn as_client(url: &str, header: &str, extra: &[&str]) -> Vec<String> {
    let mut args = vec!["--url".to_string(), url.to_string(), "--header".into(), format!("Authorization: {header}")];
    args.extend(extra.iter().map(|a| a.to_string()));
    args
}

fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

#[tokio::test]
async fn over_http_the_sdks_default_client_is_refused_a_non_private_tool_in_any_later_call_after_a_private_one() {
    if !support::sandbox_available() {
        return;
    }
    let (alice, bob) = (token_new("alice"), token_new("bob"));
    let tokens = TokenFile::of(&[&alice, &bob]);
    let (_serve, url, _log) = serve(&["--auth-tokens", tokens.arg(), "--private", "echo"]).await;
    let (alice_auth, bob_auth) = (bearer(&alice), bearer(&bob));

    // mcp.Client at its defaults: two run_python calls, two stateless requests.
    let alice_args = as_client(&url, &alice_auth, &[]);
    let steps = [cell("print(await echo(text='secret'))"), cell(TRY_ADD)];
    let Some(ran) = sdk(&strs(&alice_args), &steps).await else { return };
    assert_eq!(printed(&ran[0]), "secret\n");
    let second = printed(&ran[1]);
    assert!(second.starts_with("refused: add: refused by the private-data rule"), "{second}");
    assert!(second.contains("lasts across all of its runs until 1 h pass without a call"), "{second}");

    // A new client process of the same identity: still its scope.
    let Some(later) = sdk(&strs(&alice_args), &[cell(TRY_ADD)]).await else { return };
    assert!(printed(&later[0]).starts_with("refused: add:"), "{later:?}");
    // Another identity has a scope of its own.
    let Some(bobs) = sdk(&strs(&as_client(&url, &bob_auth, &[])), &[cell(TRY_ADD)]).await else { return };
    assert_eq!(printed(&bobs[0]), "{\"sum\":3}\n");

    // ClientSession (2025-11-25) keeps its session's meaning: tainted
    // within it, a new session starts clean.
    let bob_session = as_client(&url, &bob_auth, &["--api", "session"]);
    let Some(session) = sdk(&strs(&bob_session), &[cell("print(await echo(text='s'))"), cell(TRY_ADD)]).await else {
        return;
    };
    assert!(printed(&session[1]).contains("The rule lasts for the rest of the client session"), "{session:?}");
    let Some(fresh) = sdk(&strs(&bob_session), &[cell(TRY_ADD)]).await else { return };
    assert_eq!(printed(&fresh[0]), "{\"sum\":3}\n", "a new session of the older protocol starts clean");
}

#[tokio::test]
async fn without_authentication_every_stateless_client_of_the_process_shares_one_scope() {
    if !support::sandbox_available() {
        return;
    }
    let (_serve, url, _log) = serve(&["--private", "echo"]).await;
    let Some(first) = sdk(&["--url", &url], &[cell("print(await echo(text='secret'))")]).await else { return };
    assert_eq!(printed(&first[0]), "secret\n");
    // Another client, nothing in common with the first but the server.
    let Some(other) = sdk(&["--url", &url], &[cell(TRY_ADD)]).await else { return };
    assert!(printed(&other[0]).starts_with("refused: add: refused by the private-data rule"), "{other:?}");
}

#[tokio::test]
async fn a_grant_limit_of_three_holds_across_five_stateless_calls_and_across_five_calls_of_a_session() {
    if !support::sandbox_available() {
        return;
    }
    crate::policy::inside_one_window(3600, 60);
    let policy = log_path("grant-3").with_extension("policy.json");
    std::fs::write(
        &policy,
        r#"{"version":"1","default":"allow","tools":{"add":{"limits":[{"counter":"adds","window":"hour","max":3,"scope":"grant"}]}}}"#,
    )
    .unwrap();
    let alice = token_new("alice");
    let tokens = TokenFile::of(&[&alice]);
    let (_serve, url, _log) = serve(&["--auth-tokens", tokens.arg(), "--policy", policy.to_str().unwrap()]).await;
    let auth = bearer(&alice);
    let five: Vec<Value> = (0..5).map(|_| cell(TRY_ADD)).collect();
    let count = |ran: &[Value]| ran.iter().filter(|r| printed(r) == "{\"sum\":3}\n").count();
    for api in ["client", "session"] {
        let Some(ran) = sdk(&strs(&as_client(&url, &auth, &["--api", api])), &five).await else { return };
        let refused = ran.iter().filter(|r| printed(r).contains("rate limit adds: at most 3 calls per hour")).count();
        match api {
            // The stateless client's count is its identity's: its three.
            "client" => assert_eq!((count(&ran), refused), (3, 2), "{ran:?}"),
            // A session of the older protocol counts apart: three more.
            _ => assert_eq!((count(&ran), refused), (3, 2), "{ran:?}"),
        }
    }
    // And a second stateless client of alice finds her count spent.
    let Some(again) = sdk(&strs(&as_client(&url, &auth, &[])), &[cell(TRY_ADD)]).await else { return };
    assert_eq!(count(&again), 0, "{again:?}");
    let _ = std::fs::remove_file(&policy);
}

#[tokio::test]
async fn over_stdio_the_sdks_default_client_keeps_its_variables_and_its_taint_across_calls() {
    if !support::sandbox_available() {
        return;
    }
    let serve = [
        support::code_mode().display().to_string(),
        "serve".into(),
        "--keep-variables".into(),
        "--private".into(),
        "echo".into(),
        "--".into(),
        support::test_server().display().to_string(),
    ];
    let steps = [
        json!({"op": "list_tools"}),
        cell("x = 41"),
        cell("print(x + 1)"),
        cell("print(await echo(text='s'))"),
        cell(TRY_ADD),
    ];
    for api in ["client", "session"] {
        let mut args = vec!["--api", api, "--stdio"];
        args.extend(serve.iter().map(String::as_str));
        args.push("--");
        let Some(ran) = sdk(&args, &steps).await else { return };
        let description = ran[0]["result"]["tools"][0]["description"].as_str().unwrap();
        assert!(description.contains("persist between the runs of this session"), "{api}: {description}");
        assert_eq!(printed(&ran[2]), "42\n", "{api}: the connection is the session");
        assert!(content(&ran[2]).get("session").is_none(), "{api}: no handle over stdio");
        assert!(printed(&ran[4]).starts_with("refused: add: refused by the private-data rule"), "{api}: {ran:?}");
    }
}

#[tokio::test]
async fn over_http_a_stateless_client_keeps_its_variables_through_the_handle_and_a_bad_handle_never_runs_fresh() {
    if !support::sandbox_available() {
        return;
    }
    let (alice, bob) = (token_new("alice"), token_new("bob"));
    let tokens = TokenFile::of(&[&alice, &bob]);
    let args = ["--auth-tokens", tokens.arg(), "--keep-variables", "--session-idle", "4", "--max-handles", "2"];
    let (_serve, url, _log) = serve(&args).await;
    let (alice_args, bob_args) = (as_client(&url, &bearer(&alice), &[]), as_client(&url, &bearer(&bob), &[]));

    let steps = [
        json!({"op": "list_tools"}),
        json!({"op": "call", "tool": "run_python", "arguments": {"code": "x = 41", "session": "new"}}),
        cell_in_last_session("print(x + 1)"),
        cell("print('x' in globals())"),
    ];
    let Some(ran) = sdk(&strs(&alice_args), &steps).await else { return };
    let description = ran[0]["result"]["tools"][0]["description"].as_str().unwrap();
    assert!(description.contains("send it back as the `session` argument"), "{description}");
    assert!(ran[0]["result"]["tools"][0]["inputSchema"]["properties"]["session"].is_object(), "{ran:?}");
    let handle = content(&ran[1])["session"].as_str().expect("a kept cell's result carries its handle").to_string();
    assert_eq!(ran[1]["result"]["_meta"]["code-mode/session"], handle.as_str(), "and in _meta");
    assert_eq!(printed(&ran[2]), "42\n", "the handle continues in the same sandbox");
    assert_eq!(content(&ran[2])["session"], handle.as_str());
    assert_eq!(printed(&ran[3]), "False\n", "without the handle a run starts fresh");
    assert!(content(&ran[3]).get("session").is_none(), "and keeps nothing: {ran:?}");

    // Another identity presenting alice's handle; one with its runner id
    // changed, one with its key changed (each is not valid: never "ended",
    // never a fresh sandbox); not one at all.
    let flip = |c: char| if c == '0' { '1' } else { '0' };
    let changed_at =
        |at: usize| -> String { handle.char_indices().map(|(i, c)| if i == at { flip(c) } else { c }).collect() };
    let (other_runner, other_key) = (changed_at("cms2.".len()), changed_at("cms2.".len() + 33));
    let with = |session: &str| json!({"op": "call", "tool": "run_python", "arguments": {"code": "print(x)", "session": session}});
    let Some(bobs) = sdk(&strs(&bob_args), &[with(&handle)]).await else { return };
    assert!(refused(&bobs[0]).contains("belongs to another client identity"), "{bobs:?}");
    let steps = [with(&other_runner), with(&other_key), with("cms2.nothing")];
    let Some(bad) = sdk(&strs(&alice_args), &steps).await else { return };
    for changed in &bad[..2] {
        let text = refused(changed);
        assert!(text.starts_with("run_python: this session handle is not valid: it was changed"), "{text}");
        assert!(text.contains("send `session: \"new\"` to start a new sandbox that keeps its variables"), "{text}");
    }
    assert!(refused(&bad[2]).contains("is not a session handle of code-mode"), "{bad:?}");

    // Alice may hold two kept sandboxes: a third removes the one unused
    // longest. On a server of its own whose idle time no container start
    // outlasts (under load a cold start takes seconds: with the 4 s above her
    // first sandbox could go idle before the third is made).
    let long_idle = ["--auth-tokens", tokens.arg(), "--keep-variables", "--session-idle", "300", "--max-handles", "2"];
    let (_long_serve, long_url, _long_log) = serve(&long_idle).await;
    let new = |code: &str| json!({"op": "call", "tool": "run_python", "arguments": {"code": code, "session": "new"}});
    let in_step = |step: usize| json!({"op": "call", "tool": "run_python", "arguments": {"code": "print(a)"}, "session_from_step": step});
    let steps = [new("a = 1"), new("a = 2"), new("a = 3"), in_step(0), in_step(1)];
    let Some(evicted) = sdk(&strs(&as_client(&long_url, &bearer(&alice), &[])), &steps).await else { return };
    assert!(refused(&evicted[3]).contains("a newer kept session of this client took its place"), "{evicted:?}");
    assert_eq!(printed(&evicted[4]), "2\n", "the second still runs in its own sandbox: {evicted:?}");

    // Past --session-idle the handle's sandbox is gone, and it says why.
    let new = json!({"op": "call", "tool": "run_python", "arguments": {"code": "y = 1", "session": "new"}});
    let Some(kept) = sdk(&strs(&alice_args), &[new]).await else { return };
    let handle = content(&kept[0])["session"].as_str().expect("a handle").to_string();
    tokio::time::sleep(Duration::from_millis(5500)).await;
    let Some(late) = sdk(&strs(&alice_args), &[with(&handle)]).await else { return };
    let text = refused(&late[0]);
    assert!(text.contains("has ended (no run within its idle time (--session-idle))"), "{text}");
    assert!(text.contains("send `session: \"new\"` to start a new sandbox that keeps its variables"), "{text}");
}

#[tokio::test]
async fn over_nats_a_stateless_identitys_taint_set_through_one_frontend_replica_refuses_through_the_other() {
    if !support::sandbox_available() {
        return;
    }
    let Some((nats, users)) = code_mode_core::testing::NatsServer::start_secured() else { return };
    let alice = token_new("alice");
    let tokens = TokenFile::of(&[&alice]);
    let _bridge = support::spawn_service(&nats.url(), &users, "bridge", &["--private", "echo"], Some(&[]));
    let _runner = support::spawn_service(&nats.url(), &users, "sandbox-runner", &[], None);
    let http = ["--http", "127.0.0.1:0", "--auth-tokens", tokens.arg()];
    let mut first = support::service_command(&nats.url(), &users, "frontend", &http, None);
    let mut second = support::service_command(&nats.url(), &users, "frontend", &http, None);
    let ((_one, one_url, _), (_two, two_url, _)) = (spawn_http(&mut first).await, spawn_http(&mut second).await);
    let auth = bearer(&alice);
    let Some(through_one) = sdk(&strs(&as_client(&one_url, &auth, &[])), &[cell("print(await echo(text='x'))")]).await
    else {
        return;
    };
    assert_eq!(printed(&through_one[0]), "x\n");
    let Some(through_two) = sdk(&strs(&as_client(&two_url, &auth, &[])), &[cell(TRY_ADD)]).await else { return };
    assert!(printed(&through_two[0]).starts_with("refused: add: refused by the private-data rule"), "{through_two:?}");
}

#[tokio::test]
async fn over_nats_a_stateless_taint_outlives_a_killed_bridge_and_a_handle_whose_runner_was_killed_is_refused() {
    if !support::sandbox_available() {
        return;
    }
    let Some((nats, users)) = code_mode_core::testing::NatsServer::start_secured() else { return };
    let alice = token_new("alice");
    let tokens = TokenFile::of(&[&alice]);
    let bridge_args = ["--private", "echo"];
    let mut bridge = support::spawn_service(&nats.url(), &users, "bridge", &bridge_args, Some(&[]));
    let mut runner = support::spawn_service(&nats.url(), &users, "sandbox-runner", &[], None);
    let http = ["--http", "127.0.0.1:0", "--auth-tokens", tokens.arg(), "--keep-variables"];
    let mut frontend = support::service_command(&nats.url(), &users, "frontend", &http, None);
    let (_frontend, url, _) = spawn_http(&mut frontend).await;
    let args = as_client(&url, &bearer(&alice), &[]);
    let new = json!({"op": "call", "tool": "run_python", "arguments": {"code": "x = 41", "session": "new"}});
    let Some(ran) = sdk(&strs(&args), &[cell("print(await echo(text='x'))"), new]).await else { return };
    assert_eq!(printed(&ran[0]), "x\n");
    let handle = content(&ran[1])["session"].as_str().expect("a handle").to_string();

    // The bridge is killed outright and a new one starts: the taint lives
    // in JetStream, not in the bridge.
    bridge.kill().await.expect("the bridge is killed");
    let _bridge = support::spawn_service(&nats.url(), &users, "bridge", &bridge_args, Some(&[]));
    let mut after = String::new();
    for _ in 0..20 {
        let Some(ran) = sdk(&strs(&args), &[cell(TRY_ADD)]).await else { return };
        after = printed(&ran[0]);
        // Until the new bridge has subscribed, a call finds nobody.
        if !after.contains("BridgeUnavailable") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(after.starts_with("refused: add: refused by the private-data rule"), "{after}");

    // The runner holding the handle's sandbox is killed and another starts:
    // the handle is refused saying so, never run in a fresh sandbox.
    runner.kill().await.expect("the runner is killed");
    let _runner = support::spawn_service(&nats.url(), &users, "sandbox-runner", &[], None);
    let with = json!({"op": "call", "tool": "run_python", "arguments": {"code": "print(x)", "session": handle}});
    let Some(late) = sdk(&strs(&args), &[with]).await else { return };
    let text = refused(&late[0]);
    assert!(text.contains("has ended (its sandbox-runner stopped or restarted)"), "{text}");
    // A stateless client's way to keep variables again is a new handle.
    assert!(text.contains("send `session: \"new\"` to start a new sandbox that keeps its variables"), "{text}");
}
