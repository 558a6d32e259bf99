//! `skills/code-mode/SKILL.md` quotes the default limits; this keeps it true.

use code_mode_core::defaults as d;

fn skill() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../skills/code-mode/SKILL.md");
    std::fs::read_to_string(path).expect("SKILL.md exists")
}

fn kib(bytes: usize) -> String {
    if bytes >= 1024 * 1024 && bytes.is_multiple_of(1024 * 1024) {
        format!("{} MiB", bytes / (1024 * 1024))
    } else {
        format!("{} KiB", bytes / 1024)
    }
}

fn thousands(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Every limit the skill states, as the defaults make it.
fn stated_limits() -> Vec<String> {
    vec![
        format!("{} seconds, then the sandbox is killed", d::DEADLINE.as_secs()),
        format!("{} tool calls", d::MAX_CALLS),
        format!("one tool call | {} seconds", d::CALL_TIMEOUT.as_secs()),
        format!("{} of JSON", kib(d::MAX_ARGUMENTS)),
        format!("one result | {}", kib(d::MAX_RESULT)),
        format!("printed output returned | {}", kib(d::MAX_OUTPUT as usize)),
        format!("prints {} is stopped", kib(d::STOP_OUTPUT as usize)),
        format!("the stop is at {}", kib(code_mode_proto::MAX_OUTPUT_KEPT as usize)),
        format!("at most {} characters", d::MAX_MESSAGE_CHARS),
        format!("the code itself | {}", kib(d::MAX_CODE)),
        format!("cut at {}", kib(d::MAX_TOOL_DESCRIPTION)),
        format!("fit {} characters", thousands(d::DESCRIPTION_BUDGET)),
    ]
}

#[test]
fn the_skill_states_the_default_limits_of_the_code() {
    let text = skill();
    for phrase in stated_limits() {
        assert!(text.contains(&phrase), "SKILL.md should say {phrase:?} (the default in the code)");
    }
}

#[test]
fn the_skill_states_no_other_numbers_with_units() {
    // Any "<number> <unit>" in the skill must be one of the defaults above,
    // so a changed default cannot leave a stale number behind.
    let known = stated_limits().join(" ");
    let text = skill();
    let words: Vec<&str> = text.split(|c: char| c.is_whitespace() || c == '|').filter(|w| !w.is_empty()).collect();
    for pair in words.windows(2) {
        let (n, unit) = (pair[0], pair[1].trim_end_matches([',', '.', ';', ':', ')']));
        let is_number = !n.is_empty() && n.chars().all(|c| c.is_ascii_digit() || c == ',');
        if is_number && ["seconds", "KiB", "MiB", "characters", "tool"].contains(&unit) {
            let stated = format!("{n} {unit}");
            assert!(known.contains(&stated), "SKILL.md states {stated:?}, which is not a default of the code");
        }
    }
}
