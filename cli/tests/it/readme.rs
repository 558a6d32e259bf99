//! The examples in README.md run as written.

use std::process::Command;

use serde_json::Value;

use crate::support;

fn readme() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).expect("README.md")
}

/// The first block of `lang` that starts with `starts`.
fn block(text: &str, lang: &str, starts: &str) -> String {
    let fence = format!("```{lang}\n");
    text.split(&fence)
        .skip(1)
        .map(|rest| rest.split("\n```").next().unwrap_or(""))
        .find(|b| b.trim_start().starts_with(starts))
        .unwrap_or_else(|| panic!("README.md has a ```{lang} block starting with {starts:?}"))
        .to_string()
}

#[test]
fn the_several_servers_example_of_the_readme_runs_as_written() {
    if !support::sandbox_available() {
        return;
    }
    let text = readme();
    let config = block(&text, "json", "{\"mcpServers\"");
    let command = block(&text, "sh", "NOTES_TOKEN=");
    let dir = code_mode_core::testing::TempDir::new("readme");
    let config_path = dir.0.join("servers.json");
    std::fs::write(&config_path, config).unwrap();
    // Run the README's command from the workspace root, with the config in
    // place of `servers.json` and the binary under test.
    let command = command
        .replace("servers.json", config_path.to_str().unwrap())
        .replace("./target/debug/code-mode ", &format!("{} ", support::code_mode().display()));
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let out = Command::new("bash").arg("-c").arg(&command).current_dir(root).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["stdout"], "{\"sum\":3}\nt0k\n", "{report}");
}
