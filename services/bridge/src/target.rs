//! What a judged request names, once the pipeline's first step found it
//! ([`Target`]): a tool of the catalog, the target of another request (a
//! resource, a prompt, a completion, the lists) and the server that offers
//! it, or a server's question to a client; how each is named in refusals
//! and the audit record, how private it is, what the policy says of it,
//! and the request's params.

use code_mode_proto::AskKind;
use serde_json::Value;

use crate::current::{Applied, Current};
use crate::policy::Admission;
use crate::trail::Judged;
use crate::{Bridge, catalog};

/// What a judged request names, once step 1 found it: a tool of the
/// catalog, the target of another request and the server that offers it,
/// or a server's question to the client.
#[derive(Debug)]
pub(crate) enum Target<'c> {
    /// A tool.
    Tool(&'c catalog::CatalogTool),
    /// A resource to read, subscribe to or unsubscribe from.
    Resource {
        /// The server offering it.
        server: usize,
        /// Its URI.
        uri: String,
    },
    /// A prompt.
    Prompt {
        /// The server offering it.
        server: usize,
        /// Its name as the server lists it.
        mcp_name: String,
        /// The name it is offered under.
        offered: String,
    },
    /// A completion of a prompt's or a resource template's argument.
    Complete {
        /// The server offering what it completes.
        server: usize,
        /// What it completes.
        of: Completed,
    },
    /// A task a server created for a client's direct call (`tasks/get`,
    /// `tasks/update`, `tasks/cancel`): the server's, for the identity that
    /// created it (see [`crate::wrapped_tasks`]).
    Task {
        /// The server holding it.
        server: usize,
        /// Its id, as the server gave it.
        id: String,
    },
    /// Every server's resources or templates, from the catalog.
    Lists,
    /// A server's question to the client (sampling, elicitation, roots).
    Question {
        /// The server asking.
        server: usize,
        /// What it asks.
        kind: AskKind,
    },
}

/// What a completion completes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Completed {
    /// A prompt's argument (the prompt's name as its server lists it).
    Prompt(String),
    /// A resource template's argument (the template's URI).
    Template(String),
}

/// A name for messages.
pub(crate) struct Named {
    pub(crate) name: String,
}

impl Target<'_> {
    /// The server that receives the request, if one does.
    pub(crate) fn server(&self) -> Option<usize> {
        match self {
            Target::Tool(tool) => Some(tool.server),
            Target::Resource { server, .. }
            | Target::Prompt { server, .. }
            | Target::Complete { server, .. }
            | Target::Task { server, .. }
            | Target::Question { server, .. } => Some(*server),
            Target::Lists => None,
        }
    }

    /// How refusals name it: the tool's Python name, else the method and
    /// its target (a question: its method).
    pub(crate) fn name<'a>(&self, judged: impl Into<Judged<'a>>) -> String {
        let method = judged.into().method.unwrap_or_default();
        match self {
            Target::Tool(tool) => tool.name.clone(),
            Target::Resource { uri, .. } => format!("{method} {}", crate::stubs::cut_chars(uri, 200)),
            Target::Prompt { offered, .. } => format!("prompts/get {offered}"),
            Target::Complete { of: Completed::Prompt(name), .. } => format!("completion/complete of prompt {name}"),
            Target::Complete { of: Completed::Template(uri), .. } => {
                format!("completion/complete of {}", crate::stubs::cut_chars(uri, 200))
            }
            Target::Task { id, .. } => format!("{method} {}", crate::stubs::cut_chars(id, 100)),
            Target::Lists => method.to_string(),
            Target::Question { kind, .. } => kind.method().to_string(),
        }
    }

    /// What the audit record names as the "tool": the server's name for
    /// it (a URI, a prompt's listed name, a template).
    pub(crate) fn audit_name(&self) -> String {
        match self {
            Target::Tool(tool) => tool.mcp_name.clone(),
            Target::Resource { uri, .. } => uri.clone(),
            Target::Prompt { mcp_name, .. } => mcp_name.clone(),
            Target::Complete { of: Completed::Prompt(name), .. } => name.clone(),
            Target::Complete { of: Completed::Template(uri), .. } => uri.clone(),
            Target::Task { id, .. } => id.clone(),
            Target::Lists => String::new(),
            Target::Question { kind, .. } => kind.method().to_string(),
        }
    }

    /// How the private-data rule names it when it taints (a question: the
    /// answer it would carry to its server).
    pub(crate) fn judged_as(&self, bridge: &Bridge) -> String {
        match self {
            Target::Tool(tool) => tool.name.clone(),
            Target::Question { server, kind } => {
                let answer = if *kind == AskKind::Sampling { "a sampling answer" } else { kind.method() };
                format!("{answer} to {}", bridge.server_name(*server))
            }
            other => match other.server() {
                Some(server) => format!("the resources and prompts of {}", bridge.server_name(server)),
                None => String::new(),
            },
        }
    }

    /// Whether the private-data rule counts it as private (`None`: it
    /// sends no server anything the rule judges). Of a server's questions
    /// only a sampling answer is judged (the client's model writes it, so
    /// once the session read private data only a private server may have
    /// it), and never as private: it taints nothing.
    pub(crate) fn private(&self, current: &Current) -> Option<bool> {
        match self {
            Target::Tool(tool) => Some(tool.private),
            Target::Lists => None,
            Target::Question { server, kind } => {
                (*kind == AskKind::Sampling && !current.offers.is_private(*server)).then_some(false)
            }
            other => other.server().map(|server| current.offers.is_private(server)),
        }
    }

    /// The server's policy on it (a tool's verdict is applied elsewhere).
    pub(crate) fn admission(&self, applied: &Applied) -> Option<Admission> {
        let policy = &applied.policy;
        match self {
            // A task's creating call was judged by the policy.
            Target::Tool(_) | Target::Lists | Target::Task { .. } => None,
            Target::Resource { uri, .. } => Some(policy.resource(uri)),
            Target::Prompt { mcp_name, .. } => Some(policy.prompt(mcp_name)),
            Target::Complete { of: Completed::Prompt(name), .. } => Some(policy.prompt(name)),
            Target::Complete { of: Completed::Template(uri), .. } => Some(policy.resource(uri)),
            Target::Question { kind, .. } => Some(policy.ask((*kind).into())),
        }
    }

    /// The MCP request's parameters as its server takes them.
    pub(crate) fn params(&self, arguments: serde_json::Map<String, Value>) -> Value {
        match self {
            Target::Tool(tool) => serde_json::json!({"name": tool.mcp_name, "arguments": arguments}),
            Target::Resource { uri, .. } => serde_json::json!({"uri": uri}),
            Target::Prompt { mcp_name, .. } => serde_json::json!({"name": mcp_name, "arguments": arguments}),
            Target::Complete { of, .. } => {
                let mut params = Value::Object(arguments);
                if let Completed::Prompt(name) = of {
                    // The server knows its prompt by its own name.
                    params["ref"]["name"] = Value::String(name.clone());
                }
                params
            }
            Target::Task { id, .. } => {
                let mut params = arguments;
                params.insert("taskId".into(), Value::String(id.clone()));
                Value::Object(params)
            }
            Target::Lists | Target::Question { .. } => Value::Object(Default::default()),
        }
    }
}

/// What a `completion/complete` request completes, from its `ref`.
pub(crate) fn completion_target<'c>(offers: &crate::offers::Offers, params: &Value) -> Result<Target<'c>, String> {
    let reference = params.get("ref").ok_or("the request has no ref")?;
    match reference.get("type").and_then(Value::as_str) {
        Some("ref/prompt") => {
            let name = reference.get("name").and_then(Value::as_str).ok_or("a prompt ref needs a name")?;
            let (server, mcp_name) = match offers.prompt(name) {
                Some((server, mcp_name)) => (server, mcp_name.to_string()),
                None => offers.withheld_prompt(name).ok_or_else(|| format!("there is no prompt named {name:?}"))?,
            };
            Ok(Target::Complete { server, of: Completed::Prompt(mcp_name) })
        }
        Some("ref/resource") => {
            let uri = reference.get("uri").and_then(Value::as_str).ok_or("a resource ref needs a uri")?;
            let server = offers.resource_server(uri)?;
            Ok(Target::Complete { server, of: Completed::Template(uri.to_string()) })
        }
        Some(other) => Err(format!("a ref of type {other:?} is not one code-mode knows")),
        None => Err("the ref has no type".to_string()),
    }
}
