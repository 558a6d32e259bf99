//! One tool call, from code or a client's direct call, as one pipeline:
//! the allowlist, the budget, the arguments (size and schema), the audit
//! sink's readiness, the policy (verdict, argument rule, rate limits, a
//! person's approval), the private-data rule, the call itself, its result,
//! and the audit record of what was decided.
//!
//! Everything else that carries data to a server takes the same pipeline,
//! in the same order, by the same code ([`Target`]): reading a resource or
//! subscribing to it (the server must offer it; its URI within the
//! argument size; the server's `resources` rules), getting a prompt with
//! its arguments (`prompts` rules), a completion (judged as the prompt or
//! template it completes). Each counts in the budget, is audited, and under
//! the private-data rule reading a private server's resource or prompt
//! taints as a private tool does, and after taint only private servers are
//! sent anything.

use std::time::Duration;

use code_mode_audit::Durability;
use code_mode_core::bus::BusError;
use code_mode_core::defaults;
use code_mode_proto::{self as proto, ApprovalReply, DirectCall, DirectReply, Op, ToolCall, ToolReply, subjects};
use code_mode_telemetry::{ApprovalAnswer, Decision};
use proto::Target as Asked;
use serde_json::Value;

use crate::answer::{Answer, Caller, result_text};
use crate::current::{Applied, Current};
use crate::policy::{Admission, AuditDecision, CallSite, RuleSource, Verdict};
pub(crate) use crate::state_key::StateKey;
use crate::target::{Named, Target, completion_target};
use crate::trail::{Judged, Trail};
use crate::{Bridge, CallLimits, approval, catalog, policy, private};

impl Bridge {
    /// Check one call and, if it passes, make it. The decision counts in
    /// `codemode_tool_calls_total` and its time in
    /// `codemode_tool_call_duration_seconds`, labelled by the catalog's
    /// server and tool names (`<none>` / `<unknown>` for a name it lacks, so
    /// the code cannot mint series). With an audit sink, every call is one
    /// `call` record, written before the reply goes back; a record that
    /// cannot be written turns the reply into a refusal (fail closed), and
    /// no call goes out while the sink is failing.
    pub async fn call(&self, call: &ToolCall) -> ToolReply {
        // The cell's request may be cancelled while the call runs (any
        // bridge replica hears the cancel, which names the cell).
        let flight = self.inner.in_flight.enter(&call.cell_id);
        self.checked_with(call, Caller::Code, flight.token(), None).await.for_code()
    }

    /// Check one call a client made directly (`--expose-tools`) and, if it
    /// passes, make it: the same checks as [`Bridge::call`], by the same
    /// code and in the same order (the budget counted is the session's
    /// direct calls, not a run's), the same audit record and metrics, the
    /// same refusal messages. A result that passes comes back whole, in its
    /// MCP shape (content blocks, structured content); its size is measured
    /// as that JSON.
    pub async fn call_direct(&self, direct: &DirectCall) -> DirectReply {
        let call = ToolCall {
            session: direct.session.clone(),
            asker: direct.asker.clone(),
            identity: direct.identity.clone(),
            cell_id: direct.call_id.clone(),
            call_index: direct.call_index,
            target: direct.target.clone(),
            arguments: direct.arguments.clone(),
            link: direct.link.clone(),
            file_in: false,
        };
        // The client may cancel it while it runs (any bridge replica hears
        // the cancel; this one holds the call).
        let flight = self.inner.in_flight.enter(&direct.call_id);
        let caller = Caller::Direct { max_calls: direct.max_calls };
        let answer = self.checked_with(&call, caller, flight.token(), direct.retry.as_ref()).await;
        drop(flight);
        answer.for_direct()
    }

    /// The one path every call takes, from code or direct: the checks, the
    /// call, the audit record (a record that cannot be written withholds
    /// the result), the metrics; its client may cancel it through
    /// `cancel` (a call of a cancelled request never goes out), and a
    /// server's input-required result may be retried.
    async fn checked_with(
        &self,
        call: &ToolCall,
        caller: Caller,
        cancel: tokio_util::sync::CancellationToken,
        retry: Option<&proto::Retry>,
    ) -> Answer {
        let started = std::time::Instant::now();
        // The call's trace span, under the runner's `cell.run` (the bus runs
        // this under the sender's context; docs/tracing.md).
        let span =
            code_mode_telemetry::trace::tool_call_span(&call.cell_id, u64::from(call.call_index), call.target.method());
        let current = self.current();
        let mut trail = Trail::new(call);
        let mut answer = tracing::Instrument::instrument(
            self.check_and_call(&current, call, caller, &mut trail, cancel, retry),
            span.clone(),
        )
        .await;
        // A stateless request's own sessions go with its last call.
        if let Some(link) = &call.link
            && link.stateless
            && let Some(asker) = &call.asker
        {
            self.inner.upstreams.close_idle_of(asker);
        }
        if let Some(audit) = &self.inner.audit
            && let Err(e) = audit.append(trail.record(call), Durability::Written).await
        {
            tracing::error!(tool = %call.target.name(), cell = %call.cell_id, error = %e, "the call's audit record was not written: its result is withheld");
            answer = self.refuse(format!("{}: {e}", call.target.name()));
        }
        let (server, tool) = match (call.target.op(), current.catalog.get(call.target.name())) {
            (Op::Tool, Some(tool)) => (current.servers[tool.server].name(), tool.mcp_name.as_str()),
            (Op::Tool, None) => ("<none>", "<unknown>"),
            // Other requests are counted by their method, never by a URI or
            // name the client chose (no series can be minted).
            (op, _) => match trail.server.as_deref() {
                Some(server) => (server, op.method()),
                None => ("<none>", op.method()),
            },
        };
        let decision = match &answer {
            Answer::Text(_)
            | Answer::Content { .. }
            | Answer::Result(_)
            | Answer::Value(_)
            | Answer::Failed(ToolReply::Ok { .. } | ToolReply::Content { .. }) => Decision::Ok,
            Answer::Failed(ToolReply::Refused { .. }) | Answer::ServerRefused { .. } => Decision::Refused,
            Answer::Failed(ToolReply::Fault { .. }) => Decision::Fault,
        };
        code_mode_telemetry::tool_call(server, tool, decision, started.elapsed());
        code_mode_telemetry::trace::tool_named(&span, server, tool);
        let fault = match &answer {
            Answer::Failed(ToolReply::Fault { kind }) => Some(kind.as_str()),
            _ => None,
        };
        code_mode_telemetry::trace::ended(&span, decision.as_str(), fault);
        answer
    }

    /// The pipeline of one call, each step refusing with its own message
    /// (and noting in the trail why) or handing on: the allowlist, the
    /// budget, the arguments, the audit sink, the policy (with a person's
    /// approval), the private-data rule, then the call and its result. A
    /// call refused by any step never reaches the server, and, as the
    /// private rule comes last, never taints.
    async fn check_and_call(
        &self,
        current: &Current,
        call: &ToolCall,
        caller: Caller,
        trail: &mut Trail,
        cancel: tokio_util::sync::CancellationToken,
        retry: Option<&proto::Retry>,
    ) -> Answer {
        let pipeline = async {
            let target = self.allowlisted(current, call, trail).await?;
            self.not_cancelled(&cancel, &target, call)?;
            // Where the session's state lives (a stateless scope's current
            // generation), found when a step first needs it.
            let mut state = StateKey::new(self, &call.session);
            self.within_budget(&target, call, caller, &mut state, trail).await?;
            let arguments = self.arguments_fit(&target, call, trail)?;
            self.recordable(&target, call, trail).await?;
            if let Some(server) = target.server()
                && let Some(applied) = &current.policies[server]
            {
                self.apply_policy(applied, call, caller, &target, &mut state, trail).await?;
            }
            self.private_rule(current, &target, &mut state, trail).await?;
            // A per-identity server's call needs its caller's own account.
            self.account_ready(current, &target, call, caller, trail).await?;
            // A request cancelled while its call waited for a person: the
            // call does not go out, whatever the answer.
            self.not_cancelled(&cancel, &target, call)?;
            Ok(self.go_out(current, &target, call, arguments, caller, trail, cancel, retry).await)
        };
        pipeline.await.unwrap_or_else(|refused| refused)
    }

    /// Step 1, the allowlist: the tool is in the catalog (a tool the policy
    /// withholds is refused with its rule and reason, one the allowlist
    /// dropped as such, any other name as unknown); for another request,
    /// a server offers its target.
    async fn allowlisted<'c>(
        &self,
        current: &'c Current,
        call: &ToolCall,
        trail: &mut Trail,
    ) -> Result<Target<'c>, Answer> {
        let Asked::Tool(asked) = &call.target else {
            return self.offered(current, call, trail).await;
        };
        let catalog = &*current.catalog;
        // A gateway client may name a withheld tool as its server does.
        let server_name = |i: usize| current.servers[i].name().to_string();
        let several = current.wrapped.iter().filter(|w| w.is_some()).count() > 1;
        let several: Option<&dyn Fn(usize) -> String> = several.then_some(&server_name);
        let withheld = catalog.withheld(asked).or_else(|| catalog.withheld_as_offered(asked, several));
        if let Some(withheld) = withheld {
            let catalog::Denial { rule, reason } = &withheld.denial;
            let site = CallSite {
                session: &call.session,
                server: current.servers[withheld.server].name(),
                tool: &withheld.mcp_name,
            };
            tracing::info!(tool = %asked, cell = %call.cell_id, %rule, "refused: denied by policy (not offered)");
            trail.at(site.server, site.tool);
            self.decided(trail, site, AuditDecision::Denied, rule, Some(reason.clone()));
            return Err(self.refuse(format!("{}: denied by policy ({rule}): {reason}", asked)));
        }
        let Some(tool) = catalog.get(asked) else {
            let (why, check) = if let Some(login) = self.awaiting_login(current, asked) {
                (format!("{}: {login}", asked), "bridge:login_needed")
            } else if catalog.is_not_kept(asked) {
                (format!("{}: this tool is not on the allowlist", asked), "bridge:allowlist")
            } else {
                (format!("there is no tool named {:?}; TOOLS lists the tools", asked), "bridge:unknown_tool")
            };
            tracing::info!(tool = %asked, cell = %call.cell_id, "refused: unknown or not allowed");
            trail.refused(check, &why);
            return Err(self.refuse(why));
        };
        trail.at(current.servers[tool.server].name(), &tool.mcp_name);
        Ok(Target::Tool(tool))
    }

    /// Why a tool the catalog lacks cannot be called yet when its server
    /// waits for a login: with one server, any name; with several, a name
    /// with that server's prefix.
    fn awaiting_login(&self, current: &Current, tool: &str) -> Option<String> {
        let prefixed = self.inner.rebuild.prefixed || current.servers.len() > 1;
        current.servers.iter().find_map(|server| {
            let why = server.login_needed()?;
            let prefix = crate::naming::python_name(&format!("{}__", server.name()));
            (!prefixed || tool.starts_with(&prefix)).then_some(why)
        })
    }

    /// Step 1 for a request other than a tool call: the server that offers
    /// its target (a resource by its URI, a prompt by its offered name, a
    /// completion by what it completes).
    async fn offered<'c>(
        &self,
        current: &'c Current,
        call: &ToolCall,
        trail: &mut Trail,
    ) -> Result<Target<'c>, Answer> {
        let offers = &current.offers;
        let unknown = |trail: &mut Trail, why: String| {
            tracing::info!(op = call.target.method(), cell = %call.cell_id, "refused: {why}");
            trail.refused("bridge:unknown_target", &why);
            Err(self.refuse(why))
        };
        let target = match &call.target {
            Asked::Tool(_) => unreachable!("tool calls are looked up in the catalog"),
            Asked::ListResources | Asked::ListTemplates => return Ok(Target::Lists),
            Asked::ReadResource(uri) | Asked::Subscribe(uri) | Asked::Unsubscribe(uri) => {
                match offers.resource_server(uri) {
                    Ok(server) => {
                        let subscribes = offers.offering(server).is_some_and(|o| o.subscribe);
                        if !matches!(call.target, Asked::ReadResource(_)) && !subscribes {
                            let why = format!(
                                "{}: the server {} takes no subscriptions",
                                call.target.method(),
                                current.servers[server].name()
                            );
                            return unknown(trail, why);
                        }
                        Target::Resource { server, uri: uri.clone() }
                    }
                    Err(why) => return unknown(trail, format!("{}: {why}", call.target.method())),
                }
            }
            Asked::GetPrompt(asked) => match offers.prompt(asked) {
                Some((server, mcp_name)) => {
                    Target::Prompt { server, mcp_name: mcp_name.to_string(), offered: asked.clone() }
                }
                None => match offers.withheld_prompt(asked) {
                    // Denied by its server's policy: judged there, so the
                    // refusal names the rule.
                    Some((server, mcp_name)) => Target::Prompt { server, mcp_name, offered: asked.clone() },
                    None => {
                        let known = offers.prompt_names();
                        let why = if known.is_empty() {
                            format!("prompts/get: there is no prompt named {asked:?} (no server offers prompts)")
                        } else {
                            format!(
                                "prompts/get: there is no prompt named {:?} (there are: {})",
                                asked,
                                crate::stubs::cut_chars(&known.join(", "), 200)
                            )
                        };
                        return unknown(trail, why);
                    }
                },
            },
            Asked::Complete => match completion_target(offers, &call.arguments) {
                Ok(target) => target,
                Err(why) => return unknown(trail, format!("completion/complete: {why}")),
            },
            Asked::GetTask(id) | Asked::UpdateTask(id) | Asked::CancelTask(id) => {
                match self.task_server(current, call.target.method(), id, call.identity.as_deref()).await {
                    Ok(server) => Target::Task { server, id: id.clone() },
                    Err(why) => return unknown(trail, why),
                }
            }
        };
        if let Some(server) = target.server() {
            trail.at(current.servers[server].name(), &target.audit_name());
        }
        Ok(target)
    }

    /// Step 2, the budget: a run's `call_index` within `--max-calls`; a
    /// direct call within the session's `--max-direct-calls` (its
    /// frontend's count or the store's, whichever is higher: a stateless
    /// client's calls reach new session objects, possibly on other
    /// frontends, so only the store counts all of them).
    async fn within_budget(
        &self,
        target: &Target<'_>,
        call: &ToolCall,
        caller: Caller,
        state: &mut StateKey<'_>,
        trail: &mut Trail,
    ) -> Result<(), Answer> {
        let limits = &self.inner.limits;
        let tool = Named { name: target.name(call) };
        if call.call_index == 0 {
            tracing::warn!(tool = %tool.name, cell = %call.cell_id, "refused: call_index 0 (calls count from 1)");
            let why = format!("{}: call_index 0 is not a call of this run (calls count from 1)", tool.name);
            trail.refused("bridge:budget", &why);
            return Err(self.refuse(why));
        }
        let spent = match caller {
            Caller::Code => (call.call_index > limits.max_calls)
                .then(|| format!("{}: this run has used all of its {} tool calls", tool.name, limits.max_calls)),
            // A task's polls and answers: its creating call was counted.
            Caller::Direct { .. } if call.target.task().is_some() => None,
            Caller::Direct { max_calls: None } => None,
            Caller::Direct { max_calls: Some(max) } => match self.count_direct(state).await {
                Ok(made) => (made.max(u64::from(call.call_index)) > u64::from(max)).then(|| {
                    format!(
                        "{}: this session has used all of its {max} direct tool calls (--max-direct-calls)",
                        tool.name
                    )
                }),
                Err(e) => Some(state_refusal(&tool.name, "direct-call budget", &e)),
            },
        };
        match spent {
            Some(why) => {
                trail.refused("bridge:budget", &why);
                Err(self.refuse(why))
            }
            None => Ok(()),
        }
    }

    /// Step 3, the arguments: a JSON object within the size limit that the
    /// tool's schema accepts (the record says which check, never what the
    /// checker quoted of the arguments). Another request's parameters are
    /// held to the same size: a URI, a prompt's arguments (strings, as MCP
    /// defines them), a completion's parameters.
    fn arguments_fit(
        &self,
        target: &Target<'_>,
        call: &ToolCall,
        trail: &mut Trail,
    ) -> Result<serde_json::Map<String, Value>, Answer> {
        let max = self.inner.limits.max_arguments;
        let name = target.name(call);
        // A `null` for an optional property whose schema refuses it means
        // "not given": left out before the check and the call.
        let cleaned = match target {
            Target::Tool(tool) => tool.checker.without_refused_nulls(&call.arguments),
            _ => None,
        };
        let given = cleaned.as_ref().unwrap_or(&call.arguments);
        if let Target::Tool(tool) = target
            && let Err(problem) = tool.checker.check(given, max)
        {
            tracing::info!(tool = %tool.name, cell = %call.cell_id, "refused: {problem}");
            trail.refused("bridge:arguments", "the arguments do not fit the tool's schema or size limit");
            return Err(self.refuse(format!("{}: {problem}", tool.name)));
        }
        let size = serde_json::to_vec(given).map(|v| v.len()).unwrap_or(usize::MAX) + call.target.name().len();
        if !matches!(target, Target::Tool(_)) && size > max {
            trail.refused("bridge:arguments", "the request is over the size limit");
            return Err(self.refuse(format!("{name}: the request is {size} bytes, over the {max} byte limit")));
        }
        let arguments = match cleaned.unwrap_or_else(|| call.arguments.clone()) {
            Value::Object(arguments) => arguments,
            Value::Null if call.target.op() != Op::Tool => serde_json::Map::new(),
            _ => {
                trail.refused("bridge:arguments", "the arguments are not a JSON object");
                return Err(self.refuse(format!("{name}: arguments must be a JSON object")));
            }
        };
        if let Target::Prompt { .. } = target
            && let Some((key, _)) = arguments.iter().find(|(_, v)| !v.is_string())
        {
            trail.refused("bridge:arguments", "a prompt argument is not a string");
            let key = crate::stubs::cut_chars(key, 64);
            return Err(self.refuse(format!("{name}: the prompt argument {key:?} must be a string")));
        }
        Ok(arguments)
    }

    /// Step 4, the audit sink: nothing goes out that could not be recorded
    /// afterwards (checked before the policy counts the call and the
    /// private rule taints).
    async fn recordable(&self, target: &Target<'_>, call: &ToolCall, trail: &mut Trail) -> Result<(), Answer> {
        let Some(audit) = &self.inner.audit else { return Ok(()) };
        match audit.ready().await {
            Ok(()) => Ok(()),
            Err(e) => {
                let name = target.name(call);
                tracing::error!(tool = %name, cell = %call.cell_id, error = %e, "refused: the audit sink cannot be written");
                trail.refused("bridge:audit", &e.to_string());
                Err(self.refuse(format!("{name}: {e}")))
            }
        }
    }

    /// Step 6, the private-data rule, last of the checks, so that a call
    /// refused by any check above never taints; a private call taints
    /// here, before it goes out (see [`private`]).
    pub(crate) async fn private_rule(
        &self,
        current: &Current,
        target: &Target<'_>,
        state: &mut StateKey<'_>,
        trail: &mut Trail,
    ) -> Result<(), Answer> {
        let Some(rule) = &current.rule else { return Ok(()) };
        // A list from the catalog sends no server anything.
        let Some(private) = target.private(current) else { return Ok(()) };
        let name = target.judged_as(self);
        let key = match state.get().await {
            Ok(key) => key.to_string(),
            Err(e) => {
                let why = state_refusal(&name, "private-data rule", &e);
                trail.refused("bridge:private_data", &why);
                return Err(self.refuse(why));
            }
        };
        match rule.judge(&key, &name, private).await {
            Ok(()) => {
                trail.tainted = Some(private);
                // Remembered so that a reload does not remove the server
                // whose taint an open session holds.
                if private && let Some(index) = target.server() {
                    self.inner.reloads.tainted_by(&key, current.servers[index].name());
                }
                Ok(())
            }
            Err(refusal) => {
                trail.tainted = matches!(refusal, private::RuleRefusal::Tainted { .. }).then_some(true);
                trail.refused("bridge:private_data", &refusal.to_string());
                Err(self.refuse(refusal.to_string()))
            }
        }
    }

    /// Step 5, the policy: its verdict, argument rule and rate limits for
    /// one call, then the person's answer when the policy asks for
    /// approval. Each
    /// decision goes into the call's audit trail and is counted. `Err`
    /// holds the refusal.
    async fn apply_policy(
        &self,
        applied: &Applied,
        call: &ToolCall,
        caller: Caller,
        target: &Target<'_>,
        state: &mut StateKey<'_>,
        trail: &mut Trail,
    ) -> Result<(), Answer> {
        let tool = match target {
            Target::Tool(tool) => *tool,
            other => return self.admit(applied, call.into(), other, trail),
        };
        let name = &tool.name;
        let server = self.server_name(tool.server);
        let site = CallSite { session: &call.session, server: &server, tool: &tool.mcp_name };
        trail.record_args = applied.policy.records_args(&tool.mcp_name);
        let verdict = applied.policy.verdict(&tool.mcp_name);
        if let Verdict::Deny { reason, rule } = &verdict {
            tracing::info!(tool = %name, cell = %call.cell_id, %rule, "refused: denied by policy");
            self.decided(trail, site, AuditDecision::Denied, rule, Some(reason.clone()));
            return Err(self.refuse(format!("{name}: denied by policy ({rule}): {reason}")));
        }
        if let Err(why) = applied.policy.check_args(&tool.mcp_name, &call.arguments) {
            let rule = RuleSource::Tool(tool.mcp_name.clone());
            tracing::info!(tool = %name, cell = %call.cell_id, "refused by the policy's argument rule");
            let reason = format!("{} ({rule}/args)", why.without_values());
            self.decided(trail, site, AuditDecision::Refused, &rule, Some(reason));
            return Err(self.refuse(format!("{name}: {why} ({rule}/args)")));
        }
        // Only a `grant` limit needs the session's own state.
        let session = if applied.policy.counts_per_session(&tool.mcp_name) {
            match state.get().await {
                Ok(key) => key.to_string(),
                Err(e) => {
                    let why = state_refusal(name, "rate limit", &e);
                    tracing::info!(tool = %name, cell = %call.cell_id, "refused: {why}");
                    self.decided(trail, site, AuditDecision::Refused, verdict.rule(), Some(why.clone()));
                    return Err(self.refuse(why));
                }
            }
        } else {
            call.session.clone()
        };
        if let Err(refusal) =
            applied.limiter.admit_as(&session, call.identity.as_deref(), &tool.mcp_name, trail.decided).await
        {
            tracing::info!(tool = %name, cell = %call.cell_id, "refused: {refusal}");
            let decision = match refusal {
                policy::LimitRefusal::Exceeded { .. } => AuditDecision::RateLimited,
                policy::LimitRefusal::State { .. } => AuditDecision::Refused,
            };
            self.decided(trail, site, decision, verdict.rule(), Some(refusal.to_string()));
            return Err(self.refuse(format!("{name}: {refusal}")));
        }
        let Verdict::Approve { rule, team, .. } = &verdict else {
            self.decided(trail, site, AuditDecision::Allowed, verdict.rule(), None);
            return Ok(());
        };
        let from_code = matches!(caller, Caller::Code);
        if let Some(team) = team {
            let args = trail.record_args.then(|| call.arguments.clone());
            let asked = crate::team::Asked { call, site, rule, team, args, from_code };
            let answer = self.ask_team(asked).await;
            code_mode_telemetry::approval_answered(match answer.audit.outcome.as_str() {
                "approved" => ApprovalAnswer::Approved,
                "declined" => ApprovalAnswer::Declined,
                "timed_out" => ApprovalAnswer::TimedOut,
                _ => ApprovalAnswer::Unavailable,
            });
            trail.approval = Some(answer.audit);
            if answer.approved {
                tracing::info!(tool = %name, cell = %call.cell_id, %rule, "approved by an approver");
                self.decided(trail, site, AuditDecision::Approved, rule, None);
                return Ok(());
            }
            tracing::info!(tool = %name, cell = %call.cell_id, %rule, "refused: not approved: {}", answer.refusal);
            self.decided(trail, site, AuditDecision::NotApproved, rule, Some(answer.refusal.clone()));
            return Err(self.refuse(format!("{name}: needs approval ({rule}): {}", answer.refusal)));
        }
        // The person's time does not count against the cell's deadline.
        let holder = match (self.inner.outbound.get(), from_code) {
            (Some(bus), true) => {
                crate::team::Holder::start(self, bus.clone(), &call.cell_id, call.call_index, false).await
            }
            _ => None,
        };
        let answer = self.ask_approval(call, site, rule).await;
        drop(holder);
        code_mode_telemetry::approval_answered(match &answer {
            ApprovalReply::Approved => ApprovalAnswer::Approved,
            ApprovalReply::Declined => ApprovalAnswer::Declined,
            ApprovalReply::Cancelled => ApprovalAnswer::Dismissed,
            ApprovalReply::TimedOut => ApprovalAnswer::TimedOut,
            ApprovalReply::Unavailable { .. } => ApprovalAnswer::Unavailable,
        });
        if answer == ApprovalReply::Approved {
            tracing::info!(tool = %name, cell = %call.cell_id, %rule, "approved");
            self.decided(trail, site, AuditDecision::Approved, rule, None);
            return Ok(());
        }
        let why = approval::refusal(&answer, self.inner.limits.approval_timeout);
        tracing::info!(tool = %name, cell = %call.cell_id, %rule, "refused: not approved: {why}");
        self.decided(trail, site, AuditDecision::NotApproved, rule, Some(why.clone()));
        Err(self.refuse(format!("{name}: needs approval ({rule}): {why}")))
    }

    /// Step 5 for a request other than a tool call: the server's rule for
    /// the resource, prompt or template it names, or for the question it
    /// asks (`allow` or `deny`).
    pub(crate) fn admit(
        &self,
        applied: &Applied,
        judged: Judged<'_>,
        target: &Target<'_>,
        trail: &mut Trail,
    ) -> Result<(), Answer> {
        let Some(admission) = target.admission(applied) else { return Ok(()) };
        let Some(index) = target.server() else { return Ok(()) };
        let audit_name = target.audit_name();
        let server = self.server_name(index);
        let site = CallSite { session: judged.session, server: &server, tool: &audit_name };
        match admission {
            Admission::Allow { rule } => {
                self.decided(trail, site, AuditDecision::Allowed, &rule, None);
                Ok(())
            }
            Admission::Deny { reason, rule } => {
                let name = target.name(judged);
                let op = judged.method.unwrap_or_default();
                tracing::info!(op, cell = %judged.cell, %rule, "refused: denied by policy");
                self.decided(trail, site, AuditDecision::Denied, &rule, Some(reason.clone()));
                Err(self.refuse(format!("{name}: denied by policy ({rule}): {reason}")))
            }
        }
    }

    /// Ask the person behind the call's client session, through its
    /// frontend, whether the call may go out.
    async fn ask_approval(&self, call: &ToolCall, site: CallSite<'_>, rule: &RuleSource) -> ApprovalReply {
        let timeout = self.inner.limits.approval_timeout;
        let request = proto::ApprovalRequest {
            session: call.session.clone(),
            cell_id: call.cell_id.clone(),
            server: site.server.to_string(),
            tool: site.tool.to_string(),
            arguments: approval::summarize_arguments(&call.arguments, approval::SUMMARY_CHARS),
            rule: rule.to_string(),
            timeout_ms: timeout.as_millis() as u64,
            console: None,
            connect: None,
        };
        self.ask_person(call, &request, "the client session that ran the code is gone, so nobody can be asked").await
    }

    /// Put `request` to the person behind `call`'s client session through
    /// its frontend (an approval, or a connect question) and wait for the
    /// answer; `gone` says why nobody can be asked when no frontend
    /// answers for that session.
    pub(crate) async fn ask_person(
        &self,
        call: &ToolCall,
        request: &proto::ApprovalRequest,
        gone: &str,
    ) -> ApprovalReply {
        let Some(bus) = self.inner.outbound.get() else {
            return ApprovalReply::Unavailable { reason: "this bridge is not connected to any client session".into() };
        };
        // The frontend session that asks: a stateless client's request, or
        // the client session itself.
        let Some(subject) = subjects::approval(call.asker.as_deref().unwrap_or(&call.session)) else {
            return ApprovalReply::Unavailable { reason: "the call's session id cannot be addressed".into() };
        };
        // The frontend answers `timed_out` itself when the person does not;
        // the margin covers the hops.
        let wait = Duration::from_millis(request.timeout_ms) + code_mode_core::defaults::HOP_MARGIN;
        match bus.call_counted_as::<_, ApprovalReply>(&subject, subjects::APPROVAL, request, wait).await {
            Ok(reply) => reply,
            Err(BusError::NoResponders { .. }) => ApprovalReply::Unavailable { reason: gone.to_string() },
            Err(BusError::Timeout { .. }) => ApprovalReply::TimedOut,
            Err(e) => {
                tracing::warn!(error = %e, rule = %request.rule, "a question to the person could not be asked");
                ApprovalReply::Unavailable { reason: "the client session could not be asked".into() }
            }
        }
    }

    /// Note one policy decision in the call's trail and count it.
    pub(crate) fn decided(
        &self,
        trail: &mut Trail,
        site: CallSite<'_>,
        decision: AuditDecision,
        rule: &RuleSource,
        reason: Option<String>,
    ) {
        let rule = rule.to_string();
        code_mode_telemetry::policy_decision(site.server, site.tool, decision.as_str(), &rule);
        trail.decision = decision;
        trail.policy = Some(decision);
        trail.rule = Some(rule);
        trail.reason = reason;
    }

    /// Learn a tool's result shape from a successful result (what code
    /// receives of it), unless the tool is private (see [`crate::shapes`]);
    /// when what its stub shows changes, the refresher rebuilds the catalog.
    pub(crate) fn learn(&self, target: &Target<'_>, answer: &Answer) {
        let Target::Tool(tool) = target else { return };
        let rebuild = &self.inner.rebuild;
        if tool.private || !rebuild.shapes.learning(&tool.server_name, &tool.mcp_name) {
            return;
        }
        let owned;
        let text = match answer {
            Answer::Text(text) | Answer::Content { value: text, .. } => text.as_str(),
            Answer::Result(result) => {
                owned = result_text(result);
                owned.as_str()
            }
            _ => return,
        };
        if rebuild.shapes.observe(&tool.server_name, &tool.mcp_name, text, tool.declares_output) {
            rebuild.learned.notify_one();
        }
    }

    /// Count one more direct call of the call's session (its stateless
    /// scope's generation): how many it has made, this one included.
    async fn count_direct(&self, state: &mut StateKey<'_>) -> Result<u64, code_mode_core::state::StateError> {
        let key = state.get().await?.to_string();
        let entry = self
            .inner
            .rebuild
            .state
            .update(&key, DIRECT_CALLS, |old| {
                serde_json::json!(old.and_then(|v| v.as_u64()).unwrap_or(0).saturating_add(1))
            })
            .await?;
        Ok(entry.value.as_u64().unwrap_or(u64::MAX))
    }
}

/// The entry of a session's direct-call count (`--max-direct-calls`).
pub const DIRECT_CALLS: &str = "direct.calls";

/// The refusal of a call whose session state could not be had for `what`.
fn state_refusal(tool: &str, what: &str, error: &code_mode_core::state::StateError) -> String {
    tracing::warn!(tool, error = %error, "refused: session state failed (fail closed)");
    let how = match error {
        code_mode_core::state::StateError::Unavailable(_) => "unavailable",
        code_mode_core::state::StateError::Invalid(_) => "invalid",
        code_mode_core::state::StateError::Conflict(_) => "changing concurrently",
    };
    format!("{tool}: session state {how}: refusing the call under the {what} (fail closed)")
}

/// The default timeout of a bus request carrying one tool call: the call's
/// own timeout plus a margin for the hops.
pub fn call_request_timeout(limits: &CallLimits) -> Duration {
    limits.call_timeout + defaults::HOP_MARGIN
}
