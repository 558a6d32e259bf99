//! Files in (issue 42): a cell's inputs (`RunCell::inputs`) made into the
//! bytes placed at `/tmp/in/<name>` before the code starts. A resource,
//! or a file a tool returns, is read through the bridge as the code's own
//! call would be (one call of the run's budget, the same policy,
//! private-data rule and audit record, as the cell's session and
//! identity), marked as a file in so the bridge answers with the file's
//! bytes alone, held to [`MAX_INPUT_FILE_BYTES`] (not the 64 KiB result
//! limit); an inline blob is taken as the client sent it (the frontend
//! checked its name and size). All the files of a cell hold at most
//! [`MAX_INPUT_FILE_BYTES`] in all. The first input that cannot be had
//! ends the cell before its code starts, with an error naming it.
//!
//! The bytes go to the container raw, right after the cell message that
//! names each file and its size (no base64, no JSON around them).
//!
//! Each read waits for the bridge as a call of the code would (the call
//! timeout, the approval timeout and the hop margin), and never past the
//! run's deadline (plus the approval allowance): a read still unanswered
//! then (a slow server, a bridge lost in the middle of it) ends the cell
//! naming the file and the deadline, before the frontend's own wait ends.
//!
//! Over NATS a file past the bridge's reply bound comes through the bucket
//! of files in ([`code_mode_core::files_in_shared`]): the reply names its
//! chunks, size and SHA-256, and the file is placed only whole and equal
//! to them. So does an inline file the cell message could not carry: the
//! frontend wrote it to the bucket of inline files in and the cell's input
//! names it (`stored`); the runner reads only that bucket for it, never
//! the bridges'.

use std::time::Duration;

use base64::Engine as _;
use code_mode_proto::{
    CellInput, ErrorKind, MAX_INPUT_BYTES, MAX_INPUT_FILE_BYTES, Op, RunCell, Target, ToolCall, ToolReply,
};
use tokio::time::Instant;

use crate::protocol::InputFile;
use code_mode_core::bus::Bus;
use code_mode_core::files_in_shared::{SharedInputs, StoredInput};

/// One file in, read: its name and size for the cell message, its bytes
/// to follow it.
#[derive(Debug)]
pub(crate) struct Resolved {
    /// As the cell message names it.
    pub(crate) file: InputFile,
    /// The bytes.
    pub(crate) bytes: Vec<u8>,
}

/// How long a read through the bridge may wait.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Wait {
    /// A call's own wait: its timeouts and the hop margin.
    pub(crate) call: Duration,
    /// The run's deadline, with the approval allowance.
    pub(crate) until: Instant,
}

/// The files of `cell`'s inputs, in order; `calls` counts the bridge calls
/// made (the run's budget).
pub(crate) async fn resolve(
    cell: &RunCell,
    calls: &mut u32,
    bus: &Bus,
    timeout: Wait,
    inputs: Option<&SharedInputs>,
) -> Result<Vec<Resolved>, String> {
    let mut files = Vec::with_capacity(cell.inputs.len());
    let mut total = 0usize;
    for (i, input) in cell.inputs.iter().enumerate() {
        let bytes = match (&input.uri, &input.tool, &input.data, &input.stored) {
            (None, None, None, Some(stored)) => {
                let Some(inputs) = inputs else {
                    return Err(format!(
                        "files[{i}] ({}): the frontend handed the file through the bucket of inline files in, which \
                         this runner does not read",
                        input.name
                    ));
                };
                inputs
                    .inline_reader()
                    .take(stored, MAX_INPUT_BYTES)
                    .await
                    .map_err(|e| format!("files[{i}] ({}): {e}", input.name))?
            }
            (Some(uri), _, _, _) => {
                let target = Target::new(Op::ReadResource, uri.clone());
                read(cell, input, target, calls, bus, timeout, inputs)
                    .await
                    .map_err(|e| format!("files[{i}] ({uri}): {e}"))?
            }
            (None, Some(tool), _, _) => {
                let target = Target::new(Op::Tool, tool.clone());
                read(cell, input, target, calls, bus, timeout, inputs)
                    .await
                    .map_err(|e| format!("files[{i}] ({tool}): {e}"))?
            }
            (None, None, Some(data), _) => base64::engine::general_purpose::STANDARD
                .decode(data)
                .map_err(|e| format!("files[{i}] ({}): data is not base64: {e}", input.name))?,
            (None, None, None, None) => {
                return Err(format!("files[{i}] ({}): neither a uri, a tool nor data", input.name));
            }
        };
        total += bytes.len();
        if total > MAX_INPUT_FILE_BYTES {
            return Err(format!(
                "files[{i}] ({}): the files in hold {total} bytes with it, over the {MAX_INPUT_FILE_BYTES} byte \
                 limit of files in (refused, not cut)",
                input.name
            ));
        }
        files.push(Resolved { file: InputFile { name: input.name.clone(), size: bytes.len() as u64 }, bytes });
    }
    Ok(files)
}

/// How the cell's `cell_start` audit record names its inputs: a
/// resource by its URI, inline bytes by their size and SHA-256.
pub(crate) fn records(cell: &RunCell) -> Vec<code_mode_audit::record::CellInputRecord> {
    use sha2::Digest as _;
    cell.inputs
        .iter()
        .map(|input| {
            let bytes =
                input.data.as_deref().map(|d| base64::engine::general_purpose::STANDARD.decode(d).unwrap_or_default());
            let stored = input.stored.as_ref();
            code_mode_audit::record::CellInputRecord {
                name: input.name.clone(),
                uri: input.uri.clone(),
                tool: input.tool.clone(),
                bytes: bytes.as_ref().map(|b| b.len() as u64).or(stored.map(|s| s.size)),
                sha256: bytes
                    .map(|b| sha2::Sha256::digest(&b).iter().map(|x| format!("{x:02x}")).collect())
                    .or(stored.map(|s| s.sha256.clone())),
            }
        })
        .collect()
}

/// Read one file in through the bridge as the cell (a resource, or a
/// tool's file), marked as a file in: its bytes.
async fn read(
    cell: &RunCell,
    input: &CellInput,
    target: Target,
    calls: &mut u32,
    bus: &Bus,
    timeout: Wait,
    inputs: Option<&SharedInputs>,
) -> Result<Vec<u8>, String> {
    *calls = calls.saturating_add(1);
    if *calls > cell.limits.max_calls {
        return Err(format!("this run has used all of its {} tool calls", cell.limits.max_calls));
    }
    let call = ToolCall {
        session: cell.session.clone(),
        asker: cell.asker.clone(),
        identity: cell.identity.clone(),
        cell_id: cell.cell_id.clone(),
        call_index: *calls,
        target,
        arguments: input.arguments.clone().unwrap_or_else(|| serde_json::json!({})),
        link: cell.link.clone(),
        file_in: true,
    };
    let left = timeout.until.saturating_duration_since(Instant::now());
    let value = match crate::cell::relay(bus, &call, timeout.call.min(left)).await {
        ToolReply::Ok { value } | ToolReply::Content { value, .. } => value,
        ToolReply::Fault { kind: ErrorKind::BridgeTimeout } if left < timeout.call => {
            return Err(format!(
                "no answer from the bridge within the run's deadline ({} s), before the code started",
                cell.limits.deadline_ms as f64 / 1000.0
            ));
        }
        ToolReply::Refused { message } => return Err(message),
        ToolReply::Fault { kind } => return Err(format!("the read failed ({})", kind.as_str())),
    };
    let result: serde_json::Value =
        serde_json::from_str(&value).map_err(|_| "the bridge's answer is not a file".to_string())?;
    if let Some(stored) = result.get("stored") {
        let stored: StoredInput =
            serde_json::from_value(stored.clone()).map_err(|_| "the bridge's answer is not a file".to_string())?;
        let Some(inputs) = inputs else {
            return Err(
                "the bridge handed the file through the files-in bucket, which this runner does not read".into()
            );
        };
        return inputs.take(&stored, MAX_INPUT_FILE_BYTES).await.map_err(|e| e.to_string());
    }
    let first = &result["contents"][0];
    match (first["text"].as_str(), first["blob"].as_str()) {
        (Some(text), _) => Ok(text.as_bytes().to_vec()),
        (None, Some(blob)) => base64::engine::general_purpose::STANDARD
            .decode(blob)
            .map_err(|e| format!("the file's blob is not base64: {e}")),
        _ => Err(format!("no file came back to place as {}", input.name)),
    }
}
