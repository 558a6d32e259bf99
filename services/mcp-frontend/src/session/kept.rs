//! A session's kept container, as the frontend's client of it: the first
//! cell starts it in the queue group, later ones go to the runner holding
//! it; a container that is gone makes the next cell start fresh (a
//! session), or fail saying why (a stateless client's handle); the
//! session's end tells the runner to remove it.

use std::collections::VecDeque;

use code_mode_core::bus::BusError;
use code_mode_core::lease::Gone;
use code_mode_proto::{
    CellRan, CellReport, ErrorKind, Keep, KeptContainer, KeptEnd, KeptReply, KeptRequest, RunCell, subjects,
};

use super::cells::{At, cell_message, gone_error, send_fresh};
use super::{CellOrder, CellReply, CellSlot, Ran, SESSION_END_TIMEOUT};
use crate::auth::Identity;
use crate::handle::HandleError;
use crate::{CELL_MARGIN, FrontendError, KeepConfig, Shared};

/// A kept session's container as its session knows it.
#[derive(Debug, Clone, Default)]
pub(super) struct Container {
    /// Where it lives, once a cell made it.
    pub(super) at: Option<KeptContainer>,
    /// When its first cell started.
    pub(super) born: Option<tokio::time::Instant>,
    /// When its last cell ended.
    pub(super) last: Option<tokio::time::Instant>,
    /// Why the container that held the session's variables is gone, for the
    /// next cell to say.
    pub(super) lost: Option<String>,
}

/// The kept side of a session: its container and its cells in order.
#[derive(Default)]
pub(super) struct Kept {
    pub(super) container: Container,
    /// The task of the kept cell running now.
    pub(super) running: Option<tokio::task::Id>,
    /// Kept cells waiting for it, in order, each with its session slot.
    pub(super) waiting: VecDeque<(CellOrder, CellReply, CellSlot)>,
}

/// Tell the runner holding a kept container that its session ended (it
/// stops a cell still running there and removes the container). A runner
/// that cannot be told removes it after the session's idle time.
pub(super) async fn end_kept(shared: &Shared, session: &str, at: KeptContainer) {
    let Some(subject) = subjects::runner(&at.runner) else { return };
    let end = KeptRequest::End(KeptEnd { session: session.to_string(), key: at.key });
    match shared.bus.call::<_, KeptReply>(&subject, &end, SESSION_END_TIMEOUT + CELL_MARGIN).await {
        Ok(reply) => tracing::info!(%session, ?reply, "client session ended; its kept container was removed"),
        Err(e) => {
            tracing::info!(%session, error = %e, "client session ended, but the runner holding its kept container could not be told")
        }
    }
}

/// Run one cell of a stateless client's handle: in the kept container the
/// handle names (`handle`), or in a new kept container, whose handle the
/// result then carries. A container that is gone, or another identity's,
/// fails the cell saying so ([`HandleError`]): never a fresh container in
/// its place.
pub(super) async fn run_handle_cell(
    shared: &Shared,
    at: &At,
    identity: Option<&Identity>,
    order: &CellOrder,
    keep: KeepConfig,
    handle: Option<KeptContainer>,
) -> Result<Ran, FrontendError> {
    let config = &shared.config;
    if order.code.len() > config.max_code {
        return Err(FrontendError::CodeTooLarge { size: order.code.len(), max: config.max_code });
    }
    let _slot = shared.slots.acquire().await.expect("the semaphore is never closed");
    shared.catalog.refresh().await;
    let view = shared.catalog.current();
    let mut cell = cell_message(shared, at, identity, order, &view);
    let settings = Keep {
        key: None,
        idle_ms: keep.idle.as_millis() as u64,
        max_ms: keep.max.as_millis() as u64,
        most: Some(keep.most_handles),
    };
    let ran = match handle {
        None => {
            cell.keep = Some(settings);
            send_fresh(shared, &cell).await.map_err(|(e, _)| e)?
        }
        Some(container) => {
            cell.keep = Some(Keep { key: Some(container.key.clone()), ..settings });
            match send_to_runner(shared, &container, &cell).await {
                Ok(ran) => ran,
                Err(Next::Lost(lost)) => {
                    tracing::info!(cell = %cell.cell_id, ?lost, "a session handle's container cannot be used");
                    return Err(lost.handle_error().into());
                }
                Err(Next::Fail(e, _)) => return Err(e),
            }
        }
    };
    Ok(Ran { report: ran.report, kept: ran.kept })
}

/// Run one cell of a kept session: in its container when it has one, else
/// (or when that container is gone) in a new one, whose output then starts
/// by saying that earlier variables are gone. Returns the report and what
/// became of the container.
pub(super) async fn run_kept_cell(
    shared: &Shared,
    at_session: &At,
    identity: Option<&Identity>,
    order: &CellOrder,
    keep: KeepConfig,
    mut container: Container,
) -> (Result<CellReport, FrontendError>, Container) {
    let config = &shared.config;
    if order.code.len() > config.max_code {
        return (Err(FrontendError::CodeTooLarge { size: order.code.len(), max: config.max_code }), container);
    }
    let session = at_session.session.as_str();
    let _slot = shared.slots.acquire().await.expect("the semaphore is never closed");
    shared.catalog.refresh().await;
    let view = shared.catalog.current();
    let mut cell = cell_message(shared, at_session, identity, order, &view);
    let settings =
        Keep { key: None, idle_ms: keep.idle.as_millis() as u64, max_ms: keep.max.as_millis() as u64, most: None };
    let started = tokio::time::Instant::now();
    if let Some(at) = container.at.take() {
        cell.keep = Some(Keep { key: Some(at.key.clone()), ..settings.clone() });
        match send_to_runner(shared, &at, &cell).await {
            // Earlier variables may be gone though the container is known:
            // its first cell's report was lost (below).
            Ok(ran) => {
                let lost = container.lost.take();
                return finish_kept(ran, container, lost);
            }
            Err(Next::Lost(lost)) => {
                let reason = match lost {
                    Lost::Unknown | Lost::Expired(_) | Lost::Foreign => why_removed(&container, keep),
                    Lost::RunnerGone => GONE_RUNNER.to_string(),
                    Lost::NotHeld => "its sandbox-runner no longer holds it".to_string(),
                };
                tracing::info!(%session, %reason, "the kept session's container is gone: starting a fresh one");
                container.lost = Some(reason);
            }
            Err(Next::Fail(e, lost)) => {
                // The container may live on at its runner: keep pointing
                // there unless the runner itself was lost.
                if lost.is_none() {
                    container.at = Some(at);
                }
                container.lost = lost.or(container.lost);
                return (Err(e), container);
            }
        }
    }
    let lost = container.lost.take();
    cell.keep = Some(settings);
    let ran = match send_fresh(shared, &cell).await {
        Ok(ran) => ran,
        Err((e, kept)) => {
            // A lost report of the container's first cell: its runner's
            // lease named the container, which lives on there, so the next
            // cell runs in it rather than leave it until `--session-idle`.
            if let Some(at) = kept {
                tracing::info!(%session, runner = %at.runner, "the kept container of a cell whose report was lost lives on");
                container.at = Some(at);
                container.born = Some(started);
                container.last = Some(tokio::time::Instant::now());
            }
            container.lost = lost;
            return (Err(e), container);
        }
    };
    container.born = Some(started);
    finish_kept(ran, container, lost)
}

/// Why a runner no longer holds a kept container, as far as the session's
/// own clocks tell.
pub(super) fn why_removed(container: &Container, keep: KeepConfig) -> String {
    let now = tokio::time::Instant::now();
    if container.last.is_some_and(|last| now.duration_since(last) >= keep.idle) {
        format!("it was removed after {} s without a run (--session-idle)", keep.idle.as_secs())
    } else if container.born.is_some_and(|born| now.duration_since(born) >= keep.max) {
        format!("it reached the session's longest life, {} s (--session-max)", keep.max.as_secs())
    } else {
        "its sandbox-runner no longer holds it".into()
    }
}

/// What to do when a kept cell could not run in its container.
pub(super) enum Next {
    /// The container is not there: a session starts a fresh one, saying
    /// why the old one is gone; a handle's cell fails.
    Lost(Lost),
    /// Fail the cell (and, with a reason, forget the container).
    Fail(FrontendError, Option<String>),
}

/// Why a kept container could not be reached, as its runner told.
#[derive(Debug)]
pub(super) enum Lost {
    /// The runner holds nothing under the key, and knows of nothing.
    Unknown,
    /// The runner removed it a while ago, for this reason.
    Expired(String),
    /// The key names another session's container.
    Foreign,
    /// Nobody serves the runner's subject: it stopped or restarted.
    RunnerGone,
    /// The runner answered that it holds no such container.
    NotHeld,
}

/// The reason of [`Lost::RunnerGone`].
pub(super) const GONE_RUNNER: &str = "its sandbox-runner stopped or restarted";

impl Lost {
    /// What a stateless client is told about its handle.
    fn handle_error(self) -> HandleError {
        match self {
            Lost::Unknown => HandleError::Unknown,
            Lost::Expired(why) => HandleError::Ended { why },
            Lost::Foreign => HandleError::Foreign,
            Lost::RunnerGone => HandleError::Ended { why: GONE_RUNNER.into() },
            Lost::NotHeld => HandleError::Ended { why: "its sandbox-runner no longer holds it".into() },
        }
    }
}

/// Send a kept session's cell to the runner holding its container.
pub(super) async fn send_to_runner(shared: &Shared, at: &KeptContainer, cell: &RunCell) -> Result<CellRan, Next> {
    let Some(subject) = subjects::runner(&at.runner) else { return Err(Next::Lost(Lost::RunnerGone)) };
    let wait = shared.config.deadline + CELL_MARGIN;
    // The runner holds the cell's lease while it runs, as for a fresh cell:
    // its death is seen within seconds, not at the deadline.
    let request = KeptRequest::Run(cell.clone());
    let call = shared.bus.call::<_, KeptReply>(&subject, &request, wait);
    let answer = match code_mode_core::lease::watched(&shared.bus, &cell.cell_id, call).await {
        Ok(answer) => answer,
        // Only the report was lost: the container lives on at its runner
        // (or, stopped, was removed: the next cell learns it from there).
        Err(gone @ Gone::ReportLost { .. }) => return Err(Next::Fail(gone_error(&cell.cell_id, gone), None)),
        Err(gone @ Gone::Silent(_)) => {
            return Err(Next::Fail(
                gone_error(&cell.cell_id, gone),
                Some("its sandbox-runner was lost during an earlier run".into()),
            ));
        }
    };
    match answer {
        Ok(KeptReply::Ran(ran)) => Ok(ran),
        Ok(KeptReply::Ended { .. }) => Err(Next::Lost(Lost::NotHeld)),
        Err(BusError::Remote { subject, error }) => match error.kind {
            ErrorKind::KeptLost => Err(Next::Lost(Lost::Unknown)),
            ErrorKind::KeptExpired => {
                // The runner's message ends with why.
                let why = error.message.split_once(": ").map_or(error.message.as_str(), |(_, why)| why);
                Err(Next::Lost(Lost::Expired(why.chars().take(200).collect())))
            }
            ErrorKind::KeptForeign => Err(Next::Lost(Lost::Foreign)),
            ErrorKind::KeptBusy => Err(Next::Fail(HandleError::Busy.into(), None)),
            _ => Err(Next::Fail(BusError::Remote { subject, error }.into(), None)),
        },
        Err(BusError::NoResponders { .. }) => Err(Next::Lost(Lost::RunnerGone)),
        Err(BusError::Timeout { .. } | BusError::Dropped { .. }) => {
            tracing::warn!(cell = %cell.cell_id, "the sandbox-runner holding the kept container was lost");
            Err(Next::Fail(
                FrontendError::RunnerLost { waited: wait, margin: CELL_MARGIN },
                Some("its sandbox-runner was lost during an earlier run".into()),
            ))
        }
        Err(e) => Err(Next::Fail(e.into(), None)),
    }
}

/// The report of a kept cell (its output led by `lost`, when the session's
/// earlier variables are gone) and what became of the container.
pub(super) fn finish_kept(
    ran: CellRan,
    mut container: Container,
    lost: Option<String>,
) -> (Result<CellReport, FrontendError>, Container) {
    let mut report = ran.report;
    if let Some(reason) = lost {
        report.stdout = format!("{}\n{}", lost_line(&reason), report.stdout);
    }
    container.last = Some(tokio::time::Instant::now());
    container.lost = None;
    container.at = ran.kept;
    if container.at.is_none() {
        // The runner removed the container at the end of this cell.
        container.born = None;
        container.lost = Some(if report.stopped {
            "the previous run was stopped, which removed it".into()
        } else {
            "it reached the session's longest life (--session-max)".into()
        });
    }
    (Ok(report), container)
}

/// The line that leads the output of a kept session's cell whose earlier
/// variables are gone.
pub(super) fn lost_line(reason: &str) -> String {
    let why = if reason.is_empty() { String::new() } else { format!(" ({reason})") };
    format!(
        "code-mode: the session's sandbox is gone{why}: this run starts in a fresh one, and the variables, imports \
         and files of earlier runs are gone."
    )
}
