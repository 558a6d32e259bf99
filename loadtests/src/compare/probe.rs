//! What is read off the machine and the stacks between samples: memory,
//! load, the phases of cells, warm pools refilled, an attach-stream echo.

use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use code_mode_sandbox_runner::container::{Container, LABEL_CELL, LABEL_OWNER, LABEL_SANDBOX, Lockdown, owner_label};
use code_mode_telemetry::Phase;
use code_mode_telemetry::phases::{bridge_call_totals, phase_totals, tool_call_host_totals};
use tokio::io::AsyncWriteExt;

use super::*;
use crate::stack::Stack;

/// Resident memory of a process now and at its peak, in KiB.
pub(super) fn rss_kib(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field =
        |name: &str| status.lines().find(|l| l.starts_with(name))?.split_whitespace().nth(1)?.parse::<u64>().ok();
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

pub(super) fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// Memory of each idle warm container owned by `owner`, in MiB (`docker stats`).
pub(super) async fn idle_warm_memory(owner: &str) -> anyhow::Result<Vec<f64>> {
    idle_warm_memory_of(owner, None).await
}

/// [`idle_warm_memory`] of the containers started from `image` alone, when
/// given (matched by the image a container was started from: an
/// `ancestor` filter would also match the images built on it).
pub(crate) async fn idle_warm_memory_of(owner: &str, image: Option<&str>) -> anyhow::Result<Vec<f64>> {
    let list = tokio::process::Command::new("docker")
        .args(["ps", "--no-trunc", "--format", "{{.ID}} {{.Image}}", "--filter"])
        .arg(format!("label={LABEL_SANDBOX}"))
        .arg("--filter")
        .arg(format!("label={LABEL_OWNER}={owner}"))
        .arg("--filter")
        .arg(format!("label={LABEL_CELL}={}", code_mode_sandbox_runner::pool::WARM_CELL))
        .output()
        .await?;
    let ids: Vec<String> = String::from_utf8_lossy(&list.stdout)
        .lines()
        .filter_map(|l| l.split_once(' '))
        .filter(|(_, from)| image.is_none_or(|image| *from == image))
        .map(|(id, _)| id.to_string())
        .collect();
    if ids.is_empty() {
        return Ok(vec![]);
    }
    let stats = tokio::process::Command::new("docker")
        .args(["stats", "--no-stream", "--format", "{{.MemUsage}}"])
        .args(&ids)
        .output()
        .await?;
    // A container that stopped between the listing and the reading shows
    // 0B: it is no idle container, so it is not a figure.
    Ok(String::from_utf8_lossy(&stats.stdout)
        .lines()
        .filter_map(|l| mib(l.split('/').next()?.trim()))
        .filter(|m| *m > 0.0)
        .collect())
}

/// `12.5MiB`, `900KiB`, `1.1GiB` in MiB.
pub(crate) fn mib(text: &str) -> Option<f64> {
    let split = text.find(|c: char| c.is_ascii_alphabetic())?;
    let (number, unit) = text.split_at(split);
    let number: f64 = number.trim().parse().ok()?;
    Some(match unit {
        "B" => number / 1048576.0,
        "KiB" | "kB" => number / 1024.0,
        "MiB" | "MB" => number,
        "GiB" | "GB" => number * 1024.0,
        _ => return None,
    })
}

/// Time of the phases recorded in this process so far: (count, seconds).
pub(super) fn phases_now() -> Vec<(u64, f64)> {
    Phase::ALL.iter().map(|&p| phase_totals(p)).collect()
}

/// A container of the same image under the same lockdown whose process
/// writes back every line it reads: one line's round trip through the
/// engine's attach stream, with nothing of code-mode at either end.
pub(super) struct Echo {
    pub(super) container: Container,
    pub(super) output: code_mode_sandbox_runner::container::Output,
    pub(super) input: code_mode_sandbox_runner::container::Input,
}

/// The echo's program: read, write back, until end of input.
pub(super) const ECHO: &str =
    "import os\nwhile True:\n    d = os.read(0, 65536)\n    if not d:\n        break\n    os.write(1, d)\n";

impl Echo {
    pub(super) async fn start(docker: &bollard::Docker, lockdown: &Lockdown) -> anyhow::Result<Echo> {
        let entrypoint = ["python3", "-I", "-c", ECHO].map(String::from).to_vec();
        let (container, output, input) = Container::start_with(docker, lockdown, "compare-echo", Some(entrypoint))
            .await
            .context("starting the echo container")?;
        let mut echo = Echo { container, output, input };
        // The first line also waits for Python to start.
        match tokio::time::timeout(REFILL_BOUND, echo.round_trip()).await {
            Ok(Ok(_)) => Ok(echo),
            Ok(Err(e)) => {
                echo.container.remove().await;
                Err(e)
            }
            Err(_) => {
                echo.container.remove().await;
                anyhow::bail!("the echo container did not answer within {REFILL_BOUND:?}")
            }
        }
    }

    /// One line written and read back.
    pub(super) async fn round_trip(&mut self) -> anyhow::Result<Duration> {
        use futures::StreamExt;
        let line = br#"{"type": "result", "id": 1, "ok": true, "value": {"sum": 3}}"#;
        let started = Instant::now();
        self.input.write_all(line).await?;
        self.input.write_all(b"\n").await?;
        self.input.flush().await?;
        let mut got = Vec::new();
        while !got.ends_with(b"\n") {
            match self.output.next().await {
                Some(Ok(bollard::container::LogOutput::StdOut { message })) => got.extend_from_slice(&message),
                Some(Ok(_)) => {}
                Some(Err(e)) => anyhow::bail!("the echo's stream failed: {e}"),
                None => anyhow::bail!("the echo container ended"),
            }
        }
        let elapsed = started.elapsed();
        ensure!(got.len() == line.len() + 1, "the echo sent back {} bytes for {}", got.len(), line.len() + 1);
        Ok(elapsed)
    }

    pub(super) async fn stop(self) {
        self.container.remove().await;
    }
}

/// The owner label of another process on this host.
pub(super) fn owner_of(pid: u32) -> String {
    let start = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| stat[stat.rfind(')')? + 2..].split_whitespace().nth(19).map(String::from))
        .unwrap_or_default();
    let mine = owner_label();
    let host = mine.rsplitn(3, ':').nth(2).unwrap_or_default().to_string();
    format!("{host}:{pid}:{start}")
}

/// Phase totals of the measured in-process warm cells: code-mode's image
/// and the baseline image's.
pub(super) struct PhaseTotals {
    pub(super) current: Vec<(u64, f64)>,
    pub(super) baseline: Vec<(u64, f64)>,
}

pub(super) fn add_phases(totals: &mut [(u64, f64)], deltas: &[(u64, f64)]) {
    for (total, delta) in totals.iter_mut().zip(deltas) {
        total.0 += delta.0;
        total.1 += delta.1;
    }
}

/// The time of phase `index` of one cell, when it recorded exactly one.
pub(super) fn one_phase(deltas: &[(u64, f64)], index: usize) -> Option<Duration> {
    let (count, seconds) = deltas[index];
    (count == 1).then(|| Duration::from_secs_f64(seconds.max(0.0)))
}

/// One warm `print(1)` through `stack`'s frontend, timed, with the phases
/// it recorded (its container's removal and the pool's refill awaited, so
/// all of them are counted).
pub(super) async fn warm_cell(stack: &Stack) -> anyhow::Result<(Duration, Vec<(u64, f64)>)> {
    refilled(stack).await?;
    let before = phases_now();
    let started = Instant::now();
    let report = stack.frontend.run_code("print(1)").await?;
    let elapsed = started.elapsed();
    ensure!(report.stdout == "1\n", "unexpected report {report:?}");
    refilled(stack).await?;
    removed_since(&before).await?;
    let after = phases_now();
    Ok((elapsed, before.iter().zip(&after).map(|(b, a)| (a.0 - b.0, a.1 - b.1)).collect()))
}

/// One `print(1)` cell on a stack with no warm pool: the time to its
/// report.
pub(super) async fn cold_cell(stack: &Stack) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let report = stack.frontend.run_code("print(1)").await?;
    let elapsed = started.elapsed();
    ensure!(report.stdout == "1\n", "unexpected report {report:?}");
    Ok(elapsed)
}

pub(crate) async fn refilled(stack: &Stack) -> anyhow::Result<()> {
    let pool = stack.runner.pool();
    let filled = tokio::time::timeout(REFILL_BOUND, pool.wait_until_full()).await;
    ensure!(matches!(filled, Ok(true)), "the warm pool did not refill within {REFILL_BOUND:?}");
    Ok(())
}

/// Wait until a removal was recorded since `before` (the remover's, after
/// the report).
pub(super) async fn removed_since(before: &[(u64, f64)]) -> anyhow::Result<()> {
    let index = Phase::ALL.iter().position(|&p| p == Phase::Remove).expect("remove is a phase");
    let give_up = Instant::now() + REFILL_BOUND;
    while phase_totals(Phase::Remove).0 <= before[index].0 {
        ensure!(Instant::now() < give_up, "the used container was not removed within {REFILL_BOUND:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// One `add` call inside a warm cell of `stack`: as the code timed it, and
/// its host side and bridge side as the runner and the bridge of this
/// process timed it.
pub(super) async fn call_in_cell(stack: &Stack) -> anyhow::Result<CallSplit> {
    refilled(stack).await?;
    let (host, bridge) = (tool_call_host_totals(), bridge_call_totals());
    let report = stack.frontend.run_code(crate::ONE_CALL).await?;
    let ms = crate::check_one_call(&report)?.context("the cell printed its call's time")?;
    let (host_after, bridge_after) = (tool_call_host_totals(), bridge_call_totals());
    ensure!(
        host_after.0 == host.0 + 1 && bridge_after.0 == bridge.0 + 1,
        "the call was not timed once at the runner and once at the bridge"
    );
    let seconds = |s: f64| Duration::from_secs_f64(s.max(0.0));
    Ok(CallSplit {
        in_cell: Duration::from_secs_f64(ms.max(0.0) / 1000.0),
        host: seconds(host_after.1 - host.1),
        bridge: seconds(bridge_after.1 - bridge.1),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docker_stats_sizes_read_in_mib() {
        assert_eq!(mib("12.5MiB"), Some(12.5));
        assert_eq!(mib("512KiB"), Some(0.5));
        assert_eq!(mib("1GiB"), Some(1024.0));
        assert_eq!(mib("lots"), None);
    }
}
