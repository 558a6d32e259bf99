//! What the runner's tests share: the real Docker engine, and the
//! default sandbox image on it, or a clear "unavailable" (which fails the
//! test under CI and skips it, saying so, on a developer's machine).

use bollard::Docker;
use code_mode_sandbox_runner::image;

/// The Docker engine, or `None` after `unavailable`.
pub async fn docker() -> Option<Docker> {
    match code_mode_sandbox_runner::connect_docker().await {
        Ok(docker) => Some(docker),
        Err(e) => {
            code_mode_core::testing::unavailable("a Docker engine", &e.to_string());
            None
        }
    }
}

/// The Docker engine with the default sandbox image built, or `None`
/// after `unavailable`.
pub async fn docker_with_image() -> Option<Docker> {
    let docker = docker().await?;
    let tag = image::default_image_tag();
    if !image::image_exists(&docker, &tag).await.unwrap() {
        code_mode_core::testing::unavailable("the sandbox image", &format!("{tag} is not built"));
        return None;
    }
    Some(docker)
}
