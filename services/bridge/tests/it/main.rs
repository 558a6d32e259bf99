//! Integration tests of the bridge against the real test MCP server
//! (`code-mode-test-server`) over real stdio: no Docker needed.
//!
//! Build the test server first: `cargo build -p code-mode-test-server`.
//! Every test starts its own server with its own request log (`--log`), so
//! a test can prove what reached the server and what did not.

// A panic in a test is the test failing.
#![allow(clippy::unwrap_used)]

mod audit;
mod calls;
mod catalog;
mod config;
mod direct;
mod lifecycle;
mod list_changed;
mod meaning;
mod metrics;
mod policy;
mod policy_applied;
mod private;
mod refusals;
mod remote;
mod replay;
mod restart;
mod search;
mod search_eval;
mod search_held_out;
mod search_meaning;
mod search_requests;
mod search_unseen;
mod session_end;
mod startup;
mod stateless;
mod support;
