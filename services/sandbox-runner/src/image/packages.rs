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

use std::path::PathBuf;

use crate::error::StartError;

mod build;
mod inputs;
mod requirements;

pub use build::{IMAGE_AND_PACKAGES, build_packages_image, installed_packages, runner_image};
pub use inputs::packages_tag;
pub use requirements::{Requirement, Requirements, is_debian_name};

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
