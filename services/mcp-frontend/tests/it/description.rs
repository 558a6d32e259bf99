//! The description at scale: the tier each number of real tools gets, its
//! size in characters and cl100k tokens, and that a tier shows every tool
//! it names.

use std::path::PathBuf;

use code_mode_mcp_frontend::description::{RunFacts, Tier, describe};
use code_mode_proto::ToolEntry;

/// `testing/search-eval`.
fn eval_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testing/search-eval")
}

/// The catalog entries of 300 real tools (the four servers' 42, then
/// copies of them under other server names), as the frontend receives them.
pub fn real_entries() -> Vec<ToolEntry> {
    let text = std::fs::read_to_string(eval_dir().join("catalog-300.json")).expect("the committed catalog");
    serde_json::from_str(&text).expect("catalog entries")
}

/// The description's facts with the default limits (server-everything
/// offers resources).
fn default_facts() -> RunFacts {
    use code_mode_core::defaults as d;
    RunFacts {
        deadline_secs: d::DEADLINE.as_secs(),
        max_calls: d::MAX_CALLS,
        call_timeout_secs: d::CALL_TIMEOUT.as_secs(),
        max_output: d::MAX_OUTPUT,
        keep: None,
        stateless: None,
        resources: true,
    }
}

#[test]
fn the_description_of_150_real_tools_fits_4000_characters_in_the_names_tier_and_names_every_tool() {
    let all = real_entries();
    assert_eq!(all.len(), 300);
    let budget = code_mode_core::defaults::DESCRIPTION_BUDGET;
    let cl100k = tiktoken_rs::cl100k_base().expect("cl100k_base ships with tiktoken-rs");
    let raw: usize = ["everything", "memory", "filesystem", "time"]
        .iter()
        .map(|s| std::fs::read_to_string(eval_dir().join("tools").join(format!("{s}.json"))).unwrap().chars().count())
        .sum();
    println!("run_python description with the default budget ({budget} characters), real tools (testing/search-eval)");
    println!("{:>5}  {:<9} {:>10} {:>12} {:>14}", "tools", "tier", "characters", "tokens (c/4)", "tokens (cl100k)");
    for n in [10, 38, 150, 300] {
        let entries = &all[..n];
        let (tier, text) = describe(&default_facts(), entries, budget);
        let chars = text.chars().count();
        let tokens = cl100k.encode_with_special_tokens(&text).len();
        println!("{n:>5}  {:<9} {chars:>10} {:>12} {tokens:>14}", format!("{tier:?}"), chars.div_ceil(4));
        assert!(chars <= budget, "{n} tools: {chars} characters");
        match n {
            38 => assert_eq!(tier, Tier::Summaries),
            150 => {
                assert_eq!(tier, Tier::Names);
                assert!(chars <= 4_000, "150 tools take {chars} characters");
                // Every tool is in the names tier, by the name after its
                // server's prefix.
                for entry in entries {
                    let short = entry.name.rsplit("__").next().unwrap();
                    assert!(text.contains(&format!(" {short}")), "{} is not in the description", entry.name);
                }
            }
            300 => assert_eq!(tier, Tier::Names),
            _ => {}
        }
    }
    println!("(the four servers' 42 tools' own tools/list JSON: {raw} characters)");
}
