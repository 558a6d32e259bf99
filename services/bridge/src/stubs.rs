//! Readable Python stubs for wrapped tools, and the `run_python` description.
//!
//! Everything here is built from text a wrapped server sent (names,
//! descriptions, schemas), so every piece is bounded: descriptions are cut,
//! types stop at a fixed depth, parameter names are quoted and cut, and the
//! number of parameters and enum values shown is capped. A hostile schema
//! yields a long stub, never an unbounded one.

use serde_json::{Map, Value};

use crate::naming::is_identifier;
use crate::shapes::Shape;

/// Bounds on what a stub shows.
#[derive(Debug, Clone, Copy)]
pub struct StubLimits {
    /// Longest tool description kept, in bytes.
    pub max_description: usize,
    /// Nesting levels shown of a parameter's type.
    pub type_depth: usize,
    /// Longest parameter name shown, in characters.
    pub max_param_name: usize,
}

impl Default for StubLimits {
    fn default() -> Self {
        use code_mode_core::defaults as d;
        Self {
            max_description: d::MAX_TOOL_DESCRIPTION,
            type_depth: d::STUB_TYPE_DEPTH,
            max_param_name: d::MAX_PARAM_NAME,
        }
    }
}

/// Parameters listed in a stub before the rest are counted.
const MAX_PARAMS_SHOWN: usize = 40;
/// Characters of a parameter's own description shown.
const MAX_PARAM_DESCRIPTION: usize = 200;
/// Characters of one rendered type.
const MAX_TYPE_CHARS: usize = 300;
/// Enum values or union members shown.
const MAX_ALTERNATIVES: usize = 8;

/// The label of a tool that may see private data (`--private`).
pub const PRIVATE_LABEL: &str = "[private]";

/// What the stub of a private tool says about the private-data rule, under
/// its label, so the model learns the rule before it runs into it.
const PRIVATE_NOTE: &str = "It may see private data: once it is called, this session can call only [private] tools.";

/// Cut `text` to at most `max` bytes on a character boundary, marking the cut.
pub fn cut_bytes(text: &str, max: usize) -> String {
    code_mode_core::text::cut_bytes(text, max, code_mode_core::text::MODEL_MARK)
}

/// Cut `text` to at most `max` characters, marking the cut.
pub fn cut_chars(text: &str, max: usize) -> String {
    code_mode_core::text::cut_chars(text, max, code_mode_core::text::MODEL_MARK)
}

/// A parameter name as a stub shows it: plain when it is a short identifier,
/// else quoted (a Python string literal) and cut.
pub fn param_name(name: &str, limits: &StubLimits) -> String {
    if is_identifier(name) && name.len() <= limits.max_param_name {
        return name.to_string();
    }
    let cut: String = name.chars().take(limits.max_param_name).collect();
    python_str(&cut)
}

/// A Python string literal for `s` (single quotes, escapes for anything odd).
fn python_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32 & 0xff)),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// Render the Python type of a JSON Schema, down to `limits.type_depth` levels.
pub fn python_type(schema: &Value, root: &Value, limits: &StubLimits) -> String {
    cut_chars(&type_at(schema, root, limits, 0), MAX_TYPE_CHARS)
}

fn type_at(schema: &Value, root: &Value, limits: &StubLimits, depth: usize) -> String {
    let obj = match schema {
        Value::Bool(_) => return "Any".into(),
        Value::Object(o) => o,
        _ => return "Any".into(),
    };
    if depth >= limits.type_depth {
        return shallow(obj);
    }
    if let Some(Value::String(r)) = obj.get("$ref") {
        return match resolve_ref(root, r) {
            Some(target) => type_at(target, root, limits, depth + 1),
            None => "Any".into(),
        };
    }
    if let Some(c) = obj.get("const") {
        return format!("Literal[{}]", literal(c));
    }
    if let Some(Value::Array(values)) = obj.get("enum") {
        let mut shown: Vec<String> = values.iter().take(MAX_ALTERNATIVES).map(literal).collect();
        if values.len() > MAX_ALTERNATIVES {
            shown.push("...".into());
        }
        return format!("Literal[{}]", shown.join(", "));
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(options)) = obj.get(key) {
            return union(options.iter().map(|o| type_at(o, root, limits, depth + 1)), options.len());
        }
    }
    match obj.get("type") {
        Some(Value::String(t)) => named_type(t, obj, root, limits, depth),
        Some(Value::Array(types)) => union(
            types.iter().map(|t| match t {
                Value::String(t) => named_type(t, obj, root, limits, depth),
                _ => "Any".into(),
            }),
            types.len(),
        ),
        _ if obj.contains_key("properties") => named_type("object", obj, root, limits, depth),
        _ => "Any".into(),
    }
}

fn union(parts: impl Iterator<Item = String>, count: usize) -> String {
    let mut shown: Vec<String> = Vec::new();
    for p in parts.take(MAX_ALTERNATIVES) {
        if !shown.contains(&p) {
            shown.push(p);
        }
    }
    if count > MAX_ALTERNATIVES {
        shown.push("...".into());
    }
    shown.join(" | ")
}

fn named_type(t: &str, obj: &Map<String, Value>, root: &Value, limits: &StubLimits, depth: usize) -> String {
    match t {
        "string" => "str".into(),
        "integer" => "int".into(),
        "number" => "float".into(),
        "boolean" => "bool".into(),
        "null" => "None".into(),
        "array" => match obj.get("items") {
            Some(items) => format!("list[{}]", type_at(items, root, limits, depth + 1)),
            None => "list".into(),
        },
        "object" => match obj.get("properties") {
            Some(Value::Object(props)) if !props.is_empty() => {
                let required = required_set(obj);
                let mut fields: Vec<String> = props
                    .iter()
                    .take(MAX_ALTERNATIVES)
                    .map(|(k, v)| {
                        let mark = if required.contains(&k.as_str()) { "" } else { "?" };
                        format!("{}{mark}: {}", param_name(k, limits), type_at(v, root, limits, depth + 1))
                    })
                    .collect();
                if props.len() > MAX_ALTERNATIVES {
                    fields.push("...".into());
                }
                format!("{{{}}}", fields.join(", "))
            }
            _ => "dict".into(),
        },
        _ => "Any".into(),
    }
}

/// The type of a schema without looking inside it (the depth limit).
fn shallow(obj: &Map<String, Value>) -> String {
    match obj.get("type") {
        Some(Value::String(t)) => match t.as_str() {
            "string" => "str",
            "integer" => "int",
            "number" => "float",
            "boolean" => "bool",
            "null" => "None",
            "array" => "list",
            "object" => "dict",
            _ => "Any",
        }
        .into(),
        _ => "Any".into(),
    }
}

fn literal(v: &Value) -> String {
    match v {
        Value::String(s) => python_str(&cut_chars(s, 40)),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Null => "None".into(),
        other => cut_chars(&other.to_string(), 40),
    }
}

fn resolve_ref<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let pointer = reference.strip_prefix('#')?;
    root.pointer(pointer)
}

fn required_set(obj: &Map<String, Value>) -> Vec<&str> {
    match obj.get("required") {
        Some(Value::Array(r)) => r.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// A tool as the stub renderer needs it.
#[derive(Debug, Clone)]
pub struct ToolText<'a> {
    /// Its Python name.
    pub name: &'a str,
    /// The description from the server, if any.
    pub description: Option<&'a str>,
    /// The input schema.
    pub schema: &'a Value,
    /// The output schema (`outputSchema`): what its JSON result holds.
    pub output_schema: Option<&'a Value>,
    /// Extra labels shown after the name (`[private]`, ...).
    pub labels: &'a [String],
    /// The shape learned from its results (see [`crate::shapes`]), if any.
    pub observed: Option<&'a Shape>,
}

/// The stub of one tool: an async signature and a docstring with the
/// (cut) description and one line per parameter.
pub fn stub(tool: &ToolText<'_>, limits: &StubLimits) -> String {
    let mut doc = String::new();
    if !tool.labels.is_empty() {
        doc.push_str(&tool.labels.join(" "));
        doc.push('\n');
        if tool.labels.iter().any(|l| l == PRIVATE_LABEL) {
            doc.push_str(PRIVATE_NOTE);
            doc.push('\n');
        }
    }
    let description = tool.description.map(str::trim).filter(|d| !d.is_empty());
    doc.push_str(&cut_bytes(description.unwrap_or("(no description)"), limits.max_description));
    let params = param_lines(tool.schema, limits, "parameters");
    if params.is_empty() {
        doc.push_str("\n\nparams: none");
    } else {
        doc.push_str("\n\nparams:");
        for line in params {
            doc.push_str("\n    ");
            doc.push_str(&line);
        }
    }
    if let Some(output) = tool.output_schema {
        // The result string is this object as JSON text (the bridge hands
        // structured content over as JSON), so the code can parse it
        // without a trial call.
        let mut fields = param_lines(output, limits, "fields");
        let json = tool.observed.map(Shape::json_fields).unwrap_or_default();
        for line in &mut fields {
            if let Some(name) = json.iter().find(|n| line.starts_with(&format!("{}: str", param_name(n, limits)))) {
                let at = param_name(name, limits).len() + ": str".len();
                line.insert_str(at, " (JSON)");
            }
        }
        if fields.is_empty() {
            doc.push_str(&format!("\n\nreturns JSON: {}", python_type(output, output, limits)));
        } else {
            doc.push_str("\n\nreturns JSON:");
            for line in fields {
                doc.push_str("\n    ");
                doc.push_str(&line);
            }
        }
    }
    if tool.output_schema.is_none()
        && let Some(observed) = tool.observed
    {
        doc.push_str(&format!("\n\nreturns (observed in earlier results, not declared): {}", observed.render()));
    }
    let mut out = format!("async def {}:\n    \"\"\"\n", typed_signature(tool, limits));
    for line in doc.replace("\"\"\"", "\\\"\\\"\\\"").lines() {
        if line.is_empty() {
            out.push('\n');
        } else {
            out.push_str("    ");
            out.push_str(line);
            out.push('\n');
        }
    }
    out.push_str("    \"\"\"");
    out
}

/// One line per top-level property of an object schema (the parameters, or
/// the fields of a result): `name: type` (`, optional`), then the start of
/// its own description.
fn param_lines(schema: &Value, limits: &StubLimits, what: &str) -> Vec<String> {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    let required = schema.as_object().map(required_set).unwrap_or_default();
    let mut lines: Vec<String> = props
        .iter()
        .take(MAX_PARAMS_SHOWN)
        .map(|(name, prop)| {
            let mut line = format!("{}: {}", param_name(name, limits), python_type(prop, schema, limits));
            if !required.contains(&name.as_str()) {
                line.push_str(", optional");
            }
            if let Some(d) = prop.get("description").and_then(Value::as_str) {
                let first = d.trim().lines().next().unwrap_or("");
                if !first.is_empty() {
                    line.push_str(" - ");
                    line.push_str(&cut_chars(first, MAX_PARAM_DESCRIPTION));
                }
            }
            line
        })
        .collect();
    if props.len() > MAX_PARAMS_SHOWN {
        lines.push(format!("... and {} more {what}", props.len() - MAX_PARAMS_SHOWN));
    }
    lines
}

/// Parameters a one-line signature lists before `...`.
const MAX_LINE_PARAMS: usize = 12;
/// Characters of one parameter's type in a one-line signature.
const MAX_LINE_TYPE_CHARS: usize = 120;
/// Characters of a one-line signature's parameters, past which the rest
/// are counted (`... 12 more`).
const MAX_LINE_PARAMS_CHARS: usize = 600;
/// Characters of a one-line signature's result.
const MAX_LINE_RESULT_CHARS: usize = 300;

/// The typed parameter list: `path: str, head?: int, mode: str = 'r'`
/// (`?`: optional; `= value`: optional, with the server's default).
fn typed_params(schema: &Value, limits: &StubLimits) -> String {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else { return String::new() };
    let required = schema.as_object().map(required_set).unwrap_or_default();
    let mut parts: Vec<String> = Vec::new();
    let mut length = 0;
    for (name, prop) in props.iter().take(MAX_LINE_PARAMS) {
        let kind = cut_chars(&python_type(prop, schema, limits), MAX_LINE_TYPE_CHARS);
        let needed = required.contains(&name.as_str());
        let name = param_name(name, limits);
        let part = match prop.get("default") {
            _ if needed => format!("{name}: {kind}"),
            Some(default) => format!("{name}: {kind} = {}", literal(default)),
            None => format!("{name}?: {kind}"),
        };
        // Past the line's budget the rest are counted (the first always shows).
        if !parts.is_empty() && length + part.chars().count() > MAX_LINE_PARAMS_CHARS {
            break;
        }
        length += part.chars().count() + 2;
        parts.push(part);
    }
    if props.len() > parts.len() {
        parts.push(format!("... {} more", props.len() - parts.len()));
    }
    parts.join(", ")
}

/// What a result's text holds, for `-> ...`: the declared schema's type
/// (its string fields that held JSON in every result seen marked
/// `str (JSON)`), else the shape observed, marked so; `None` when nothing
/// is known.
pub fn returns(tool: &ToolText<'_>, limits: &StubLimits) -> Option<String> {
    let Some(output) = tool.output_schema else {
        return tool.observed.map(|shape| format!("{} (observed)", shape.render()));
    };
    let json = tool.observed.map(Shape::json_fields).unwrap_or_default();
    let Some(props) = output.get("properties").and_then(Value::as_object).filter(|p| !p.is_empty()) else {
        return Some(python_type(output, output, limits));
    };
    let required = output.as_object().map(required_set).unwrap_or_default();
    let mut fields: Vec<String> = props
        .iter()
        .take(MAX_ALTERNATIVES)
        .map(|(name, prop)| {
            let mark = if required.contains(&name.as_str()) { "" } else { "?" };
            let mut kind = cut_chars(&python_type(prop, output, limits), MAX_LINE_TYPE_CHARS);
            if kind == "str" && json.contains(&name.as_str()) {
                kind.push_str(" (JSON)");
            }
            format!("{}{mark}: {kind}", param_name(name, limits))
        })
        .collect();
    if props.len() > MAX_ALTERNATIVES {
        fields.push("...".into());
    }
    Some(format!("{{{}}}", fields.join(", ")))
}

/// `name(params) -> result`: the typed signature without labels.
fn typed_signature(tool: &ToolText<'_>, limits: &StubLimits) -> String {
    let params = typed_params(tool.schema, limits);
    match returns(tool, limits) {
        Some(result) => format!("{}({params}) -> {}", tool.name, cut_chars(&result, MAX_LINE_RESULT_CHARS)),
        None => format!("{}({params})", tool.name),
    }
}

/// The typed signature with the tool's labels:
/// `fs__write_file(path: str, content: str) -> {content: str} [needs approval]`.
pub fn signature_line(tool: &ToolText<'_>, limits: &StubLimits) -> String {
    let line = typed_signature(tool, limits);
    if tool.labels.is_empty() { line } else { format!("{line} {}", tool.labels.join(" ")) }
}

/// What the sandbox checks a call's argument names against: the declared
/// parameters (at most [`MAX_SIGNATURE_PARAMS`], names of at most [`MAX_SIGNATURE_NAME`] bytes),
/// and whether undeclared names are allowed.
pub fn signature(tool: &ToolText<'_>, limits: &StubLimits) -> code_mode_proto::Signature {
    let schema = tool.schema;
    let props = schema.get("properties").and_then(Value::as_object);
    let required = schema.as_object().map(required_set).unwrap_or_default();
    let additional = schema.get("additionalProperties");
    // An object schema that declares its properties and says nothing else
    // takes other names too by JSON Schema's letter, but a name the tool
    // does not declare is almost always a misspelling, and the bridge
    // refuses it too (`schema::ArgumentChecker`): only an explicit
    // `additionalProperties` or `unevaluatedProperties` (true or a
    // schema) or `patternProperties` opens it.
    let open = props.is_none()
        || schema.get("patternProperties").is_some()
        || schema.get("unevaluatedProperties").is_some_and(|a| a != &Value::Bool(false))
        || additional.is_some_and(|a| a != &Value::Bool(false));
    let params = props
        .into_iter()
        .flatten()
        .filter(|(name, _)| name.len() <= MAX_SIGNATURE_NAME)
        .take(MAX_SIGNATURE_PARAMS)
        .map(|(name, prop)| code_mode_proto::Param {
            name: name.clone(),
            type_: cut_chars(&python_type(prop, schema, limits), MAX_LINE_TYPE_CHARS),
            required: required.contains(&name.as_str()),
        })
        .collect();
    // A schema with more parameters than are sent is open: the sandbox
    // cannot tell a misspelling from a name it was not told.
    let open =
        open || props.is_some_and(|p| p.len() > MAX_SIGNATURE_PARAMS || p.keys().any(|n| n.len() > MAX_SIGNATURE_NAME));
    code_mode_proto::Signature { line: signature_line(tool, limits), params, open }
}

/// Parameters the sandbox is told of, per tool.
const MAX_SIGNATURE_PARAMS: usize = 100;
/// Longest parameter name the sandbox is told of, in bytes.
const MAX_SIGNATURE_NAME: usize = 256;

/// One line for a tool: its typed signature with labels, two spaces, then
/// the first sentences of its description, marked when cut
/// ([`crate::brief`]).
pub fn summary(tool: &ToolText<'_>, limits: &StubLimits) -> String {
    let brief = tool.description.map(crate::brief::brief).unwrap_or_default();
    let line = signature_line(tool, limits);
    if brief.is_empty() { line } else { format!("{line}  {brief}") }
}

/// Characters of a title kept for search.
const MAX_TITLE_CHARS: usize = 200;

/// The text `search_tools` ranks a tool by, field by field, bounded like
/// its stub: the description cut the same way, at most
/// [`MAX_PARAMS_SHOWN`] parameters and result fields, the first line of
/// each one's description cut to [`MAX_PARAM_DESCRIPTION`] characters.
/// `name` is the tool's name as the server lists it; `server` the prefix of
/// its Python name, if any.
pub fn search_text(
    tool: &ToolText<'_>,
    mcp_name: &str,
    server: Option<&str>,
    title: Option<&str>,
    limits: &StubLimits,
) -> code_mode_proto::SearchText {
    let fields = |schema: Option<&Value>| -> Vec<(String, String)> {
        let Some(props) = schema.and_then(|s| s.get("properties")).and_then(Value::as_object) else {
            return Vec::new();
        };
        props
            .iter()
            .take(MAX_PARAMS_SHOWN)
            .map(|(name, prop)| {
                let about = prop
                    .get("description")
                    .or_else(|| prop.get("title"))
                    .and_then(Value::as_str)
                    .and_then(|d| d.trim().lines().next())
                    .unwrap_or("");
                (cut_chars(name, limits.max_param_name), cut_chars(about, MAX_PARAM_DESCRIPTION))
            })
            .collect()
    };
    let params = fields(Some(tool.schema));
    let output = fields(tool.output_schema);
    let description = tool.description.map(str::trim).unwrap_or("");
    code_mode_proto::SearchText {
        name: cut_chars(mcp_name, limits.max_param_name),
        server: server.unwrap_or("").to_string(),
        title: cut_chars(title.map(str::trim).unwrap_or(""), MAX_TITLE_CHARS),
        description: cut_bytes(description, limits.max_description),
        params: params.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join("\n"),
        param_text: params.iter().map(|(_, d)| d.as_str()).filter(|d| !d.is_empty()).collect::<Vec<_>>().join("\n"),
        output: output
            .iter()
            .map(|(n, d)| if d.is_empty() { n.clone() } else { format!("{n} {d}") })
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn limits() -> StubLimits {
        StubLimits::default()
    }

    /// A tool of only a name and an input schema.
    fn bare<'a>(name: &'a str, schema: &'a Value) -> ToolText<'a> {
        ToolText { name, description: None, schema, output_schema: None, labels: &[], observed: None }
    }

    #[test]
    fn a_stub_shows_the_signature_description_and_typed_parameters() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer", "description": "second"}}, "required": ["a"]});
        let s = stub(
            &ToolText {
                name: "add",
                description: Some("Add two integers."),
                schema: &schema,
                output_schema: None,
                labels: &[],
                observed: None,
            },
            &limits(),
        );
        assert!(s.starts_with("async def add(a: int, b?: int):\n    \"\"\"\n    Add two integers.\n"), "{s}");
        assert!(s.contains("    a: int\n"), "{s}");
        assert!(s.contains("    b: int, optional - second\n"), "{s}");
        assert!(s.ends_with("    \"\"\""), "{s}");
    }

    #[test]
    fn types_stop_at_the_depth_limit() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "object", "properties": {"c": {"type": "object", "properties": {"d": {"type": "object", "properties": {"e": {"type": "object", "properties": {"f": {"type": "object", "properties": {"g": {"type": "string"}}}}}}}}}}}}}}});
        let t = python_type(&schema["properties"]["a"], &schema, &limits());
        // Five levels of structure are shown; the sixth only by its kind.
        assert_eq!(t, "{b?: {c?: {d?: {e?: {f?: dict}}}}}");
    }

    #[test]
    fn enums_unions_arrays_and_refs_render_as_python_types() {
        let root = json!({"$defs": {"P": {"type": "string"}}, "properties": {}});
        let l = limits();
        assert_eq!(python_type(&json!({"enum": ["fast", "slow"]}), &root, &l), "Literal['fast', 'slow']");
        assert_eq!(python_type(&json!({"type": ["string", "null"]}), &root, &l), "str | None");
        assert_eq!(python_type(&json!({"type": "array", "items": {"type": "integer"}}), &root, &l), "list[int]");
        assert_eq!(python_type(&json!({"$ref": "#/$defs/P"}), &root, &l), "str");
        assert_eq!(python_type(&json!({"$ref": "https://elsewhere/x"}), &root, &l), "Any");
        assert_eq!(python_type(&json!({"anyOf": [{"type": "integer"}, {"type": "number"}]}), &root, &l), "int | float");
    }

    #[test]
    fn odd_or_long_parameter_names_are_quoted_and_cut() {
        let l = limits();
        assert_eq!(param_name("first name", &l), "'first name'");
        assert_eq!(param_name("it's", &l), "'it\\'s'");
        let long = "p".repeat(100);
        assert_eq!(param_name(&long, &l), format!("'{}'", "p".repeat(64)));
        assert_eq!(param_name("ok_name", &l), "ok_name");
    }

    #[test]
    fn long_descriptions_are_cut_at_the_byte_limit() {
        let long = "é".repeat(5000);
        let schema = json!({});
        let s = stub(
            &ToolText {
                name: "t",
                description: Some(&long),
                schema: &schema,
                output_schema: None,
                labels: &[],
                observed: None,
            },
            &limits(),
        );
        assert!(s.len() < 2048 + 200, "{}", s.len());
        assert!(s.contains("..."));
    }

    #[test]
    fn a_description_cannot_close_the_docstring() {
        let schema = json!({});
        let s = stub(
            &ToolText {
                name: "t",
                description: Some("x\"\"\"\nimport os"),
                schema: &schema,
                output_schema: None,
                labels: &[],
                observed: None,
            },
            &limits(),
        );
        assert_eq!(s.matches("\"\"\"").count(), 2, "{s}");
    }

    #[test]
    fn hostile_schemas_still_render_bounded() {
        let mut props = serde_json::Map::new();
        for i in 0..5000 {
            props.insert(format!("{i}{}", "n".repeat(300)), json!({"type": "string", "description": "d".repeat(3000)}));
        }
        let schema = json!({"type": "object", "properties": props});
        let s = stub(
            &ToolText {
                name: "t",
                description: Some("x"),
                schema: &schema,
                output_schema: None,
                labels: &[],
                observed: None,
            },
            &limits(),
        );
        assert!(s.chars().count() < 40 * (64 + 300 + 200 + 40) + 4096, "{}", s.len());
        assert!(s.contains("... and 4960 more parameters"));
    }

    #[test]
    fn a_private_stub_carries_the_label_and_the_rule_above_its_description() {
        let schema = json!({"properties": {"name": {"type": "string"}}, "required": ["name"]});
        let labels = vec![PRIVATE_LABEL.to_string()];
        let s = stub(
            &ToolText {
                name: "read_mail",
                description: Some("Read a mail."),
                schema: &schema,
                output_schema: None,
                labels: &labels,
                observed: None,
            },
            &limits(),
        );
        let doc: Vec<&str> = s.lines().skip(2).take(3).map(str::trim).collect();
        assert_eq!(doc, ["[private]", PRIVATE_NOTE, "Read a mail."], "{s}");
        let plain = stub(&bare("t", &schema), &limits());
        assert!(!plain.contains("[private]"), "{plain}");
    }

    #[test]
    fn a_summary_is_one_line_with_parameter_names_and_labels() {
        let schema = json!({"properties": {"title": {}, "body": {}}});
        let labels = vec!["[private]".to_string()];
        let s = summary(
            &ToolText {
                name: "create_issue",
                description: Some("File an issue.\nMore."),
                schema: &schema,
                output_schema: None,
                labels: &labels,
                observed: None,
            },
            &limits(),
        );
        // The sentences of the description's first paragraph, joined.
        assert_eq!(s, "create_issue(title?: Any, body?: Any) [private]  File an issue. More.");
    }

    #[test]
    fn a_stub_shows_the_fields_and_types_of_a_json_result() {
        let schema = json!({"properties": {"timezone": {"type": "string"}}, "required": ["timezone"]});
        let output = json!({
            "type": "object",
            "$defs": {"When": {"type": "object", "properties": {"datetime": {"type": "string"}, "is_dst": {"type": "boolean"}}, "required": ["datetime"]}},
            "properties": {
                "source": {"$ref": "#/$defs/When", "description": "The time where it started."},
                "hours": {"type": "number"},
                "note": {"type": ["string", "null"]}
            },
            "required": ["source", "hours"]
        });
        let s = stub(
            &ToolText {
                name: "convert",
                description: Some("Convert a time."),
                schema: &schema,
                output_schema: Some(&output),
                labels: &[],
                observed: None,
            },
            &limits(),
        );
        let expected = "    params:\n        timezone: str\n\n    returns JSON:\n        source: {datetime: str, is_dst?: bool} - The time where it started.\n        hours: float\n        note: str | None, optional\n    \"\"\"";
        assert!(s.ends_with(expected), "{s}");
        // A result that is not an object with fields shows its type.
        let list = json!({"type": "array", "items": {"type": "string"}});
        let text = ToolText {
            name: "t",
            description: None,
            schema: &schema,
            output_schema: Some(&list),
            labels: &[],
            observed: None,
        };
        assert!(stub(&text, &limits()).contains("    returns JSON: list[str]\n"));
        // Without an output schema the stub says nothing about the result.
        let text = bare("t", &schema);
        assert!(!stub(&text, &limits()).contains("returns"));
    }

    #[test]
    fn a_hostile_output_schema_renders_as_bounded_as_a_hostile_input_schema() {
        let mut props = serde_json::Map::new();
        for i in 0..5000 {
            props.insert(format!("{i}{}", "n".repeat(300)), json!({"type": "string", "description": "d".repeat(3000)}));
        }
        let hostile = json!({"type": "object", "properties": props});
        let empty = json!({});
        let text = ToolText {
            name: "t",
            description: Some("x"),
            schema: &empty,
            output_schema: Some(&hostile),
            labels: &[],
            observed: None,
        };
        let s = stub(&text, &limits());
        assert!(s.chars().count() < 40 * (64 + 300 + 200 + 40) + 4096, "{}", s.len());
        assert!(s.contains("... and 4960 more fields"));
        let search = search_text(&text, "t", None, None, &limits());
        assert_eq!(search.params, "");
        assert!(search.output.chars().count() < 40 * (64 + 200 + 2), "{}", search.output.len());
    }

    #[test]
    fn the_typed_signature_marks_optional_parameters_defaults_and_the_declared_result() {
        let schema = json!({"type": "object", "properties": {
            "path": {"type": "string"},
            "tail": {"type": "number"},
            "mode": {"enum": ["r", "rb"], "default": "r"}
        }, "required": ["path"]});
        let output = json!({"type": "object", "properties": {"content": {"type": "string"}}, "required": ["content"]});
        let labels = vec!["[needs approval]".to_string()];
        let text = ToolText {
            name: "fs__read",
            description: Some("Read a file.\nMore."),
            schema: &schema,
            output_schema: Some(&output),
            labels: &labels,
            observed: None,
        };
        let line =
            "fs__read(path: str, tail?: float, mode: Literal['r', 'rb'] = 'r') -> {content: str} [needs approval]";
        assert_eq!(signature_line(&text, &limits()), line);
        assert_eq!(summary(&text, &limits()), format!("{line}  Read a file. More."));
        assert!(stub(&text, &limits()).starts_with(
            "async def fs__read(path: str, tail?: float, mode: Literal['r', 'rb'] = 'r') -> {content: str}:\n"
        ));
        // A string field that held JSON in every result seen says so.
        let observed = crate::shapes::Shape::of_text(r#"{"content": "[{\"name\": \"a\"}]"}"#).unwrap();
        let text = ToolText { observed: Some(&observed), labels: &[], ..text };
        assert!(signature_line(&text, &limits()).ends_with(" -> {content: str (JSON)}"));
        assert!(stub(&text, &limits()).contains("    returns JSON:\n        content: str (JSON)\n"));
    }

    #[test]
    fn an_observed_result_shape_shows_as_observed_and_only_without_a_declared_one() {
        let schema = json!({"properties": {"q": {"type": "string"}}, "required": ["q"]});
        let observed = crate::shapes::Shape::of_text(r#"[{"number": 1, "title": "x"}]"#).unwrap();
        let text = ToolText {
            name: "gh__search",
            description: None,
            schema: &schema,
            output_schema: None,
            labels: &[],
            observed: Some(&observed),
        };
        assert_eq!(
            signature_line(&text, &limits()),
            "gh__search(q: str) -> list[{number: int, title: str}] (observed)"
        );
        let s = stub(&text, &limits());
        assert!(
            s.contains("returns (observed in earlier results, not declared): list[{number: int, title: str}]"),
            "{s}"
        );
        let unknown = ToolText { observed: None, ..text };
        assert_eq!(signature_line(&unknown, &limits()), "gh__search(q: str)");
    }

    #[test]
    fn the_sandbox_gets_each_parameter_and_whether_other_names_are_taken() {
        let text = |schema: &Value| {
            signature(
                &ToolText { name: "t", description: None, schema, output_schema: None, labels: &[], observed: None },
                &limits(),
            )
        };
        let closed = text(
            &json!({"properties": {"path": {"type": "string"}, "head": {"type": "integer"}}, "required": ["path"]}),
        );
        assert_eq!(closed.line, "t(path: str, head?: int)");
        assert!(!closed.open);
        let params: Vec<(&str, &str, bool)> =
            closed.params.iter().map(|p| (p.name.as_str(), p.type_.as_str(), p.required)).collect();
        assert_eq!(params, [("path", "str", true), ("head", "int", false)]);
        for open in [
            json!({"properties": {"a": {}}, "additionalProperties": true}),
            json!({"properties": {"a": {}}, "additionalProperties": {"type": "string"}}),
            json!({"properties": {"a": {}}, "patternProperties": {"^x": {}}}),
            json!({"type": "object"}),
        ] {
            assert!(text(&open).open, "{open}");
        }
        assert!(!text(&json!({"properties": {"a": {}}, "additionalProperties": false})).open);
    }

    #[test]
    fn search_text_keeps_each_field_apart_and_bounded() {
        let schema = json!({"properties": {
            "timezone": {"type": "string", "description": "IANA timezone name.\nMore lines are not kept."},
            "x": {"type": "integer"}
        }});
        let output = json!({"properties": {"is_dst": {"type": "boolean", "title": "Is Dst"}, "when": {}}});
        let long = "word ".repeat(1000);
        let text = ToolText {
            name: "time__get_current_time",
            description: Some(&long),
            schema: &schema,
            output_schema: Some(&output),
            labels: &[],
            observed: None,
        };
        let s = search_text(&text, "get_current_time", Some("time"), Some(" Current Time "), &limits());
        assert_eq!(s.name, "get_current_time");
        assert_eq!(s.server, "time");
        assert_eq!(s.title, "Current Time");
        assert!(s.description.len() <= 2048 && s.description.ends_with("..."), "{}", s.description.len());
        assert_eq!(s.params, "timezone\nx");
        assert_eq!(s.param_text, "IANA timezone name.");
        assert_eq!(s.output, "is_dst Is Dst\nwhen");
    }
}
