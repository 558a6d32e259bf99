//! The record format, version 1: what one record holds, the exact bytes that
//! are hashed, and how records chain.
//!
//! A record is one line of UTF-8 JSON, an object with these common keys:
//!
//! - `v`: the format version (`1`);
//! - `seq`: its position in its sink, counting from 1 (over JetStream: the
//!   stream sequence number, which the stream itself assigns);
//! - `prev`: the SHA-256 (lowercase hex) of the previous record's line, or
//!   `null` for the first record of a sink;
//! - `time`: when it was written (RFC 3339, UTC, milliseconds);
//! - `writer`: who wrote it (`<service>@<host>:<pid>`);
//! - `kind`: one of [`Body`]'s kinds, whose own keys sit beside these.
//!
//! # The bytes that are hashed
//!
//! A record's hash is SHA-256 of its line exactly as stored, without the
//! line's terminating `\n`. Writers produce the line in one canonical form,
//! and readers refuse any line that is not in it, so what a reader shows is
//! what was hashed (no second parse of duplicate keys or odd escapes):
//!
//! - object keys sorted by their UTF-8 bytes, at every level;
//! - no white space outside strings;
//! - strings escaped as `serde_json` does (`\"`, `\\`, `\n`, `\r`, `\t`,
//!   `\b`, `\f`, other control characters as `\u00XX`; everything else,
//!   `/` and non-ASCII included, as is);
//! - numbers as `serde_json` prints them (integers as decimal digits; the
//!   format itself has no fractions, argument values recorded for replay may).
//!
//! [`canonical`] makes that form; [`parse_line`] checks it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// The format version written in every record's `v`.
pub const VERSION: u64 = 1;

/// One record: the chain fields and its body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// The format version.
    pub v: u64,
    /// Its position in the sink, from 1.
    pub seq: u64,
    /// The hash of the previous record's line (`None` for the first).
    pub prev: Option<String>,
    /// When it was written.
    pub time: String,
    /// Who wrote it.
    pub writer: String,
    /// What it records.
    #[serde(flatten)]
    pub body: Body,
}

/// What a record records, by `kind`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Body {
    /// A writer opened the sink. The sink's first record is one: it names
    /// the sink, and its `time` is the sink's start.
    Open(Open),
    /// The chain head so far, written periodically (and at a clean close,
    /// and first in each file after a rotation), so the head can be copied
    /// elsewhere and checked later.
    Checkpoint(Checkpoint),
    /// The tools a wrapped server offers, with their annotations (written
    /// when the bridge starts and when the tools change), so a policy can be
    /// replayed with the same categories.
    Tools(Tools),
    /// A cell is about to run; written before its code reaches the sandbox.
    CellStart(CellStart),
    /// A cell ended.
    Cell(Cell),
    /// One decision on one tool call.
    Call(Call),
    /// The bridge reread its policy files and `mcpServers` config while
    /// running (SIGHUP) and now applies them: the hash of each policy in
    /// force, the servers added and removed.
    Reload(Reload),
}

impl Body {
    /// Every `kind` word, in the order the variants are declared (what
    /// `audit show --kind` takes).
    pub const KINDS: [&'static str; 7] = ["open", "checkpoint", "tools", "cell_start", "cell", "call", "reload"];

    /// The `kind` word.
    pub fn kind(&self) -> &'static str {
        match self {
            Body::Open(_) => "open",
            Body::Checkpoint(_) => "checkpoint",
            Body::Tools(_) => "tools",
            Body::CellStart(_) => "cell_start",
            Body::Cell(_) => "cell",
            Body::Call(_) => "call",
            Body::Reload(_) => "reload",
        }
    }
}

/// A writer opened the sink.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Open {
    /// The sink: `file:<path>`, `stderr`, `nats:<stream>`.
    pub sink: String,
    /// True when the chain continues one written before (a restarted
    /// writer, another replica).
    pub resumed: bool,
}

/// The chain head so far.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The hash of the record just before this one.
    pub head: String,
    /// How many records come before this one (its `seq` - 1).
    pub records: u64,
}

/// The tools of one wrapped server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tools {
    /// The server.
    pub server: String,
    /// Its tools, as it lists them.
    pub tools: Vec<ToolInfo>,
}

/// One tool and its MCP annotations (absent: the server did not say).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolInfo {
    /// The name the server lists.
    pub name: String,
    /// `readOnlyHint`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    /// `destructiveHint`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive: Option<bool>,
    /// `idempotentHint`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotent: Option<bool>,
    /// `openWorldHint`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_world: Option<bool>,
}

/// A reload the bridge applied: from then on its calls are judged by these
/// policies. A reload that was refused or invalid writes nothing (the
/// policies in force did not change).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reload {
    /// What was reread: the `mcpServers` file's path, or `policies` (the
    /// policy files of servers given by flags).
    pub source: String,
    /// The catalog's version from this reload on.
    pub version: u64,
    /// Servers started by this reload.
    pub added: Vec<String>,
    /// Servers closed by this reload.
    pub removed: Vec<String>,
    /// Each server's policy in force now (servers without one are absent).
    pub policies: Vec<PolicyInForce>,
}

/// One server's policy as a reload read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyInForce {
    /// The server.
    pub server: String,
    /// The policy file (or, for an inline policy, where it was written).
    pub policy: String,
    /// SHA-256 (lowercase hex) of the policy file's bytes (of an inline
    /// policy's JSON as written by `serde_json`).
    pub sha256: String,
}

/// What every cell record says of the cell.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CellFacts {
    /// The client session.
    pub session: String,
    /// Who the client is, when the frontend authenticates clients.
    pub identity: Option<String>,
    /// The cell's id.
    pub cell: String,
    /// Bytes of the code.
    pub code_bytes: u64,
    /// SHA-256 of the code's UTF-8 bytes.
    pub code_sha256: String,
    /// The OCI runtime the container runs under (`runc`, `runsc`).
    pub runtime: String,
    /// The sandbox image: its tag and, once known, its id.
    pub image: String,
}

/// A cell is about to run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CellStart {
    /// The cell.
    #[serde(flatten)]
    pub cell: CellFacts,
    /// Its files in (`/tmp/in`, issue 42), each named by its resource's
    /// URI (whose read has a call record of its own) or by the size and
    /// hash of the bytes the client sent; left out when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<CellInputRecord>,
}

/// One file in of a cell, as its `cell_start` record names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CellInputRecord {
    /// Its name under `/tmp/in`.
    pub name: String,
    /// The resource read into it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
    /// The tool whose file was read into it (its arguments and result hash
    /// are in that call's own record).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// Bytes the client sent inline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// SHA-256 of those bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

/// A cell ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cell {
    /// The cell.
    #[serde(flatten)]
    pub cell: CellFacts,
    /// When it started (the `cell_start` record's moment).
    pub start: String,
    /// When it ended.
    pub end: String,
    /// How it ended.
    pub outcome: CellOutcome,
}

/// How a cell ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CellOutcome {
    /// The code finished.
    Ok,
    /// The code raised.
    Error,
    /// The run was stopped (deadline, output flood, protocol violation, the
    /// container died, shutdown).
    Stopped,
    /// The request that ran it was cancelled, or its client went away: the
    /// run was stopped and its container killed.
    Cancelled,
    /// The run could not start (the container could not be created).
    Failed,
}

/// What became of a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// It went out (a policy, if any, allowed it).
    Allowed,
    /// The person approved it, so it went out.
    Approved,
    /// The policy denies the tool.
    Denied,
    /// It needed approval and did not get it.
    NotApproved,
    /// A rate limit refused it.
    RateLimited,
    /// Another check refused it: a policy's argument rule or its counters'
    /// store, or one of the bridge's own checks (`rule` says which).
    Refused,
}

impl Decision {
    /// Every decision word (what `audit show --decision` takes).
    pub const WORDS: [&'static str; 6] = ["allowed", "approved", "denied", "not_approved", "rate_limited", "refused"];

    /// The word in a record and in the metric's label.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allowed => "allowed",
            Decision::Approved => "approved",
            Decision::Denied => "denied",
            Decision::NotApproved => "not_approved",
            Decision::RateLimited => "rate_limited",
            Decision::Refused => "refused",
        }
    }

    /// Parse the word.
    pub fn from_word(word: &str) -> Option<Self> {
        [
            Decision::Allowed,
            Decision::Approved,
            Decision::Denied,
            Decision::NotApproved,
            Decision::RateLimited,
            Decision::Refused,
        ]
        .into_iter()
        .find(|d| d.as_str() == word)
    }

    /// True when the call went out to its server.
    pub fn went_out(self) -> bool {
        matches!(self, Decision::Allowed | Decision::Approved)
    }
}

/// How a call that went out came back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallResult {
    /// A result reached the code.
    Ok,
    /// The tool reported a failure (`isError`).
    Error,
    /// The result was over the size limit (refused, not cut).
    TooLarge,
    /// No answer within the call timeout.
    Timeout,
    /// A host-side fault (transport closed, server restarting, ...).
    Fault,
}

/// One decision on one tool call. It carries sizes and hashes of the
/// arguments and of the result, never their values, except the arguments
/// of tools whose policy rule says `"record_args": true`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Call {
    /// The client session.
    pub session: String,
    /// Who the client is, when the frontend authenticates clients (left
    /// out of the record otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
    /// The cell that made the call.
    pub cell: String,
    /// Its index in the cell (from 1).
    pub call: u32,
    /// The wrapped server (`None` for a name no server has).
    pub server: Option<String>,
    /// The tool as its server lists it (the name the code used when no
    /// server has it); for another request (`method`), its target as the
    /// server knows it: a resource's URI, a prompt's name, a completed
    /// template's URI, or the question's method.
    pub tool: String,
    /// The MCP request when it is not `tools/call` (`resources/read`,
    /// `resources/subscribe`, `resources/unsubscribe`, `resources/list`,
    /// `prompts/get`, `completion/complete`), or a server's question to the
    /// client (`sampling/createMessage`, `elicitation/create`,
    /// `roots/list`); left out for a tool call, so older records read the
    /// same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// The final decision.
    pub decision: Decision,
    /// The rule that made it: a policy's JSON path (`/tools/add`,
    /// `/categories/destructive`, `/default`) or one of the bridge's own
    /// checks (`bridge:unknown_tool`, `bridge:allowlist`, `bridge:budget`,
    /// `bridge:arguments`, `bridge:private_data`, `bridge:audit`); `None`
    /// for a call that went out with no rule to judge it.
    pub rule: Option<String>,
    /// The policy's own decision when a policy judged the call (it differs
    /// from `decision` when a later check, the private-data rule, refused a
    /// call the policy let through).
    pub policy: Option<Decision>,
    /// Why it was refused (never quoting the arguments).
    pub reason: Option<String>,
    /// When the decision was made (what a replay's rate limits count by).
    pub decided: String,
    /// Bytes of the arguments as compact JSON.
    pub args_bytes: u64,
    /// SHA-256 of those bytes.
    pub args_sha256: String,
    /// The arguments themselves, only when the policy's rule for the tool
    /// says `"record_args": true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Value>,
    /// How the call came back, for a call that went out.
    pub result: Option<CallResult>,
    /// Bytes of the result (or of the tool's error text).
    pub result_bytes: Option<u64>,
    /// SHA-256 of those bytes.
    pub result_sha256: Option<String>,
    /// Whether the session was tainted by private data after this call's
    /// checks (`None`: the private-data rule did not judge it).
    pub tainted: Option<bool>,
    /// How a team's approval of the call was decided (a rule with
    /// `approvers`); left out otherwise, so older records read the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<Box<Approval>>,
    /// The account at the server the call acted as (the upstream subject
    /// of the caller's own grant), for a server whose calls act as each
    /// identity's own account; left out otherwise, so older records read
    /// the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream_subject: Option<String>,
}

/// The decision on a question to a team (see [`Call::approval`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Approval {
    /// The question's id in the console.
    pub id: String,
    /// `approved`, `declined`, `timed_out` or `withdrawn`.
    pub outcome: String,
    /// Who decided: an identity, or `client` for the session's own client;
    /// `None` when nobody did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// When, RFC 3339 UTC.
    pub at: String,
    /// The decider's note, or why the question ended.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
    /// SHA-256 of the question as the approvers saw it.
    pub question_sha256: String,
    /// How long the call waited, in milliseconds.
    pub waited_ms: u64,
}

/// Size and SHA-256 (lowercase hex) of `bytes`.
pub fn size_and_hash(bytes: &[u8]) -> (u64, String) {
    (bytes.len() as u64, hex_sha256(bytes))
}

/// SHA-256 of `bytes`, lowercase hex.
pub fn hex_sha256(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(64);
    for b in digest {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// A record's hash: SHA-256 of its line (without the newline).
pub fn line_hash(line: &str) -> String {
    hex_sha256(line.as_bytes())
}

impl Record {
    /// The record as its canonical line (no newline).
    pub fn to_line(&self) -> String {
        canonical(&serde_json::to_value(self).expect("a record is JSON"))
    }
}

/// `value` in the canonical form (see the module doc).
pub fn canonical(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            out.push('{');
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_unstable();
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::to_string(key).expect("a string is JSON"));
                out.push(':');
                write_canonical(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&serde_json::to_string(other).expect("a scalar is JSON")),
    }
}

/// Why a line is not a record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    /// Not JSON.
    #[error("not JSON: {0}")]
    NotJson(String),
    /// JSON, but not in the canonical form, so its bytes are not the bytes
    /// a writer hashed.
    #[error("not in the canonical form (keys sorted, no spaces): it was rewritten after it was written")]
    NotCanonical,
    /// A chain field is missing or of the wrong type, or the version is
    /// unknown.
    #[error("{0}")]
    Shape(String),
}

/// A line checked for the canonical form and its chain fields.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedLine {
    /// The record as JSON (any kind, even one this version does not know).
    pub value: Map<String, Value>,
    /// `seq`.
    pub seq: u64,
    /// `prev`.
    pub prev: Option<String>,
    /// `kind`.
    pub kind: String,
    /// The line's hash.
    pub hash: String,
}

/// Parse one line, checking that it is canonical and has the chain fields.
pub fn parse_line(line: &str) -> Result<ParsedLine, LineError> {
    let value: Value = serde_json::from_str(line).map_err(|e| LineError::NotJson(e.to_string()))?;
    if canonical(&value) != line {
        return Err(LineError::NotCanonical);
    }
    let Value::Object(map) = value else { return Err(LineError::Shape("not a JSON object".into())) };
    match map.get("v").and_then(Value::as_u64) {
        Some(VERSION) => {}
        Some(v) => return Err(LineError::Shape(format!("format version {v} is not known (this reads {VERSION})"))),
        None => return Err(LineError::Shape("no format version \"v\"".into())),
    }
    let seq = map.get("seq").and_then(Value::as_u64).ok_or_else(|| LineError::Shape("no \"seq\" number".into()))?;
    let prev = match map.get("prev") {
        Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        _ => return Err(LineError::Shape("no \"prev\" (a hash or null)".into())),
    };
    let kind =
        map.get("kind").and_then(Value::as_str).ok_or_else(|| LineError::Shape("no \"kind\"".into()))?.to_string();
    Ok(ParsedLine { value: map, seq, prev, kind, hash: line_hash(line) })
}

/// `time` as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn rfc3339(time: SystemTime) -> String {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (year, month, day) = code_mode_core::calendar::civil_date(secs / 86_400);
    let rest = secs % 86_400;
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        since.subsec_millis()
    )
}

/// Read a time written by [`rfc3339`] (`YYYY-MM-DDTHH:MM:SS[.fff]Z`).
pub fn parse_rfc3339(text: &str) -> Option<SystemTime> {
    let text = text.strip_suffix('Z')?;
    let (date, clock) = text.split_once('T')?;
    let mut d = date.split('-');
    let (year, month, day): (u64, u64, u64) =
        (d.next()?.parse().ok()?, d.next()?.parse().ok()?, d.next()?.parse().ok()?);
    let (hms, fraction) = match clock.split_once('.') {
        Some((hms, f)) => (hms, f),
        None => (clock, "0"),
    };
    let mut c = hms.split(':');
    let (h, m, s): (u64, u64, u64) = (c.next()?.parse().ok()?, c.next()?.parse().ok()?, c.next()?.parse().ok()?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || h > 23 || m > 59 || s > 60 || year < 1970 {
        return None;
    }
    let digits: String = fraction.chars().chain(std::iter::repeat('0')).take(9).collect();
    let nanos: u32 = digits.parse().ok()?;
    let days = days_from_civil(year, month, day);
    Some(UNIX_EPOCH + Duration::new(days * 86_400 + h * 3600 + m * 60 + s, nanos))
}

/// The inverse of [`civil_date`].
fn days_from_civil(year: u64, month: u64, day: u64) -> u64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year / 400;
    let year_of_era = year - era * 400;
    let month_from_march = if month > 2 { month - 3 } else { month + 9 };
    let day_of_year = (153 * month_from_march + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_sorts_keys_at_every_level_and_drops_spaces() {
        let value = json!({"b": 1, "a": {"z": [true, null, "x/é\n"], "y": -2}});
        assert_eq!(canonical(&value), r#"{"a":{"y":-2,"z":[true,null,"x/é\n"]},"b":1}"#);
    }

    /// The words serde knows, from its error for an unknown one.
    fn words_serde_expects<T: serde::de::DeserializeOwned + std::fmt::Debug>(value: Value) -> Vec<String> {
        let error = serde_json::from_value::<T>(value).unwrap_err().to_string();
        let listed = error.split("expected one of ").nth(1).unwrap_or_else(|| panic!("{error}"));
        listed.split(", ").map(|w| w.trim_matches(|c: char| c == '`' || c.is_whitespace()).to_string()).collect()
    }

    #[test]
    fn the_kinds_and_decisions_listed_for_audit_show_are_every_one_a_record_may_hold() {
        assert_eq!(words_serde_expects::<Body>(json!({"kind": "nonsense"})), Body::KINDS);
        assert_eq!(words_serde_expects::<Decision>(json!("nonsense")), Decision::WORDS);
        for word in Decision::WORDS {
            assert_eq!(Decision::from_word(word).map(Decision::as_str), Some(word));
        }
    }

    #[test]
    fn a_line_with_spaces_or_unsorted_keys_is_not_canonical() {
        let record = Record {
            v: VERSION,
            seq: 1,
            prev: None,
            time: rfc3339(UNIX_EPOCH),
            writer: "t".into(),
            body: Body::Open(Open { sink: "stderr".into(), resumed: false }),
        };
        let line = record.to_line();
        let parsed = parse_line(&line).expect("a written line parses");
        assert_eq!((parsed.seq, parsed.prev, parsed.kind.as_str()), (1, None, "open"));
        assert_eq!(parsed.hash, line_hash(&line));
        assert_eq!(parse_line(&line.replacen(',', ", ", 1)), Err(LineError::NotCanonical));
        let swapped = line.replacen("{\"kind\":\"open\",", "{", 1).replacen('}', ",\"kind\":\"open\"}", 1);
        assert_eq!(parse_line(&swapped), Err(LineError::NotCanonical));
        let back: Record = serde_json::from_str(&line).unwrap();
        assert_eq!(back, record);
    }

    #[test]
    fn times_round_trip_through_rfc3339() {
        for ms in [0u64, 951_782_400_123 + 3_723_000, 1_798_761_599_999, 1_764_460_800_250] {
            let t = UNIX_EPOCH + Duration::from_millis(ms);
            assert_eq!(parse_rfc3339(&rfc3339(t)), Some(t), "{}", rfc3339(t));
        }
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_millis(951_782_400_123 + 3_723_000)),
            "2000-02-29T01:02:03.123Z"
        );
        assert_eq!(parse_rfc3339("2026-13-01T00:00:00Z"), None);
        assert_eq!(parse_rfc3339("yesterday"), None);
    }
}
