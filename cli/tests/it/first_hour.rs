//! What a new user meets when a command line is wrong: messages that say
//! what to do instead (no Docker engine or server is needed for these).

use std::process::Command;

use crate::support;

/// Run `code-mode` with `args`; its exit code and stderr.
fn code_mode(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(support::code_mode()).args(args).output().expect("code-mode runs");
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn a_server_command_without_the_separator_is_refused_showing_the_three_forms() {
    for command in ["serve", "run", "bridge"] {
        let (code, stderr) = code_mode(&[command, "/path/to/server"]);
        assert_eq!(code, Some(2), "{stderr}");
        assert!(
            stderr.contains("unexpected argument \"/path/to/server\": a server's command goes after `--`"),
            "{stderr}"
        );
        assert!(stderr.contains(&format!("code-mode {command} [OPTIONS] -- <server command>")), "{stderr}");
        assert!(stderr.contains(&format!("code-mode {command} [OPTIONS] --config servers.json")), "{stderr}");
        assert!(stderr.contains(&format!("code-mode {command} [OPTIONS] --url https://host/mcp")), "{stderr}");
    }
}

#[test]
fn a_command_that_wraps_nothing_is_refused_showing_the_three_forms() {
    for args in [&["serve"][..], &["run", "--code", "print(1)"], &["--settings", "/dev/null", "serve"]] {
        let (code, stderr) = code_mode(args);
        assert_eq!(code, Some(2), "{stderr}");
        assert!(stderr.contains("no server to wrap"), "{args:?}: {stderr}");
        assert!(stderr.contains("-- <server command>") && stderr.contains("--config servers.json"), "{stderr}");
    }
    // Other mistakes keep clap's own message.
    let (code, stderr) = code_mode(&["serve", "--no-such-flag"]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("unexpected argument '--no-such-flag'"), "{stderr}");
}

#[test]
fn the_config_option_says_it_takes_remote_servers_too() {
    let out = Command::new(support::code_mode()).args(["serve", "--help"]).output().expect("code-mode runs");
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("remote ones (streamable HTTP) with `\"url\"`"), "{help}");
    assert!(!help.contains("the stdio servers of this JSON file"), "{help}");
}
