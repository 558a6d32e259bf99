//! What the model reads of real servers' tools, over their real `tools/list`.
//!
//! `testing/search-eval/tools/*.json` holds what four real reference servers
//! list (npm `@modelcontextprotocol/server-everything`, `-memory`,
//! `-filesystem`, PyPI `mcp-server-time`); one test starts them and checks
//! the files are still exactly that (`UPDATE_FIXTURES=1` rewrites them).

use std::path::PathBuf;
use std::time::Duration;

use code_mode_bridge::server::{self, ServerSpec, StdioSpec, Transport};
use code_mode_core::testing::peers::{npm_bin, venv_bin, workspace_root};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// The folder of the evaluation set.
pub fn eval_dir() -> PathBuf {
    workspace_root().join("testing/search-eval")
}

/// A folder for the filesystem and memory servers, removed after the test.
fn scratch() -> PathBuf {
    std::env::temp_dir().join(format!("code-mode-search-fixtures-{}", std::process::id()))
}

/// The four real servers, by the names their tools get as a prefix, in the
/// order of the catalog: (name, command, args, environment).
fn real_servers() -> Option<Vec<(&'static str, String, Vec<String>, Vec<(String, String)>)>> {
    let scratch = scratch();
    std::fs::create_dir_all(&scratch).ok()?;
    let memory_file = scratch.join("memory.jsonl").display().to_string();
    Some(vec![
        ("everything", npm_bin("mcp-server-everything")?.display().to_string(), vec!["stdio".into()], vec![]),
        (
            "memory",
            npm_bin("mcp-server-memory")?.display().to_string(),
            vec![],
            vec![("MEMORY_FILE_PATH".into(), memory_file)],
        ),
        (
            "filesystem",
            npm_bin("mcp-server-filesystem")?.display().to_string(),
            vec![scratch.display().to_string()],
            vec![],
        ),
        ("time", venv_bin("mcp-server-time")?.display().to_string(), vec![], vec![]),
    ])
}

#[tokio::test]
async fn the_committed_tool_lists_are_what_the_real_servers_list() {
    let Some(servers) = real_servers() else { return };
    let update = std::env::var_os("UPDATE_FIXTURES").is_some();
    for (name, command, args, set_env) in servers {
        let spec = ServerSpec {
            name: name.into(),
            transport: Transport::Stdio(StdioSpec { command, args, pass_env: vec![], set_env }),
            start_timeout: Duration::from_secs(60),
        };
        let cancel = CancellationToken::new();
        let (handle, tools, actor) = server::start(&spec, cancel.clone()).await.expect("the real server starts");
        cancel.cancel();
        drop(handle);
        let _ = actor.await;
        let listed = serde_json::to_value(&tools).expect("tools are JSON");
        let path = eval_dir().join("tools").join(format!("{name}.json"));
        if update {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, serde_json::to_string_pretty(&listed).unwrap() + "\n").unwrap();
            continue;
        }
        let committed: Value = serde_json::from_str(&std::fs::read_to_string(&path).expect("the fixture exists"))
            .expect("the fixture is JSON");
        assert_eq!(listed, committed, "{name} lists other tools than {}: rerun with UPDATE_FIXTURES=1", path.display());
    }
    let _ = std::fs::remove_dir_all(scratch());
}
