//! A file in of a cell (issue 42: `run_python`'s `files`), answered as one
//! file: the runner reads it before the code starts, through the very
//! checks of a call from code (policy, private-data rule, audit record),
//! and the bridge answers with the file's bytes alone,
//! `{"contents": [{"text": ...}]}` or `{"contents": [{"blob": ...}]}`,
//! held to the files-in limit ([`MAX_INPUT_FILE_BYTES`], the file's own
//! bytes) instead of the result limit of a call from code. A resource's
//! file is its first content; a tool's is its first embedded resource,
//! image or audio block (a server that offers its files as tools only,
//! such as server-filesystem's `read_media_file`), else its text as code
//! would get it. The call's audit record keeps the file's size and
//! SHA-256 (of its text, or of a blob's base64 as the server sent it).
//!
//! Over NATS the reply is one message under the server's `max_payload`: a
//! file past [`INLINE_BYTES`] goes through the bucket of files in instead
//! ([`code_mode_core::files_in_shared`]), the reply naming it
//! (`{"stored": {"id", "size", "chunks", "sha256"}}`); a file that cannot
//! go there is refused saying why, never cut.

use base64::Engine as _;
use code_mode_audit::record::CallResult;
use code_mode_core::files_in_shared::INLINE_BYTES;
use code_mode_proto::{MAX_INPUT_FILE_BYTES, Op};
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};
use serde_json::{Value, json};

use crate::Bridge;
use crate::answer::{Answer, result_text};
use crate::trail::Trail;

/// One file's bytes as a server sent them.
#[derive(Debug, PartialEq)]
enum File {
    Text(String),
    Blob(String),
}

impl File {
    /// Its bytes once decoded (a blob's counted from its base64).
    fn len(&self) -> usize {
        match self {
            File::Text(text) => text.len(),
            File::Blob(blob) => {
                let padding = blob.bytes().rev().take(2).filter(|b| *b == b'=').count();
                (blob.len() / 4 * 3).saturating_sub(padding)
            }
        }
    }

    /// Its bytes as they travel in a reply (text, or base64).
    fn wire_len(&self) -> usize {
        match self {
            File::Text(text) | File::Blob(text) => text.len(),
        }
    }

    fn into_value(self) -> Value {
        match self {
            File::Text(text) => json!({"contents": [{"text": text}]}),
            File::Blob(blob) => json!({"contents": [{"blob": blob}]}),
        }
    }
}

impl Bridge {
    /// The answer to a file in's call (`name` as the audit names it), its
    /// trail's result set: the file, or a refusal when the result holds
    /// none or it is over the limit (refused, not cut).
    pub(crate) async fn file_in_answer(&self, name: &str, op: Op, result: Value, trail: &mut Trail) -> Answer {
        let file = match op {
            Op::Tool => tool_file(result),
            _ => resource_file(&result),
        };
        let file = match file {
            Ok(file) => file,
            Err(why) => {
                trail.result = Some((CallResult::Error, Some(why.clone())));
                return self.refuse(format!("{name}: {why}"));
            }
        };
        let size = file.len();
        if size > MAX_INPUT_FILE_BYTES {
            trail.result = Some((CallResult::TooLarge, None));
            return self.refuse(format!(
                "{name}: the file is {size} bytes, over the {MAX_INPUT_FILE_BYTES} byte limit of files in \
                 (refused, not cut)"
            ));
        }
        // The audit record keeps the file's size and hash: of its text, or
        // of a blob's base64 as the server sent it.
        let recorded = match &file {
            File::Text(text) | File::Blob(text) => text.clone(),
        };
        let Some(inputs) = self.inner.inputs.get().filter(|_| file.wire_len() > INLINE_BYTES) else {
            trail.result = Some((CallResult::Ok, Some(recorded)));
            return Answer::Value(file.into_value());
        };
        let bytes = match file {
            File::Text(text) => text.into_bytes(),
            File::Blob(blob) => match base64::engine::general_purpose::STANDARD.decode(&blob) {
                Ok(bytes) => bytes,
                Err(e) => {
                    trail.result = Some((CallResult::Error, Some(format!("the file's blob is not base64: {e}"))));
                    return self.refuse(format!("{name}: the file's blob is not base64: {e}"));
                }
            },
        };
        match inputs.put(&bytes).await {
            Ok(stored) => {
                tracing::debug!(id = %stored.id, size = stored.size, "a file in handed over through the files-in bucket");
                trail.result = Some((CallResult::Ok, Some(recorded)));
                Answer::Value(json!({ "stored": stored }))
            }
            Err(e) => {
                tracing::warn!(error = %e, "a file in could not go through the files-in bucket");
                trail.result = Some((CallResult::Fault, Some(e.to_string())));
                self.refuse(format!("{name}: the file of {size} bytes could not be handed to the runner: {e}"))
            }
        }
    }
}

/// A `resources/read` result's first content.
fn resource_file(result: &Value) -> Result<File, String> {
    let first = &result["contents"][0];
    match (first["text"].as_str(), first["blob"].as_str()) {
        (Some(text), _) => Ok(File::Text(text.to_string())),
        (None, Some(blob)) => Ok(File::Blob(blob.to_string())),
        _ => Err("the resource has no text or blob content to place as a file".into()),
    }
}

/// A tool result's file: its first embedded resource, image or audio
/// block, else its text; a tool's own failure is refused with its text.
fn tool_file(result: Value) -> Result<File, String> {
    let result: CallToolResult =
        serde_json::from_value(result).map_err(|_| "the server's answer is not a tool result".to_string())?;
    if result.is_error == Some(true) {
        return Err(format!("failed: {}", result_text(&result)));
    }
    for block in &result.content {
        match block {
            ContentBlock::Resource(embedded) => {
                return match &embedded.resource {
                    ResourceContents::TextResourceContents { text, .. } => Ok(File::Text(text.clone())),
                    ResourceContents::BlobResourceContents { blob, .. } => Ok(File::Blob(blob.clone())),
                    _ => Err("the embedded resource has no text or blob to place as a file".into()),
                };
            }
            ContentBlock::Image(image) => return Ok(File::Blob(image.data.clone())),
            ContentBlock::Audio(audio) => return Ok(File::Blob(audio.data.clone())),
            _ => {}
        }
    }
    Ok(File::Text(result_text(&result)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tools_file_is_its_first_embedded_resource_else_its_text_and_sizes_count_decoded_bytes() {
        let media = json!({"content": [
            {"type": "text", "text": "ignored"},
            {"type": "resource", "resource": {"uri": "file:///d/a.csv", "mimeType": "text/csv", "blob": "YWJjZA=="}}
        ]});
        let file = tool_file(media).unwrap();
        assert_eq!(file, File::Blob("YWJjZA==".into()));
        assert_eq!(file.len(), 4, "'abcd' is 4 bytes");
        assert_eq!(File::Blob("YWJj".into()).len(), 3);
        assert_eq!(File::Blob("YWI=".into()).len(), 2);
        let text = tool_file(json!({"content": [{"type": "text", "text": "a,b\n1,2\n"}]})).unwrap();
        assert_eq!(text, File::Text("a,b\n1,2\n".into()));
        let failed = tool_file(json!({"content": [{"type": "text", "text": "no such file"}], "isError": true}));
        assert_eq!(failed, Err("failed: no such file".into()));
        assert_eq!(resource_file(&json!({"contents": [{"uri": "x", "text": "hi"}]})), Ok(File::Text("hi".into())));
        assert!(resource_file(&json!({"contents": []})).is_err());
    }
}
