//! The runner's errors: why the sandbox side cannot start ([`StartError`],
//! also `doctor`'s) and why a cell or request fails on a runner that started
//! ([`SandboxError`]); `wire.rs` maps them to the bus's replies.

use crate::container::Runtime;
use crate::kept::KeptError;

/// Why the sandbox side cannot start (or `doctor` cannot check the host):
/// the engine, its runtimes, the image.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// No Docker engine answers.
    #[error(
        "no Docker engine answers at {host}: {reason}. code-mode runs code in Docker containers: start the \
         engine (e.g. `sudo systemctl start docker`, or `dockerd &`), or point DOCKER_HOST at it"
    )]
    NoEngine {
        /// Where we looked.
        host: String,
        /// What failed.
        reason: String,
    },
    /// A Docker call failed.
    #[error("docker: could not {action}: {source}")]
    Docker {
        /// What we tried.
        action: &'static str,
        /// Why it failed.
        #[source]
        source: bollard::errors::Error,
    },
    /// The configured image does not exist.
    #[error("the sandbox image {image} does not exist: build it with `code-mode build-image`, or pass --image")]
    ImageMissing {
        /// The image.
        image: String,
    },
    /// Building the image failed.
    #[error("building the sandbox image failed: {0}")]
    ImageBuild(String),
    /// The engine lacks the runtime, or has it registered without what the
    /// lockdown needs.
    #[error("the container runtime {runtime} {problem}. To register it: {how}")]
    Runtime {
        /// The runtime asked for.
        runtime: Runtime,
        /// What is wrong with the engine's registration.
        problem: String,
        /// How to register it.
        how: String,
    },
}

impl StartError {
    /// A mapper for a failed Docker call.
    pub fn docker(action: &'static str) -> impl Fn(bollard::errors::Error) -> StartError {
        move |source| StartError::Docker { action, source }
    }
}

/// Why a cell cannot run, or a request cannot be answered, on a runner
/// that started.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// A Docker call failed.
    #[error("docker: could not {action}: {source}")]
    Docker {
        /// What we tried.
        action: &'static str,
        /// Why it failed.
        #[source]
        source: bollard::errors::Error,
    },
    /// The configured image went away (removed while the runner ran).
    #[error("the sandbox image {image} does not exist: build it with `code-mode build-image`, or pass --image")]
    ImageMissing {
        /// The image.
        image: String,
    },
    /// The audit sink cannot be written, so the cell is refused (or its
    /// report withheld when its end could not be recorded).
    #[error("{0}")]
    Audit(#[source] code_mode_audit::AuditError),
    /// The cell's lease could not be held (see `code_mode_core::lease`).
    #[error("the cell's lease could not be held: {0}")]
    Lease(#[source] code_mode_core::bus::BusError),
    /// Every slot of this runner is taken.
    #[error("this sandbox-runner is running its {capacity} cells (or holding kept sessions' containers) already")]
    NoCapacity {
        /// The runner's capacity.
        capacity: usize,
    },
    /// The cell itself is unusable (limits out of range).
    #[error("the cell was refused: {reason}")]
    BadCell {
        /// What is wrong with it.
        reason: String,
    },
    /// A kept session's cell cannot run in its container.
    #[error("{0}")]
    Kept(#[from] KeptError),
    /// A request this runner cannot take as sent.
    #[error("bad request: {0}")]
    BadRequest(String),
    /// The posture probe (`doctor`) gave no usable report.
    #[error("docker: could not run the posture probe: {reason}")]
    Probe {
        /// What went wrong.
        reason: String,
    },
}

impl SandboxError {
    /// A mapper for a failed Docker call.
    pub fn docker(action: &'static str) -> impl Fn(bollard::errors::Error) -> SandboxError {
        move |source| SandboxError::Docker { action, source }
    }

    pub(crate) fn from_create(e: bollard::errors::Error, image: &str) -> SandboxError {
        match e {
            bollard::errors::Error::DockerResponseServerError { status_code: 404, .. } => {
                SandboxError::ImageMissing { image: image.to_string() }
            }
            e => SandboxError::docker("create the container")(e),
        }
    }
}
