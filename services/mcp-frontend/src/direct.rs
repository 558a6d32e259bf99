//! Wrapped tools offered directly (`--expose-tools`): the client lists and
//! calls them as ordinary MCP tools, beside `run_python` or instead of it.
//!
//! Nothing here checks a call. The session actor sends each one to the
//! bridge as a [`DirectCall`] on [`subjects::TOOL_DIRECT`], and the bridge
//! runs it through the same function, in the same order, as a call from a
//! cell (allowlist, budget, arguments, audit sink, policy with its counters
//! and approvals, the private-data rule against the session's taint, the
//! result's size, the audit record). What this module owns is the shape:
//! the tools' definitions as `tools/list` offers them (from the catalog
//! watcher's current catalog, so `notifications/tools/list_changed`
//! reaches the client for them too), and the bridge's answer as an MCP
//! result: the server's result whole (content blocks, structured
//! content), or an error result holding the refusal a cell would get, or
//! only a fault's type name.
//!
//! With [`Expose::Only`] nothing runs code: the frontend needs a bridge
//! and no sandbox-runner, and `serve` does not contact Docker.
//!
//! Two notifications of the client go to every bridge from here: a
//! cancelled call ([`cancel`]) and changed roots ([`RootsChanges`]), which
//! the bridges pass on to the servers of the client's own sessions.

use std::sync::Arc;
use std::time::Duration;

use code_mode_core::defaults::HOP_MARGIN;
use code_mode_proto::{CallCancelled, CancelCall, Catalog, DirectCall, DirectReply, Target, subjects};
use rmcp::model::{JsonObject, Tool, ToolAnnotations};

use crate::wire::Outcome;
use crate::{FrontendError, Shared};

/// Which tools `tools/list` offers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Expose {
    /// Only `run_python` (the default).
    #[default]
    Off,
    /// `run_python` and every wrapped tool the catalog offers.
    Beside,
    /// Only the wrapped tools: a policy gateway, no sandbox.
    Only,
}

impl Expose {
    /// `run_python` is offered.
    pub fn run_python(self) -> bool {
        self != Expose::Only
    }

    /// The wrapped tools are offered.
    pub fn direct(self) -> bool {
        self != Expose::Off
    }
}

/// The wrapped tools of `catalog` as MCP tools: the servers' schemas,
/// titles and annotations under the servers' own names (prefixed
/// `<server>__` with several servers, [`code_mode_proto::ToolEntry::gateway_name`]), each
/// description led by its labels. Tools a policy denies outright are not
/// in the catalog, so not offered.
pub(crate) fn tools(catalog: &Catalog) -> Vec<Tool> {
    catalog
        .tools
        .iter()
        .filter_map(|entry| {
            let direct = entry.direct.as_ref()?;
            let mut tool =
                Tool::new(entry.gateway_name(), direct.description.clone(), Arc::new(object(&direct.input_schema)));
            tool.title = direct.title.clone();
            tool.output_schema = direct.output_schema.as_ref().map(|o| Arc::new(object(o)));
            tool.annotations =
                direct.annotations.as_ref().and_then(|a| serde_json::from_value::<ToolAnnotations>(a.clone()).ok());
            Some(tool)
        })
        .collect()
}

fn object(value: &serde_json::Value) -> JsonObject {
    match value {
        serde_json::Value::Object(m) => m.clone(),
        _ => JsonObject::new(),
    }
}

/// Send one direct call to the bridge and turn its answer into how the
/// request ends: the MCP result the client gets ([`crate::wire::direct_reply`]),
/// or for a request other than a tool call the server's result or refusal
/// ([`crate::wire::gateway_outcome`]).
pub(crate) async fn call(shared: &Shared, call: &DirectCall) -> Result<Outcome, FrontendError> {
    let catalog = &shared.catalog.current().catalog;
    let answers = catalog.answer_wait_ms(call.link.as_ref());
    let wait = Duration::from_millis(catalog.call_timeout_ms + answers) + HOP_MARGIN;
    let Target::Tool(asked) = &call.target else {
        let answer = shared.bus.call::<_, DirectReply>(subjects::TOOL_DIRECT, call, wait).await;
        return Ok(crate::wire::gateway_outcome(call.target.method(), answer));
    };
    // The client names the tool as tools/list offered it; the bridge knows
    // it by the name the code calls it by (which a client may also use).
    let asked = asked.as_str();
    let python = catalog.tools.iter().find(|t| t.gateway_name() == asked).map(|t| t.name.clone());
    let answer = match &python {
        Some(name) => {
            let call = DirectCall { target: Target::Tool(name.clone()), ..call.clone() };
            shared.bus.call::<_, DirectReply>(subjects::TOOL_DIRECT, &call, wait).await
        }
        None => shared.bus.call::<_, DirectReply>(subjects::TOOL_DIRECT, call, wait).await,
    };
    let answer = answer.map(|reply| in_client_words(reply, asked, python.as_deref(), catalog));
    crate::wire::direct_reply(asked, answer).map(Outcome::Tool)
}

/// A refusal in the words of a client of the gateway: an unknown name
/// refused as such, pointing at `tools/list` (not at `TOOLS`, which only
/// code has) and at the offered name closest to it; a refusal naming the
/// tool by its Python name names it as the client did.
fn in_client_words(reply: DirectReply, asked: &str, python: Option<&str>, catalog: &Catalog) -> DirectReply {
    let DirectReply::Refused { message, code: None, data } = reply else { return reply };
    let message = if message.starts_with("there is no tool named ") {
        let offered: Vec<String> =
            catalog.tools.iter().filter(|t| t.direct.is_some()).map(|t| t.gateway_name()).collect();
        match closest(asked, &offered) {
            Some(near) => {
                format!("there is no tool named {asked:?}; tools/list lists the tools (did you mean {near:?}?)")
            }
            None => format!("there is no tool named {asked:?}; tools/list lists the tools"),
        }
    } else {
        match python.and_then(|p| message.strip_prefix(p)).filter(|rest| rest.starts_with(':')) {
            Some(rest) => format!("{asked}{rest}"),
            None => message,
        }
    };
    DirectReply::Refused { message, code: None, data }
}

/// The name of `names` closest to `wrong` (`-` and `_` alike, case aside),
/// if one is close enough to be what was meant.
fn closest<'n>(wrong: &str, names: &'n [String]) -> Option<&'n str> {
    let plain = |s: &str| s.to_lowercase().replace('-', "_");
    let wrong = plain(wrong);
    names
        .iter()
        .map(|n| (strsim::normalized_levenshtein(&wrong, &plain(n)), n))
        .filter(|(score, _)| *score >= 0.6)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, n)| n.as_str())
}

/// How long telling the bridges of a cancelled call may take.
const CANCEL_TIMEOUT: Duration = Duration::from_secs(2);

/// Tell every bridge that the client cancelled the direct call `call_id`:
/// the one running it cancels it at its server (the call then ends as
/// cancelled). A bridge that cannot be told leaves the call to run out.
pub(crate) async fn cancel(shared: &Shared, call_id: &str) {
    let request = CancelCall { call_id: call_id.to_string(), reason: Some("cancelled by the client".into()) };
    match shared.bus.call::<_, CallCancelled>(subjects::CANCEL, &request, CANCEL_TIMEOUT).await {
        Ok(CallCancelled { found }) => tracing::info!(call = %call_id, found, "the client cancelled a call"),
        Err(e) => tracing::debug!(call = %call_id, error = %e, "the bridges could not be told of a cancelled call"),
    }
}

/// One client session's changes of roots on their way to the bridges: one
/// telling at a time, and changes that arrive meanwhile told once more
/// after it (the servers then ask for the roots as they are by then). A
/// client sending changes in a loop so costs the bridges one at a time,
/// and its last change is never lost.
#[derive(Debug, Default)]
pub(crate) struct RootsChanges {
    /// (a telling runs, another change came meanwhile)
    state: std::sync::Mutex<(bool, bool)>,
}

impl RootsChanges {
    /// The client of `session` said its roots changed.
    pub(crate) fn changed(self: &Arc<Self>, shared: Arc<Shared>, session: String) {
        {
            let mut state = code_mode_core::sync::lock(&self.state);
            if state.0 {
                state.1 = true;
                return;
            }
            state.0 = true;
        }
        let me = self.clone();
        tokio::spawn(async move {
            loop {
                roots_changed(&shared, &session).await;
                let mut state = code_mode_core::sync::lock(&me.state);
                if !std::mem::take(&mut state.1) {
                    state.0 = false;
                    return;
                }
            }
        });
    }
}

/// Tell every bridge that the client of `session` said its roots changed:
/// those holding that client's own sessions with servers pass it on. A
/// bridge that cannot be told leaves its servers with the roots they last
/// asked for (a server asks again when it needs them).
pub(crate) async fn roots_changed(shared: &Shared, session: &str) {
    let changed = code_mode_proto::RootsChanged { session: session.to_string() };
    match shared.bus.call::<_, code_mode_proto::RootsTold>(subjects::ROOTS_CHANGED, &changed, CANCEL_TIMEOUT).await {
        Ok(told) => tracing::debug!(%session, told = told.told, "the client's roots changed; servers told"),
        Err(e) => tracing::debug!(%session, error = %e, "the bridges could not be told of a client's changed roots"),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use code_mode_core::bus::Bus;
    use code_mode_proto::{ErrorKind, queue_groups};
    use rmcp::model::{CallToolResponse, CallToolResult};
    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::FrontendFactory;

    fn direct_call() -> DirectCall {
        DirectCall {
            session: "s".into(),
            asker: None,
            identity: None,
            call_id: "direct-1".into(),
            call_index: 1,
            max_calls: None,
            target: Target::Tool("add".into()),
            arguments: serde_json::json!({"a": 1, "b": 2}),
            link: None,
            retry: None,
        }
    }

    /// A frontend's shared state over `bus`, whose bridge lists no tools
    /// (a call timeout of 1 s).
    async fn shared(bus: &Bus, cancel: &CancellationToken) -> Arc<Shared> {
        let catalog = Catalog { max_calls: 10, call_timeout_ms: 1000, ..crate::fake_bridge::catalog("f", &[]) };
        crate::fake_bridge::FakeBridge::serve(bus, cancel, catalog).await;
        FrontendFactory::connect(bus.clone(), Default::default()).await.unwrap().shared.clone()
    }

    /// The complete result of a direct call.
    async fn call(shared: &Shared, direct: &DirectCall) -> CallToolResult {
        match super::call(shared, direct).await {
            Ok(Outcome::Tool(CallToolResponse::Complete(result))) => result,
            other => panic!("a complete result: {other:?}"),
        }
    }

    fn text(result: &CallToolResult) -> String {
        result.content.iter().filter_map(|c| c.as_text()).map(|t| t.text.clone()).collect()
    }

    #[tokio::test]
    async fn roots_changes_are_told_one_at_a_time_and_those_meanwhile_once_more_after_it() {
        let (bus, cancel) = (Bus::in_process(), CancellationToken::new());
        let shared = shared(&bus, &cancel).await;
        let told = Arc::new(std::sync::Mutex::new(Vec::new()));
        let heard = told.clone();
        let own_group = format!("{}.test", queue_groups::BRIDGE);
        bus.serve(
            subjects::ROOTS_CHANGED,
            &own_group,
            cancel.clone(),
            move |changed: code_mode_proto::RootsChanged| {
                heard.lock().unwrap().push(changed.session);
                async move {
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    Ok(code_mode_proto::RootsTold { told: 1 })
                }
            },
        )
        .await
        .unwrap();
        let changes = Arc::new(RootsChanges::default());
        // Ten changes while the first is told: one more telling after it.
        for _ in 0..10 {
            changes.changed(shared.clone(), "s1".into());
        }
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert_eq!(*told.lock().unwrap(), ["s1", "s1"]);
        // Idle again: the next change is told at once.
        changes.changed(shared.clone(), "s1".into());
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(told.lock().unwrap().len(), 3);
        cancel.cancel();
    }

    #[tokio::test(start_paused = true)]
    async fn a_direct_result_comes_back_whole_and_a_silent_or_absent_bridge_only_by_its_fault_kind() {
        let (bus, cancel) = (Bus::in_process(), CancellationToken::new());
        let shared = shared(&bus, &cancel).await;
        // No bridge serves direct calls yet.
        let unreached = call(&shared, &direct_call()).await;
        assert_eq!((unreached.is_error, text(&unreached)), (Some(true), "BridgeUnavailable".to_string()));
        let serving = CancellationToken::new();
        bus.serve(subjects::TOOL_DIRECT, queue_groups::BRIDGE, serving.clone(), |call: DirectCall| async move {
            let result = serde_json::json!({
                "content": [{"type": "text", "text": "{\"sum\":3}"}],
                "structuredContent": {"sum": 3},
                "isError": false,
            });
            match call.target.name() {
                "add" => Ok(DirectReply::Ok { result }),
                "crash" => Ok(DirectReply::Fault { kind: ErrorKind::TransportClosed }),
                _ => Ok(DirectReply::Refused {
                    message: format!("{}: denied by policy", call.target.name()),
                    code: None,
                    data: None,
                }),
            }
        })
        .await
        .unwrap();
        let added = call(&shared, &direct_call()).await;
        assert_eq!(added.structured_content, Some(serde_json::json!({"sum": 3})));
        assert_eq!(
            added.result_type,
            Some(rmcp::model::ResultType::COMPLETE),
            "given the result type the client's protocol needs"
        );
        let crashed = call(&shared, &DirectCall { target: Target::Tool("crash".into()), ..direct_call() }).await;
        assert_eq!(text(&crashed), "TransportClosed", "only the kind");
        let denied = call(&shared, &DirectCall { target: Target::Tool("echo".into()), ..direct_call() }).await;
        assert_eq!(text(&denied), "echo: denied by policy", "the bridge's own message");
        serving.cancel();
        // A bridge that takes the call and never answers: a timeout after
        // the call's own time and the hop margin (time is paused).
        let silent = CancellationToken::new();
        bus.serve(subjects::TOOL_DIRECT, queue_groups::BRIDGE, silent.clone(), |_: DirectCall| async {
            std::future::pending::<Result<DirectReply, code_mode_proto::WireError>>().await
        })
        .await
        .unwrap();
        let started = tokio::time::Instant::now();
        let timed_out = call(&shared, &direct_call()).await;
        assert_eq!(text(&timed_out), "BridgeTimeout");
        assert_eq!(started.elapsed(), Duration::from_millis(1000) + HOP_MARGIN);
        cancel.cancel();
    }

    #[tokio::test]
    async fn a_direct_call_or_a_read_through_the_session_asks_the_bridge_for_no_catalog() {
        let (bus, cancel) = (Bus::in_process(), CancellationToken::new());
        let catalog = Catalog { max_calls: 10, call_timeout_ms: 1000, ..crate::fake_bridge::catalog("f", &["add"]) };
        let bridge = crate::fake_bridge::FakeBridge::serve(&bus, &cancel, catalog).await;
        bus.serve(subjects::TOOL_DIRECT, queue_groups::BRIDGE, cancel.clone(), |_: DirectCall| async {
            Ok(DirectReply::Ok { result: serde_json::json!({"content": [{"type": "text", "text": "3"}]}) })
        })
        .await
        .unwrap();
        let shared = FrontendFactory::connect(bus.clone(), Default::default()).await.unwrap().shared.clone();
        let session = crate::session::SessionHandle::start(shared, None);
        let asked = bridge.asked_count();
        for (i, target) in [Target::Tool("add".into()), Target::ReadResource("test://a".into())].into_iter().enumerate()
        {
            let (route, _questions) = tokio::sync::mpsc::channel(1);
            let order = crate::session::DirectOrder {
                call_id: format!("direct-{i}"),
                target,
                arguments: serde_json::json!({}),
                link: None,
                retry: None,
                route,
            };
            let outcome = session.direct(order).await.await.expect("the session answers");
            assert!(outcome.is_ok(), "{outcome:?}");
        }
        // Within the watcher's poll (3 s), so only a refresh per call would
        // have asked.
        assert_eq!(bridge.asked_count(), asked, "no catalog fetch for a direct call or a read");
        cancel.cancel();
    }
}
