//! Files out's limits under each runtime (issue 42): `runc::*` and
//! `runsc::*` (gVisor) run the same cells through `code-mode serve --http
//! --runtime R`: names with `..` and symlinks (to `/etc/passwd`, to `/etc`)
//! refused and said so, nothing written beside `/tmp/out`; past the count
//! (64) the collection ends with a line; past the run's bytes the sandbox's
//! 16 MiB `/tmp` stops the code's own write first (`ENOSPC`); and a 100 MB
//! binary written slowly stops there too, what was written offered at its
//! real size.

use serde_json::json;

use crate::auth::{TokenFile, connect_as, serve, token_new};
use crate::files_out::links;
use crate::http::run_python;
use code_mode_sandbox_runner::container::Runtime;

use crate::support;

const ESCAPES: &str = r#"
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

/// 5 files of 4 MiB: 20 MiB asked, past the 16 MiB of `/tmp`.
const PAST_THE_BYTES: &str = r#"
written = 0
for i in range(5):
    try:
        save_file(f"part{i}.bin", b"x" * (4 * 1024 * 1024))
        written += 1
    except OSError as e:
        print("OSError", e.errno, "after", written, "files")
        break
"#;

/// 100 MB in 256 KiB writes, 20 ms apart, until the folder is full.
const SLOW_100_MB: &str = r#"
import time
block = bytes(range(256)) * 1024
written = 0
with open("/tmp/out/big.bin", "wb", buffering=0) as f:
    try:
        while written < 100 * 1000 * 1000:
            written += f.write(block)
            time.sleep(0.02)
    except OSError as e:
        print("OSError", e.errno, "at", written)
"#;

async fn files_out_limits_hold_and_each_ends_as_stated() {
    let alice = token_new("alice");
    let tokens = TokenFile::of(&[&alice]);
    let runtime = support::runtime_flag().expect("a runtime chosen");
    let args = ["--warm", "0", "--runtime", runtime, "--deadline", "60", "--auth-tokens", tokens.arg()];
    let (_serve, url, _log) = serve(&args).await;
    let client = connect_as(&url, &alice, ()).await;

    let result = run_python(&client, ESCAPES).await;
    let report = support::report(&result);
    let stdout = report["stdout"].as_str().unwrap();
    for name in ["'../escaped'", "'/etc/x'", "'a/../../b'"] {
        assert!(stdout.contains(&format!("refused {name}")), "{stdout}");
    }
    let listed = stdout.lines().last().unwrap();
    assert!(!listed.contains("escaped") && !listed.contains("'b'"), "nothing was written beside /tmp/out: {stdout}");
    let mut notes: Vec<&str> = report["files_notes"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
    notes.sort();
    assert_eq!(
        notes,
        [
            "'etc': a symlink: refused (only regular files under /tmp/out are handed out)",
            "'passwd': a symlink: refused (only regular files under /tmp/out are handed out)"
        ],
        "{report}"
    );
    let names: Vec<String> = links(&result).into_iter().map(|l| l.0).collect();
    assert_eq!(names, ["ok.txt"], "{report}");

    let many = "for i in range(70):\n    save_file(f'f{i:02}.txt', str(i))\n";
    let result = run_python(&client, many).await;
    let report = support::report(&result);
    assert_eq!(links(&result).len(), 64, "{report}");
    assert_eq!(
        report["files_notes"],
        json!(["'f64.txt' and any later files not handed out: a run hands out at most 64 files"]),
        "{report}"
    );

    let result = run_python(&client, PAST_THE_BYTES).await;
    let report = support::report(&result);
    assert_eq!(report["stdout"], "OSError 28 after 4 files\n", "ENOSPC at the fifth file: {report}");
    let offered = links(&result);
    let total: u64 = offered.iter().map(|l| l.3).sum();
    assert!(total <= 16 * 1024 * 1024, "{offered:?}");
    let whole: Vec<&str> = offered.iter().filter(|l| l.3 == 4 * 1024 * 1024).map(|l| l.0.as_str()).collect();
    assert_eq!(whole, ["part0.bin", "part1.bin", "part2.bin", "part3.bin"], "{offered:?}");
    eprintln!("past the bytes: offered {:?}", offered.iter().map(|l| (&l.0, l.3)).collect::<Vec<_>>());

    let result = run_python(&client, SLOW_100_MB).await;
    let report = support::report(&result);
    let stdout = report["stdout"].as_str().unwrap_or_default();
    let written: u64 = stdout
        .strip_prefix("OSError 28 at ")
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("the slow write stops at ENOSPC: {report}"));
    assert!(written <= 16 * 1024 * 1024, "{written}");
    let offered = links(&result);
    assert_eq!(offered.len(), 1, "{report}");
    assert_eq!((offered[0].0.as_str(), offered[0].3), ("big.bin", written), "offered at its real size: {report}");
    eprintln!("{runtime}: the slow 100 MB write stopped at {written} bytes (ENOSPC), offered whole at that size");
    client.cancel().await.ok();
}

/// Run an async scenario under `runtime`, when the sandbox is available.
fn scenario<F: std::future::Future<Output = ()>>(runtime: Runtime, test: impl FnOnce() -> F) {
    support::under(runtime, || {
        if !support::sandbox_available() {
            return;
        }
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        rt.block_on(test());
    });
}

mod runc {
    #[test]
    fn files_out_limits_hold_and_each_ends_as_stated() {
        super::scenario(super::Runtime::Runc, super::files_out_limits_hold_and_each_ends_as_stated)
    }
}

mod runsc {
    #[test]
    fn files_out_limits_hold_and_each_ends_as_stated() {
        super::scenario(super::Runtime::Runsc, super::files_out_limits_hold_and_each_ends_as_stated)
    }
}
