//! The per-tool policy: which tools a session may call, which need a
//! person's approval, how often each may be called, and what their arguments
//! must satisfy; plus the rate limiter that counts calls in the
//! session-state store and the audit record of each decision.
//!
//! This module owns the policy file's format and its validation
//! ([`Policy::parse`]), the verdict for a tool ([`Policy::verdict`]) and its
//! stub label ([`Verdict::label`]), the policy's argument schemas
//! ([`Policy::check_args`]), the rate-limit counters' names and values in
//! the store ([`RateLimiter`], which counts at the time it is given, so a
//! replay counts at recorded times). [`crate::Bridge::call`] applies the
//! verdict, the argument rule and the limits, and records each decision in
//! the audit sink ([`code_mode_audit`]).
//!
//! # The file
//!
//! ```json
//! {"version": "1", "default": "deny",
//!  "tools": {"mcp_run_pytest": {"limits": [
//!      {"counter": "mcp_run_pytest_rate", "window": "minute", "max": 10, "scope": "grant"}]}},
//!  "categories": {"destructive": {"action": "approve"}}}
//! ```
//!
//! - `version`: `"1"` (required).
//! - `default`: `"allow"` or `"deny"` (default `"deny"`) for a tool that no
//!   tool rule and no category rule decides.
//! - `tools`: one rule per tool, keyed by the tool's name as its server lists
//!   it. Keys: `action` (`allow`, `deny`, `approve`; `allow` when absent, so
//!   an entry with only `limits` allows the tool within its limits),
//!   `reason` (quoted in a refusal), `limits`, `args` (a JSON Schema the
//!   arguments must also satisfy, compiled when the file is read),
//!   `record_args` (`true`: the audit record of each call keeps the
//!   arguments' values, so `policy replay` can check `args` rules against
//!   them; by default only their size and SHA-256).
//!   An `approve` rule may name who decides (in the web console):
//!   `approvers` (1 to [`MAX_APPROVERS`] entries, each an identity's name,
//!   `"alice"`, or `"group:NAME"`, every identity in that group),
//!   `self_approve` (`true`: an approver may decide a call their own
//!   identity made; `false` by default), `ask_client` (`true`: the
//!   session's own client is asked as well, through elicitation, and the
//!   first answer decides; `false` by default). See [`Team`].
//! - `categories`: one rule per risk category (below), with `action`,
//!   `reason`, `limits` and the `approve` keys above.
//! - a limit: `counter` (a name of `[A-Za-z0-9_-]`; tools naming the same
//!   counter share its count, so they must give it the same window and
//!   scope), `window` (`second`, `minute`, `hour`, `day` or a whole number
//!   of seconds), `max` (calls per window, at least 1), `scope` (`grant`:
//!   counted per client session, the default; `global`: across every
//!   session). Limits go with `allow` and `approve`, not with `deny` (a
//!   denied tool is never called). With `approve` a call is counted before
//!   the person is asked, so the limit also bounds how often the code can
//!   ask; a declined call still counts.
//!
//! - `resources`: rules for reading (and subscribing to) the server's
//!   resources, keyed by a URI pattern where `*` stands for any characters
//!   (`"file:///srv/public/*"`, `"test://static-text"`); `action` (`allow`
//!   or `deny`) and `reason`. When several patterns match a URI the one
//!   with the most characters other than `*` decides (an exact URI beats
//!   every pattern), and of two as long a `deny` wins. A completion of a
//!   resource template's argument is judged by the template's URI.
//! - `prompts`: rules for getting the server's prompts (and completing
//!   their arguments), keyed by the prompt's name as the server lists it;
//!   `action` and `reason`.
//! - `sampling`, `elicitation`, `roots`: one rule each for what the server
//!   may ask of the client while it serves a call; `action` and `reason`.
//!
//! A resource, prompt or question no rule names follows `default`: with a
//! policy, "everything else on the server is denied unless you say
//! otherwise" holds for all of MCP, not only for tools, since a resource
//! read and a prompt carry data as a read-only tool does, and a sampling
//! answer hands the server the client's model. A server without a policy
//! is judged by nothing but the bridge's own checks.
//!
//! Anything else stops startup with a [`PolicyError`] naming the file, the
//! JSON path (`/tools/mcp_run_pytest/limits/0/window`) and the reason:
//! unparsable JSON, an unknown key, a value of the wrong kind, a bad window,
//! a tool the servers do not have, a schema that does not compile.
//!
//! # Which rule decides
//!
//! 1. The tool's own rule, if it has one: an explicit rule beats a general
//!    one, so a tool rule can allow one destructive tool that a category
//!    rule would hold for approval.
//! 2. Else the rules of the tool's categories. When several apply the most
//!    restrictive wins: deny, then approve, then limits (every matching
//!    category's limits apply), then allow.
//! 3. Else `default`.
//!
//! # Categories from MCP tool annotations
//!
//! The annotations are hints; a missing hint takes the MCP specification's
//! default (`readOnlyHint` false, `destructiveHint` true, `idempotentHint`
//! false, `openWorldHint` true), so a tool without annotations counts as
//! destructive and open-world, the cautious reading.
//!
//! | category | the tool's annotations |
//! | --- | --- |
//! | `read_only` | `readOnlyHint: true` |
//! | `destructive` | not read-only, and `destructiveHint` is not `false` |
//! | `additive` | not read-only, and `destructiveHint: false` |
//! | `idempotent` | not read-only, and `idempotentHint: true` |
//! | `open_world` | `openWorldHint` is not `false` |
//!
//! A tool is in exactly one of `read_only`, `destructive`, `additive`, and
//! in `idempotent` and `open_world` besides when they apply.
//!
//! # Rate limits in the store
//!
//! Fixed windows: window `w` seconds starts at the Unix times divisible by
//! `w`. A counter is one entry of the [`SessionStore`]: `rate.<counter>` in
//! the caller's session for `grant` scope, `global.rate.<counter>` in the
//! pseudo-session [`GLOBAL_SESSION`] for `global` scope, and
//! `identity.rate.<counter>` in the identity's pseudo-session
//! ([`identity_session`]) for `identity` scope (all sessions of one
//! authenticated client; without authentication every caller is the one
//! identity `anonymous`), holding
//! `{"start": <window start, Unix seconds>, "count": <calls admitted>}`. A
//! call is admitted by a compare-and-set of `count + 1` on the revision it
//! read, so concurrent bridges never admit more than `max`; a full window is
//! refused without a write. Every store failure refuses the call (fail
//! closed). When a tool has several limits they are taken in order, and a
//! call refused by a later one has still used a slot of the earlier ones.
//!
//! # Audit
//!
//! Every call's decision is one `call` record of the audit chain
//! ([`code_mode_audit::record::Call`]): session, cell, server, tool,
//! decision, the deciding rule, the reason, the arguments' and the result's
//! size and SHA-256, never their values (the arguments only where
//! `record_args` says so).

//!
//! # The files
//!
//! This module holds the model (rules, verdicts, limits, categories) and
//! the policy's answers; [`parse`] reads and validates the file
//! ([`PolicyError`]); [`limiter`] counts calls in the session-state store
//! ([`RateLimiter`]).

mod limiter;
mod parse;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::Path;

use serde_json::Value;

pub use self::limiter::{LimitRefusal, RateLimiter, grant_key};
pub use self::parse::PolicyError;
use self::parse::pointer_token;

/// The pseudo-session that holds the counters of `global` scope.
pub const GLOBAL_SESSION: &str = "_global";

/// The identity of calls made without authentication (one for them all).
pub const ANONYMOUS: &str = "anonymous";

/// The pseudo-session that holds the counters of `identity` scope for one
/// identity (the store escapes it into one key token, like any session).
pub fn identity_session(identity: Option<&str>) -> String {
    format!("_identity.{}", identity.unwrap_or(ANONYMOUS))
}

/// The longest counter name (the store allows 64 bytes for the whole name).
pub const MAX_COUNTER_CHARS: usize = 48;

/// The longest `reason`.
pub const MAX_REASON_CHARS: usize = 300;

/// The most entries one rule's `approvers` may list.
pub const MAX_APPROVERS: usize = 32;

/// The longest URI pattern of a `resources` rule.
pub const MAX_PATTERN_CHARS: usize = 2048;

/// What a server may ask of the client while it serves a call, as a policy
/// names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Ask {
    /// `sampling/createMessage`.
    Sampling,
    /// `elicitation/create`.
    Elicitation,
    /// `roots/list`.
    Roots,
}

impl Ask {
    /// Every kind.
    pub const ALL: [Ask; 3] = [Ask::Sampling, Ask::Elicitation, Ask::Roots];

    /// Its key in the file.
    pub fn key(self) -> &'static str {
        match self {
            Ask::Sampling => "sampling",
            Ask::Elicitation => "elicitation",
            Ask::Roots => "roots",
        }
    }
}

impl From<code_mode_proto::AskKind> for Ask {
    fn from(kind: code_mode_proto::AskKind) -> Self {
        match kind {
            code_mode_proto::AskKind::Sampling => Ask::Sampling,
            code_mode_proto::AskKind::Elicitation => Ask::Elicitation,
            code_mode_proto::AskKind::Roots => Ask::Roots,
        }
    }
}

/// A rule of `resources`, `prompts` or a question: allowed or denied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    /// `allow` (else `deny`).
    pub allow: bool,
    /// Why, quoted in a refusal.
    pub reason: Option<String>,
}

/// What the policy says of a resource, prompt or question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// It may go.
    Allow {
        /// Which rule said so.
        rule: RuleSource,
    },
    /// It is refused.
    Deny {
        /// Why.
        reason: String,
        /// Which rule said so.
        rule: RuleSource,
    },
}

impl Admission {
    /// The rule that decided.
    pub fn rule(&self) -> &RuleSource {
        match self {
            Admission::Allow { rule } | Admission::Deny { rule, .. } => rule,
        }
    }
}

/// True when `uri` matches `pattern`, where `*` stands for any characters
/// (none included) and everything else for itself.
pub fn uri_matches(pattern: &str, uri: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == uri;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if uri.len() < first.len() + last.len() || !uri.starts_with(first) || !uri.ends_with(last) {
        return false;
    }
    let mut rest = &uri[first.len()..uri.len() - last.len()];
    for middle in &parts[1..parts.len() - 1] {
        match rest.find(middle) {
            Some(at) => rest = &rest[at + middle.len()..],
            None => return false,
        }
    }
    true
}

/// A tool's MCP annotations (`None`: the server did not say).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Annotations {
    /// `readOnlyHint`.
    pub read_only: Option<bool>,
    /// `destructiveHint`.
    pub destructive: Option<bool>,
    /// `idempotentHint`.
    pub idempotent: Option<bool>,
    /// `openWorldHint`.
    pub open_world: Option<bool>,
}

impl From<&rmcp::model::ToolAnnotations> for Annotations {
    fn from(a: &rmcp::model::ToolAnnotations) -> Self {
        Self {
            read_only: a.read_only_hint,
            destructive: a.destructive_hint,
            idempotent: a.idempotent_hint,
            open_world: a.open_world_hint,
        }
    }
}

impl Annotations {
    /// The tool's risk categories (see the module doc), in [`Category::ALL`]
    /// order.
    pub fn categories(&self) -> Vec<Category> {
        let read_only = self.read_only == Some(true);
        let mut out = Vec::new();
        if read_only {
            out.push(Category::ReadOnly);
        } else if self.destructive == Some(false) {
            out.push(Category::Additive);
        } else {
            out.push(Category::Destructive);
        }
        if !read_only && self.idempotent == Some(true) {
            out.push(Category::Idempotent);
        }
        if self.open_world != Some(false) {
            out.push(Category::OpenWorld);
        }
        out
    }
}

/// What the policy needs to know of a tool the servers offer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolFacts {
    /// Its name as the server lists it.
    pub name: String,
    /// Its annotations.
    pub annotations: Annotations,
    /// Other names a policy may give it: the name the code calls it by
    /// (`fs__read_file` with `--config`). A rule written under one of these
    /// is the tool's rule.
    pub aliases: Vec<String>,
}

/// A risk category, derived from a tool's annotations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Category {
    /// Does not modify its environment.
    ReadOnly,
    /// Modifies, but only by adding.
    Additive,
    /// May destroy or overwrite.
    Destructive,
    /// Repeating a call changes nothing more.
    Idempotent,
    /// Reaches outside entities.
    OpenWorld,
}

impl Category {
    /// Every category.
    pub const ALL: [Category; 5] =
        [Category::ReadOnly, Category::Additive, Category::Destructive, Category::Idempotent, Category::OpenWorld];

    /// Its key in the file.
    pub fn key(self) -> &'static str {
        match self {
            Category::ReadOnly => "read_only",
            Category::Additive => "additive",
            Category::Destructive => "destructive",
            Category::Idempotent => "idempotent",
            Category::OpenWorld => "open_world",
        }
    }

    fn from_key(key: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.key() == key)
    }
}

/// A rule's action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// The call may go out (within the rule's limits).
    Allow,
    /// The call is refused.
    Deny,
    /// The call needs a person's approval.
    Approve,
}

/// A rate-limit window, in seconds (at least 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Window(u64);

impl Window {
    /// A window of `seconds` (at least 1).
    pub fn from_secs(seconds: u64) -> Option<Self> {
        (seconds > 0).then_some(Self(seconds))
    }

    /// Its length in seconds.
    pub fn secs(self) -> u64 {
        self.0
    }
}

impl fmt::Display for Window {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            1 => f.write_str("second"),
            60 => f.write_str("minute"),
            3600 => f.write_str("hour"),
            86_400 => f.write_str("day"),
            n => write!(f, "{n} seconds"),
        }
    }
}

/// Whose calls a counter counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Each client session's own.
    Grant,
    /// Every session's together.
    Global,
    /// All sessions of one identity together (the authenticated client).
    Identity,
}

/// One rate limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limit {
    /// The counter (shared by every rule that names it).
    pub counter: String,
    /// The window.
    pub window: Window,
    /// Calls admitted per window.
    pub max: u64,
    /// Whose calls count.
    pub scope: Scope,
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} per {}", self.max, self.window)?;
        match self.scope {
            Scope::Global => f.write_str(" (all sessions)")?,
            Scope::Identity => f.write_str(" (per identity)")?,
            Scope::Grant => {}
        }
        Ok(())
    }
}

impl Limit {
    /// Limits as one comma-separated phrase.
    pub fn list(limits: &[Limit]) -> String {
        limits.iter().map(Limit::to_string).collect::<Vec<_>>().join(", ")
    }
}

/// The rule that decided a verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleSource {
    /// The tool's own rule.
    Tool(String),
    /// A category rule.
    Category(Category),
    /// `default`.
    Default,
    /// A `resources` rule (its URI pattern).
    Resource(String),
    /// A `prompts` rule.
    Prompt(String),
    /// The rule of a question (`sampling`, `elicitation`, `roots`).
    Ask(Ask),
}

impl fmt::Display for RuleSource {
    /// The rule's JSON path in the file.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuleSource::Tool(name) => write!(f, "/tools/{}", pointer_token(name)),
            RuleSource::Category(c) => write!(f, "/categories/{}", c.key()),
            RuleSource::Default => f.write_str("/default"),
            RuleSource::Resource(pattern) => write!(f, "/resources/{}", pointer_token(pattern)),
            RuleSource::Prompt(name) => write!(f, "/prompts/{}", pointer_token(name)),
            RuleSource::Ask(kind) => write!(f, "/{}", kind.key()),
        }
    }
}

/// What the policy says of a tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Calls go out.
    Allow {
        /// Which rule said so.
        rule: RuleSource,
    },
    /// Calls are refused.
    Deny {
        /// Why (from the rule's `reason`, else a stock sentence).
        reason: String,
        /// Which rule said so.
        rule: RuleSource,
    },
    /// Calls need a person's approval; the approved ones also count
    /// against these limits (checked before the person is asked, so a
    /// flood of calls cannot flood the person with questions).
    Approve {
        /// Which rule said so.
        rule: RuleSource,
        /// The approving rule's limits (often none).
        limits: Vec<Limit>,
        /// Who decides besides (or instead of) the session's own client;
        /// `None`: only the client is asked.
        team: Option<Team>,
    },
    /// Calls go out within these limits.
    Limited {
        /// Every limit that applies, in order.
        limits: Vec<Limit>,
        /// Which rule said so (the first, when several categories add limits).
        rule: RuleSource,
    },
}

impl Verdict {
    /// The rule that decided.
    pub fn rule(&self) -> &RuleSource {
        match self {
            Verdict::Allow { rule } | Verdict::Deny { rule, .. } => rule,
            Verdict::Approve { rule, .. } | Verdict::Limited { rule, .. } => rule,
        }
    }

    /// The tag for the tool's stub: `[needs approval]`, `[10 per minute]`,
    /// `[denied: reason]`; none for a plain allow.
    pub fn label(&self) -> Option<String> {
        match self {
            Verdict::Allow { .. } => None,
            Verdict::Deny { reason, .. } => Some(format!("[denied: {reason}]")),
            Verdict::Approve { limits, .. } if limits.is_empty() => Some("[needs approval]".to_string()),
            Verdict::Approve { limits, .. } => Some(format!("[needs approval; {}]", Limit::list(limits))),
            Verdict::Limited { limits, .. } => Some(format!("[{}]", Limit::list(limits))),
        }
    }
}

/// Who may approve a rule's calls in the console (`approvers`), and
/// whether the session's own client is asked too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Team {
    /// Identities (`"alice"`) and groups (`"group:security"`), as written.
    pub approvers: Vec<Approver>,
    /// `self_approve`: an approver may decide a call their own identity
    /// made (by default they may not).
    pub self_approve: bool,
    /// `ask_client`: the session's own client is asked as well, through
    /// elicitation; the first answer decides.
    pub ask_client: bool,
    /// The rule's `reason`, shown to the approvers.
    pub reason: Option<String>,
}

/// One entry of `approvers`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Approver {
    /// One identity, by name (`"alice"`).
    Identity(String),
    /// Every identity in a group (`"group:security"`).
    Group(String),
}

impl fmt::Display for Approver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Approver::Identity(name) => f.write_str(name),
            Approver::Group(group) => write!(f, "group:{group}"),
        }
    }
}

impl Approver {
    /// Read one entry of `approvers`: `group:NAME` or a name.
    pub fn parse(text: &str) -> Option<Self> {
        let valid =
            |s: &str| !s.is_empty() && s.len() <= 128 && !s.chars().any(|c| c.is_whitespace() || c.is_control());
        match text.strip_prefix("group:") {
            Some(group) => valid(group).then(|| Approver::Group(group.to_string())),
            None => valid(text).then(|| Approver::Identity(text.to_string())),
        }
    }

    /// True when `name`, a member of `groups`, is this approver.
    pub fn admits(&self, name: &str, groups: &[String]) -> bool {
        match self {
            Approver::Identity(who) => who == name,
            Approver::Group(group) => groups.iter().any(|g| g == group),
        }
    }
}

impl Team {
    /// Why `name` (in `groups`) may not decide a call made by `caller`, or
    /// `None` when they may.
    pub fn refuses(&self, name: &str, groups: &[String], caller: Option<&str>) -> Option<String> {
        if !self.approvers.iter().any(|a| a.admits(name, groups)) {
            let list = self.approvers.iter().map(Approver::to_string).collect::<Vec<_>>().join(", ");
            return Some(format!("{name} is not among this rule's approvers ({list})"));
        }
        if !self.self_approve && caller == Some(name) {
            return Some(format!("{name} made this call, and the rule does not let anyone approve their own calls"));
        }
        None
    }
}

/// One rule as read from the file.
struct Rule {
    action: Action,
    /// `approvers`, `self_approve`, `ask_client` of an `approve` rule.
    team: Option<Team>,
    reason: Option<String>,
    limits: Vec<Limit>,
    args: Option<jsonschema::Validator>,
    /// Record the arguments' values in the audit record (for replay).
    record_args: bool,
}

impl fmt::Debug for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rule")
            .field("action", &self.action)
            .field("team", &self.team)
            .field("reason", &self.reason)
            .field("limits", &self.limits)
            .field("args", &self.args.is_some())
            .field("record_args", &self.record_args)
            .finish()
    }
}

impl Rule {
    fn verdict(&self, rule: RuleSource) -> Verdict {
        match self.action {
            Action::Deny => Verdict::Deny { reason: self.deny_reason(), rule },
            Action::Approve => Verdict::Approve { rule, limits: self.limits.clone(), team: self.team.clone() },
            Action::Allow if self.limits.is_empty() => Verdict::Allow { rule },
            Action::Allow => Verdict::Limited { limits: self.limits.clone(), rule },
        }
    }

    fn deny_reason(&self) -> String {
        self.reason.clone().unwrap_or_else(|| "the policy denies this tool".to_string())
    }
}

/// A parsed, validated policy.
#[derive(Debug)]
pub struct Policy {
    source: String,
    default: Action,
    tools: BTreeMap<String, Rule>,
    categories: BTreeMap<Category, Rule>,
    /// The categories of each known tool.
    facts: HashMap<String, Vec<Category>>,
    /// `resources` rules, by URI pattern, in the file's order.
    resources: Vec<(String, Access)>,
    /// `prompts` rules, by the prompt's name.
    prompts: BTreeMap<String, Access>,
    /// The rules of questions to the client.
    asks: BTreeMap<Ask, Access>,
    /// `connect`: whether a caller without an account at a per-identity
    /// server is asked to connect one (unset or allow) or refused (deny).
    connect: Option<Access>,
}

impl Policy {
    /// Read and parse the policy file at `path`.
    pub fn load(path: &Path, known_tools: &[ToolFacts]) -> Result<Self, PolicyError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| PolicyError::Read { file: file.clone(), source })?;
        Self::parse(&text, &file, known_tools)
    }

    /// Parse a policy; `source_name` (the file) goes into every error;
    /// `known_tools` are the tools the wrapped servers offer, with their
    /// annotations.
    pub fn parse(text: &str, source_name: &str, known_tools: &[ToolFacts]) -> Result<Self, PolicyError> {
        let root: Value = serde_json::from_str(text).map_err(|e| PolicyError::Syntax {
            file: source_name.to_string(),
            line: e.line(),
            column: e.column(),
            reason: e.to_string(),
        })?;
        Self::from_value(&root, source_name, known_tools)
    }

    /// [`Policy::parse`] of a policy already read as JSON (an inline
    /// `"policy"` object of a `--config` entry); `source_name` says where it
    /// was written.
    pub fn from_value(root: &Value, source_name: &str, known_tools: &[ToolFacts]) -> Result<Self, PolicyError> {
        parse::read(root, source_name, known_tools)
    }

    /// The store keys this policy may write under a client session: one per
    /// `grant` counter (the `global` ones live under [`GLOBAL_SESSION`]).
    pub fn session_keys(&self) -> Vec<String> {
        let mut counters: Vec<&str> = self
            .tools
            .values()
            .chain(self.categories.values())
            .flat_map(|r| r.limits.iter())
            .filter(|l| l.scope == Scope::Grant)
            .map(|l| l.counter.as_str())
            .collect();
        counters.sort_unstable();
        counters.dedup();
        counters.into_iter().map(grant_key).collect()
    }

    /// True when a call of `tool` counts against a `grant` limit, so its
    /// session's state must be at hand.
    pub fn counts_per_session(&self, tool: &str) -> bool {
        match self.verdict(tool) {
            Verdict::Limited { limits, .. } | Verdict::Approve { limits, .. } => {
                limits.iter().any(|l| l.scope == Scope::Grant)
            }
            _ => false,
        }
    }

    /// The file it was read from (or, for an inline policy, where it was
    /// written).
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The verdict for `tool` and the rule that decided it.
    pub fn verdict(&self, tool: &str) -> Verdict {
        if let Some(rule) = self.tools.get(tool) {
            return rule.verdict(RuleSource::Tool(tool.to_string()));
        }
        let matching: Vec<(Category, &Rule)> = self
            .facts
            .get(tool)
            .into_iter()
            .flatten()
            .filter_map(|c| self.categories.get(c).map(|r| (*c, r)))
            .collect();
        if let Some((c, rule)) = matching.iter().find(|(_, r)| r.action == Action::Deny) {
            return Verdict::Deny { reason: rule.deny_reason(), rule: RuleSource::Category(*c) };
        }
        if let Some((c, r)) = matching.iter().find(|(_, r)| r.action == Action::Approve) {
            return Verdict::Approve { rule: RuleSource::Category(*c), limits: r.limits.clone(), team: r.team.clone() };
        }
        let limited: Vec<&(Category, &Rule)> = matching.iter().filter(|(_, r)| !r.limits.is_empty()).collect();
        if let Some((first, _)) = limited.first() {
            let limits = limited.iter().flat_map(|(_, r)| r.limits.iter().cloned()).collect();
            return Verdict::Limited { limits, rule: RuleSource::Category(*first) };
        }
        if let Some((c, _)) = matching.first() {
            return Verdict::Allow { rule: RuleSource::Category(*c) };
        }
        match self.default {
            Action::Deny => Verdict::Deny {
                reason: "the policy denies every tool it does not name (default deny)".to_string(),
                rule: RuleSource::Default,
            },
            _ => Verdict::Allow { rule: RuleSource::Default },
        }
    }

    /// What the policy says of reading (or subscribing to) the resource
    /// `uri`: the most specific matching `resources` rule, else `default`.
    pub fn resource(&self, uri: &str) -> Admission {
        let specificity = |pattern: &str| pattern.chars().filter(|c| *c != '*').count();
        let best = self.resources.iter().filter(|(pattern, _)| uri_matches(pattern, uri)).max_by(|(a, ra), (b, rb)| {
            // Longer first; of two as long, the denying one.
            (specificity(a), !ra.allow, !a.contains('*')).cmp(&(specificity(b), !rb.allow, !b.contains('*')))
        });
        match best {
            Some((pattern, access)) => self.admission(access, RuleSource::Resource(pattern.clone()), "resource"),
            None => self.default_admission("resource"),
        }
    }

    /// What the policy says of getting the prompt `name` (as its server
    /// lists it).
    pub fn prompt(&self, name: &str) -> Admission {
        match self.prompts.get(name) {
            Some(access) => self.admission(access, RuleSource::Prompt(name.to_string()), "prompt"),
            None => self.default_admission("prompt"),
        }
    }

    /// What the policy says of the server asking the client `kind`.
    pub fn ask(&self, kind: Ask) -> Admission {
        match self.asks.get(&kind) {
            Some(access) => self.admission(access, RuleSource::Ask(kind), kind.key()),
            None => self.default_admission(kind.key()),
        }
    }

    fn admission(&self, access: &Access, rule: RuleSource, what: &str) -> Admission {
        if access.allow {
            Admission::Allow { rule }
        } else {
            let reason = access.reason.clone().unwrap_or_else(|| format!("the policy denies this {what}"));
            Admission::Deny { reason, rule }
        }
    }

    fn default_admission(&self, what: &str) -> Admission {
        match self.default {
            Action::Deny => Admission::Deny {
                reason: format!("the policy denies every {what} it does not name (default deny)"),
                rule: RuleSource::Default,
            },
            _ => Admission::Allow { rule: RuleSource::Default },
        }
    }

    /// True when the tool's rule says `"record_args": true`: its audit
    /// records carry the arguments' values, so a replay can check `args`
    /// rules against them.
    pub fn records_args(&self, tool: &str) -> bool {
        self.tools.get(tool).is_some_and(|r| r.record_args)
    }

    /// True when the tool's rule has an `args` schema.
    pub fn has_args_rule(&self, tool: &str) -> bool {
        self.tools.get(tool).is_some_and(|r| r.args.is_some())
    }

    /// Check `arguments` against the tool rule's `args` schema, if it has
    /// one; the error says where and why.
    pub fn check_args(&self, tool: &str, arguments: &Value) -> Result<(), ArgsRefusal> {
        let Some(validator) = self.tools.get(tool).and_then(|r| r.args.as_ref()) else { return Ok(()) };
        match validator.iter_errors(arguments).next() {
            None => Ok(()),
            Some(e) => {
                let at = e.instance_path().to_string();
                let at = if at.is_empty() { "top level".to_string() } else { at };
                Err(ArgsRefusal { at, keyword: e.schema_path().to_string(), detail: e.to_string() })
            }
        }
    }
}

/// Arguments the policy's `args` schema refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the policy's argument rule refuses them at {at}: {detail}")]
pub struct ArgsRefusal {
    /// Where in the arguments (a JSON pointer, or `top level`).
    pub at: String,
    /// The schema keyword that failed (a JSON pointer into `args`).
    pub keyword: String,
    /// The validator's message; it may quote the arguments, so it goes to
    /// the code only, never to the audit log.
    pub detail: String,
}

impl ArgsRefusal {
    /// The refusal without any of the arguments' values, for the audit log.
    pub fn without_values(&self) -> String {
        format!("the policy's argument rule refuses them at {} (args schema {})", self.at, self.keyword)
    }
}

/// What became of a call, as the audit record says it (and the metric's
/// `decision` label).
pub use code_mode_audit::Decision as AuditDecision;
/// `time` as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub use code_mode_audit::record::rfc3339;

/// Who made a call and which tool it named.
#[derive(Debug, Clone, Copy)]
pub struct CallSite<'a> {
    /// The client session.
    pub session: &'a str,
    /// The wrapped server.
    pub server: &'a str,
    /// The tool.
    pub tool: &'a str,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(name: &str, annotations: Annotations) -> ToolFacts {
        ToolFacts { name: name.to_string(), annotations, aliases: Vec::new() }
    }

    #[test]
    fn annotations_map_onto_categories_with_the_spec_defaults() {
        let none = Annotations::default();
        assert_eq!(none.categories(), [Category::Destructive, Category::OpenWorld]);
        let read = Annotations { read_only: Some(true), open_world: Some(false), idempotent: Some(true), ..none };
        assert_eq!(read.categories(), [Category::ReadOnly]);
        let add = Annotations { read_only: Some(false), destructive: Some(false), idempotent: Some(true), ..none };
        assert_eq!(add.categories(), [Category::Additive, Category::Idempotent, Category::OpenWorld]);
    }

    #[test]
    fn labels_read_like_stub_tags() {
        let limit = Limit { counter: "c".into(), window: Window(60), max: 10, scope: Scope::Grant };
        let global = Limit { counter: "g".into(), window: Window(90), max: 3, scope: Scope::Global };
        let limited = Verdict::Limited { limits: vec![limit, global], rule: RuleSource::Default };
        assert_eq!(limited.label().unwrap(), "[10 per minute, 3 per 90 seconds (all sessions)]");
        assert_eq!(
            Verdict::Approve { rule: RuleSource::Default, limits: vec![], team: None }.label().unwrap(),
            "[needs approval]"
        );
        let deny = Verdict::Deny { reason: "no".into(), rule: RuleSource::Default };
        assert_eq!(deny.label().unwrap(), "[denied: no]");
        assert_eq!(Verdict::Allow { rule: RuleSource::Default }.label(), None);
    }

    #[test]
    fn rule_sources_are_json_paths_with_escaped_names() {
        assert_eq!(RuleSource::Tool("a/b~c".into()).to_string(), "/tools/a~1b~0c");
        assert_eq!(RuleSource::Category(Category::OpenWorld).to_string(), "/categories/open_world");
    }

    #[test]
    fn a_counter_shared_with_a_different_window_is_refused() {
        let text = r#"{"version": "1", "tools": {
            "a": {"limits": [{"counter": "c", "window": "minute", "max": 1}]},
            "b": {"limits": [{"counter": "c", "window": "hour", "max": 1}]}}}"#;
        let known = [facts("a", Annotations::default()), facts("b", Annotations::default())];
        let e = Policy::parse(text, "p.json", &known).unwrap_err();
        assert!(matches!(&e, PolicyError::Invalid { path, .. } if path == "/tools/b/limits/0"), "{e}");
        assert!(e.to_string().contains("same window and scope"), "{e}");
    }

    #[test]
    fn limits_with_deny_or_approve_are_refused() {
        let text = r#"{"version": "1", "tools": {"a": {"action": "deny",
            "limits": [{"counter": "c", "window": "minute", "max": 1}]}}}"#;
        let e = Policy::parse(text, "p.json", &[facts("a", Annotations::default())]).unwrap_err();
        assert!(matches!(&e, PolicyError::Invalid { path, .. } if path == "/tools/a/limits"), "{e}");
    }

    #[test]
    fn the_limits_of_every_matching_category_apply_and_a_deny_beats_them() {
        let text = r#"{"version": "1", "default": "allow", "categories": {
            "destructive": {"limits": [{"counter": "d", "window": "hour", "max": 5}]},
            "open_world": {"limits": [{"counter": "o", "window": "day", "max": 50, "scope": "global"}]},
            "idempotent": {"action": "deny", "reason": "no retries"}}}"#;
        let retry = Annotations { read_only: Some(false), idempotent: Some(true), ..Annotations::default() };
        let known = [facts("rm", Annotations::default()), facts("put", retry)];
        let policy = Policy::parse(text, "p.json", &known).unwrap();
        let rm = policy.verdict("rm");
        assert_eq!(rm.rule(), &RuleSource::Category(Category::Destructive));
        assert_eq!(rm.label().unwrap(), "[5 per hour, 50 per day (all sessions)]");
        let put = policy.verdict("put");
        assert_eq!(
            put,
            Verdict::Deny { reason: "no retries".into(), rule: RuleSource::Category(Category::Idempotent) }
        );
    }

    #[test]
    fn rmcp_annotations_convert_hint_by_hint() {
        let mut a = rmcp::model::ToolAnnotations::new();
        a.read_only_hint = Some(true);
        a.open_world_hint = Some(false);
        let converted = Annotations::from(&a);
        assert_eq!(converted, Annotations { read_only: Some(true), open_world: Some(false), ..Annotations::default() });
        assert_eq!(converted.categories(), [Category::ReadOnly]);
    }
}
