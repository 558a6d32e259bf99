//! Files in (issue 42): a cell's inputs (`RunCell::inputs`) made into the
//! bytes placed at `/tmp/in/<name>` before the code starts. A resource is
//! read through the bridge exactly as the code's own `read_resource`
//! would be (one call of the run's budget, the same policy, result limit,
//! private-data rule and audit record, as the cell's session and
//! identity); an inline blob is taken as the client sent it (the frontend
//! checked its name and size). The first input that cannot be had ends
//! the cell before its code starts, with an error naming it.

use std::time::Duration;

use base64::Engine as _;
use code_mode_proto::{CellInput, Op, RunCell, Target, ToolCall, ToolReply};

use crate::protocol::InputFile;
use code_mode_core::bus::Bus;

/// The files of `cell`'s inputs, base64, in order; `calls` counts the
/// bridge calls made (the run's budget).
pub(crate) async fn resolve(
    cell: &RunCell,
    calls: &mut u32,
    bus: &Bus,
    timeout: Duration,
) -> Result<Vec<InputFile>, String> {
    let mut files = Vec::with_capacity(cell.inputs.len());
    for (i, input) in cell.inputs.iter().enumerate() {
        let data = match (&input.uri, &input.data) {
            (Some(uri), _) => {
                read(cell, input, uri, calls, bus, timeout).await.map_err(|e| format!("files[{i}] ({uri}): {e}"))?
            }
            (None, Some(data)) => data.clone(),
            (None, None) => return Err(format!("files[{i}] ({}): neither a uri nor data", input.name)),
        };
        files.push(InputFile { name: input.name.clone(), data });
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
            code_mode_audit::record::CellInputRecord {
                name: input.name.clone(),
                uri: input.uri.clone(),
                bytes: bytes.as_ref().map(|b| b.len() as u64),
                sha256: bytes.map(|b| sha2::Sha256::digest(&b).iter().map(|x| format!("{x:02x}")).collect()),
            }
        })
        .collect()
}

/// Read one resource through the bridge as the cell: its first content's
/// bytes, base64.
async fn read(
    cell: &RunCell,
    input: &CellInput,
    uri: &str,
    calls: &mut u32,
    bus: &Bus,
    timeout: Duration,
) -> Result<String, String> {
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
        target: Target::new(Op::ReadResource, uri.to_string()),
        arguments: serde_json::json!({}),
        link: cell.link.clone(),
    };
    let value = match crate::cell::relay(bus, &call, timeout).await {
        ToolReply::Ok { value } | ToolReply::Content { value, .. } => value,
        ToolReply::Refused { message } => return Err(message),
        ToolReply::Fault { kind } => return Err(format!("the read failed ({})", kind.as_str())),
    };
    let result: serde_json::Value =
        serde_json::from_str(&value).map_err(|_| "the server's answer is not a resource".to_string())?;
    let first = &result["contents"][0];
    match (first["text"].as_str(), first["blob"].as_str()) {
        (Some(text), _) => Ok(base64::engine::general_purpose::STANDARD.encode(text.as_bytes())),
        (None, Some(blob)) => Ok(blob.to_string()),
        _ => Err(format!("the resource has no text or blob content to place as {}", input.name)),
    }
}
