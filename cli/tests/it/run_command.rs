//! `code-mode run`: one cell, its report on stdout, exit codes.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::support::{self, run};

#[test]
fn gathered_tool_calls_return_their_results_in_order() {
    if !support::sandbox_available() {
        return;
    }
    let code = r#"import asyncio, json
r = await asyncio.gather(*(add({"a": n, "b": 10}) for n in range(3)))
print([json.loads(x)["sum"] for x in r])"#;
    let ran = run(&[], code, &[]);
    assert_eq!(ran.ok(), "[10, 11, 12]\n");
    assert!(!ran.truncated() && !ran.stopped());
}

#[test]
fn the_report_of_code_mode_run_says_the_files_a_cell_writes_are_not_kept() {
    if !support::sandbox_available() {
        return;
    }
    // `code-mode run` keeps no file store (issue 42): its report says the
    // files were not handed out, and where they are.
    let code = "open('/tmp/out/a.csv', 'w').write('x,y\\n1,2\\n')\nsave_file('b.txt', 'b')\nprint('written')";
    let ran = run(&[], code, &[]);
    assert_eq!(ran.ok(), "written\n");
    assert_eq!(
        ran.report["files_notes"],
        serde_json::json!(["2 file(s) of /tmp/out not handed out: no file store here (`code-mode serve` offers \
                            them, and the services over NATS with the bucket codemode_files)"]),
        "{}",
        ran.report
    );
    assert!(ran.report.get("files").is_none_or(|f| f.as_array().is_none_or(Vec::is_empty)), "{}", ran.report);
}

#[test]
fn code_mode_run_with_out_writes_the_cells_files_and_its_whole_output_to_a_host_folder_never_through_a_symlink() {
    if !support::sandbox_available() {
        return;
    }
    // `--out DIR` (issue 42): the files land under DIR, output.txt too
    // when the output was cut; a name through a symlink already in DIR is
    // not followed, an existing file is not replaced.
    let dir = support::log_path("run-out");
    let elsewhere = support::log_path("run-out-elsewhere");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, dir.join("link")).unwrap();
    std::fs::write(dir.join("kept.txt"), "mine").unwrap();
    let code = "save_file('a/b.txt', 'hi')\nopen('/tmp/out/c.bin', 'wb').write(bytes(range(256)))\n\
                save_file('link/x.txt', 'x')\nsave_file('kept.txt', 'theirs')\nprint('y' * 20000)";
    let ran = run(&["--out", dir.to_str().unwrap()], code, &[]);
    assert_eq!(std::fs::read_to_string(dir.join("a/b.txt")).unwrap(), "hi");
    assert_eq!(std::fs::read(dir.join("c.bin")).unwrap(), (0..=255u8).collect::<Vec<u8>>());
    assert_eq!(std::fs::read_to_string(dir.join("output.txt")).unwrap(), format!("{}\n", "y".repeat(20000)));
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0, "nothing written through the symlink");
    assert_eq!(std::fs::read_to_string(dir.join("kept.txt")).unwrap(), "mine", "an existing file stays");
    let notes: Vec<String> = serde_json::from_value(ran.report["files_notes"].clone()).unwrap();
    let said = |what: &str| notes.iter().any(|n| n.contains(what));
    assert!(said(&format!("'a/b.txt' (2 bytes) written to {}", dir.join("a/b.txt").display())), "{notes:?}");
    assert!(said("'link/x.txt' not written: ") && said("is not a folder (a symlink is not followed)"), "{notes:?}");
    assert!(said("'kept.txt' not written: ") && said("an existing file is not replaced"), "{notes:?}");
    assert!(ran.report.get("files").is_none_or(|f| f.as_array().is_none_or(Vec::is_empty)), "{}", ran.report);
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_dir_all(&elsewhere).unwrap();
}

#[test]
fn the_code_can_come_from_a_file_or_from_stdin() {
    if !support::sandbox_available() {
        return;
    }
    let path = support::log_path("code");
    std::fs::write(&path, "print(6 * 7)").unwrap();
    let out = Command::new(support::code_mode())
        .args(["run", "--file"])
        .arg(&path)
        .arg("--")
        .arg(support::test_server())
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["stdout"], "42\n");
    let _ = std::fs::remove_file(&path);

    let mut child = Command::new(support::code_mode())
        .args(["run", "--"])
        .arg(support::test_server())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"print('from stdin')").unwrap();
    let out = child.wait_with_output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["stdout"], "from stdin\n");
}

#[test]
fn a_cell_that_fails_still_exits_zero_with_its_error_in_the_report() {
    if !support::sandbox_available() {
        return;
    }
    let ran = run(&[], "print('before')\nraise ValueError('bad value')", &[]);
    assert_eq!(ran.stdout(), "before\n");
    assert!(ran.error().unwrap().ends_with("ValueError: bad value"), "{:?}", ran.error());
    assert!(!ran.stopped());
}

#[test]
fn without_a_docker_engine_run_fails_saying_what_is_missing() {
    let out = Command::new(support::code_mode())
        .args(["run", "--code", "print(1)", "--"])
        .arg(support::test_server())
        .env("DOCKER_HOST", "unix:///nonexistent/docker.sock")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no Docker engine answers at unix:///nonexistent/docker.sock"), "{stderr}");
    assert!(stderr.contains("DOCKER_HOST"), "{stderr}");
    assert!(out.stdout.is_empty(), "no report when code-mode could not run");
}

#[test]
fn a_missing_custom_image_is_named_with_how_to_get_one() {
    if !support::sandbox_available() {
        return;
    }
    let out = support::command(&["--image", "code-mode-no-such-image:1"], "print(1)", &[]).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("code-mode-no-such-image:1 does not exist"), "{stderr}");
    assert!(stderr.contains("code-mode build-image"), "{stderr}");
}

/// Wait until `pid` owns a sandbox container; panics after 20 s.
fn wait_for_container(pid: u32) -> Vec<String> {
    for _ in 0..200 {
        let ids = support::containers_of(pid);
        if !ids.is_empty() {
            return ids;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("no container of {pid} appeared");
}

fn signal(pid: u32, sig: &str) {
    let status = Command::new("kill").args(["-s", sig, &pid.to_string()]).status().unwrap();
    assert!(status.success());
}

#[test]
fn an_interrupted_run_removes_its_container() {
    if !support::sandbox_available() {
        return;
    }
    let child = support::command(&[], "import time\ntime.sleep(60)", &[]).spawn().unwrap();
    let pid = child.id();
    wait_for_container(pid);
    signal(pid, "INT");
    let out = child.wait_with_output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    assert_eq!(report["stopped"], true, "the cell reports it was stopped: {report}");
    assert!(support::containers_of(pid).is_empty(), "the container was removed on SIGINT");
}

#[test]
fn containers_left_by_a_killed_process_are_reaped_at_the_next_start() {
    if !support::sandbox_available() {
        return;
    }
    let mut child = support::command(&[], "import time\ntime.sleep(60)", &[]).spawn().unwrap();
    let pid = child.id();
    let left = wait_for_container(pid);
    signal(pid, "KILL");
    child.wait().unwrap();
    assert!(!left.is_empty(), "the killed process had started a container");
    // SIGKILL gives no chance to clean up: only a reaper removes it (this
    // run's, or a parallel test's, which only reaps containers of dead owners).
    run(&[], "print('next')", &[]);
    assert!(support::containers_of(pid).is_empty(), "the next start reaped it");
}

#[test]
fn settings_come_from_a_file_and_the_environment_under_the_flags() {
    if !support::sandbox_available() {
        return;
    }
    let dir = code_mode_core::testing::TempDir::new("settings-e2e");
    let file = dir.0.join("code-mode.toml");
    std::fs::write(&file, "[run]\nmax-calls = 1\nallow = [\"add\"]\n").unwrap();
    let code = "import json\nprint(sorted(TOOLS))\nfor i in range(3):\n    try:\n        await add({'a': i, 'b': 0})\n        print('ok')\n    except ToolError as e:\n        print('refused')";
    let with = |extra: &[&str], env: &[(&str, &str)]| {
        let mut cmd = support::command(extra, code, &[]);
        cmd.env("CODE_MODE_SETTINGS", &file);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        report["stdout"].as_str().unwrap().to_string()
    };
    assert_eq!(with(&[], &[]), "['add']\nok\nrefused\nrefused\n", "the file's max-calls and allow apply");
    assert_eq!(
        with(&[], &[("CODE_MODE_RUN__MAX_CALLS", "2")]),
        "['add']\nok\nok\nrefused\n",
        "the environment overrides the file"
    );
    assert_eq!(
        with(&["--max-calls", "3"], &[("CODE_MODE_RUN__MAX_CALLS", "2")]),
        "['add']\nok\nok\nok\n",
        "a flag overrides both"
    );
    // `--settings` before the subcommand is the same file, not dropped.
    let mut before = Command::new(support::code_mode());
    before.arg("--settings").arg(&file).args(["run", "--code", code, "--"]).arg(support::test_server());
    let out = before.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["stdout"], "['add']\nok\nrefused\nrefused\n", "--settings before `run` applies");
    let out = support::command(&[], "print(1)", &[]).env("CODE_MODE_RUN__MAX_CAL", "2").output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("CODE_MODE_RUN__MAX_CAL: [run] max_cal: no such setting"), "{stderr}");
}

#[test]
fn a_cell_without_top_level_await_may_run_its_own_event_loop() {
    if !support::sandbox_available() {
        return;
    }
    let code = "import asyncio\nasync def main():\n    return await add({'a': 2, 'b': 3})\nprint(asyncio.run(main()))";
    assert_eq!(run(&[], code, &[]).ok(), "{\"sum\":5}\n");
}

#[test]
fn a_settings_file_given_before_the_subcommand_is_read_not_dropped() {
    // Needs no Docker: the file's unknown key stops startup before anything
    // starts, which shows the file was read.
    let dir = code_mode_core::testing::TempDir::new("settings-before");
    let file = dir.0.join("code-mode.toml");
    std::fs::write(&file, "[run]\nmax-calls = 1\nno-such-setting = 2\n").unwrap();
    let out = Command::new(support::code_mode())
        .arg("--settings")
        .arg(&file)
        .args(["run", "--code", "print(1)", "--"])
        .arg(support::test_server())
        .env("DOCKER_HOST", "unix:///nonexistent/docker.sock")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(&format!("{}: [run] no-such-setting: no such setting", file.display())), "{stderr}");
    assert!(out.stdout.is_empty());
}

#[test]
fn numbers_out_of_range_stop_startup_naming_the_option_value_and_range_without_a_panic() {
    let refused = |args: &[&str], env: &[(&str, &str)]| {
        let mut cmd = Command::new(support::code_mode());
        cmd.args(args).env("DOCKER_HOST", "unix:///nonexistent/docker.sock");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?} exits 2, not 101 (a panic)");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let stderr = refused(&["run", "--deadline", "1e20", "--code", "1", "--", "srv"], &[]);
    assert!(
        stderr.contains(
            "invalid value '1e20' for '--deadline <SECONDS>': out of range; a number of seconds from 0.001 to 86400 \
             is allowed"
        ),
        "{stderr}"
    );
    let stderr = refused(&["serve", "--max-concurrent", "18446744073709551615", "--", "srv"], &[]);
    assert!(stderr.contains("'18446744073709551615' for '--max-concurrent <N>'"), "{stderr}");
    assert!(stderr.contains("a whole number from 1 to 1024"), "{stderr}");
    let stderr =
        refused(&["frontend", "--nats", "nats://127.0.0.1:1"], &[("CODE_MODE_FRONTEND__CAPACITY_WAIT", "inf")]);
    assert!(
        stderr.contains("CODE_MODE_FRONTEND__CAPACITY_WAIT: [frontend] capacity_wait: \"inf\": out of range"),
        "{stderr}"
    );
}

#[test]
fn a_run_stopped_at_its_deadline_says_what_to_do_with_a_longer_job() {
    if !support::sandbox_available() {
        return;
    }
    let ran = run(&["--deadline", "2"], "import time\ntime.sleep(30)", &[]);
    assert!(ran.stopped(), "{ran:#?}");
    let error = ran.error().unwrap_or_default();
    assert!(error.starts_with("stopped: the run passed its 2 s deadline. "), "{error}");
    for hint in
        ["For a longer job, do it in shorter runs, each printing what the next needs", "--keep-variables", "--deadline"]
    {
        assert!(error.contains(hint), "{hint:?} is not in: {error}");
    }
}

#[test]
fn a_cell_printing_more_than_8_kib_keeps_its_head_and_its_closing_lines_and_says_how_much_was_cut_between() {
    if !support::sandbox_available() {
        return;
    }
    let code = "for i in range(3000):\n    print(f'row {i}')\nprint('SUMMARY: 3000 rows, 0 errors')";
    let ran = run(&[], code, &[]);
    let printed: String =
        (0..3000).map(|i| format!("row {i}\n")).chain(["SUMMARY: 3000 rows, 0 errors\n".into()]).collect();
    let stdout = ran.ok();
    assert!(ran.truncated() && !ran.stopped(), "{ran:#?}");
    assert!(stdout.len() <= 8192, "{} bytes", stdout.len());
    let (head, rest) = stdout.split_once("\n[... ").expect("a line says what was cut");
    let (cut, tail) = rest.split_once(" bytes of output cut here ...]\n").expect("how many bytes");
    assert!(printed.starts_with(head) && head.len() == 6144, "the first 6 KiB: {} bytes", head.len());
    assert!(printed.ends_with(tail) && tail.ends_with("row 2999\nSUMMARY: 3000 rows, 0 errors\n"), "{tail}");
    assert!(tail.starts_with("row "), "the tail starts at a line: {tail}");
    assert_eq!(cut.parse::<usize>().unwrap(), printed.len() - head.len() - tail.len(), "the bytes cut between");
    // Output that fits is whole, with no such line.
    let small = run(&[], "print('x' * 8000)", &[]);
    assert_eq!(small.ok(), format!("{}\n", "x".repeat(8000)));
    assert!(!small.truncated());
}

#[test]
fn a_wrapped_server_that_keeps_running_after_its_input_closes_is_ended_by_sigterm_when_run_ends() {
    if !support::sandbox_available() {
        return;
    }
    // The server lingers after its input closes until SIGTERM, and records
    // the signal in its log; before, `run` waited 2 s and then killed it
    // (no SIGTERM was sent within that wait).
    let log = support::log_path("linger");
    let log_arg = log.display().to_string();
    let ran = run(&[], "print(1)", &["--linger", "--log", &log_arg]);
    assert_eq!(ran.ok(), "1\n");
    let requests = std::fs::read_to_string(&log).unwrap();
    assert!(requests.lines().any(|l| l == "SIGTERM -"), "ended by SIGTERM: {requests}");
    assert!(!ran.stderr().contains("did not close in time"), "{}", ran.stderr());
    let _ = std::fs::remove_file(&log);
}
