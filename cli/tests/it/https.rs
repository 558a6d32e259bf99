//! MCP over HTTPS without a proxy (`--tls-cert FILE --tls-key FILE`): a
//! self-signed certificate made here with the `openssl` command, `serve`
//! with TLS (from a settings file) and static tokens, the official Python SDK trusting that
//! certificate running a cell over https, and plain HTTP to the same port
//! getting no MCP answer. Then what stops startup: half a pair, a file that
//! is missing or not PEM, a key of another certificate, and TLS without
//! authentication off loopback (TLS does not replace authentication).

use std::path::Path;
use std::time::Duration;

use code_mode_core::testing::TempDir;
use serde_json::json;

use crate::auth::{TokenFile, bearer, serve, token_new};
use crate::support;

/// A self-signed certificate for `localhost` and 127.0.0.1 (`<name>.pem`,
/// `<name>.key` in `dir`); false (after `unavailable`) without `openssl`.
fn self_signed(dir: &Path, name: &str) -> bool {
    let (cert, key) = (format!("{name}.pem"), format!("{name}.key"));
    let args = [
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-days",
        "1",
        "-subj",
        "/CN=localhost",
        "-addext",
        "subjectAltName=DNS:localhost,IP:127.0.0.1",
        "-keyout",
        &key,
        "-out",
        &cert,
    ];
    crate::tls::openssl(dir, &args)
}

#[tokio::test]
async fn over_tls_a_client_trusting_the_certificate_runs_a_cell_with_its_token_and_plain_http_to_the_port_fails() {
    if !support::sandbox_available() {
        return;
    }
    let folder = TempDir::new("https-serve");
    let dir = &folder.0;
    if !self_signed(dir, "server") {
        return;
    }
    let alice = token_new("alice");
    let tokens = TokenFile::of(&[&alice]);
    let (cert, key) = (dir.join("server.pem"), dir.join("server.key"));
    // The pair from a settings file, keys named like the flags.
    let settings = dir.join("settings.toml");
    let toml = format!("[serve]\ntls-cert = {:?}\ntls-key = {:?}\n", cert.to_str().unwrap(), key.to_str().unwrap());
    std::fs::write(&settings, toml).unwrap();
    let (_serve, url, log) = serve(&["--auth-tokens", tokens.arg(), "--settings", settings.to_str().unwrap()]).await;
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");

    let steps = json!([{"op": "call", "tool": "run_python", "arguments": {"code": "print(await add(a=1, b=2))"}}]);
    let header = format!("Authorization: {}", bearer(&alice));
    let args = ["--url", &url, "--mode", "legacy", "--header", &header, "--cafile", cert.to_str().unwrap()];
    let Some((results, _)) = support::python_sdk(&args, &steps).await else { return };
    assert_eq!(results[0]["result"]["structuredContent"]["stdout"], "{\"sum\":3}\n", "{results:?}");

    // Plain HTTP to the TLS port: no HTTP answer at all, let alone MCP.
    let authority = url.trim_start_matches("https://").trim_end_matches("/mcp").to_string();
    let auth = bearer(&alice);
    let (status, _, body) = tokio::task::spawn_blocking(move || {
        let headers = [("Authorization", auth.as_str()), ("Content-Type", "application/json")];
        support::raw_http(&authority, "POST", "/mcp", &headers, "{}")
    })
    .await
    .unwrap();
    assert_eq!(status, 0, "plain HTTP got an HTTP answer: {body}");
    assert!(!body.contains("jsonrpc"), "{body}");
    assert!(!log.lock().unwrap().join("\n").contains(&alice.token[3..]), "the token reached the log");
}

/// `serve` with `args` before `--`: it must exit non-zero at once; its
/// stderr.
async fn refused(args: &[&str]) -> String {
    let out = tokio::process::Command::new(support::code_mode())
        .arg("serve")
        .args(args)
        .arg("--")
        .arg(support::test_server())
        .stdin(std::process::Stdio::null())
        .output();
    let out = tokio::time::timeout(Duration::from_secs(60), out).await.expect("it stops at once").unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{args:?} started: {stderr}");
    stderr
}

#[tokio::test]
async fn half_a_pair_a_bad_pem_file_a_foreign_key_or_tls_without_authentication_off_loopback_stop_startup_saying_why() {
    let folder = TempDir::new("https-refused");
    let dir = &folder.0;
    if !self_signed(dir, "server") || !self_signed(dir, "other") {
        return;
    }
    let path = |name: &str| dir.join(name).to_str().unwrap().to_string();
    let (cert, key, other_key) = (path("server.pem"), path("server.key"), path("other.key"));
    let http = ["--http", "127.0.0.1:0"];

    let e = refused(&[&http[..], &["--tls-cert", &cert]].concat()).await;
    assert!(e.contains("--tls-key"), "half a pair names the other option: {e}");
    let e = refused(&[&http[..], &["--tls-key", &key]].concat()).await;
    assert!(e.contains("--tls-cert"), "{e}");

    let missing = path("missing.pem");
    let e = refused(&[&http[..], &["--tls-cert", &missing, "--tls-key", &key]].concat()).await;
    assert!(e.contains(&format!("cannot read the TLS certificate file {missing}")), "{e}");
    let e = refused(&[&http[..], &["--tls-cert", &key, "--tls-key", &key]].concat()).await;
    assert!(e.contains(&format!("the TLS certificate file {key}")) && e.contains("no PEM certificate"), "{e}");
    let e = refused(&[&http[..], &["--tls-cert", &cert, "--tls-key", &cert]].concat()).await;
    assert!(e.contains(&format!("the TLS key file {cert}")) && e.contains("no PEM private key"), "{e}");
    let garbled = path("garbled.pem");
    std::fs::write(&garbled, "-----BEGIN CERTIFICATE-----\n%%%\n-----END CERTIFICATE-----\n").unwrap();
    let e = refused(&[&http[..], &["--tls-cert", &garbled, "--tls-key", &key]].concat()).await;
    assert!(e.contains(&garbled) && e.contains("not valid PEM"), "{e}");
    let e = refused(&[&http[..], &["--tls-cert", &cert, "--tls-key", &other_key]].concat()).await;
    assert!(
        e.contains("cannot serve together") && e.contains(&other_key) && e.contains("does not belong"),
        "a key of another certificate: {e}"
    );

    // TLS protects the wire; it does not say who calls.
    let e = refused(&["--http", "0.0.0.0:0", "--tls-cert", &cert, "--tls-key", &key]).await;
    assert!(e.contains("refusing to serve MCP on 0.0.0.0:0 without authentication"), "{e}");
}
