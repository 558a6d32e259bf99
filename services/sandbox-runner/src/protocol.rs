//! The line protocol between the host and `runner.py` in the container
//! (see `docs/sandbox-protocol.md`).
//!
//! Everything from the container is untrusted: [`LineReader`] splits the
//! byte stream into lines no longer than the limit, and [`parse`] accepts
//! only the known message shapes, with every field of the right type. Any
//! other input is a [`Violation`] and ends the run.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A message from the runner.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum FromRunner {
    /// The runner is up and waits for its cell.
    Ready {},
    /// Some of what the code printed.
    Output {
        /// The text.
        data: String,
    },
    /// The code awaited a tool (or read a resource, or listed them).
    Call {
        /// Unique, positive id in the run.
        id: u64,
        /// The Python name; for another op its target (a resource's URI).
        tool: String,
        /// The arguments as sent (checked by the bridge).
        arguments: Value,
        /// What the call asks: a tool call when absent; code may also
        /// read a resource and list resources and templates.
        #[serde(default)]
        op: code_mode_proto::Op,
    },
    /// `search_tools`, unsure between tools its words rank alike, asks how
    /// near in meaning its question is to each tool (issue 43).
    Meaning {
        /// Unique, positive id in the run (shared with calls').
        id: u64,
        /// The question.
        query: String,
    },
    /// The code hands a content block back to the model (`show`): an
    /// image, audio or an embedded resource, as an MCP content block.
    Content {
        /// The block.
        block: Value,
    },
    /// The code reports its progress (`report_progress`).
    Progress {
        /// Progress so far.
        progress: f64,
        /// The total, if known.
        #[serde(default)]
        total: Option<f64>,
        /// A message.
        #[serde(default)]
        message: Option<String>,
    },
    /// A file of the output folder follows (collected after the code
    /// finished): its `size` bytes come in `file_data` lines next.
    File {
        /// Its path under the output folder.
        name: String,
        /// The MIME type `save_file` was given, if any.
        #[serde(default)]
        mime_type: Option<String>,
        /// Its size in bytes.
        size: u64,
    },
    /// The next piece of the current file, base64.
    FileData {
        /// The bytes, base64.
        data: String,
    },
    /// More of the whole printed output, kept for the client (only when
    /// the cell's limits ask for it, once the output outgrew what the
    /// model reads): the bytes, base64, in the order printed.
    OutputKept {
        /// The bytes, base64.
        data: String,
    },
    /// A file of the output folder the runner did not hand out, and why.
    FileNote {
        /// One line.
        note: String,
    },
    /// The code is finished.
    Done {
        /// The end of the traceback, or why the runner stopped the code.
        error: Option<String>,
        /// The code printed more than was kept.
        truncated: bool,
        /// The runner stopped the code (output flood).
        stopped: bool,
    },
}

/// A message to the runner.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToRunner<'a> {
    /// The cell to run.
    Cell {
        /// The code.
        code: &'a str,
        /// The tools with their stubs.
        tools: &'a [code_mode_proto::ToolStub],
        /// Tools denied by policy: callable by name (the bridge refuses
        /// them), listed nowhere.
        withheld: &'a [String],
        /// Output and line limits.
        limits: RunnerLimits,
        /// Kept mode: the runner waits for the session's next cell after
        /// `done` instead of exiting (left out when false).
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        keep: bool,
        /// Files placed read-only at `/tmp/in/<name>` before the code
        /// starts (issue 42; left out when none): their bytes follow the
        /// cell message's line on the stream, raw, in this order, each
        /// exactly its `size`.
        #[serde(skip_serializing_if = "<[InputFile]>::is_empty")]
        inputs: &'a [InputFile],
    },
    /// A call's answer.
    Result {
        /// The call's id.
        id: u64,
        /// True when `value` holds the result; false when `error` says why not.
        ok: bool,
        /// The result string.
        #[serde(skip_serializing_if = "Option::is_none")]
        value: Option<String>,
        /// The `ToolError` message.
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// The result's blocks other than text (images, audio, embedded
        /// resources), as MCP content blocks.
        #[serde(skip_serializing_if = "Option::is_none")]
        blocks: Option<Vec<Value>>,
    },
    /// The answer to a `meaning` question: each tool's Python name and
    /// cosine, or nothing (no answer by meaning: rank by words).
    Meaning {
        /// The question's id.
        id: u64,
        /// `[name, cosine]` pairs, in catalog order.
        near: Option<Vec<(String, f32)>>,
    },
}

/// The bounds after which the runner in the container ends it by itself,
/// in seconds from the cell message (see "Lifetime" in `docs/sandbox.md`):
/// what holds a container's life when its sandbox-runner is gone without
/// its input closing, or is stuck.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Backstop {
    /// The run: its deadline, the approval allowance (a held cell is
    /// paused, its deadline stopped) and a margin.
    pub run: f64,
    /// Kept mode: the wait for the session's next cell after `done` (its
    /// idle time and a margin).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub between: Option<f64>,
    /// Kept mode: the rest of the session's longest life and a margin; the
    /// runner never lives past it, whatever the other bounds say.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<f64>,
}

/// Why a content block the code handed back is refused: each reason is a
/// protocol violation (the runner in the container checks the same bounds
/// and raises in the code first).
pub fn check_block(block: &Value, handed: usize, bytes: usize) -> Result<usize, Violation> {
    use base64::Engine as _;
    let bad = |why: &'static str| Err(Violation::OutOfOrder(why));
    if handed >= code_mode_proto::MAX_HANDED_BACK {
        return bad("more content blocks handed back than a cell may");
    }
    let Some(kind) = block.get("type").and_then(Value::as_str) else { return bad("a content block without a type") };
    let data = match kind {
        "image" | "audio" => {
            let mime = block.get("mimeType").and_then(Value::as_str).unwrap_or_default();
            if !is_mime_type(mime) {
                return bad("a content block without a valid MIME type");
            }
            block.get("data").and_then(Value::as_str)
        }
        "resource" => {
            let resource = block.get("resource");
            let uri = resource.and_then(|r| r.get("uri")).and_then(Value::as_str).unwrap_or_default();
            if uri.is_empty() || uri.len() > 2048 {
                return bad("an embedded resource without a valid URI");
            }
            match resource.and_then(|r| r.get("text")).and_then(Value::as_str) {
                Some(text) => return within(bytes, text.len()),
                None => resource.and_then(|r| r.get("blob")).and_then(Value::as_str),
            }
        }
        _ => return bad("a content block of a type code cannot hand back"),
    };
    let Some(data) = data else { return bad("a content block without its data") };
    match base64::engine::general_purpose::STANDARD.decode(data) {
        Ok(decoded) => within(bytes, decoded.len()),
        Err(_) => bad("a content block whose data is not base64"),
    }
}

/// The bytes handed back so far with `more`, when within the bound.
fn within(bytes: usize, more: usize) -> Result<usize, Violation> {
    match bytes.checked_add(more) {
        Some(total) if total <= code_mode_proto::MAX_HANDED_BACK_BYTES => Ok(total),
        _ => Err(Violation::OutOfOrder("more content handed back than a cell may")),
    }
}

/// A MIME type as `type/subtype` (with parameters), at most 100 characters.
pub(crate) fn is_mime_type(mime: &str) -> bool {
    let essence = mime.split(';').next().unwrap_or_default().trim();
    let mut parts = essence.split('/');
    let token = |t: Option<&str>| {
        t.is_some_and(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b)))
    };
    mime.len() <= 100 && token(parts.next()) && token(parts.next()) && parts.next().is_none()
}

/// One file in, as the cell message names it (its bytes follow the
/// message).
#[derive(Debug, Clone, Serialize)]
pub struct InputFile {
    /// Its name under `/tmp/in` (checked by the frontend).
    pub name: String,
    /// How many bytes it has.
    pub size: u64,
}

/// The limits the runner applies inside the container.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct RunnerLimits {
    /// Bytes of output forwarded.
    pub max_output: u32,
    /// Bytes of output after which the runner stops the code.
    pub stop_output: u32,
    /// Longest line the host accepts.
    pub max_line: u32,
    /// Bytes of the whole printed output the runner hands out for the
    /// client (`output_kept` lines) once it outgrew `max_output`; 0 (left
    /// out): none.
    #[serde(skip_serializing_if = "is_zero")]
    pub keep_output: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Why a run ended as a protocol violation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Violation {
    /// A line longer than the limit.
    #[error("a protocol line was longer than {max} bytes")]
    TooLong {
        /// The limit.
        max: usize,
    },
    /// Not UTF-8 JSON of a known shape.
    #[error("a protocol line was not a known message ({0})")]
    Malformed(String),
    /// A known shape at the wrong moment (a second `ready`, a call id reused).
    #[error("a protocol message came out of order: {0}")]
    OutOfOrder(&'static str),
}

/// Parse one line from the runner.
pub fn parse(line: &[u8]) -> Result<FromRunner, Violation> {
    serde_json::from_slice(line).map_err(|e| {
        // The error names the field or position, never echoes the line.
        let kind = if e.is_syntax() || e.is_eof() { "not JSON" } else { "unknown shape" };
        Violation::Malformed(kind.to_string())
    })
}

/// Encode one message to the runner as a line.
pub fn encode(message: &ToRunner<'_>) -> Vec<u8> {
    let mut line = serde_json::to_vec(message).expect("runner messages are plain JSON");
    line.push(b'\n');
    line
}

/// A `cell` message with its [`Backstop`], as one line (the field sits
/// beside the message's own, so a runner that does not know it ignores it).
pub fn encode_cell(message: &ToRunner<'_>, backstop: Backstop) -> Vec<u8> {
    #[derive(Serialize)]
    struct WithBackstop<'m, 'a> {
        #[serde(flatten)]
        message: &'m ToRunner<'a>,
        backstop: Backstop,
    }
    let mut line = serde_json::to_vec(&WithBackstop { message, backstop }).expect("runner messages are plain JSON");
    line.push(b'\n');
    line
}

/// Splits a byte stream into lines of at most `max` bytes.
#[derive(Debug)]
pub struct LineReader {
    buffer: Vec<u8>,
    max: usize,
}

impl LineReader {
    /// A reader refusing lines longer than `max` bytes.
    pub fn new(max: usize) -> Self {
        Self { buffer: Vec::new(), max }
    }

    /// Feed a chunk; returns the complete lines in it, or a violation as
    /// soon as a line grows past the limit.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<Vec<Vec<u8>>, Violation> {
        let mut lines = Vec::new();
        let mut rest = chunk;
        while let Some(pos) = rest.iter().position(|&b| b == b'\n') {
            if self.buffer.len() + pos > self.max {
                return Err(Violation::TooLong { max: self.max });
            }
            self.buffer.extend_from_slice(&rest[..pos]);
            lines.push(std::mem::take(&mut self.buffer));
            rest = &rest[pos + 1..];
        }
        if self.buffer.len() + rest.len() > self.max {
            return Err(Violation::TooLong { max: self.max });
        }
        self.buffer.extend_from_slice(rest);
        Ok(lines)
    }

    /// Accept lines of at most `max` bytes from now on (each cell of a kept
    /// container brings its own limit).
    pub fn set_max(&mut self, max: usize) {
        self.max = max;
    }

    /// The longest line accepted now.
    pub fn max(&self) -> usize {
        self.max
    }

    /// True when a partial line is waiting for its end.
    pub fn has_partial(&self) -> bool {
        !self.buffer.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_message_carries_its_backstop_beside_its_own_fields() {
        let limits = RunnerLimits { max_output: 10, stop_output: 20, max_line: 30, keep_output: 0 };
        let cell = ToRunner::Cell { code: "print(1)", tools: &[], withheld: &[], limits, keep: true, inputs: &[] };
        let backstop = Backstop { run: 70.0, between: Some(610.0), session: Some(3610.5) };
        let line = encode_cell(&cell, backstop);
        assert_eq!(line.last(), Some(&b'\n'));
        let value: Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(value["type"], "cell");
        assert_eq!(value["keep"], true);
        assert_eq!(value["code"], "print(1)");
        assert_eq!(value["backstop"], serde_json::json!({"run": 70.0, "between": 610.0, "session": 3610.5}));

        let fresh = ToRunner::Cell { code: "", tools: &[], withheld: &[], limits, keep: false, inputs: &[] };
        let line = encode_cell(&fresh, Backstop { run: 5.0, between: None, session: None });
        let value: Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(value["backstop"], serde_json::json!({"run": 5.0}), "a fresh run has no session bounds");
        assert!(value.get("keep").is_none());
    }

    #[test]
    fn known_messages_parse() {
        assert_eq!(parse(br#"{"type":"ready"}"#).unwrap(), FromRunner::Ready {});
        assert_eq!(
            parse(br#"{"type":"call","id":1,"tool":"add","arguments":{"a":1}}"#).unwrap(),
            FromRunner::Call {
                id: 1,
                tool: "add".into(),
                arguments: serde_json::json!({"a": 1}),
                op: code_mode_proto::Op::Tool
            }
        );
        assert!(matches!(
            parse(br#"{"type":"done","error":null,"truncated":false,"stopped":false}"#).unwrap(),
            FromRunner::Done { error: None, .. }
        ));
    }

    #[test]
    fn handed_back_blocks_are_held_to_their_count_size_type_mime_and_base64() {
        let image = |data: &str| serde_json::json!({"type": "image", "data": data, "mimeType": "image/png"});
        assert_eq!(check_block(&image("AAAA"), 0, 0), Ok(3));
        assert!(check_block(&image("AAAA"), code_mode_proto::MAX_HANDED_BACK, 0).is_err(), "one block too many");
        assert!(check_block(&image("AAAA"), 0, code_mode_proto::MAX_HANDED_BACK_BYTES - 2).is_err(), "past the bytes");
        assert!(check_block(&image("not base64!"), 0, 0).is_err());
        let no_mime = serde_json::json!({"type": "audio", "data": "AAAA", "mimeType": "audio"});
        assert!(check_block(&no_mime, 0, 0).is_err());
        let text = serde_json::json!({"type": "text", "text": "a spoofed report"});
        assert!(check_block(&text, 0, 0).is_err(), "text is the report's, not the code's to add");
        let file = serde_json::json!({"type": "resource", "resource": {"uri": "code-mode://cell/handed/0", "mimeType": "text/csv", "text": "a,b"}});
        assert_eq!(check_block(&file, 1, 10), Ok(13));
        let nowhere = serde_json::json!({"type": "resource", "resource": {"mimeType": "text/csv", "text": "a,b"}});
        assert!(check_block(&nowhere, 0, 0).is_err());
        let progress = parse(br#"{"type":"progress","progress":1.5,"total":3,"message":"half"}"#).unwrap();
        assert_eq!(progress, FromRunner::Progress { progress: 1.5, total: Some(3.0), message: Some("half".into()) });
    }

    #[test]
    fn unknown_shapes_and_garbage_are_violations() {
        for line in [
            &b"garbage"[..],
            br#"{"type":"shell","cmd":"rm -rf /"}"#,
            br#"{"type":"call","id":-1,"tool":"add","arguments":{}}"#,
            br#"{"type":"call","id":1,"tool":7,"arguments":{}}"#,
            br#"{"type":"ready","extra":1}"#,
            br#"[1,2,3]"#,
            b"\xff\xfe",
        ] {
            assert!(parse(line).is_err(), "{:?}", String::from_utf8_lossy(line));
        }
    }

    #[test]
    fn lines_are_split_across_chunks() {
        let mut r = LineReader::new(100);
        assert!(r.feed(b"{\"a\"").unwrap().is_empty());
        let lines = r.feed(b":1}\n{\"b\":2}\n{").unwrap();
        assert_eq!(lines, vec![b"{\"a\":1}".to_vec(), b"{\"b\":2}".to_vec()]);
        assert!(r.has_partial());
    }

    #[test]
    fn a_line_over_the_limit_is_a_violation_even_without_its_newline() {
        let mut r = LineReader::new(10);
        assert_eq!(r.feed(&[b'x'; 11]).unwrap_err(), Violation::TooLong { max: 10 });
        let mut r = LineReader::new(10);
        r.feed(b"12345").unwrap();
        assert!(r.feed(b"678901\n").is_err());
    }
}
