//! Issue 42's acceptance, end to end: `serve --http` on the data-science
//! image (numpy, pandas, matplotlib) wrapping the real npm
//! server-filesystem; the official Python SDK, as `mcp.Client` at its
//! defaults and as `ClientSession`, each over stdio, runs a cell that gets a 5 MB CSV
//! through `files`, cleans it with pandas and writes the cleaned CSV and a
//! matplotlib PNG to `/tmp/out`, then reads both back with
//! `resources/read`, byte for byte.
//!
//! server-filesystem offers its files as tools only (it lists no
//! resources), so the CSV comes in as the file its `read_media_file` tool
//! returns (an embedded resource with the bytes, base64), an entry
//! `{"tool": "fs__read_media_file", "arguments": {"path": ...}}`.

use base64::Engine as _;
use serde_json::{Value, json};

use crate::support;

/// The cleaning, run in the cell and on the host alike.
const CLEAN: &str = r#"
import pandas as pd

def clean(source, target):
    frame = pd.read_csv(source, dtype={"station": str, "day": str})
    frame["station"] = frame["station"].str.strip()
    frame = frame.dropna(subset=["temp_c"]).drop_duplicates()
    frame = frame.sort_values(["station", "day"], kind="stable")
    frame.to_csv(target, index=False)
    return frame
"#;

/// The cell: clean the file in, draw the daily mean, report the PNG's hash.
const CELL: &str = r#"
import hashlib
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
frame = clean("/tmp/in/raw.csv", "/tmp/out/clean.csv")
daily = frame.groupby("day")["temp_c"].mean()
figure, axes = plt.subplots(figsize=(6, 3), dpi=80)
daily.plot(ax=axes)
figure.savefig("/tmp/out/daily.png", format="png")
print(len(frame), hashlib.sha256(open("/tmp/out/daily.png", "rb").read()).hexdigest())
"#;

/// A messy CSV of about 5 MB, made the same way on every run: every 7th
/// temperature missing, every 11th station name padded with spaces, every
/// 13th row repeated.
fn raw_csv() -> String {
    let mut text = String::from("station,day,temp_c,rain_mm\n");
    let mut n = 0u64;
    while text.len() < 5_000_000 {
        let station = format!("station_{:03}", n % 97);
        let station = if n.is_multiple_of(11) { format!("  {station} ") } else { station };
        let day = format!("2024-{:02}-{:02}", n % 12 + 1, n % 28 + 1);
        let temp =
            if n.is_multiple_of(7) { String::new() } else { format!("{:.1}", (n * 37 % 400) as f64 / 10.0 - 5.0) };
        let row = format!("{station},{day},{temp},{:.1}\n", (n * 13 % 90) as f64 / 10.0);
        text.push_str(&row);
        if n.is_multiple_of(13) {
            text.push_str(&row);
        }
        n += 1;
    }
    text
}

fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// The same cleaning on the host, with the `.venv`'s pandas (the image's
/// version): the cleaned CSV's bytes.
fn cleaned_outside(raw: &std::path::Path, scratch: &std::path::Path) -> Option<Vec<u8>> {
    let python = code_mode_core::testing::peers::venv_bin("python")?;
    let target = scratch.join("clean-outside.csv");
    let code = format!("{CLEAN}\nimport sys\nclean(sys.argv[1], sys.argv[2])\n");
    let out = std::process::Command::new(python).arg("-c").arg(code).arg(raw).arg(&target).output().unwrap();
    assert!(out.status.success(), "pandas on the host: {}", String::from_utf8_lossy(&out.stderr));
    Some(std::fs::read(target).unwrap())
}

#[tokio::test]
async fn a_5_mb_csv_from_server_filesystem_is_cleaned_with_pandas_and_both_python_sdk_clients_read_the_csv_and_png_back_byte_for_byte()
 {
    if !support::sandbox_available() {
        return;
    }
    let Some(filesystem) = code_mode_core::testing::peers::npm_bin("mcp-server-filesystem") else { return };
    let requirements = support::data_science();
    support::package_image(&requirements);
    let scratch = std::env::temp_dir().join(format!("code-mode-files-ds-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&scratch).unwrap();
    let raw = raw_csv();
    let raw_path = scratch.join("raw.csv");
    std::fs::write(&raw_path, &raw).unwrap();
    let Some(expected_csv) = cleaned_outside(&raw_path, &scratch) else { return };

    let config = scratch.join("servers.json");
    std::fs::write(&config, json!({"mcpServers": {"fs": {"command": filesystem, "args": [&scratch]}}}).to_string())
        .unwrap();
    let files = json!([{"tool": "fs__read_media_file", "arguments": {"path": raw_path}, "name": "raw.csv"}]);
    let steps = json!([{"op": "call", "tool": "run_python",
                        "arguments": {"code": format!("{CLEAN}{CELL}"), "files": files}},
                       {"op": "read_links"}]);
    for api in ["client", "session"] {
        let audit = scratch.join(format!("audit-{api}.jsonl"));
        let code_mode = support::code_mode();
        let mut args: Vec<&str> = vec!["--api", api, "--stdio", code_mode.to_str().unwrap(), "serve"];
        args.extend(["--warm", "0", "--deadline", "120", "--requirements", requirements.to_str().unwrap()]);
        args.extend(["--audit", audit.to_str().unwrap(), "--config", config.to_str().unwrap(), "--"]);
        let Some((results, stderr)) = support::python_sdk(&args, &steps).await else { return };
        let result = &results[0]["result"];
        assert_ne!(result["isError"], true, "{api}: {results:?} {stderr}");
        let report = &result["structuredContent"];
        assert_eq!(report["error"], Value::Null, "{api}: {report}");
        let printed = report["stdout"].as_str().unwrap_or_default();
        let last = printed.trim().lines().last().unwrap_or_default();
        let (rows, png_sha) = last.split_once(' ').unwrap_or_else(|| panic!("{api}: {printed}"));
        assert!(rows.parse::<u64>().unwrap() > 100_000, "{api}: {printed}");

        // The model reads the report and two links, not the files: a few
        // hundred bytes, far under the 8 KiB of output it may read.
        let content = result["content"].as_array().unwrap();
        let links: Vec<&Value> = content.iter().filter(|c| c["type"] == "resource_link").collect();
        let names: Vec<&str> = links.iter().map(|l| l["name"].as_str().unwrap_or_default()).collect();
        assert_eq!(names, ["clean.csv", "daily.png"], "{api}: {content:?}");
        assert_eq!(links[0]["size"], expected_csv.len(), "{api}");
        assert_eq!(report["files"][0]["uri"], links[0]["uri"], "{api}: {report}");
        let whole = result.to_string();
        assert!(whole.len() < 8 * 1024, "{api}: the whole result is {} bytes: {whole}", whole.len());

        // Read back through the same server, byte for byte.
        let read = results[1]["result"].as_array().unwrap_or_else(|| panic!("{api}: {:.2000}", results[1]));
        let csv = &read[0]["contents"][0];
        let csv = csv["text"].as_str().map(|t| t.as_bytes().to_vec()).unwrap_or_else(|| {
            base64::engine::general_purpose::STANDARD.decode(csv["blob"].as_str().unwrap_or_default()).unwrap()
        });
        assert_eq!(sha256(&csv), sha256(&expected_csv), "{api}: the cleaned CSV differs from pandas outside");
        let png = read[1]["contents"][0]["blob"].as_str().unwrap_or_else(|| panic!("{api}: {stderr}"));
        let png = base64::engine::general_purpose::STANDARD.decode(png).unwrap();
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{api}: not a PNG");
        assert_eq!(sha256(&png), png_sha, "{api}: the PNG read back is not the one the cell wrote");
        assert_eq!(links[1]["size"], png.len(), "{api}");

        // The audit names the file in by its tool, and the read's record
        // keeps its size and hash (of the base64 the server sent).
        let records: Vec<Value> =
            std::fs::read_to_string(&audit).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let start = records.iter().find(|r| r["kind"] == "cell_start").expect("a cell_start record");
        assert_eq!(start["inputs"], json!([{"name": "raw.csv", "tool": "fs__read_media_file"}]), "{start}");
        let read = records.iter().find(|r| r["server"] == "fs" && r["tool"] == "read_media_file").expect("its record");
        let base64 = base64::engine::general_purpose::STANDARD.encode(raw.as_bytes());
        let kept = (read["result_bytes"].as_u64(), read["result_sha256"].as_str());
        assert_eq!(kept, (Some(base64.len() as u64), Some(sha256(base64.as_bytes()).as_str())), "{read}");
    }
    let _ = std::fs::remove_dir_all(&scratch);
}
