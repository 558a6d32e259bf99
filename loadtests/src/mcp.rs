//! Cells through MCP stdio: `code-mode serve` as a child process, driven by
//! an rmcp client over its stdin/stdout, as an MCP client such as Claude
//! Code drives it. The latency of one sample is the `run_python` call as
//! the client sees it, JSON-RPC over pipes included.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;

/// Pause between two samples, unmeasured: long enough for a warm pool to
/// refill, so both kinds of session are measured alike.
const PAUSE: Duration = Duration::from_millis(600);

/// Start `code-mode serve [extra] -- server`, run `warmup` then `samples`
/// cells of `code` one after the other in its one client session, and
/// return the measured latencies. The process is stopped before returning.
pub async fn latency(
    code_mode: &Path,
    extra: &[&str],
    server: &[String],
    code: &str,
    warmup: usize,
    samples: usize,
) -> anyhow::Result<Vec<Duration>> {
    let mut command = tokio::process::Command::new(code_mode);
    command.arg("serve").args(extra).arg("--").args(server);
    let (transport, _stderr) = TokioChildProcess::builder(command)
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {}", code_mode.display()))?;
    let client = ().serve(transport).await.context("the MCP handshake with code-mode serve")?;
    let mut measured = Vec::with_capacity(samples);
    let ran = async {
        for i in 0..warmup + samples {
            tokio::time::sleep(PAUSE).await;
            let mut params = CallToolRequestParams::new("run_python");
            params.arguments = Some(serde_json::json!({ "code": code }).as_object().cloned().unwrap_or_default());
            let started = Instant::now();
            let result = client.peer().call_tool(params).await.context("run_python")?;
            let elapsed = started.elapsed();
            let stdout = result.structured_content.as_ref().and_then(|s| s["stdout"].as_str()).unwrap_or_default();
            ensure!(result.is_error != Some(true) && stdout == "1\n", "unexpected result: {result:?}");
            if i >= warmup {
                measured.push(elapsed);
            }
        }
        anyhow::Ok(())
    }
    .await;
    client.cancel().await.ok();
    ran.map(|()| measured)
}
