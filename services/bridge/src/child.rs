//! The transport of a wrapped stdio server, whose close is short.
//!
//! rmcp's child-process transport closes the server's input, then waits
//! 3 s for it to exit, sends SIGTERM, waits 3 s more and kills it. A
//! server that does not exit when its input closes (server-everything is
//! one) then held every shutdown for seconds: a one-shot `code-mode run`
//! ended 2 s after its cell, when the session's close timeout killed it.
//! [`ChildTransport`] keeps rmcp's order with short bounds: the input is
//! closed, and a server still running [`INPUT_GRACE`] later gets SIGTERM,
//! one still running [`TERM_GRACE`] after that SIGKILL. The process is
//! reaped in every case (rmcp's shutdown still waits on it).

use std::future::Future;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use rmcp::RoleClient;
use rmcp::transport::{TokioChildProcess, Transport};

/// How long a server gets to exit once its input is closed (servers that
/// end on it do so in milliseconds).
pub const INPUT_GRACE: Duration = Duration::from_millis(250);
/// How long a server gets to exit after SIGTERM before it is killed.
pub const TERM_GRACE: Duration = Duration::from_millis(750);

/// A wrapped server's child process as an rmcp transport (see the module).
pub(crate) struct ChildTransport {
    inner: TokioChildProcess,
}

impl ChildTransport {
    pub(crate) fn new(inner: TokioChildProcess) -> Self {
        Self { inner }
    }
}

/// Send `signal` to `pid`, which has not been reaped yet (so it is still
/// the server's); a failure is only logged.
fn signal(pid: Option<u32>, signal: Signal) {
    let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) else { return };
    if let Err(e) = kill(Pid::from_raw(pid), signal) {
        tracing::debug!(pid, %signal, error = %e, "signalling the wrapped server failed");
    }
}

impl Transport<RoleClient> for ChildTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: rmcp::service::TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<rmcp::service::RxJsonRpcMessage<RoleClient>>> + Send {
        self.inner.receive()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        let pid = self.inner.id();
        async move {
            // rmcp's shutdown closes the input and reaps the process when it
            // exits; while it is pending the process is not reaped, so `pid`
            // still names it when signalled below.
            let shutdown = self.inner.graceful_shutdown();
            tokio::pin!(shutdown);
            tokio::select! {
                biased;
                done = &mut shutdown => return done,
                _ = tokio::time::sleep(INPUT_GRACE) => {}
            }
            tracing::debug!(?pid, "the wrapped server did not exit when its input closed: SIGTERM");
            signal(pid, Signal::SIGTERM);
            tokio::select! {
                biased;
                done = &mut shutdown => return done,
                _ = tokio::time::sleep(TERM_GRACE) => {}
            }
            tracing::warn!(?pid, "the wrapped server did not exit on SIGTERM: killed");
            signal(pid, Signal::SIGKILL);
            shutdown.await
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};
    use std::process::Stdio;
    use std::time::Instant;

    use super::*;

    /// A transport to `python3 -c script` (a stand-in process: close only
    /// looks at whether and how it exits), once the script has written
    /// `dir/ready` (after setting up its signal handlers).
    async fn python(dir: &Path, script: &str) -> (ChildTransport, u32) {
        let ready = dir.join("ready");
        let script = format!("{script}\nopen({:?}, 'w').write('ready')\n{}", ready.display().to_string(), WAIT);
        let mut cmd = tokio::process::Command::new("python3");
        cmd.args(["-c", &script]).kill_on_drop(true);
        let (inner, _) = TokioChildProcess::builder(cmd).stderr(Stdio::null()).spawn().unwrap();
        let pid = inner.id().unwrap();
        let until = Instant::now() + Duration::from_secs(10);
        while !ready.exists() {
            assert!(Instant::now() < until, "the stand-in process never got ready");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        (ChildTransport::new(inner), pid)
    }

    /// What each stand-in does once ready: read its input to the end, say
    /// so in `dir/ended`, then (unless told to exit) keep running.
    const WAIT: &str = "import sys, time, os\nsys.stdin.read()\nopen(os.path.join(DIR, 'ended'), 'w').write('EOF')\n\
                        if EXIT_ON_EOF: sys.exit(0)\nwhile True: time.sleep(1)\n";

    fn script(dir: &Path, exit_on_eof: bool, on_term: &str) -> String {
        format!(
            "import signal, sys, os\nDIR = {:?}\nEXIT_ON_EOF = {}\n{on_term}",
            dir.display().to_string(),
            if exit_on_eof { "True" } else { "False" }
        )
    }

    fn alive(pid: u32) -> bool {
        Path::new(&format!("/proc/{pid}")).exists()
    }

    fn read(dir: &Path, name: &str) -> Option<String> {
        std::fs::read_to_string(dir.join(name)).ok()
    }

    fn dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("code-mode-child-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// The session's own close timeout (2 s), within which the old
    /// transport had not yet sent SIGTERM.
    const SESSION_CLOSE: Duration = Duration::from_secs(2);

    const RECORD_TERM: &str =
        "signal.signal(signal.SIGTERM, lambda *_: (open(os.path.join(DIR, 'term'), 'w').write('TERM'), os._exit(0)))";

    #[tokio::test]
    async fn a_server_that_ignores_its_closed_input_gets_sigterm_before_the_session_gives_up_on_it() {
        let dir = dir();
        let (mut transport, pid) = python(&dir, &script(&dir, false, RECORD_TERM)).await;
        tokio::time::timeout(SESSION_CLOSE, transport.close())
            .await
            .expect("closed within the session's close timeout")
            .unwrap();
        assert_eq!(read(&dir, "ended").as_deref(), Some("EOF"), "its input was closed first");
        assert_eq!(read(&dir, "term").as_deref(), Some("TERM"), "then it was asked to end by SIGTERM, not killed");
        assert!(!alive(pid), "reaped");
    }

    #[tokio::test]
    async fn a_server_that_ignores_sigterm_too_is_killed_and_reaped_within_the_bound() {
        let dir = dir();
        let ignore = "signal.signal(signal.SIGTERM, signal.SIG_IGN)";
        let (mut transport, pid) = python(&dir, &script(&dir, false, ignore)).await;
        let started = Instant::now();
        tokio::time::timeout(SESSION_CLOSE, transport.close()).await.expect("closed within the bound").unwrap();
        assert!(started.elapsed() >= INPUT_GRACE + TERM_GRACE, "SIGKILL only after both graces");
        assert!(!alive(pid), "killed and reaped");
    }

    #[tokio::test]
    async fn a_server_that_exits_on_its_closed_input_gets_no_signal() {
        let dir = dir();
        let (mut transport, pid) = python(&dir, &script(&dir, true, RECORD_TERM)).await;
        transport.close().await.unwrap();
        assert_eq!(read(&dir, "ended").as_deref(), Some("EOF"));
        assert_eq!(read(&dir, "term"), None, "no SIGTERM");
        assert!(!alive(pid));
    }
}
