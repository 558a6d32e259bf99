//! Building the sandbox image against the real Docker engine.

use std::sync::Mutex;

use code_mode_sandbox_runner::image::{self, BaseSource};

use crate::support;

#[tokio::test]
async fn the_runner_layer_builds_with_progress_and_holds_only_the_runner() {
    let Some(docker) = support::docker().await else { return };
    // The base comes from the same place as the default image's; building the
    // layer under a throwaway tag leaves the default image alone.
    let tag = format!("code-mode-sandbox-test:{}", uuid::Uuid::new_v4().simple());
    let lines = Mutex::new(Vec::<String>::new());
    let progress = |l: &str| lines.lock().unwrap().push(l.to_string());
    image::build_image_as(&docker, BaseSource::Auto, &tag, &progress).await.expect("the image builds");
    assert!(image::image_exists(&docker, &tag).await.unwrap());
    let lines = lines.into_inner().unwrap();
    assert!(lines.iter().any(|l| l.starts_with("building ") && l.contains(&tag)), "{lines:?}");
    assert!(lines.iter().any(|l| l == &format!("built {tag}")), "{lines:?}");
    let inspect = docker.inspect_image(&tag).await.unwrap();
    let config = inspect.config.unwrap();
    assert_eq!(config.user.as_deref(), Some("65534:65534"));
    assert_eq!(config.entrypoint.unwrap(), ["python3", "-I", "/opt/code-mode/runner.py"]);
    let _ = docker.remove_image(&tag, None::<bollard::query_parameters::RemoveImageOptions>, None).await;
}

#[tokio::test]
async fn a_missing_image_that_is_not_ours_is_not_built() {
    let Some(docker) = support::docker().await else { return };
    let err = image::ensure_image(&docker, "someone-else/image:1", BaseSource::Auto, &|_| {}).await.unwrap_err();
    assert!(err.to_string().contains("someone-else/image:1 does not exist"), "{err}");
}
