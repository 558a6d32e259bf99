//! Sandboxes with packages, as the model meets them: the description names
//! what the code can import, `PACKAGES` in the code holds the same, a chart
//! drawn with matplotlib goes back to the model as an image, and a package
//! that misbehaves at import is held by the same lock-down as any code.
//! (Building images is in `image_build.rs`; the threat model's tests also
//! run on the data-science image: `threat_model::packages_runc::*` and
//! `threat_model::packages_runsc::*`.)

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use code_mode_sandbox_runner::container::Runtime;
use serde_json::Value;

use crate::support::{self, Deployment};

/// The `run_python` description once it satisfies `ok` (the runners tell
/// the bridge their packages a moment after the start), or the last one
/// after 20 s.
async fn description_when(client: &support::Client, ok: impl Fn(&str) -> bool) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let tools = client.peer().list_all_tools().await.expect("tools/list answers");
        let text = tools[0].description.as_deref().unwrap_or_default().to_string();
        if ok(&text) || tokio::time::Instant::now() > deadline {
            return text;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

async fn printed(client: &support::Client, code: &str) -> String {
    let (stdout, error) = support::outcome(&support::run_python(client, code).await).expect("the cell ran");
    assert_eq!(error, None, "{stdout}");
    stdout
}

async fn the_description_names_the_packages_and_the_code_finds_them_in_packages(deployment: Deployment) {
    if !support::sandbox_available() {
        return;
    }
    let requirements = support::data_science();
    support::package_image(&requirements);
    let (client, _pid, _guards) =
        support::start(deployment, &["--requirements", requirements.to_str().unwrap()], &[]).await;
    let text = description_when(&client, |d| d.contains("numpy 2.2.6")).await;
    for named in ["numpy 2.2.6", "pandas 2.2.3", "matplotlib 3.9.4", "PACKAGES maps each name to its version"] {
        assert!(text.contains(named), "{named} is not in the description: {text}");
    }
    assert!(!text.contains("standard library only"), "{text}");
    let out = printed(&client, "print(PACKAGES['numpy'], PACKAGES['pandas'], 'pip' in PACKAGES)").await;
    assert_eq!(out.trim(), "2.2.6 2.2.3 False");
    client.cancel().await.ok();

    // The default image: the standard library only, and PACKAGES is empty.
    let (client, _pid, _guards) = support::start(deployment, &[], &[]).await;
    let text = description_when(&client, |d| d.contains("standard library only")).await;
    assert!(text.contains("(no network, standard library only,"), "{text}");
    assert!(!text.contains("PACKAGES"), "{text}");
    let out = printed(&client, "import importlib.util\nprint(dict(PACKAGES), importlib.util.find_spec('numpy'))").await;
    assert_eq!(out.trim(), "{} None");
    client.cancel().await.ok();
}

#[tokio::test]
async fn through_serve_the_description_names_the_images_packages_and_the_code_finds_them_in_packages() {
    the_description_names_the_packages_and_the_code_finds_them_in_packages(Deployment::AllInOne).await;
}

#[tokio::test]
async fn over_nats_the_description_names_the_runners_packages_and_the_code_finds_them_in_packages() {
    the_description_names_the_packages_and_the_code_finds_them_in_packages(Deployment::OverNats).await;
}

#[test]
fn a_cell_draws_a_chart_with_matplotlib_and_hands_it_back_to_the_model_as_an_image() {
    if !support::sandbox_available() {
        return;
    }
    let requirements = support::data_science();
    support::package_image(&requirements);
    let code = r#"
import io
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
frame = pd.DataFrame({"x": np.arange(10), "y": np.arange(10) ** 2})
figure, axes = plt.subplots(figsize=(4, 3), dpi=80)
axes.plot(frame.x, frame.y)
picture = io.BytesIO()
figure.savefig(picture, format="png")
show(picture.getvalue(), "image/png")
print(int(frame.y.sum()), PACKAGES["matplotlib"])
"#;
    let ran = support::run(&["--requirements", requirements.to_str().unwrap(), "--deadline", "60"], code, &[]);
    let last = ran.ok().lines().last().unwrap_or_default().to_string();
    assert_eq!(last, "285 3.9.4");
    let content = ran.report["content"].as_array().expect("handed-back content");
    assert_eq!(content.len(), 1, "{content:?}");
    assert_eq!(content[0]["type"], "image");
    assert_eq!(content[0]["mimeType"], "image/png");
    let png = base64::engine::general_purpose::STANDARD.decode(content[0]["data"].as_str().unwrap()).unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    // 320 by 240 pixels, as drawn.
    assert_eq!(&png[16..24], &[0, 0, 1, 64, 0, 0, 0, 240]);
}

/// What the hostile package does when imported: open sockets, run
/// programs, write where it should not, read the environment; each
/// attempt's outcome is kept in `SEEN`.
const HOSTILE: &str = r#"import os, socket, subprocess
SEEN = {}
def attempt(name, action):
    try:
        SEEN[name] = action()
    except Exception as e:
        SEEN[name] = type(e).__name__
def connect():
    socket.create_connection(("1.1.1.1", 53), timeout=2).close()
    return "connected"
def write(path):
    with open(path, "w") as f:
        f.write("x")
    return "written"
def status():
    text = subprocess.run(["cat", "/proc/self/status"], capture_output=True, text=True, timeout=10).stdout
    return {k: v.strip() for k, v in (l.split(":", 1) for l in text.splitlines()) if k in ("Uid", "CapEff", "Seccomp")}
attempt("connect", connect)
attempt("resolve", lambda: socket.gethostbyname("pypi.org"))
attempt("program", status)
attempt("shell", lambda: subprocess.run(["sh", "-c", "echo $((6 * 7))"], capture_output=True, text=True, timeout=10).stdout.strip())
attempt("write_root", lambda: write("/hostile"))
attempt("write_itself", lambda: write(os.path.join(os.path.dirname(__file__), "changed.py")))
attempt("environment", lambda: sorted(k for k in os.environ if "SECRET" in k or "TOKEN" in k))
"#;

/// A wheel of `hostile` 1.0 (pure Python) in `dir`, written by the host's
/// python3 (zipfile and hashlib: a wheel is a zip with a RECORD of hashes).
fn hostile_wheel(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let script = r#"
import base64, hashlib, sys, zipfile
out, source = sys.argv[1], sys.stdin.read()
files = {
    "hostile/__init__.py": source,
    "hostile-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: hostile\nVersion: 1.0\n",
    "hostile-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: code-mode-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
def digest(text):
    return base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
record = "".join(f"{name},sha256={digest(text)},{len(text.encode())}\n" for name, text in files.items())
files["hostile-1.0.dist-info/RECORD"] = record + "hostile-1.0.dist-info/RECORD,,\n"
# Fixed dates: the same bytes every run, so the same image tag.
with zipfile.ZipFile(out + "/hostile-1.0-py3-none-any.whl", "w") as wheel:
    for name, text in files.items():
        wheel.writestr(zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0)), text)
"#;
    let mut child = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(dir)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs");
    use std::io::Write as _;
    child.stdin.take().unwrap().write_all(HOSTILE.as_bytes()).unwrap();
    assert!(child.wait().unwrap().success(), "the wheel was not written");
}

fn a_package_that_reaches_out_at_import_is_held_like_any_code(runtime: Runtime) {
    support::under(runtime, || {
        if !support::sandbox_available() {
            return;
        }
        let dir: PathBuf = std::env::temp_dir().join(format!("code-mode-hostile-{}", uuid::Uuid::new_v4().simple()));
        let wheels = dir.join("wheels");
        hostile_wheel(&wheels);
        let requirements = dir.join("requirements.txt");
        std::fs::write(&requirements, "hostile==1.0\n").unwrap();
        let wheels_arg = wheels.to_str().unwrap();
        let requirements_arg = requirements.to_str().unwrap();
        let built = std::process::Command::new(support::code_mode())
            .args(["build-image", "--requirements", requirements_arg, "--wheels", wheels_arg])
            .output()
            .expect("build-image runs");
        assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));
        let code = "import json, hostile\nprint(json.dumps(hostile.SEEN, sort_keys=True))";
        let mut command = support::command(
            &["--requirements", requirements_arg, "--wheels", wheels_arg, "--deadline", "40"],
            code,
            &[],
        );
        command.env("CODE_MODE_TEST_SECRET", "host-secret").env("GITHUB_TOKEN", "host-token");
        let ran = support::run_prepared(command);
        let seen: Value = serde_json::from_str(ran.ok().trim()).expect("the package's report");
        assert_eq!(seen["connect"], "OSError", "{seen}");
        assert_eq!(seen["resolve"], "gaierror", "{seen}");
        assert_eq!(seen["program"]["Uid"], "65534\t65534\t65534\t65534", "{seen}");
        assert_eq!(seen["program"]["CapEff"], "0000000000000000", "{seen}");
        assert_eq!(seen["program"]["Seccomp"], "2", "a seccomp filter holds the program too: {seen}");
        assert_eq!(seen["shell"], "42", "a program of the image runs, inside the same walls: {seen}");
        // Read-only (runc says so; gVisor refuses nobody first).
        for write in ["write_root", "write_itself"] {
            assert!(["OSError", "PermissionError"].contains(&seen[write].as_str().unwrap_or_default()), "{seen}");
        }
        assert_eq!(seen["environment"], serde_json::json!([]), "{seen}");
        let _ = std::fs::remove_dir_all(&dir);
    });
}

#[test]
fn under_runc_a_package_that_opens_sockets_runs_programs_and_writes_at_import_is_held_like_any_code() {
    a_package_that_reaches_out_at_import_is_held_like_any_code(Runtime::Runc);
}

#[test]
fn under_runsc_a_package_that_opens_sockets_runs_programs_and_writes_at_import_is_held_like_any_code() {
    a_package_that_reaches_out_at_import_is_held_like_any_code(Runtime::Runsc);
}

#[tokio::test]
async fn a_runner_whose_engine_lacks_the_image_it_is_given_stops_at_startup_naming_the_tag() {
    if !support::sandbox_available() {
        return;
    }
    let Some((nats, users)) = code_mode_core::testing::NatsServer::start_secured() else { return };
    let tag = "code-mode-sandbox:p-000000000000";
    let mut runner = support::service_command(&nats.url(), &users, "sandbox-runner", &["--image", tag], None);
    runner.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::piped());
    let out = tokio::time::timeout(Duration::from_secs(30), runner.output())
        .await
        .expect("the runner stops within 30 s")
        .expect("the runner ran");
    assert!(!out.status.success(), "the runner started without its image");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("the sandbox image {tag} does not exist")), "{stderr}");
}

#[test]
fn describe_names_the_packages_of_a_built_image_and_asks_for_a_build_of_a_set_not_built() {
    if !support::sandbox_available() {
        return;
    }
    let requirements = support::data_science();
    support::package_image(&requirements);
    let describe = |file: &Path| {
        std::process::Command::new(support::code_mode())
            .args(["describe", "--json", "--requirements"])
            .arg(file)
            .arg("--")
            .arg(support::test_server())
            .output()
            .expect("describe runs")
    };
    let out = describe(&requirements);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let text = report["description"].as_str().unwrap();
    assert!(text.contains("numpy 2.2.6") && text.contains("PACKAGES maps"), "{text}");

    let dir = std::env::temp_dir().join(format!("code-mode-unbuilt-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let unbuilt = dir.join("requirements.txt");
    // A set no test builds.
    std::fs::write(&unbuilt, "tabulate==0.9.0\nsix==1.16.0\n").unwrap();
    let out = describe(&unbuilt);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("is not built: run `code-mode build-image`"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_bridge_killed_and_started_again_leaves_the_packages_in_the_description_and_the_cells() {
    if !support::sandbox_available() {
        return;
    }
    let requirements = support::data_science();
    support::package_image(&requirements);
    let (client, _pid, mut guards) =
        support::start(Deployment::OverNats, &["--requirements", requirements.to_str().unwrap()], &[]).await;
    let text = description_when(&client, |d| d.contains("numpy 2.2.6")).await;
    assert!(text.contains("numpy 2.2.6"), "{text}");

    // The packages a bridge heard live in its memory only: a new bridge
    // learns them from a runner's status, and the frontend keeps what it
    // knew meanwhile. The runner is stopped first, so the new bridge hears
    // no runner for as long as the test looks (a live runner would tell it
    // within moments, and the window would be a race).
    let mut runner = guards.runner.take().expect("a runner");
    support::kill9(runner.id().expect("the runner runs"));
    runner.wait().await.expect("the killed runner is reaped");
    let mut bridge = guards.bridge.take().expect("a bridge");
    support::kill9(bridge.id().expect("the bridge runs"));
    bridge.wait().await.expect("the killed bridge is reaped");
    let nats = guards.nats_url();
    guards.bridge = Some(support::spawn_service(&nats, guards.users(), "bridge", &[], Some(&[])));
    // Through the new bridge's answers, which name no packages (it heard no
    // runner), the description keeps naming them.
    let started = std::time::Instant::now();
    while started.elapsed() < Duration::from_secs(10) {
        let tools = client.peer().list_all_tools().await.expect("tools/list answers");
        let text = tools[0].description.as_deref().unwrap_or_default();
        assert!(text.contains("numpy 2.2.6"), "{:?} after the restart: {text}", started.elapsed());
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // A runner again: cells run through the new bridge, with the packages.
    let args = ["--requirements", requirements.to_str().unwrap()];
    guards.runner = Some(support::spawn_service(&nats, guards.users(), "sandbox-runner", &args, None));
    let out = loop {
        let result = support::run_python(&client, "print(PACKAGES['numpy'])").await;
        match support::outcome(&result) {
            Ok((stdout, None)) => break stdout,
            _ if started.elapsed() < Duration::from_secs(40) => tokio::time::sleep(Duration::from_millis(500)).await,
            other => panic!("no cell ran through the new bridge: {other:?}"),
        }
    };
    assert_eq!(out, "2.2.6\n");
    client.cancel().await.ok();
}

/// The first cell of a kept session: what `PACKAGES` is and whether the
/// code can change it; then every file read fails for the code (and would
/// for the runner, sharing its interpreter, were it to read the image's
/// packages file again on the next cell's path).
const PACKAGES_FIRST: &str = "\
import builtins
first = PACKAGES
tries = []
for change in (lambda: PACKAGES.__setitem__('numpy', '0'), lambda: PACKAGES.__delitem__('numpy'),
               lambda: PACKAGES.clear(), lambda: PACKAGES.update(numpy='0'), lambda: setattr(PACKAGES, 'x', 1)):
    try:
        change()
        tries.append('changed')
    except (TypeError, AttributeError):
        tries.append('refused')
print(type(PACKAGES).__name__, tries, PACKAGES['numpy'])
real_open = builtins.open
def no_file(*args, **kwargs):
    raise OSError('no file is read now')
builtins.open = no_file
";

/// The next cell: the same mapping, read before it.
const PACKAGES_NEXT: &str = "\
builtins.open = real_open
print(PACKAGES is first, PACKAGES['numpy'], PACKAGES['pandas'])
";

#[tokio::test]
async fn packages_is_one_read_only_mapping_read_before_any_cell_and_the_same_in_every_cell_of_a_kept_session() {
    if !support::sandbox_available() {
        return;
    }
    let requirements = support::data_science();
    support::package_image(&requirements);
    let args = ["--requirements", requirements.to_str().unwrap(), "--keep-variables"];
    let (client, _pid, _guards) = support::start(Deployment::AllInOne, &args, &[]).await;
    let out = printed(&client, PACKAGES_FIRST).await;
    assert_eq!(out.trim(), "mappingproxy ['refused', 'refused', 'refused', 'refused', 'refused'] 2.2.6");
    // Were PACKAGES read from the file for this cell, it would be another
    // mapping, and an empty one (the file cannot be opened now).
    let out = printed(&client, PACKAGES_NEXT).await;
    assert_eq!(out.trim(), "True 2.2.6 2.2.3");
    client.cancel().await.ok();
}

#[tokio::test]
async fn both_python_sdk_clients_over_http_read_the_packages_in_their_first_listing_and_find_them_in_packages() {
    if !support::sandbox_available() {
        return;
    }
    let requirements = support::data_science();
    support::package_image(&requirements);
    // A client lists the tools first, as clients do on connect, and many
    // never again: that first description must name what the code can
    // import. A new server for each client, so each lists as soon as it
    // can after the start. `mcp.Client` at its defaults (the stateless
    // 2026-07-28 protocol), then `ClientSession` (initialize, 2025-11-25);
    // the data-science image, then the default one.
    let steps = serde_json::json!([
        {"op": "list_tools"},
        {"op": "call", "tool": "run_python", "arguments": {"code": "print(PACKAGES.get('pandas'))"}},
    ]);
    let images: [(&[&str], &[&str], &str); 2] = [
        (&["--requirements", requirements.to_str().unwrap()], &["numpy 2.2.6", "PACKAGES maps"], "2.2.3\n"),
        (&[], &["(no network, standard library only,"], "None\n"),
    ];
    for (args, named, printed) in images {
        for api in ["client", "session"] {
            let mut serve = tokio::process::Command::new(support::code_mode());
            serve.args(["serve", "--http", "127.0.0.1:0"]).args(args).arg("--").arg(support::test_server());
            serve.stdin(std::process::Stdio::null()).kill_on_drop(true);
            let (_serve, url, _log) = crate::http::spawn_http(&mut serve).await;
            let Some((results, stderr)) = support::python_sdk(&["--url", &url, "--api", api], &steps).await else {
                return;
            };
            let tools = results[0]["result"]["tools"].as_array().unwrap_or_else(|| panic!("{api}: {results:?}"));
            let description = tools[0]["description"].as_str().unwrap_or_default();
            for text in named {
                assert!(
                    description.contains(text),
                    "{api} {args:?}: {text:?} is not in the first listing: {description}"
                );
            }
            let out = results[1]["result"]["structuredContent"]["stdout"].as_str();
            assert_eq!(out, Some(printed), "{api}: {results:?} {stderr}");
        }
    }
}
