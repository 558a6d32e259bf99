//! Replaying recorded calls through another policy: what would it have
//! changed?
//!
//! [`replay`] takes the `call` records of one wrapped server from an audit
//! chain and runs each, in the order and at the moment it was judged
//! (`decided`), through a new [`Policy`] exactly as [`crate::Bridge::call`]
//! applies one: the verdict, then the `args` rule, then the limits, counted
//! by a [`RateLimiter`] over an in-memory store at the recorded times, so
//! windows fill and empty as they would have. The tools' annotations come
//! from the chain's `tools` records, so category rules see the same
//! categories.
//!
//! Each call's recorded policy outcome is compared with the new one and
//! sorted per tool into: now denied, now needing approval, now over a
//! limit (with the first such record), now refused by an argument rule,
//! now allowed that were refused, and no longer needing approval. Calls the
//! bridge refused before any policy could judge them (unknown tool,
//! allowlist, budget, schema) are counted but not replayed. An `args` rule
//! can be checked only against recorded values (`"record_args": true` in
//! the policy that recorded them): calls without them are assumed to pass
//! it, and the report names the rule and how many calls it could not judge.
//!
//! Records of other requests (`method`: a resource read or subscription,
//! a prompt, a completion, a server's sampling, elicitation or roots
//! question) are replayed through the policy's rules for them
//! (`resources`, `prompts`, `sampling`, `elicitation`, `roots`, else
//! `default`): now denied, or now allowed. They are reported under
//! `<method> <target>` (`resources/read test://static-text`).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use code_mode_audit::Decision;
use code_mode_audit::record::{Call, ToolInfo, parse_rfc3339};
use code_mode_core::state::SessionStore;
use serde::Serialize;
use serde_json::Value;

use crate::policy::{
    Admission, Annotations, Approver, Ask, LimitRefusal, Policy, PolicyError, RateLimiter, RuleSource, ToolFacts,
    Verdict,
};

/// Why a replay could not run.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The new policy cannot be used against the recorded tools.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// The records hold calls of several servers and none was chosen.
    #[error("the records hold calls of several servers ({0}): choose one with --server")]
    WhichServer(String),
    /// The chosen server made no recorded call.
    #[error("no recorded call of server {server:?} (servers with calls: {known})")]
    NoSuchServer {
        /// The server asked for.
        server: String,
        /// Those there are.
        known: String,
    },
    /// A call record cannot be read.
    #[error("record {seq}: {reason}")]
    BadRecord {
        /// Its `seq`.
        seq: u64,
        /// What is wrong.
        reason: String,
    },
}

/// How one call changed, if it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// It went out; the new policy denies the tool.
    NowDenied,
    /// It went out without asking (or was refused); now a person would be
    /// asked.
    NowNeedsApproval,
    /// It went out; a new limit's window is full by then.
    NowOverLimit,
    /// It went out; the new `args` rule refuses its recorded arguments.
    NowRefusedByArgs,
    /// It was refused by the policy (denied, over a limit, not approved,
    /// refused); now it would go out.
    NowAllowed,
    /// It went out after a person approved it; now it would go out without
    /// asking.
    NoLongerNeedsApproval,
    /// Its own client decided it; now the rule's approvers would (in the
    /// console), not the client.
    NowDecidedByApprovers,
    /// An approver decided it who could not now: not among the new rule's
    /// approvers (by name, with no group to admit them), or the caller
    /// themself where the rule no longer lets anyone approve their own calls.
    DeciderNoLongerApprover,
    /// An approver decided it in the console; now its own client would be
    /// asked instead.
    NowAskedOfTheClient,
}

impl Change {
    fn phrase(self) -> &'static str {
        match self {
            Change::NowDenied => "now denied",
            Change::NowNeedsApproval => "now needing approval",
            Change::NowOverLimit => "now over a limit",
            Change::NowRefusedByArgs => "now refused by an argument rule",
            Change::NowAllowed => "now allowed that were refused",
            Change::NoLongerNeedsApproval => "no longer needing approval",
            Change::NowDecidedByApprovers => "now decided by the rule's approvers, not the client",
            Change::DeciderNoLongerApprover => "decided by someone who could not decide them now",
            Change::NowAskedOfTheClient => "now asked of the client, not of approvers",
        }
    }
}

/// What changed for one kind of change of one tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Changed {
    /// How many calls.
    pub calls: u64,
    /// The record (`seq`) of the first.
    pub first_record: u64,
    /// The rule (and, for a limit, the refusal) that makes the difference.
    pub why: String,
}

/// What a replay found for one tool.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ToolReport {
    /// Its calls replayed.
    pub calls: u64,
    /// The changes, by kind.
    pub changes: BTreeMap<Change, Changed>,
    /// Calls whose `args` rule could not be checked (no recorded values).
    pub args_not_evaluated: u64,
    /// Calls an approver decided who is not named among the new rule's
    /// approvers, which name groups: whether they are in one of those
    /// groups was not recorded, so whether they could decide them now is
    /// not judged.
    pub deciders_not_judged: u64,
    /// Those groups (`group:security`), for the report.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub deciders_groups: Vec<String>,
}

/// The result of a replay.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ReplayReport {
    /// The server whose calls were replayed.
    pub server: String,
    /// The policy replayed.
    pub policy: String,
    /// Calls replayed.
    pub calls: u64,
    /// Calls the bridge refused before any policy judged them.
    pub not_judged: u64,
    /// Calls whose outcome would change.
    pub changed: u64,
    /// Per tool (the server's names).
    pub tools: BTreeMap<String, ToolReport>,
}

impl ReplayReport {
    /// True when some call's outcome would change.
    pub fn changes_anything(&self) -> bool {
        self.changed > 0
    }
}

impl fmt::Display for ReplayReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "replayed {} calls of {} through {}:", self.calls, self.server, self.policy)?;
        for (tool, report) in &self.tools {
            if report.changes.is_empty() && report.deciders_not_judged == 0 && report.args_not_evaluated == 0 {
                writeln!(f, "  {tool}: {} calls, unchanged", report.calls)?;
            } else if report.changes.is_empty() {
                writeln!(f, "  {tool}: {} calls, none changed of those the replay could judge", report.calls)?;
            }
            for (change, c) in &report.changes {
                let from = match change {
                    Change::NowOverLimit => format!(", from record #{} on", c.first_record),
                    _ => format!(", first record #{}", c.first_record),
                };
                writeln!(f, "  {tool}: {} of {} calls {} ({}){from}", c.calls, report.calls, change.phrase(), c.why)?;
            }
        }
        for (tool, report) in &self.tools {
            if report.args_not_evaluated > 0 {
                writeln!(
                    f,
                    "  {tool}: /tools/{tool}/args not evaluated on {} calls: their arguments were not recorded \
                     (\"record_args\": true records them)",
                    report.args_not_evaluated
                )?;
            }
        }
        for (tool, report) in &self.tools {
            if report.deciders_not_judged > 0 {
                writeln!(
                    f,
                    "  {tool}: {} calls decided by approvers not named in the new rule cannot be judged: whether \
                     they are in {} is not recorded",
                    report.deciders_not_judged,
                    report.deciders_groups.join(" or ")
                )?;
            }
        }
        if self.not_judged > 0 {
            writeln!(
                f,
                "  ({} calls the bridge refused before any policy judged them were not replayed)",
                self.not_judged
            )?;
        }
        if self.changed == 0 {
            writeln!(f, "nothing would change.")
        } else {
            writeln!(f, "{} of {} calls would change.", self.changed, self.calls)
        }
    }
}

/// The bridge checks that come before any policy: a call they refused was
/// never judged by one.
const BEFORE_POLICY: [&str; 5] =
    ["bridge:unknown_tool", "bridge:allowlist", "bridge:budget", "bridge:arguments", "bridge:audit"];

/// A policy's outcome on one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Allowed,
    Approval,
    Denied,
    OverLimit,
    ArgsRefused,
}

/// Replay the `call` records among `records` (parsed JSON, in chain order)
/// of `server` (or of the only server with calls) through the policy file
/// at `policy_path`.
pub async fn replay(policy_path: &Path, records: &[Value], server: Option<&str>) -> Result<ReplayReport, ReplayError> {
    let mut calls: Vec<(u64, Call)> = Vec::new();
    let mut tools: HashMap<String, BTreeMap<String, ToolInfo>> = HashMap::new();
    for r in records {
        let seq = r["seq"].as_u64().unwrap_or(0);
        match r["kind"].as_str() {
            Some("call") => {
                let call: Call = serde_json::from_value(r.clone())
                    .map_err(|e| ReplayError::BadRecord { seq, reason: format!("not a call record: {e}") })?;
                calls.push((seq, call));
            }
            Some("tools") => {
                let server = r["server"].as_str().unwrap_or_default().to_string();
                let listed: Vec<ToolInfo> = serde_json::from_value(r["tools"].clone())
                    .map_err(|e| ReplayError::BadRecord { seq, reason: format!("not a tools record: {e}") })?;
                let known = tools.entry(server).or_default();
                for t in listed {
                    known.insert(t.name.clone(), t);
                }
            }
            _ => {}
        }
    }
    let mut servers: Vec<String> = calls.iter().filter_map(|(_, c)| c.server.clone()).collect();
    servers.sort_unstable();
    servers.dedup();
    let server = match server {
        Some(s) if servers.iter().any(|k| k == s) => s.to_string(),
        Some(s) => return Err(ReplayError::NoSuchServer { server: s.to_string(), known: servers.join(", ") }),
        None if servers.len() == 1 => servers[0].clone(),
        None if servers.is_empty() => {
            return Err(ReplayError::NoSuchServer { server: "(any)".into(), known: "none".into() });
        }
        None => return Err(ReplayError::WhichServer(servers.join(", "))),
    };
    // Calls of a name no server has were refused before any policy.
    let nameless = calls.iter().filter(|(_, c)| c.server.is_none()).count() as u64;
    calls.retain(|(_, c)| c.server.as_deref() == Some(server.as_str()));
    // The server's tools: as recorded, plus any name its calls used.
    let mut known = tools.remove(&server).unwrap_or_default();
    for (_, c) in calls.iter().filter(|(_, c)| c.method.is_none()) {
        known.entry(c.tool.clone()).or_insert_with(|| ToolInfo {
            name: c.tool.clone(),
            read_only: None,
            destructive: None,
            idempotent: None,
            open_world: None,
        });
    }
    let facts: Vec<ToolFacts> = known
        .values()
        .map(|t| ToolFacts {
            name: t.name.clone(),
            annotations: Annotations {
                read_only: t.read_only,
                destructive: t.destructive,
                idempotent: t.idempotent,
                open_world: t.open_world,
            },
            // A policy may name a tool as the code calls it with --config.
            aliases: vec![crate::naming::python_name(&format!("{server}__{}", t.name))],
        })
        .collect();
    let policy = Arc::new(Policy::load(policy_path, &facts)?);
    let limiter = RateLimiter::new(policy.clone(), SessionStore::in_memory());
    // In the order the calls were judged (records are written when a call
    // ends, so concurrent calls may be recorded out of that order).
    let mut ordered: Vec<(std::time::SystemTime, u64, Call)> = Vec::with_capacity(calls.len());
    for (seq, call) in calls {
        let at = parse_rfc3339(&call.decided).ok_or_else(|| ReplayError::BadRecord {
            seq,
            reason: format!("decided {:?} is not a time", call.decided),
        })?;
        ordered.push((at, seq, call));
    }
    ordered.sort_by_key(|a| (a.0, a.1));

    let mut report = ReplayReport {
        server: server.clone(),
        policy: policy.source().to_string(),
        not_judged: nameless,
        ..Default::default()
    };
    for (at, seq, call) in ordered {
        if call.policy.is_none() && call.rule.as_deref().is_some_and(|r| BEFORE_POLICY.contains(&r)) {
            report.not_judged += 1;
            continue;
        }
        // What the recording policy (or no policy: everything went on) decided.
        let old = call.policy.unwrap_or(Decision::Allowed);
        let key = match &call.method {
            // A question's record names only its method.
            Some(method) if *method == call.tool => method.clone(),
            Some(method) => format!("{method} {}", call.tool),
            None => call.tool.clone(),
        };
        let tool = report.tools.entry(key).or_default();
        tool.calls += 1;
        report.calls += 1;
        let verdict = policy.verdict(&call.tool);
        let (new, why) = if let Some(method) = &call.method {
            match admission(&policy, method, &call.tool) {
                Some(Admission::Deny { reason, rule }) => (Outcome::Denied, format!("{rule}: {reason}")),
                Some(Admission::Allow { rule }) => (Outcome::Allowed, rule.to_string()),
                None => (Outcome::Allowed, "no rule judges it".to_string()),
            }
        } else if let Verdict::Deny { reason, rule } = &verdict {
            (Outcome::Denied, format!("{rule}: {reason}"))
        } else {
            let args = if policy.has_args_rule(&call.tool) {
                match &call.args {
                    Some(values) => policy.check_args(&call.tool, values).err().map(|e| e.without_values()),
                    None => {
                        tool.args_not_evaluated += 1;
                        None
                    }
                }
            } else {
                None
            };
            if let Some(why) = args {
                (Outcome::ArgsRefused, format!("{}/args: {why}", RuleSource::Tool(call.tool.clone())))
            } else {
                match limiter.admit_as(&call.session, call.identity.as_deref(), &call.tool, at).await {
                    Err(refusal @ LimitRefusal::Exceeded { .. }) => (Outcome::OverLimit, limit_phrase(&refusal)),
                    Err(other) => (Outcome::OverLimit, other.to_string()),
                    Ok(()) if matches!(verdict, Verdict::Approve { .. }) => {
                        (Outcome::Approval, approval_rule(&verdict))
                    }
                    Ok(()) => (Outcome::Allowed, verdict.rule().to_string()),
                }
            }
        };
        let went_out = old.went_out();
        let decided_by_people = matches!(old, Decision::Approved | Decision::NotApproved);
        let team_change = match (new == Outcome::Approval && decided_by_people).then(|| team_change(&verdict, &call)) {
            Some(Judged::Changed(change)) => Some(change),
            Some(Judged::Unknown(groups)) => {
                tool.deciders_not_judged += 1;
                for group in groups {
                    if !tool.deciders_groups.contains(&group) {
                        tool.deciders_groups.push(group);
                    }
                }
                None
            }
            Some(Judged::Same) | None => None,
        };
        let change = team_change.or(match new {
            Outcome::Denied if went_out => Some(Change::NowDenied),
            Outcome::OverLimit if went_out => Some(Change::NowOverLimit),
            Outcome::ArgsRefused if went_out => Some(Change::NowRefusedByArgs),
            Outcome::Approval if old == Decision::Allowed => Some(Change::NowNeedsApproval),
            Outcome::Approval if !went_out && old != Decision::NotApproved => Some(Change::NowNeedsApproval),
            Outcome::Allowed if !went_out => Some(Change::NowAllowed),
            Outcome::Allowed if old == Decision::Approved => Some(Change::NoLongerNeedsApproval),
            _ => None,
        });
        if let Some(change) = change {
            report.changed += 1;
            let entry = tool.changes.entry(change).or_insert(Changed { calls: 0, first_record: seq, why });
            entry.calls += 1;
        }
    }
    Ok(report)
}

/// An approve verdict's rule, with its approvers when it names them.
fn approval_rule(verdict: &Verdict) -> String {
    match verdict {
        Verdict::Approve { rule, team: Some(team), .. } => {
            let approvers = team.approvers.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
            format!("{rule} (approvers: {approvers})")
        }
        other => other.rule().to_string(),
    }
}

/// Whether the people who decided a recorded call could decide it now.
#[derive(Debug, PartialEq, Eq)]
enum Judged {
    /// No: this changes.
    Changed(Change),
    /// Yes, as far as the records say.
    Same,
    /// Cannot tell: the decider is not named, and the rule names these
    /// groups, whose members the records do not hold.
    Unknown(Vec<String>),
}

/// How a recorded call decided by people would be decided under an approve
/// verdict: by other people, or by the same, or (a decider only a group
/// could admit) the records cannot tell.
fn team_change(verdict: &Verdict, call: &Call) -> Judged {
    let Verdict::Approve { team, .. } = verdict else { return Judged::Same };
    let by = call.approval.as_ref().and_then(|a| a.by.as_deref()).filter(|by| *by != "client");
    match (team, by) {
        (Some(team), None) if !team.ask_client => Judged::Changed(Change::NowDecidedByApprovers),
        (Some(team), Some(name)) => {
            let named = team.approvers.iter().any(|a| matches!(a, Approver::Identity(n) if n == name));
            let groups: Vec<String> =
                team.approvers.iter().filter(|a| matches!(a, Approver::Group(_))).map(ToString::to_string).collect();
            let own = !team.self_approve && call.identity.as_deref() == Some(name);
            match (own, named, groups.is_empty()) {
                (true, _, _) | (false, false, true) => Judged::Changed(Change::DeciderNoLongerApprover),
                (false, false, false) => Judged::Unknown(groups),
                (false, true, _) => Judged::Same,
            }
        }
        (None, Some(_)) => Judged::Changed(Change::NowAskedOfTheClient),
        _ => Judged::Same,
    }
}

/// What `policy` says of a recorded request other than a tool call
/// (`None`: no rule judges it, as a list from the catalog).
fn admission(policy: &Policy, method: &str, target: &str) -> Option<Admission> {
    match method {
        "resources/read" | "resources/subscribe" | "resources/unsubscribe" => Some(policy.resource(target)),
        "prompts/get" => Some(policy.prompt(target)),
        // A completion names the prompt, or the template's URI, it completes.
        "completion/complete" if target.contains("://") => Some(policy.resource(target)),
        "completion/complete" => Some(policy.prompt(target)),
        "sampling/createMessage" => Some(policy.ask(Ask::Sampling)),
        "elicitation/create" => Some(policy.ask(Ask::Elicitation)),
        "roots/list" => Some(policy.ask(Ask::Roots)),
        _ => None,
    }
}

/// A limit refusal without its "try again in" (which depends on the call).
fn limit_phrase(refusal: &LimitRefusal) -> String {
    match refusal {
        LimitRefusal::Exceeded { counter, max, window, .. } => {
            format!("rate limit {counter}: at most {max} calls per {window}")
        }
        other => other.to_string(),
    }
}
