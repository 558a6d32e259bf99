//! Files out, the frontend's half (issue 42): the `run_python` result names
//! each file a cell's code wrote as an MCP resource link, and
//! `resources/read` of a `code-mode://files/...` URI answers from the
//! [`FileStore`] shared with the sandbox-runner, only for the identity that
//! ran the cell. Any other reader (another identity, or anyone after the
//! time to live) gets the answer of a URI that never existed.

use base64::Engine as _;
use code_mode_core::files::{FileStore, KeptFile};
use code_mode_core::files_shared::SharedFiles;
use code_mode_proto::CellReport;
use rmcp::ErrorData as McpError;
use rmcp::model::{ContentBlock, ReadResourceResult};

/// One resource link per kept file of `report`.
pub(crate) fn links(report: &CellReport) -> Vec<ContentBlock> {
    report
        .files
        .iter()
        .filter_map(|f| {
            let link = serde_json::json!({
                "type": "resource_link", "uri": f.uri, "name": f.name, "mimeType": f.mime_type, "size": f.size,
            });
            serde_json::from_value::<ContentBlock>(link)
                .inspect_err(|e| tracing::warn!(error = %e, "a kept file's link is not an MCP block: left out"))
                .ok()
        })
        .collect()
}

/// [`read`] from this process's store, or over NATS from the store the
/// services share (any frontend replica serves the link until the TTL).
pub(crate) async fn read_any(
    store: Option<&FileStore>,
    shared: Option<&SharedFiles>,
    owner: &str,
    uri: &str,
) -> Result<ReadResourceResult, McpError> {
    let Some(shared) = shared else { return read(store, owner, uri) };
    match shared.get(owner, uri).await {
        Ok(Some(file)) => answer(uri, file),
        Ok(None) => Err(unknown(uri)),
        Err(e) => Err(McpError::internal_error(format!("{uri}: unavailable for now: {e}"), None)),
    }
}

fn unknown(uri: &str) -> McpError {
    McpError::resource_not_found(format!("unknown resource: {uri} (no such file, or expired)"), None)
}

/// Read the kept file at `uri` for `owner` (the caller's identity, empty
/// for none): text for a `text/*` or JSON file in UTF-8, else a blob.
pub(crate) fn read(store: Option<&FileStore>, owner: &str, uri: &str) -> Result<ReadResourceResult, McpError> {
    let file = store.and_then(|s| s.get(owner, uri)).ok_or_else(|| unknown(uri))?;
    answer(uri, file)
}

fn answer(uri: &str, file: KeptFile) -> Result<ReadResourceResult, McpError> {
    let essence = file.mime_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    let texty = essence.starts_with("text/") || essence == "application/json";
    let contents = match (texty, std::str::from_utf8(&file.bytes)) {
        (true, Ok(text)) => serde_json::json!({"uri": uri, "mimeType": file.mime_type, "text": text}),
        _ => serde_json::json!({
            "uri": uri, "mimeType": file.mime_type,
            "blob": base64::engine::general_purpose::STANDARD.encode(&file.bytes),
        }),
    };
    // `complete` for 2026-07-28 clients; rmcp's handler drops it for older ones.
    serde_json::from_value(serde_json::json!({ "contents": [contents], "resultType": "complete" }))
        .map_err(|e| McpError::internal_error(format!("{uri}: {e}"), None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_file_is_read_as_text_or_blob_and_only_by_its_owner() {
        let store = FileStore::with_ttl(std::time::Duration::from_secs(60));
        let csv = KeptFile { name: "a.csv".into(), mime_type: "text/csv".into(), bytes: "a,b\n".into() };
        let uri = store.put("alice", csv).unwrap();
        let read_back = serde_json::to_value(read(Some(&store), "alice", &uri).unwrap()).unwrap();
        assert_eq!(read_back["contents"][0]["text"], "a,b\n");
        let png = KeptFile { name: "p.png".into(), mime_type: "image/png".into(), bytes: vec![0x89, b'P'].into() };
        let uri_png = store.put("alice", png).unwrap();
        let blob = serde_json::to_value(read(Some(&store), "alice", &uri_png).unwrap()).unwrap();
        assert_eq!(blob["contents"][0]["blob"], "iVA=");
        let bob = read(Some(&store), "bob", &uri).unwrap_err();
        let never = read(Some(&store), "alice", "code-mode://files/0/none").unwrap_err();
        assert_eq!((bob.code, never.code), (never.code, rmcp::model::ErrorCode::RESOURCE_NOT_FOUND));
        assert!(bob.message.starts_with("unknown resource: "), "{bob:?}");
    }
}
