//! The tool catalog: which wrapped tools the sandbox gets, under which
//! Python names, with which stubs and argument checkers.
//!
//! Built once at startup from each server's `tools/list`, the allowlist and
//! the schemas. Tools whose schema cannot be checked are left out with a
//! warning; two kept tools that would get one Python name stop startup.
//!
//! It also resolves the private labels (`--private`): each must name a tool
//! the catalog keeps, else startup stops naming the label. A private tool
//! carries [`stubs::PRIVATE_LABEL`] in its stub and summary line.

use std::collections::HashMap;

use serde_json::Value;

use crate::BridgeError;
use crate::naming::python_name;
use crate::schema::ArgumentChecker;
use crate::stubs::{self, StubLimits, ToolText};

/// A tool as a server listed it.
#[derive(Debug, Clone)]
pub struct ListedTool {
    /// The name the server lists.
    pub name: String,
    /// Its description.
    pub description: Option<String>,
    /// Its input schema.
    pub input_schema: Value,
    /// Its output schema, if it declares one.
    pub output_schema: Option<Value>,
    /// Its title (`title`, else `annotations.title`), if any.
    pub title: Option<String>,
    /// Its annotations as the server sent them, if any.
    pub annotations: Option<Value>,
}

impl From<&rmcp::model::Tool> for ListedTool {
    fn from(t: &rmcp::model::Tool) -> Self {
        Self {
            name: t.name.to_string(),
            description: t.description.as_ref().map(|d| d.to_string()),
            input_schema: Value::Object((*t.input_schema).clone()),
            output_schema: t.output_schema.as_ref().map(|o| Value::Object((**o).clone())),
            title: t.title.clone().or_else(|| t.annotations.as_ref().and_then(|a| a.title.clone())),
            annotations: t.annotations.as_ref().and_then(|a| serde_json::to_value(a).ok()),
        }
    }
}

/// A policy's label of one tool: the text its stub and summary line show,
/// and the short mark the names-only description shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolLabel {
    /// `[denied: reason]`, `[needs approval]`, `[2 per minute]`.
    pub text: String,
    /// `denied`, `approval`, `limited`, or `approval,limited`.
    pub mark: String,
}

impl ToolLabel {
    /// The label of a policy verdict, if it has one.
    pub fn of(verdict: &crate::policy::Verdict) -> Option<Self> {
        use crate::policy::Verdict;
        let mark = match verdict {
            Verdict::Allow { .. } => return None,
            Verdict::Deny { .. } => "denied",
            Verdict::Approve { limits, .. } if limits.is_empty() => "approval",
            Verdict::Approve { .. } => "approval,limited",
            Verdict::Limited { .. } => "limited",
        };
        Some(Self { text: verdict.label()?, mark: mark.to_string() })
    }
}

/// One server's tools and what to keep of them.
#[derive(Debug, Clone)]
pub struct ServerTools {
    /// The server's name.
    pub server: String,
    /// Prefix Python names with `<server>__` (when there are several servers).
    pub prefixed: bool,
    /// What `tools/list` returned.
    pub tools: Vec<ListedTool>,
    /// Tool names to keep (server names or Python names); `None` keeps all.
    pub allow: Option<Vec<String>>,
    /// Tools that may see private data (server names or Python names); each
    /// must be kept.
    pub private: Vec<String>,
    /// Where `allow` and `private` were written, for errors.
    pub origin: crate::Origin,
    /// Policy labels by the server's tool name (`[denied: ...]`,
    /// `[2 per minute]`), shown next to `[private]` in stubs and summaries,
    /// and as a short mark in the names-only description.
    pub labels: HashMap<String, ToolLabel>,
    /// Tools a policy denies outright, by the server's tool name: not
    /// offered (no stub), and a call naming one is refused with its rule.
    pub withheld: HashMap<String, Denial>,
    /// Result shapes learned from earlier calls, by the server's tool name
    /// (see [`crate::shapes`]); a private tool's is never shown.
    pub observed: HashMap<String, crate::shapes::Shape>,
    /// Every caller acts at the server as one account (an `oauth` block
    /// per deployment): each tool's description says so
    /// ([`SHARED_ACCOUNT_LABEL`]).
    pub shared_account: bool,
}

/// The label of a tool whose server every caller reaches as one shared
/// account (an `oauth` block `"per": "deployment"`), so the model and the
/// person know what the upstream sees.
pub const SHARED_ACCOUNT_LABEL: &str = "[acts upstream as one shared account, not as the caller]";

/// Why a policy denies a tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// The deciding rule.
    pub rule: crate::policy::RuleSource,
    /// Its reason.
    pub reason: String,
}

/// A tool the policy withholds, as a call names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WithheldTool {
    /// Index of its server.
    pub server: usize,
    /// The name the server lists.
    pub mcp_name: String,
    /// Why.
    pub denial: Denial,
}

/// A kept tool.
#[derive(Debug)]
pub struct CatalogTool {
    /// The Python name.
    pub name: String,
    /// The name the server lists.
    pub mcp_name: String,
    /// Index of its server.
    pub server: usize,
    /// Name of its server.
    pub server_name: String,
    /// Its stub.
    pub stub: String,
    /// Its summary line.
    pub summary: String,
    /// Its labels as short marks (`private`, `approval`, `limited`,
    /// `denied`, comma-separated), or empty.
    pub mark: String,
    /// The text `search_tools` ranks it by.
    pub search: code_mode_proto::SearchText,
    /// Its compiled input schema.
    pub checker: ArgumentChecker,
    /// It may see private data (`--private`).
    pub private: bool,
    /// Its definition for clients that call it directly (`--expose-tools`).
    pub direct: code_mode_proto::DirectTool,
    /// Its typed signature and parameters.
    pub signature: code_mode_proto::Signature,
    /// It declares an `outputSchema` (a learned shape then only marks
    /// strings that held JSON).
    pub declares_output: bool,
}

/// A tool the catalog left out, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftOut {
    /// The server's name.
    pub server: String,
    /// The tool's name on the server.
    pub tool: String,
    /// Why.
    pub reason: String,
}

/// Every kept tool, by Python name.
#[derive(Debug, Default)]
pub struct Catalog {
    tools: Vec<CatalogTool>,
    by_name: HashMap<String, usize>,
    /// Python names of tools the server lists that are not kept.
    not_kept: HashMap<String, String>,
    /// Python names of tools a policy denies outright (not offered).
    withheld: HashMap<String, WithheldTool>,
    left_out: Vec<LeftOut>,
}

/// Bounds used while building.
#[derive(Debug, Clone, Copy)]
pub struct CatalogLimits {
    /// Stub bounds.
    pub stubs: StubLimits,
    /// Deepest schema compiled.
    pub max_schema_depth: usize,
}

impl Default for CatalogLimits {
    fn default() -> Self {
        Self { stubs: StubLimits::default(), max_schema_depth: code_mode_core::defaults::MAX_SCHEMA_DEPTH }
    }
}

impl Catalog {
    /// Build the catalog from every server's listed tools.
    pub fn build(servers: &[ServerTools], limits: &CatalogLimits) -> Result<Self, BridgeError> {
        let mut catalog = Catalog::default();
        // Python name -> (server, tool) of the first kept tool that took it.
        let mut taken: HashMap<String, (String, String)> = HashMap::new();
        for (index, server) in servers.iter().enumerate() {
            let keep = resolve_allow(server)?;
            let private = resolve_private(server, &keep)?;
            for tool in &server.tools {
                let base = python_name(&tool.name);
                let name =
                    if server.prefixed { python_name(&format!("{}__{}", server.server, tool.name)) } else { base };
                if !keep(&tool.name) {
                    catalog.not_kept.insert(name, server.server.clone());
                    continue;
                }
                if let Some(denial) = server.withheld.get(&tool.name) {
                    let withheld = WithheldTool { server: index, mcp_name: tool.name.clone(), denial: denial.clone() };
                    catalog.withheld.insert(name, withheld);
                    continue;
                }
                if let Some((other_server, other_tool)) = taken.get(&name) {
                    return Err(BridgeError::NameClash {
                        python: name,
                        first: format!("{other_server}: {other_tool}"),
                        second: format!("{}: {}", server.server, tool.name),
                    });
                }
                taken.insert(name.clone(), (server.server.clone(), tool.name.clone()));
                let checker = match ArgumentChecker::compile(&tool.input_schema, limits.max_schema_depth) {
                    Ok(c) => c,
                    Err(problem) if private.contains(&tool.name.as_str()) => {
                        return Err(BridgeError::PrivateNotKept {
                            at: server.origin.setting("private", &tool.name),
                            server: server.server.clone(),
                            name: tool.name.clone(),
                            why: format!("its schema cannot be checked ({problem}), so the tool is left out"),
                        });
                    }
                    Err(problem) => {
                        tracing::warn!(server = %server.server, tool = %tool.name, "tool left out: {problem}");
                        catalog.left_out.push(LeftOut {
                            server: server.server.clone(),
                            tool: tool.name.clone(),
                            reason: problem.to_string(),
                        });
                        continue;
                    }
                };
                let is_private = private.contains(&tool.name.as_str());
                let mut labels = if is_private { vec![stubs::PRIVATE_LABEL.to_string()] } else { Vec::new() };
                let mut marks = if is_private { vec!["private"] } else { Vec::new() };
                if let Some(label) = server.labels.get(&tool.name) {
                    labels.push(label.text.clone());
                    marks.push(&label.mark);
                }
                if server.shared_account {
                    labels.push(SHARED_ACCOUNT_LABEL.to_string());
                }
                let text = ToolText {
                    name: &name,
                    description: tool.description.as_deref(),
                    schema: &tool.input_schema,
                    output_schema: tool.output_schema.as_ref(),
                    labels: &labels,
                    observed: if is_private { None } else { server.observed.get(&tool.name) },
                };
                let prefix = server.prefixed.then_some(server.server.as_str());
                let direct = direct_tool(tool, &labels, &limits.stubs);
                let signature = stubs::signature(&text, &limits.stubs);
                catalog.by_name.insert(name.clone(), catalog.tools.len());
                catalog.tools.push(CatalogTool {
                    stub: stubs::stub(&text, &limits.stubs),
                    summary: stubs::summary(&text, &limits.stubs),
                    search: stubs::search_text(&text, &tool.name, prefix, tool.title.as_deref(), &limits.stubs),
                    mark: marks.join(","),
                    name,
                    mcp_name: tool.name.clone(),
                    server: index,
                    server_name: server.server.clone(),
                    checker,
                    private: is_private,
                    direct,
                    signature,
                    declares_output: tool.output_schema.is_some(),
                });
            }
        }
        Ok(catalog)
    }

    /// The kept tools, in listing order.
    pub fn tools(&self) -> &[CatalogTool] {
        &self.tools
    }

    /// The kept tools as the catalog message carries them to the frontend;
    /// `several`: name each tool's server (there is more than one);
    /// `direct`: with each tool's definition for direct calls.
    pub fn entries(&self, several: bool, direct: bool) -> Vec<code_mode_proto::ToolEntry> {
        self.tools
            .iter()
            .map(|t| code_mode_proto::ToolEntry {
                name: t.name.clone(),
                mcp_name: t.mcp_name.clone(),
                server: several.then(|| t.server_name.clone()),
                stub: t.stub.clone(),
                summary: t.summary.clone(),
                mark: t.mark.clone(),
                search: t.search.clone(),
                private: t.private,
                direct: direct.then(|| t.direct.clone()),
                signature: t.signature.clone(),
            })
            .collect()
    }

    /// A kept tool by Python name.
    pub fn get(&self, name: &str) -> Option<&CatalogTool> {
        self.by_name.get(name).map(|&i| &self.tools[i])
    }

    /// True when a server lists a tool by this Python name that the
    /// allowlist does not keep.
    pub fn is_not_kept(&self, name: &str) -> bool {
        self.not_kept.contains_key(name)
    }

    /// A tool the server lists that its policy denies outright and the
    /// catalog therefore does not offer, by Python name.
    pub fn withheld(&self, name: &str) -> Option<&WithheldTool> {
        self.withheld.get(name)
    }

    /// A withheld tool by the name a gateway client gives it (the server's
    /// own name, `<server>__` before it with several servers, as
    /// `tools/list` would offer it), `server_name` naming each server.
    pub fn withheld_as_offered(&self, name: &str, several: Option<&dyn Fn(usize) -> String>) -> Option<&WithheldTool> {
        self.withheld.values().find(|w| match several {
            Some(server_name) => name.strip_prefix(&format!("{}__", server_name(w.server))) == Some(&w.mcp_name),
            None => name == w.mcp_name,
        })
    }

    /// The Python names of the tools a policy withholds.
    pub fn withheld_names(&self) -> impl Iterator<Item = &str> {
        self.withheld.keys().map(String::as_str)
    }

    /// The tools left out for their schema.
    pub fn left_out(&self) -> &[LeftOut] {
        &self.left_out
    }

    /// The Python names of the private tools, in listing order.
    pub fn private_tools(&self) -> impl Iterator<Item = &str> {
        self.tools.iter().filter(|t| t.private).map(|t| t.name.as_str())
    }

    /// True when at least one kept tool is private: only then does the
    /// private-data rule judge calls.
    pub fn has_private(&self) -> bool {
        self.tools.iter().any(|t| t.private)
    }
}

/// A kept tool as a client calling it directly sees it: the server's
/// schemas, title and annotations, and its description led by its labels
/// (so a client that never sees the stubs still sees them) and cut as the
/// stub's is.
fn direct_tool(tool: &ListedTool, labels: &[String], limits: &StubLimits) -> code_mode_proto::DirectTool {
    let description = stubs::cut_bytes(tool.description.as_deref().unwrap_or(""), limits.max_description);
    let description = match labels.join(" ") {
        labels if labels.is_empty() => description,
        labels if description.is_empty() => labels,
        labels => format!("{labels} {description}"),
    };
    code_mode_proto::DirectTool {
        title: tool.title.clone(),
        description,
        input_schema: tool.input_schema.clone(),
        output_schema: tool.output_schema.clone(),
        annotations: tool.annotations.clone(),
    }
}

/// The listed tool `wanted` names: its server name, else the Python name of
/// exactly one listed tool, else (when names are prefixed) the name the code
/// calls it by, `<server>__<tool>`.
fn find_listed<'a>(server: &'a ServerTools, wanted: &str) -> Option<&'a ListedTool> {
    server
        .tools
        .iter()
        .find(|t| t.name == wanted)
        .or_else(|| unique(server.tools.iter().filter(|t| python_name(&t.name) == wanted)))
        // The name the code calls (`fs__read_file`), when names are prefixed.
        .or_else(|| {
            let served = |t: &&ListedTool| python_name(&format!("{}__{}", server.server, t.name)) == wanted;
            if server.prefixed { unique(server.tools.iter().filter(served)) } else { None }
        })
}

/// The only item, or `None` when there are none or several.
fn unique<T>(mut found: impl Iterator<Item = T>) -> Option<T> {
    match (found.next(), found.next()) {
        (Some(t), None) => Some(t),
        _ => None,
    }
}

/// Up to 20 of the server's tool names, for an error message.
fn listed_names(server: &ServerTools) -> String {
    let mut listed: Vec<&str> = server.tools.iter().map(|t| t.name.as_str()).take(20).collect();
    if server.tools.len() > 20 {
        listed.push("...");
    }
    listed.join(", ")
}

/// Check every allowlist name against the server's tools (server names
/// first, then Python names) and return a predicate over server names.
fn resolve_allow(server: &ServerTools) -> Result<impl Fn(&str) -> bool + '_, BridgeError> {
    let mut kept: Option<Vec<&str>> = None;
    if let Some(allow) = &server.allow {
        let mut names = Vec::new();
        for wanted in allow {
            match find_listed(server, wanted) {
                Some(t) => names.push(t.name.as_str()),
                None => {
                    return Err(BridgeError::UnknownAllowed {
                        at: server.origin.setting("allow", wanted),
                        server: server.server.clone(),
                        name: wanted.clone(),
                        listed: listed_names(server),
                    });
                }
            }
        }
        kept = Some(names);
    }
    Ok(move |name: &str| kept.as_ref().is_none_or(|k| k.contains(&name)))
}

/// Check every private label against the server's tools (server names
/// first, then Python names) and the allowlist; return the server names of
/// the private tools. (A private tool left out for its schema is caught
/// while the catalog is built.)
fn resolve_private<'a>(server: &'a ServerTools, keep: &impl Fn(&str) -> bool) -> Result<Vec<&'a str>, BridgeError> {
    let mut names = Vec::new();
    for wanted in &server.private {
        let Some(tool) = find_listed(server, wanted) else {
            return Err(BridgeError::UnknownPrivate {
                at: server.origin.setting("private", wanted),
                server: server.server.clone(),
                name: wanted.clone(),
                listed: listed_names(server),
            });
        };
        if !keep(&tool.name) {
            let allow = match server.origin {
                crate::Origin::Flags => "--allow",
                crate::Origin::Entry { .. } => "\"allow\"",
            };
            return Err(BridgeError::PrivateNotKept {
                at: server.origin.setting("private", wanted),
                server: server.server.clone(),
                name: wanted.clone(),
                why: format!("it is not on the allowlist ({allow}), so the tool is not kept"),
            });
        }
        names.push(tool.name.as_str());
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str) -> ListedTool {
        ListedTool {
            name: name.into(),
            description: Some(format!("The {name} tool.")),
            input_schema: json!({"type": "object", "properties": {"x": {"type": "integer"}}}),
            output_schema: None,
            title: None,
            annotations: None,
        }
    }

    fn one(tools: Vec<ListedTool>, allow: Option<Vec<&str>>) -> Result<Catalog, BridgeError> {
        with_private(tools, allow, &[])
    }

    #[test]
    fn two_tools_with_one_python_name_stop_startup_naming_both() {
        let err = one(vec![tool("a-b"), tool("a_b")], None).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, BridgeError::NameClash { .. }));
        assert!(msg.contains("a-b") && msg.contains("a_b"), "{msg}");
    }

    #[test]
    fn the_allowlist_accepts_server_names_and_python_names() {
        let c = one(vec![tool("get-weather"), tool("add"), tool("echo")], Some(vec!["get_weather", "add"])).unwrap();
        let names: Vec<&str> = c.tools().iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["get_weather", "add"]);
        assert!(c.is_not_kept("echo"));
        assert!(!c.is_not_kept("nope"));
    }

    #[test]
    fn an_allowlist_name_the_server_does_not_list_stops_startup() {
        let err = one(vec![tool("add")], Some(vec!["ad"])).unwrap_err();
        assert!(err.to_string().contains("ad"), "{err}");
        assert!(matches!(err, BridgeError::UnknownAllowed { .. }));
    }

    #[test]
    fn a_schema_that_cannot_be_checked_leaves_its_tool_out() {
        let mut bad = tool("bad");
        bad.input_schema = json!({"type": "object", "properties": {"a": {"type": "no-such-type"}}});
        let c = one(vec![bad, tool("good")], None).unwrap();
        assert!(c.get("bad").is_none());
        assert!(c.get("good").is_some());
        assert_eq!(c.left_out().len(), 1);
        assert_eq!(c.left_out()[0].tool, "bad");
    }

    /// A server's tools with no allowlist, labels or policy.
    fn server(name: &str, prefixed: bool, tools: Vec<ListedTool>) -> ServerTools {
        ServerTools {
            server: name.into(),
            prefixed,
            tools,
            allow: None,
            private: vec![],
            origin: crate::Origin::Flags,
            labels: HashMap::new(),
            withheld: HashMap::new(),
            observed: HashMap::new(),
            shared_account: false,
        }
    }

    #[test]
    fn the_tools_of_a_server_shared_as_one_account_say_so_in_the_stub_the_summary_and_the_direct_description() {
        let shared = ServerTools { shared_account: true, ..server("tracker", false, vec![tool("whoami")]) };
        let own = server("notes", true, vec![tool("whoami")]);
        let c = Catalog::build(&[shared], &CatalogLimits::default()).unwrap();
        let t = c.get("whoami").unwrap();
        for text in [&t.stub, &t.summary, &t.direct.description] {
            assert!(text.contains(SHARED_ACCOUNT_LABEL), "{text}");
        }
        let c = Catalog::build(&[own], &CatalogLimits::default()).unwrap();
        let t = c.get("notes__whoami").unwrap();
        for text in [&t.stub, &t.summary, &t.direct.description] {
            assert!(!text.contains("shared account"), "{text}");
        }
    }

    fn with_private(
        tools: Vec<ListedTool>,
        allow: Option<Vec<&str>>,
        private: &[&str],
    ) -> Result<Catalog, BridgeError> {
        let server = ServerTools {
            allow: allow.map(|a| a.into_iter().map(String::from).collect()),
            private: private.iter().map(|p| p.to_string()).collect(),
            ..server("s", false, tools)
        };
        Catalog::build(&[server], &CatalogLimits::default())
    }

    #[test]
    fn private_labels_accept_server_names_and_python_names_and_mark_the_stub_and_summary() {
        let c =
            with_private(vec![tool("read-mail"), tool("send"), tool("notes")], None, &["read_mail", "notes"]).unwrap();
        let private: Vec<&str> = c.private_tools().collect();
        assert_eq!(private, ["read_mail", "notes"]);
        assert!(c.has_private());
        let mail = c.get("read_mail").unwrap();
        assert!(mail.stub.contains("[private]") && mail.summary.contains(") [private]  "), "{}", mail.summary);
        let send = c.get("send").unwrap();
        assert!(!send.private && !send.stub.contains("[private]") && !send.summary.contains("[private]"));
        assert!(!with_private(vec![tool("a")], None, &[]).unwrap().has_private());
    }

    #[test]
    fn a_private_label_on_a_tool_the_server_does_not_list_stops_startup_naming_it() {
        let err = with_private(vec![tool("read_mail")], None, &["read_mial"]).unwrap_err();
        assert!(matches!(err, BridgeError::UnknownPrivate { .. }), "{err:?}");
        assert!(err.to_string().contains("--private read_mial"), "{err}");
    }

    #[test]
    fn a_private_label_on_a_tool_the_allowlist_drops_stops_startup_naming_it() {
        let err = with_private(vec![tool("read_mail"), tool("send")], Some(vec!["send"]), &["read_mail"]).unwrap_err();
        assert!(matches!(err, BridgeError::PrivateNotKept { .. }), "{err:?}");
        let msg = err.to_string();
        assert!(msg.contains("--private read_mail") && msg.contains("allowlist"), "{msg}");
    }

    #[test]
    fn a_private_label_on_a_tool_left_out_for_its_schema_stops_startup_naming_it() {
        let mut bad = tool("bad");
        bad.input_schema = json!({"type": "object", "properties": {"a": {"type": "no-such-type"}}});
        let err = with_private(vec![bad, tool("good")], None, &["bad"]).unwrap_err();
        assert!(matches!(err, BridgeError::PrivateNotKept { .. }), "{err:?}");
        let msg = err.to_string();
        assert!(msg.contains("--private bad") && msg.contains("schema"), "{msg}");
    }

    #[test]
    fn several_servers_prefix_their_names() {
        let servers = [server("notes", true, vec![tool("search")]), server("tracker", true, vec![tool("search")])];
        let c = Catalog::build(&servers, &CatalogLimits::default()).unwrap();
        assert!(c.get("notes__search").is_some());
        assert_eq!(c.get("tracker__search").unwrap().server, 1);
    }
}
