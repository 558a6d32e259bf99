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
        packages: Some(Vec::new()),
        unavailable: Vec::new(),
        files_out: false,
    }
}

/// The three everyday reference servers (memory, filesystem, time: 25
/// tools), then all four (with everything: 42), then 150 and 300 tools.
const SIZES: [(&str, std::ops::Range<usize>); 4] =
    [("memory+filesystem+time", 17..42), ("the four servers", 0..42), ("150", 0..150), ("300", 0..300)];

#[test]
fn the_reference_servers_get_every_typed_signature_and_150_real_tools_fit_4000_characters_by_name() {
    let all = real_entries();
    assert_eq!(all.len(), 300);
    let budget = code_mode_core::defaults::DESCRIPTION_BUDGET;
    let cl100k = tiktoken_rs::cl100k_base().expect("cl100k_base ships with tiktoken-rs");
    let raw: usize = ["everything", "memory", "filesystem", "time"]
        .iter()
        .map(|s| std::fs::read_to_string(eval_dir().join("tools").join(format!("{s}.json"))).unwrap().chars().count())
        .sum();
    println!("run_python description with the default budget ({budget} characters), real tools (testing/search-eval)");
    println!("{:>5}  {:<24} {:<10} {:>10} {:>15}", "tools", "servers", "tier", "characters", "tokens (cl100k)");
    for (what, range) in SIZES {
        let entries = &all[range];
        let n = entries.len();
        let (tier, text) = describe(&default_facts(), entries, budget);
        let chars = text.chars().count();
        let tokens = cl100k.encode_with_special_tokens(&text).len();
        println!("{n:>5}  {what:<24} {:<10} {chars:>10} {tokens:>15}", format!("{tier:?}"));
        assert!(chars <= budget, "{n} tools: {chars} characters");
        match n {
            25 | 42 => {
                assert_eq!(tier, Tier::Typed, "{what}");
                // Every parameter typed, every declared result shown: each
                // tool's whole typed line is there.
                for entry in entries {
                    assert!(!entry.signature.line.is_empty(), "{}", entry.name);
                    assert!(text.contains(&format!("\n{}", entry.signature.line)), "{} is cut", entry.name);
                }
                let read = entries.iter().find(|e| e.name == "filesystem__read_text_file").unwrap();
                assert_eq!(
                    read.signature.line,
                    "filesystem__read_text_file(path: str, tail?: float, head?: float) -> {content: str}"
                );
            }
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
            _ => assert_eq!(tier, Tier::Names),
        }
    }
    println!("(the four servers' 42 tools' own tools/list JSON: {raw} characters)");
    // Where the tier changes, adding the catalog's tools one by one: each
    // tier once, from the richest to the leanest, at the numbers
    // docs/usage.md and the README give.
    let mut changes = Vec::new();
    for n in 1..=all.len() {
        let (tier, text) = describe(&default_facts(), &all[..n], budget);
        if changes.last().is_none_or(|(_, last)| *last != tier) {
            println!("from {n:>3} tools: {tier:?} ({} characters)", text.chars().count());
            changes.push((n, tier));
        }
    }
    let tiers: Vec<Tier> = changes.iter().map(|(_, tier)| *tier).collect();
    assert_eq!(tiers, [Tier::Stubs, Tier::Typed, Tier::Signatures, Tier::Names], "{changes:?}");
    assert_eq!(changes[0].0, 1, "{changes:?}");
    let at: Vec<usize> = changes[1..].iter().map(|(n, _)| *n).collect();
    for (doc, text) in documents() {
        assert_eq!(documented_changes(&text), at, "{doc} says the tier changes elsewhere than it does");
    }
}

/// The documents that say where the tier changes: their names and text.
fn documents() -> Vec<(&'static str, String)> {
    ["docs/usage.md", "README.md"]
        .into_iter()
        .map(|doc| (doc, std::fs::read_to_string(root().join(doc)).unwrap_or_else(|e| panic!("{doc}: {e}"))))
        .collect()
}

/// The numbers of tools a document says the tier changes at ("the tier
/// changes at 28 tools (stubs to typed lines), 69 (...) and 108 (...).").
fn documented_changes(text: &str) -> Vec<usize> {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let from = flat.find("the tier changes at ").expect("a sentence saying where the tier changes");
    let sentence = &flat[from..];
    let mut depth = 0;
    let mut outside = String::new();
    for c in sentence.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            '.' if depth == 0 => break,
            c if depth == 0 => outside.push(c),
            _ => {}
        }
    }
    outside.split(|c: char| !c.is_ascii_digit()).filter(|w| !w.is_empty()).map(|w| w.parse().unwrap()).collect()
}

/// The checked-in description of the four reference servers' 42 tools at
/// each tier (`testing/search-eval/golden/`); `UPDATE_FIXTURES=1`
/// rewrites them (and fails the test under `CI=true`). A change to what
/// the model reads shows in review.
#[test]
fn the_description_of_the_four_reference_servers_at_each_tier_is_the_checked_in_one() {
    use code_mode_mcp_frontend::description::tier_sizes;
    let entries = &real_entries()[..42];
    let facts = default_facts();
    let sizes = tier_sizes(&facts, entries);
    let names = ["stubs", "typed", "typed-short", "signatures", "names"];
    assert_eq!(sizes.len(), names.len());
    let mut budgets: Vec<(&str, usize)> = names.iter().copied().zip(sizes.iter().map(|(_, n)| *n)).collect();
    budgets.push(("count", sizes.last().unwrap().1 - 1));
    let dir = eval_dir().join("golden");
    for (name, budget) in budgets {
        let (tier, text) = describe(&facts, entries, budget);
        assert_eq!(format!("{tier:?}").to_lowercase(), name.split('-').next().unwrap(), "{name}");
        let path = dir.join(format!("{name}.txt"));
        if code_mode_core::testing::rewrite_golden("UPDATE_FIXTURES") {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &text).unwrap();
            continue;
        }
        let golden = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(text, golden, "the {name} tier differs from {} (UPDATE_FIXTURES=1 rewrites it)", path.display());
    }
}

/// The workspace's root (the docs are in `docs/`).
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The numbers of the table row starting `| <first> |` in `file`: its
/// characters and tokens (the row's last two cells, `6,836` read as 6836).
fn row_numbers(file: &str, first: &str) -> (usize, usize) {
    let text = std::fs::read_to_string(root().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    let row = text
        .lines()
        .find(|l| l.starts_with(&format!("| {first} |")))
        .unwrap_or_else(|| panic!("{file} has no row | {first} |"));
    let cells: Vec<usize> = row.split('|').map(|c| c.trim().replace(',', "")).filter_map(|c| c.parse().ok()).collect();
    assert!(cells.len() >= 2, "{file}: {row}");
    (cells[cells.len() - 2], cells[cells.len() - 1])
}

/// The sizes README.md and docs/usage.md give, and the count
/// docs/what-the-model-reads.md gives for the description it prints, are
/// the sizes measured here: the 25 tools' row is the description that
/// document prints (which `discovery::the_first_cell_of_the_task_runs_as_written_from_the_description_in_the_docs`
/// checks is what `describe --config` gives for the real servers, the
/// filesystem server named `fs`), the others the committed catalog's.
#[test]
fn the_docs_give_the_measured_size_of_each_description() {
    let cl100k = tiktoken_rs::cl100k_base().expect("cl100k_base ships with tiktoken-rs");
    let doc = std::fs::read_to_string(root().join("docs/what-the-model-reads.md")).unwrap();
    let block = doc.split("## The description\n\n```text\n").nth(1).and_then(|rest| rest.split("\n```").next());
    let printed = block.expect("what-the-model-reads.md prints the description");
    let measured_25 = (printed.chars().count(), cl100k.encode_with_special_tokens(printed).len());
    let said = format!("(the typed tier: {} characters", thousands(measured_25.0));
    assert!(doc.contains(&said), "docs/what-the-model-reads.md says {said:?} of the description it prints");
    let all = real_entries();
    let budget = code_mode_core::defaults::DESCRIPTION_BUDGET;
    let measured = |range: std::ops::Range<usize>| {
        let (_, text) = describe(&default_facts(), &all[range], budget);
        (text.chars().count(), cl100k.encode_with_special_tokens(&text).len())
    };
    let rows = [
        ("25 (memory, filesystem, time)", measured_25),
        ("42 (the four reference servers)", measured(0..42)),
        ("150", measured(0..150)),
        ("300", measured(0..300)),
    ];
    for file in ["README.md", "docs/usage.md"] {
        for (first, sizes) in &rows {
            // docs/usage.md names the 42 tools' servers more briefly.
            let first = if file == "docs/usage.md" {
                first.replace("four reference servers", "four servers")
            } else {
                first.to_string()
            };
            assert_eq!(row_numbers(file, &first), *sizes, "{file}, row {first}: characters and cl100k tokens");
        }
    }
}

/// `6836` as the docs write it: `6,836`.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
