//! The tool catalog: every tool's MCP definition (name, description, hand-written
//! JSON schema) and what the server does when it is called.

use std::{collections::HashMap, sync::Arc};

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};

/// JSON Schema dialect some real servers announce in their input schemas.
const DRAFT_07: &str = "http://json-schema.org/draft-07/schema#";

/// Tools whose only job is to have a name that is awkward to turn into code.
pub const AWKWARD_NAMES: &[&str] = &[
    "get-weather",
    "class",
    "print",
    "__init__",
    "9lives",
    "ToolError",
    "search_tools",
    "TOOLS",
    "with.dots",
    "naïve",
];

/// Words cycled through by the `--many` tool descriptions.
pub const MANY_WORDS: &[&str] =
    &["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"];

/// Which optional tool groups to include, straight from the command line.
#[derive(Debug, Clone, Default)]
pub struct CatalogOptions {
    pub many: usize,
    /// Extra tools by name (`--tool`): each echoes its arguments.
    pub named: Vec<String>,
    pub long_descriptions: bool,
    pub clash: bool,
    pub deep_schema: bool,
    pub deep_depth: usize,
    /// Served over HTTP: add `get_header`.
    pub http: bool,
    /// Add `add_tool`, which adds tools at runtime.
    pub add_tool: bool,
    /// Offer resources, a template, a prompt and completions, and add
    /// `ask_model`, which asks the client's model (sampling), and
    /// `ask_person`, which asks its person (elicitation).
    pub resources: bool,
    /// Add `report`, which declares no output schema and answers with
    /// nested JSON text.
    pub reports: bool,
    /// An OAuth resource server (`--oauth-issuer`): add `whoami`.
    pub whoami: bool,
}

/// What a tool does when called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behavior {
    Add,
    Echo,
    Sleep,
    Huge,
    Fail,
    ProtocolError,
    Crash,
    GetEnv,
    /// Answers with a header of the HTTP request that carried the call.
    GetHeader,
    Count,
    /// Adds a tool named by the `name` argument (behaving as [`Behavior::Ok`]).
    AddTool,
    /// Answers with the text `ok <tool name>`.
    Ok,
    /// Answers with the received arguments as JSON text.
    EchoArguments,
    /// A `--many` tool: answers `ok <tool name> x=<x as JSON>`.
    Extra,
    /// Asks the client's model (`sampling/createMessage`) with the `prompt`
    /// argument and answers with what it wrote.
    AskModel,
    /// Asks the client's person (`elicitation/create`, a form with one
    /// `name` field) the `question` argument and answers with the action
    /// and content of the answer.
    AskPerson,
    /// Adds a resource and a prompt named by the `name` argument and tells
    /// the client that both lists changed.
    Publish,
    /// Answers with nested JSON text built around its `owner` and `secret`
    /// arguments: a repository, its issues, counts by mail address, and
    /// `raw`, a string holding JSON text.
    Report,
    /// Answers with the subject, scopes and times of the access token that
    /// carried the call.
    Whoami,
}

/// The tools in the order `tools/list` returns them, and how to run each.
#[derive(Debug, Default)]
pub struct Catalog {
    pub tools: Vec<Tool>,
    behaviors: HashMap<String, Behavior>,
}

impl Catalog {
    pub fn build(options: &CatalogOptions) -> Self {
        let mut catalog = Catalog::default();
        catalog.add_core_tools(options.long_descriptions);
        catalog.add_awkward_tools();
        if options.long_descriptions {
            catalog.push(
                "long_desc_tool",
                filled(
                    "A tool with a very long description. ",
                    "This sentence is repeated to make the description fifty thousand characters long. ",
                    50_000,
                ),
                json!({"type": "object", "properties": {}}),
                Behavior::Ok,
            );
        }
        if options.clash {
            for name in ["a-b", "a_b"] {
                catalog.push(
                    name,
                    format!("Clash test tool `{name}`: `a-b` and `a_b` map to the same identifier."),
                    json!({"type": "object", "properties": {}}),
                    Behavior::Ok,
                );
            }
        }
        if options.http {
            catalog.push(
                "get_header",
                "Return the value of a header of the HTTP request that carried this call, or \"<unset>\".",
                // Its argument is mirrored into the request's `Mcp-Param-Name`
                // header by a client of the 2026-07-28 revision (SEP-2243).
                json!({
                    "type": "object",
                    "properties": {"name": {"type": "string", "x-mcp-header": "Name"}},
                    "required": ["name"]
                }),
                Behavior::GetHeader,
            );
        }
        if options.whoami {
            catalog.push(
                "whoami",
                "Return the subject, scopes, issue and expiry times of the access token that carried this call.",
                json!({"type": "object", "properties": {}}),
                Behavior::Whoami,
            );
        }
        if options.add_tool {
            catalog.push(
                "add_tool",
                "Add a tool with the given name (it answers \"ok <name>\") and tell the client that the tool list changed.",
                json!({
                    "type": "object",
                    "properties": {"name": {"type": "string"}},
                    "required": ["name"]
                }),
                Behavior::AddTool,
            );
        }
        if options.deep_schema {
            catalog.add_deep_schema_tools(options.deep_depth);
        }
        if options.resources {
            catalog.push(
                "ask_model",
                "Ask the client's model to answer the prompt (sampling), after `delay` seconds, and return what it wrote \
                 (or, with `withdraw_after`, cancel the question when no answer came within that many seconds).",
                json!({
                    "type": "object",
                    "properties": {"prompt": {"type": "string"}, "delay": {"type": "number"}, "withdraw_after": {"type": "number"}},
                    "required": ["prompt"]
                }),
                Behavior::AskModel,
            );
            catalog.push(
                "ask_person",
                "Ask the client's person the question (elicitation, a form with one `name` field) and return the \
                 answer's action and content.",
                json!({
                    "type": "object",
                    "properties": {"question": {"type": "string"}},
                    "required": ["question"]
                }),
                Behavior::AskPerson,
            );
            catalog.push(
                "publish",
                "Add a resource and a prompt with this name and tell the client that both lists changed.",
                json!({
                    "type": "object",
                    "properties": {"name": {"type": "string"}},
                    "required": ["name"]
                }),
                Behavior::Publish,
            );
        }
        if options.reports {
            catalog.push(
                "report",
                "Report on a repository: its details, open issues and who filed them.",
                json!({
                    "type": "object",
                    "properties": {"owner": {"type": "string"}, "secret": {"type": "string"}},
                    "required": ["owner"]
                }),
                Behavior::Report,
            );
        }
        for name in &options.named {
            catalog.push(
                name.clone(),
                format!("A tool named {name} for policy tests: answers with its arguments as JSON."),
                json!({"type": "object", "properties": {"path": {"type": "string"}, "verbose": {"type": "boolean"}}}),
                Behavior::EchoArguments,
            );
        }
        for k in 0..options.many {
            let word = MANY_WORDS[k % MANY_WORDS.len()];
            catalog.push(
                format!("extra_tool_{k:04}"),
                format!("Extra tool number {k} for catalog tests about {word}"),
                json!({"type": "object", "properties": {"x": {"type": "integer"}}}),
                Behavior::Extra,
            );
        }
        catalog
    }

    pub fn behavior(&self, name: &str) -> Option<Behavior> {
        self.behaviors.get(name).copied()
    }

    pub fn tool(&self, name: &str) -> Option<&Tool> {
        self.tools.iter().find(|tool| tool.name == name)
    }

    /// Add a tool at runtime (`add_tool`): no arguments, answers `ok <name>`.
    pub fn add_runtime_tool(&mut self, name: &str) -> Result<(), String> {
        if self.behaviors.contains_key(name) {
            return Err(format!("there is already a tool named {name}"));
        }
        self.push(
            name,
            format!("Added at runtime by add_tool. Answers \"ok {name}\"."),
            json!({"type": "object", "properties": {}}),
            Behavior::Ok,
        );
        Ok(())
    }

    fn push(
        &mut self,
        name: impl Into<String>,
        description: impl Into<String>,
        schema: Value,
        behavior: Behavior,
    ) -> &mut Tool {
        let name = name.into();
        let previous = self.behaviors.insert(name.clone(), behavior);
        assert!(previous.is_none(), "tool {name} defined twice");
        self.tools.push(Tool::new(name, description.into(), object(schema)));
        self.tools.last_mut().expect("just pushed")
    }

    fn annotate(&mut self, name: &str, annotations: ToolAnnotations) {
        let tool = self.tools.iter_mut().find(|t| t.name == name).expect("the tool is defined");
        tool.annotations = Some(annotations);
    }

    fn add_core_tools(&mut self, long_descriptions: bool) {
        self.push(
            "add",
            "Add two integers.",
            json!({
                "$schema": DRAFT_07,
                "type": "object",
                "properties": {
                    "a": {"type": "integer", "description": "First addend."},
                    "b": {"type": "integer", "description": "Second addend."}
                },
                "required": ["a", "b"]
            }),
            Behavior::Add,
        )
        .output_schema = Some(object(json!({
            "type": "object",
            "properties": {"sum": {"type": "integer"}},
            "required": ["sum"]
        })));
        // Annotations for the policies' category rules: `add` and `echo`
        // only read, `count` changes its counter but is additive; every
        // other core tool is unannotated (destructive and open-world by the
        // specification's defaults).
        self.annotate("add", ToolAnnotations::new().read_only(true).open_world(false));

        let echo_description = if long_descriptions {
            filled("Echo text back. ", "This sentence pads the echo description to ten thousand characters. ", 10_000)
        } else {
            "Echo text back.".to_owned()
        };
        self.push(
            "echo",
            echo_description,
            json!({
                "$schema": DRAFT_07,
                "type": "object",
                "properties": {
                    "text": {"type": "string", "description": "The text to echo."},
                    "repeat": {
                        "type": "integer",
                        "minimum": 0,
                        "default": 1,
                        "description": "How many times to repeat the text."
                    }
                },
                "required": ["text"]
            }),
            Behavior::Echo,
        );
        self.annotate("echo", ToolAnnotations::new().read_only(true).open_world(false));
        self.push(
            "sleep",
            "Sleep for the given number of seconds, then answer \"slept\".",
            json!({
                "type": "object",
                "properties": {"seconds": {"type": "number", "minimum": 0}},
                "required": ["seconds"]
            }),
            Behavior::Sleep,
        );
        self.push(
            "huge",
            "Return a text result of the given number of 'x' characters.",
            json!({
                "type": "object",
                "properties": {"bytes": {"type": "integer", "minimum": 0}},
                "required": ["bytes"]
            }),
            Behavior::Huge,
        );
        self.push(
            "fail",
            "Return a tool result with isError true and the message as text.",
            json!({
                "type": "object",
                "properties": {"message": {"type": "string"}},
                "required": ["message"]
            }),
            Behavior::Fail,
        );
        self.push(
            "protocol_error",
            "Answer with a JSON-RPC internal error whose message leaks host details.",
            json!({"type": "object", "properties": {}}),
            Behavior::ProtocolError,
        );
        self.push(
            "crash",
            "Exit the server process immediately with code 3, without answering.",
            json!({"type": "object", "properties": {}}),
            Behavior::Crash,
        );
        self.push(
            "get_env",
            "Return the value of an environment variable in the server process, or \"<unset>\".",
            json!({
                "$schema": DRAFT_07,
                "type": "object",
                "properties": {"name": {"type": "string"}},
                "required": ["name"]
            }),
            Behavior::GetEnv,
        );
        self.push(
            "count",
            "Return how many tools/call requests this server process has received, this one included.",
            json!({"type": "object", "properties": {}}),
            Behavior::Count,
        );
        self.annotate("count", ToolAnnotations::new().read_only(false).destructive(false).open_world(false));
    }

    fn add_awkward_tools(&mut self) {
        for &name in AWKWARD_NAMES {
            // A few take a small schema, the rest take no arguments.
            let schema = match name {
                "get-weather" => json!({
                    "type": "object",
                    "properties": {"city": {"type": "string"}}
                }),
                "print" => json!({
                    "type": "object",
                    "properties": {"value": {"type": "string"}}
                }),
                "with.dots" => json!({
                    "type": "object",
                    "properties": {"a.b": {"type": "integer"}}
                }),
                _ => json!({"type": "object", "properties": {}}),
            };
            self.push(name, format!("Awkward tool name test: `{name}`. Answers \"ok {name}\"."), schema, Behavior::Ok);
        }

        let long_property = "p".repeat(100);
        let mut properties = serde_json::Map::new();
        properties
            .insert("first name".to_owned(), json!({"type": "string", "description": "A property name with a space."}));
        properties.insert("x-y".to_owned(), json!({"type": "integer", "description": "A property name with a dash."}));
        properties.insert(long_property, json!({"type": "boolean", "description": "A 100-character property name."}));
        properties
            .insert("class".to_owned(), json!({"type": "string", "description": "A property named after a keyword."}));
        properties.insert(
            "nested".to_owned(),
            json!({
                "type": "object",
                "properties": {"inner": {
                    "type": "object",
                    "properties": {"deeper": {
                        "type": "object",
                        "properties": {"deepest": {
                            "type": "object",
                            "properties": {"bottom": {
                                "type": "object",
                                "properties": {"floor": {"type": "string"}}
                            }}
                        }}
                    }}
                }}
            }),
        );
        properties.insert("mode".to_owned(), json!({"type": "string", "enum": ["fast", "slow"]}));
        properties.insert("ids".to_owned(), json!({"type": "array", "items": {"type": "integer"}}));
        self.push(
            "awkward_params",
            "Takes parameters whose names are not identifiers; returns the arguments as JSON text.",
            json!({
                "$schema": DRAFT_07,
                "type": "object",
                "properties": properties,
                "required": ["first name"],
                "additionalProperties": false
            }),
            Behavior::EchoArguments,
        );

        self.push(
            "open_schema",
            "Accepts any extra properties; returns the arguments as JSON text.",
            json!({
                "type": "object",
                "properties": {"a": {"type": "string"}},
                "additionalProperties": true
            }),
            Behavior::EchoArguments,
        );
    }

    fn add_deep_schema_tools(&mut self, depth: usize) {
        let mut deep = json!({"type": "integer"});
        for _ in 0..depth {
            deep = json!({"type": "object", "properties": {"n": deep}});
        }
        self.push(
            "deep",
            format!("Its input schema nests objects {depth} levels deep."),
            deep,
            Behavior::EchoArguments,
        );

        self.push(
            "bad_schema",
            "Its input schema is invalid JSON Schema.",
            json!({"type": "object", "properties": {"a": {"type": "no-such-type"}}}),
            Behavior::EchoArguments,
        );

        let mut properties = serde_json::Map::new();
        for i in 0..1_000 {
            let name = filled(&format!("hostile_{i:04}_"), "q", 300);
            let description = filled(
                &format!("Hostile property {i}. "),
                "This sentence pads the property description to a thousand characters. ",
                1_000,
            );
            properties.insert(name, json!({"type": "string", "description": description}));
        }
        self.push(
            "hostile_schema",
            "Its input schema has 1,000 properties with 300-character names and 1,000-character descriptions.",
            json!({"type": "object", "properties": properties}),
            Behavior::EchoArguments,
        );
    }
}

/// `head` followed by copies of `unit`, cut to exactly `len` characters.
fn filled(head: &str, unit: &str, len: usize) -> String {
    let mut text: String = head.to_owned();
    while text.chars().count() < len {
        text.push_str(unit);
    }
    text.chars().take(len).collect()
}

fn object(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(map) => Arc::new(map),
        other => panic!("schema must be a JSON object, got {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filled_has_exact_length() {
        assert_eq!(filled("ab", "xyz", 10).len(), 10);
        assert_eq!(filled("abcdef", "x", 3), "abc");
    }

    #[test]
    fn full_catalog_builds_with_unique_names() {
        let catalog = Catalog::build(&CatalogOptions {
            many: 25,
            named: vec!["mcp_run_pytest".into()],
            long_descriptions: true,
            clash: true,
            deep_schema: true,
            deep_depth: 40,
            http: true,
            add_tool: true,
            resources: true,
            reports: true,
            whoami: true,
        });
        assert_eq!(catalog.tools.len(), catalog.behaviors.len());
        let echo = catalog.tool("echo").expect("echo");
        assert_eq!(echo.description.as_deref().map(str::len), Some(10_000));
        let long = catalog.tool("long_desc_tool").expect("long_desc_tool");
        assert_eq!(long.description.as_deref().map(str::len), Some(50_000));
        let extra = catalog.tool("extra_tool_0012").expect("extra tool");
        assert_eq!(extra.description.as_deref(), Some("Extra tool number 12 for catalog tests about charlie"));
        let hostile = catalog.tool("hostile_schema").expect("hostile");
        let properties = hostile.input_schema["properties"].as_object().expect("props");
        assert_eq!(properties.len(), 1_000);
        assert!(properties.keys().all(|key| key.len() == 300));
        assert!(catalog.tool("get_header").is_some());
    }
}
