//! Files in, the frontend's half (issue 42): `run_python`'s optional
//! `files` argument, checked before any cell starts. Each entry is a
//! wrapped server's resource (`{"uri": ..., "name": ...}`, the name taken
//! from the URI's last part when not given), a file a wrapped server's
//! tool returns (`{"tool": ..., "arguments": {...}, "name": ...}`, for a
//! server that offers its files as tools only) or bytes the client holds
//! (`{"name": ..., "data": "<base64>"}`); each becomes
//! `/tmp/in/<name>`, read-only, before the code starts. A name with `/`,
//! `.`, `..`, a control character or more than 255 bytes, a name given
//! twice, more than [`MAX_INPUTS`] entries or inline bytes past
//! [`MAX_INPUT_BYTES`] are refused here with an error naming the entry.
//! The resources and tools' files are read by the sandbox-runner through
//! the bridge, as the cell's own calls (policy, private-data rule, audit
//! record), held to the files-in limit ([`MAX_INPUT_FILE_BYTES`]).
//! Over NATS, inline bytes the cell message cannot carry go to the runner
//! through the bucket of inline files in ([`stage`]).

use base64::Engine as _;
use code_mode_proto::{CellInput, MAX_INPUT_BYTES, MAX_INPUT_FILE_BYTES, MAX_INPUTS};
use serde_json::Value;

/// The argument's name.
pub(crate) const ARGUMENT: &str = "files";

/// The argument's schema in `run_python`'s input schema.
pub(crate) fn schema() -> Value {
    serde_json::json!({
        "type": "array",
        "maxItems": MAX_INPUTS,
        "description": format!(
            "Files placed read-only at /tmp/in/<name> before the code starts: a wrapped server's resource \
             ({{\"uri\": ...}}, optional \"name\"), the file a tool returns ({{\"tool\": ..., \"arguments\": \
             {{...}}, \"name\": ...}}) or bytes you hold ({{\"name\": ..., \"data\": base64}}, {} MiB in all); \
             {} MiB in all.",
            MAX_INPUT_BYTES / (1024 * 1024),
            MAX_INPUT_FILE_BYTES / (1024 * 1024)
        ),
        "items": {
            "type": "object",
            "properties": {
                "uri": {"type": "string"},
                "tool": {"type": "string"},
                "arguments": {"type": "object"},
                "name": {"type": "string"},
                "data": {"type": "string", "contentEncoding": "base64"}
            },
            "additionalProperties": false
        }
    })
}

/// The checked entries of `files` (none when it is absent), or why not,
/// naming the entry.
pub(crate) fn parse(arguments: Option<&serde_json::Map<String, Value>>) -> Result<Vec<CellInput>, String> {
    let Some(files) = arguments.and_then(|a| a.get(ARGUMENT)) else { return Ok(Vec::new()) };
    let Value::Array(entries) = files else {
        return Err("files: must be a list of {\"uri\": ...} or {\"name\": ..., \"data\": base64}".into());
    };
    if entries.len() > MAX_INPUTS {
        return Err(format!("files: {} entries, over the {MAX_INPUTS} a run takes", entries.len()));
    }
    let mut inputs: Vec<CellInput> = Vec::new();
    let mut inline = 0usize;
    for (i, entry) in entries.iter().enumerate() {
        let input = entry_of(i, entry, &mut inline)?;
        if inputs.iter().any(|earlier| earlier.name == input.name) {
            return Err(format!("files[{i}]: the name {:?} is given twice", input.name));
        }
        inputs.push(input);
    }
    Ok(inputs)
}

fn entry_of(i: usize, entry: &Value, inline: &mut usize) -> Result<CellInput, String> {
    let Value::Object(fields) = entry else {
        return Err(format!("files[{i}]: must be {{\"uri\": ...}} or {{\"name\": ..., \"data\": base64}}"));
    };
    if let Some(other) = fields.keys().find(|k| !["uri", "tool", "arguments", "name", "data"].contains(&k.as_str())) {
        return Err(format!("files[{i}]: unknown field {other:?} (uri, tool, arguments, name, data)"));
    }
    let text = |key: &str| match fields.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(format!("files[{i}]: {key} must be a string")),
    };
    let (uri, tool, name, data) = (text("uri")?, text("tool")?, text("name")?, text("data")?);
    let arguments = match fields.get("arguments") {
        None => None,
        Some(Value::Object(_)) if tool.is_some() => fields.get("arguments").cloned(),
        Some(Value::Object(_)) => return Err(format!("files[{i}]: arguments go with a tool")),
        Some(_) => return Err(format!("files[{i}]: arguments must be an object")),
    };
    let name = match (&uri, &tool, &data, name) {
        (u, t, d, _) if [u.is_some(), t.is_some(), d.is_some()].iter().filter(|x| **x).count() > 1 => {
            return Err(format!("files[{i}]: give one of uri, tool or data, not both"));
        }
        (None, None, None, _) => return Err(format!("files[{i}]: give a uri, a tool or data")),
        (None, None, Some(_), None) => return Err(format!("files[{i}]: inline data needs a name")),
        (None, Some(_), None, None) => return Err(format!("files[{i}]: a tool's file needs a name")),
        (_, _, _, Some(name)) => name,
        (Some(uri), _, _, None) => uri.rsplit('/').next().unwrap_or_default().to_string(),
        (None, _, _, None) => return Err(format!("files[{i}]: give one of uri, tool or data, not both")),
    };
    if !is_plain_name(&name) {
        return Err(format!(
            "files[{i}]: the name {name:?} cannot be placed under /tmp/in (a plain name: no '/', not '.' or \
             '..', no control character, at most 255 bytes){}",
            if uri.is_some() { "; give a \"name\"" } else { "" }
        ));
    }
    if let Some(data) = &data {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data)
            .map_err(|e| format!("files[{i}] ({name}): data is not base64: {e}"))?;
        *inline += bytes.len();
        if *inline > MAX_INPUT_BYTES {
            return Err(format!(
                "files[{i}] ({name}): the inline files hold {} bytes, over the {MAX_INPUT_BYTES} byte limit",
                *inline
            ));
        }
    }
    Ok(CellInput { name, uri, tool, arguments, data, stored: None })
}

/// Over NATS (`shared`, the bucket of inline files in), make `cell`'s
/// message fit the NATS server's message bound: its inline files stay in
/// it, smallest first, while they hold at most
/// [`code_mode_core::files_in_shared::INLINE_BYTES`] (128 KiB) in all,
/// and every other one is written to the bucket, its entry then naming the
/// chunks, size and SHA-256 (`stored`) instead of carrying the bytes. A
/// cell whose inline files fit is sent as it is: no write, no round trip.
/// Without `shared` (`serve`, in one process) nothing changes. A write
/// that fails (the bucket full, say) ends the call here, naming the file,
/// and purges the files of the call written before it.
pub(crate) async fn stage(
    shared: Option<&code_mode_core::files_in_shared::SharedInputs>,
    cell: &mut code_mode_proto::RunCell,
) -> Result<(), String> {
    use code_mode_core::files_in_shared::INLINE_BYTES;
    let Some(shared) = shared else { return Ok(()) };
    let engine = base64::engine::general_purpose::STANDARD;
    // Each inline file's index and decoded size (the frontend checked the
    // base64 when it took the call), smallest first.
    let mut sizes: Vec<(usize, usize)> = cell
        .inputs
        .iter()
        .enumerate()
        .filter_map(|(i, input)| input.data.as_deref().map(|d| (i, decoded_len(d))))
        .collect();
    if sizes.iter().map(|(_, size)| size).sum::<usize>() <= INLINE_BYTES {
        return Ok(());
    }
    sizes.sort_by_key(|(_, size)| *size);
    let mut kept = 0usize;
    for (i, size) in sizes {
        if kept + size <= INLINE_BYTES {
            kept += size;
            continue;
        }
        let input = &mut cell.inputs[i];
        let Some(data) = input.data.as_deref() else { continue };
        let written = match engine.decode(data) {
            Ok(bytes) => shared.put(&bytes).await.map_err(|e| format!("files[{i}] ({}): {e}", input.name)),
            Err(e) => Err(format!("files[{i}] ({}): data is not base64: {e}", input.name)),
        };
        let stored = match written {
            Ok(stored) => stored,
            Err(e) => {
                // The cell will not be sent: the files it wrote before
                // this one go too, leaving the bucket's room to others.
                for earlier in cell.inputs.iter().filter_map(|input| input.stored.as_ref()) {
                    shared.discard(earlier).await;
                }
                return Err(e);
            }
        };
        tracing::debug!(file = %input.name, id = %stored.id, bytes = stored.size, "an inline file in goes through the bucket");
        input.data = None;
        input.stored = Some(stored);
    }
    Ok(())
}

/// The bytes `data` (standard base64, padded, checked) decodes to.
fn decoded_len(data: &str) -> usize {
    (data.len() / 4 * 3).saturating_sub(data.bytes().rev().take_while(|b| *b == b'=').count())
}

/// A plain file name: no `/` or `\`, not `.` or `..`, no control
/// character, 1 to 255 bytes.
fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && name != "."
        && name != ".."
        && !name.chars().any(|c| c.is_control() || c == '/' || c == '\\')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(files: Value) -> Result<Vec<CellInput>, String> {
        let args = serde_json::json!({ "code": "1", "files": files });
        parse(args.as_object())
    }

    #[test]
    fn entries_are_named_checked_and_refused_naming_the_entry() {
        let ok = parsed(serde_json::json!([
            {"uri": "test://static/a.csv"},
            {"name": "b.bin", "data": "AAE="},
            {"tool": "fs.read_media_file", "arguments": {"path": "/d/c.csv"}, "name": "c.csv"}
        ]));
        let ok = ok.unwrap();
        assert_eq!((ok[0].name.as_str(), ok[1].name.as_str(), ok[2].name.as_str()), ("a.csv", "b.bin", "c.csv"));
        assert_eq!(ok[2].tool.as_deref(), Some("fs.read_media_file"));
        assert_eq!(ok[2].arguments, Some(serde_json::json!({"path": "/d/c.csv"})));
        for (bad, says) in [
            (serde_json::json!([{"name": "../x", "data": ""}]), "files[0]: the name \"../x\""),
            (serde_json::json!([{"name": "a/b", "data": ""}]), "files[0]: the name \"a/b\""),
            (serde_json::json!([{"uri": "x://a/.."}]), "give a \"name\""),
            (
                serde_json::json!([{"name": "a", "data": ""}, {"name": "a", "data": ""}]),
                "files[1]: the name \"a\" is given twice",
            ),
            (serde_json::json!([{"name": "a", "data": "!"}]), "files[0] (a): data is not base64"),
            (serde_json::json!([{"data": ""}]), "files[0]: inline data needs a name"),
            (serde_json::json!([{"uri": "u", "data": ""}]), "not both"),
            (serde_json::json!([{"tool": "fs.read_media_file", "arguments": {"path": "/a"}}]), "needs a name"),
            (serde_json::json!([{"uri": "u", "arguments": {}}]), "arguments go with a tool"),
            (serde_json::json!([{"tool": "t", "name": "a", "arguments": []}]), "must be an object"),
            (serde_json::json!("a"), "must be a list"),
        ] {
            let e = parsed(bad.clone()).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        let big = base64::engine::general_purpose::STANDARD.encode(vec![0u8; MAX_INPUT_BYTES + 1]);
        let e = parsed(serde_json::json!([{"name": "big", "data": big}])).unwrap_err();
        assert!(e.contains(&format!("over the {MAX_INPUT_BYTES} byte limit")), "{e}");
        assert!(parse(serde_json::json!({"code": "1"}).as_object()).unwrap().is_empty());
    }
}
