//! Building an image with packages on the engine: the two-stage build,
//! pip's and apt's failures turned into errors naming the package, the
//! `packages.json` read back out of the image into its label, and the
//! image a sandbox-runner uses made sure of.

use std::collections::{BTreeMap, HashMap};

use bollard::Docker;
use bollard::query_parameters::{
    BuildImageOptionsBuilder, CreateContainerOptionsBuilder, DownloadFromContainerOptionsBuilder,
    RemoveContainerOptionsBuilder, RemoveImageOptionsBuilder,
};
use futures::StreamExt;

use super::inputs::Inputs;
use super::*;
use crate::error::StartError;
use crate::image::{BaseSource, default_image_tag, image_exists};

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
            crate::image::ensure_image(docker, tag, base, progress).await?;
            Ok(tag.to_string())
        }
        None => {
            let tag = packages_tag(packages)?;
            if packages.is_empty() {
                crate::image::ensure_image(docker, &tag, base, progress).await?;
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
        crate::image::ensure_image(docker, &default, base, progress).await?;
        return Ok(default);
    }
    let inputs = Inputs::read(p)?;
    let tag = inputs.tag(p.wheels.is_some());
    if !inputs.apt.is_empty() {
        let why = match base {
            BaseSource::Registry => Some("--base registry was asked for".to_string()),
            _ if crate::image::resolve_source(base) == BaseSource::Registry
                && !image_exists(docker, &default).await? =>
            {
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
        crate::image::build_image(docker, base, progress).await?;
    }
    if !inputs.apt.is_empty()
        && let Some(why) = registry_based(docker, &default).await?
    {
        return Err(PackagesError::AptNeedsDebootstrap { why }.into());
    }
    progress(&format!("building {tag} from {default}"));
    let scratch = format!("{tag}-build-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let built = async {
        // Another build on the engine may remove, while this one runs, an
        // untagged layer this one took from the cache (each build removes
        // its own stages' images): the engine then fails the build with
        // "unknown parent image ID". That layer is gone from the cache as
        // well, so building once more makes it afresh.
        let mut again = true;
        loop {
            match run_build(docker, &tag, &scratch, &inputs, &default, progress).await {
                Err(e) if again && lost_parent(&e.to_string()) => {
                    again = false;
                    progress("a layer this build reused was removed by another build meanwhile: building again");
                }
                done => break done,
            }
        }?;
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

/// Whether a failed build lost a cached layer to another build's clean-up.
fn lost_parent(error: &str) -> bool {
    error.contains("unknown parent image ID")
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
    let mut stages = crate::image::stages::StageImages::default();
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
    crate::image::stages::remove_untagged(docker, &stages.last_images()).await;
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

    #[test]
    fn a_build_that_lost_a_reused_layer_to_another_builds_clean_up_is_built_again_and_no_other_failure_is() {
        // The engine's words when a layer taken from the cache was removed
        // meanwhile (seen in CI with two package builds on one engine).
        let lost = build_failure(
            "code-mode-sandbox:p-7f6ce3e6a134",
            &["Step 9/14 : RUN pip install".to_string()],
            "Docker stream error: failed to export image: failed to set parent sha256:84d8c831b157: unknown parent \
             image ID sha256:84d8c831b157",
        );
        assert!(lost_parent(&StartError::from(lost).to_string()));
        let pip = build_failure(
            "code-mode-sandbox:p-1",
            &["ERROR: No matching distribution found for nosuchpackage==1.0".to_string()],
            "The command returned a non-zero code: 1",
        );
        assert!(!lost_parent(&StartError::from(pip).to_string()));
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
