//! `code-mode describe`: what the model will read, without running a cell.
//!
//! It starts the wrapped servers the way `serve` does (same options, so
//! the same names, labels and allowlist), takes the catalog the bridge
//! builds, and renders the `run_python` description through the
//! frontend's own code, so what it prints is what a client gets. No
//! sandbox-runner starts, so Docker is not needed; the description is the
//! one of the default image (the standard library only), or with
//! `--requirements`/`--apt`/`--wheels` of that image, read from Docker.

use code_mode_core::bus::Bus;
use code_mode_core::state::SessionStore;
use code_mode_mcp_frontend::catalog::View;
use code_mode_mcp_frontend::description::{self, Tier};
use code_mode_sandbox_runner::image::{self, Packages};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::cli::DescribeArgs;
use crate::parts;

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

/// What the sandbox image of `packages` holds beyond the standard library:
/// nothing for the default image (Docker is not asked), else its label;
/// the image must exist.
async fn image_packages(packages: &Packages) -> anyhow::Result<Vec<String>> {
    if packages.is_empty() {
        return Ok(Vec::new());
    }
    let tag = image::packages_tag(packages)?;
    let docker = code_mode_sandbox_runner::connect_docker().await?;
    if !image::image_exists(&docker, &tag).await? {
        anyhow::bail!(
            "the sandbox image {tag} of these packages is not built: run `code-mode build-image` with the same \
             --requirements/--apt/--wheels first"
        );
    }
    Ok(image::installed_packages(&docker, &tag).await?)
}

/// Start the servers, print the description, the tiers and the stubs, stop
/// the servers.
pub async fn describe(args: DescribeArgs, root: &CancellationToken) -> anyhow::Result<()> {
    let packages = image_packages(&args.packages.packages()).await?;
    let servers = parts::wrapped_servers(&args.bridge)?;
    let parts = parts::bridge_parts(&args.bridge, servers, SessionStore::in_memory(), None);
    let cancel = root.child_token();
    let running = crate::stack::start_bridge(parts, &Bus::in_process(), &cancel).await?;
    let catalog = running.bridge.catalog_message();
    cancel.cancel();
    running.stopped().await;

    let config = parts::frontend_config(&args.frontend, 1, parts::keep_config(&args.keep), Default::default());
    let budget = config.description_budget;
    let mut facts = View::facts(&catalog, &config);
    // No runner reports here: the default image's packages are known, none
    // beyond the standard library, and that is what `serve` says with it;
    // an image of packages names its own, read from the image.
    facts.packages = Some(packages);
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
