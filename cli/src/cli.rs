//! Command-line options. Every limit defaults to the value in
//! `code_mode_core::defaults`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use code_mode_core::defaults;
use code_mode_sandbox_runner::image::BaseSource;

/// Let a model drive any MCP server by writing Python, run in a locked-down
/// Docker sandbox, with every tool call checked on the host.
#[derive(Debug, Parser)]
#[command(name = "code-mode", version)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve MCP on stdin/stdout with one tool, run_python, wrapping the
    /// stdio MCP server whose command follows `--`.
    Serve(ServeArgs),
    /// Run one cell of code against the server whose command follows `--`
    /// and print the result as JSON on stdout.
    Run(RunArgs),
    /// Build the sandbox image.
    BuildImage(BuildImageArgs),
}

/// Options of `serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Options shared with `run`.
    #[command(flatten)]
    pub common: CommonArgs,
    /// `run_python` calls that run at once; more wait for a slot.
    #[arg(long, default_value_t = defaults::MAX_CONCURRENT_CELLS, value_name = "N")]
    pub max_concurrent: usize,
    /// The wrapped server's command and its arguments.
    #[arg(last = true, required = true, value_name = "SERVER_COMMAND")]
    pub server: Vec<String>,
}

/// Options of `run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Options shared with `serve`.
    #[command(flatten)]
    pub common: CommonArgs,
    /// The code to run.
    #[arg(long, conflicts_with = "file")]
    pub code: Option<String>,
    /// A file holding the code to run (default: read the code from stdin).
    #[arg(long, value_name = "PATH")]
    pub file: Option<PathBuf>,
    /// The wrapped server's command and its arguments.
    #[arg(last = true, required = true, value_name = "SERVER_COMMAND")]
    pub server: Vec<String>,
}

/// Options shared by `serve` and `run`.
#[derive(Debug, Args)]
pub struct CommonArgs {
    /// Keep only this tool (the name the server lists, or its Python name);
    /// repeatable. Default: every tool.
    #[arg(long = "allow", value_name = "TOOL")]
    pub allow: Vec<String>,
    /// Pass this variable from code-mode's environment to the wrapped server;
    /// repeatable. The server otherwise gets only HOME, LOGNAME, PATH, SHELL,
    /// TERM and USER.
    #[arg(long = "env", value_name = "NAME")]
    pub env: Vec<String>,
    /// The sandbox image (default: the image this version builds).
    #[arg(long)]
    pub image: Option<String>,
    /// Where a missing default image's base comes from: auto, debootstrap or registry.
    #[arg(long, default_value = "auto", value_name = "SOURCE")]
    pub base: BaseSource,
    /// Deadline of one run, in seconds.
    #[arg(long, default_value_t = defaults::DEADLINE.as_secs_f64(), value_name = "SECONDS")]
    pub deadline: f64,
    /// Tool calls one run may make.
    #[arg(long, default_value_t = defaults::MAX_CALLS, value_name = "N")]
    pub max_calls: u32,
    /// Time one tool call may take, in seconds.
    #[arg(long, default_value_t = defaults::CALL_TIMEOUT.as_secs_f64(), value_name = "SECONDS")]
    pub call_timeout: f64,
    /// Largest code accepted, in bytes.
    #[arg(long, default_value_t = defaults::MAX_CODE, value_name = "BYTES")]
    pub max_code: usize,
    /// Characters of the run_python description.
    #[arg(long, default_value_t = defaults::DESCRIPTION_BUDGET, value_name = "CHARS")]
    pub description_budget: usize,
}

/// Options of `build-image`.
#[derive(Debug, Args)]
pub struct BuildImageArgs {
    /// Where the base comes from: auto (debootstrap when available as root,
    /// else the registry), debootstrap, or registry (python:3.12-slim).
    #[arg(long, default_value = "auto", value_name = "SOURCE")]
    pub base: BaseSource,
    /// Do nothing when the image already exists.
    #[arg(long)]
    pub if_missing: bool,
}
