//! The audit record of one call, filled in as its checks run
//! ([`crate::check`]) and written when it ends.

use std::time::SystemTime;

use code_mode_audit::record::{self as audit_record, CallResult};
use code_mode_proto::ToolCall;

use crate::policy::AuditDecision;

/// What becomes the audit record of one call, filled in as its checks run.
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
}

impl Trail {
    pub(crate) fn new(call: &ToolCall) -> Self {
        Self {
            server: None,
            tool: call.tool.clone(),
            decision: AuditDecision::Refused,
            rule: None,
            policy: None,
            reason: None,
            decided: SystemTime::now(),
            tainted: None,
            result: None,
            record_args: false,
            method: (!call.op.is_tool()).then(|| call.op.method().to_string()),
            approval: None,
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

    pub(crate) fn record(&self, call: &ToolCall) -> audit_record::Body {
        let args = serde_json::to_vec(&call.arguments).unwrap_or_default();
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
            session: call.session.clone(),
            identity: call.identity.clone(),
            cell: call.cell_id.clone(),
            call: call.call_index,
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
            args: self.record_args.then(|| call.arguments.clone()),
            result,
            result_bytes,
            result_sha256,
            tainted: self.tainted,
            approval: self.approval.clone().map(Box::new),
        })
    }
}
