//! The `--config FILE` of several wrapped servers, in the `mcpServers` shape
//! MCP clients already use.
//!
//! It owns reading and checking that file and turning each entry into a
//! [`WrappedServer`]. A local server has `command`, `args` and `env` (values
//! as written, `${VAR}` expanded from code-mode's own environment); a remote
//! one, reached over streamable HTTP, has `url` and `headers` (values
//! expanded the same way, so secrets stay out of the file) and may have
//! `auth`, how code-mode gets an access token for it (read by
//! [`code_mode_upstream_auth::AuthSpec`]). Both take
//! `allow`, `private` (`true` for every kept tool, or a list), `policy`
//! (the path of a [`crate::policy`] file, relative to this file's folder, or
//! the policy itself as an object in the same shape, see
//! [`crate::PolicySource`]) and `type`
//! (`"stdio"` for a local server, `"http"` or `"streamable-http"` for a
//! remote one). Every error names the file, and the entry and key when there is one; server
//! names are checked here (non-empty words of letters, digits, `_` and `-`,
//! each used once — a repeated JSON key is caught, not silently dropped).
//! Python-name clashes between the servers' tools are caught later, by the
//! catalog, once the tools are listed; so is a policy (file or inline), which
//! is read against the tools its server lists: an inline policy's errors
//! name it as `<this file> mcpServers.<entry>.policy`, then the JSON path
//! inside it and the reason.

use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde_json::Value;

use crate::server::{HttpSpec, ServerSpec, StdioSpec, Transport};
use crate::{PolicySource, WrappedServer};

/// A `private` list holding only this name marks every kept tool of the
/// server private (what `"private": true` means).
pub const ALL_TOOLS: &str = "*";

/// Headers the MCP transport sets itself; `headers` may not hold them.
const TRANSPORT_HEADERS: &[&str] = &["accept", "mcp-session-id", "mcp-protocol-version", "last-event-id"];

/// Why the config file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file cannot be read.
    #[error("{file}: cannot read the config file: {source}")]
    Read {
        /// The file.
        file: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not JSON of the expected shape.
    #[error("{file}: line {line} column {column}: {reason}")]
    Json {
        /// The file.
        file: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What serde_json said.
        reason: String,
    },
    /// A top-level key other than `mcpServers`.
    #[error("{file}: unknown top-level key {key:?} (the file holds only \"mcpServers\")")]
    UnknownTopKey {
        /// The file.
        file: PathBuf,
        /// The key.
        key: String,
    },
    /// No `mcpServers`, or no entry in it.
    #[error("{file}: no servers: the file must hold \"mcpServers\" with at least one entry")]
    NoServers {
        /// The file.
        file: PathBuf,
    },
    /// A server name that is empty or not made of letters, digits, `_`, `-`.
    #[error("{file}: server {entry:?}: a server name must be a non-empty word of ASCII letters, digits, '_' or '-'")]
    BadName {
        /// The file.
        file: PathBuf,
        /// The name.
        entry: String,
    },
    /// A server name used twice.
    #[error("{file}: server {entry:?} appears more than once in mcpServers")]
    Duplicate {
        /// The file.
        file: PathBuf,
        /// The name.
        entry: String,
    },
    /// A key this version does not know.
    #[error(
        "{file}: server {entry:?}: unknown key {key:?} (known: command, args, env, url, headers, auth, allow, private, policy, type)"
    )]
    UnknownKey {
        /// The file.
        file: PathBuf,
        /// The entry.
        entry: String,
        /// The key.
        key: String,
    },
    /// Keys of a local and of a remote server in one entry.
    #[error("{file}: server {entry:?}: key {key:?}: {why}")]
    Conflict {
        /// The file.
        file: PathBuf,
        /// The entry.
        entry: String,
        /// The key.
        key: String,
        /// What is wrong.
        why: &'static str,
    },
    /// A header name or value that cannot be sent.
    #[error("{file}: server {entry:?}: key \"headers\".{header}: {why}")]
    BadHeader {
        /// The file.
        file: PathBuf,
        /// The entry.
        entry: String,
        /// The header.
        header: String,
        /// What is wrong (never the value, which may be a secret).
        why: String,
    },
    /// An entry with neither `command` nor `url`.
    #[error(
        "{file}: server {entry:?}: key \"command\" is missing (the program to start; or \"url\" for a remote server)"
    )]
    MissingCommand {
        /// The file.
        file: PathBuf,
        /// The entry.
        entry: String,
    },
    /// A value of the wrong type.
    #[error("{file}: server {entry:?}: key {key:?}: expected {expected}")]
    BadValue {
        /// The file.
        file: PathBuf,
        /// The entry.
        entry: String,
        /// The key (empty for the entry itself).
        key: String,
        /// What was expected.
        expected: &'static str,
    },
    /// `${VAR}` names a variable code-mode's environment does not have.
    #[error("{file}: server {entry:?}: key {section:?}.{key}: ${{{var}}} is not set in code-mode's environment")]
    EnvUnset {
        /// The file.
        file: PathBuf,
        /// The entry.
        entry: String,
        /// `env` or `headers`.
        section: &'static str,
        /// The env or header key.
        key: String,
        /// The variable.
        var: String,
    },
    /// A bad `auth` block (the key inside it and why; never a value).
    #[error("{file}: server {entry:?}: {error}")]
    BadAuth {
        /// The file.
        file: PathBuf,
        /// The entry.
        entry: String,
        /// The key and why.
        error: code_mode_upstream_auth::SpecError,
    },
    /// A malformed `${...}`.
    #[error("{file}: server {entry:?}: key {section:?}.{key}: {why}")]
    BadReference {
        /// The file.
        file: PathBuf,
        /// The entry.
        entry: String,
        /// `env` or `headers`.
        section: &'static str,
        /// The env or header key.
        key: String,
        /// What is wrong.
        why: String,
    },
}

/// Read `file` and turn its entries into wrapped servers, in file order,
/// expanding `${VAR}` from this process's environment.
pub fn load(file: &Path) -> Result<Vec<WrappedServer>, ConfigError> {
    let text =
        std::fs::read_to_string(file).map_err(|source| ConfigError::Read { file: file.to_path_buf(), source })?;
    parse(file, &text, |name| std::env::var(name).ok())
}

/// Parse the text of `file`; `lookup` answers `${VAR}` references.
pub fn parse(
    file: &Path,
    text: &str,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<Vec<WrappedServer>, ConfigError> {
    let top: Top = serde_json::from_str(text).map_err(|e| {
        // serde_json ends its message with the position, given apart here.
        let message = e.to_string();
        let at = format!(" at line {} column {}", e.line(), e.column());
        let reason = message.strip_suffix(&at).unwrap_or(&message).to_string();
        ConfigError::Json { file: file.to_path_buf(), line: e.line(), column: e.column(), reason }
    })?;
    if let Some(key) = top.unknown.into_iter().next() {
        return Err(ConfigError::UnknownTopKey { file: file.to_path_buf(), key });
    }
    let entries = top.servers.unwrap_or_default();
    if entries.is_empty() {
        return Err(ConfigError::NoServers { file: file.to_path_buf() });
    }
    let mut seen = HashSet::new();
    let mut servers = Vec::with_capacity(entries.len());
    for (name, value) in entries {
        if !is_server_name(&name) {
            return Err(ConfigError::BadName { file: file.to_path_buf(), entry: name });
        }
        if !seen.insert(name.clone()) {
            return Err(ConfigError::Duplicate { file: file.to_path_buf(), entry: name });
        }
        servers.push(Entry { file, name: &name }.server(&value, &lookup)?);
    }
    Ok(servers)
}

/// True for a usable server name: non-empty ASCII letters, digits, `_`, `-`.
pub fn is_server_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// One entry being checked, for its error messages.
struct Entry<'a> {
    file: &'a Path,
    name: &'a str,
}

impl Entry<'_> {
    fn server(&self, value: &Value, lookup: &impl Fn(&str) -> Option<String>) -> Result<WrappedServer, ConfigError> {
        let Value::Object(map) = value else {
            return Err(self.bad("", "an object with \"command\" or \"url\""));
        };
        let mut command = None;
        let mut url = None;
        let mut args = None;
        let mut set_env = None;
        let mut headers = Vec::new();
        let mut remote_type = None;
        let mut allow = None;
        let mut private = Vec::new();
        let mut private_all = false;
        let mut policy = None;
        let mut auth = None;
        for (key, v) in map {
            match key.as_str() {
                "command" => match v {
                    Value::String(s) if !s.is_empty() => command = Some(s.clone()),
                    _ => return Err(self.bad(key, "a non-empty string")),
                },
                "url" => match v {
                    Value::String(s) if s.starts_with("http://") || s.starts_with("https://") => url = Some(s.clone()),
                    _ => return Err(self.bad(key, "an http:// or https:// URL")),
                },
                "args" => args = Some(self.strings(key, v)?),
                "env" => set_env = Some(self.values("env", v, lookup)?),
                "headers" => headers = self.headers(v, lookup)?,
                "auth" => {
                    let base = self.file.parent().unwrap_or(Path::new("."));
                    let spec = code_mode_upstream_auth::AuthSpec::from_json(v, lookup, base).map_err(|error| {
                        ConfigError::BadAuth { file: self.file.to_path_buf(), entry: self.name.to_string(), error }
                    })?;
                    auth = Some(spec);
                }
                "allow" => allow = Some(self.strings(key, v)?),
                "private" => match v {
                    Value::Bool(all) => private_all = *all,
                    _ => {
                        private = self.strings(key, v).map_err(|_| self.bad(key, "true, false or a list of strings"))?
                    }
                },
                "policy" => match v {
                    Value::String(s) if !s.is_empty() => {
                        policy = Some(PolicySource::File(self.file.parent().unwrap_or(Path::new(".")).join(s)));
                    }
                    Value::Object(_) => {
                        let origin = format!("{} mcpServers.{}.policy", self.file.display(), self.name);
                        policy = Some(PolicySource::Inline { value: v.clone(), origin });
                    }
                    _ => {
                        return Err(self.bad(
                            key,
                            "the path of a policy file (relative to this file's folder) or a policy object",
                        ));
                    }
                },
                "type" => match v.as_str() {
                    Some("stdio") => remote_type = Some(false),
                    Some("http" | "streamable-http") => remote_type = Some(true),
                    _ => return Err(self.bad(key, "\"stdio\", \"http\" or \"streamable-http\"")),
                },
                _ => {
                    return Err(ConfigError::UnknownKey {
                        file: self.file.to_path_buf(),
                        entry: self.name.to_string(),
                        key: key.clone(),
                    });
                }
            }
        }
        if private_all {
            private = vec![ALL_TOOLS.to_string()];
        }
        let transport = match (command, url) {
            (Some(_), Some(_)) => {
                return Err(self.conflict(
                    "url",
                    "an entry has \"command\" (a local server) or \"url\" (a remote server), not both",
                ));
            }
            (Some(command), None) => {
                if remote_type == Some(true) {
                    return Err(self.conflict("type", "a remote server (\"http\") needs \"url\", not \"command\""));
                }
                for key in ["headers", "auth"] {
                    if map.contains_key(key) {
                        return Err(self.conflict(key, "only for a remote server (\"url\"), not with \"command\""));
                    }
                }
                Transport::Stdio(StdioSpec {
                    command,
                    args: args.unwrap_or_default(),
                    pass_env: Vec::new(),
                    set_env: set_env.unwrap_or_default(),
                })
            }
            (None, Some(url)) => {
                if remote_type == Some(false) {
                    return Err(self.conflict("type", "a local server (\"stdio\") needs \"command\", not \"url\""));
                }
                for key in ["args", "env"] {
                    if map.contains_key(key) {
                        return Err(self.conflict(key, "only for a local server (\"command\"), not with \"url\""));
                    }
                }
                if auth.is_some() && headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("authorization")) {
                    return Err(self.conflict(
                        "headers",
                        "an \"Authorization\" header beside \"auth\": the login's token is the authorization",
                    ));
                }
                let auth = auth.map(|spec| {
                    let command = format!("code-mode login --config {} {}", self.file.display(), self.name);
                    code_mode_upstream_auth::Upstream::new(
                        self.name,
                        &url,
                        spec,
                        &command,
                        None,
                        code_mode_upstream_auth::Mode::Serve,
                    )
                });
                Transport::Http(HttpSpec { url, headers, auth })
            }
            (None, None) => {
                return Err(ConfigError::MissingCommand {
                    file: self.file.to_path_buf(),
                    entry: self.name.to_string(),
                });
            }
        };
        Ok(WrappedServer {
            spec: ServerSpec {
                name: self.name.to_string(),
                transport,
                start_timeout: code_mode_core::defaults::START_TIMEOUT,
            },
            allow,
            private,
            policy,
            origin: crate::Origin::Entry { file: self.file.to_path_buf(), entry: self.name.to_string() },
        })
    }

    /// The `headers` object: names HTTP can carry and the transport does
    /// not set itself, values expanded and checked.
    fn headers(
        &self,
        v: &Value,
        lookup: &impl Fn(&str) -> Option<String>,
    ) -> Result<Vec<(String, String)>, ConfigError> {
        let headers = self.values("headers", v, lookup)?;
        for (name, value) in &headers {
            let why = if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
                Some("not a valid HTTP header name".to_string())
            } else if TRANSPORT_HEADERS.iter().any(|t| name.eq_ignore_ascii_case(t)) {
                Some("set by the MCP transport itself".to_string())
            } else if http::HeaderValue::from_str(value).is_err() {
                Some("the value (after ${VAR} expansion) is not a valid HTTP header value".to_string())
            } else {
                None
            };
            if let Some(why) = why {
                return Err(ConfigError::BadHeader {
                    file: self.file.to_path_buf(),
                    entry: self.name.to_string(),
                    header: name.clone(),
                    why,
                });
            }
        }
        Ok(headers)
    }

    fn strings(&self, key: &str, v: &Value) -> Result<Vec<String>, ConfigError> {
        let Value::Array(items) = v else { return Err(self.bad(key, "a list of strings")) };
        items.iter().map(|i| i.as_str().map(str::to_string).ok_or_else(|| self.bad(key, "a list of strings"))).collect()
    }

    /// An object of strings (`env` or `headers`), `${VAR}` expanded.
    fn values(
        &self,
        section: &'static str,
        v: &Value,
        lookup: &impl Fn(&str) -> Option<String>,
    ) -> Result<Vec<(String, String)>, ConfigError> {
        let Value::Object(map) = v else { return Err(self.bad(section, "an object of strings")) };
        let mut out = Vec::with_capacity(map.len());
        for (key, value) in map {
            let Value::String(value) = value else {
                return Err(self.bad(section, "an object of strings"));
            };
            out.push((key.clone(), self.expand(section, key, value, lookup)?));
        }
        Ok(out)
    }

    /// Replace every `${VAR}` in `value`; any other `$` stays as written.
    fn expand(
        &self,
        section: &'static str,
        key: &str,
        value: &str,
        lookup: &impl Fn(&str) -> Option<String>,
    ) -> Result<String, ConfigError> {
        let mut out = String::with_capacity(value.len());
        let mut rest = value;
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let Some(end) = after.find('}') else {
                return Err(self.reference(section, key, "\"${\" without a closing \"}\""));
            };
            let var = &after[..end];
            if var.is_empty() || !var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(self.reference(section, key, &format!("${{{var}}} is not a variable name")));
            }
            let Some(found) = lookup(var) else {
                return Err(ConfigError::EnvUnset {
                    file: self.file.to_path_buf(),
                    entry: self.name.to_string(),
                    section,
                    key: key.to_string(),
                    var: var.to_string(),
                });
            };
            out.push_str(&found);
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }

    fn bad(&self, key: &str, expected: &'static str) -> ConfigError {
        ConfigError::BadValue {
            file: self.file.to_path_buf(),
            entry: self.name.to_string(),
            key: key.to_string(),
            expected,
        }
    }

    fn conflict(&self, key: &str, why: &'static str) -> ConfigError {
        ConfigError::Conflict { file: self.file.to_path_buf(), entry: self.name.to_string(), key: key.to_string(), why }
    }

    fn reference(&self, section: &'static str, key: &str, why: &str) -> ConfigError {
        ConfigError::BadReference {
            file: self.file.to_path_buf(),
            entry: self.name.to_string(),
            section,
            key: key.to_string(),
            why: why.to_string(),
        }
    }
}

/// The file's top level: `mcpServers` as (name, entry) pairs in file order,
/// repeated names kept (serde_json's `Value` would keep only the last).
struct Top {
    servers: Option<Vec<(String, Value)>>,
    unknown: Vec<String>,
}

impl<'de> Deserialize<'de> for Top {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(TopVisitor)
    }
}

struct TopVisitor;

impl<'de> Visitor<'de> for TopVisitor {
    type Value = Top;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object with \"mcpServers\"")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Top, A::Error> {
        let mut top = Top { servers: None, unknown: Vec::new() };
        while let Some(key) = map.next_key::<String>()? {
            if key == "mcpServers" {
                let Servers(mut pairs) = map.next_value()?;
                top.servers.get_or_insert_with(Vec::new).append(&mut pairs);
            } else {
                map.next_value::<IgnoredAny>()?;
                top.unknown.push(key);
            }
        }
        Ok(top)
    }
}

/// The `mcpServers` object as pairs, repeated keys kept.
struct Servers(Vec<(String, Value)>);

impl<'de> Deserialize<'de> for Servers {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(ServersVisitor)
    }
}

struct ServersVisitor;

impl<'de> Visitor<'de> for ServersVisitor {
    type Value = Servers;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object of servers by name (\"mcpServers\")")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Servers, A::Error> {
        let mut pairs = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            pairs.push((key, map.next_value()?));
        }
        Ok(Servers(pairs))
    }
}
