//! Checking a call's arguments against its tool's input schema.
//!
//! Schemas come from the wrapped server and may be hostile: too deep to walk
//! safely, invalid, or pointing at remote documents. A schema that cannot be
//! compiled safely leaves its tool out of the catalog (with a warning)
//! instead of failing startup. Remote `$ref`s are never fetched (jsonschema
//! is built without its network features).

use std::collections::BTreeSet;

use serde_json::Value;

/// Why a tool's schema was not usable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaProblem {
    /// Nested deeper than the bridge walks.
    #[error("its input schema nests {depth} levels deep, more than the {max} the bridge checks")]
    TooDeep {
        /// How deep it goes (at least).
        depth: usize,
        /// The limit.
        max: usize,
    },
    /// Not a schema the validator accepts.
    #[error("its input schema does not compile: {0}")]
    Invalid(String),
    /// Not an object schema.
    #[error("its input schema is not a JSON object")]
    NotAnObject,
}

/// Why a call's arguments were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgumentProblem {
    /// Not a JSON object.
    #[error("arguments must be a JSON object, got {0}")]
    NotAnObject(&'static str),
    /// Larger than the limit.
    #[error("arguments are {size} bytes of JSON, over the {max} byte limit")]
    TooLarge {
        /// Their size.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// Names the schema does not know.
    #[error("the schema does not name {names}; {takes}")]
    Unnamed {
        /// The unknown names, quoted (at most five).
        names: String,
        /// What the tool takes instead: `it takes "a", "b"` or
        /// `it takes no arguments` (bounded, see [`takes`]).
        takes: String,
    },
    /// The schema rejects them.
    #[error("arguments do not match the schema: {0}")]
    Invalid(String),
}

/// A compiled input schema.
pub struct ArgumentChecker {
    validator: jsonschema::Validator,
    /// The property names allowed when the schema does not say whether
    /// others are; `None` when the schema decides itself.
    named_only: Option<BTreeSet<String>>,
    /// The top-level property names, listed when a call names another.
    named: BTreeSet<String>,
    /// The top-level property names the schema does not require.
    optional: BTreeSet<String>,
}

impl std::fmt::Debug for ArgumentChecker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArgumentChecker").field("named_only", &self.named_only).finish_non_exhaustive()
    }
}

/// Nesting depth of a JSON value, counting up to `cap` (walks no deeper).
fn depth(value: &Value, cap: usize) -> usize {
    // Iterative, so a hostile schema cannot exhaust our stack.
    let mut deepest = 0;
    let mut stack = vec![(value, 1usize)];
    while let Some((v, d)) = stack.pop() {
        deepest = deepest.max(d);
        if d > cap {
            return d;
        }
        match v {
            Value::Array(items) => stack.extend(items.iter().map(|i| (i, d + 1))),
            Value::Object(map) => stack.extend(map.values().map(|i| (i, d + 1))),
            _ => {}
        }
    }
    deepest
}

impl ArgumentChecker {
    /// Compile a tool's input schema, refusing one nested deeper than `max_depth`.
    pub fn compile(schema: &Value, max_depth: usize) -> Result<Self, SchemaProblem> {
        let d = depth(schema, max_depth);
        if d > max_depth {
            return Err(SchemaProblem::TooDeep { depth: d, max: max_depth });
        }
        let obj = schema.as_object().ok_or(SchemaProblem::NotAnObject)?;
        let validator = jsonschema::validator_for(schema).map_err(|e| SchemaProblem::Invalid(e.to_string()))?;
        let decides_itself = obj.contains_key("additionalProperties")
            || obj.contains_key("patternProperties")
            || obj.contains_key("unevaluatedProperties");
        let named: BTreeSet<String> =
            obj.get("properties").and_then(Value::as_object).map(|p| p.keys().cloned().collect()).unwrap_or_default();
        let named_only = if decides_itself { None } else { Some(named.clone()) };
        let required: BTreeSet<&str> =
            obj.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
        let optional = named.iter().filter(|n| !required.contains(n.as_str())).cloned().collect();
        Ok(Self { validator, named_only, named, optional })
    }

    /// The call's arguments without each `null` given for a property the
    /// schema names, does not require and does not accept `null` for, as
    /// if that property were omitted (clients that write `null` for "not
    /// given"; SEP-2243's omit-null rule). `None` when there is nothing to
    /// drop. A required property's `null`, or one the schema accepts, is
    /// kept (and [`ArgumentChecker::check`] refuses the former).
    pub fn without_refused_nulls(&self, arguments: &Value) -> Option<Value> {
        let Value::Object(map) = arguments else { return None };
        let candidates: Vec<(&String, String)> = map
            .iter()
            .filter(|(name, value)| value.is_null() && self.optional.contains(*name))
            .map(|(name, _)| (name, format!("/{}", name.replace('~', "~0").replace('/', "~1"))))
            .collect();
        if candidates.is_empty() {
            return None;
        }
        // The validator decides whether `null` is accepted there (a
        // `$ref`, an `anyOf` with null, ...): dropped are the candidates it
        // refuses at their own place.
        let refused: BTreeSet<String> =
            self.validator.iter_errors(arguments).map(|e| e.instance_path().to_string()).collect();
        let mut kept = map.clone();
        let mut dropped = false;
        for (name, pointer) in candidates {
            if refused.contains(&pointer) {
                kept.remove(name);
                dropped = true;
            }
        }
        dropped.then_some(Value::Object(kept))
    }

    /// Check one call's arguments: an object of at most `max_bytes` of JSON,
    /// naming only what the schema names (unless it allows more), and valid.
    pub fn check(&self, arguments: &Value, max_bytes: usize) -> Result<(), ArgumentProblem> {
        let map = match arguments {
            Value::Object(m) => m,
            Value::Null => return Err(ArgumentProblem::NotAnObject("null")),
            Value::Bool(_) => return Err(ArgumentProblem::NotAnObject("a boolean")),
            Value::Number(_) => return Err(ArgumentProblem::NotAnObject("a number")),
            Value::String(_) => return Err(ArgumentProblem::NotAnObject("a string")),
            Value::Array(_) => return Err(ArgumentProblem::NotAnObject("an array")),
        };
        let size = serde_json::to_vec(arguments).map(|v| v.len()).unwrap_or(usize::MAX);
        if size > max_bytes {
            return Err(ArgumentProblem::TooLarge { size, max: max_bytes });
        }
        if let Some(named) = &self.named_only {
            let unnamed: Vec<&str> = map.keys().filter(|k| !named.contains(*k)).map(String::as_str).collect();
            if !unnamed.is_empty() {
                let names = unnamed.iter().take(5).map(|k| quoted(k)).collect::<Vec<_>>().join(", ");
                return Err(ArgumentProblem::Unnamed { names, takes: takes(named) });
            }
        }
        if let Some(e) = self.validator.iter_errors(arguments).next() {
            let at = e.instance_path().to_string();
            let unexpected_name = at.is_empty() && e.schema_path().to_string().ends_with("/additionalProperties");
            let at = if at.is_empty() { "top level".to_string() } else { at };
            // A name the schema refuses: say what it takes instead.
            let takes = if unexpected_name { format!("; {}", takes(&self.named)) } else { String::new() };
            return Err(ArgumentProblem::Invalid(format!("at {at}: {e}{takes}")));
        }
        Ok(())
    }
}

/// Longest parameter name quoted in a refusal, in characters.
const MAX_QUOTED_NAME: usize = 64;
/// Most characters of parameter names a refusal lists, so that the whole
/// refusal stays within the 500 characters a `ToolError` carries.
const MAX_LISTED_CHARS: usize = 300;

/// A name quoted for a refusal, cut to [`MAX_QUOTED_NAME`] characters (names
/// come from the code or from the server's schema: neither is trusted).
fn quoted(name: &str) -> String {
    if name.chars().count() <= MAX_QUOTED_NAME {
        format!("{name:?}")
    } else {
        let cut: String = name.chars().take(MAX_QUOTED_NAME).collect();
        format!("{cut:?}...")
    }
}

/// What a tool takes, for a refusal that names an unknown parameter: the
/// code can correct the call without reading the stub again.
fn takes(named: &BTreeSet<String>) -> String {
    if named.is_empty() {
        return "it takes no arguments".to_string();
    }
    let mut list = String::new();
    let mut shown = 0;
    for name in named {
        let name = quoted(name);
        if shown > 0 && list.chars().count() + name.chars().count() + 2 > MAX_LISTED_CHARS {
            break;
        }
        if shown > 0 {
            list.push_str(", ");
        }
        list.push_str(&name);
        shown += 1;
    }
    if named.len() > shown {
        list.push_str(&format!(" and {} more", named.len() - shown));
    }
    format!("it takes {list}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn add_schema() -> Value {
        json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
               "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]})
    }

    #[test]
    fn valid_arguments_pass() {
        let c = ArgumentChecker::compile(&add_schema(), 64).unwrap();
        c.check(&json!({"a": 1, "b": 2}), 16384).unwrap();
    }

    #[test]
    fn arguments_of_the_wrong_type_are_refused_with_their_place() {
        let c = ArgumentChecker::compile(&add_schema(), 64).unwrap();
        let e = c.check(&json!({"a": "x", "b": 2}), 16384).unwrap_err();
        assert!(matches!(&e, ArgumentProblem::Invalid(m) if m.contains("/a")), "{e}");
    }

    #[test]
    fn arguments_the_schema_does_not_name_are_refused_unless_it_allows_them() {
        let c = ArgumentChecker::compile(&add_schema(), 64).unwrap();
        let e = c.check(&json!({"a": 1, "b": 2, "extra": 3}), 16384).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the schema does not name \"extra\"; it takes \"a\", \"b\"",
            "the refusal lists what the tool takes"
        );
        let open = json!({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": true});
        ArgumentChecker::compile(&open, 64).unwrap().check(&json!({"a": "x", "z": 1}), 16384).unwrap();
    }

    #[test]
    fn a_refused_unknown_name_lists_parameters_within_a_bound_each_cut() {
        let properties: serde_json::Map<String, Value> =
            (0..30).map(|i| (format!("p{i:02}{}", "x".repeat(100)), json!({"type": "string"}))).collect();
        let schema = json!({"type": "object", "properties": properties});
        let e = ArgumentChecker::compile(&schema, 64).unwrap().check(&json!({"q": 1}), 16384).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("\"p00") && text.contains(" more"), "{text}");
        assert!(text.chars().count() < 400, "bounded: {} characters: {text}", text.chars().count());
        let none = json!({"type": "object", "properties": {}});
        let e = ArgumentChecker::compile(&none, 64).unwrap().check(&json!({"q": 1}), 16384).unwrap_err();
        assert!(e.to_string().ends_with("it takes no arguments"), "{e}");
    }

    #[test]
    fn a_null_for_an_optional_property_that_refuses_null_is_dropped_as_if_omitted() {
        let schema = json!({"type": "object", "required": ["region"], "properties": {
            "region": {"type": "string"}, "verbose": {"type": "boolean"},
            "note": {"type": ["string", "null"]}, "mode": {"anyOf": [{"type": "string"}, {"type": "null"}]}}});
        let c = ArgumentChecker::compile(&schema, 64).unwrap();
        // Refused as it stands; dropped, the call is valid.
        let call = json!({"region": "eu", "verbose": null});
        assert!(c.check(&call, 16384).is_err());
        let cleaned = c.without_refused_nulls(&call).expect("verbose: null is dropped");
        assert_eq!(cleaned, json!({"region": "eu"}));
        c.check(&cleaned, 16384).unwrap();
        // A null the schema accepts is kept and forwarded as given.
        assert_eq!(c.without_refused_nulls(&json!({"region": "eu", "note": null, "mode": null})), None);
        // A required property's null is never dropped: still refused.
        let required_null = json!({"region": null, "verbose": null});
        let cleaned = c.without_refused_nulls(&required_null).unwrap();
        assert_eq!(cleaned, json!({"region": null}));
        assert!(c.check(&cleaned, 16384).is_err(), "a required property cannot be null");
        // Nothing to drop: a name the schema does not know stays (and is refused).
        assert_eq!(c.without_refused_nulls(&json!({"region": "eu", "other": null})), None);
        assert_eq!(c.without_refused_nulls(&json!({"region": "eu", "verbose": true})), None);
    }

    #[test]
    fn oversized_arguments_are_refused() {
        let schema = json!({"type": "object", "properties": {"t": {"type": "string"}}});
        let c = ArgumentChecker::compile(&schema, 64).unwrap();
        let e = c.check(&json!({"t": "x".repeat(20_000)}), 16384).unwrap_err();
        assert!(matches!(e, ArgumentProblem::TooLarge { max: 16384, .. }), "{e}");
    }

    #[test]
    fn non_objects_are_refused() {
        let c = ArgumentChecker::compile(&add_schema(), 64).unwrap();
        assert_eq!(c.check(&json!([1, 2]), 16384).unwrap_err(), ArgumentProblem::NotAnObject("an array"));
    }

    #[test]
    fn a_schema_too_deep_or_invalid_does_not_compile() {
        let mut deep = json!({"type": "string"});
        for _ in 0..200 {
            deep = json!({"type": "object", "properties": {"n": deep}});
        }
        assert!(matches!(ArgumentChecker::compile(&deep, 64), Err(SchemaProblem::TooDeep { .. })));
        let bad = json!({"type": "object", "properties": {"a": {"type": "no-such-type"}}});
        assert!(matches!(ArgumentChecker::compile(&bad, 64), Err(SchemaProblem::Invalid(_))));
    }
}
