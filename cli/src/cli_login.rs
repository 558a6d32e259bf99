//! Command-line options of `login` and `logout`: which remote servers (a
//! `mcpServers` file or one `--url`), where the login is kept (this user's
//! files or, with `--nats`, the split bridge's state store), and the
//! person's time.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::ranges;
use crate::text_values::header_value;

/// Which remote servers `login` and `logout` are about.
#[derive(Debug, Args)]
pub struct LoginTarget {
    /// The servers of this `mcpServers` file (those with an `auth` block).
    #[arg(long, value_name = "FILE", conflicts_with = "server_url")]
    pub config: Option<PathBuf>,
    /// The one remote server at this URL (as `serve --url`).
    #[arg(long = "url", value_name = "URL")]
    pub server_url: Option<String>,
    /// With `--url`: its auth block, as `serve --auth` (default `oauth`).
    #[arg(long = "auth", value_name = "TYPE|JSON", requires = "server_url")]
    pub auth: Option<String>,
    /// With `--url`: a header sent with every request (`NAME:VALUE`).
    #[arg(long = "header", value_name = "NAME:VALUE", requires = "server_url", value_parser = header_value)]
    pub headers: Vec<(String, String)>,
    /// The server of `--config` to log in to (default: each that needs it).
    #[arg(value_name = "SERVER", conflicts_with = "server_url")]
    pub server: Option<String>,
    /// Keep the login in the split deployment's state store at this NATS
    /// server (where `code-mode bridge` reads it; credentials from
    /// CODE_MODE_NATS_USER and CODE_MODE_NATS_PASSWORD, the key from
    /// CODE_MODE_TOKEN_KEY) instead of this user's files.
    #[arg(long = "nats", value_name = "URL")]
    pub nats: Option<String>,
}

/// Options of `login`.
#[derive(Debug, Args)]
pub struct LoginArgs {
    /// Which servers.
    #[command(flatten)]
    pub target: LoginTarget,
    /// List each server's login (scopes, expiry, authorization server),
    /// never a token; log in to nothing.
    #[arg(long)]
    pub status: bool,
    /// With `--status`: one JSON object per server, one per line.
    #[arg(long, requires = "status")]
    pub json: bool,
    /// Print the authorization URL without opening a browser.
    #[arg(long)]
    pub no_browser: bool,
    /// How long the person has to log in, in seconds (0.001 to 86400).
    #[arg(long, default_value = "300", value_name = "SECONDS", allow_hyphen_values = true,
          value_parser = ranges::TIME.parser())]
    pub timeout: Duration,
}

/// Options of `logout`.
#[derive(Debug, Args)]
pub struct LogoutArgs {
    /// Which servers.
    #[command(flatten)]
    pub target: LoginTarget,
}
