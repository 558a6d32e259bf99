//! `code-mode policy check`: what a policy says of each tool, before it is
//! put in front of anyone.
//!
//! [`check`] starts the wrapped servers exactly as the bridge does (it *is* a
//! [`Bridge`] start, so an unparsable policy, an unknown key, a bad window or
//! a rule naming a tool the server lacks fails with the same
//! [`BridgeError`], naming the file, the JSON path and the reason), reads
//! each server's tool list and its policy's verdict for every listed tool,
//! then closes the servers. The [`PolicyReport`] prints one line per tool:
//!
//! ```text
//! add: limited [2 per minute, counter add_rate] — /tools/add
//! echo: deny — /default: the policy denies every tool it does not name (default deny)
//! sleep: needs approval — /categories/destructive
//! refund: needs approval by alice, group:security (or the client) — /tools/refund
//! count: allow — /tools/count (not offered: not on the allowlist)
//! ```
//!
//! that is `<tool>: <verdict> — <rule>`, where the verdict is `allow`,
//! `deny`, `needs approval` (by the session's client), `needs approval by`
//! the rule's approvers (who decide in the web console; then whether the
//! client may answer too and whether approvers may decide their own calls)
//! or `limited` with the limits as the stubs show them, the rule is the JSON path of the rule that decides
//! ([`crate::policy::RuleSource`]) followed, for a deny, by its reason, and a
//! tool the bridge would not offer says why in parentheses. A server without
//! a policy shows `allow — no policy`. With several servers (or `--config`)
//! each line starts with the server's name: `math add: ...`. Tools are in
//! the order their server lists them, servers in configuration order.

use std::fmt::{self, Write as _};

use code_mode_core::state::SessionStore;
use tokio_util::sync::CancellationToken;

use crate::policy::{Limit, Team, Verdict};
use crate::{Bridge, BridgeConfig, BridgeError, PolicyOptions, WrappedServer};

/// What the policies say of every tool the servers list.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyReport {
    /// Each server, in configuration order.
    pub servers: Vec<ServerReport>,
    /// Lines start with the server's name (several servers, or `--config`).
    pub named: bool,
}

/// One server's tools and their verdicts.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerReport {
    /// The server's name.
    pub server: String,
    /// Where its policy came from (file, or inline origin); `None`: no policy.
    pub policy: Option<String>,
    /// Every tool the server lists, in its order.
    pub tools: Vec<ToolReport>,
}

/// One tool's verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolReport {
    /// The tool's name as the server lists it (and as the policy names it).
    pub tool: String,
    /// The policy's verdict; `None` when the server has no policy.
    pub verdict: Option<Verdict>,
    /// Why the bridge does not offer the tool (allowlist, unusable schema,
    /// ...); `None` when it does.
    pub not_offered: Option<String>,
}

/// Start `servers` as the bridge would (names prefixed when `prefixed` or
/// when there are several), read every policy against the listed tools,
/// report each tool's verdict and close the servers again. `cancel` stops
/// the servers early; it is cancelled on return.
pub async fn check(
    servers: Vec<WrappedServer>,
    prefixed: bool,
    cancel: CancellationToken,
) -> Result<PolicyReport, BridgeError> {
    let config = BridgeConfig {
        servers,
        prefixed,
        limits: Default::default(),
        catalog: Default::default(),
        state: SessionStore::in_memory(),
        policy_options: PolicyOptions::default(),
    };
    let named = config.prefixed_names();
    let (bridge, closer) = Bridge::start(config, cancel.clone()).await?;
    let report = PolicyReport::of(&bridge, named);
    drop(bridge);
    cancel.cancel();
    closer.closed().await;
    Ok(report)
}

impl PolicyReport {
    /// The verdicts of a started bridge's policies for every tool its
    /// servers list now.
    fn of(bridge: &Bridge, named: bool) -> PolicyReport {
        let current = bridge.current();
        let servers = current
            .servers
            .iter()
            .zip(current.wrapped.iter())
            .enumerate()
            .filter_map(|(index, (handle, wrapped))| wrapped.as_ref().map(|w| (index, (handle, w))))
            .map(|(index, (handle, wrapped))| {
                let applied = current.policies.get(index).and_then(Option::as_ref);
                let tools = handle
                    .tools()
                    .iter()
                    .map(|t| {
                        let tool = t.name.to_string();
                        let verdict = applied.map(|a| a.policy.verdict(&tool));
                        let offered = current.catalog.tools().iter().any(|c| c.server == index && c.mcp_name == tool);
                        let not_offered = if offered {
                            None
                        } else {
                            why_not_offered(&current.catalog, wrapped, &tool, verdict.as_ref())
                        };
                        ToolReport { tool, verdict, not_offered }
                    })
                    .collect();
                ServerReport {
                    server: wrapped.spec.name.clone(),
                    policy: applied.map(|a| a.policy.source().to_string()),
                    tools,
                }
            })
            .collect();
        PolicyReport { servers, named }
    }
}

/// Why the catalog leaves out `tool` of `wrapped`; `None` for a tool the
/// policy denies (left out for that, unless denied tools are offered: the
/// verdict already says so).
fn why_not_offered(
    catalog: &crate::catalog::Catalog,
    wrapped: &WrappedServer,
    tool: &str,
    verdict: Option<&Verdict>,
) -> Option<String> {
    let python = crate::naming::python_name(tool);
    let served = crate::naming::python_name(&format!("{}__{tool}", wrapped.spec.name));
    if let Some(allow) = &wrapped.allow
        && !allow.iter().any(|a| a == tool || *a == python || *a == served)
    {
        return Some("not on the allowlist".to_string());
    }
    if let Some(left) = catalog.left_out().iter().find(|l| l.server == wrapped.spec.name && l.tool == tool) {
        return Some(left.reason.clone());
    }
    match verdict {
        Some(Verdict::Deny { .. }) => None,
        _ => Some("left out of the catalog".to_string()),
    }
}

impl ToolReport {
    /// The verdict as a word or two: `allow`, `deny`, `needs approval`,
    /// `limited [2 per minute, counter add_rate]`.
    pub fn verdict_text(&self) -> String {
        match &self.verdict {
            None | Some(Verdict::Allow { .. }) => "allow".to_string(),
            Some(Verdict::Deny { .. }) => "deny".to_string(),
            Some(Verdict::Approve { limits, team, .. }) => {
                let mut text = match team {
                    Some(team) => format!("needs approval by {}", approvers(team)),
                    None => "needs approval".to_string(),
                };
                if !limits.is_empty() {
                    let _ = write!(text, " [{}]", with_counters(limits));
                }
                text
            }
            Some(Verdict::Limited { limits, .. }) => format!("limited [{}]", with_counters(limits)),
        }
    }

    /// Why: the deciding rule's JSON path, and a deny's reason.
    pub fn why(&self) -> String {
        match &self.verdict {
            None => "no policy".to_string(),
            Some(Verdict::Deny { reason, rule }) => format!("{rule}: {reason}"),
            Some(v) => v.rule().to_string(),
        }
    }
}

/// Who decides a team's question: the rule's approvers as written, then
/// whether the session's own client may answer too and whether approvers
/// may decide their own calls (`alice, group:security (or the client;
/// their own calls too)`).
fn approvers(team: &Team) -> String {
    let names = team.approvers.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
    let mut also = Vec::new();
    if team.ask_client {
        also.push("or the client");
    }
    if team.self_approve {
        also.push("their own calls too");
    }
    if also.is_empty() { names } else { format!("{names} ({})", also.join("; ")) }
}

/// Limits with the counter each one counts in (tools naming one counter
/// share it): `2 per minute, counter add_rate`.
fn with_counters(limits: &[Limit]) -> String {
    limits.iter().map(|l| format!("{l}, counter {}", l.counter)).collect::<Vec<_>>().join("; ")
}

impl fmt::Display for PolicyReport {
    /// One line per tool (see the module doc).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for server in &self.servers {
            for tool in &server.tools {
                if self.named {
                    write!(f, "{} ", server.server)?;
                }
                write!(f, "{}: {} — {}", tool.tool, tool.verdict_text(), tool.why())?;
                if let Some(why) = &tool.not_offered {
                    write!(f, " (not offered: {why})")?;
                }
                writeln!(f)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Approver, RuleSource, Scope, Window};

    fn line(tool: &str, verdict: Option<Verdict>, not_offered: Option<&str>) -> ToolReport {
        ToolReport { tool: tool.to_string(), verdict, not_offered: not_offered.map(str::to_string) }
    }

    #[test]
    fn each_verdict_prints_as_one_line_with_its_rule_and_a_deny_its_reason() {
        let limit = Limit {
            counter: "add_rate".into(),
            window: Window::from_secs(60).expect("a window"),
            max: 2,
            scope: Scope::Grant,
        };
        let report = PolicyReport {
            servers: vec![ServerReport {
                server: "math".into(),
                policy: Some("p.json".into()),
                tools: vec![
                    line(
                        "add",
                        Some(Verdict::Limited { limits: vec![limit], rule: RuleSource::Tool("add".into()) }),
                        None,
                    ),
                    line("echo", Some(Verdict::Deny { reason: "no".into(), rule: RuleSource::Default }), None),
                    line(
                        "sleep",
                        Some(Verdict::Approve { rule: RuleSource::Tool("sleep".into()), limits: vec![], team: None }),
                        None,
                    ),
                    line("count", Some(Verdict::Allow { rule: RuleSource::Default }), Some("not on the allowlist")),
                    line(
                        "refund",
                        Some(Verdict::Approve {
                            rule: RuleSource::Tool("refund".into()),
                            limits: vec![],
                            team: Some(Team {
                                approvers: vec![Approver::Identity("alice".into()), Approver::Group("security".into())],
                                self_approve: false,
                                ask_client: true,
                                reason: None,
                            }),
                        }),
                        None,
                    ),
                ],
            }],
            named: false,
        };
        assert_eq!(
            report.to_string(),
            "add: limited [2 per minute, counter add_rate] — /tools/add\n\
             echo: deny — /default: no\n\
             sleep: needs approval — /tools/sleep\n\
             count: allow — /default (not offered: not on the allowlist)\n\
             refund: needs approval by alice, group:security (or the client) — /tools/refund\n"
        );
        let named = PolicyReport { named: true, ..report };
        assert!(named.to_string().starts_with("math add: limited"), "{named}");
    }

    #[test]
    fn a_server_without_a_policy_allows_every_tool() {
        let report = PolicyReport {
            servers: vec![ServerReport { server: "s".into(), policy: None, tools: vec![line("add", None, None)] }],
            named: false,
        };
        assert_eq!(report.to_string(), "add: allow — no policy\n");
    }
}
