//! Files out past the Python SDK's 1 MiB server-sent event bound (issue
//! 42): over `serve --http` a `resources/read` of a kept file is answered
//! as `application/json` when the client accepts it, so the SDK's
//! `mcp.Client` at its defaults (the stateless 2026-07-28 protocol) and
//! `ClientSession` (an MCP session, 2025-11-25) each read a 3 MB file and
//! 2 MB of printed output back byte for byte. Real server, real Docker, the
//! official Python SDK.

use base64::Engine as _;
use serde_json::json;

use crate::support;

/// A 3,000,000-byte binary (base64: 4 MB, four times the SDK's event
/// bound) and 2 MB printed, with the file's SHA-256 printed last.
const WRITE_BIG: &str = r#"
import hashlib
data = (bytes(range(256)) * 11719)[:3_000_000]
save_file("big.bin", data)
print("y" * 2_000_000)
print(hashlib.sha256(data).hexdigest())
"#;

fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_python_sdk_clients_read_links_past_their_1_mib_event_bound_over_http_byte_for_byte() {
    if !support::sandbox_available() {
        return;
    }
    let (alice, tokens) = support::alice();
    let mut serve = tokio::process::Command::new(support::code_mode());
    serve.args(["serve", "--http", "127.0.0.1:0", "--warm", "0", "--auth-tokens", tokens.arg(), "--"]);
    serve.arg(support::test_server()).stdin(std::process::Stdio::null()).kill_on_drop(true);
    let (_serve, url, _log) = crate::http::spawn_http(&mut serve).await;
    let data: Vec<u8> = (0..3_000_000usize).map(|i| (i % 256) as u8).collect();
    let printed = format!("{}\n{}\n", "y".repeat(2_000_000), sha256(&data));
    let bearer = format!("Authorization: Bearer {}", alice.token);
    for api in ["client", "session"] {
        let args = ["--url", url.as_str(), "--header", &bearer, "--api", api];
        let steps = json!([
            {"op": "call", "tool": "run_python", "arguments": {"code": WRITE_BIG}},
            {"op": "read_links"},
        ]);
        let Some((results, stderr)) = support::python_sdk(&args, &steps).await else { return };
        let cell = &results[0]["result"];
        assert_ne!(cell["isError"], true, "{api}: {cell} {stderr}");
        let reads = results[1]["result"].as_array().unwrap_or_else(|| panic!("{api}: {} {stderr}", results[1]));
        assert_eq!(reads.len(), 2, "{api}: output.txt and big.bin: {reads:?}");
        let output = reads[0]["contents"][0]["text"].as_str().unwrap_or_else(|| panic!("{api}: {}", reads[0]));
        assert!(output == printed, "{api}: output.txt is {} bytes, not the {} printed", output.len(), printed.len());
        let blob = reads[1]["contents"][0]["blob"].as_str().unwrap_or_else(|| panic!("{api}: {}", reads[1]));
        let read = base64::engine::general_purpose::STANDARD.decode(blob).unwrap();
        assert_eq!(read.len(), 3_000_000, "{api}");
        assert_eq!(sha256(&read), sha256(&data), "{api}: the file read back differs");
        let stdout = cell["structuredContent"]["stdout"].as_str().unwrap_or_default();
        assert!(
            stdout.ends_with(&format!("{}\n", sha256(&data))),
            "{api}: the cell's hash is the host's: {stdout:.300}"
        );
        assert!(stdout.len() <= 8192, "{api}: the model reads at most 8 KiB");
    }
}
