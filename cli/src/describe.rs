//! `code-mode describe`: what the model will read, without running a cell.
//!
//! It starts the wrapped servers the way `serve` does (same options, so
//! the same names, labels and allowlist), takes the catalog the bridge
//! builds, and renders the `run_python` description through the
//! frontend's own code, so what it prints is what a client gets. No
//! sandbox-runner starts, so Docker is not needed; the description is the
//! one of the default image (the standard library only).

use code_mode_core::bus::Bus;
use code_mode_core::state::SessionStore;
use code_mode_mcp_frontend::FrontendConfig;
use code_mode_mcp_frontend::catalog::View;
use code_mode_mcp_frontend::description::{self, Tier};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::cli::DescribeArgs;

/// A tier's name as `describe` prints it.
fn tier_name(tier: Tier) -> &'static str {
    match tier {
        Tier::Empty => "empty",
        Tier::Stubs => "stubs",
        Tier::Typed => "typed",
        Tier::Signatures => "signatures",
        Tier::Names => "names",
        Tier::Count => "count",
    }
}

/// Start the servers, print the description, the tiers and the stubs, stop
/// the servers.
pub async fn describe(args: DescribeArgs, root: &CancellationToken) -> anyhow::Result<()> {
    let servers = crate::app::wrapped_servers(&args.bridge, &args.server)?;
    let parts = crate::app::bridge_parts(&args.bridge, servers, SessionStore::in_memory(), None);
    let cancel = root.child_token();
    let running = crate::stack::start_bridge(parts, &Bus::in_process(), &cancel).await?;
    let catalog = running.bridge.catalog_message();
    cancel.cancel();
    running.stopped().await;

    let config =
        FrontendConfig { keep: crate::app::keep_config(&args.keep), ..crate::app::frontend_config(&args.frontend, 1)? };
    let budget = config.description_budget;
    let mut facts = View::facts(&catalog, &config);
    // No runner reports here: the default image's packages are known, none
    // beyond the standard library, and that is what `serve` says with it.
    facts.packages.get_or_insert_with(Vec::new);
    let (tier, text) = description::describe(&facts, &catalog.tools, budget);
    let sizes = description::tier_sizes(&facts, &catalog.tools);
    let chars = text.chars().count();
    if args.json {
        let report = json!({
            "tier": tier_name(tier),
            "characters": chars,
            "budget": budget,
            "description": text,
            "tiers": sizes.iter().map(|(t, n)| json!({"tier": tier_name(*t), "characters": n})).collect::<Vec<_>>(),
            "tools": catalog.tools.iter().map(|t| json!({
                "name": t.name,
                "server": t.server,
                "signature": t.signature.line,
                "summary": t.summary,
                "stub": t.stub,
                "labels": t.mark,
            })).collect::<Vec<_>>(),
        });
        println!("{report}");
        return Ok(());
    }
    println!(
        "# The run_python description ({} tools; tier: {}; {chars} of {budget} characters)\n",
        catalog.tools.len(),
        tier_name(tier)
    );
    println!("{text}\n");
    println!("# Each tier's size (the first that fits the budget, --description-budget, is used)\n");
    let mut typed_seen = false;
    for (tier, size) in &sizes {
        let mark = if *size <= budget { "fits" } else { "too large" };
        let name = match tier {
            // The typed tier's second try cuts each description short.
            Tier::Typed if typed_seen => "typed, descriptions cut short",
            Tier::Typed => {
                typed_seen = true;
                "typed"
            }
            other => tier_name(*other),
        };
        println!("{name:<30} {size:>7} characters  {mark}");
    }
    println!("{:<30} (what is left when no other tier fits)\n", "count");
    println!("# TOOLS: each tool's stub, as TOOLS[name] shows it in a cell\n");
    for tool in &catalog.tools {
        println!("{}\n", tool.stub);
    }
    Ok(())
}
