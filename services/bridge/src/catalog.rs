//! The tool catalog: which wrapped tools the sandbox gets, under which
//! Python names, with which stubs and argument checkers.
//!
//! Built once at startup from each server's `tools/list`, the allowlist and
//! the schemas. Tools whose schema cannot be checked are left out with a
//! warning; two kept tools that would get one Python name stop startup.

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
}

impl From<&rmcp::model::Tool> for ListedTool {
    fn from(t: &rmcp::model::Tool) -> Self {
        Self {
            name: t.name.to_string(),
            description: t.description.as_ref().map(|d| d.to_string()),
            input_schema: Value::Object((*t.input_schema).clone()),
        }
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
    /// Its compiled input schema.
    pub checker: ArgumentChecker,
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
            for tool in &server.tools {
                let base = python_name(&tool.name);
                let name =
                    if server.prefixed { python_name(&format!("{}__{}", server.server, tool.name)) } else { base };
                if !keep(&tool.name) {
                    catalog.not_kept.insert(name, server.server.clone());
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
                let text = ToolText {
                    name: &name,
                    description: tool.description.as_deref(),
                    schema: &tool.input_schema,
                    labels: &[],
                };
                catalog.by_name.insert(name.clone(), catalog.tools.len());
                catalog.tools.push(CatalogTool {
                    stub: stubs::stub(&text, &limits.stubs),
                    summary: stubs::summary(&text, &limits.stubs),
                    name,
                    mcp_name: tool.name.clone(),
                    server: index,
                    server_name: server.server.clone(),
                    checker,
                });
            }
        }
        Ok(catalog)
    }

    /// The kept tools, in listing order.
    pub fn tools(&self) -> &[CatalogTool] {
        &self.tools
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

    /// The tools left out for their schema.
    pub fn left_out(&self) -> &[LeftOut] {
        &self.left_out
    }
}

/// Check every allowlist name against the server's tools (server names
/// first, then Python names) and return a predicate over server names.
fn resolve_allow(server: &ServerTools) -> Result<impl Fn(&str) -> bool + '_, BridgeError> {
    let mut kept: Option<Vec<&str>> = None;
    if let Some(allow) = &server.allow {
        let mut names = Vec::new();
        for wanted in allow {
            let found = server.tools.iter().find(|t| &t.name == wanted).or_else(|| {
                let mut by_python = server.tools.iter().filter(|t| &python_name(&t.name) == wanted);
                match (by_python.next(), by_python.next()) {
                    (Some(t), None) => Some(t),
                    _ => None,
                }
            });
            match found {
                Some(t) => names.push(t.name.as_str()),
                None => {
                    let mut listed: Vec<&str> = server.tools.iter().map(|t| t.name.as_str()).take(20).collect();
                    if server.tools.len() > 20 {
                        listed.push("...");
                    }
                    return Err(BridgeError::UnknownAllowed {
                        server: server.server.clone(),
                        name: wanted.clone(),
                        listed: listed.join(", "),
                    });
                }
            }
        }
        kept = Some(names);
    }
    Ok(move |name: &str| kept.as_ref().is_none_or(|k| k.contains(&name)))
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
        }
    }

    fn one(tools: Vec<ListedTool>, allow: Option<Vec<&str>>) -> Result<Catalog, BridgeError> {
        Catalog::build(
            &[ServerTools {
                server: "s".into(),
                prefixed: false,
                tools,
                allow: allow.map(|a| a.into_iter().map(String::from).collect()),
            }],
            &CatalogLimits::default(),
        )
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

    #[test]
    fn several_servers_prefix_their_names() {
        let c = Catalog::build(
            &[
                ServerTools { server: "notes".into(), prefixed: true, tools: vec![tool("search")], allow: None },
                ServerTools { server: "tracker".into(), prefixed: true, tools: vec![tool("search")], allow: None },
            ],
            &CatalogLimits::default(),
        )
        .unwrap();
        assert!(c.get("notes__search").is_some());
        assert_eq!(c.get("tracker__search").unwrap().server, 1);
    }
}
