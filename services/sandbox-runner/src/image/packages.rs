//! Sandbox images with packages: the default image plus pinned Python
//! packages (a pip requirements file, from PyPI or a directory of wheels)
//! and Debian packages (on the offline debootstrap base).
//!
//! Packages can only come in at build time (a sandbox has no network), so
//! this is where they are checked: every requirement pinned with `==`, no
//! other file, URL or index named, hash-checking mode kept when the file
//! has hashes, Debian names held to Debian's grammar. The image's tag is a
//! hash of everything that went in ([`packages_tag`]), so two package sets
//! never share a tag and building the same set again does nothing.
//!
//! The build (`image/packages.Dockerfile`) has two stages: a builder with
//! pip and the host's CA bundle installs into `/opt/code-mode/packages`
//! and writes `/opt/code-mode/packages.json`; the final stage is the
//! default image plus the Debian packages and those two paths, with the
//! default image's user, working directory and entrypoint. The JSON is
//! read back out of the built image and becomes its
//! [`PACKAGES_LABEL`], which [`installed_packages`] reads. The builder
//! stage's image, which the engine's classic builder keeps untagged, is
//! removed after the build (`stages`), so a build leaves only its tag.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use bollard::Docker;
use bollard::query_parameters::{
    BuildImageOptionsBuilder, CreateContainerOptionsBuilder, DownloadFromContainerOptionsBuilder,
    RemoveContainerOptionsBuilder, RemoveImageOptionsBuilder,
};
use futures::StreamExt;
use sha2::{Digest, Sha256};

use super::{BaseSource, IMAGE_REPOSITORY, default_image_tag, image_exists};
use crate::StartError;

/// The Dockerfile of an image with packages (`ARG IMAGE`: the default image).
pub const PACKAGES_DOCKERFILE: &str = include_str!("../../image/packages.Dockerfile");
/// The builder stage's script that writes `packages.json`.
pub const LIST_PACKAGES_PY: &str = include_str!("../../image/list_packages.py");
/// The label naming an image's Python packages beyond the standard
/// library: a JSON object of distribution name to version.
pub const PACKAGES_LABEL: &str = "code-mode.packages";
/// The label summing up what the image was built from (JSON).
pub const INPUTS_LABEL: &str = "code-mode.inputs";
/// Where the image holds the Python packages (`runner.py` puts it on
/// `sys.path`).
pub const PACKAGES_DIR: &str = "/opt/code-mode/packages";
/// The file naming them (`runner.py`'s `PACKAGES`).
pub const PACKAGES_FILE: &str = "/opt/code-mode/packages.json";
/// The CA bundle handed to pip in the builder stage (and never further).
const HOST_CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// What goes into an image beside Python and the runner.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Packages {
    /// A pip requirements file; every requirement pinned with `==`.
    pub requirements: Option<PathBuf>,
    /// Debian packages (the debootstrap base only).
    pub apt: Vec<String>,
    /// Install from the wheels (and source archives) in this directory
    /// instead of a package index.
    pub wheels: Option<PathBuf>,
}

impl Packages {
    /// No packages: the default image.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_none() && self.apt.is_empty() && self.wheels.is_none()
    }
}

/// Why packages cannot go into an image.
#[derive(Debug, thiserror::Error)]
pub enum PackagesError {
    /// A line of the requirements file is refused.
    #[error("{file}:{line}: {text:?} {reason}")]
    Requirement {
        /// The file, as given.
        file: String,
        /// Its line (the first of a continued line), from 1.
        line: usize,
        /// The requirement or option refused.
        text: String,
        /// Why, and what to write instead.
        reason: String,
    },
    /// The requirements file names no requirement (an empty image would be
    /// the default one under another tag).
    #[error("{file}: names no requirement: pin at least one, NAME==VERSION (or leave out --requirements)")]
    NoRequirement {
        /// The file, as given.
        file: String,
    },
    /// A file or directory could not be read.
    #[error("{path}: {reason}")]
    Unreadable {
        /// The path.
        path: String,
        /// Why.
        reason: String,
    },
    /// An `--apt` name is not a Debian package name.
    #[error(
        "--apt {name:?} is not a Debian package name (lower-case letters, digits, `+`, `-` and `.`, at least two, \
         starting with a letter or digit)"
    )]
    AptName {
        /// The name given.
        name: String,
    },
    /// `--apt` with the registry base.
    #[error(
        "--apt needs the offline debootstrap base (Debian bookworm's python3.11): {why}. Debian's python3-* \
         packages are built for Debian's own python3, not the registry image's python3.12; use --requirements \
         for Python packages, or build with --base debootstrap"
    )]
    AptNeedsDebootstrap {
        /// What made the base a registry one.
        why: String,
    },
    /// `--wheels` without `--requirements`, or a directory without wheels.
    #[error("--wheels {dir}: {reason}")]
    Wheels {
        /// The directory.
        dir: String,
        /// What is wrong.
        reason: String,
    },
    /// pip failed for a package.
    #[error("pip could not install {package}: {reason}")]
    Pip {
        /// The package pip named.
        package: String,
        /// pip's reason.
        reason: String,
    },
    /// The build failed otherwise (apt-get, the engine).
    #[error("building {tag} failed: {reason}")]
    Build {
        /// The image being built.
        tag: String,
        /// Why.
        reason: String,
    },
}

impl From<PackagesError> for StartError {
    fn from(e: PackagesError) -> Self {
        StartError::ImageBuild(e.to_string())
    }
}

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

/// Everything that goes into an image with packages, read and checked once.
#[derive(Debug, Clone)]
struct Inputs {
    requirements: Option<Requirements>,
    apt: Vec<String>,
    wheels: Vec<(String, Vec<u8>)>,
}

impl Inputs {
    fn read(p: &Packages) -> Result<Inputs, PackagesError> {
        let requirements = match &p.requirements {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| PackagesError::Unreadable {
                    path: path.display().to_string(),
                    reason: e.to_string(),
                })?;
                Some(Requirements::parse(&path.display().to_string(), &text)?)
            }
            None => None,
        };
        let mut apt = Vec::new();
        for name in &p.apt {
            if !is_debian_name(name) {
                return Err(PackagesError::AptName { name: name.clone() });
            }
            apt.push(name.clone());
        }
        apt.sort();
        apt.dedup();
        let wheels = match &p.wheels {
            Some(dir) if requirements.is_none() => {
                return Err(PackagesError::Wheels {
                    dir: dir.display().to_string(),
                    reason: "give --requirements too: the wheels are what it is installed from".into(),
                });
            }
            Some(dir) => read_wheels(dir)?,
            None => Vec::new(),
        };
        Ok(Inputs { requirements, apt, wheels })
    }

    fn requirements_text(&self) -> String {
        self.requirements.as_ref().map(Requirements::normalized).unwrap_or_default()
    }

    /// The tag: a hash of the default image's tag (Dockerfile and runner),
    /// this build's files and every input.
    fn tag(&self, wheels_dir: bool) -> String {
        let mut hash = Sha256::new();
        let mut part = |label: &str, bytes: &[u8]| {
            hash.update(label.as_bytes());
            hash.update((bytes.len() as u64).to_le_bytes());
            hash.update(bytes);
        };
        part("image", default_image_tag().as_bytes());
        part("dockerfile", PACKAGES_DOCKERFILE.as_bytes());
        part("lister", LIST_PACKAGES_PY.as_bytes());
        part("requirements", self.requirements_text().as_bytes());
        for name in &self.apt {
            part("apt", name.as_bytes());
        }
        part("wheels-dir", if wheels_dir { b"1" } else { b"0" });
        for (name, bytes) in &self.wheels {
            part("wheel-name", name.as_bytes());
            part("wheel", bytes);
        }
        let hex: String = hash.finalize().iter().take(6).map(|b| format!("{b:02x}")).collect();
        format!("{IMAGE_REPOSITORY}:p-{hex}")
    }

    /// What the image was built from, for its [`INPUTS_LABEL`].
    fn summary(&self) -> String {
        let wheels: Vec<serde_json::Value> = self
            .wheels
            .iter()
            .map(|(name, bytes)| {
                let sum: String = Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect();
                serde_json::json!({ "file": name, "sha256": sum })
            })
            .collect();
        serde_json::json!({
            "image": default_image_tag(),
            "requirements": self.requirements_text().lines().collect::<Vec<_>>(),
            "apt": self.apt,
            "wheels": wheels,
        })
        .to_string()
    }
}

/// The wheels and source archives of `dir` (not its subdirectories), by
/// name.
fn read_wheels(dir: &Path) -> Result<Vec<(String, Vec<u8>)>, PackagesError> {
    let shown = dir.display().to_string();
    let unreadable = |e: std::io::Error| PackagesError::Wheels { dir: shown.clone(), reason: e.to_string() };
    let mut wheels = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(unreadable)? {
        let entry = entry.map_err(unreadable)?;
        let Ok(name) = entry.file_name().into_string() else { continue };
        let archive = [".whl", ".tar.gz", ".zip"].iter().any(|s| name.ends_with(s));
        if !archive || !entry.file_type().map_err(unreadable)?.is_file() {
            continue;
        }
        wheels.push((name, std::fs::read(entry.path()).map_err(unreadable)?));
    }
    if wheels.is_empty() {
        return Err(PackagesError::Wheels { dir: shown, reason: "holds no .whl, .tar.gz or .zip file".into() });
    }
    wheels.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(wheels)
}

/// The tag of the image holding `p`: `code-mode-sandbox:p-<12 hex>`, a
/// SHA-256 over the default image's tag, the packages Dockerfile, the
/// normalized requirements, the sorted Debian names and the wheels' names
/// and contents; the default tag for no packages. Reads and checks the
/// files (a bad requirement is the error).
pub fn packages_tag(p: &Packages) -> Result<String, StartError> {
    if p.is_empty() {
        return Ok(default_image_tag());
    }
    Ok(Inputs::read(p)?.tag(p.wheels.is_some()))
}

/// The packages `image` holds beyond the standard library, as sorted
/// `name==version`, from its [`PACKAGES_LABEL`]; empty for an image
/// without it (the default image).
pub async fn installed_packages(docker: &Docker, image: &str) -> Result<Vec<String>, StartError> {
    let inspected = docker.inspect_image(image).await.map_err(StartError::docker("inspect the image"))?;
    let label = inspected.config.and_then(|c| c.labels).and_then(|mut l| l.remove(PACKAGES_LABEL));
    let Some(label) = label else { return Ok(Vec::new()) };
    let found: BTreeMap<String, String> = serde_json::from_str(&label).map_err(|e| {
        StartError::ImageBuild(format!("{image}: its label {PACKAGES_LABEL} is not an object of versions: {e}"))
    })?;
    Ok(found.into_iter().map(|(name, version)| format!("{name}=={version}")).collect())
}

/// Why `--image` and packages do not go together.
pub const IMAGE_AND_PACKAGES: &str = "--image names the sandbox image, and --requirements, --apt and --wheels pick \
     the image built from those packages: give one or the other";

/// The image a sandbox-runner uses, made sure of: `image` (which must
/// exist, or be the default image, then built), else the image of
/// `packages` (built when missing), else the default image (built when
/// missing). An image of packages that is missing and cannot be built is
/// an error naming its tag.
pub async fn runner_image(
    docker: &Docker,
    image: Option<&str>,
    packages: &Packages,
    base: BaseSource,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<String, StartError> {
    match image {
        Some(_) if !packages.is_empty() => Err(StartError::ImageBuild(IMAGE_AND_PACKAGES.into())),
        Some(tag) => {
            super::ensure_image(docker, tag, base, progress).await?;
            Ok(tag.to_string())
        }
        None => {
            let tag = packages_tag(packages)?;
            if packages.is_empty() {
                super::ensure_image(docker, &tag, base, progress).await?;
                return Ok(tag);
            }
            if !image_exists(docker, &tag).await? {
                progress(&format!("the sandbox image {tag} of these packages is missing: building it (once)"));
            }
            build_packages_image(docker, base, packages, progress).await.map_err(|e| {
                let why = match e {
                    StartError::ImageBuild(why) => why,
                    other => other.to_string(),
                };
                StartError::ImageBuild(format!(
                    "the sandbox image {tag} of these packages is missing and could not be built: {why}"
                ))
            })
        }
    }
}

/// Why `image` is on the registry base, if it is: the official Python
/// images set `PYTHON_VERSION`; the debootstrap base sets nothing.
async fn registry_based(docker: &Docker, image: &str) -> Result<Option<String>, StartError> {
    let inspected = docker.inspect_image(image).await.map_err(StartError::docker("inspect the image"))?;
    let env = inspected.config.and_then(|c| c.env).unwrap_or_default();
    Ok(env
        .iter()
        .find(|v| v.starts_with("PYTHON_VERSION="))
        .map(|v| format!("the default image {image} is built on the registry's Python ({v})")))
}

/// Build the image holding `p` (the default image first, when missing) and
/// return its tag; an existing tag returns at once. For no packages, the
/// default image.
pub async fn build_packages_image(
    docker: &Docker,
    base: BaseSource,
    p: &Packages,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<String, StartError> {
    let default = default_image_tag();
    if p.is_empty() {
        super::ensure_image(docker, &default, base, progress).await?;
        return Ok(default);
    }
    let inputs = Inputs::read(p)?;
    let tag = inputs.tag(p.wheels.is_some());
    if !inputs.apt.is_empty() {
        let why = match base {
            BaseSource::Registry => Some("--base registry was asked for".to_string()),
            _ if super::resolve_source(base) == BaseSource::Registry && !image_exists(docker, &default).await? => {
                Some("debootstrap cannot run here (it needs root and the debootstrap program)".to_string())
            }
            _ => None,
        };
        if let Some(why) = why {
            return Err(PackagesError::AptNeedsDebootstrap { why }.into());
        }
    }
    if image_exists(docker, &tag).await? {
        progress(&format!("{tag} already exists"));
        return Ok(tag);
    }
    if !image_exists(docker, &default).await? {
        progress(&format!("the default image {default} is missing: building it first"));
        super::build_image(docker, base, progress).await?;
    }
    if !inputs.apt.is_empty()
        && let Some(why) = registry_based(docker, &default).await?
    {
        return Err(PackagesError::AptNeedsDebootstrap { why }.into());
    }
    progress(&format!("building {tag} from {default}"));
    let scratch = format!("{tag}-build-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let built = async {
        run_build(docker, &tag, &scratch, &inputs, &default, progress).await?;
        let packages = read_packages_json(docker, &scratch, &tag).await?;
        label(docker, &scratch, &tag, &packages, &inputs.summary()).await?;
        Ok::<_, StartError>(packages)
    }
    .await;
    let untag = RemoveImageOptionsBuilder::new().noprune(true).build();
    let _ = docker.remove_image(&scratch, Some(untag), None).await;
    let packages = built?;
    progress(&format!("built {tag} with {packages}"));
    Ok(tag)
}

/// Build `packages.Dockerfile` as `scratch`, turning pip's and apt's
/// errors into ones that name the package.
async fn run_build(
    docker: &Docker,
    tag: &str,
    scratch: &str,
    inputs: &Inputs,
    default: &str,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<(), StartError> {
    let ca = std::fs::read(HOST_CA_BUNDLE).unwrap_or_default();
    let context = build_context(inputs, &ca)?;
    let apt = inputs.apt.join(" ");
    let mut pip = Vec::new();
    if !ca.is_empty() {
        pip.push("--cert /build/ca-certificates.crt");
    }
    if !inputs.wheels.is_empty() {
        pip.push("--no-index --find-links /wheels");
    }
    let pip = pip.join(" ");
    let need_pip = if inputs.requirements.is_some() { "1" } else { "" };
    let args = HashMap::from([
        ("IMAGE", default),
        ("APT", apt.as_str()),
        ("NEED_PIP", need_pip),
        ("PIP_OPTIONS", pip.as_str()),
    ]);
    let options = BuildImageOptionsBuilder::new().t(scratch).buildargs(&args).rm(true).forcerm(true).build();
    let mut stream = docker.build_image(options, None, Some(bollard::body_full(context.into())));
    let mut lines: Vec<String> = Vec::new();
    // The builder stage's image (and a failed build's last step) stay
    // behind untagged unless removed: read which they are as they go by.
    let mut stages = super::stages::StageImages::default();
    let streamed = async {
        while let Some(item) = stream.next().await {
            // A failed step comes as an error of the stream (or an error
            // detail): pip's or apt-get's own lines say more.
            let info = item.map_err(|e| build_failure(tag, &lines, &e.to_string()))?;
            if let Some(text) = info.stream.as_deref() {
                for line in text.lines().map(without_colours) {
                    let line = line.trim_end();
                    stages.line(line);
                    if !line.trim().is_empty() {
                        progress(line);
                        lines.push(line.to_string());
                    }
                }
                if lines.len() > 2000 {
                    lines.drain(..1000);
                }
            }
            if let Some(detail) = info.error_detail.and_then(|d| d.message) {
                return Err(build_failure(tag, &lines, &detail));
            }
        }
        Ok(())
    }
    .await;
    super::stages::remove_untagged(docker, &stages.last_images()).await;
    streamed?;
    if !image_exists(docker, scratch).await? {
        return Err(PackagesError::Build {
            tag: tag.to_string(),
            reason: "docker build ended without an image".into(),
        }
        .into());
    }
    Ok(())
}

/// The line without terminal colour sequences (`ESC [ ... m`): the engine
/// colours a step's stderr.
fn without_colours(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            for end in chars.by_ref() {
                if end.is_ascii_alphabetic() {
                    break;
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

/// What a failed build says: pip's error naming the package, else
/// apt-get's, else the engine's with the last lines of output.
fn build_failure(tag: &str, lines: &[String], detail: &str) -> PackagesError {
    if let Some(e) = pip_failure(lines) {
        return e;
    }
    if let Some(apt) = lines.iter().find(|l| l.starts_with("E: ")) {
        return PackagesError::Build { tag: tag.to_string(), reason: format!("apt-get: {}", &apt[3..]) };
    }
    let tail = lines[lines.len().saturating_sub(8)..].join("\n");
    PackagesError::Build { tag: tag.to_string(), reason: format!("{detail}\n{tail}") }
}

/// pip's `ERROR:` lines turned into the package and the reason.
fn pip_failure(lines: &[String]) -> Option<PackagesError> {
    let first = lines.iter().position(|l| l.starts_with("ERROR: "))?;
    let errors: Vec<&str> = lines[first..].iter().filter_map(|l| l.strip_prefix("ERROR: ")).collect();
    let after: Vec<&str> = lines[first + 1..].iter().map(String::as_str).collect();
    // The indented lines after an error name the requirements it is about.
    let named = || {
        after.iter().map(|l| l.trim()).find_map(|l| {
            let word = l.split_whitespace().next()?;
            (word.contains("==") || l.contains(" from ")).then(|| word.trim_end_matches(':').to_string())
        })
    };
    let pip = |package: String, reason: String| Some(PackagesError::Pip { package, reason });
    if let Some(line) = errors.iter().find_map(|l| l.strip_prefix("No matching distribution found for ")) {
        let versions = errors
            .iter()
            .find(|l| l.starts_with("Could not find a version"))
            .map(|l| format!(" ({l})"))
            .unwrap_or_default();
        return pip(line.trim().to_string(), format!("No matching distribution found{versions}"));
    }
    if errors.iter().any(|l| l.starts_with("THESE PACKAGES DO NOT MATCH THE HASHES")) {
        let expected = after.iter().map(|l| l.trim()).find(|l| l.starts_with("Expected ")).unwrap_or_default();
        let got = after.iter().map(|l| l.trim()).find(|l| l.starts_with("Got ")).unwrap_or_default();
        let detail = [expected, got]
            .iter()
            .filter(|s| !s.is_empty())
            .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect::<Vec<_>>()
            .join(", ");
        return pip(
            named().unwrap_or_else(|| "a requirement".into()),
            format!("THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE ({detail})"),
        );
    }
    if let Some(line) = errors.iter().find(|l| l.starts_with("Hashes are required in --require-hashes mode")) {
        let package = named().unwrap_or_else(|| "a dependency".into());
        return pip(
            package,
            format!("{line} (in hash-checking mode every dependency must be pinned with its hashes in the file too)"),
        );
    }
    if let Some(line) = errors.iter().find(|l| l.starts_with("In --require-hashes mode")) {
        return pip(
            named().unwrap_or_else(|| "a dependency".into()),
            format!("{line} (a dependency: in hash-checking mode pin it in the file, with its hashes)"),
        );
    }
    for prefix in ["Could not build wheels for ", "Failed building wheel for ", "Failed to build "] {
        if let Some(rest) = errors.iter().find_map(|l| l.strip_prefix(prefix)) {
            let package = rest.split([',', ' ']).next().unwrap_or(rest).to_string();
            return pip(package, errors.join(" / "));
        }
    }
    let package = errors
        .iter()
        .find_map(|l| l.split(" for ").nth(1).and_then(|w| w.split_whitespace().next()))
        .map(String::from)
        .unwrap_or_else(|| "the requirements".into());
    pip(package, errors.join(" / "))
}

/// The build context: the Dockerfile, the lister, the normalized
/// requirements, the CA bundle (the builder stage's only) and `wheels/`.
fn build_context(inputs: &Inputs, ca: &[u8]) -> Result<Vec<u8>, StartError> {
    let context_error = |e: std::io::Error| StartError::ImageBuild(format!("build context: {e}"));
    let mut tar = tar::Builder::new(Vec::new());
    let requirements = inputs.requirements_text();
    let mut files: Vec<(String, &[u8])> = vec![
        ("Dockerfile".into(), PACKAGES_DOCKERFILE.as_bytes()),
        ("list_packages.py".into(), LIST_PACKAGES_PY.as_bytes()),
        ("requirements.txt".into(), requirements.as_bytes()),
        ("ca-certificates.crt".into(), ca),
    ];
    let mut dir = tar::Header::new_gnu();
    dir.set_entry_type(tar::EntryType::Directory);
    dir.set_size(0);
    dir.set_mode(0o755);
    dir.set_cksum();
    tar.append_data(&mut dir, "wheels/", std::io::empty()).map_err(context_error)?;
    for (name, bytes) in &inputs.wheels {
        files.push((format!("wheels/{name}"), bytes));
    }
    for (name, bytes) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        tar.append_data(&mut header, name, bytes).map_err(context_error)?;
    }
    tar.into_inner().map_err(context_error)
}

/// `packages.json` of the built image, read from a container created (never
/// started) from it, checked to be an object of versions.
async fn read_packages_json(docker: &Docker, scratch: &str, tag: &str) -> Result<String, StartError> {
    let name = format!("code-mode-packages-{}", uuid::Uuid::new_v4().simple());
    let body = bollard::models::ContainerCreateBody { image: Some(scratch.to_string()), ..Default::default() };
    let options = CreateContainerOptionsBuilder::new().name(&name).build();
    docker.create_container(Some(options), body).await.map_err(StartError::docker("create a container"))?;
    let read = async {
        let options = DownloadFromContainerOptionsBuilder::new().path(PACKAGES_FILE).build();
        let mut stream = docker.download_from_container(&name, Some(options));
        let mut archive = Vec::new();
        while let Some(chunk) = stream.next().await {
            archive.extend_from_slice(&chunk.map_err(StartError::docker("read packages.json"))?);
        }
        let mut tar = tar::Archive::new(archive.as_slice());
        let mut text = String::new();
        let entries = tar.entries().map_err(|e| StartError::ImageBuild(format!("{tag}: packages.json: {e}")))?;
        for entry in entries {
            let mut entry = entry.map_err(|e| StartError::ImageBuild(format!("{tag}: packages.json: {e}")))?;
            std::io::Read::read_to_string(&mut entry, &mut text)
                .map_err(|e| StartError::ImageBuild(format!("{tag}: packages.json: {e}")))?;
        }
        Ok::<_, StartError>(text)
    }
    .await;
    let remove = RemoveContainerOptionsBuilder::new().force(true).build();
    let _ = docker.remove_container(&name, Some(remove)).await;
    let text = read?;
    let found: BTreeMap<String, String> = serde_json::from_str(&text)
        .map_err(|e| StartError::ImageBuild(format!("{tag}: packages.json is not an object of versions: {e}")))?;
    Ok(serde_json::to_string(&found).unwrap_or_default())
}

/// Tag `scratch` as `tag` with the labels (a one-line build on top of it).
async fn label(docker: &Docker, scratch: &str, tag: &str, packages: &str, inputs: &str) -> Result<(), StartError> {
    let dockerfile = format!("FROM {scratch}\n");
    let mut tar = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_size(dockerfile.len() as u64);
    header.set_mode(0o644);
    header.set_cksum();
    tar.append_data(&mut header, "Dockerfile", dockerfile.as_bytes())
        .map_err(|e| StartError::ImageBuild(format!("build context: {e}")))?;
    let context = tar.into_inner().map_err(|e| StartError::ImageBuild(format!("build context: {e}")))?;
    let labels = HashMap::from([("code-mode.image", "1"), (PACKAGES_LABEL, packages), (INPUTS_LABEL, inputs)]);
    let options = BuildImageOptionsBuilder::new().t(tag).labels(&labels).rm(true).forcerm(true).build();
    let mut stream = docker.build_image(options, None, Some(bollard::body_full(context.into())));
    while let Some(item) = stream.next().await {
        let info = item.map_err(|e| PackagesError::Build { tag: tag.to_string(), reason: e.to_string() })?;
        if let Some(detail) = info.error_detail.and_then(|d| d.message) {
            return Err(PackagesError::Build { tag: tag.to_string(), reason: detail }.into());
        }
    }
    if !image_exists(docker, tag).await? {
        return Err(
            PackagesError::Build { tag: tag.to_string(), reason: "labelling ended without an image".into() }.into()
        );
    }
    Ok(())
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

    fn tag_of(dir: &Path, text: &str, apt: &[&str]) -> String {
        let file = dir.join(format!("r-{}.txt", uuid::Uuid::new_v4().simple()));
        std::fs::write(&file, text).unwrap();
        let p = Packages { requirements: Some(file), apt: apt.iter().map(|s| s.to_string()).collect(), wheels: None };
        packages_tag(&p).unwrap()
    }

    #[test]
    fn different_sets_get_different_tags_and_the_same_set_the_same() {
        let dir = std::env::temp_dir().join(format!("code-mode-tags-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let a = tag_of(&dir, "tabulate==0.9.0\nnumpy==2.2.6\n", &[]);
        assert!(a.starts_with("code-mode-sandbox:p-") && a.len() == "code-mode-sandbox:p-".len() + 12, "{a}");
        assert_eq!(a, tag_of(&dir, "numpy==2.2.6\n# again\ntabulate == 0.9.0\n", &[]));
        assert_ne!(a, tag_of(&dir, "tabulate==0.9.0\nnumpy==2.2.5\n", &[]));
        assert_ne!(a, tag_of(&dir, "tabulate==0.9.0\nnumpy==2.2.6\n", &["python3-numpy"]));
        let apt = |names: &[&str]| {
            packages_tag(&Packages { apt: names.iter().map(|s| s.to_string()).collect(), ..Default::default() })
                .unwrap()
        };
        assert_eq!(apt(&["b-pkg", "a-pkg"]), apt(&["a-pkg", "b-pkg", "a-pkg"]));
        assert_eq!(packages_tag(&Packages::default()).unwrap(), default_image_tag());
        let err = packages_tag(&Packages { apt: vec!["Bad".into()], ..Default::default() }).unwrap_err();
        assert!(err.to_string().contains("--apt \"Bad\" is not a Debian package name"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn wheel_contents_are_part_of_the_tag() {
        let dir = std::env::temp_dir().join(format!("code-mode-wheels-{}", uuid::Uuid::new_v4().simple()));
        let wheels = dir.join("wheels");
        std::fs::create_dir_all(&wheels).unwrap();
        let file = dir.join("requirements.txt");
        std::fs::write(&file, "x==1.0\n").unwrap();
        let p = Packages { requirements: Some(file.clone()), apt: vec![], wheels: Some(wheels.clone()) };
        assert!(packages_tag(&p).unwrap_err().to_string().contains("holds no .whl"));
        std::fs::write(wheels.join("x-1.0-py3-none-any.whl"), b"one").unwrap();
        let one = packages_tag(&p).unwrap();
        std::fs::write(wheels.join("x-1.0-py3-none-any.whl"), b"two").unwrap();
        assert_ne!(one, packages_tag(&p).unwrap());
        let alone = Packages { requirements: None, ..p };
        assert!(packages_tag(&alone).unwrap_err().to_string().contains("give --requirements too"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn pips_errors_name_the_package() {
        let lines = |text: &str| text.lines().map(String::from).collect::<Vec<_>>();
        let missing = lines(
            "Collecting x\nERROR: Could not find a version that satisfies the requirement no-such-package-xyz==1.0 \
             (from versions: none)\nERROR: No matching distribution found for no-such-package-xyz==1.0",
        );
        let e = pip_failure(&missing).unwrap().to_string();
        assert!(e.starts_with("pip could not install no-such-package-xyz==1.0: No matching distribution found"), "{e}");
        let hashes = lines(
            "ERROR: THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE. If you have updated...\n    \
             tabulate==0.9.0 from https://files.pythonhosted.org/x/tabulate-0.9.0-py3-none-any.whl:\n        \
             Expected sha256 0000\n             Got        abcd",
        );
        let e = pip_failure(&hashes).unwrap().to_string();
        assert!(e.starts_with("pip could not install tabulate==0.9.0: THESE PACKAGES DO NOT MATCH"), "{e}");
        assert!(e.contains("(Expected sha256 0000, Got abcd)"), "{e}");
        assert!(pip_failure(&lines("Step 1/3 : FROM x\nE: Unable to locate package nope")).is_none());
        assert_eq!(without_colours("\u{1b}[91mERROR: x\u{1b}[0m"), "ERROR: x");
        let apt = build_failure("t", &lines("E: Unable to locate package nope"), "returned a non-zero code: 100");
        assert_eq!(apt.to_string(), "building t failed: apt-get: Unable to locate package nope");
    }
}
