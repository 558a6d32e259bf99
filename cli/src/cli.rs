//! Command-line options. Every limit defaults to the value in
//! `code_mode_core::defaults`, and every numeric option is held to its range
//! by a parser of [`crate::ranges`] (numeric options also take values that
//! start with `-`, so `--deadline -1` is refused for its range, not taken for
//! a flag).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use code_mode_core::defaults;
use code_mode_sandbox_runner::container::Runtime;
use code_mode_sandbox_runner::image::{BaseSource, Packages};

pub use crate::cli_login::{LoginArgs, LoginTarget, LogoutArgs};
pub use crate::cli_token::{TokenArgs, TokenCommand};
use crate::ranges;
use crate::text_values::{header_value, parse_group, parse_public_url, parse_server_name};

/// Let a model drive any MCP server by writing Python, run in a locked-down
/// Docker sandbox, with every tool call checked on the host.
#[derive(Debug, Parser)]
#[command(name = "code-mode", version, args_override_self = true)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
    /// A TOML file of settings, one table per subcommand, keys named like
    /// the flags (also `CODE_MODE_SETTINGS`); `CODE_MODE_<SUBCOMMAND>__<KEY>`
    /// variables override it and flags override both.
    #[arg(long, global = true, value_name = "FILE")]
    pub settings: Option<PathBuf>,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve MCP on stdin/stdout (or over HTTP with `--http`) with one
    /// tool, run_python, wrapping the stdio MCP server whose command follows
    /// `--` (or the remote one of `--url`, or those of `--config`; all three
    /// services in this process).
    Serve(Box<ServeArgs>),
    /// Run one cell of code against the server whose command follows `--`
    /// and print the result as JSON on stdout.
    Run(Box<RunArgs>),
    /// Build the sandbox image.
    BuildImage(BuildImageArgs),
    /// The frontend service alone: MCP on stdin/stdout (or over HTTP with
    /// `--http`), the other services reached over NATS.
    Frontend(Box<FrontendServiceArgs>),
    /// The bridge service alone: wraps the server whose command follows `--`
    /// and answers catalog requests and tool calls over NATS.
    Bridge(Box<BridgeServiceArgs>),
    /// The sandbox-runner service alone: runs cells sent over NATS.
    SandboxRunner(Box<RunnerServiceArgs>),
    /// Work with policy files.
    Policy(PolicyArgs),
    /// Check and read audit records.
    Audit(AuditCommandArgs),
    /// Check the isolation on this host: the engine, the runtimes, runc
    /// against known escapes, the image, and from inside a throwaway
    /// sandbox container every control of the lockdown; one verdict per
    /// line, exit 1 when a required check fails.
    Doctor(DoctorArgs),
    /// Make bearer tokens for `--auth-tokens`.
    Token(TokenArgs),
    /// Log in to remote servers that need it (those with an `auth` block):
    /// print the authorization URL (and open it when a browser is at hand),
    /// take the redirect on a loopback port, keep the tokens encrypted;
    /// `--status` lists what is logged in, never a token.
    Login(LoginArgs),
    /// Forget the stored login of remote servers.
    Logout(LogoutArgs),
    /// Print what the model will read: the `run_python` description a
    /// client gets, the tier it uses and the size of every tier, and each
    /// tool's stub (`TOOLS[name]`). Starts the wrapped servers to list
    /// their tools; runs no cell and needs no Docker. Takes serve's
    /// options.
    Describe(Box<DescribeArgs>),
}

/// Options of `describe`.
#[derive(Debug, Args)]
pub struct DescribeArgs {
    /// Bridge options (which servers and tools, labels, limits).
    #[command(flatten)]
    pub bridge: BridgeArgs,
    /// Frontend options (the description's budget, the deadline).
    #[command(flatten)]
    pub frontend: FrontendArgs,
    /// Kept variables (`--keep-variables`) change what the description says.
    #[command(flatten)]
    pub keep: KeepArgs,
    /// The packages of the sandbox image: the description names those the
    /// image holds (it must be built; Docker is asked only then).
    #[command(flatten)]
    pub packages: PackageArgs,
    /// Print it all as one JSON object instead.
    #[arg(long)]
    pub json: bool,
}

/// Where the audit record goes (serve, run, bridge, sandbox-runner).
#[derive(Debug, Args)]
pub struct AuditArgs {
    /// Record every cell and every decision on a tool call, hash-chained:
    /// to this file (appended; a restart continues its chain), to `stderr`,
    /// or to the JetStream stream CODEMODE_AUDIT: `nats` (bridge and
    /// sandbox-runner: on their own NATS connection) or `nats://HOST:PORT`.
    /// A sink that cannot be written refuses new cells and calls.
    #[arg(long, value_name = "FILE|stderr|nats|nats://HOST:PORT")]
    pub audit: Option<String>,
    /// With a file: once it holds this many bytes, rename it to
    /// FILE.<first seq> and go on in a new FILE (the chain goes on); 0
    /// never (0 to 1099511627776).
    #[arg(long, default_value_t = 0, value_name = "BYTES", allow_hyphen_values = true,
          value_parser = ranges::AUDIT_ROTATE_BYTES.parser::<u64>())]
    pub audit_rotate_bytes: u64,
    /// With nats: days the stream keeps records, when this creates it (0:
    /// for ever; 0 to 36500).
    #[arg(long, default_value_t = 0, value_name = "DAYS", allow_hyphen_values = true,
          value_parser = ranges::RETENTION_DAYS.parser::<u64>())]
    pub audit_retention_days: u64,
    /// Seconds between checkpoint records (the chain head, also logged)
    /// while records come in (0.001 to 86400).
    #[arg(long, default_value = "60", value_name = "SECONDS", allow_hyphen_values = true,
          value_parser = ranges::TIME.parser())]
    pub audit_checkpoint: Duration,
}

/// Options of `audit`.
#[derive(Debug, Args)]
pub struct AuditCommandArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: AuditCommand,
}

/// The subcommands of `audit`.
#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Check the hash chain of audit files (given oldest first: rotated
    /// files, then the current one) or of the stream; exit 1 naming the
    /// first altered, missing, reordered or inserted record.
    Verify(AuditVerifyArgs),
    /// Print audit records readably, filtered.
    Show(AuditShowArgs),
}

/// Where records are read from.
#[derive(Debug, Args)]
pub struct AuditSourceArgs {
    /// Audit files, oldest first.
    #[arg(value_name = "FILE", required_unless_present = "nats", conflicts_with = "nats")]
    pub files: Vec<PathBuf>,
    /// Read the JetStream stream at this NATS server instead (user and
    /// password from CODE_MODE_NATS_USER and CODE_MODE_NATS_PASSWORD).
    #[arg(long, value_name = "URL")]
    pub nats: Option<String>,
    /// The stream.
    #[arg(long, default_value = "CODEMODE_AUDIT", value_name = "NAME")]
    pub stream: String,
}

/// Options of `audit verify`.
#[derive(Debug, Args)]
pub struct AuditVerifyArgs {
    /// What to read.
    #[command(flatten)]
    pub source: AuditSourceArgs,
    /// The first record need not be the sink's start (older files were
    /// removed): check the chain from it on.
    #[arg(long)]
    pub partial: bool,
    /// A chain head kept elsewhere, `SEQ:HASH` (a checkpoint's `records`
    /// and `head`, or any record's seq and hash): the chain must hold it.
    #[arg(long = "checkpoint", value_name = "SEQ:HASH")]
    pub checkpoints: Vec<String>,
}

/// Options of `audit show`.
#[derive(Debug, Args)]
pub struct AuditShowArgs {
    /// What to read.
    #[command(flatten)]
    pub source: AuditSourceArgs,
    /// Only records of this client session.
    #[arg(long)]
    pub session: Option<String>,
    /// Only cells of this identity and their calls.
    #[arg(long)]
    pub identity: Option<String>,
    /// Only calls of this tool (`TOOL` or `SERVER/TOOL`).
    #[arg(long)]
    pub tool: Option<String>,
    /// Only calls with this decision (any other word is
    /// refused, naming them).
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(code_mode_audit::Decision::WORDS))]
    pub decision: Option<String>,
    /// Only records of this kind (any other word is refused,
    /// naming them).
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(code_mode_audit::record::Body::KINDS))]
    pub kind: Option<String>,
    /// Print the records themselves, one JSON line each (as stored).
    #[arg(long)]
    pub json: bool,
}

/// Options of `doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// The runtime to check.
    #[arg(long, default_value = "runc", value_name = "runc|runsc")]
    pub runtime: Runtime,
    /// The sandbox image (default: the image this version builds, or the
    /// one of --requirements/--apt; not with those).
    #[arg(long)]
    pub image: Option<String>,
    /// Check the image with these packages (as serve would pick it; it is
    /// not built here).
    #[command(flatten)]
    pub packages: PackageArgs,
    /// Print the report as one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// Options of `policy`.
#[derive(Debug, Args)]
pub struct PolicyArgs {
    /// What to do with the policy.
    #[command(subcommand)]
    pub command: PolicyCommand,
}

/// The subcommands of `policy`.
#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Start the wrapped server(s), read the policy against the tools they
    /// list and print, one line per tool, the verdict and the rule that gives
    /// it; exit non-zero, naming the file, JSON path and reason, when the
    /// policy is invalid.
    Check(PolicyCheckArgs),
    /// Run every call recorded in audit files through another policy, in
    /// order and at the recorded times, and print per tool what would
    /// change; exit 1 when anything would, 0 when nothing would.
    Replay(PolicyReplayArgs),
}

/// Options of `policy replay`.
#[derive(Debug, Args)]
pub struct PolicyReplayArgs {
    /// The policy to try.
    #[arg(long, value_name = "FILE")]
    pub policy: PathBuf,
    /// The server whose calls to replay (needed when the records hold
    /// several).
    #[arg(long, value_name = "NAME")]
    pub server: Option<String>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Audit files, oldest first.
    #[arg(value_name = "AUDIT", required = true)]
    pub files: Vec<PathBuf>,
}

/// Options of `policy check`.
#[derive(Debug, Args)]
pub struct PolicyCheckArgs {
    /// The policy file (not with `--config`, whose entries give their own
    /// `"policy"`).
    #[arg(value_name = "FILE", required_unless_present = "config", conflicts_with = "config")]
    pub file: Option<PathBuf>,
    /// Check the policies of every entry of this `mcpServers` file (as
    /// `serve --config` reads it) instead.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Keep only this tool (as `serve --allow`); repeatable.
    #[arg(long = "allow", value_name = "TOOL", conflicts_with = "config")]
    pub allow: Vec<String>,
    /// Pass this variable to the wrapped server (as `serve --env`); repeatable.
    #[arg(long = "env", value_name = "NAME", conflicts_with = "config")]
    pub env: Vec<String>,
    /// The wrapped server's command and its arguments (not with `--config`).
    #[arg(last = true, required_unless_present = "config", conflicts_with = "config", value_name = "SERVER_COMMAND")]
    pub server: Vec<String>,
}

/// What `serve` and `run` both start: the three services in one process
/// around the wrapped server.
#[derive(Debug, Args)]
pub struct StackArgs {
    /// Bridge options.
    #[command(flatten)]
    pub bridge: BridgeArgs,
    /// Metrics and health.
    #[command(flatten)]
    pub metrics: MetricsArgs,
    /// Sandbox options.
    #[command(flatten)]
    pub runner: RunnerArgs,
    /// Frontend options.
    #[command(flatten)]
    pub frontend: FrontendArgs,
    /// The audit record.
    #[command(flatten)]
    pub audit: AuditArgs,
}

/// Options of `serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The services and the wrapped server.
    #[command(flatten)]
    pub stack: StackArgs,
    /// `run_python` calls that run at once; more wait for a slot (1 to 1024).
    #[arg(long, default_value_t = defaults::MAX_CONCURRENT_CELLS, value_name = "N", allow_hyphen_values = true,
          value_parser = ranges::CELLS.parser::<usize>())]
    pub max_concurrent: usize,
    /// What the MCP clients get: kept sessions, the wrapped tools offered
    /// directly, MCP over HTTP.
    #[command(flatten)]
    pub clients: ClientArgs,
    /// Files out of cells.
    #[command(flatten)]
    pub files: crate::files_args::FilesArgs,
}

/// Kept sessions: variables kept between the cells of a client session
/// (`serve` and `frontend`).
#[derive(Debug, Args)]
pub struct KeepArgs {
    /// Keep each client session's variables, imports and files in /tmp
    /// between its run_python calls: its cells run one after the other in
    /// one container that lives across them (each cell still with its own
    /// deadline, output caps and call budget). Off: every cell gets a fresh
    /// container.
    #[arg(long)]
    pub keep_variables: bool,
    /// With --keep-variables: remove a session's container after this many
    /// seconds without a cell (its next cell starts fresh, saying so)
    /// (0.001 to 86400).
    #[arg(long, default_value = "600", value_name = "SECONDS", allow_hyphen_values = true,
          value_parser = ranges::TIME.parser())]
    pub session_idle: Duration,
    /// With --keep-variables: remove a session's container this many
    /// seconds after its first cell, whatever happens (0.001 to 86400).
    #[arg(long, default_value = "3600", value_name = "SECONDS", allow_hyphen_values = true,
          value_parser = ranges::TIME.parser())]
    pub session_max: Duration,
    /// With --keep-variables: kept sandboxes one stateless (MCP
    /// 2026-07-28) client, by identity, holds at once on a sandbox-runner
    /// through session handles; starting one more removes its sandbox
    /// unused the longest (1 to 64).
    #[arg(long, default_value_t = defaults::MAX_HANDLES, value_name = "N", allow_hyphen_values = true,
          value_parser = ranges::HANDLES.parser::<u32>())]
    pub max_handles: u32,
}

/// The wrapped tools offered directly, beside `run_python` or instead of it
/// (`serve` and `frontend`).
#[derive(Debug, Args)]
pub struct DirectArgs {
    /// Offer the wrapped tools themselves in tools/list, under the names
    /// the code calls them by, with their own schemas, titles and
    /// annotations and their policy labels in their descriptions:
    /// `--expose-tools` (or `=beside`) beside run_python, `=only` instead
    /// of it (a policy gateway: nothing runs code, and Docker is never
    /// contacted), `off` (default) only run_python. A direct call passes
    /// the bridge's checks as a call from code does.
    #[arg(
        long,
        value_enum,
        value_name = "beside|only|off",
        num_args = 0..=1,
        default_missing_value = "beside",
        default_value = "off"
    )]
    pub expose_tools: ExposeTools,
    /// Direct tool calls one client session may make, counted apart from
    /// each cell's --max-calls; later ones are refused. Default: no limit
    /// (0 to 1000000).
    #[arg(long, value_name = "N", allow_hyphen_values = true, value_parser = ranges::CALLS.parser::<u32>())]
    pub max_direct_calls: Option<u32>,
}

/// Which tools `tools/list` offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExposeTools {
    /// Only run_python.
    Off,
    /// run_python and the wrapped tools.
    Beside,
    /// Only the wrapped tools.
    Only,
}

/// Options of `run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The services and the wrapped server.
    #[command(flatten)]
    pub stack: StackArgs,
    /// The code to run.
    #[arg(long, conflicts_with = "file")]
    pub code: Option<String>,
    /// A file holding the code to run (default: read the code from stdin).
    #[arg(long, value_name = "PATH")]
    pub file: Option<PathBuf>,
    /// Ask on the terminal (`/dev/tty`) whether a call the policy holds for
    /// approval may go out; without it such calls are refused, as nobody
    /// can be asked.
    #[arg(long)]
    pub ask: bool,
    /// Write the files the cell wrote to /tmp/out (and its whole output,
    /// output.txt, when cut) under this folder, made if missing; an
    /// existing file is not replaced, a symlink not followed.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// Options of the bridge: which tools, and the limits of each call.
#[derive(Debug, Args)]
pub struct BridgeArgs {
    /// Wrap the servers of this JSON file instead of the one after `--`:
    /// local ones `{"mcpServers": {"NAME": {"command": ..., "args": [...],
    /// "env": {...}, "allow": [...], "private": true or [...], "policy":
    /// "FILE" or {...}}}}`, remote ones (streamable HTTP) with `"url"` and
    /// `"headers"` instead of `"command"`. Every tool is then named
    /// `NAME__TOOL`, even with one server.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["allow", "private", "env", "policy", "server_url"])]
    pub config: Option<PathBuf>,
    /// Wrap the remote MCP server at this URL (streamable HTTP) instead of
    /// a command after `--`; its tools keep their own names, as a
    /// command's do.
    #[arg(long = "url", value_name = "URL")]
    pub server_url: Option<String>,
    /// With `--url`: a header sent with every request to the server
    /// (`NAME:VALUE`, e.g. `Authorization:Bearer ...`); repeatable.
    #[arg(long = "header", value_name = "NAME:VALUE", requires = "server_url", value_parser = header_value)]
    pub headers: Vec<(String, String)>,
    /// The name of the one wrapped server (logs, questions, refusals,
    /// the console); default: a short name from its command (or the URL).
    #[arg(long = "name", value_name = "NAME", conflicts_with = "config", value_parser = parse_server_name)]
    pub server_name: Option<String>,
    /// With `--url`: how code-mode gets an access token for the server,
    /// as a config entry's `auth` block: `oauth` (a person logs in once,
    /// `code-mode login --url URL`), or the block as JSON, e.g.
    /// `{"type":"client_credentials","client_id":"...","client_secret":"${VAR}"}`
    /// or `{"type":"enterprise",...}` (an ID token from the company's
    /// identity provider exchanged for access; docs/servers.md).
    #[arg(long = "auth", value_name = "TYPE|JSON", requires = "server_url")]
    pub auth: Option<String>,
    /// Apply this policy file to the server's tools (which may be called,
    /// how often, with which arguments; tools named as the server lists
    /// them). With `--config`, give each entry its own `"policy"`.
    #[arg(long = "policy", value_name = "FILE")]
    pub policy: Option<PathBuf>,
    /// Keep only this tool (the name the server lists, or its Python name);
    /// repeatable. Default: every tool.
    #[arg(long = "allow", value_name = "TOOL")]
    pub allow: Vec<String>,
    /// Mark this tool as one that may see private data (the name the server
    /// lists, or its Python name; it must be kept); repeatable. After a
    /// session calls a private tool it may call only private tools, until
    /// the client session ends.
    #[arg(long = "private", value_name = "TOOL")]
    pub private: Vec<String>,
    /// Pass this variable from code-mode's environment to the wrapped server;
    /// repeatable. The server otherwise gets only HOME, LOGNAME, PATH, SHELL,
    /// TERM and USER.
    #[arg(long = "env", value_name = "NAME")]
    pub env: Vec<String>,
    /// Tool calls one run may make (0 to 1000000).
    #[arg(long, default_value_t = defaults::MAX_CALLS, value_name = "N", allow_hyphen_values = true,
          value_parser = ranges::CALLS.parser::<u32>())]
    pub max_calls: u32,
    /// Time one tool call may take, in seconds (0.001 to 86400).
    #[arg(long, default_value = "30", value_name = "SECONDS", allow_hyphen_values = true,
          value_parser = ranges::TIME.parser())]
    pub call_timeout: Duration,
    /// Time a call the policy holds for approval waits for the person's
    /// answer, in seconds (then it is refused; 0.001 to 86400).
    #[arg(long, default_value = "60", value_name = "SECONDS", allow_hyphen_values = true,
          value_parser = ranges::TIME.parser())]
    pub approval_timeout: Duration,
    /// How long the private-data taint, `grant` counters and direct-call
    /// count of a stateless (MCP 2026-07-28) client last without a call
    /// of its identity, in seconds; they then start anew. Never shorter
    /// than an idle MCP session over HTTP lives (300 to 2592000).
    #[arg(long, default_value = "3600", value_name = "SECONDS", allow_hyphen_values = true,
          value_parser = ranges::STATELESS_IDLE.parser())]
    pub stateless_idle: Duration,
    /// Offer tools the policy denies outright, labelled `[denied: reason]`
    /// in their stubs; by default they are left out (a call naming one is
    /// refused all the same).
    #[arg(long)]
    pub offer_denied: bool,
    /// Rank tools by meaning as well as by words in `search_tools`, with
    /// the sentence encoder in this directory (all-MiniLM-L6-v2's
    /// config.json, tokenizer.json and model.safetensors, as
    /// scripts/get-model.sh puts them). Loaded from these files only,
    /// never fetched; the bridge reads each catalog's tools once (~30 ms
    /// a tool) and answers a cell's unsure search in ~10 ms.
    #[arg(long, value_name = "DIR")]
    pub search_model: Option<PathBuf>,
    /// The wrapped server's command and its arguments (not with `--config`
    /// or `--url`): after every flag of the command that takes it, as its
    /// last argument.
    #[arg(last = true, required_unless_present_any = ["config", "server_url"], conflicts_with_all = ["config", "server_url"],
          value_name = "SERVER_COMMAND")]
    pub server: Vec<String>,
}

/// Options of the sandbox: which image.
#[derive(Debug, Args)]
pub struct RunnerArgs {
    /// The sandbox image (default: the image this version builds, or the
    /// one of --requirements/--apt; not with those).
    #[arg(long)]
    pub image: Option<String>,
    /// The packages in the sandbox image.
    #[command(flatten)]
    pub packages: PackageArgs,
    /// Where a missing default image's base comes from: auto, debootstrap or registry.
    #[arg(long, default_value = "auto", value_name = "SOURCE")]
    pub base: BaseSource,
    /// Containers kept started and ready ahead of need, each for one cell
    /// (default: 2 for serve and sandbox-runner, 0 for run); 0 starts every
    /// cell cold (0 to 64).
    #[arg(long, value_name = "N", allow_hyphen_values = true, value_parser = ranges::WARM.parser::<usize>())]
    pub warm: Option<usize>,
    /// Most containers the warm pool keeps while cells come fast: it
    /// follows the recent arrival rate, between --warm and this (default:
    /// the runner's capacity when --warm is above 0; never above the
    /// capacity; 0 to 64).
    #[arg(long, value_name = "N", allow_hyphen_values = true, value_parser = ranges::WARM.parser::<usize>())]
    pub warm_max: Option<usize>,
    /// How far back the warm pool counts arriving cells, in seconds; after
    /// this long without a cell it is back at --warm (0.001 to 86400).
    #[arg(long, default_value = "10", value_name = "SECONDS", allow_hyphen_values = true,
          value_parser = ranges::TIME.parser())]
    pub warm_window: Duration,
    /// The container runtime: runc (the host kernel behind our seccomp
    /// filter) or runsc (gVisor: a kernel of its own in between; must be
    /// registered with the engine, see docs/sandbox.md).
    #[arg(long, default_value = "runc", value_name = "runc|runsc")]
    pub runtime: Runtime,
}

/// Options of the frontend: the limits of a run and the description.
#[derive(Debug, Args)]
pub struct FrontendArgs {
    /// Deadline of one run, in seconds (0.001 to 86400).
    #[arg(long, default_value = "90", value_name = "SECONDS", allow_hyphen_values = true,
          value_parser = ranges::TIME.parser())]
    pub deadline: Duration,
    /// Largest code accepted, in bytes (1 to 1048576).
    #[arg(long, default_value_t = defaults::MAX_CODE, value_name = "BYTES", allow_hyphen_values = true,
          value_parser = ranges::CODE_BYTES.parser::<usize>())]
    pub max_code: usize,
    /// Characters of the run_python description (0 to 1000000).
    #[arg(long, default_value_t = defaults::DESCRIPTION_BUDGET, value_name = "CHARS", allow_hyphen_values = true,
          value_parser = ranges::DESCRIPTION_CHARS.parser::<usize>())]
    pub description_budget: usize,
    /// Cells one client session may run at once; one more is refused at
    /// once, saying so (no limit by default but `--max-concurrent`; 1 to
    /// 1024).
    #[arg(long, value_name = "N", allow_hyphen_values = true, value_parser = ranges::CELLS.parser::<usize>())]
    pub max_cells_per_session: Option<usize>,
}

/// How a service is watched and signalled from outside: its Prometheus
/// metrics and health, its pid file.
#[derive(Debug, Args)]
pub struct MetricsArgs {
    /// Serve `GET /metrics` (Prometheus text format) and `GET /healthz` on
    /// this address (`HOST:PORT`; port 0 picks a free one, logged at start).
    /// Off when not given.
    #[arg(long, value_name = "HOST:PORT")]
    pub metrics_addr: Option<String>,
    /// Write this process's id to FILE at start and remove it at exit, so
    /// `kill -HUP "$(cat FILE)"` signals this one process (a reload).
    #[arg(long, value_name = "FILE")]
    pub pid_file: Option<std::path::PathBuf>,
}

/// How a service reaches NATS.
#[derive(Debug, Args)]
pub struct NatsArgs {
    /// The NATS server (`nats://host:port`), or the servers of a cluster,
    /// comma-separated (`nats://a:4222,nats://b:4222,nats://c:4222`).
    #[arg(long = "nats", env = "CODE_MODE_NATS_URL", value_name = "URL[,URL...]")]
    pub url: String,
    /// The NATS user of this service.
    #[arg(long, env = "CODE_MODE_NATS_USER", value_name = "USER")]
    pub nats_user: Option<String>,
    /// Its password (prefer the environment variable to the flag).
    #[arg(long, env = "CODE_MODE_NATS_PASSWORD", value_name = "PASSWORD", hide_env_values = true)]
    pub nats_password: Option<String>,
    /// TLS: a PEM file of the certificate authorities that sign the NATS
    /// servers' certificates (the connection then requires TLS).
    #[arg(long, env = "CODE_MODE_NATS_CA", value_name = "FILE")]
    pub nats_ca: Option<std::path::PathBuf>,
    /// TLS: this service's client certificate (PEM), for servers that
    /// verify clients; with --nats-key.
    #[arg(long, env = "CODE_MODE_NATS_CERT", value_name = "FILE", requires = "nats_key")]
    pub nats_cert: Option<std::path::PathBuf>,
    /// TLS: the key of --nats-cert (PEM).
    #[arg(long, env = "CODE_MODE_NATS_KEY", value_name = "FILE", requires = "nats_cert")]
    pub nats_key: Option<std::path::PathBuf>,
    /// Replicas of the JetStream bucket (session state, bridge) and stream
    /// (audit, bridge and sandbox-runner) when this service creates them: 1
    /// for one nats-server, 3 in a cluster of three (an existing bucket or
    /// stream keeps its own). The frontend creates neither (1 to 5).
    #[arg(long, env = "CODE_MODE_JETSTREAM_REPLICAS", default_value_t = 1, value_name = "N",
          allow_hyphen_values = true, value_parser = ranges::REPLICAS.parser::<u8>())]
    pub jetstream_replicas: u8,
}

/// What each service started alone (`frontend`, `bridge`,
/// `sandbox-runner`) takes first: its NATS connection, its metrics and
/// health.
#[derive(Debug, Args)]
pub struct ServiceArgs {
    /// NATS.
    #[command(flatten)]
    pub nats: NatsArgs,
    /// Metrics and health.
    #[command(flatten)]
    pub metrics: MetricsArgs,
}

/// What the frontend offers its MCP clients (`serve` and `frontend`).
#[derive(Debug, Args)]
pub struct ClientArgs {
    /// Kept sessions.
    #[command(flatten)]
    pub keep: KeepArgs,
    /// The wrapped tools offered directly.
    #[command(flatten)]
    pub direct: DirectArgs,
    /// MCP over HTTP.
    #[command(flatten)]
    pub http: HttpArgs,
    #[command(flatten)]
    pub tasks: crate::task_args::TaskArgs,
}

/// Options of `frontend`.
#[derive(Debug, Args)]
pub struct FrontendServiceArgs {
    /// NATS, metrics and health.
    #[command(flatten)]
    pub service: ServiceArgs,
    /// Frontend options.
    #[command(flatten)]
    pub frontend: FrontendArgs,
    /// `run_python` calls that run at once; more wait for a slot (1 to 1024).
    #[arg(long, default_value_t = defaults::MAX_CONCURRENT_CELLS, value_name = "N", allow_hyphen_values = true,
          value_parser = ranges::CELLS.parser::<usize>())]
    pub max_concurrent: usize,
    /// How long a cell waits for a sandbox-runner with a free slot before it
    /// fails with "no capacity", in seconds (0.001 to 86400).
    #[arg(long, default_value = "30", value_name = "SECONDS", allow_hyphen_values = true,
          value_parser = ranges::TIME.parser())]
    pub capacity_wait: Duration,
    /// What the MCP clients get: kept sessions, the wrapped tools offered
    /// directly, MCP over HTTP.
    #[command(flatten)]
    pub clients: ClientArgs,
    /// Files out of cells (the JetStream bucket codemode_files).
    #[command(flatten)]
    pub files: crate::files_args::FilesArgs,
}

/// Options of MCP over streamable HTTP (`serve` and `frontend`).
#[derive(Debug, Args)]
pub struct HttpArgs {
    /// Serve MCP over streamable HTTP at http://ADDR/mcp instead of
    /// stdin/stdout, one session per MCP client (port 0 picks a free port;
    /// the address is printed on stderr).
    #[arg(long, value_name = "HOST:PORT")]
    pub http: Option<String>,
    /// With `--http`: a `Host` header value the server accepts (`name` or
    /// `name:port`), repeatable; default loopback only (DNS-rebinding
    /// protection). Name the hosts clients reach this server by.
    #[arg(long = "allowed-host", value_name = "HOST", requires = "http")]
    pub allowed_hosts: Vec<String>,
    /// With `--http`: the static bearer tokens, one line per client, `NAME
    /// sha256:HEX` (lines from `code-mode token new NAME`); reread on
    /// SIGHUP. A request without one of these tokens gets 401.
    #[arg(long, value_name = "FILE", requires = "http", conflicts_with = "oauth_issuer")]
    pub auth_tokens: Option<std::path::PathBuf>,
    /// With `--http`: accept OAuth 2.1 access tokens (JWTs) of this
    /// authorization server (its issuer URL; its keys are found from its
    /// metadata), served as this resource's authorization server in
    /// `/.well-known/oauth-protected-resource`.
    #[arg(long, value_name = "URL", requires_all = ["http", "oauth_resource"])]
    pub oauth_issuer: Option<String>,
    /// With `--oauth-issuer`: this server's canonical URI (as clients reach
    /// it, e.g. `https://mcp.example.com/mcp`), the audience a token must
    /// carry.
    #[arg(long, value_name = "URI", requires = "oauth_issuer")]
    pub oauth_resource: Option<String>,
    /// With `--oauth-issuer`: a scope every token must hold (repeatable);
    /// a token without it gets 403 insufficient_scope.
    #[arg(long = "oauth-scope", value_name = "SCOPE", requires = "oauth_issuer")]
    pub oauth_scopes: Vec<String>,
    /// With `--oauth-issuer`: the access-token claim holding the identity's
    /// groups (e.g. `groups`): an array of strings or one space-separated
    /// string; without it (or without the claim in a token) nobody has
    /// groups. The web console's approver rules (`group:NAME`) and
    /// `--console-operators` match them.
    #[arg(long, value_name = "NAME", requires = "oauth_issuer")]
    pub oauth_groups_claim: Option<String>,
    /// With `--http` and authentication: members of this group see the web
    /// console's operations view (sessions, last cells, audit tail);
    /// default `operators`.
    #[arg(long, value_name = "GROUP", requires = "http", value_parser = parse_group)]
    pub console_operators: Option<String>,
    /// With `--http`: where people reach this server (`https://host[:port]`,
    /// behind a proxy its public address): the web console's links given
    /// to clients start with it. Default: `http(s)://` and the address
    /// listened on.
    #[arg(long, value_name = "URL", requires = "http", value_parser = parse_public_url)]
    pub public_url: Option<String>,
    /// With `--oauth-issuer`: the web console's client id at that issuer.
    /// The console's login page then offers "Sign in with" the issuer (the
    /// authorization-code flow with PKCE; register the redirect URI
    /// `<public URL>/console/login/callback`); without it only the token
    /// form is offered. The scopes asked are every `--oauth-scope`, and
    /// `openid` when the issuer lists it.
    #[arg(long, value_name = "ID", requires = "oauth_issuer")]
    pub console_client_id: Option<String>,
    /// With `--console-client-id`: a file holding that client's secret on
    /// one line, read at startup (the console is then a confidential
    /// client; without it a public one, protected by PKCE alone).
    #[arg(long, value_name = "FILE", requires = "console_client_id")]
    pub console_client_secret_file: Option<std::path::PathBuf>,
    /// With `--http`: a browser origin allowed to call (`https://host[:port]`),
    /// repeatable; a request carrying any other `Origin` gets 403 (none is
    /// allowed by default, but a loopback origin passes at a server
    /// listening on loopback; clients that are not browsers send none).
    #[arg(long = "allowed-origin", value_name = "ORIGIN", requires = "http")]
    pub allowed_origins: Vec<String>,
    /// With `--http`: serve an address that is not loopback without
    /// authentication (anyone who reaches the port can run code and call
    /// every tool); refused without this flag.
    #[arg(long, requires = "http")]
    pub insecure_no_auth: bool,
    /// With `--http`: MCP sessions open at once, across clients (a
    /// stateless client's call counts as one while it runs); over it a new
    /// session gets 429 (1 to 100000).
    #[arg(long, value_name = "N", allow_hyphen_values = true,
          value_parser = ranges::SESSIONS.parser::<usize>())]
    pub max_sessions: Option<usize>,
    /// With `--http`: MCP sessions one identity may hold open at once (1 to
    /// 100000).
    #[arg(long, value_name = "N", allow_hyphen_values = true,
          value_parser = ranges::SESSIONS.parser::<usize>())]
    pub max_sessions_per_identity: Option<usize>,
    /// With `--http`: the largest request body accepted, in bytes (default
    /// 4 MiB); a larger one gets 413 before it is read to the end (1024 to
    /// 67108864).
    #[arg(long, value_name = "BYTES", allow_hyphen_values = true,
          value_parser = ranges::BODY_BYTES.parser::<usize>())]
    pub max_body: Option<usize>,
    /// With `--http`: serve HTTPS with this certificate chain (PEM, the
    /// server's certificate first); needs `--tls-key`. TLS protects the
    /// wire, not who may call: authentication is still required off
    /// loopback.
    #[arg(long, value_name = "FILE", requires_all = ["http", "tls_key"])]
    pub tls_cert: Option<std::path::PathBuf>,
    /// With `--tls-cert`: the certificate's private key (PEM: PKCS#8,
    /// PKCS#1 or SEC1).
    #[arg(long, value_name = "FILE", requires_all = ["http", "tls_cert"])]
    pub tls_key: Option<std::path::PathBuf>,
}

/// Options of `bridge`.
#[derive(Debug, Args)]
pub struct BridgeServiceArgs {
    /// NATS, metrics and health.
    #[command(flatten)]
    pub service: ServiceArgs,
    /// Bridge options.
    #[command(flatten)]
    pub bridge: BridgeArgs,
    /// The audit record.
    #[command(flatten)]
    pub audit: AuditArgs,
}

/// Options of `sandbox-runner`.
#[derive(Debug, Args)]
pub struct RunnerServiceArgs {
    /// NATS, metrics and health.
    #[command(flatten)]
    pub service: ServiceArgs,
    /// Sandbox options.
    #[command(flatten)]
    pub runner: RunnerArgs,
    /// Cells this runner runs at once; a cell finding every runner full
    /// waits at the frontend, then fails with "no capacity" (1 to 1024).
    #[arg(long, default_value_t = defaults::MAX_CONCURRENT_CELLS, value_name = "N", allow_hyphen_values = true,
          value_parser = ranges::CELLS.parser::<usize>())]
    pub capacity: usize,
    /// The audit record.
    #[command(flatten)]
    pub audit: AuditArgs,
    /// Files out of cells (the JetStream bucket codemode_files).
    #[command(flatten)]
    pub files: crate::files_args::FilesArgs,
}

/// Options of `build-image`.
#[derive(Debug, Args)]
pub struct BuildImageArgs {
    /// Where the base comes from: auto (debootstrap when available as root,
    /// else the registry), debootstrap, or registry (python:3.12-slim).
    #[arg(long, default_value = "auto", value_name = "SOURCE")]
    pub base: BaseSource,
    /// Do nothing when the image already exists (an image with packages
    /// is never built twice: its tag is a hash of its contents).
    #[arg(long)]
    pub if_missing: bool,
    /// Build the image with these packages instead of the default one.
    #[command(flatten)]
    pub packages: PackageArgs,
}

/// Packages in the sandbox image (`build-image`, `serve`, `run`,
/// `sandbox-runner`, `doctor`): each set is its own image, tagged
/// `code-mode-sandbox:p-<hash>` by a hash of the runner and the packages,
/// so every command given the same set picks the same image.
#[derive(Debug, Clone, Default, Args)]
pub struct PackageArgs {
    /// A pip requirements file whose packages the sandbox image holds
    /// (every requirement pinned with `==`; with `--hash` options pip checks
    /// every download). The image is built when missing.
    #[arg(long, value_name = "FILE")]
    pub requirements: Option<PathBuf>,
    /// A Debian package the sandbox image holds, e.g. python3-numpy
    /// (repeatable; the offline debootstrap base only).
    #[arg(long = "apt", value_name = "PACKAGE")]
    pub apt: Vec<String>,
    /// With --requirements: install from the wheels in this directory
    /// instead of a package index.
    #[arg(long, value_name = "DIR", requires = "requirements")]
    pub wheels: Option<PathBuf>,
}

impl PackageArgs {
    /// The packages asked for.
    pub fn packages(&self) -> Packages {
        Packages { requirements: self.requirements.clone(), apt: self.apt.clone(), wheels: self.wheels.clone() }
    }
}

/// The subcommands that wrap servers, and so take `-- <server command>`,
/// `--url URL` or `--config FILE`.
const WRAPPING: [&str; 3] = ["serve", "run", "bridge"];

/// A clearer message for the commonest mistake with a subcommand that
/// wraps servers: the server's command given without `--`, or no server
/// at all. The three forms are shown. `None` for any other error (clap's own
/// message stands).
pub fn server_form_hint(error: &clap::Error, argv: &[std::ffi::OsString]) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let command = argv.iter().skip(1).filter_map(|a| a.to_str()).find(|a| WRAPPING.contains(a))?;
    let invalid = match error.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(s)) => vec![s.clone()],
        Some(ContextValue::Strings(v)) => v.clone(),
        _ => Vec::new(),
    };
    let forms = format!(
        "give the server to wrap in one of three forms:\n  \
         code-mode {command} [OPTIONS] -- <server command> [its arguments...]\n  \
         code-mode {command} [OPTIONS] --url https://host/mcp [--header NAME:VALUE]   (one remote server)\n  \
         code-mode {command} [OPTIONS] --config servers.json   (the mcpServers shape; several servers, remote ones too)"
    );
    match error.kind() {
        ErrorKind::UnknownArgument => {
            let stray = invalid.first().filter(|a| !a.starts_with('-'))?;
            Some(format!(
                "code-mode {command}: unexpected argument {stray:?}: a server's command goes after `--`; {forms}"
            ))
        }
        ErrorKind::MissingRequiredArgument if invalid.iter().any(|a| a.contains("SERVER_COMMAND")) => {
            Some(format!("code-mode {command}: no server to wrap: {forms}"))
        }
        _ => None,
    }
}
