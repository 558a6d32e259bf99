//! The documentation's own structure stays true: every link between its
//! files names a file and a heading that exist, every source file that
//! points a reader at a chapter names one that exists, and what is not
//! built is said in one list only (docs/README.md's "Not built yet" and
//! the chapter sections it links), so a feature that lands cannot stay
//! "not built" in some corner of the docs.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Directories never walked: build output, installed peers, git's own.
fn skipped(name: &str) -> bool {
    matches!(name, "target" | "node_modules" | ".git" | ".venv" | "__pycache__" | "fuzz_target")
}

/// Every file under `dir` whose name ends with one of `endings`.
fn files(dir: &Path, endings: &[&str], out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if !skipped(&name) && !name.starts_with('.') {
                files(&path, endings, out);
            }
        } else if endings.iter().any(|e| name.ends_with(e)) {
            out.push(path);
        }
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn shown(path: &Path) -> String {
    let root = root().canonicalize().unwrap();
    let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    path.strip_prefix(&root).unwrap_or(&path).display().to_string()
}

/// The lines of a Markdown text outside fenced code blocks, numbered from 1.
fn prose(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            out.push((i + 1, line));
        }
    }
    out
}

/// The anchor a heading gets where Markdown is read (GitHub's rule):
/// lower case, punctuation other than `-` and `_` dropped, spaces as `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors a Markdown file offers: its headings (a repeated heading
/// gets `-1`, `-2`, ...) and explicit `<a name|id="...">` targets.
fn anchors(text: &str) -> HashSet<String> {
    let mut out = HashSet::new();
    for (_, line) in prose(text) {
        let hashes = line.len() - line.trim_start_matches('#').len();
        if (1..=6).contains(&hashes) && line[hashes..].starts_with(' ') {
            let base = slug(&line[hashes..]);
            let mut anchor = base.clone();
            let mut n = 0;
            while out.contains(&anchor) {
                n += 1;
                anchor = format!("{base}-{n}");
            }
            out.insert(anchor);
        }
        for key in ["<a name=\"", "<a id=\""] {
            for rest in line.split(key).skip(1) {
                out.insert(rest.split('"').next().unwrap_or("").to_string());
            }
        }
    }
    out
}

/// The targets of the inline links `[text](target)` of a line.
fn link_targets(line: &str) -> Vec<&str> {
    line.split("](")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .map(|t| t.split_whitespace().next().unwrap_or(""))
        .collect()
}

/// What is wrong with a link from `from` to `target`, if anything.
fn broken(from: &Path, target: &str) -> Option<String> {
    if target.is_empty() {
        return Some("an empty target".into());
    }
    if target.contains("://") || target.starts_with("mailto:") {
        return None;
    }
    let (file, anchor) = match target.split_once('#') {
        Some((file, anchor)) => (file, Some(anchor)),
        None => (target, None),
    };
    let path = if file.is_empty() { from.to_path_buf() } else { from.parent().unwrap().join(file) };
    if !path.exists() {
        return Some(format!("{file} does not exist (next to {})", shown(from)));
    }
    match anchor {
        Some(anchor) if path.extension().is_some_and(|e| e == "md") => {
            (!anchors(&read(&path)).contains(anchor)).then(|| format!("{} has no heading #{anchor}", shown(&path)))
        }
        _ => None,
    }
}

#[test]
fn every_link_between_the_docs_names_a_file_and_a_heading_that_exist() {
    let mut docs = Vec::new();
    files(&root(), &[".md"], &mut docs);
    assert!(docs.len() > 20, "the walk found the Markdown files: {}", docs.len());
    let mut links = 0;
    let mut bad = Vec::new();
    for doc in &docs {
        let text = read(doc);
        for (line_no, line) in prose(&text) {
            for target in link_targets(line) {
                links += 1;
                if let Some(why) = broken(doc, target) {
                    bad.push(format!("{}:{line_no}: ({target}): {why}", shown(doc)));
                }
            }
        }
    }
    assert!(links > 100, "the docs link each other: {links} links");
    assert!(bad.is_empty(), "links to nothing:\n{}", bad.join("\n"));
}

/// The `docs/<name>.md` (or .svg, .png) paths a text names, with an anchor
/// when one follows.
fn named_chapters(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for rest in text.split("docs/").skip(1) {
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/' | '#'))
            .collect();
        let name = name.trim_end_matches('.');
        let file = name.split('#').next().unwrap_or("");
        if [".md", ".svg", ".png"].iter().any(|e| file.ends_with(e)) {
            out.push(name.to_string());
        }
    }
    out
}

#[test]
fn every_chapter_a_source_file_or_script_points_to_exists() {
    let root = root();
    let mut sources = Vec::new();
    files(&root, &[".rs", ".py", ".sh", ".toml", ".yml", ".yaml", ".md"], &mut sources);
    let mut named = 0;
    let mut bad = Vec::new();
    for source in &sources {
        let text = read(source);
        for (line_no, line) in text.lines().enumerate() {
            // Only the workspace's own docs/ folder (not node's or a crate's).
            let Some(at) = line.find("docs/") else { continue };
            let before = &line[..at];
            if before.ends_with(|c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
                continue;
            }
            for chapter in named_chapters(&line[at..]) {
                named += 1;
                let target = format!("docs/{chapter}");
                if let Some(why) = broken(&root.join("README.md"), &target) {
                    bad.push(format!("{}:{}: {target}: {why}", shown(source), line_no + 1));
                }
            }
        }
    }
    assert!(named > 50, "the sources name chapters: {named}");
    assert!(bad.is_empty(), "sources point to chapters that do not exist:\n{}", bad.join("\n"));
}

/// The lines of the `## Not built yet` section of a chapter.
fn not_built_section(text: &str) -> Vec<(usize, &str)> {
    let lines = prose(text);
    let Some(start) = lines.iter().position(|(_, l)| l.trim() == "## Not built yet") else { return Vec::new() };
    lines[start + 1..].iter().take_while(|(_, l)| !l.starts_with("## ")).copied().collect()
}

#[test]
fn what_is_not_built_is_said_only_in_the_list_docs_readme_keeps() {
    let root = root();
    let index = read(&root.join("docs/README.md"));
    let list = not_built_section(&index);
    assert!(list.len() > 3, "docs/README.md has a \"## Not built yet\" list");
    // The chapters whose own "Not built yet" sections the list links.
    let mut parts: HashSet<PathBuf> = HashSet::from([root.join("docs/README.md").canonicalize().unwrap()]);
    for (_, line) in &list {
        for target in link_targets(line) {
            if let Some(file) = target.strip_suffix("#not-built-yet") {
                parts.insert(root.join("docs").join(file).canonicalize().unwrap());
            }
        }
    }
    let mut docs = Vec::new();
    files(&root, &[".md"], &mut docs);
    let mut elsewhere = Vec::new();
    for doc in &docs {
        let text = read(doc);
        let inside: HashSet<usize> = not_built_section(&text).iter().map(|(n, _)| *n).collect();
        let listed = parts.contains(&doc.canonicalize().unwrap());
        if !inside.is_empty() && !listed {
            elsewhere.push(format!("{}: a \"Not built yet\" section docs/README.md's list does not link", shown(doc)));
        }
        for (line_no, line) in prose(&text) {
            let said = line.to_lowercase();
            let says = ["not built", "not yet built", "isn't built", "aren't built"].iter().any(|p| said.contains(p));
            let heading = line.trim() == "## Not built yet";
            let in_the_list = listed && inside.contains(&line_no);
            let points_to_it = line.contains("#not-built-yet");
            if says && !(heading || in_the_list || points_to_it) {
                elsewhere.push(format!("{}:{line_no}: {}", shown(doc), line.trim()));
            }
        }
    }
    assert!(
        elsewhere.is_empty(),
        "what is not built is said outside the one list (docs/README.md#not-built-yet and the sections it \
         links): move it there, or drop it if it is built:\n{}",
        elsewhere.join("\n")
    );
}

#[test]
fn the_readme_stays_a_front_page_of_at_most_200_lines() {
    let lines = read(&root().join("README.md")).lines().count();
    assert!(lines <= 200, "README.md has {lines} lines: move the detail into a chapter of docs/ and link it");
}
