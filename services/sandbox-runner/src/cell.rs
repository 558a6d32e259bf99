//! One run of one cell: the task that owns its container from start to
//! removal.
//!
//! The loop reads the container's protocol lines as untrusted input, relays
//! each tool call to the bridge in its own task (so `asyncio.gather` runs
//! calls concurrently), writes results back, keeps at most the configured
//! output, and ends the run at `done`, at the deadline, on a protocol
//! violation, when the container dies, or on shutdown. The container is
//! removed on every path.

use std::collections::HashSet;
use std::time::Duration;

use bollard::container::LogOutput;
use code_mode_core::bus::{Bus, BusError};
use code_mode_proto::{CellReport, RunCell, ToolCall, ToolReply, subjects};
use futures::StreamExt;
use tokio::io::AsyncWriteExt;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::container::{Container, Input, Output};
use crate::protocol::{self, FromRunner, LineReader, RunnerLimits, ToRunner, Violation};

/// How long a bus request for one tool call may wait beyond the call's own
/// timeout at the bridge.
const CALL_MARGIN: Duration = Duration::from_secs(5);
/// Bytes of the container's stderr kept for diagnostics (it is /dev/null
/// once the runner is up, so only start-up failures land there).
const STDERR_KEPT: usize = 2048;

/// How one run ended, before it becomes a [`CellReport`].
#[derive(Debug)]
enum End {
    Done { error: Option<String>, truncated: bool, stopped: bool },
    Deadline,
    Violation(Violation),
    Died,
    Shutdown,
}

/// The state of one run that the loop owns.
struct Run<'a> {
    cell: &'a RunCell,
    output: String,
    truncated: bool,
    ready: bool,
    calls_seen: HashSet<u64>,
    calls_sent: u32,
}

impl Run<'_> {
    /// Keep printed text up to the limit, on a character boundary.
    fn keep_output(&mut self, data: &str) {
        let room = (self.cell.limits.max_output as usize).saturating_sub(self.output.len());
        if data.len() <= room {
            self.output.push_str(data);
            return;
        }
        let mut end = room;
        while !data.is_char_boundary(end) {
            end -= 1;
        }
        self.output.push_str(&data[..end]);
        self.truncated = true;
    }
}

/// Run one cell in a started container; always removes the container.
pub async fn run(
    container: Container,
    output: Output,
    input: Input,
    cell: &RunCell,
    bus: &Bus,
    cancel: &CancellationToken,
) -> CellReport {
    let mut run =
        Run { cell, output: String::new(), truncated: false, ready: false, calls_seen: HashSet::new(), calls_sent: 0 };
    let started = std::time::Instant::now();
    let call_timeout = Duration::from_millis(cell.limits.call_timeout_ms);
    let end = drive(&mut run, output, input, bus, call_timeout, cancel).await;
    let died = if matches!(end, End::Died) { container.exit_state().await } else { None };
    let id = container.id().to_string();
    container.remove().await;
    tracing::info!(cell = %cell.cell_id, container = %id, elapsed_ms = started.elapsed().as_millis() as u64, end = ?end, "cell ended");
    let deadline_s = cell.limits.deadline_ms as f64 / 1000.0;
    let (error, stopped) = match end {
        End::Done { error, truncated, stopped } => {
            run.truncated |= truncated;
            (error, stopped)
        }
        End::Deadline => (Some(format!("stopped: the run passed its {deadline_s} s deadline")), true),
        End::Violation(v) => (Some(format!("stopped: protocol violation: {v}")), true),
        End::Died => (Some(died_message(died, run.ready)), true),
        End::Shutdown => (Some("stopped: code-mode is shutting down".into()), true),
    };
    CellReport { stdout: run.output, error, truncated: run.truncated, stopped }
}

fn died_message(state: Option<(i64, bool)>, ready: bool) -> String {
    match state {
        Some((_, true)) => "stopped: the sandbox ran out of memory and was killed".into(),
        Some((code, false)) if !ready => format!("stopped: the sandbox runner failed to start (exit code {code})"),
        Some((code, false)) => format!("stopped: the sandbox exited (code {code}) before the code finished"),
        None => "stopped: the sandbox closed its channel before the code finished".into(),
    }
}

async fn drive(
    run: &mut Run<'_>,
    mut output: Output,
    mut input: Input,
    bus: &Bus,
    call_timeout: Duration,
    cancel: &CancellationToken,
) -> End {
    let limits = run.cell.limits;
    let deadline = tokio::time::Instant::now() + Duration::from_millis(limits.deadline_ms);
    let mut lines = LineReader::new(limits.max_line as usize);
    let mut stderr: Vec<u8> = Vec::new();
    let mut calls: JoinSet<(u64, ToolReply)> = JoinSet::new();
    let end = loop {
        tokio::select! {
            _ = tokio::time::sleep_until(deadline) => break End::Deadline,
            _ = cancel.cancelled() => break End::Shutdown,
            Some(done) = calls.join_next(), if !calls.is_empty() => {
                let Ok((id, reply)) = done else { continue };
                let line = protocol::encode(&result_message(id, reply));
                // A write error means the container is gone; the output side ends the run.
                let _ = input.write_all(&line).await;
                let _ = input.flush().await;
            }
            chunk = output.next() => {
                let bytes = match chunk {
                    Some(Ok(LogOutput::StdOut { message })) => message,
                    Some(Ok(LogOutput::StdErr { message })) => {
                        let room = STDERR_KEPT.saturating_sub(stderr.len());
                        stderr.extend_from_slice(&message[..message.len().min(room)]);
                        continue;
                    }
                    Some(Ok(_)) => continue,
                    Some(Err(e)) => {
                        tracing::warn!(cell = %run.cell.cell_id, error = %e, "attach stream failed");
                        break End::Died;
                    }
                    None => break End::Died,
                };
                let parsed = match lines.feed(&bytes) {
                    Ok(l) => l,
                    Err(v) => break End::Violation(v),
                };
                let mut finished = None;
                for line in parsed {
                    match handle_line(run, &line, &mut input, &mut calls, bus, call_timeout).await {
                        Ok(None) => {}
                        Ok(Some(end)) => { finished = Some(end); break; }
                        Err(v) => { finished = Some(End::Violation(v)); break; }
                    }
                }
                if let Some(end) = finished { break end; }
            }
        }
    };
    if matches!(end, End::Died) && !stderr.is_empty() {
        tracing::warn!(cell = %run.cell.cell_id, stderr = %String::from_utf8_lossy(&stderr), "sandbox stderr");
    }
    calls.abort_all();
    end
}

async fn handle_line(
    run: &mut Run<'_>,
    line: &[u8],
    input: &mut Input,
    calls: &mut JoinSet<(u64, ToolReply)>,
    bus: &Bus,
    call_timeout: Duration,
) -> Result<Option<End>, Violation> {
    let message = protocol::parse(line)?;
    if !run.ready && !matches!(message, FromRunner::Ready {}) {
        return Err(Violation::OutOfOrder("a message before ready"));
    }
    match message {
        FromRunner::Ready {} => {
            if run.ready {
                return Err(Violation::OutOfOrder("a second ready"));
            }
            run.ready = true;
            let cell = ToRunner::Cell {
                code: &run.cell.code,
                tools: &run.cell.tools,
                limits: RunnerLimits {
                    max_output: run.cell.limits.max_output,
                    stop_output: run.cell.limits.stop_output,
                    max_line: run.cell.limits.max_line,
                },
            };
            let _ = input.write_all(&protocol::encode(&cell)).await;
            let _ = input.flush().await;
        }
        FromRunner::Output { data } => run.keep_output(&data),
        FromRunner::Call { id, tool, arguments } => {
            if id == 0 || !run.calls_seen.insert(id) {
                return Err(Violation::OutOfOrder("a call id that is zero or reused"));
            }
            run.calls_sent = run.calls_sent.saturating_add(1);
            if run.calls_sent > run.cell.limits.max_calls {
                // Refused here so a runaway loop costs no bus traffic; the
                // bridge refuses past the budget too.
                let message = format!("{tool}: this run has used all of its {} tool calls", run.cell.limits.max_calls);
                let _ = input.write_all(&protocol::encode(&result_message(id, ToolReply::Refused { message }))).await;
                let _ = input.flush().await;
                return Ok(None);
            }
            let call = ToolCall {
                session: run.cell.session.clone(),
                cell_id: run.cell.cell_id.clone(),
                call_index: run.calls_sent,
                tool,
                arguments,
            };
            let bus = bus.clone();
            calls.spawn(async move { (id, relay(&bus, &call, call_timeout + CALL_MARGIN).await) });
        }
        FromRunner::Done { error, truncated, stopped } => {
            // Never trust the runner's own account beyond its shape.
            let error = error.map(|e| e.chars().take(4000).collect());
            return Ok(Some(End::Done { error, truncated, stopped }));
        }
    }
    Ok(None)
}

/// Send one call to the bridge; bus failures reach the code as a type name.
async fn relay(bus: &Bus, call: &ToolCall, timeout: Duration) -> ToolReply {
    match bus.call::<_, ToolReply>(subjects::TOOL_CALL, call, timeout).await {
        Ok(reply) => reply,
        Err(e) => {
            tracing::warn!(tool = %call.tool, cell = %call.cell_id, error = %e, "tool call did not reach the bridge");
            let kind = match e {
                BusError::NoResponders { .. } => "BridgeUnavailable",
                BusError::Timeout { .. } => "BridgeTimeout",
                _ => "BridgeError",
            };
            ToolReply::Fault { kind: kind.into() }
        }
    }
}

fn result_message(id: u64, reply: ToolReply) -> ToRunner<'static> {
    match reply {
        ToolReply::Ok { value } => ToRunner::Result { id, ok: true, value: Some(value), error: None },
        ToolReply::Refused { message } => ToRunner::Result { id, ok: false, value: None, error: Some(message) },
        ToolReply::Fault { kind } => ToRunner::Result { id, ok: false, value: None, error: Some(kind) },
    }
}
