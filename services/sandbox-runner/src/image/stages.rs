//! What a multi-stage build leaves behind, and removing it.
//!
//! The engine's classic builder (the one `/build` runs without BuildKit)
//! keeps an image for every step of every stage. The last stage's is the
//! built image; every other stage's last image (here the `builder` stage of
//! `packages.Dockerfile`, pip's install and all: about half a gigabyte with
//! numpy) stays behind untagged, a `<none>` image nobody uses, one per
//! build. A failed build leaves its last finished step the same way.
//!
//! [`StageImages`] reads the build's output (`Step N/M : FROM ...` starts a
//! stage; ` ---> <id>` ends each step with its image, the `FROM` step's
//! being the base image, which is never taken) and [`remove_untagged`]
//! removes each stage's last image if it has no tag, with the untagged
//! parents only it used (the engine keeps any layer another image shares,
//! and refuses to remove an image that has children).

use bollard::Docker;
use bollard::query_parameters::RemoveImageOptionsBuilder;

/// The last image of each stage of a build, as its output names them.
#[derive(Debug, Default)]
pub(crate) struct StageImages {
    /// Per stage, its last step's image.
    stages: Vec<Option<String>>,
    /// The current step is a `FROM` (its image is the base's).
    in_from: bool,
}

impl StageImages {
    /// Read one line of the build's output.
    pub(crate) fn line(&mut self, line: &str) {
        let line = line.trim();
        if let Some(step) = line.strip_prefix("Step ") {
            let instruction = step.split_once(" : ").map_or("", |(_, i)| i.trim_start());
            self.in_from = instruction.get(..5).is_some_and(|w| w.eq_ignore_ascii_case("FROM "));
            if self.in_from {
                self.stages.push(None);
            }
            return;
        }
        let Some(id) = line.strip_prefix("---> ") else { return };
        let id = id.trim();
        let is_id = id.len() >= 12 && id.chars().all(|c| c.is_ascii_hexdigit());
        if !is_id || self.in_from {
            return;
        }
        if let Some(last) = self.stages.last_mut() {
            *last = Some(id.to_string());
        }
    }

    /// Each stage's last image (a stage that finished no step of its own
    /// has none).
    pub(crate) fn last_images(&self) -> Vec<String> {
        self.stages.iter().flatten().cloned().collect()
    }
}

/// Remove each of `images` that has no tag (with the untagged parents no
/// other image uses); leave the tagged ones and any the engine refuses to
/// remove (children of their own, a container using them).
pub(crate) async fn remove_untagged(docker: &Docker, images: &[String]) {
    for id in images {
        let untagged = match docker.inspect_image(id).await {
            Ok(image) => image.repo_tags.unwrap_or_default().iter().all(|t| t == "<none>:<none>"),
            Err(_) => false,
        };
        if !untagged {
            continue;
        }
        let options = RemoveImageOptionsBuilder::new().noprune(false).build();
        match docker.remove_image(id, Some(options), None).await {
            Ok(_) => tracing::debug!(image = %id, "removed a build stage's untagged image"),
            Err(e) => tracing::debug!(image = %id, error = %e, "a build stage's image stays"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_image_of_each_stage_is_found_and_never_a_from_steps_base() {
        let output = "\
Step 1/20 : ARG IMAGE
Step 2/20 : FROM ${IMAGE} AS builder
 ---> 1111aaaa2222
Step 3/20 : USER root
 ---> Using cache
 ---> 3333bbbb4444
Step 4/20 : RUN pip install
 ---> Running in 9999ffff0000
Removing intermediate container 9999ffff0000
 ---> 5555cccc6666
Step 15/20 : FROM ${IMAGE}
 ---> 1111aaaa2222
Step 16/20 : USER root
 ---> Running in 8888eeee0000
 ---> 7777dddd8888
Successfully built 7777dddd8888
Successfully tagged code-mode-sandbox:p-1-build-x
";
        let mut stages = StageImages::default();
        for line in output.lines() {
            stages.line(line);
        }
        assert_eq!(stages.last_images(), ["5555cccc6666", "7777dddd8888"]);
        // A build that failed in its first stage's second step.
        let mut failed = StageImages::default();
        for line in output.lines().take(6) {
            failed.line(line);
        }
        assert_eq!(failed.last_images(), ["3333bbbb4444"]);
        // A lower-case from, and a stage with no step of its own.
        let mut bare = StageImages::default();
        bare.line("Step 1/1 : from base");
        bare.line(" ---> 1111aaaa2222");
        assert!(bare.last_images().is_empty());
    }
}
