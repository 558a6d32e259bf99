//! `code-mode-test-server`: a small MCP server that speaks MCP over stdio, for
//! the code-mode integration tests to run as a wrapped stdio MCP server.
//!
//! It offers tools that behave in known ways (`add`, `echo`, `sleep`, `huge`,
//! `fail`, `protocol_error`, `crash`, `get_env`, `count`), tools with names
//! and input schemas that are awkward to turn into code, and flags that add
//! more of them (`--many`, `--long-descriptions`, `--clash`, `--deep-schema`).
//! `--log FILE` records every request that reaches the server, so tests can
//! prove what got through; `--exit-on-start` makes it fail before serving.
//!
//! Stdout is the MCP channel: logs go to stderr only.

mod catalog;
mod server;

use std::{fs::OpenOptions, path::PathBuf};

use anyhow::Context as _;
use clap::Parser;
use rmcp::ServiceExt as _;

use crate::{
    catalog::{Catalog, CatalogOptions},
    server::{RequestLog, TestServer},
};

/// A stdio MCP server with awkward tools, for the code-mode integration tests.
#[derive(Debug, Parser)]
#[command(name = "code-mode-test-server", version)]
struct Args {
    /// Append `<method> <tool name or ->` to FILE for every request received.
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    /// Add N tools named `extra_tool_0000`, `extra_tool_0001`, ...
    #[arg(long, value_name = "N", default_value_t = 0)]
    many: usize,
    /// Give `echo` a 10,000-character description and add `long_desc_tool`
    /// (50,000 characters).
    #[arg(long)]
    long_descriptions: bool,
    /// Add tools `a-b` and `a_b`, whose names clash once made identifiers.
    #[arg(long)]
    clash: bool,
    /// Add tools `deep`, `bad_schema` and `hostile_schema`.
    #[arg(long)]
    deep_schema: bool,
    /// How many object levels the `deep` tool's schema nests (deeper than about 60 and an
    /// rmcp client, which parses with serde_json's 128-level limit, cannot read tools/list).
    #[arg(long, value_name = "N", default_value_t = 40)]
    deep_depth: usize,
    /// Exit with code 2 before serving.
    #[arg(long)]
    exit_on_start: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();

    let args = Args::parse();
    if args.exit_on_start {
        eprintln!("code-mode-test-server: --exit-on-start given, exiting with code 2");
        std::process::exit(2);
    }

    let log = match &args.log {
        Some(path) => Some(
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("cannot open the request log {}", path.display()))?,
        ),
        None => None,
    };

    let catalog = Catalog::build(&CatalogOptions {
        many: args.many,
        long_descriptions: args.long_descriptions,
        clash: args.clash,
        deep_schema: args.deep_schema,
        deep_depth: args.deep_depth,
    });
    tracing::info!(tools = catalog.tools.len(), "serving MCP over stdio");

    let service = RequestLog::new(TestServer::new(catalog), log)
        .serve(rmcp::transport::stdio_pipes())
        .await
        .context("MCP initialization failed")?;
    service.waiting().await.context("MCP service failed")?;
    Ok(())
}
