//! Result shapes learned from a tool's first results.
//!
//! Most servers declare no `outputSchema`, so the stub cannot say what a
//! result holds and the model's first cell guesses. The bridge looks at the
//! text code receives for a tool's first [`MAX_OBSERVED`] successful
//! results and keeps their *shape*: JSON types and object keys, never a
//! value. Shapes are bounded ([`MAX_DEPTH`] levels, [`MAX_KEYS`] keys per
//! object, [`MAX_LIST_ITEMS`] items looked at per list, [`MAX_RENDERED`]
//! characters shown). An object with many keys, or keys that do not look
//! like field names (`alice@example.com`, `/etc/hosts`, `2024-01-01`), is
//! summarised as a mapping (`dict[str, int]`), so keys that are data are
//! not shown. A string that holds JSON (an object or array) in every result
//! seen is marked `str (JSON)`, for servers that nest JSON in text.
//!
//! The owner is [`Shapes`], a cheap `Clone` handle over one map. It writes
//! each learned shape to the state store under the pseudo-session
//! [`SHAPES_SESSION`], so a restarted bridge (or another replica over the
//! same JetStream bucket) starts with what was learned; a store that cannot
//! be reached only loses hints (logged), never a call.
//!
//! A tool labelled private learns nothing: its results may hold private
//! data, and the catalog with the stubs is shown to every session,
//! including ones the private-data rule would keep from that data (see
//! `docs/architecture.md#threat-model`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use code_mode_core::state::SessionStore;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Results of one tool looked at; after them its shape stays as it is.
pub const MAX_OBSERVED: u32 = 8;
/// Levels of nesting kept; deeper values show only their kind.
pub const MAX_DEPTH: usize = 4;
/// Keys of an object kept as fields; more make it a mapping.
pub const MAX_KEYS: usize = 12;
/// Items of a list looked at.
pub const MAX_LIST_ITEMS: usize = 8;
/// Longest key kept as a field name.
const MAX_KEY_CHARS: usize = 40;
/// Members of a union kept; more make it `Any`.
const MAX_UNION: usize = 3;
/// Characters of a rendered shape.
pub const MAX_RENDERED: usize = 240;
/// Largest text parsed to learn from (larger results teach nothing).
const MAX_PARSED_BYTES: usize = 1024 * 1024;

/// The pseudo-session of the state store that holds learned shapes
/// (frontends make UUID session ids, so none can clash with it).
pub const SHAPES_SESSION: &str = "_shapes";

/// The shape of a JSON value: types and keys, never values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub enum Shape {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool,
    /// A whole number.
    Int,
    /// Any number.
    Float,
    /// A string; `json`: every one seen held a JSON object or array.
    Str {
        /// Every string seen here held JSON.
        json: bool,
    },
    /// A list; `item` is `None` while only empty lists were seen.
    List {
        /// The shape of its items.
        item: Option<Box<Shape>>,
    },
    /// An object with named fields.
    Object {
        /// Its fields, in first-seen order.
        fields: Vec<Field>,
    },
    /// An object used as a mapping: its keys are data.
    Map {
        /// The shape of its values.
        value: Box<Shape>,
    },
    /// Several kinds were seen here.
    Union {
        /// The kinds, at most [`MAX_UNION`].
        of: Vec<Shape>,
    },
    /// Anything (too many kinds, or too deep to look at).
    Any,
}

/// One field of an object shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Field {
    /// Its key.
    pub name: String,
    /// Its value's shape.
    pub shape: Shape,
    /// Some result seen lacked it.
    #[serde(default)]
    pub optional: bool,
}

/// A key kept as a field name: short and shaped like an identifier.
fn is_field_name(key: &str) -> bool {
    let mut chars = key.chars();
    key.len() <= MAX_KEY_CHARS
        && chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

impl Shape {
    /// The shape of `value`.
    pub fn of(value: &Value) -> Shape {
        Self::at(value, 0)
    }

    fn at(value: &Value, depth: usize) -> Shape {
        match value {
            Value::Null => Shape::Null,
            Value::Bool(_) => Shape::Bool,
            Value::Number(n) if n.is_i64() || n.is_u64() => Shape::Int,
            Value::Number(_) => Shape::Float,
            Value::String(s) => Shape::Str { json: holds_json(s) },
            Value::Array(_) | Value::Object(_) if depth >= MAX_DEPTH => match value {
                Value::Array(_) => Shape::List { item: Some(Box::new(Shape::Any)) },
                _ => Shape::Map { value: Box::new(Shape::Any) },
            },
            Value::Array(items) => {
                let item = items.iter().take(MAX_LIST_ITEMS).map(|i| Self::at(i, depth + 1)).reduce(Shape::merge);
                Shape::List { item: item.map(Box::new) }
            }
            Value::Object(map) => {
                if map.len() > MAX_KEYS || !map.keys().all(|k| is_field_name(k)) {
                    let value = map
                        .values()
                        .take(MAX_LIST_ITEMS)
                        .map(|v| Self::at(v, depth + 1))
                        .reduce(Shape::merge)
                        .unwrap_or(Shape::Any);
                    return Shape::Map { value: Box::new(value) };
                }
                let fields = map
                    .iter()
                    .map(|(k, v)| Field { name: k.clone(), shape: Self::at(v, depth + 1), optional: false })
                    .collect();
                Shape::Object { fields }
            }
        }
    }

    /// The shape of the JSON object or array a result's text holds. `None`
    /// for plain text (the description already says a result is a str:
    /// learning it would only rebuild the catalog) and for text too large
    /// to look at.
    pub fn of_text(text: &str) -> Option<Shape> {
        if text.len() > MAX_PARSED_BYTES {
            return None;
        }
        let trimmed = text.trim_start();
        if !(trimmed.starts_with('{') || trimmed.starts_with('[')) {
            return None;
        }
        serde_json::from_str::<Value>(text).ok().map(|value| Shape::of(&value))
    }

    /// One shape covering both.
    pub fn merge(self, other: Shape) -> Shape {
        use Shape::*;
        match (self, other) {
            (a, b) if a == b => a,
            (Any, _) | (_, Any) => Any,
            (Int, Float) | (Float, Int) => Float,
            (Str { json: a }, Str { json: b }) => Str { json: a && b },
            (List { item: None }, List { item }) | (List { item }, List { item: None }) => List { item },
            (List { item: Some(a) }, List { item: Some(b) }) => List { item: Some(Box::new(a.merge(*b))) },
            (Object { fields: a }, Object { fields: b }) => merge_fields(a, b),
            (Map { value: a }, Map { value: b }) => Map { value: Box::new(a.merge(*b)) },
            (Map { value }, Object { fields }) | (Object { fields }, Map { value }) => {
                let merged = fields.into_iter().map(|f| f.shape).fold(*value, Shape::merge);
                Map { value: Box::new(merged) }
            }
            (Union { of }, other) | (other, Union { of }) => union(of, other),
            (a, b) => union(vec![a], b),
        }
    }

    /// The shape as the stub and description show it: `{id: int, tags?:
    /// list[str]}`, `dict[str, int]`, `str (JSON)`, cut at
    /// [`MAX_RENDERED`] characters.
    pub fn render(&self) -> String {
        code_mode_core::text::cut_chars(&self.text(), MAX_RENDERED, code_mode_core::text::MODEL_MARK)
    }

    fn text(&self) -> String {
        match self {
            Shape::Null => "None".into(),
            Shape::Bool => "bool".into(),
            Shape::Int => "int".into(),
            Shape::Float => "float".into(),
            Shape::Str { json: true } => "str (JSON)".into(),
            Shape::Str { json: false } => "str".into(),
            Shape::List { item: None } => "list".into(),
            Shape::List { item: Some(item) } if **item == Shape::Any => "list".into(),
            Shape::List { item: Some(item) } => format!("list[{}]", item.text()),
            Shape::Object { fields } if fields.is_empty() => "{}".into(),
            Shape::Object { fields } => {
                let shown: Vec<String> = fields
                    .iter()
                    .map(|f| format!("{}{}: {}", f.name, if f.optional { "?" } else { "" }, f.shape.text()))
                    .collect();
                format!("{{{}}}", shown.join(", "))
            }
            Shape::Map { value } if **value == Shape::Any => "dict".into(),
            Shape::Map { value } => format!("dict[str, {}]", value.text()),
            Shape::Union { of } => of.iter().map(Shape::text).collect::<Vec<_>>().join(" | "),
            Shape::Any => "Any".into(),
        }
    }

    /// Top-level fields of an object shape whose strings held JSON in every
    /// result seen (what a declared result schema cannot say).
    pub fn json_fields(&self) -> Vec<&str> {
        match self {
            Shape::Object { fields } => fields
                .iter()
                .filter(|f| matches!(f.shape, Shape::Str { json: true }))
                .map(|f| f.name.as_str())
                .collect(),
            _ => Vec::new(),
        }
    }
}

/// A JSON object or array, in a string short enough to look at.
fn holds_json(s: &str) -> bool {
    let trimmed = s.trim();
    s.len() <= MAX_PARSED_BYTES
        && ((trimmed.starts_with('{') && trimmed.ends_with('}'))
            || (trimmed.starts_with('[') && trimmed.ends_with(']')))
        && serde_json::from_str::<serde::de::IgnoredAny>(trimmed).is_ok()
}

fn merge_fields(a: Vec<Field>, b: Vec<Field>) -> Shape {
    let mut fields = a;
    let mut seen_in_b = vec![false; fields.len()];
    for field in b {
        match fields.iter().position(|f| f.name == field.name) {
            Some(i) => {
                let old = std::mem::replace(&mut fields[i].shape, Shape::Any);
                fields[i].shape = old.merge(field.shape);
                fields[i].optional |= field.optional;
                seen_in_b[i] = true;
            }
            None => fields.push(Field { optional: true, ..field }),
        }
    }
    for (field, seen) in fields.iter_mut().zip(seen_in_b) {
        if !seen {
            field.optional = true;
        }
    }
    if fields.len() > MAX_KEYS {
        let value = fields.into_iter().map(|f| f.shape).reduce(Shape::merge).unwrap_or(Shape::Any);
        return Shape::Map { value: Box::new(value) };
    }
    Shape::Object { fields }
}

fn union(mut of: Vec<Shape>, other: Shape) -> Shape {
    let other = match other {
        Shape::Union { of: more } => more,
        one => vec![one],
    };
    for shape in other {
        // A kind already there absorbs it (two objects merge into one).
        let same_kind = of.iter().position(|s| std::mem::discriminant(s) == std::mem::discriminant(&shape));
        match same_kind {
            Some(i) => {
                let old = std::mem::replace(&mut of[i], Shape::Any);
                of[i] = old.merge(shape);
            }
            None => of.push(shape),
        }
    }
    if of.len() > MAX_UNION { Shape::Any } else { Shape::Union { of } }
}

/// What is known of one tool's results.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Learned {
    /// Their shape so far.
    pub shape: Shape,
    /// How many results it was learned from.
    pub seen: u32,
}

/// What was learned of each server's tools: server name, then the tool's
/// name as the server lists it (nested, so a lookup borrows both names).
type Learnt = HashMap<String, HashMap<String, Learned>>;

/// The learned shapes of every tool (a cheap `Clone` handle over one map),
/// written through to the state store.
#[derive(Debug, Clone)]
pub struct Shapes {
    inner: Arc<Mutex<Learnt>>,
    store: Option<SessionStore>,
    /// The writes to the store on their way (the bridge's tracker, so that
    /// shutdown waits for them).
    writes: tokio_util::task::TaskTracker,
}

impl Shapes {
    /// Shapes kept in `store` (none: in this process only).
    pub fn new(store: Option<SessionStore>) -> Self {
        Self::tracked(store, Default::default())
    }

    /// [`Shapes::new`], its writes tracked by `writes`.
    pub(crate) fn tracked(store: Option<SessionStore>, writes: tokio_util::task::TaskTracker) -> Self {
        Self { inner: Default::default(), store, writes }
    }

    /// Wait for the writes on their way (of shapes with a tracker of their
    /// own).
    #[cfg(test)]
    async fn written(&self) {
        self.writes.close();
        self.writes.wait().await;
        self.writes.reopen();
    }

    /// Read what the store holds for these tools (`(server, tool)`), so a
    /// restarted bridge shows what it learned before. A store that cannot
    /// be read leaves them unknown (logged).
    pub async fn load(&self, tools: impl IntoIterator<Item = (String, String)>) {
        let Some(store) = &self.store else { return };
        for (server, tool) in tools {
            match store.get(SHAPES_SESSION, &entry_name(&server, &tool)).await {
                Ok(Some(entry)) => match serde_json::from_value::<Stored>(entry.value) {
                    Ok(stored) if stored.server == server && stored.tool == tool => {
                        code_mode_core::sync::lock(&self.inner).entry(server).or_default().insert(tool, stored.learned);
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!(%server, %tool, error = %e, "a stored result shape is unreadable"),
                },
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "learned result shapes could not be read: the stubs show none yet");
                    return;
                }
            }
        }
    }

    /// The learned shape of a tool, if any.
    pub fn get(&self, server: &str, tool: &str) -> Option<Shape> {
        code_mode_core::sync::lock(&self.inner).get(server)?.get(tool).map(|l| l.shape.clone())
    }

    /// Whether a result of this tool may still teach something (fewer than
    /// [`MAX_OBSERVED`] results learned from): asked on every successful
    /// call before its text is looked at, without allocating.
    pub fn learning(&self, server: &str, tool: &str) -> bool {
        let map = code_mode_core::sync::lock(&self.inner);
        map.get(server).and_then(|tools| tools.get(tool)).is_none_or(|l| l.seen < MAX_OBSERVED)
    }

    /// Learn from one successful result's text (what code receives). True
    /// when what a stub shows of the tool changed (the catalog should be
    /// rebuilt): the whole shape for a tool that declares none
    /// (`declared` false), else only which string fields held JSON. The
    /// store is written in the background when that changed and once the
    /// shape is settled; a bridge killed before the write forgets only
    /// the last change, which the next results teach again.
    pub fn observe(&self, server: &str, tool: &str, text: &str, declared: bool) -> bool {
        // Parsed before the lock is taken: a large result holds up no other
        // call's.
        let Some(shape) = Shape::of_text(text) else { return false };
        let shown = |shape: &Shape| match declared {
            true => shape.json_fields().join(","),
            false => shape.render(),
        };
        let (changed, learned) = {
            let mut map = code_mode_core::sync::lock(&self.inner);
            let tools = map.entry(server.to_string()).or_default();
            if tools.get(tool).is_some_and(|l| l.seen >= MAX_OBSERVED) {
                return false;
            }
            let entry = tools.entry(tool.to_string()).or_insert(Learned { shape: Shape::Any, seen: 0 });
            // Nothing shown yet: a declared result shows no mark, an
            // undeclared one nothing at all.
            let before = match entry.seen {
                0 if declared => Some(String::new()),
                0 => None,
                _ => Some(shown(&entry.shape)),
            };
            entry.shape = match entry.seen {
                0 => shape,
                _ => std::mem::replace(&mut entry.shape, Shape::Any).merge(shape),
            };
            entry.seen += 1;
            (before.as_deref() != Some(shown(&entry.shape).as_str()), entry.clone())
        };
        // Stored when it shows something new, and once settled (so that a
        // restarted bridge learns no more of it).
        if !changed && learned.seen < MAX_OBSERVED {
            return false;
        }
        if let Some(store) = &self.store {
            let store = store.clone();
            let stored = Stored { server: server.to_string(), tool: tool.to_string(), learned };
            self.writes.spawn(async move {
                let name = entry_name(&stored.server, &stored.tool);
                let value = serde_json::to_value(&stored).unwrap_or(Value::Null);
                // The most results seen wins: two replicas learning at once
                // keep the better informed shape.
                let written = store
                    .update(SHAPES_SESSION, &name, |old| {
                        let older = old.and_then(|v| serde_json::from_value::<Stored>(v).ok());
                        match older {
                            Some(o) if o.learned.seen > stored.learned.seen => {
                                serde_json::to_value(o).unwrap_or(Value::Null)
                            }
                            _ => value.clone(),
                        }
                    })
                    .await;
                if let Err(e) = written {
                    tracing::warn!(tool = %stored.tool, error = %e, "a learned result shape could not be stored");
                }
            });
        }
        changed
    }
}

/// A learned shape as the store keeps it, naming its tool (the entry's
/// name is a hash).
#[derive(Debug, Serialize, Deserialize)]
struct Stored {
    server: String,
    tool: String,
    learned: Learned,
}

/// The store's name of a tool's entry: a hash of its server and name (names
/// may be long or hold characters keys cannot).
fn entry_name(server: &str, tool: &str) -> String {
    // FNV-1a, 64 bits: stable across processes and versions, unlike the
    // standard library's hasher.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in server.bytes().chain([0]).chain(tool.bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("shape-{hash:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn learned(results: &[Value]) -> Shape {
        results.iter().map(|r| Shape::of_text(&r.to_string()).unwrap()).reduce(Shape::merge).unwrap()
    }

    #[test]
    fn a_shape_keeps_keys_and_types_and_never_a_value() {
        let result = json!({"id": 42, "title": "secret plans", "tags": ["a", "b"], "owner": {"login": "alice", "score": 1.5}, "closed": null});
        let shape = learned(&[result]).render();
        assert_eq!(shape, "{id: int, title: str, tags: list[str], owner: {login: str, score: float}, closed: None}");
        for value in ["42", "secret", "alice", "1.5"] {
            assert!(!shape.contains(value), "{shape}");
        }
    }

    #[test]
    fn keys_that_are_data_make_a_mapping() {
        let by_mail = json!({"alice@example.com": {"unread": 3}, "bob@example.com": {"unread": 0}});
        assert_eq!(learned(&[by_mail]).render(), "dict[str, {unread: int}]");
        let many: serde_json::Map<String, Value> = (0..20).map(|i| (format!("k{i}"), json!(i))).collect();
        assert_eq!(learned(&[Value::Object(many)]).render(), "dict[str, int]");
    }

    #[test]
    fn fields_missing_from_some_results_are_optional_and_kinds_merge() {
        let shape = learned(&[json!({"a": 1, "b": "x"}), json!({"a": 2.5, "c": [1]}), json!({"a": 3, "b": null})]);
        assert_eq!(shape.render(), "{a: float, b?: str | None, c?: list[int]}");
    }

    #[test]
    fn a_string_holding_json_in_every_result_is_marked() {
        let tree = json!({"content": "[{\"name\": \"src\", \"type\": \"directory\"}]"});
        assert_eq!(learned(std::slice::from_ref(&tree)).render(), "{content: str (JSON)}");
        assert_eq!(learned(std::slice::from_ref(&tree)).json_fields(), ["content"]);
        let text = json!({"content": "hello"});
        assert_eq!(learned(&[tree, text]).render(), "{content: str}");
        // Plain text teaches nothing; text that is JSON is its shape.
        assert_eq!(Shape::of_text("Hello, world"), None);
        assert_eq!(Shape::of_text("[1, 2]").unwrap().render(), "list[int]");
        assert_eq!(Shape::of_text("{not json"), None);
    }

    #[test]
    fn a_deep_or_hostile_result_renders_bounded() {
        let mut deep = json!("leaf");
        for _ in 0..50 {
            deep = json!({ "inner": deep });
        }
        let shape = Shape::of(&deep).render();
        assert_eq!(shape, "{inner: {inner: {inner: {inner: dict}}}}");
        let fields: serde_json::Map<String, Value> =
            (0..12).map(|i| (format!("field_{i}_{}", "x".repeat(30)), json!({"a": 1, "b": [true]}))).collect();
        let wide = Shape::of(&Value::Object(fields)).render();
        assert!(wide.chars().count() <= MAX_RENDERED && wide.ends_with("..."), "{wide}");
    }

    #[tokio::test]
    async fn a_shape_is_learned_from_the_first_results_only_and_kept_in_the_store() {
        let store = SessionStore::in_memory();
        let shapes = Shapes::new(Some(store.clone()));
        assert!(shapes.observe("gh", "list_issues", r#"[{"number": 1}]"#, false));
        assert!(!shapes.observe("gh", "list_issues", r#"[{"number": 2}]"#, false), "the same shape changes nothing");
        assert!(!shapes.observe("gh", "list_issues", "plain text", false), "plain text teaches nothing");
        for _ in 2..MAX_OBSERVED {
            shapes.observe("gh", "list_issues", r#"[{"number": 3}]"#, false);
        }
        assert!(!shapes.observe("gh", "list_issues", r#"{"other": 1}"#, false), "after the first results it stays");
        assert!(!shapes.learning("gh", "list_issues"), "a call no longer looks at its result");
        assert!(shapes.learning("gh", "other") && shapes.learning("elsewhere", "list_issues"));
        // A tool that declares its result changes its stub only when a
        // string field held JSON.
        assert!(!shapes.observe("fs", "read", r#"{"content": "hello"}"#, true));
        assert!(shapes.observe("fs", "tree", r#"{"content": "[1]"}"#, true));
        assert!(!shapes.observe("fs", "tree", r#"{"content": "[2]"}"#, true));
        assert!(shapes.observe("fs", "tree", r#"{"content": "not JSON"}"#, true), "the mark goes again");
        assert_eq!(shapes.get("gh", "list_issues").unwrap().render(), "list[{number: int}]");
        // Written in the background; a new handle over the store reads it.
        let again = Shapes::new(Some(store));
        for _ in 0..100 {
            again.load([("gh".to_string(), "list_issues".to_string())]).await;
            if again.get("gh", "list_issues").is_some() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!(again.get("gh", "list_issues").unwrap().render(), "list[{number: int}]");
        assert!(again.get("gh", "other").is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn of_two_replicas_storing_one_tools_shape_the_better_informed_one_stays_whichever_writes_last() {
        let tool = || [("gh".to_string(), "list_issues".to_string())];
        for informed_last in [false, true] {
            let store = SessionStore::in_memory();
            let (informed, novice) = (Shapes::new(Some(store.clone())), Shapes::new(Some(store.clone())));
            let learn_all = || {
                for _ in 0..MAX_OBSERVED {
                    informed.observe("gh", "list_issues", r#"[{"number": 1}]"#, false);
                }
            };
            if !informed_last {
                learn_all();
                informed.written().await;
            }
            assert!(novice.observe("gh", "list_issues", r#"{"other": "x"}"#, false));
            novice.written().await;
            if informed_last {
                learn_all();
                informed.written().await;
            }
            let again = Shapes::new(Some(store));
            again.load(tool()).await;
            assert_eq!(
                again.get("gh", "list_issues").map(|s| s.render()).as_deref(),
                Some("list[{number: int}]"),
                "the shape of {MAX_OBSERVED} results stays (written {})",
                if informed_last { "last" } else { "first" }
            );
        }
    }
}
