//! The sandbox image: Python and `runner.py` (with the files of
//! `search_tools` it loads: `tool_search.py`, `search_query.py`,
//! `search_words.py`, `search_rewrites.py`, `search_graph.py`,
//! `search_languages.py`, `search_tables.py`), nothing else.
//!
//! The image is built in two layers. The base is a minimal Python:
//! either built offline with `debootstrap` from the Debian mirror apt
//! already uses and `docker import`ed (no registry needed), or pulled from
//! a registry (`python:3.12-slim`). On top, `image/Dockerfile` adds
//! `runner.py` and its search files, the non-root user and the entrypoint.
//! The tag carries a hash of the Dockerfile and those files, so a changed
//! runner gets a new image.
//!
//! An image with packages ([`packages`]) is built on top of that default
//! image and tagged by a hash of its packages too.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use bollard::Docker;
use bollard::query_parameters::{BuildImageOptionsBuilder, CreateImageOptionsBuilder};
use futures::StreamExt;
use sha2::{Digest, Sha256};

use crate::error::StartError;

pub mod packages;
mod stages;

pub use packages::{
    IMAGE_AND_PACKAGES, INPUTS_LABEL, PACKAGES_LABEL, Packages, PackagesError, build_packages_image,
    installed_packages, packages_tag, runner_image,
};

/// The runner script baked into the image.
pub const RUNNER_PY: &str = include_str!("../image/runner.py");
/// `search_tools`' ranking, which `runner.py` loads from beside it.
pub const TOOL_SEARCH_PY: &str = include_str!("../image/tool_search.py");
/// How a query is read, which `tool_search.py` loads from beside it.
pub const SEARCH_QUERY_PY: &str = include_str!("../image/search_query.py");
/// How text becomes words (split, stemmed, misspelt), which
/// `search_query.py` loads from beside it.
pub const SEARCH_WORDS_PY: &str = include_str!("../image/search_words.py");
/// The shorthands a request is rewritten by before it is read, which
/// `search_query.py` loads from beside it.
pub const SEARCH_REWRITES_PY: &str = include_str!("../image/search_rewrites.py");
/// What a request about named things is about (a knowledge graph's
/// relation, observation or entity), which `search_query.py` loads from
/// beside it.
pub const SEARCH_GRAPH_PY: &str = include_str!("../image/search_graph.py");
/// A request in another language, read in English, which
/// `search_query.py` loads from beside it.
pub const SEARCH_LANGUAGES_PY: &str = include_str!("../image/search_languages.py");
/// The vocabulary `search_query.py` loads from beside it.
pub const SEARCH_TABLES_PY: &str = include_str!("../image/search_tables.py");
/// Files out of a cell, which `runner.py` loads from beside it.
pub const FILES_OUT_PY: &str = include_str!("../image/files_out.py");
/// The files of the runner layer under `/opt/code-mode`, by name.
pub const RUNNER_FILES: [(&str, &str); 9] = [
    ("runner.py", RUNNER_PY),
    ("tool_search.py", TOOL_SEARCH_PY),
    ("search_query.py", SEARCH_QUERY_PY),
    ("search_words.py", SEARCH_WORDS_PY),
    ("search_rewrites.py", SEARCH_REWRITES_PY),
    ("search_graph.py", SEARCH_GRAPH_PY),
    ("search_languages.py", SEARCH_LANGUAGES_PY),
    ("search_tables.py", SEARCH_TABLES_PY),
    ("files_out.py", FILES_OUT_PY),
];
/// The Dockerfile of the runner layer (`ARG BASE` picks the base).
pub const DOCKERFILE: &str = include_str!("../image/Dockerfile");
/// The base a registry user gets.
pub const REGISTRY_BASE: &str = "python:3.12-slim";
/// The base built offline.
pub const OFFLINE_BASE: &str = "code-mode-base:bookworm";
/// The Debian release of the offline base.
pub const OFFLINE_SUITE: &str = "bookworm";
/// The image repository of sandbox images.
pub const IMAGE_REPOSITORY: &str = "code-mode-sandbox";

/// Where the base image comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BaseSource {
    /// Offline when `debootstrap` is available and we are root, else registry.
    Auto,
    /// `debootstrap` + `docker import`.
    Debootstrap,
    /// `FROM python:3.12-slim`, pulled from a registry.
    Registry,
}

impl std::str::FromStr for BaseSource {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Self::Auto),
            "debootstrap" => Ok(Self::Debootstrap),
            "registry" => Ok(Self::Registry),
            other => Err(format!("unknown base source {other:?} (expected auto, debootstrap or registry)")),
        }
    }
}

/// The tag of the image this build of code-mode uses by default.
pub fn default_image_tag() -> String {
    let mut hash = Sha256::new();
    hash.update(DOCKERFILE.as_bytes());
    hash.update([0]);
    for (_, text) in RUNNER_FILES {
        hash.update(text.as_bytes());
        hash.update([0]);
    }
    let digest = hash.finalize();
    let hex: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
    format!("{IMAGE_REPOSITORY}:{hex}")
}

/// True when the engine has the image.
pub async fn image_exists(docker: &Docker, image: &str) -> Result<bool, StartError> {
    match docker.inspect_image(image).await {
        Ok(_) => Ok(true),
        Err(bollard::errors::Error::DockerResponseServerError { status_code: 404, .. }) => Ok(false),
        Err(e) => Err(StartError::docker("inspect the image")(e)),
    }
}

/// Make sure `image` exists. The default image is built when missing (with
/// progress through `progress`); any other image must already exist.
pub async fn ensure_image(
    docker: &Docker,
    image: &str,
    source: BaseSource,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<(), StartError> {
    if image_exists(docker, image).await? {
        return Ok(());
    }
    if image != default_image_tag() {
        return Err(StartError::ImageMissing { image: image.to_string() });
    }
    progress(&format!("the sandbox image {image} is missing: building it (once)"));
    build_image(docker, source, progress).await
}

/// Build the default image: the base (when missing) and the runner layer.
pub async fn build_image(
    docker: &Docker,
    source: BaseSource,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<(), StartError> {
    build_image_as(docker, source, &default_image_tag(), progress).await
}

/// Build this version's image under `tag`: the base (when missing) and the
/// runner layer.
pub async fn build_image_as(
    docker: &Docker,
    source: BaseSource,
    tag: &str,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<(), StartError> {
    let source = resolve_source(source);
    let base = match source {
        BaseSource::Debootstrap => {
            if !image_exists(docker, OFFLINE_BASE).await? {
                build_offline_base(docker, progress).await?;
            } else {
                progress(&format!("base image {OFFLINE_BASE} already present"));
            }
            OFFLINE_BASE
        }
        _ => REGISTRY_BASE,
    };
    progress(&format!("building {tag} from {base}"));
    let context = build_context()?;
    let args = HashMap::from([("BASE", base)]);
    let labels = HashMap::from([("code-mode.image", "1")]);
    let options = BuildImageOptionsBuilder::new()
        .t(tag)
        .buildargs(&args)
        .labels(&labels)
        .rm(true)
        .forcerm(true)
        .pull(if source == BaseSource::Registry { "true" } else { "" })
        .build();
    let mut stream = docker.build_image(options, None, Some(bollard::body_full(context.into())));
    while let Some(item) = stream.next().await {
        let info = item.map_err(|e| StartError::ImageBuild(format!("docker build failed: {e}")))?;
        if let Some(line) = info.stream.as_deref().map(str::trim).filter(|l| !l.is_empty()) {
            progress(line);
        }
        if let Some(detail) = info.error_detail.and_then(|d| d.message) {
            return Err(StartError::ImageBuild(format!("docker build failed: {detail}")));
        }
    }
    if !image_exists(docker, tag).await? {
        return Err(StartError::ImageBuild(format!("docker build ended but {tag} does not exist")));
    }
    progress(&format!("built {tag}"));
    Ok(())
}

/// `Auto` made definite: debootstrap when it can run here, else the
/// registry.
pub(crate) fn resolve_source(source: BaseSource) -> BaseSource {
    match source {
        BaseSource::Auto if debootstrap_usable() => BaseSource::Debootstrap,
        BaseSource::Auto => BaseSource::Registry,
        other => other,
    }
}

/// The build context: the Dockerfile and the runner's files, as a tar archive.
fn build_context() -> Result<Vec<u8>, StartError> {
    let mut tar = tar::Builder::new(Vec::new());
    for (name, text) in [("Dockerfile", DOCKERFILE)].into_iter().chain(RUNNER_FILES) {
        let mut header = tar::Header::new_gnu();
        header.set_size(text.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        tar.append_data(&mut header, name, text.as_bytes())
            .map_err(|e| StartError::ImageBuild(format!("build context: {e}")))?;
    }
    tar.into_inner().map_err(|e| StartError::ImageBuild(format!("build context: {e}")))
}

fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

fn is_root() -> bool {
    // The effective uid is the 4th field of the `Uid:` line of /proc/self/status.
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("Uid:")).map(|l| l.split_whitespace().nth(2) == Some("0")))
        .unwrap_or(false)
}

fn debootstrap_usable() -> bool {
    which("debootstrap").is_some() && is_root()
}

/// The Debian mirror apt already uses (deb822 `URIs:` or a one-line `deb`
/// entry), else the main Debian mirror.
pub fn debian_mirror() -> String {
    let mut files = vec![PathBuf::from("/etc/apt/sources.list")];
    if let Ok(dir) = std::fs::read_dir("/etc/apt/sources.list.d") {
        let mut more: Vec<PathBuf> = dir.flatten().map(|e| e.path()).collect();
        more.sort();
        files.extend(more);
    }
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else { continue };
        if let Some(m) = mirror_in(&text, file.extension().is_some_and(|e| e == "sources")) {
            return m;
        }
    }
    "http://deb.debian.org/debian".into()
}

fn mirror_in(text: &str, deb822: bool) -> Option<String> {
    for line in text.lines().map(str::trim).filter(|l| !l.starts_with('#')) {
        let uri = if deb822 {
            line.strip_prefix("URIs:").and_then(|u| u.split_whitespace().next())
        } else {
            line.strip_prefix("deb ").and_then(|rest| rest.split_whitespace().find(|w| w.contains("://")))
        };
        if let Some(uri) = uri.filter(|u| u.trim_end_matches('/').ends_with("/debian")) {
            return Some(uri.trim_end_matches('/').to_string());
        }
    }
    None
}

/// `debootstrap --variant=minbase --include=python3` into a temporary
/// directory, then import it as [`OFFLINE_BASE`].
async fn build_offline_base(docker: &Docker, progress: &(dyn Fn(&str) + Sync)) -> Result<(), StartError> {
    let debootstrap = which("debootstrap").ok_or_else(|| {
        StartError::ImageBuild(
            "debootstrap is not installed: install it (apt-get install debootstrap) or use --base registry".into(),
        )
    })?;
    if !is_root() {
        return Err(StartError::ImageBuild(
            "debootstrap needs root: run `sudo code-mode build-image`, or use --base registry".into(),
        ));
    }
    let mirror = debian_mirror();
    let dir = std::env::temp_dir().join(format!("code-mode-rootfs-{}", uuid::Uuid::new_v4().simple()));
    progress(&format!("debootstrap {OFFLINE_SUITE} from {mirror} into {} (about a minute)", dir.display()));
    let result = async {
        run_quiet(
            tokio::process::Command::new(&debootstrap)
                .args(["--variant=minbase", "--include=python3", OFFLINE_SUITE])
                .arg(&dir)
                .arg(&mirror),
            "debootstrap",
        )
        .await?;
        // Trim what the sandbox never uses.
        for sub in ["var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man"] {
            let p = dir.join(sub);
            if p.is_dir() {
                let _ = tokio::fs::remove_dir_all(&p).await;
                let _ = tokio::fs::create_dir_all(&p).await;
            }
        }
        progress(&format!("importing the root filesystem as {OFFLINE_BASE}"));
        import_dir(docker, &dir).await
    }
    .await;
    let _ = tokio::fs::remove_dir_all(&dir).await;
    result
}

/// Run a command with a minimal environment, keeping its output for errors.
async fn run_quiet(cmd: &mut tokio::process::Command, what: &str) -> Result<(), StartError> {
    cmd.env_clear().env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin").stdin(Stdio::null());
    let out = cmd.output().await.map_err(|e| StartError::ImageBuild(format!("{what} could not start: {e}")))?;
    if !out.status.success() {
        let tail = String::from_utf8_lossy(&out.stdout[out.stdout.len().saturating_sub(2000)..]).to_string()
            + &String::from_utf8_lossy(&out.stderr[out.stderr.len().saturating_sub(2000)..]);
        return Err(StartError::ImageBuild(format!("{what} failed ({}): {tail}", out.status)));
    }
    Ok(())
}

/// `tar -C dir -c .` streamed into `docker import`.
async fn import_dir(docker: &Docker, dir: &Path) -> Result<(), StartError> {
    let mut child = tokio::process::Command::new("tar")
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .arg("-C")
        .arg(dir)
        .args(["--numeric-owner", "-c", "."])
        .stdout(Stdio::piped())
        .stdin(Stdio::null())
        .spawn()
        .map_err(|e| StartError::ImageBuild(format!("tar could not start: {e}")))?;
    let stdout = child.stdout.take().expect("piped stdout");
    let body = tokio_util::io::ReaderStream::new(stdout);
    let (repo, tag) = OFFLINE_BASE.split_once(':').expect("the base has a tag");
    let options = CreateImageOptionsBuilder::new().from_src("-").repo(repo).tag(tag).build();
    let mut stream = docker.create_image(Some(options), Some(bollard::body_try_stream(body)), None);
    while let Some(item) = stream.next().await {
        let info = item.map_err(|e| StartError::ImageBuild(format!("docker import failed: {e}")))?;
        if let Some(detail) = info.error_detail.and_then(|d| d.message) {
            return Err(StartError::ImageBuild(format!("docker import failed: {detail}")));
        }
    }
    let status = child.wait().await.map_err(|e| StartError::ImageBuild(format!("tar: {e}")))?;
    if !status.success() {
        return Err(StartError::ImageBuild(format!("tar failed: {status}")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mirror_is_read_from_either_apt_format() {
        let deb822 = "Types: deb\n# comment\nURIs: http://mirror.example/debian\nSuites: bookworm\n";
        assert_eq!(mirror_in(deb822, true).as_deref(), Some("http://mirror.example/debian"));
        let classic = "deb [arch=amd64] http://mirror.example/debian/ bookworm main\n";
        assert_eq!(mirror_in(classic, false).as_deref(), Some("http://mirror.example/debian"));
        let security = "URIs: http://mirror.example/debian-security\n";
        assert_eq!(mirror_in(security, true), None);
    }

    #[test]
    fn the_image_tag_depends_on_the_runner() {
        let tag = default_image_tag();
        assert!(tag.starts_with("code-mode-sandbox:") && tag.len() == "code-mode-sandbox:".len() + 12);
    }
}
