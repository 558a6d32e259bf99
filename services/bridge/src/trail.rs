//! The audit record of one judged request, filled in as its checks run
//! ([`crate::check`]) and written when it ends: a call (from code or a
//! client) or a wrapped server's question to a client
//! ([`crate::questions`]), each named by who made it ([`Judged`]).

use std::time::SystemTime;

use code_mode_audit::record::{self as audit_record, CallResult};
use code_mode_proto::{AskKind, ToolCall};
use serde_json::Value;

use crate::policy::AuditDecision;

/// Who made a judged request and what it carries, as its checks and its
/// audit record name them: a call's session, identity, run and arguments,
/// or those of the client a server's question is for and the question's
/// parameters.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Judged<'a> {
    /// Where it counts: the client session, or a stateless scope.
    pub(crate) session: &'a str,
    /// Who the client is.
    pub(crate) identity: Option<&'a str>,
    /// The run or direct call it belongs to (empty: none).
    pub(crate) cell: &'a str,
    /// Which call of the run (0: not a call of code).
    pub(crate) index: u32,
    /// What it names before its target is known: a tool's Python name,
    /// another request's target, a question's method.
    pub(crate) names: &'a str,
    /// The MCP method when it is not a tool call.
    pub(crate) method: Option<&'a str>,
    /// The arguments or parameters, as they came.
    pub(crate) arguments: &'a Value,
}

impl<'a> From<&'a ToolCall> for Judged<'a> {
    fn from(call: &'a ToolCall) -> Self {
        Self {
            session: &call.session,
            identity: call.identity.as_deref(),
            cell: &call.cell_id,
            index: call.call_index,
            names: call.target.name(),
            method: (!call.target.op().is_tool()).then(|| call.target.method()),
            arguments: &call.arguments,
        }
    }
}

impl<'a> Judged<'a> {
    /// A server's question `kind` with its `params`, for the client of
    /// `session` during the call `cell` (or none).
    pub(crate) fn question(
        session: &'a str,
        identity: Option<&'a str>,
        cell: &'a str,
        index: u32,
        kind: AskKind,
        params: &'a Value,
    ) -> Self {
        Self { session, identity, cell, index, names: kind.method(), method: Some(kind.method()), arguments: params }
    }
}

/// What becomes the audit record of one judged request, filled in as its
/// checks run.
#[derive(Debug)]
pub(crate) struct Trail {
    pub(crate) server: Option<String>,
    pub(crate) tool: String,
    pub(crate) decision: AuditDecision,
    pub(crate) rule: Option<String>,
    pub(crate) policy: Option<AuditDecision>,
    pub(crate) reason: Option<String>,
    /// When the call was judged: what the rate limits count by.
    pub(crate) decided: SystemTime,
    pub(crate) tainted: Option<bool>,
    /// How it came back and the text returned, for a call that went out.
    pub(crate) result: Option<(CallResult, Option<String>)>,
    pub(crate) record_args: bool,
    /// The MCP request when it is not a tool call.
    pub(crate) method: Option<String>,
    /// How a team decided the call, when a rule with approvers asked.
    pub(crate) approval: Option<audit_record::Approval>,
    /// The upstream account the call acts as, at a per-identity server.
    pub(crate) upstream_subject: Option<String>,
}

impl Trail {
    pub(crate) fn new<'a>(judged: impl Into<Judged<'a>>) -> Self {
        let judged = judged.into();
        Self {
            server: None,
            tool: judged.names.to_string(),
            decision: AuditDecision::Refused,
            rule: None,
            policy: None,
            reason: None,
            decided: SystemTime::now(),
            tainted: None,
            result: None,
            record_args: false,
            method: judged.method.map(str::to_string),
            approval: None,
            upstream_subject: None,
        }
    }

    /// The call names this server's tool.
    pub(crate) fn at(&mut self, server: &str, tool: &str) {
        self.server = Some(server.to_string());
        self.tool = tool.to_string();
    }

    /// One of the bridge's own checks (or a later one) refused it.
    pub(crate) fn refused(&mut self, check: &str, why: &str) {
        self.decision = AuditDecision::Refused;
        self.rule = Some(check.to_string());
        self.reason = Some(why.to_string());
    }

    /// It passed every check and goes out: allowed, or as the policy said.
    pub(crate) fn went_out(&mut self) {
        self.decision = self.policy.unwrap_or(AuditDecision::Allowed);
        self.reason = None;
    }

    pub(crate) fn record<'a>(&self, judged: impl Into<Judged<'a>>) -> audit_record::Body {
        let judged = judged.into();
        let args = serde_json::to_vec(judged.arguments).unwrap_or_default();
        let (args_bytes, args_sha256) = audit_record::size_and_hash(&args);
        let (result, result_bytes, result_sha256) = match &self.result {
            None => (None, None, None),
            Some((kind, None)) => (Some(*kind), None, None),
            Some((kind, Some(text))) => {
                let (n, sha) = audit_record::size_and_hash(text.as_bytes());
                (Some(*kind), Some(n), Some(sha))
            }
        };
        audit_record::Body::Call(audit_record::Call {
            session: judged.session.to_string(),
            identity: judged.identity.map(str::to_string),
            cell: judged.cell.to_string(),
            call: judged.index,
            server: self.server.clone(),
            tool: self.tool.clone(),
            method: self.method.clone(),
            decision: self.decision,
            rule: self.rule.clone(),
            policy: self.policy,
            reason: self.reason.clone(),
            decided: audit_record::rfc3339(self.decided),
            args_bytes,
            args_sha256,
            args: self.record_args.then(|| judged.arguments.clone()),
            result,
            result_bytes,
            result_sha256,
            tainted: self.tainted,
            approval: self.approval.clone().map(Box::new),
            upstream_subject: self.upstream_subject.clone(),
        })
    }
}
