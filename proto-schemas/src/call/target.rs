//! What a call asks of a wrapped server ([`Op`]) and what it names
//! ([`Target`]): a tool by its name, a resource by its URI, a prompt by its
//! name, or nothing.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What a call asks of a wrapped server: a tool call (the default), or one
/// of MCP's other requests that carry data to a server. Each passes the same
/// checks as a tool call, in the same order (see the bridge's `check.rs`).
///
/// What each names is a field of the call's message of its own, and its
/// `arguments` are the request's own parameters:
///
/// | op | names | arguments |
/// | --- | --- | --- |
/// | `tool` (absent) | `tool`: the tool's Python name | the tool's arguments |
/// | `read_resource`, `subscribe`, `unsubscribe` | `uri`: the resource's URI | `{}` |
/// | `list_resources`, `list_templates` | nothing | `{}` |
/// | `get_prompt` | `prompt`: the prompt's name as offered | the prompt's arguments (strings) |
/// | `complete` | nothing | the `completion/complete` parameters (`ref`, `argument`, `context`) |
/// | `get_task`, `cancel_task` | `task`: the task's id, as its server gave it | `{}` |
/// | `update_task` | `task`: the task's id | `{"inputResponses": {...}}`, the client's answers |
///
/// The task ops are a direct client's only (the tasks extension, SEP-2663):
/// they reach the server whose tool call created the task, and only for the
/// identity that created it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// `tools/call`.
    #[default]
    Tool,
    /// `resources/read`.
    ReadResource,
    /// `resources/list`, every server's (code only: a client lists from the
    /// catalog).
    ListResources,
    /// `resources/templates/list`, every server's (code only).
    ListTemplates,
    /// `resources/subscribe`.
    Subscribe,
    /// `resources/unsubscribe`.
    Unsubscribe,
    /// `prompts/get`.
    GetPrompt,
    /// `completion/complete`.
    Complete,
    /// `tasks/get` of a task a wrapped server created.
    GetTask,
    /// `tasks/update`: the client's answers to a task's input requests.
    UpdateTask,
    /// `tasks/cancel`.
    CancelTask,
}

impl Op {
    /// True for a tool call (the op a call has when it names none).
    pub fn is_tool(&self) -> bool {
        *self == Op::Tool
    }

    /// The MCP method it stands for.
    pub fn method(self) -> &'static str {
        match self {
            Op::Tool => "tools/call",
            Op::ReadResource => "resources/read",
            Op::ListResources => "resources/list",
            Op::ListTemplates => "resources/templates/list",
            Op::Subscribe => "resources/subscribe",
            Op::Unsubscribe => "resources/unsubscribe",
            Op::GetPrompt => "prompts/get",
            Op::Complete => "completion/complete",
            Op::GetTask => "tasks/get",
            Op::UpdateTask => "tasks/update",
            Op::CancelTask => "tasks/cancel",
        }
    }
}

/// What a call asks of a wrapped server, with what it names.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Target {
    /// `tools/call` of the tool of this Python name.
    Tool(String),
    /// `resources/read` of this URI.
    ReadResource(String),
    /// `resources/list`, every server's.
    ListResources,
    /// `resources/templates/list`, every server's.
    ListTemplates,
    /// `resources/subscribe` to this URI.
    Subscribe(String),
    /// `resources/unsubscribe` from this URI.
    Unsubscribe(String),
    /// `prompts/get` of the prompt of this name (as offered).
    GetPrompt(String),
    /// `completion/complete` (what it completes is in its arguments).
    Complete,
    /// `tasks/get` of the task of this id.
    GetTask(String),
    /// `tasks/update` of the task of this id (its answers are in the
    /// arguments).
    UpdateTask(String),
    /// `tasks/cancel` of the task of this id.
    CancelTask(String),
}

impl Target {
    /// A target from an op and what it names, as a protocol that carries
    /// them apart gives them (the runner's lines from `runner.py`); the name
    /// is dropped for an op that names nothing.
    pub fn new(op: Op, name: String) -> Self {
        match op {
            Op::Tool => Target::Tool(name),
            Op::ReadResource => Target::ReadResource(name),
            Op::ListResources => Target::ListResources,
            Op::ListTemplates => Target::ListTemplates,
            Op::Subscribe => Target::Subscribe(name),
            Op::Unsubscribe => Target::Unsubscribe(name),
            Op::GetPrompt => Target::GetPrompt(name),
            Op::Complete => Target::Complete,
            Op::GetTask => Target::GetTask(name),
            Op::UpdateTask => Target::UpdateTask(name),
            Op::CancelTask => Target::CancelTask(name),
        }
    }

    /// What the call asks.
    pub fn op(&self) -> Op {
        match self {
            Target::Tool(_) => Op::Tool,
            Target::ReadResource(_) => Op::ReadResource,
            Target::ListResources => Op::ListResources,
            Target::ListTemplates => Op::ListTemplates,
            Target::Subscribe(_) => Op::Subscribe,
            Target::Unsubscribe(_) => Op::Unsubscribe,
            Target::GetPrompt(_) => Op::GetPrompt,
            Target::Complete => Op::Complete,
            Target::GetTask(_) => Op::GetTask,
            Target::UpdateTask(_) => Op::UpdateTask,
            Target::CancelTask(_) => Op::CancelTask,
        }
    }

    /// The MCP method it stands for.
    pub fn method(&self) -> &'static str {
        self.op().method()
    }

    /// What it names, for messages and logs: the tool's name, the
    /// resource's URI, the prompt's name; empty for a list and a completion.
    pub fn name(&self) -> &str {
        match self {
            Target::Tool(name)
            | Target::ReadResource(name)
            | Target::Subscribe(name)
            | Target::Unsubscribe(name)
            | Target::GetPrompt(name)
            | Target::GetTask(name)
            | Target::UpdateTask(name)
            | Target::CancelTask(name) => name,
            Target::ListResources | Target::ListTemplates | Target::Complete => "",
        }
    }

    /// The tool's name, for a tool call.
    pub fn tool(&self) -> Option<&str> {
        match self {
            Target::Tool(name) => Some(name),
            _ => None,
        }
    }

    /// The resource's URI, for a read, a subscription or its end.
    pub fn uri(&self) -> Option<&str> {
        match self {
            Target::ReadResource(uri) | Target::Subscribe(uri) | Target::Unsubscribe(uri) => Some(uri),
            _ => None,
        }
    }

    /// The task's id, for a `tasks/*` request.
    pub fn task(&self) -> Option<&str> {
        match self {
            Target::GetTask(id) | Target::UpdateTask(id) | Target::CancelTask(id) => Some(id),
            _ => None,
        }
    }

    /// The prompt's name, for a `prompts/get`.
    pub fn prompt(&self) -> Option<&str> {
        match self {
            Target::GetPrompt(name) => Some(name),
            _ => None,
        }
    }
}

/// A call's message whose fields do not say what it names: a field its op
/// needs is missing, or one it does not take is there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetError {
    op: Op,
    field: &'static str,
    missing: bool,
}

impl fmt::Display for TargetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = self.op.method();
        if self.missing {
            write!(f, "a {op} call names what it asks for in `{}`, which is missing", self.field)
        } else {
            write!(f, "a {op} call has no `{}`", self.field)
        }
    }
}

impl std::error::Error for TargetError {}

/// What a target is on the wire: its op (absent for a tool call) and the
/// one field naming what it asks for, if any.
pub(super) struct Named {
    pub op: Op,
    pub tool: Option<String>,
    pub uri: Option<String>,
    pub prompt: Option<String>,
    pub task: Option<String>,
}

impl From<Target> for Named {
    fn from(target: Target) -> Self {
        let op = target.op();
        let (mut tool, mut uri, mut prompt, mut task) = (None, None, None, None);
        match target {
            Target::Tool(name) => tool = Some(name),
            Target::ReadResource(name) | Target::Subscribe(name) | Target::Unsubscribe(name) => uri = Some(name),
            Target::GetPrompt(name) => prompt = Some(name),
            Target::GetTask(id) | Target::UpdateTask(id) | Target::CancelTask(id) => task = Some(id),
            Target::ListResources | Target::ListTemplates | Target::Complete => {}
        }
        Named { op, tool, uri, prompt, task }
    }
}

impl TryFrom<Named> for Target {
    type Error = TargetError;

    fn try_from(named: Named) -> Result<Self, TargetError> {
        let Named { op, tool, uri, prompt, task } = named;
        let needs = match op {
            Op::Tool => Some("tool"),
            Op::ReadResource | Op::Subscribe | Op::Unsubscribe => Some("uri"),
            Op::GetPrompt => Some("prompt"),
            Op::GetTask | Op::UpdateTask | Op::CancelTask => Some("task"),
            Op::ListResources | Op::ListTemplates | Op::Complete => None,
        };
        let mut name = None;
        for (field, value) in [("tool", tool), ("uri", uri), ("prompt", prompt), ("task", task)] {
            match value {
                Some(value) if needs == Some(field) => name = Some(value),
                Some(_) => return Err(TargetError { op, field, missing: false }),
                None => {}
            }
        }
        match (needs, name) {
            (Some(field), None) => Err(TargetError { op, field, missing: true }),
            (_, name) => Ok(Target::new(op, name.unwrap_or_default())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_target_goes_to_the_wire_and_back_as_itself() {
        let targets = [
            Target::Tool("add".into()),
            Target::ReadResource("test://a".into()),
            Target::ListResources,
            Target::ListTemplates,
            Target::Subscribe("test://a".into()),
            Target::Unsubscribe("test://a".into()),
            Target::GetPrompt("greet".into()),
            Target::Complete,
            Target::GetTask("t-1".into()),
            Target::UpdateTask("t-1".into()),
            Target::CancelTask("t-1".into()),
        ];
        for target in targets {
            assert_eq!(Target::try_from(Named::from(target.clone())), Ok(target));
        }
    }

    #[test]
    fn a_field_the_op_does_not_take_or_a_missing_one_is_refused_naming_it() {
        let named = |op, tool: Option<&str>, uri: Option<&str>| Named {
            op,
            tool: tool.map(str::to_string),
            uri: uri.map(str::to_string),
            prompt: None,
            task: None,
        };
        let wrong = Target::try_from(named(Op::ReadResource, Some("add"), Some("test://a"))).unwrap_err();
        assert_eq!(wrong.to_string(), "a resources/read call has no `tool`");
        let missing = Target::try_from(named(Op::Tool, None, None)).unwrap_err();
        assert_eq!(missing.to_string(), "a tools/call call names what it asks for in `tool`, which is missing");
        let list = Target::try_from(named(Op::ListResources, None, Some("test://a"))).unwrap_err();
        assert_eq!(list.to_string(), "a resources/list call has no `uri`");
    }
}
