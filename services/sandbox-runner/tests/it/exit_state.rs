//! How a sandbox container's end is read, against the real Docker engine
//! and the real image: an out-of-memory kill is told from a kill from
//! outside (both exit 137), through the engine's state and, since Docker
//! 20.10 can log the `oom` event after the exit and then never mark the
//! state, through its event log.

use std::time::{Duration, Instant};

use bollard::Docker;
use bollard::query_parameters::KillContainerOptions;
use code_mode_sandbox_runner::container::{Container, Lockdown, OOM_EVENT_GRACE, Runtime, check_runtime};

use crate::support;

/// Docker with `runtime` registered and the image, or `None` (after
/// `unavailable`, which fails the test under CI) without them.
async fn docker(runtime: Runtime) -> Option<Docker> {
    let docker = support::docker_with_image().await?;
    if let Err(e) = check_runtime(&docker, runtime).await {
        code_mode_core::testing::unavailable(&format!("the {runtime} runtime"), &e.to_string());
        return None;
    }
    Some(docker)
}

/// Start `python3 -c code` under the full lockdown of `runtime`.
async fn start(docker: &Docker, runtime: Runtime, code: &str) -> Container {
    let entrypoint = vec!["python3".to_string(), "-c".to_string(), code.to_string()];
    let lockdown = Lockdown::for_runtime(runtime);
    let (container, _output, _input) =
        Container::start_with(docker, &lockdown, "exit-state-test", Some(entrypoint)).await.expect("it starts");
    container
}

/// Wait until the container has stopped; its exit state.
async fn stopped(container: &Container) -> (i64, bool) {
    let give_up = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(state) = container.exit_state().await {
            return state;
        }
        assert!(Instant::now() < give_up, "the container never stopped");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn an_allocation_past_the_memory_limit_reads_as_out_of_memory_in_the_state_and_the_event_log(runtime: Runtime) {
    let Some(docker) = docker(runtime).await else { return };
    // Multiplying a str writes every byte: the pages are really used.
    let container = start(&docker, runtime, "x = 'x' * (1 << 30)").await;
    assert_eq!(stopped(&container).await, (137, true), "killed for memory");
    assert!(container.oom_event_logged().await, "the engine's event log has the oom event the state fell back on");
    container.remove().await;
}

async fn a_kill_from_outside_is_not_taken_for_out_of_memory_and_waits_at_most_the_grace(runtime: Runtime) {
    let Some(docker) = docker(runtime).await else { return };
    let container = start(&docker, runtime, "import time\ntime.sleep(60)").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    docker.kill_container(container.id(), None::<KillContainerOptions>).await.expect("the kill is taken");
    let read = Instant::now();
    let state = stopped(&container).await;
    let took = read.elapsed();
    assert_eq!(state, (137, false), "a SIGKILL from outside is a plain kill");
    assert!(took < OOM_EVENT_GRACE + Duration::from_secs(3), "reading the end took {took:?}");
    assert!(!container.oom_event_logged().await);
    container.remove().await;
}

mod runc {
    use super::*;

    #[tokio::test]
    async fn an_allocation_past_the_memory_limit_reads_as_out_of_memory_in_the_state_and_the_event_log() {
        super::an_allocation_past_the_memory_limit_reads_as_out_of_memory_in_the_state_and_the_event_log(Runtime::Runc)
            .await
    }

    #[tokio::test]
    async fn a_kill_from_outside_is_not_taken_for_out_of_memory_and_waits_at_most_the_grace() {
        super::a_kill_from_outside_is_not_taken_for_out_of_memory_and_waits_at_most_the_grace(Runtime::Runc).await
    }
}

mod runsc {
    use super::*;

    #[tokio::test]
    async fn an_allocation_past_the_memory_limit_reads_as_out_of_memory_in_the_state_and_the_event_log() {
        super::an_allocation_past_the_memory_limit_reads_as_out_of_memory_in_the_state_and_the_event_log(Runtime::Runsc)
            .await
    }

    #[tokio::test]
    async fn a_kill_from_outside_is_not_taken_for_out_of_memory_and_waits_at_most_the_grace() {
        super::a_kill_from_outside_is_not_taken_for_out_of_memory_and_waits_at_most_the_grace(Runtime::Runsc).await
    }
}
