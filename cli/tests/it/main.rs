//! Integration tests of `code-mode` with a real Docker engine, the real
//! sandbox image and a real stdio MCP server (`code-mode-test-server`).
//!
//! Under `CI=true` a missing engine or image fails these tests; on a
//! developer's machine they report that they did not run.

// A panic in a test is the test failing.
#![allow(clippy::unwrap_used)]

mod accounts;
mod accounts_browser;
mod accounts_faults;
mod alerts;
mod approval;
mod audit;
mod auth;
mod cancel;
mod cluster;
mod code_mcp;
mod compose;
mod conformance;
mod conformance_client;
mod console;
mod console_browser;
mod console_oauth;
mod direct;
mod discovery;
mod docs_commands;
mod docs_links;
mod doctor;
mod faults;
mod files_data_science;
mod files_faults;
mod files_http_large;
mod files_in;
mod files_in_inline_nats;
mod files_in_nats;
mod files_kept;
mod files_limits;
mod files_out;
mod files_out_nats;
mod first_hour;
mod gateway_names;
mod http;
mod http_attacks;
mod https;
mod idempotency_keys;
mod image_build;
mod kept;
mod library;
mod list_changed;
mod mcp_log;
mod mcp_stdio;
mod metrics;
mod model_reads;
mod monitoring;
mod oauth;
mod orphans;
mod packages;
mod passthrough;
mod passthrough_faults;
mod policy;
mod policy_categories;
mod policy_check;
mod private;
mod questions_on_reads;
mod readme;
mod reload;
mod remote;
mod roots_changed;
mod run_command;
mod sandbox_lifetime;
mod search_by_meaning;
mod server_name;
mod session_walk;
mod sessions;
mod several;
mod shared_catalog;
mod skill;
mod split;
mod standalone_questions;
mod support;
mod task_adopt;
mod task_cells;
mod task_notes;
mod task_questions;
mod tasks_passthrough;
mod team;
mod threat_model;
mod tls;
mod token_exchange;
mod traces;
mod upstream;
mod upstream_attacks;
mod upstream_login;
