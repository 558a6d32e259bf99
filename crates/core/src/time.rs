//! Waiting on a deadline that may not exist: an actor's `select!` loop
//! with optional timers (the next expiry of a table, a retry after a
//! failure) waits on each through [`sleep_until`], which never fires for
//! `None`.

use tokio::time::Instant;

/// Sleep until `at`; forever when there is no deadline.
pub async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_deadline_fires_at_its_instant_and_none_never_fires() {
        let started = Instant::now();
        sleep_until(Some(started + Duration::from_secs(3))).await;
        assert_eq!(started.elapsed(), Duration::from_secs(3));
        let never = tokio::time::timeout(Duration::from_secs(3600), sleep_until(None)).await;
        assert!(never.is_err(), "no deadline: it still sleeps an hour later");
    }
}
