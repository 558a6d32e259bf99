//! The requirements file of an image with packages, read and held to the
//! rules: every requirement pinned with `==`, no other file, URL or index
//! named, hash-checking mode kept when the file has hashes; and Debian
//! package names held to Debian's grammar.

use std::fmt::Write as _;

use super::PackagesError;

/// One pinned requirement.
#[derive(Debug, Clone, PartialEq)]
pub struct Requirement {
    /// The name, normalized (PEP 503: lower case, runs of `-_.` as `-`).
    pub name: String,
    /// Extras, normalized and sorted.
    pub extras: Vec<String>,
    /// The pinned version.
    pub version: String,
    /// The environment marker, if any (whitespace collapsed).
    pub marker: Option<String>,
    /// `ALGORITHM:HEX` hashes, sorted.
    pub hashes: Vec<String>,
    /// Its line in the file.
    pub line: usize,
}

impl std::fmt::Display for Requirement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name)?;
        if !self.extras.is_empty() {
            write!(f, "[{}]", self.extras.join(","))?;
        }
        write!(f, "=={}", self.version)?;
        if let Some(marker) = &self.marker {
            write!(f, " ; {marker}")?;
        }
        for hash in &self.hashes {
            write!(f, " --hash={hash}")?;
        }
        Ok(())
    }
}

/// A checked requirements file.
#[derive(Debug, Clone, PartialEq)]
pub struct Requirements {
    /// The pinned requirements, sorted by name.
    pub requirements: Vec<Requirement>,
    /// The options kept (`--prefer-binary`, `--only-binary=...`), sorted.
    pub options: Vec<String>,
    /// Hash-checking mode: `--require-hashes` given, or any line has a hash.
    pub require_hashes: bool,
}

/// A global option pip reads from a requirements file, and what we say of it.
fn option_verdict(option: &str) -> Result<(), &'static str> {
    match option {
        "--require-hashes" | "--prefer-binary" | "--only-binary" | "--no-binary" => Ok(()),
        "-r" | "--requirement" | "-c" | "--constraint" => {
            Err("includes another file: code-mode reads one requirements file; put its pinned requirements here")
        }
        "-e" | "--editable" => Err("is an editable install: pin a released version, NAME==VERSION"),
        "-i" | "--index-url" | "--extra-index-url" | "-f" | "--find-links" | "--no-index" | "--trusted-host" => {
            Err("chooses where packages come from: code-mode uses the package index, or --wheels DIR")
        }
        _ => Err("is an option code-mode does not pass to pip"),
    }
}

/// PEP 503's normalized name.
fn normalize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut in_run = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !in_run {
                out.push('-');
            }
            in_run = true;
        } else {
            out.push(c.to_ascii_lowercase());
            in_run = false;
        }
    }
    out
}

/// A PEP 508 name: ASCII letters and digits, with `.-_` inside.
fn is_name(name: &str) -> bool {
    let ends_ok = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    ends_ok(name.chars().next())
        && ends_ok(name.chars().last())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
}

/// The logical lines of a requirements file: `\` continuations joined,
/// comments removed, each with the number of its first physical line.
fn logical_lines(text: &str) -> Vec<(usize, String)> {
    let mut lines = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    for (index, raw) in text.lines().enumerate() {
        let (start, mut joined) = pending.take().unwrap_or((index + 1, String::new()));
        let trimmed = raw.trim_end();
        if let Some(rest) = trimmed.strip_suffix('\\') {
            joined.push_str(rest);
            joined.push(' ');
            pending = Some((start, joined));
            continue;
        }
        joined.push_str(trimmed);
        lines.push((start, joined));
    }
    if let Some(last) = pending {
        lines.push(last);
    }
    lines
        .into_iter()
        .map(|(n, line)| (n, strip_comment(&line).trim().to_string()))
        .filter(|(_, line)| !line.is_empty())
        .collect()
}

/// The line without a `#` comment (at the start or after whitespace, as pip
/// reads it).
fn strip_comment(line: &str) -> &str {
    let mut previous = None;
    for (i, c) in line.char_indices() {
        if c == '#' && previous.is_none_or(char::is_whitespace) {
            return &line[..i];
        }
        previous = Some(c);
    }
    line
}

/// The expected hex length of a hash algorithm pip accepts.
fn hash_hex_len(algorithm: &str) -> Option<usize> {
    match algorithm {
        "sha256" => Some(64),
        "sha384" => Some(96),
        "sha512" => Some(128),
        _ => None,
    }
}

impl Requirements {
    /// Check the text of a requirements file named `file` (for messages).
    pub fn parse(file: &str, text: &str) -> Result<Requirements, PackagesError> {
        let refuse = |line: usize, text: &str, reason: String| PackagesError::Requirement {
            file: file.to_string(),
            line,
            text: text.to_string(),
            reason,
        };
        let mut requirements: Vec<Requirement> = Vec::new();
        let mut options = Vec::new();
        let mut require_hashes = false;
        for (line, content) in logical_lines(text) {
            if content.starts_with('-') {
                let mut words = content.split_whitespace();
                let first = words.next().unwrap_or_default();
                let (option, inline) = match first.split_once('=') {
                    Some((o, v)) => (o, Some(v.to_string())),
                    None => (first, None),
                };
                option_verdict(option).map_err(|why| refuse(line, &content, why.to_string()))?;
                match option {
                    "--require-hashes" | "--prefer-binary" => {
                        if inline.is_some() || words.next().is_some() {
                            return Err(refuse(line, &content, "takes no value".into()));
                        }
                        require_hashes |= option == "--require-hashes";
                        options.push(option.to_string());
                    }
                    _ => {
                        let value = inline.or_else(|| words.next().map(String::from));
                        let value = value.filter(|v| {
                            !v.is_empty()
                                && v.split(',').all(|n| n == ":all:" || n == ":none:" || is_name(n))
                                && words.next().is_none()
                        });
                        let Some(value) = value else {
                            return Err(refuse(line, &content, "takes one value: :all:, :none: or names".into()));
                        };
                        options.push(format!("{option}={value}"));
                    }
                }
                continue;
            }
            let requirement = parse_requirement(line, &content).map_err(|why| {
                let shown = content.split(" --").next().unwrap_or(&content).trim();
                refuse(line, shown, why)
            })?;
            if let Some(earlier) = requirements.iter().find(|r| r.name == requirement.name) {
                let shown = content.split(" --").next().unwrap_or(&content).trim();
                return Err(refuse(
                    line,
                    shown,
                    format!("names {} again (also line {}): give one pin", requirement.name, earlier.line),
                ));
            }
            requirements.push(requirement);
        }
        if requirements.is_empty() {
            return Err(PackagesError::NoRequirement { file: file.to_string() });
        }
        let hashed = requirements.iter().find(|r| !r.hashes.is_empty()).map(|r| r.line);
        if let Some(why) = hashed
            .map(|n| format!("line {n} has a hash"))
            .or_else(|| require_hashes.then(|| "the file says --require-hashes".to_string()))
        {
            require_hashes = true;
            if let Some(bare) = requirements.iter().find(|r| r.hashes.is_empty()) {
                return Err(refuse(
                    bare.line,
                    &format!("{}=={}", bare.name, bare.version),
                    format!(
                        "has no --hash while the file is in hash-checking mode ({why}): give every requirement its \
                         hashes, as pip requires"
                    ),
                ));
            }
            if !options.iter().any(|o| o == "--require-hashes") {
                options.push("--require-hashes".to_string());
            }
        }
        requirements.sort_by(|a, b| a.name.cmp(&b.name));
        options.sort();
        options.dedup();
        Ok(Requirements { requirements, options, require_hashes })
    }

    /// The file pip is given, and the tag is computed over: one option or
    /// requirement a line, in a fixed order, so the same set written
    /// differently is the same text.
    pub fn normalized(&self) -> String {
        let mut text = String::new();
        for option in &self.options {
            let _ = writeln!(text, "{option}");
        }
        for requirement in &self.requirements {
            let _ = writeln!(text, "{requirement}");
        }
        text
    }
}

/// One requirement (`name[extras]==version ; marker --hash=...`): pinned,
/// not a URL or a path.
fn parse_requirement(line: usize, content: &str) -> Result<Requirement, String> {
    // Per-requirement options start at the first ` --`.
    let (spec, opts) = match content.find(" --").or_else(|| content.find("\t--")) {
        Some(at) => (content[..at].trim(), &content[at..]),
        None => (content.trim(), ""),
    };
    if spec.contains("://") || spec.contains('@') || spec.starts_with(['.', '/', '~']) || spec.ends_with(".whl") {
        return Err("is a URL or a path, not a pinned release: write NAME==VERSION (and --wheels DIR for local \
                    wheels)"
            .into());
    }
    let (spec, marker) = match spec.split_once(';') {
        Some((s, m)) => {
            let marker = m.split_whitespace().collect::<Vec<_>>().join(" ");
            if marker.is_empty() {
                return Err("has an empty environment marker after `;`".into());
            }
            (s.trim(), Some(marker))
        }
        None => (spec, None),
    };
    let name_end =
        spec.find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))).unwrap_or(spec.len());
    let raw_name = &spec[..name_end];
    if !is_name(raw_name) {
        return Err("does not start with a package name".into());
    }
    let name = normalize(raw_name);
    let mut rest = spec[name_end..].trim_start();
    let mut extras = Vec::new();
    if let Some(after) = rest.strip_prefix('[') {
        let Some((inside, after)) = after.split_once(']') else {
            return Err("has an unclosed `[` of extras".into());
        };
        for extra in inside.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            if !is_name(extra) {
                return Err(format!("has an extra {extra:?} that is not a name"));
            }
            extras.push(normalize(extra));
        }
        extras.sort();
        extras.dedup();
        rest = after.trim_start();
    }
    let not_pinned = || format!("is not pinned: write {name}==VERSION");
    let Some(version) = rest.strip_prefix("==").filter(|v| !v.starts_with('=')) else {
        return Err(not_pinned());
    };
    let version = version.trim();
    if version.contains(',') {
        return Err(format!("has more than one version specifier: pin one version, {name}==VERSION"));
    }
    if version.contains('*') {
        return Err(format!("pins a wildcard, not a version: write {name}==VERSION"));
    }
    if version.is_empty()
        || !version.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '!' | '+' | '_' | '-'))
    {
        return Err(not_pinned());
    }
    let mut hashes = Vec::new();
    let mut words = opts.split_whitespace();
    while let Some(word) = words.next() {
        let (option, value) = match word.split_once('=') {
            Some((o, v)) => (o, Some(v.to_string())),
            None => (word, words.next().map(String::from)),
        };
        if option != "--hash" {
            return Err(format!("has the option {option}: only --hash=ALGORITHM:HEX may follow a requirement"));
        }
        let value = value.unwrap_or_default();
        let valid = value.split_once(':').is_some_and(|(algorithm, hex)| {
            hash_hex_len(algorithm) == Some(hex.len()) && hex.chars().all(|c| c.is_ascii_hexdigit())
        });
        if !valid {
            return Err(format!("has a hash {value:?} that is not sha256:, sha384: or sha512: and its hex digits"));
        }
        hashes.push(value.to_ascii_lowercase());
    }
    hashes.sort();
    hashes.dedup();
    Ok(Requirement { name, extras, version: version.to_string(), marker, hashes, line })
}

/// A Debian package name: lower-case letters, digits, `+-.`, at least two
/// characters, starting with a letter or digit (Debian Policy 5.6.1).
pub fn is_debian_name(name: &str) -> bool {
    name.len() >= 2
        && name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '+' | '-' | '.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Requirements, String> {
        Requirements::parse("requirements.txt", text).map_err(|e| e.to_string())
    }

    const HASH_A: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000000";
    const HASH_B: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
    #[test]
    fn pinned_requirements_with_extras_markers_comments_and_continuations_are_accepted() {
        let text = "# data\n\nNumPy==2.2.6  # arrays\nrequests[socks, security]==2.32.3 ; python_version >= \"3.8\"\n\
                    tabulate \\\n  ==0.9.0\n";
        let r = parse(text).unwrap();
        let names: Vec<_> = r.requirements.iter().map(|r| (r.name.as_str(), r.line)).collect();
        assert_eq!(names, [("numpy", 3), ("requests", 4), ("tabulate", 5)]);
        assert_eq!(r.requirements[1].extras, ["security", "socks"]);
        assert!(!r.require_hashes);
        assert_eq!(
            r.normalized(),
            "numpy==2.2.6\nrequests[security,socks]==2.32.3 ; python_version >= \"3.8\"\ntabulate==0.9.0\n"
        );
    }

    #[test]
    fn an_unpinned_requirement_is_refused_naming_the_file_line_and_package() {
        let err = parse("numpy==2.2.6\n\npandas>=2\n").unwrap_err();
        assert_eq!(err, "requirements.txt:3: \"pandas>=2\" is not pinned: write pandas==VERSION");
        for text in ["pandas", "pandas~=2.2", "pandas!=2", "pandas===2.2"] {
            assert!(parse(text).unwrap_err().contains("is not pinned: write pandas==VERSION"), "{text}");
        }
        assert!(parse("pandas==2.*").unwrap_err().contains("wildcard"));
        assert!(parse("pandas==2.2,<3").unwrap_err().contains("more than one version specifier"));
    }

    #[test]
    fn other_files_editables_urls_and_indexes_are_refused() {
        for (text, why) in [
            ("-r other.txt", "includes another file"),
            ("--requirement=other.txt", "includes another file"),
            ("-c constraints.txt", "includes another file"),
            ("-e git+https://example.com/x.git#egg=x", "editable"),
            ("--index-url https://example.com/simple", "chooses where packages come from"),
            ("--extra-index-url=https://example.com/simple", "chooses where packages come from"),
            ("x @ https://example.com/x-1.0.whl", "is a URL or a path"),
            ("https://example.com/x-1.0.tar.gz", "is a URL or a path"),
            ("./x-1.0-py3-none-any.whl", "is a URL or a path"),
            ("--pre", "does not pass to pip"),
            ("x==1.0 --global-option=build", "only --hash"),
        ] {
            let err = parse(&format!("tabulate==0.9.0\n{text}\n")).unwrap_err();
            assert!(err.starts_with("requirements.txt:2: "), "{text}: {err}");
            assert!(err.contains(why), "{text}: {err}");
        }
    }

    #[test]
    fn hashes_put_the_file_in_hash_checking_mode_and_every_requirement_needs_one() {
        let text = format!("tabulate==0.9.0 \\\n    --hash={HASH_B} \\\n    --hash={HASH_A}\n");
        let r = parse(&text).unwrap();
        assert!(r.require_hashes);
        assert_eq!(r.requirements[0].hashes, [HASH_A, HASH_B]);
        assert_eq!(r.normalized(), format!("--require-hashes\ntabulate==0.9.0 --hash={HASH_A} --hash={HASH_B}\n"));
        let err = parse(&format!("{text}numpy==2.2.6\n")).unwrap_err();
        assert!(err.starts_with("requirements.txt:4: \"numpy==2.2.6\" has no --hash"), "{err}");
        let err = parse("--require-hashes\nnumpy==2.2.6\n").unwrap_err();
        assert!(err.contains("the file says --require-hashes"), "{err}");
        let err = parse("numpy==2.2.6 --hash=md5:abc\n").unwrap_err();
        assert!(err.contains("is not sha256:"), "{err}");
    }

    #[test]
    fn a_package_named_twice_or_an_empty_file_is_refused() {
        let err = parse("tabulate==0.9.0\nTabulate==0.8.10\n").unwrap_err();
        assert!(err.starts_with("requirements.txt:2:") && err.contains("also line 1"), "{err}");
        assert!(parse("# nothing\n\n").unwrap_err().contains("names no requirement"));
    }

    #[test]
    fn the_same_set_written_differently_normalizes_alike() {
        let a = parse("Tabulate==0.9.0\nnumpy == 2.2.6\n").unwrap();
        let b = parse("numpy==2.2.6  # comment\n\ntabulate==0.9.0").unwrap();
        assert_eq!(a.normalized(), b.normalized());
    }

    #[test]
    fn debian_names_follow_debians_grammar() {
        for good in ["python3-numpy", "libstdc++6", "g++", "python3.11", "0ad"] {
            assert!(is_debian_name(good), "{good}");
        }
        for bad in ["", "a", "Python3", "-oDebug::pkgProblemResolver=1", "numpy;rm", "a b", "python3-numpy=1:1.24"] {
            assert!(!is_debian_name(bad), "{bad}");
        }
    }
}
