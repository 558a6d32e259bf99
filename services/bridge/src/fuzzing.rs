//! Entry points of the cargo-fuzz targets in `fuzz/` (not an API): each
//! takes the fuzzer's bytes and asserts what must hold for any input, so
//! the committed seeds and every past crash replay as ordinary tests too.

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;

use crate::catalog::{Catalog, CatalogLimits, ListedTool, ServerTools};
use crate::naming::is_identifier;
use crate::policy::{Annotations, Limit, Policy, ToolFacts, Verdict};

/// The `mcpServers` loader (`--config FILE`) on hostile text. `${VAR}`
/// resolves for names starting with a letter, so both the set and the
/// unset paths are reached. Holds, besides "never panics": a config that
/// loads has at least one server, each with a usable name, none twice.
pub fn servers_config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let lookup = |name: &str| name.starts_with(|c: char| c.is_ascii_alphabetic()).then(|| format!("v-{name}"));
    let Ok(servers) = crate::config::parse(Path::new("servers.json"), text, lookup) else { return };
    assert!(!servers.is_empty());
    let mut names: Vec<&str> = servers.iter().map(|s| s.spec.name.as_str()).collect();
    assert!(names.iter().all(|n| crate::config::is_server_name(n)), "{names:?}");
    names.sort_unstable();
    let count = names.len();
    names.dedup();
    assert_eq!(names.len(), count, "two servers with one name");
}

fn known_tools() -> Vec<ToolFacts> {
    let facts = |name: &str, read_only, destructive, idempotent, open_world| ToolFacts {
        name: name.to_string(),
        annotations: Annotations { read_only, destructive, idempotent, open_world },
        aliases: vec![format!("fuzz__{}", name.replace('-', "_"))],
    };
    vec![
        facts("read_file", Some(true), None, None, Some(false)),
        facts("delete_file", Some(false), Some(true), None, None),
        facts("add", Some(false), Some(false), Some(true), Some(false)),
        facts("echo", None, None, None, None),
        facts("get-weather", None, Some(false), None, Some(true)),
    ]
}

/// The policy loader (`policy.json`) on hostile text, against tools with
/// every kind of annotation, then every query the bridge makes of a loaded
/// policy. Input: the policy, then optionally a NUL and a call's arguments
/// (JSON) for its argument schemas. Holds, besides "never panics": every
/// limit of a verdict has a window and a maximum of at least 1.
pub fn policy(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let (policy_text, arguments) = text.split_once('\0').unwrap_or((text, "{}"));
    let known = known_tools();
    let Ok(policy) = Policy::parse(policy_text, "policy.json", &known) else { return };
    let arguments: Value = serde_json::from_str(arguments).unwrap_or_default();
    let _ = policy.session_keys();
    for tool in known.iter().map(|t| t.name.as_str()).chain(["not_listed"]) {
        let verdict = policy.verdict(tool);
        let _ = verdict.label();
        let _ = verdict.rule().to_string();
        if let Verdict::Limited { limits, .. } | Verdict::Approve { limits, .. } = &verdict {
            assert!(limits.iter().all(|l: &Limit| l.max >= 1 && l.window.secs() >= 1));
            let _ = Limit::list(limits);
        }
        if let Err(refusal) = policy.check_args(tool, &arguments) {
            let _ = refusal.to_string();
            let _ = refusal.without_values();
        }
    }
}

/// Where the docstring opened at `start` is closed, honouring backslash
/// escapes as Python does.
fn docstring_end(stub: &str, start: usize) -> Option<usize> {
    let bytes = stub.as_bytes();
    let mut i = start;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' if bytes[i..].starts_with(b"\"\"\"") => return Some(i),
            _ => i += 1,
        }
    }
    None
}

/// Stub rendering and argument validation from a hostile tool: its name,
/// description and input schema go through the catalog as the bridge
/// builds it (Python name, stub, summary, compiled schema), then a call's
/// arguments through the compiled checker. Input: a JSON object with
/// `inputSchema` (and optionally `name`, `description`, `title`,
/// `outputSchema`), or any other JSON
/// value taken as the schema itself; then optionally a NUL and the
/// arguments (JSON).
///
/// Holds, besides "never panics": the stub's name is a Python identifier,
/// its docstring is closed exactly once, at its end (nothing from the
/// server closes it early), and stubs and summaries stay bounded whatever
/// the schema.
pub fn tool_schema(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let (tool_text, arguments) = text.split_once('\0').unwrap_or((text, "{}"));
    let Ok(value) = serde_json::from_str::<Value>(tool_text) else { return };
    let text_of = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_string);
    let (name, description, title, schema, output) = match &value {
        Value::Object(map) if map.contains_key("inputSchema") => (
            text_of("name").unwrap_or_else(|| "tool".to_string()),
            text_of("description"),
            text_of("title"),
            map["inputSchema"].clone(),
            map.get("outputSchema").cloned(),
        ),
        other => ("tool".to_string(), None, None, other.clone(), None),
    };
    let server = ServerTools {
        server: "fuzz".into(),
        prefixed: data.len().is_multiple_of(2),
        tools: vec![ListedTool {
            name,
            description,
            input_schema: schema,
            output_schema: output,
            title,
            annotations: None,
        }],
        allow: None,
        private: Vec::new(),
        origin: crate::Origin::Flags,
        labels: HashMap::new(),
        withheld: HashMap::new(),
        observed: HashMap::new(),
        shared_account: data.len().is_multiple_of(3),
    };
    let Ok(catalog) = Catalog::build(&[server], &CatalogLimits::default()) else { return };
    for tool in catalog.tools() {
        assert!(is_identifier(&tool.name), "{:?} is not an identifier", tool.name);
        let stub = &tool.stub;
        // One line of typed signature (names and literals quoted, so no
        // newline), then the docstring.
        let (line, _) = stub.split_once('\n').expect("a stub has a docstring");
        assert!(line.starts_with(&format!("async def {}(", tool.name)) && line.ends_with(':'), "{stub:?}");
        let signature = line.chars().count() - tool.name.chars().count();
        assert!(signature <= SIGNATURE_BOUND, "a signature of {signature} characters");
        let head = format!("{line}\n    \"\"\"\n");
        assert!(stub.starts_with(&head), "{stub:?}");
        let end = docstring_end(stub, head.len()).expect("the docstring is closed");
        assert_eq!(end + 3, stub.len(), "the docstring closes early: {stub:?}");
        // Description 2 KiB, at most 40 parameter lines and as many result
        // lines, each of a cut name, a cut type and a cut description, and
        // a few fixed lines.
        let body = stub.chars().count() - tool.name.chars().count();
        assert!(body <= SIGNATURE_BOUND + 2048 + 2 * 41 * 1200 + 1000, "a stub of {body} characters");
        let summary = tool.summary.chars().count() - tool.name.chars().count();
        assert!(summary <= SIGNATURE_BOUND + 200, "a summary of {summary} characters");
        assert!(tool.signature.params.len() <= 100, "{} parameters sent to the sandbox", tool.signature.params.len());
        if let Ok(arguments) = serde_json::from_str::<Value>(arguments)
            && let Err(problem) = tool.checker.check(&arguments, code_mode_core::defaults::MAX_ARGUMENTS)
        {
            let _ = problem.to_string();
        }
    }
}

/// The longest typed signature line, past the name: 600 characters of
/// parameters plus one more parameter (a quoted name of 66, a type of
/// 120 and a default of 42 with separators), the count of the rest, and
/// a result of 300 with ` -> ` and `(observed)`.
const SIGNATURE_BOUND: usize = 600 + (66 + 2 + 120 + 3 + 42 + 2) + 24 + 300 + 20 + 200;

#[cfg(test)]
mod tests {
    fn replay(target: &str, run: fn(&[u8])) {
        let dir = format!("{}/../../fuzz/seeds/{target}", env!("CARGO_MANIFEST_DIR"));
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{dir}: {e}")) {
            run(&std::fs::read(entry.unwrap().path()).unwrap());
            seen += 1;
        }
        assert!(seen > 0, "no inputs in {dir}");
    }

    /// The committed seeds and crash regressions of `fuzz/seeds/`.
    #[test]
    fn the_committed_fuzz_inputs_of_the_loaders_and_stubs_pass() {
        replay("servers_config", super::servers_config);
        replay("policy", super::policy);
        replay("tool_schema", super::tool_schema);
    }
}
