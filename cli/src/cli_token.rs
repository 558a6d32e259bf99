//! The options of `token` (making bearer tokens for `--auth-tokens`).

use clap::{Args, Subcommand};

/// Options of `token`.
#[derive(Debug, Args)]
pub struct TokenArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: TokenCommand,
}

/// The subcommands of `token`.
#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Print a fresh random token for the client NAME (shown this once;
    /// give it to the client) and the line to add to the `--auth-tokens`
    /// file (which holds only the token's SHA-256).
    New {
        /// The client's name: its identity in audit records, logs and
        /// approval questions (letters, digits, `-_.@`, at most 64).
        name: String,
    },
}
