//! What the bridge is started with: the wrapped servers and what to keep of
//! them, the limits of each call, the policies' options.

use std::path::PathBuf;
use std::time::Duration;

use code_mode_audit::AuditSink;
use code_mode_core::defaults;
use code_mode_core::state::SessionStore;

use crate::catalog::CatalogLimits;
use crate::server::{HttpSpec, ServerSpec, StdioSpec, Transport};

/// Limits the bridge enforces on each call.
#[derive(Debug, Clone, Copy)]
pub struct CallLimits {
    /// Calls per run.
    pub max_calls: u32,
    /// Time per call.
    pub call_timeout: Duration,
    /// Largest arguments object, in bytes of JSON.
    pub max_arguments: usize,
    /// Largest result, in bytes.
    pub max_result: usize,
    /// Longest refusal message, in characters.
    pub max_message_chars: usize,
    /// How long a call a policy holds for approval waits for the answer.
    pub approval_timeout: Duration,
    /// How long an identity's stateless scope lasts without a call
    /// (`--stateless-idle`, see [`scope`]).
    pub stateless_idle: Duration,
}

impl Default for CallLimits {
    fn default() -> Self {
        Self {
            max_calls: defaults::MAX_CALLS,
            call_timeout: defaults::CALL_TIMEOUT,
            max_arguments: defaults::MAX_ARGUMENTS,
            max_result: defaults::MAX_RESULT,
            max_message_chars: defaults::MAX_MESSAGE_CHARS,
            approval_timeout: defaults::APPROVAL_TIMEOUT,
            stateless_idle: defaults::STATELESS_IDLE,
        }
    }
}

/// One wrapped server and what to keep of it.
#[derive(Debug, Clone)]
pub struct WrappedServer {
    /// How to start it.
    pub spec: ServerSpec,
    /// Tool names to keep; `None` keeps all.
    pub allow: Option<Vec<String>>,
    /// Tools that may see private data (server or Python names, each one a
    /// kept tool): after a call to one of them, a session may call only
    /// private tools.
    pub private: Vec<String>,
    /// The [`policy`] for its tools (named as the server lists them), from a
    /// file or written inline in the `--config` file; `None`: every kept tool
    /// may be called.
    pub policy: Option<PolicySource>,
    /// Where these settings were written, so that an error about them
    /// points there (a flag, or a key of a config entry).
    pub origin: Origin,
}

impl WrappedServer {
    /// The local server a command line starts (`command[0]` the program,
    /// named by [`short_name`]; the rest its arguments), with the minimal
    /// environment, every tool kept, none private, no policy: what
    /// `-- COMMAND` wraps. `None` when `command` is empty.
    pub fn command(command: &[String]) -> Option<WrappedServer> {
        let (program, args) = command.split_first()?;
        Some(WrappedServer {
            spec: ServerSpec {
                name: short_name(program, args),
                transport: Transport::Stdio(StdioSpec {
                    command: program.clone(),
                    args: args.to_vec(),
                    pass_env: Vec::new(),
                    set_env: Vec::new(),
                }),
                start_timeout: defaults::START_TIMEOUT,
            },
            allow: None,
            private: Vec::new(),
            policy: None,
            origin: Origin::Flags,
        })
    }

    /// The remote server at `url` (streamable HTTP), named after it.
    pub fn url(url: &str) -> WrappedServer {
        WrappedServer {
            spec: ServerSpec {
                name: url.to_string(),
                transport: Transport::Http(HttpSpec { url: url.to_string(), headers: Vec::new(), auth: None }),
                start_timeout: defaults::START_TIMEOUT,
            },
            allow: None,
            private: Vec::new(),
            policy: None,
            origin: Origin::Flags,
        }
    }

    /// More arguments of a local server's command.
    pub fn args(mut self, args: impl IntoIterator<Item = String>) -> WrappedServer {
        if let Transport::Stdio(stdio) = &mut self.spec.transport {
            stdio.args.extend(args);
        }
        self
    }

    /// A header a remote server gets with every request.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> WrappedServer {
        if let Transport::Http(http) = &mut self.spec.transport {
            http.headers.push((name.into(), value.into()));
        }
        self
    }

    /// How code-mode gets an access token for a remote server (its `auth`
    /// block).
    pub fn authorized(mut self, auth: code_mode_upstream_auth::Upstream) -> WrappedServer {
        if let Transport::Http(http) = &mut self.spec.transport {
            http.auth = Some(auth);
        }
        self
    }

    /// Pass these variables of this process's environment to a local
    /// server.
    pub fn pass_env(mut self, names: impl IntoIterator<Item = String>) -> WrappedServer {
        if let Transport::Stdio(stdio) = &mut self.spec.transport {
            stdio.pass_env.extend(names);
        }
        self
    }

    /// Keep only these tools (none given: every tool).
    pub fn allow(mut self, tools: impl IntoIterator<Item = String>) -> WrappedServer {
        let tools: Vec<String> = tools.into_iter().collect();
        if !tools.is_empty() {
            self.allow.get_or_insert_with(Vec::new).extend(tools);
        }
        self
    }

    /// Mark these tools as ones that may see private data.
    pub fn private(mut self, tools: impl IntoIterator<Item = String>) -> WrappedServer {
        self.private.extend(tools);
        self
    }

    /// Apply the policy file at `path`.
    pub fn policy_file(mut self, path: Option<PathBuf>) -> WrappedServer {
        if let Some(path) = path {
            self.policy = Some(PolicySource::File(path));
        }
        self
    }

    /// Call it `name` (its tools are `<name>__<tool>` when prefixed).
    pub fn named(mut self, name: impl Into<String>) -> WrappedServer {
        self.spec.name = name.into();
        self
    }
}

/// Where a wrapped server's settings were written: errors about a tool
/// label or a policy name the place the user wrote them, in the user's own
/// words (`--private read_file`, or the config file, entry and key).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Origin {
    /// Command-line flags for the one server after `--` (`--allow`,
    /// `--private`, `--policy`).
    #[default]
    Flags,
    /// An entry of an `mcpServers` config file.
    Entry {
        /// The config file.
        file: PathBuf,
        /// The entry's key: the server's name.
        entry: String,
    },
}

impl Origin {
    /// Where the setting `key` (as a config entry names it: `allow`,
    /// `private`) with the value `value` was written: `--allow add`, or
    /// `servers.json: server "fs": key "allow": "add"`.
    pub fn setting(&self, key: &str, value: &str) -> String {
        match self {
            Origin::Flags => format!("--{key} {value}"),
            Origin::Entry { file, entry } => format!("{}: server {entry:?}: key {key:?}: {value:?}", file.display()),
        }
    }

    /// What to put before an error that already names its own file (a
    /// policy's): nothing for flags (there is one server), the entry for a
    /// config file.
    pub fn server_prefix(&self) -> String {
        match self {
            Origin::Flags => String::new(),
            Origin::Entry { file, entry } => format!("{}: server {entry:?}: ", file.display()),
        }
    }
}

/// Where a server's [`policy`] comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum PolicySource {
    /// A policy file (`--policy FILE`, or a path in a `--config` entry).
    File(PathBuf),
    /// A policy object written in the `--config` file itself.
    Inline {
        /// The policy, in the policy file's shape.
        value: serde_json::Value,
        /// Where it was written, for errors: `<config file> mcpServers.<entry>.policy`.
        origin: String,
    },
}

/// Everything the bridge needs to start.
#[derive(Debug, Clone)]
pub struct BridgeConfig {
    /// The wrapped servers (names are prefixed when several, and always
    /// when [`BridgeConfig::prefixed`]).
    pub servers: Vec<WrappedServer>,
    /// Give every tool name the `<server>__` prefix, even with one server
    /// (`--config`: names do not change when a second server is added);
    /// else only when there are several.
    pub prefixed: bool,
    /// Per-call limits.
    pub limits: CallLimits,
    /// Catalog bounds.
    pub catalog: CatalogLimits,
    /// Where the private-data taint and the policies' rate-limit counters
    /// of each session live: in memory for one process, JetStream for the
    /// split deployment. Never touched when no tool is private and no
    /// policy has limits.
    pub state: SessionStore,
    /// What to do with the policies' decisions besides enforcing them.
    pub policy_options: PolicyOptions,
}

/// Options of the policies, shared by every server's policy.
impl BridgeConfig {
    /// True when tool names get the `<server>__` prefix: always when
    /// [`BridgeConfig::prefixed`], else with several servers.
    pub fn prefixed_names(&self) -> bool {
        self.prefixed || self.servers.len() > 1
    }
}

#[derive(Debug, Clone, Default)]
pub struct PolicyOptions {
    /// The audit sink: every call becomes one `call` record, every wrapped
    /// server's tools one `tools` record (`None`: nowhere; each policy
    /// decision is still counted in `codemode_policy_decisions_total`).
    pub audit: Option<AuditSink>,
    /// Offer tools the policy denies outright (in the stubs, labelled
    /// `[denied: ...]`); by default they are left out of the catalog, and a
    /// call naming one is refused with the rule and reason all the same.
    pub offer_denied: bool,
}

/// Programs that start a server named in their arguments.
const LAUNCHERS: &[&str] =
    &["npx", "node", "uvx", "uv", "python", "python3", "pipx", "bunx", "bun", "deno", "pnpm", "yarn", "docker", "env"];
/// Words of a launcher's command line that are not the server.
const LAUNCHER_WORDS: &[&str] = &["run", "exec", "dlx", "x", "-m"];

/// A short name for the server `program args` starts, for a person to read
/// (logs, questions, refusals, the console) instead of a host path: the
/// file name of the program, or for a launcher (`npx`, `node`, `uvx`,
/// `python3`, ...) of the first argument that is not a flag, without a
/// package version or a script's extension
/// (`npx -y @modelcontextprotocol/server-everything@2` gives
/// `server-everything`); characters other than letters, digits, `-`, `_`
/// and `.` become `_`.
pub fn short_name(program: &str, args: &[String]) -> String {
    let file = |path: &str| path.rsplit('/').next().unwrap_or(path).to_string();
    let mut name = file(program);
    if LAUNCHERS.contains(&name.as_str())
        && let Some(server) = args.iter().find(|a| !a.starts_with('-') && !LAUNCHER_WORDS.contains(&a.as_str()))
    {
        let server = file(server);
        let server = match server.rfind('@') {
            Some(at) if at > 0 => server[..at].to_string(),
            _ => server,
        };
        let server = [".js", ".mjs", ".cjs", ".ts", ".py"]
            .iter()
            .find_map(|ext| server.strip_suffix(ext))
            .map(str::to_string)
            .unwrap_or(server);
        if !server.is_empty() {
            name = server;
        }
    }
    let name: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') { c } else { '_' }).collect();
    name.chars().take(64).collect()
}

#[cfg(test)]
mod short_name_tests {
    use super::short_name;

    fn named(command: &[&str]) -> String {
        let args: Vec<String> = command[1..].iter().map(|s| s.to_string()).collect();
        short_name(command[0], &args)
    }

    #[test]
    fn a_server_is_named_by_its_file_name_or_the_package_a_launcher_starts_never_by_a_host_path() {
        assert_eq!(named(&["/work/node_modules/.bin/mcp-server-everything"]), "mcp-server-everything");
        assert_eq!(named(&["npx", "-y", "@modelcontextprotocol/server-everything@2.0.1"]), "server-everything");
        assert_eq!(named(&["uvx", "mcp-server-time", "--local-timezone", "UTC"]), "mcp-server-time");
        assert_eq!(named(&["/usr/bin/python3", "-m", "my_server"]), "my_server");
        assert_eq!(named(&["node", "/srv/app/index.mjs"]), "index");
        assert_eq!(named(&["./target/debug/code-mode-test-server", "--many", "3"]), "code-mode-test-server");
        assert_eq!(named(&["node"]), "node", "a launcher alone keeps its own name");
        assert_eq!(named(&["my server!"]), "my_server_");
    }
}
