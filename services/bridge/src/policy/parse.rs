//! Reading a policy: the file's JSON walked key by key, each value checked
//! against the format (see the [parent module](super)), each error naming
//! the file, the JSON path and the reason.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::*;

/// Why a policy cannot be used; each names the file, and each but the first
/// two the JSON path of the offending value. All of them stop startup.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The file could not be read.
    #[error("{file}: cannot read the policy: {source}")]
    Read {
        /// The file.
        file: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Not JSON.
    #[error("{file}: line {line}, column {column}: the policy is not valid JSON: {reason}")]
    Syntax {
        /// The file.
        file: String,
        /// Where (1-based).
        line: usize,
        /// Where (1-based).
        column: usize,
        /// What the parser said.
        reason: String,
    },
    /// A key the format does not have.
    #[error("{file}: {path}: unknown key {key:?} (expected one of: {expected})")]
    UnknownKey {
        /// The file.
        file: String,
        /// The path of the key itself.
        path: String,
        /// The key.
        key: String,
        /// The keys allowed there.
        expected: String,
    },
    /// A value of the wrong kind or out of range.
    #[error("{file}: {path}: {reason}")]
    Invalid {
        /// The file.
        file: String,
        /// The path of the value.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// A tool rule names a tool no wrapped server has.
    #[error("{file}: {path}: the servers have no tool {tool:?} (they have: {known})")]
    UnknownTool {
        /// The file.
        file: String,
        /// The path of the rule.
        path: String,
        /// The name.
        tool: String,
        /// The tools there are.
        known: String,
    },
    /// An `args` schema does not compile.
    #[error("{file}: {path}: the argument schema does not compile: {reason}")]
    Schema {
        /// The file.
        file: String,
        /// The path of the schema.
        path: String,
        /// What the compiler said.
        reason: String,
    },
}

/// Read a policy from its JSON (`file` names it in every error; `known`:
/// the tools the servers list).
pub(super) fn read(root: &Value, file: &str, known: &[ToolFacts]) -> Result<Policy, PolicyError> {
    Parser { file, known, counters: HashMap::new() }.policy(root)
}

/// Walks the JSON and keeps track of where it is.
struct Parser<'a> {
    file: &'a str,
    known: &'a [ToolFacts],
    /// Each counter's window and scope, and where they were first given.
    counters: HashMap<String, (Window, Scope, String)>,
}

/// Escape one token of a JSON pointer.
pub(super) fn pointer_token(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl Parser<'_> {
    fn invalid(&self, path: &str, reason: impl Into<String>) -> PolicyError {
        PolicyError::Invalid { file: self.file.to_string(), path: path.to_string(), reason: reason.into() }
    }

    fn object<'v>(&self, v: &'v Value, path: &str, allowed: &[&str]) -> Result<&'v Map<String, Value>, PolicyError> {
        let Value::Object(map) = v else {
            return Err(self.invalid(path, format!("expected an object, found {}", kind(v))));
        };
        if let Some(key) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err(PolicyError::UnknownKey {
                file: self.file.to_string(),
                path: format!("{path}/{}", pointer_token(key)),
                key: key.clone(),
                expected: allowed.join(", "),
            });
        }
        Ok(map)
    }

    fn string<'v>(&self, v: &'v Value, path: &str) -> Result<&'v str, PolicyError> {
        v.as_str().ok_or_else(|| self.invalid(path, format!("expected a string, found {}", kind(v))))
    }

    fn policy(mut self, root: &Value) -> Result<Policy, PolicyError> {
        let map = self.object(
            root,
            "",
            &[
                "version",
                "default",
                "tools",
                "categories",
                "resources",
                "prompts",
                "sampling",
                "elicitation",
                "roots",
                "connect",
            ],
        )?;
        match map.get("version") {
            None => return Err(self.invalid("/version", "missing: the policy must say \"version\": \"1\"")),
            Some(Value::String(v)) if v == "1" => {}
            Some(other) => {
                return Err(self.invalid("/version", format!("version {other} is not supported (only \"1\")")));
            }
        }
        let default = match map.get("default") {
            None => Action::Deny,
            Some(v) => match self.string(v, "/default")? {
                "allow" => Action::Allow,
                "deny" => Action::Deny,
                other => return Err(self.invalid("/default", format!("{other:?} is not \"allow\" or \"deny\""))),
            },
        };
        let mut tools = BTreeMap::new();
        if let Some(v) = map.get("tools") {
            let Value::Object(entries) = v else {
                return Err(self.invalid("/tools", format!("expected an object, found {}", kind(v))));
            };
            for (written, rule) in entries {
                let path = format!("/tools/{}", pointer_token(written));
                let name = match self.known.iter().find(|t| &t.name == written) {
                    Some(t) => &t.name,
                    None => match self.known.iter().find(|t| t.aliases.contains(written)) {
                        Some(t) => &t.name,
                        None => written,
                    },
                };
                if tools.contains_key(name) {
                    return Err(self.invalid(
                        &path,
                        format!(
                            "{written:?} names the tool {name:?}, which already has a rule: give each tool one rule"
                        ),
                    ));
                }
                if !self.known.iter().any(|t| &t.name == name) {
                    let mut known: Vec<&str> = self.known.iter().map(|t| t.name.as_str()).collect();
                    known.sort_unstable();
                    let more = known.len().saturating_sub(20);
                    known.truncate(20);
                    let mut known = known.join(", ");
                    if more > 0 {
                        known.push_str(&format!(" and {more} more"));
                    }
                    return Err(PolicyError::UnknownTool {
                        file: self.file.to_string(),
                        path,
                        tool: name.clone(),
                        known,
                    });
                }
                tools.insert(name.clone(), self.rule(rule, &path, true)?);
            }
        }
        let mut categories = BTreeMap::new();
        if let Some(v) = map.get("categories") {
            let keys: Vec<&str> = Category::ALL.iter().map(|c| c.key()).collect();
            let entries = self.object(v, "/categories", &keys)?;
            for (key, rule) in entries {
                let category = Category::from_key(key).expect("checked by object()");
                categories.insert(category, self.rule(rule, &format!("/categories/{key}"), false)?);
            }
        }
        let facts = self.known.iter().map(|t| (t.name.clone(), t.annotations.categories())).collect();
        let mut resources = Vec::new();
        if let Some(v) = map.get("resources") {
            let Value::Object(entries) = v else {
                return Err(self.invalid("/resources", format!("expected an object, found {}", kind(v))));
            };
            for (pattern, rule) in entries {
                let path = format!("/resources/{}", pointer_token(pattern));
                if pattern.is_empty() || pattern.chars().count() > MAX_PATTERN_CHARS {
                    return Err(
                        self.invalid(&path, format!("a URI pattern must have 1 to {MAX_PATTERN_CHARS} characters"))
                    );
                }
                resources.push((pattern.clone(), self.access(rule, &path)?));
            }
        }
        let mut prompts = BTreeMap::new();
        if let Some(v) = map.get("prompts") {
            let Value::Object(entries) = v else {
                return Err(self.invalid("/prompts", format!("expected an object, found {}", kind(v))));
            };
            for (name, rule) in entries {
                let path = format!("/prompts/{}", pointer_token(name));
                prompts.insert(name.clone(), self.access(rule, &path)?);
            }
        }
        let mut asks = BTreeMap::new();
        for kind in Ask::ALL {
            if let Some(v) = map.get(kind.key()) {
                asks.insert(kind, self.access(v, &format!("/{}", kind.key()))?);
            }
        }
        let connect = map.get("connect").map(|v| self.access(v, "/connect")).transpose()?;
        Ok(Policy {
            source: self.file.to_string(),
            default,
            tools,
            categories,
            facts,
            resources,
            prompts,
            asks,
            connect,
        })
    }

    /// A rule of `resources`, `prompts`, `sampling`, `elicitation` or
    /// `roots`: `action` (`allow` or `deny`, `allow` when absent) and
    /// `reason`.
    fn access(&self, v: &Value, path: &str) -> Result<Access, PolicyError> {
        let map = self.object(v, path, &["action", "reason"])?;
        let allow = match map.get("action") {
            None => true,
            Some(v) => match self.string(v, &format!("{path}/action"))? {
                "allow" => true,
                "deny" => false,
                other => {
                    return Err(self.invalid(
                        &format!("{path}/action"),
                        format!("{other:?} is not \"allow\" or \"deny\" (only tools take approvals and limits)"),
                    ));
                }
            },
        };
        let reason = self.reason(map.get("reason"), path)?;
        Ok(Access { allow, reason })
    }

    /// A rule's `reason` (at `path`/reason), if it has one: 1 to
    /// [`MAX_REASON_CHARS`] characters.
    fn reason(&self, v: Option<&Value>, path: &str) -> Result<Option<String>, PolicyError> {
        let Some(v) = v else { return Ok(None) };
        let at = format!("{path}/reason");
        let text = self.string(v, &at)?;
        if text.trim().is_empty() || text.chars().count() > MAX_REASON_CHARS {
            return Err(self.invalid(&at, format!("a reason must have 1 to {MAX_REASON_CHARS} characters")));
        }
        Ok(Some(text.to_string()))
    }

    fn rule(&mut self, v: &Value, path: &str, tool: bool) -> Result<Rule, PolicyError> {
        let allowed: &[&str] = if tool {
            &["action", "reason", "limits", "args", "record_args", "approvers", "self_approve", "ask_client"]
        } else {
            &["action", "reason", "limits", "approvers", "self_approve", "ask_client"]
        };
        let map = self.object(v, path, allowed)?;
        let action = match map.get("action") {
            None => Action::Allow,
            Some(v) => match self.string(v, &format!("{path}/action"))? {
                "allow" => Action::Allow,
                "deny" => Action::Deny,
                "approve" => Action::Approve,
                other => {
                    return Err(self.invalid(
                        &format!("{path}/action"),
                        format!("{other:?} is not one of \"allow\", \"deny\", \"approve\""),
                    ));
                }
            },
        };
        let reason = self.reason(map.get("reason"), path)?;
        let mut limits = Vec::new();
        if let Some(v) = map.get("limits") {
            let at = format!("{path}/limits");
            let Value::Array(items) = v else {
                return Err(self.invalid(&at, format!("expected an array of limits, found {}", kind(v))));
            };
            if action == Action::Deny && !items.is_empty() {
                return Err(self.invalid(&at, "a denied tool is never called: limits go with allow or approve"));
            }
            for (i, item) in items.iter().enumerate() {
                limits.push(self.limit(item, &format!("{at}/{i}"))?);
            }
        }
        let args = match map.get("args") {
            None => None,
            Some(schema) => {
                let at = format!("{path}/args");
                if !schema.is_object() {
                    return Err(self.invalid(&at, format!("expected a JSON Schema object, found {}", kind(schema))));
                }
                let validator = jsonschema::validator_for(schema).map_err(|e| PolicyError::Schema {
                    file: self.file.to_string(),
                    path: at,
                    reason: e.to_string(),
                })?;
                Some(validator)
            }
        };
        let record_args = match map.get("record_args") {
            None => false,
            Some(Value::Bool(b)) => *b,
            Some(other) => {
                return Err(self.invalid(
                    &format!("{path}/record_args"),
                    format!("expected true or false, found {}", kind(other)),
                ));
            }
        };
        let team = self.team(map, path, action)?.map(|team| Team { reason: reason.clone(), ..team });
        Ok(Rule { action, team, reason, limits, args, record_args })
    }

    /// `approvers`, `self_approve` and `ask_client` of a rule: only with
    /// `approve`, and the last two only with `approvers`.
    fn team(&mut self, map: &Map<String, Value>, path: &str, action: Action) -> Result<Option<Team>, PolicyError> {
        let flag = |this: &Self, key: &str| match map.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => {
                Err(this.invalid(&format!("{path}/{key}"), format!("expected true or false, found {}", kind(other))))
            }
        };
        let self_approve = flag(self, "self_approve")?;
        let ask_client = flag(self, "ask_client")?;
        let Some(v) = map.get("approvers") else {
            if let Some(key) = ["self_approve", "ask_client"].into_iter().find(|k| map.contains_key(*k)) {
                return Err(self.invalid(&format!("{path}/{key}"), "goes with \"approvers\": name who approves"));
            }
            return Ok(None);
        };
        let at = format!("{path}/approvers");
        if action != Action::Approve {
            return Err(self.invalid(&at, "approvers go with \"action\": \"approve\""));
        }
        let Value::Array(items) = v else {
            return Err(self.invalid(&at, format!("expected an array of names and \"group:NAME\"s, found {}", kind(v))));
        };
        if items.is_empty() || items.len() > MAX_APPROVERS {
            return Err(self.invalid(&at, format!("name 1 to {MAX_APPROVERS} approvers")));
        }
        let mut approvers = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let text = self.string(item, &format!("{at}/{i}"))?;
            let approver = Approver::parse(text).ok_or_else(|| {
                self.invalid(
                    &format!("{at}/{i}"),
                    format!("{text:?} is neither a name nor \"group:NAME\" (1 to 128 characters, no spaces)"),
                )
            })?;
            approvers.push(approver);
        }
        Ok(Some(Team {
            approvers,
            self_approve: self_approve.unwrap_or(false),
            ask_client: ask_client.unwrap_or(false),
            reason: None,
        }))
    }

    fn limit(&mut self, v: &Value, path: &str) -> Result<Limit, PolicyError> {
        let map = self.object(v, path, &["counter", "window", "max", "scope"])?;
        let field = |key: &str| {
            map.get(key)
                .ok_or_else(|| self.invalid(&format!("{path}/{key}"), format!("missing: a limit needs {key:?}")))
        };
        let at = format!("{path}/counter");
        let counter = self.string(field("counter")?, &at)?.to_string();
        let counter_ok = !counter.is_empty()
            && counter.len() <= MAX_COUNTER_CHARS
            && counter.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !counter_ok {
            return Err(self.invalid(
                &at,
                format!("{counter:?} is not a counter name (1 to {MAX_COUNTER_CHARS} of A-Z a-z 0-9 _ -)"),
            ));
        }
        let at = format!("{path}/window");
        let window = match field("window")? {
            Value::String(s) => match s.as_str() {
                "second" => Window(1),
                "minute" => Window(60),
                "hour" => Window(3600),
                "day" => Window(86_400),
                other => {
                    return Err(self.invalid(
                        &at,
                        format!("{other:?} is not a window: use second, minute, hour, day or a number of seconds"),
                    ));
                }
            },
            Value::Number(n) => match n.as_u64().and_then(Window::from_secs) {
                Some(w) => w,
                None => return Err(self.invalid(&at, format!("{n} is not a whole number of seconds of at least 1"))),
            },
            other => {
                return Err(
                    self.invalid(&at, format!("expected a window name or a number of seconds, found {}", kind(other)))
                );
            }
        };
        let at = format!("{path}/max");
        let max = match field("max")?.as_u64() {
            Some(n) if n >= 1 => n,
            _ => return Err(self.invalid(&at, "max must be a whole number of at least 1")),
        };
        let scope = match map.get("scope") {
            None => Scope::Grant,
            Some(v) => {
                let at = format!("{path}/scope");
                match self.string(v, &at)? {
                    "grant" => Scope::Grant,
                    "global" => Scope::Global,
                    "identity" => Scope::Identity,
                    other => return Err(self.invalid(&at, format!("{other:?} is not \"grant\" or \"global\""))),
                }
            }
        };
        if let Some((w, s, first)) = self.counters.get(&counter) {
            if (*w, *s) != (window, scope) {
                return Err(self.invalid(
                    path,
                    format!("counter {counter:?} is shared with {first}, so it needs the same window and scope"),
                ));
            }
        } else {
            self.counters.insert(counter.clone(), (window, scope, path.to_string()));
        }
        Ok(Limit { counter, window, max, scope })
    }
}

impl Policy {
    /// Why a caller without an account at this per-identity server is
    /// refused instead of asked to connect one: the `connect` rule's
    /// reason when it denies; `None` (ask) when it allows or is absent.
    /// `default` does not apply: asking to connect sends nothing to the
    /// server.
    pub fn connect_refused(&self) -> Option<String> {
        let access = self.connect.as_ref().filter(|a| !a.allow)?;
        Some(
            access
                .reason
                .clone()
                .unwrap_or_else(|| "the policy refuses calls of identities without an account here".into()),
        )
    }
}

#[cfg(test)]
mod connect_tests {
    use super::*;

    fn parsed(text: &str) -> Result<Policy, PolicyError> {
        Policy::parse(text, "p.json", &[])
    }

    #[test]
    fn a_connect_rule_that_denies_refuses_with_its_reason_and_without_one_callers_are_asked_whatever_the_default() {
        let deny =
            r#"{"version": "1", "default": "allow", "connect": {"action": "deny", "reason": "use the shared desk"}}"#;
        assert_eq!(parsed(deny).unwrap().connect_refused().as_deref(), Some("use the shared desk"));
        let bare = r#"{"version": "1", "default": "allow", "connect": {"action": "deny"}}"#;
        assert!(parsed(bare).unwrap().connect_refused().unwrap().contains("without an account"));
        let allow = r#"{"version": "1", "default": "deny", "connect": {"action": "allow"}}"#;
        assert_eq!(parsed(allow).unwrap().connect_refused(), None);
        assert_eq!(parsed(r#"{"version": "1", "default": "deny"}"#).unwrap().connect_refused(), None);
        let wrong = parsed(r#"{"version": "1", "default": "allow", "connect": "deny"}"#).unwrap_err().to_string();
        assert!(wrong.contains("/connect"), "{wrong}");
    }
}
