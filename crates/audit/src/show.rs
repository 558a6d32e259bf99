//! Reading records back: from files (in the order given) or a stream,
//! filtered by session, identity, tool, decision or kind, printed one
//! readable line each, or as the records' own JSON lines for tools.

use std::collections::HashSet;
use std::path::Path;

use serde_json::Value;

use crate::AuditError;
use crate::verify::SourceLine;

/// Read the lines of `files`, in order (empty lines are kept: they are
/// not records, and a check says so).
pub fn read_files(files: &[impl AsRef<Path>]) -> Result<Vec<SourceLine>, AuditError> {
    let mut out = Vec::new();
    for file in files {
        let path = file.as_ref();
        let source = path.display().to_string();
        let text = std::fs::read(path).map_err(|e| AuditError::Open { sink: source.clone(), reason: e.to_string() })?;
        let text = String::from_utf8_lossy(&text);
        let body = text.strip_suffix('\n').unwrap_or(&text);
        if body.is_empty() {
            continue;
        }
        for (i, line) in body.split('\n').enumerate() {
            out.push(SourceLine { source: source.clone(), line: i as u64 + 1, text: line.to_string() });
        }
    }
    Ok(out)
}

/// Which records to show.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Only records of this client session.
    pub session: Option<String>,
    /// Only cells of this identity, and the calls those cells made.
    pub identity: Option<String>,
    /// Only calls of this tool (its server name or `server/tool`).
    pub tool: Option<String>,
    /// Only calls with this decision.
    pub decision: Option<String>,
    /// Only records of this kind.
    pub kind: Option<String>,
}

/// The records (as JSON) that pass `filter`, in order. Lines that are not
/// JSON objects are skipped (a check reports them).
pub fn select(lines: &[SourceLine], filter: &Filter) -> Vec<Value> {
    let records: Vec<Value> =
        lines.iter().filter_map(|l| serde_json::from_str::<Value>(&l.text).ok()).filter(Value::is_object).collect();
    // Cells of the identity, so their calls can be shown too.
    let cells: Option<HashSet<String>> = filter.identity.as_ref().map(|who| {
        records
            .iter()
            .filter(|r| {
                matches!(r["kind"].as_str(), Some("cell" | "cell_start")) && r["identity"].as_str() == Some(who)
            })
            .filter_map(|r| r["cell"].as_str().map(str::to_string))
            .collect()
    });
    records
        .into_iter()
        .filter(|r| {
            let kind = r["kind"].as_str().unwrap_or("");
            if filter.kind.as_deref().is_some_and(|k| k != kind) {
                return false;
            }
            if filter.session.as_deref().is_some_and(|s| r["session"].as_str() != Some(s)) {
                return false;
            }
            if let Some(cells) = &cells
                && !r["cell"].as_str().is_some_and(|c| cells.contains(c))
            {
                return false;
            }
            if let Some(tool) = &filter.tool {
                let name = r["tool"].as_str().unwrap_or("");
                let full = format!("{}/{name}", r["server"].as_str().unwrap_or(""));
                if kind != "call" || (name != tool && &full != tool) {
                    return false;
                }
            }
            if filter.decision.as_deref().is_some_and(|d| kind != "call" || r["decision"].as_str() != Some(d)) {
                return false;
            }
            true
        })
        .collect()
}

fn short(text: &str, n: usize) -> &str {
    match text.char_indices().nth(n) {
        Some((at, _)) => &text[..at],
        None => text,
    }
}

fn s<'a>(r: &'a Value, key: &str) -> &'a str {
    r[key].as_str().unwrap_or("-")
}

/// One readable line for a record.
pub fn readable(r: &Value) -> String {
    let head = format!("#{:<5} {} {:<10}", r["seq"].as_u64().unwrap_or(0), s(r, "time"), s(r, "kind"));
    let body = match s(r, "kind") {
        "open" => {
            let resumed = if r["resumed"] == Value::Bool(true) { " (resumed)" } else { "" };
            format!("{} by {}{resumed}", s(r, "sink"), s(r, "writer"))
        }
        "checkpoint" => format!("head {} after {} records", short(s(r, "head"), 16), r["records"]),
        "tools" => {
            let names: Vec<&str> =
                r["tools"].as_array().into_iter().flatten().filter_map(|t| t["name"].as_str()).collect();
            format!("server {}: {}", s(r, "server"), names.join(", "))
        }
        "reload" => {
            let policies: Vec<String> = r["policies"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| format!("{} {}", s(p, "server"), short(s(p, "sha256"), 12)))
                .collect();
            let names = |key: &str| -> String {
                let list: Vec<&str> = r[key].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
                if list.is_empty() { "-".to_string() } else { list.join(",") }
            };
            format!(
                "{} version {} added {} removed {} policies {}",
                s(r, "source"),
                r["version"],
                names("added"),
                names("removed"),
                if policies.is_empty() { "-".to_string() } else { policies.join(", ") }
            )
        }
        "cell_start" | "cell" => {
            let mut text = format!(
                "session {} identity {} cell {} code {} B sha256 {} runtime {} image {}",
                short(s(r, "session"), 8),
                r["identity"].as_str().unwrap_or("-"),
                short(s(r, "cell"), 8),
                r["code_bytes"],
                short(s(r, "code_sha256"), 12),
                s(r, "runtime"),
                s(r, "image"),
            );
            if r["kind"] == "cell" {
                text.push_str(&format!(" {} -> {} {}", s(r, "start"), s(r, "end"), s(r, "outcome")));
            }
            text
        }
        "call" => {
            let mut text = format!(
                "session {} cell {}#{} {}/{} {} {} args {} B {}",
                short(s(r, "session"), 8),
                short(s(r, "cell"), 8),
                r["call"],
                r["server"].as_str().unwrap_or("?"),
                s(r, "tool"),
                s(r, "decision"),
                r["rule"].as_str().unwrap_or("(no rule)"),
                r["args_bytes"],
                short(s(r, "args_sha256"), 12),
            );
            if let Some(result) = r["result"].as_str() {
                text.push_str(&format!(
                    " result {result} {} B {}",
                    r["result_bytes"],
                    short(r["result_sha256"].as_str().unwrap_or("-"), 12)
                ));
            }
            if r["tainted"] == Value::Bool(true) {
                text.push_str(" tainted");
            }
            if let Some(reason) = r["reason"].as_str() {
                text.push_str(&format!(" — {reason}"));
            }
            text
        }
        _ => String::new(),
    };
    format!("{head} {body}").trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lines(records: &[Value]) -> Vec<SourceLine> {
        records
            .iter()
            .enumerate()
            .map(|(i, r)| SourceLine { source: "a".into(), line: i as u64 + 1, text: r.to_string() })
            .collect()
    }

    #[test]
    fn filters_pick_records_by_session_identity_tool_and_decision() {
        let records = [
            json!({"seq": 1, "kind": "open"}),
            json!({"seq": 2, "kind": "cell_start", "session": "s1", "identity": "alice", "cell": "c1"}),
            json!({"seq": 3, "kind": "call", "session": "s1", "cell": "c1", "server": "srv", "tool": "add", "decision": "allowed"}),
            json!({"seq": 4, "kind": "cell_start", "session": "s2", "identity": "bob", "cell": "c2"}),
            json!({"seq": 5, "kind": "call", "session": "s2", "cell": "c2", "server": "srv", "tool": "echo", "decision": "denied"}),
            json!({"seq": 6, "kind": "call", "session": "s2", "cell": "c2", "server": "srv", "tool": "add", "decision": "rate_limited"}),
        ];
        let seqs = |filter: Filter| -> Vec<u64> {
            select(&lines(&records), &filter).iter().map(|r| r["seq"].as_u64().unwrap()).collect()
        };
        assert_eq!(seqs(Filter { identity: Some("alice".into()), ..Default::default() }), [2, 3]);
        assert_eq!(seqs(Filter { session: Some("s2".into()), ..Default::default() }), [4, 5, 6]);
        assert_eq!(seqs(Filter { tool: Some("add".into()), ..Default::default() }), [3, 6]);
        assert_eq!(seqs(Filter { tool: Some("srv/echo".into()), ..Default::default() }), [5]);
        assert_eq!(seqs(Filter { decision: Some("denied".into()), ..Default::default() }), [5]);
        assert_eq!(seqs(Filter { identity: Some("bob".into()), tool: Some("add".into()), ..Default::default() }), [6]);
        let shown = readable(&records[5]);
        assert!(shown.contains("srv/add rate_limited"), "{shown}");
    }
}
