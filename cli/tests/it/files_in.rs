//! Files in (issue 42), end to end through `serve --http` with two
//! wrapped test servers, one private: `run_python`'s `files` places a
//! wrapped server's resource (read through the bridge as the cell's own
//! read) and an inline blob read-only under `/tmp/in` before the code
//! starts, a 5 MB one too (files in have their own 8 MiB limit, not the
//! 64 KiB result limit); the cell's audit record names each; bad names, a
//! file over the files-in limit, files past it in all and inline bytes
//! past their bound are refused naming the entry and the limit; a private
//! server's file taints the session.

use base64::Engine as _;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{RoleClient, RunningService};
use serde_json::{Value, json};

use crate::auth::{TokenFile, connect_as, token_new};
use crate::support;

pub(crate) async fn run_with_files<H: rmcp::ClientHandler>(
    client: &RunningService<RoleClient, H>,
    code: &str,
    files: Value,
) -> CallToolResult {
    let mut params = CallToolRequestParams::new("run_python");
    params.arguments = Some(json!({ "code": code, "files": files }).as_object().unwrap().clone());
    client.call_tool(params).await.expect("run_python answers")
}

/// The error of a result: its report's, or the text of a refused call.
pub(crate) fn error_of(result: &CallToolResult) -> String {
    assert_eq!(result.is_error, Some(true), "{result:?}");
    match &result.structured_content {
        Some(report) => report["error"].as_str().unwrap_or_default().to_string(),
        None => result.content[0].as_text().map(|t| t.text.clone()).unwrap_or_default(),
    }
}

/// The bytes of the inline blob, made the same way in the test and nowhere
/// else: every byte value, then a 100 KB pattern.
fn blob() -> Vec<u8> {
    let mut bytes: Vec<u8> = (0..=255u8).collect();
    bytes.extend((0..100_000u32).map(|i| (i * 31 % 251) as u8));
    bytes
}

const READ_BOTH: &str = r#"
import hashlib, os, stat
for name in sorted(os.listdir("/tmp/in")):
    path = os.path.join("/tmp/in", name)
    data = open(path, "rb").read()
    print(name, len(data), hashlib.sha256(data).hexdigest(), oct(stat.S_IMODE(os.stat(path).st_mode)))
try:
    open("/tmp/in/small", "w")
except PermissionError:
    print("read-only")
"#;

pub(crate) fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test]
async fn files_given_to_run_python_are_placed_read_only_under_tmp_in_checked_audited_and_a_private_one_taints() {
    if !support::sandbox_available() {
        return;
    }
    let config = support::log_path("files-in-servers").with_extension("json");
    let server = support::test_server();
    std::fs::write(
        &config,
        json!({"mcpServers": {
            "vault": {"command": server, "args": ["--resources", "--resource-host", "vault"], "private": true},
            "wiki": {"command": server, "args": ["--resources", "--resource-host", "wiki"]},
        }})
        .to_string(),
    )
    .unwrap();
    let audit = support::log_path("files-in-audit");
    let alice = token_new("alice");
    let tokens = TokenFile::of(&[&alice]);
    let mut serve = tokio::process::Command::new(support::code_mode());
    serve.args(["serve", "--http", "127.0.0.1:0", "--warm", "0", "--auth-tokens", tokens.arg()]).args([
        "--audit",
        audit.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
        "--",
    ]);
    serve.stdin(std::process::Stdio::null()).kill_on_drop(true);
    let (_serve, url, _log) = crate::http::spawn_http(&mut serve).await;
    let client = connect_as(&url, &alice, ()).await;

    // A public server's resource and an inline blob, byte for byte.
    let blob = blob();
    let data = base64::engine::general_purpose::STANDARD.encode(&blob);
    let files = json!([{"uri": "test://wiki/big/5000"}, {"uri": "test://wiki/small", "name": "small"},
                       {"name": "blob.bin", "data": data}, {"uri": "test://wiki/big/5000000"}]);
    let result = run_with_files(&client, READ_BOTH, files).await;
    let report = support::report(&result);
    let big = "x".repeat(5000);
    let large = "x".repeat(5_000_000);
    let expected = format!(
        "5000 5000 {} 0o444\n5000000 5000000 {} 0o444\nblob.bin {} {} 0o444\nsmall 5 {} 0o444\nread-only\n",
        sha256(big.as_bytes()),
        sha256(large.as_bytes()),
        blob.len(),
        sha256(&blob),
        sha256(b"small")
    );
    assert_eq!(report["stdout"], expected.as_str(), "{report}");

    // The cell's audit record names each input: by URI, or by size and hash;
    // each resource read has its own call record.
    let records: Vec<Value> =
        std::fs::read_to_string(&audit).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let start = records.iter().find(|r| r["kind"] == "cell_start").expect("a cell_start record");
    assert_eq!(
        start["inputs"],
        json!([{"name": "5000", "uri": "test://wiki/big/5000"}, {"name": "small", "uri": "test://wiki/small"},
               {"name": "blob.bin", "bytes": blob.len(), "sha256": sha256(&blob)},
               {"name": "5000000", "uri": "test://wiki/big/5000000"}]),
        "{start}"
    );
    let reads: Vec<&Value> = records.iter().filter(|r| r["method"] == "resources/read").collect();
    assert_eq!(reads.len(), 3, "{records:?}");
    assert_eq!(reads[0]["identity"], "alice");

    // Refused before any code runs, each naming the entry and the limit.
    let refusals = [
        (json!([{"name": "../up", "data": ""}]), "files[0]: the name \"../up\" cannot be placed under /tmp/in"),
        (json!([{"name": "a/b", "data": ""}]), "files[0]: the name \"a/b\" cannot be placed under /tmp/in"),
        (json!([{"name": "x", "data": ""}, {"name": "x", "data": ""}]), "files[1]: the name \"x\" is given twice"),
        (
            json!([{"uri": "test://wiki/big/8388609"}]),
            "files[0] (test://wiki/big/8388609): resources/read test://wiki/big/8388609: the file is 8388609 \
             bytes, over the 8388608 byte limit of files in (refused, not cut)",
        ),
        (
            json!([{"uri": "test://wiki/big/5000000", "name": "a"}, {"uri": "test://wiki/big/5000000", "name": "b"}]),
            "files[1] (b): the files in hold 10000000 bytes with it, over the 8388608 byte limit of files in",
        ),
    ];
    for (files, says) in refusals {
        let result = run_with_files(&client, "print('ran')", files.clone()).await;
        let error = error_of(&result);
        assert!(error.contains(says), "{files}: {error}");
        if let Some(report) = &result.structured_content {
            assert_eq!(report["stdout"], "", "{files}: the code ran");
        }
    }
    let over = base64::engine::general_purpose::STANDARD.encode(vec![0u8; code_mode_proto::MAX_INPUT_BYTES + 1]);
    let result = run_with_files(&client, "print('ran')", json!([{"name": "big", "data": over}])).await;
    let error = error_of(&result);
    assert!(
        error.contains("files[0] (big): the inline files hold 2097153 bytes, over the 2097152 byte limit"),
        "{error}"
    );

    // A private server's file taints the session: a later public call is refused.
    let result =
        run_with_files(&client, "print(open('/tmp/in/secret').read()[:6])", json!([{"uri": "test://vault/secret"}]))
            .await;
    assert_eq!(support::report(&result)["error"], Value::Null, "{:?}", support::report(&result));
    let result = crate::http::run_python(&client, "print(await read_resource('test://wiki/small'))").await;
    let report = support::report(&result);
    assert!(report["error"].as_str().unwrap_or_default().contains("private-data rule"), "{report}");
    client.cancel().await.ok();
    let _ = std::fs::remove_file(config);
    let _ = std::fs::remove_file(audit);
}
