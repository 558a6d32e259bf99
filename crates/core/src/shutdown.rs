//! The root cancellation token of a process.
//!
//! The first SIGINT or SIGTERM cancels the token: services stop taking work,
//! drain what is in flight and remove their containers. A second signal exits
//! at once.

use tokio_util::sync::CancellationToken;

/// A token cancelled on the first SIGINT/SIGTERM; the second exits the process.
pub fn on_signal() -> CancellationToken {
    let token = CancellationToken::new();
    let root = token.clone();
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("signal received: draining (send it again to exit at once)");
        root.cancel();
        wait_for_signal().await;
        tracing::warn!("second signal: exiting now");
        std::process::exit(130);
    });
    token
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = match signal(SignalKind::terminate()) {
            Ok(s) => s,
            Err(_) => return std::future::pending().await,
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
