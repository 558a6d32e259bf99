//! Files out of a cell (issue 42), end to end through `serve --http` with
//! two token identities: what the code writes to `/tmp/out` (or with
//! `save_file`) comes back as resource links the same identity reads back
//! byte for byte with `resources/read` (rmcp's client, and the official
//! Python SDK's `mcp.Client` for the same identity); another identity gets
//! "unknown resource"; a `..` name and symlinks are refused and said so;
//! past the count the collection ends with a line saying so; past the
//! sandbox's /tmp the code's own write fails.

use base64::Engine as _;
use rmcp::model::{CallToolResult, ReadResourceRequestParams};
use rmcp::service::{RoleClient, RunningService};
use serde_json::{Value, json};

use crate::auth::{TokenFile, bearer, connect_as, serve, token_new};
use crate::http::run_python;
use crate::support;

/// The PNG-like bytes the code writes, made the same way here: an 8-byte
/// PNG signature and 300,000 more (more than one protocol line holds).
pub(crate) fn png_bytes() -> Vec<u8> {
    let mut bytes = vec![0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a];
    bytes.extend((0..300_000u32).map(|i| (i * 7 % 256) as u8));
    bytes
}

/// The CSV the code writes, made the same way here.
pub(crate) fn csv_text() -> String {
    let mut text = String::from("n,square\n");
    for n in 0..2000 {
        text.push_str(&format!("{n},{}\n", n * n));
    }
    text
}

pub(crate) const WRITE_BOTH: &str = r#"
import os
with open("/tmp/out/table.csv", "w") as f:
    f.write("n,square\n" + "".join(f"{n},{n * n}\n" for n in range(2000)))
png = bytes([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) + bytes(i * 7 % 256 for i in range(300_000))
save_file("plots/chart.png", png)
print("written")
"#;

/// The resource links of a result: (name, uri, mime type, size).
pub(crate) fn links(result: &CallToolResult) -> Vec<(String, String, String, u64)> {
    result
        .content
        .iter()
        .map(|c| serde_json::to_value(c).unwrap())
        .filter(|c| c["type"] == "resource_link")
        .map(|c| {
            let field = |k: &str| c[k].as_str().unwrap_or_default().to_string();
            (field("name"), field("uri"), field("mimeType"), c["size"].as_u64().unwrap_or(0))
        })
        .collect()
}

/// The bytes of one read: its text or its decoded blob.
pub(crate) async fn read_back<H: rmcp::ClientHandler>(client: &RunningService<RoleClient, H>, uri: &str) -> Vec<u8> {
    let read = client.read_resource(ReadResourceRequestParams::new(uri)).await.expect("the writer reads its file");
    bytes_of(&read)
}

/// The bytes a read of a link gave (its text or its blob).
pub(crate) fn bytes_of(read: &rmcp::model::ReadResourceResult) -> Vec<u8> {
    let contents = serde_json::to_value(&read.contents[0]).unwrap();
    match (contents["text"].as_str(), contents["blob"].as_str()) {
        (Some(text), _) => text.as_bytes().to_vec(),
        (None, Some(blob)) => base64::engine::general_purpose::STANDARD.decode(blob).expect("a blob is base64"),
        _ => panic!("a read holds text or a blob: {contents}"),
    }
}

#[tokio::test]
async fn files_a_cell_writes_come_back_as_links_its_identity_reads_byte_for_byte_and_another_identity_cannot() {
    if !support::sandbox_available() {
        return;
    }
    let (alice, bob) = (token_new("alice"), token_new("bob"));
    let tokens = TokenFile::of(&[&alice, &bob]);
    let (_serve, url, _log) = serve(&["--warm", "0", "--auth-tokens", tokens.arg(), "--files-ttl", "600"]).await;

    let client = connect_as(&url, &alice, ()).await;
    let result = run_python(&client, WRITE_BOTH).await;
    let report = support::report(&result);
    assert_eq!(report["stdout"], "written\n", "{report}");
    let links = links(&result);
    let names: Vec<&str> = links.iter().map(|l| l.0.as_str()).collect();
    assert_eq!(names, ["table.csv", "plots/chart.png"], "{result:?}");
    let (csv, png) = (csv_text(), png_bytes());
    assert_eq!((links[0].2.as_str(), links[0].3), ("text/csv", csv.len() as u64));
    assert_eq!((links[1].2.as_str(), links[1].3), ("image/png", png.len() as u64));
    for link in &links {
        assert!(link.1.starts_with("code-mode://files/"), "{link:?}");
    }
    // The structured content names the same files.
    assert_eq!(report["files"][0]["uri"], links[0].1.as_str(), "{report}");
    assert_eq!(report["files"][1]["name"], "plots/chart.png");
    // Byte for byte, as written.
    assert_eq!(String::from_utf8(read_back(&client, &links[0].1).await).unwrap(), csv);
    assert!(read_back(&client, &links[1].1).await == png, "the PNG read back differs");
    client.cancel().await.ok();

    // The official Python SDK (mcp.Client, its default mode) as alice.
    let header = format!("Authorization: {}", bearer(&alice));
    let steps = json!([{"op": "read_resource", "uri": links[0].1}]);
    if let Some((results, _)) = support::python_sdk(&["--url", &url, "--header", &header], &steps).await {
        assert_eq!(results[0]["result"]["contents"][0]["text"], csv.as_str(), "{results:?}");
    }

    // Bob: the same answer as for a URI that never existed.
    let bob_client = connect_as(&url, &bob, ()).await;
    for uri in [links[0].1.clone(), links[1].1.clone(), "code-mode://files/00/never.csv".to_string()] {
        let refused = bob_client.read_resource(ReadResourceRequestParams::new(uri.clone())).await.unwrap_err();
        let text = refused.to_string();
        assert!(text.contains("-32002") || text.contains("unknown resource"), "{text}");
        assert!(text.contains(&format!("unknown resource: {uri} (no such file, or expired)")), "{text}");
    }
    bob_client.cancel().await.ok();
}

#[tokio::test]
async fn path_escapes_and_symlinks_are_refused_and_said_so_and_past_the_count_the_collection_ends_saying_so() {
    if !support::sandbox_available() {
        return;
    }
    let alice = token_new("alice");
    let tokens = TokenFile::of(&[&alice]);
    let (_serve, url, _log) = serve(&["--warm", "0", "--auth-tokens", tokens.arg()]).await;
    let client = connect_as(&url, &alice, ()).await;

    let escapes = r#"
import os
for name in ("../escaped", "/etc/x", "a/../../b"):
    try:
        save_file(name, b"1")
    except ValueError as e:
        print("refused", repr(name))
os.symlink("/etc/passwd", "/tmp/out/passwd")
os.symlink("/etc", "/tmp/out/etc")
save_file("ok.txt", "fine")
print(sorted(os.listdir("/tmp")))
"#;
    let result = run_python(&client, escapes).await;
    let report = support::report(&result);
    let stdout = report["stdout"].as_str().unwrap();
    for name in ["'../escaped'", "'/etc/x'", "'a/../../b'"] {
        assert!(stdout.contains(&format!("refused {name}")), "{stdout}");
    }
    let listed = stdout.lines().last().unwrap();
    assert!(!listed.contains("escaped") && !listed.contains("'b'"), "nothing was written beside /tmp/out: {stdout}");
    let notes: Vec<&str> = report["files_notes"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
    assert!(
        notes.contains(&"'passwd': a symlink: refused (only regular files under /tmp/out are handed out)"),
        "{notes:?}"
    );
    assert!(
        notes.contains(&"'etc': a symlink: refused (only regular files under /tmp/out are handed out)"),
        "{notes:?}"
    );
    let names: Vec<String> = links(&result).into_iter().map(|l| l.0).collect();
    assert_eq!(names, ["ok.txt"], "{report}");

    let many = r#"
for i in range(70):
    save_file(f"f{i:02}.txt", str(i))
print("70 written")
"#;
    let result = run_python(&client, many).await;
    let report = support::report(&result);
    assert_eq!(links(&result).len(), 64, "{report}");
    assert_eq!(
        report["files_notes"],
        json!(["'f64.txt' and any later files not handed out: a run hands out at most 64 files"]),
        "{report}"
    );

    // The sandbox's /tmp (16 MiB) bounds what the code can write first:
    // the write itself fails in the code.
    let flood = r#"
try:
    save_file("big.bin", b"x" * (20 * 1024 * 1024))
except OSError as e:
    print("OSError", e.errno)
"#;
    let result = run_python(&client, flood).await;
    let report = support::report(&result);
    assert_eq!(report["stdout"], "OSError 28\n", "ENOSPC: {report}");
    let offered: Vec<Value> = links(&result).into_iter().map(|l| json!([l.0, l.3])).collect();
    assert!(offered.iter().all(|l| l[1].as_u64().unwrap() <= 16 * 1024 * 1024), "{offered:?}");
    client.cancel().await.ok();
}

/// What the long-output cell prints, made the same way here: a line with a
/// non-ASCII character, then 20,000 numbered lines of 102 bytes.
fn printed_text() -> String {
    let mut text = String::from("début: é\n");
    for i in 0..20_000 {
        text.push_str(&format!("line {i:05} {}\n", "abcdefghij".repeat(9)));
    }
    text
}

const PRINT_2_MB: &str = r#"
print("début: é")
for i in range(20000):
    print(f"line {i:05} " + "abcdefghij" * 9)
"#;

#[tokio::test]
async fn printed_output_past_what_the_model_reads_is_kept_whole_as_a_link_only_its_identity_reads() {
    if !support::sandbox_available() {
        return;
    }
    let (alice, bob) = (token_new("alice"), token_new("bob"));
    let tokens = TokenFile::of(&[&alice, &bob]);
    let (_serve, url, _log) = serve(&["--warm", "0", "--auth-tokens", tokens.arg()]).await;
    let client = connect_as(&url, &alice, ()).await;
    let result = run_python(&client, PRINT_2_MB).await;
    let report = support::report(&result);
    let expected = printed_text();
    assert!(expected.len() > 2_000_000, "{}", expected.len());

    // The model reads the head and the tail within 8 KiB, and a line
    // saying how much was cut and which file holds it all.
    let stdout = report["stdout"].as_str().unwrap();
    assert!(stdout.len() <= 8192, "{} bytes", stdout.len());
    assert!(stdout.starts_with("début: é\nline 00000 abcdefghij"), "{stdout}");
    assert!(stdout.ends_with(&format!("line 19999 {}\n", "abcdefghij".repeat(9))), "{stdout}");
    let said =
        format!(" bytes of output cut here; all {} bytes printed are in the file output.txt ...]\n", expected.len());
    assert!(stdout.contains(&said), "{stdout}");
    assert_eq!((report["truncated"].as_bool(), report["stopped"].as_bool()), (Some(true), Some(false)), "{report}");
    // The model-facing result (its text and structured content) stays small.
    let whole = serde_json::to_string(&result).unwrap();
    assert!(whole.len() < 24 * 1024, "the result is {} bytes", whole.len());

    let links = links(&result);
    assert_eq!(links.len(), 1, "{result:?}");
    let (name, uri, mime_type, size) = &links[0];
    assert_eq!((name.as_str(), mime_type.as_str()), ("output.txt", "text/plain; charset=utf-8"));
    assert_eq!(*size, expected.len() as u64);
    assert_eq!(report["files"][0]["uri"], uri.as_str(), "{report}");
    let read = read_back(&client, uri).await;
    assert!(read == expected.as_bytes(), "output.txt ({} bytes) differs from what was printed", read.len());
    client.cancel().await.ok();

    let bob_client = connect_as(&url, &bob, ()).await;
    let refused = bob_client.read_resource(ReadResourceRequestParams::new(uri.clone())).await.unwrap_err();
    assert!(refused.to_string().contains(&format!("unknown resource: {uri}")), "{refused}");
    bob_client.cancel().await.ok();
}

#[tokio::test]
async fn where_output_is_kept_a_flood_stops_at_8_mib_and_a_stopped_run_offers_what_was_printed_saying_so() {
    if !support::sandbox_available() {
        return;
    }
    let alice = token_new("alice");
    let tokens = TokenFile::of(&[&alice]);
    let (_serve, url, _log) = serve(&["--warm", "0", "--deadline", "6", "--auth-tokens", tokens.arg()]).await;
    let client = connect_as(&url, &alice, ()).await;
    let flood = "chunk = 'x' * 1023\nwhile True:\n    print(chunk)\n";
    let result = run_python(&client, flood).await;
    let report = support::report(&result);
    assert_eq!(report["stopped"], true, "{report}");
    assert!(report["error"].as_str().unwrap_or_default().contains("printed 8 MiB"), "{report}");
    let stdout = report["stdout"].as_str().unwrap();
    assert!(stdout.len() <= 8192, "{} bytes", stdout.len());
    assert!(stdout.contains(" bytes printed are in the file output.txt ...]"), "{stdout}");
    let offered = links(&result);
    assert_eq!((offered[0].0.as_str(), offered[0].3), ("output.txt", 8 * 1024 * 1024), "{report}");
    let read = read_back(&client, &offered[0].1).await;
    let expected = "x".repeat(1023) + "\n";
    assert_eq!(read.len(), 8 * 1024 * 1024);
    assert!(read.chunks(1024).all(|line| line == expected.as_bytes()), "the first 8 MiB printed, whole lines");
    assert_eq!(
        report["files_notes"],
        json!(["output.txt: the run was stopped: it holds the 8388608 bytes printed before"]),
        "{report}"
    );

    // Stopped at its deadline: what reached the host is offered, said so
    // (whole lines of the runner's 196,560-byte pieces; the rest was still
    // in its buffer).
    let late = "import time\nprint('y' * 999_999)\ntime.sleep(30)\n";
    let result = run_python(&client, late).await;
    let report = support::report(&result);
    assert!(report["error"].as_str().unwrap_or_default().contains("deadline"), "{report}");
    let kept = links(&result);
    assert_eq!((kept[0].0.as_str(), kept[0].3), ("output.txt", 5 * 196_560), "{report}");
    assert!(read_back(&client, &kept[0].1).await.iter().all(|b| *b == b'y'));
    assert_eq!(
        report["files_notes"],
        json!(["output.txt: the run was stopped: it holds the 982800 bytes printed before"]),
        "{report}"
    );
    client.cancel().await.ok();
}
