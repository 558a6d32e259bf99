//! Checking a chain: every record in the canonical form, each naming the
//! hash of the one before it with the next `seq`, the first one the sink's
//! start, each checkpoint naming the head before it.
//!
//! [`verify`] walks the records in the order given (files concatenated, or
//! the stream) and stops at the first record that does not fit, saying
//! what happened there, by position (1-based, over all records given) and
//! by file and line:
//!
//! - **altered**: a record's bytes are not the bytes the next record
//!   chained to (or it is not canonical, or its `seq` or checkpoint is
//!   wrong); when the next record still chains to the one after, the
//!   altered one is pinned down exactly;
//! - **missing**: records with the `seq`s between are not there;
//! - **reordered**: a record sits before one it chains after;
//! - **inserted**: a record no other record chains to, with the chain
//!   going on after it (or a second copy of a record).
//!
//! The chain proves order and integrity from the first record on, given an
//! honest writer: whoever can rewrite every record from some point on (and
//! every copy of the checkpoints) can make a chain that verifies. The last
//! record is covered once a later record chains to it; `--checkpoint`
//! checks the chain against heads kept elsewhere.

use std::collections::HashMap;
use std::fmt;

use crate::record::{LineError, ParsedLine, parse_line};

/// One line as read, and where it came from.
#[derive(Debug, Clone)]
pub struct SourceLine {
    /// The file (or `nats:<stream>`).
    pub source: String,
    /// Its line number in the file (the stream sequence for a stream).
    pub line: u64,
    /// The text, without the newline.
    pub text: String,
}

/// What is wrong at the first record that does not fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProblemKind {
    /// Changed after it was written.
    Altered,
    /// Records are missing before it.
    Missing,
    /// Out of order.
    Reordered,
    /// Not part of the chain.
    Inserted,
    /// The first record given is not the sink's start.
    NoStart,
}

impl fmt::Display for ProblemKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ProblemKind::Altered => "altered",
            ProblemKind::Missing => "missing",
            ProblemKind::Reordered => "reordered",
            ProblemKind::Inserted => "inserted",
            ProblemKind::NoStart => "no start",
        })
    }
}

/// The first problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// What.
    pub kind: ProblemKind,
    /// The record's position among all records given, from 1.
    pub position: usize,
    /// Its file (or stream).
    pub source: String,
    /// Its line in that file.
    pub line: u64,
    /// What was found, for people.
    pub detail: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "record {} ({} line {}): {}: {}", self.position, self.source, self.line, self.kind, self.detail)
    }
}

/// The result of a check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// Records read.
    pub records: usize,
    /// `seq` of the first and last record that verified.
    pub first_seq: Option<u64>,
    /// Of the last.
    pub last_seq: Option<u64>,
    /// Hash of the last record that verified (the chain head).
    pub head: Option<String>,
    /// Checkpoints seen (and verified).
    pub checkpoints: usize,
    /// The first problem, if any.
    pub problem: Option<Problem>,
}

impl Report {
    /// True when the whole chain verified.
    pub fn ok(&self) -> bool {
        self.problem.is_none()
    }
}

/// Options of a check.
#[derive(Debug, Clone, Default)]
pub struct VerifyOptions {
    /// The first record need not be the sink's start (older files were
    /// removed, or a stream's retention dropped them): check from it on.
    pub partial: bool,
    /// Heads kept elsewhere: `(seq, hash)` of a record the chain must hold.
    pub expect: Vec<(u64, String)>,
}

/// Check `lines` as one chain (see the module doc).
pub fn verify(lines: &[SourceLine], options: &VerifyOptions) -> Report {
    let parsed: Vec<Result<ParsedLine, LineError>> = lines.iter().map(|l| parse_line(&l.text)).collect();
    let mut report =
        Report { records: lines.len(), first_seq: None, last_seq: None, head: None, checkpoints: 0, problem: None };
    let problem = |kind, i: usize, detail: String| Problem {
        kind,
        position: i + 1,
        source: lines[i].source.clone(),
        line: lines[i].line,
        detail,
    };
    let hashes: Vec<Option<&str>> = parsed.iter().map(|p| p.as_ref().ok().map(|p| p.hash.as_str())).collect();
    let prevs: Vec<Option<&str>> = parsed.iter().map(|p| p.as_ref().ok().and_then(|p| p.prev.as_deref())).collect();
    // Where each hash is named as `prev`, and where each hash first appears.
    let mut named_at: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, prev) in prevs.iter().enumerate() {
        if let Some(prev) = prev {
            named_at.entry(prev).or_default().push(i);
        }
    }
    let mut first_at: HashMap<&str, usize> = HashMap::new();
    let mut seen: HashMap<u64, &str> = HashMap::new();
    for i in 0..parsed.len() {
        let e = match &parsed[i] {
            Ok(e) => e,
            Err(why) => {
                report.problem = Some(problem(ProblemKind::Altered, i, format!("not a record: {why}")));
                return report;
            }
        };
        if i == 0 {
            let start = e.seq == 1 && e.prev.is_none() && e.kind == "open";
            if !start && !options.partial {
                let detail = if e.seq > 1 {
                    format!(
                        "the first record has seq {}: records 1 to {} are missing (give the earlier files first, or --partial)",
                        e.seq,
                        e.seq - 1
                    )
                } else {
                    format!(
                        "the first record (seq {}, {}) is not the sink's start (an open record with no prev)",
                        e.seq, e.kind
                    )
                };
                let kind = if e.seq > 1 { ProblemKind::Missing } else { ProblemKind::NoStart };
                report.problem = Some(problem(kind, i, detail));
                return report;
            }
        } else {
            let c = parsed[i - 1].as_ref().expect("checked at its turn");
            if let Some(p) = locate(i, e, c, &hashes, &prevs, &named_at, &first_at) {
                report.problem = Some(problem(p.0, p.1, p.2));
                return report;
            }
        }
        if e.kind == "checkpoint" {
            let head = e.value.get("head").and_then(|v| v.as_str());
            let records = e.value.get("records").and_then(|v| v.as_u64());
            if (i > 0 || !options.partial) && (head != e.prev.as_deref() || records != Some(e.seq - 1)) {
                let detail = "a checkpoint whose head or count is not the chain's at that point".to_string();
                report.problem = Some(problem(ProblemKind::Altered, i, detail));
                return report;
            }
            report.checkpoints += 1;
        }
        first_at.entry(e.hash.as_str()).or_insert(i);
        seen.insert(e.seq, e.hash.as_str());
        report.first_seq.get_or_insert(e.seq);
        report.last_seq = Some(e.seq);
        report.head = Some(e.hash.clone());
    }
    for (seq, hash) in &options.expect {
        match seen.get(seq) {
            Some(found) if found == hash => {}
            Some(found) => {
                let i = (0..parsed.len()).find(|i| parsed[*i].as_ref().is_ok_and(|p| p.seq == *seq)).unwrap_or(0);
                report.problem = Some(problem(
                    ProblemKind::Altered,
                    i,
                    format!(
                        "record seq {seq} hashes to {found}, but the head kept elsewhere says {hash}: the chain was rewritten"
                    ),
                ));
                return report;
            }
            None if lines.is_empty() => {}
            None => {
                let last = lines.len() - 1;
                report.problem = Some(problem(
                    ProblemKind::Missing,
                    last,
                    format!("no record with seq {seq}, which a head kept elsewhere names: the chain was cut"),
                ));
                return report;
            }
        }
    }
    report
}

/// What is wrong at position `i` (whose predecessor `c` verified), if
/// anything: the kind, the position to blame, and the detail.
#[allow(clippy::too_many_arguments)]
fn locate(
    i: usize,
    e: &ParsedLine,
    c: &ParsedLine,
    hashes: &[Option<&str>],
    prevs: &[Option<&str>],
    named_at: &HashMap<&str, Vec<usize>>,
    first_at: &HashMap<&str, usize>,
) -> Option<(ProblemKind, usize, String)> {
    let want = c.seq + 1;
    if e.prev.as_deref() == Some(c.hash.as_str()) {
        if e.seq == want {
            return None;
        }
        return Some((
            ProblemKind::Altered,
            i,
            format!("it chains to the record before but says seq {}, not {want}", e.seq),
        ));
    }
    if let Some(&j) = first_at.get(e.hash.as_str()) {
        return Some((ProblemKind::Inserted, i, format!("a second copy of record {} (seq {})", j + 1, e.seq)));
    }
    // It skips the record before it and chains to the one before that:
    // the record before it does not belong.
    if i >= 2 && e.prev.is_some() && e.prev.as_deref() == hashes[i - 2] {
        return Some((
            ProblemKind::Inserted,
            i - 1,
            format!("record {} chains to record {}, so record {} (seq {}) was put in between", i + 1, i - 1, i, c.seq),
        ));
    }
    let named_later = named_at.get(e.hash.as_str()).is_some_and(|at| at.iter().any(|k| *k > i));
    let names_later = e.prev.as_deref().is_some_and(|p| hashes.iter().skip(i + 1).any(|h| *h == Some(p)));
    let successor = named_at.get(c.hash.as_str()).and_then(|at| at.iter().copied().find(|k| *k > i));
    if let Some(j) = successor {
        if named_later || names_later {
            return Some((
                ProblemKind::Reordered,
                i,
                format!("seq {} comes before seq {want} (at record {}), which it follows in the chain", e.seq, j + 1),
            ));
        }
        return Some((
            ProblemKind::Inserted,
            i,
            format!("no record chains to it, and the chain goes on at record {} (seq {want})", j + 1),
        ));
    }
    if e.seq > want {
        let what =
            if e.seq == want + 1 { format!("seq {want} is") } else { format!("seqs {want} to {} are", e.seq - 1) };
        return Some((ProblemKind::Missing, i, format!("{what} missing before it (it has seq {})", e.seq)));
    }
    if e.seq == want {
        // Either the record before was changed (this one still chains to
        // its old bytes) or this one's `prev` was: if the next record still
        // chains to this one, this one is intact.
        let next_intact = prevs.get(i + 1).copied().flatten() == Some(e.hash.as_str());
        return if next_intact || i + 1 == prevs.len() {
            Some((
                ProblemKind::Altered,
                i - 1,
                format!("its bytes no longer hash to what record {} (seq {}) chained to", i + 1, e.seq),
            ))
        } else {
            Some((ProblemKind::Altered, i, format!("it does not chain to record {} (seq {})", i, c.seq)))
        };
    }
    if named_later || names_later {
        return Some((ProblemKind::Reordered, i, format!("seq {} comes after seq {}", e.seq, c.seq)));
    }
    Some((ProblemKind::Inserted, i, format!("seq {} does not follow seq {} and no record chains to it", e.seq, c.seq)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Body, Checkpoint, Open, Record, VERSION, line_hash};

    /// A valid chain of `n` records (an open, then checkpoints as filler).
    fn chain(n: u64) -> Vec<String> {
        chain_by(n, "w")
    }

    fn chain_by(n: u64, writer: &str) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for seq in 1..=n {
            let prev = out.last().map(|l| line_hash(l));
            let body = if seq == 1 {
                Body::Open(Open { sink: "test".into(), resumed: false })
            } else {
                Body::Checkpoint(Checkpoint { head: prev.clone().unwrap(), records: seq - 1 })
            };
            let r = Record { v: VERSION, seq, prev, time: format!("t{seq}"), writer: writer.into(), body };
            out.push(r.to_line());
        }
        out
    }

    fn lines(texts: &[String]) -> Vec<SourceLine> {
        texts
            .iter()
            .enumerate()
            .map(|(i, t)| SourceLine { source: "a.jsonl".into(), line: i as u64 + 1, text: t.clone() })
            .collect()
    }

    fn first_problem(texts: &[String]) -> Option<(ProblemKind, usize)> {
        verify(&lines(texts), &VerifyOptions::default()).problem.map(|p| (p.kind, p.position))
    }

    #[test]
    fn an_intact_chain_verifies_and_reports_its_head() {
        let c = chain(6);
        let report = verify(&lines(&c), &VerifyOptions::default());
        assert!(report.ok(), "{report:?}");
        assert_eq!((report.first_seq, report.last_seq, report.checkpoints), (Some(1), Some(6), 5));
        assert_eq!(report.head.as_deref(), Some(line_hash(&c[5]).as_str()));
    }

    #[test]
    fn swapping_the_last_two_records_is_a_reordering() {
        let mut c = chain(6);
        c.swap(4, 5);
        assert_eq!(first_problem(&c), Some((ProblemKind::Reordered, 5)));
    }

    #[test]
    fn a_head_kept_elsewhere_catches_a_rewritten_or_cut_chain() {
        let c = chain(6);
        let kept = (4, line_hash(&c[3]));
        let ok = verify(&lines(&c), &VerifyOptions { partial: false, expect: vec![kept.clone()] });
        assert!(ok.ok());
        let cut = verify(&lines(&c[..3]), &VerifyOptions { partial: false, expect: vec![kept.clone()] });
        assert_eq!(cut.problem.map(|p| p.kind), Some(ProblemKind::Missing));
        let other = chain_by(6, "x");
        let rewritten = verify(&lines(&other), &VerifyOptions { partial: false, expect: vec![kept] });
        assert_eq!(rewritten.problem.map(|p| (p.kind, p.position)), Some((ProblemKind::Altered, 4)));
    }

    #[test]
    fn a_partial_chain_verifies_only_when_asked() {
        let c = chain(6);
        assert_eq!(first_problem(&c[2..]), Some((ProblemKind::Missing, 1)));
        let report = verify(&lines(&c[2..]), &VerifyOptions { partial: true, expect: vec![] });
        assert!(report.ok(), "{report:?}");
    }
}
