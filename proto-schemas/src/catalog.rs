//! The tool catalog: what the bridge offers, to the sandbox as stubs and to
//! a client of the gateway as MCP definitions ([`subjects::CATALOG_GET`]).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::ClientLink;
// The other items the doc comments link to.
#[cfg(doc)]
use crate::*;

/// A request for the tool catalog of the bridge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CatalogRequest {
    /// The client session asking (for per-session verdicts in later versions).
    pub session: String,
    /// The [`Catalog::fingerprint`] of the catalog the asker holds: when it
    /// is still current the reply is [`Catalog::unchanged`], without tools.
    #[serde(default)]
    pub known: Option<String>,
    /// Send each tool's MCP definition too ([`ToolEntry::direct`]): the
    /// asker offers the wrapped tools directly (`--expose-tools`).
    #[serde(default)]
    pub direct: bool,
}

/// Every tool the bridge offers to the sandbox, and how to present them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Catalog {
    /// Which catalog this is: 1 at the bridge's start, higher after each
    /// refresh (a wrapped server's tool list changed). Versions of different
    /// bridge replicas are not comparable; compare the tools.
    pub version: u64,
    /// The tools, in the order the servers listed them.
    pub tools: Vec<ToolEntry>,
    /// The calls one run may make.
    pub max_calls: u32,
    /// How long one call may take, in milliseconds.
    pub call_timeout_ms: u64,
    /// How long a call that needs approval may wait for the person's answer,
    /// in milliseconds, on top of `call_timeout_ms` (0: no tool needs it).
    #[serde(default)]
    pub approval_timeout_ms: u64,
    /// How long a wrapped server's question (sampling, elicitation, roots)
    /// may wait for the client's answer, in milliseconds: a call whose
    /// client can be asked may take this long on top of `call_timeout_ms`
    /// (0: an older bridge).
    #[serde(default)]
    pub ask_timeout_ms: u64,
    /// SHA-256 (hex) of what this catalog offers: the tools and the limits
    /// above, not the version, so bridge replicas with the same tools agree.
    #[serde(default)]
    pub fingerprint: String,
    /// True when the request's `known` fingerprint is this one: `tools` is
    /// then empty and the asker keeps what it holds.
    #[serde(default)]
    pub unchanged: bool,
    /// Python names of tools a policy denies outright: not offered (no stub,
    /// not in `TOOLS`), but the code may still call one by name, and the
    /// bridge then refuses it with the rule and its reason.
    #[serde(default)]
    pub withheld: Vec<String>,
    /// How long an identity's stateless scope lives without a call, in
    /// milliseconds (`--stateless-idle`): the frontend's description tells
    /// a stateless client how long the private-data rule holds. 0: not
    /// said (an older bridge).
    #[serde(default)]
    pub stateless_idle_ms: u64,
    /// What the wrapped servers offer besides tools, which a client gets in
    /// either mode (and the `run_python` description mentions resources
    /// when some server has them). Absent from an older bridge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub features: Option<Features>,
    /// A fingerprint of what the servers list (each tool's definition,
    /// labels and withheld names), without the result shapes the bridge
    /// learned: a catalog that differs only in learned shapes has the same
    /// one, and a frontend tells its clients nothing of it (their models
    /// keep the description they hold; cells get the new stubs). Empty
    /// from an older bridge.
    #[serde(default)]
    pub listed: String,
    /// The Python packages (`name==version`, sorted) that every live
    /// sandbox-runner's image holds beyond the standard library: the code
    /// may run on any of them, so only what they share is promised. `None`
    /// while no runner has said (or from an older bridge); empty: the
    /// standard library only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packages: Option<Vec<String>>,
    /// Wrapped servers that cannot be reached now and why, each naming what
    /// fixes it (a remote server waiting for `code-mode login NAME`): their
    /// tools are not in `tools` until then, and the description says so.
    /// Absent when every server is reachable (and from an older bridge).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unavailable: Vec<Unavailable>,
}

/// A wrapped server that cannot be called now ([`Catalog::unavailable`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Unavailable {
    /// The server's name.
    pub server: String,
    /// Why, and what fixes it (never a secret).
    pub why: String,
}

/// Everything but tools that the wrapped servers offer a client of the
/// gateway (`--expose-tools`): their resources, resource templates and
/// prompts under the names the client sees, and which MCP capabilities the
/// gateway can serve for them. Items a policy denies are left out.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Features {
    /// Resources, in the order the servers listed them.
    #[serde(default)]
    pub resources: Vec<Offered>,
    /// Resource templates.
    #[serde(default)]
    pub templates: Vec<Offered>,
    /// Prompts.
    #[serde(default)]
    pub prompts: Vec<Offered>,
    /// Some server offers resources.
    #[serde(default)]
    pub has_resources: bool,
    /// Some server lets a client subscribe to a resource's updates.
    #[serde(default)]
    pub subscribe: bool,
    /// Some server offers prompts.
    #[serde(default)]
    pub has_prompts: bool,
    /// Some server completes arguments.
    #[serde(default)]
    pub completions: bool,
    /// Some server sends log messages.
    #[serde(default)]
    pub logging: bool,
}

/// One resource, resource template or prompt as a client of the gateway
/// sees it: the server's own definition (`Resource`, `ResourceTemplate`,
/// `Prompt` as JSON), its `name` prefixed with the server's when tools are
/// (a prompt is got by that name; a resource keeps its URI).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Offered {
    /// The wrapped server's name, if there are several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// Reading it taints a session under the private-data rule.
    #[serde(default)]
    pub private: bool,
    /// The definition as offered.
    pub definition: serde_json::Value,
}

/// One wrapped tool as the sandbox and the model see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolEntry {
    /// The Python name the code calls.
    pub name: String,
    /// The name the wrapped server lists.
    pub mcp_name: String,
    /// The wrapped server's name (from the config), if there are several.
    pub server: Option<String>,
    /// A readable Python stub: signature and docstring.
    pub stub: String,
    /// One line: the typed signature ([`Signature::line`]), two spaces,
    /// then the first line of the description.
    pub summary: String,
    /// Its labels as short marks for the names-only description
    /// (`private`, `approval`, `limited`, `denied`, comma-separated); empty
    /// when it has none.
    #[serde(default)]
    pub mark: String,
    /// The text `search_tools` ranks it by.
    #[serde(default)]
    pub search: SearchText,
    /// It may see private data: after a call to it, a session may call only
    /// private tools.
    #[serde(default)]
    pub private: bool,
    /// The tool as a client calling it directly sees it (`--expose-tools`):
    /// present only when the catalog was asked for with
    /// [`CatalogRequest::direct`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direct: Option<DirectTool>,
    /// Its parameters as the sandbox checks a call's argument names
    /// against them before sending it (misspelt and missing names).
    #[serde(default)]
    pub signature: Signature,
}

/// A tool's parameters, for the sandbox's own checks of a call's argument
/// names (the bridge still validates the arguments against the schema).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Signature {
    /// The typed one-line signature with the tool's labels, without its
    /// description: `fs__read_text_file(path: str, head?: int) -> {content:
    /// str}` (the notation the `run_python` description explains).
    #[serde(default)]
    pub line: String,
    /// The declared parameters, in the schema's order.
    #[serde(default)]
    pub params: Vec<Param>,
    /// The schema takes names it does not declare (`additionalProperties`
    /// set to true or to a schema, or `patternProperties`), or declares
    /// no object at all: an undeclared name is then not an error.
    #[serde(default)]
    pub open: bool,
}

/// One declared parameter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Param {
    /// Its name in the schema.
    pub name: String,
    /// Its type as the stub shows it (`str`, `list[int]`, ...).
    #[serde(rename = "type")]
    pub type_: String,
    /// The schema requires it.
    #[serde(default)]
    pub required: bool,
}

/// One wrapped tool as `tools/list` offers it to a client that calls it
/// directly: the server's own definition, under the tool's Python name,
/// its policy and private labels leading its description.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DirectTool {
    /// Its title, if the server gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Its labels (`[private]`, `[needs approval]`, `[2 per minute]`), then
    /// the server's description, cut like the stub's.
    pub description: String,
    /// The server's input schema.
    pub input_schema: serde_json::Value,
    /// The server's output schema, if it declares one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<serde_json::Value>,
    /// The server's annotations (hints), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<serde_json::Value>,
}

/// The text of one tool that `search_tools` ranks it by, field by field (a
/// word in the name weighs more than one in a parameter's description).
/// Built by the bridge from what the server listed, bounded like the stub.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchText {
    /// The tool's name as its server lists it (without the server prefix).
    #[serde(default)]
    pub name: String,
    /// Its server's name, when its Python name carries it as a prefix.
    #[serde(default)]
    pub server: String,
    /// Its title (`title`, else `annotations.title`), if it has one.
    #[serde(default)]
    pub title: String,
    /// Its description, cut as in the stub.
    #[serde(default)]
    pub description: String,
    /// Its parameters' names, one per line.
    #[serde(default)]
    pub params: String,
    /// Its parameters' own descriptions, one per line.
    #[serde(default)]
    pub param_text: String,
    /// The names and descriptions of the fields of its result (from its
    /// `outputSchema`), one per line.
    #[serde(default)]
    pub output: String,
}

impl SearchText {
    /// The tool's text as a sentence encoder reads it (search by meaning):
    /// its name's words, title, description and parameters' descriptions.
    pub fn for_meaning(&self) -> String {
        let name = self.name.replace('_', " ");
        [name.as_str(), &self.title, &self.description, &self.param_text]
            .into_iter()
            .filter(|part| !part.is_empty())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// What the sandbox gets of one tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolStub {
    /// The Python name.
    pub name: String,
    /// Its stub, shown by `TOOLS[name]`.
    pub stub: String,
    /// Its one-line summary, which `search_tools` returns with its name.
    #[serde(default)]
    pub summary: String,
    /// The text `search_tools` ranks it by.
    #[serde(default)]
    pub search: SearchText,
    /// Its parameters, for the sandbox's did-you-mean checks.
    #[serde(default)]
    pub signature: Signature,
}

impl From<&ToolEntry> for ToolStub {
    /// What a cell carries of a catalog entry: everything `TOOLS` and
    /// `search_tools` need, nothing about the server.
    fn from(entry: &ToolEntry) -> Self {
        Self {
            name: entry.name.clone(),
            stub: entry.stub.clone(),
            summary: entry.summary.clone(),
            search: entry.search.clone(),
            signature: entry.signature.clone(),
        }
    }
}

impl ToolEntry {
    /// The name a client calling it directly (`--expose-tools`) gives it:
    /// the server's own name for it, prefixed `<server>__` only where
    /// several servers are wrapped.
    pub fn gateway_name(&self) -> String {
        match &self.server {
            Some(server) => format!("{server}__{}", self.mcp_name),
            None => self.mcp_name.clone(),
        }
    }
}

impl Catalog {
    /// How long a call of a client with `link` may wait for answers on top
    /// of its own timeout: a person's approval, and a wrapped server's
    /// questions when the client can be asked.
    pub fn answer_wait_ms(&self, link: Option<&ClientLink>) -> u64 {
        if link.is_some_and(ClientLink::can_be_asked) {
            self.approval_timeout_ms.max(self.ask_timeout_ms)
        } else {
            self.approval_timeout_ms
        }
    }
}
