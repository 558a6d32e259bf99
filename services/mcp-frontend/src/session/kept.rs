//! A session's kept container, as the frontend's client of it: the first
//! cell starts it in the queue group, later ones go to the runner holding
//! it; a container that is gone makes the next cell start fresh (a
//! session), or fail saying why (a stateless client's handle); the
//! session's end tells the runner to remove it.

use std::collections::VecDeque;

use code_mode_core::bus::BusError;
use code_mode_core::defaults::HOP_MARGIN;
use code_mode_core::lease::Gone;
use code_mode_proto::{
    CellRan, CellReport, ErrorKind, Keep, KeptContainer, KeptEnd, KeptReply, KeptRequest, RunCell, subjects,
};

use super::cells::{At, gone_error, prepare, send_fresh};
use super::{CellOrder, CellReply, CellSlot, Ran, SESSION_END_TIMEOUT};
use crate::auth::Identity;
use crate::handle::HandleError;
use crate::{FrontendError, KeepConfig, Shared};

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
    match shared.bus.call::<_, KeptReply>(&subject, &end, SESSION_END_TIMEOUT + HOP_MARGIN).await {
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
    let (_slot, staged, mut cell) = prepare(shared, at, identity, order).await?;
    let ran = send_handle_cell(shared, &mut cell, order, keep, handle).await;
    staged.purge().await;
    ran
}

/// Send a stateless client's prepared `cell` (see [`run_handle_cell`]).
async fn send_handle_cell(
    shared: &Shared,
    cell: &mut RunCell,
    order: &CellOrder,
    keep: KeepConfig,
    handle: Option<KeptContainer>,
) -> Result<Ran, FrontendError> {
    let settings = Keep {
        key: None,
        idle_ms: keep.idle.as_millis() as u64,
        max_ms: keep.max.as_millis() as u64,
        most: Some(keep.most_handles),
    };
    let ran = match handle {
        None => {
            cell.keep = Some(settings);
            send_fresh(shared, cell, order.route.as_ref()).await.map_err(|(e, _)| e)?
        }
        Some(container) => {
            cell.keep = Some(Keep { key: Some(container.key.clone()), ..settings });
            match send_to_runner(shared, &container, cell, order.route.as_ref()).await {
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
    container: Container,
) -> (Result<CellReport, FrontendError>, Container) {
    let (_slot, staged, mut cell) = match prepare(shared, at_session, identity, order).await {
        Ok(prepared) => prepared,
        Err(e) => return (Err(e), container),
    };
    let ran = send_kept_cell(shared, &at_session.session, &mut cell, order, keep, container).await;
    staged.purge().await;
    ran
}

/// Send a kept session's prepared `cell` (see [`run_kept_cell`]).
async fn send_kept_cell(
    shared: &Shared,
    session: &str,
    cell: &mut RunCell,
    order: &CellOrder,
    keep: KeepConfig,
    mut container: Container,
) -> (Result<CellReport, FrontendError>, Container) {
    let settings =
        Keep { key: None, idle_ms: keep.idle.as_millis() as u64, max_ms: keep.max.as_millis() as u64, most: None };
    let started = tokio::time::Instant::now();
    if let Some(at) = container.at.take() {
        cell.keep = Some(Keep { key: Some(at.key.clone()), ..settings.clone() });
        match send_to_runner(shared, &at, cell, order.route.as_ref()).await {
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
    let ran = match send_fresh(shared, cell, order.route.as_ref()).await {
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
pub(super) async fn send_to_runner(
    shared: &Shared,
    at: &KeptContainer,
    cell: &RunCell,
    route: Option<&tokio::sync::mpsc::Sender<crate::questions::Question>>,
) -> Result<CellRan, Next> {
    let Some(subject) = subjects::runner(&at.runner) else { return Err(Next::Lost(Lost::RunnerGone)) };
    let held = std::time::Duration::from_millis(cell.limits.approval_timeout_ms);
    let wait = std::time::Duration::from_millis(cell.limits.deadline_ms) + held + HOP_MARGIN;
    // The runner holds the cell's lease while it runs, as for a fresh cell:
    // its death is seen within seconds, not at the deadline.
    let request = KeptRequest::Run(cell.clone());
    let call = shared.bus.call::<_, KeptReply>(&subject, &request, wait);
    let heard = super::cells::heard_by(shared, route, &cell.cell_id);
    let answer = match code_mode_core::lease::watched_with(&shared.bus, &cell.cell_id, call, heard).await {
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
                FrontendError::RunnerLost { waited: wait, margin: HOP_MARGIN },
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use code_mode_core::bus::Bus;
    use code_mode_proto::{Catalog, CellReport, ErrorKind, WireError, queue_groups};
    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::FrontendFactory;

    const RUNNER: &str = "0123456789abcdef0123456789abcdef";
    const KEY: &str = "fedcba9876543210fedcba9876543210";

    fn at() -> KeptContainer {
        KeptContainer { runner: RUNNER.into(), key: KEY.into() }
    }

    fn order(code: &str) -> CellOrder {
        CellOrder {
            cell_id: uuid::Uuid::new_v4().to_string(),
            code: code.into(),
            inputs: Vec::new(),
            route: None,
            options: Default::default(),
            keep: super::super::CellKeep::Session,
            link: None,
            cancel: Default::default(),
        }
    }

    /// A frontend's shared state over an in-process bus with a bridge (an
    /// empty catalog) and a runners' queue group that counts the fresh
    /// cells it is sent and answers each with a new kept container.
    async fn frontend(bus: &Bus, cancel: &CancellationToken) -> (Arc<Shared>, Arc<AtomicUsize>) {
        let catalog = Catalog { max_calls: 10, call_timeout_ms: 1000, ..crate::fake_bridge::catalog("f", &[]) };
        crate::fake_bridge::FakeBridge::serve(bus, cancel, catalog).await;
        let fresh = Arc::new(AtomicUsize::new(0));
        let count = fresh.clone();
        bus.serve(subjects::CELL_RUN, queue_groups::SANDBOX_RUNNER, cancel.clone(), move |cell: RunCell| {
            count.fetch_add(1, Ordering::SeqCst);
            async move {
                let report = CellReport { stdout: cell.code, ..CellReport::default() };
                Ok(CellRan { report, kept: Some(KeptContainer { runner: RUNNER.into(), key: "new0key".into() }) })
            }
        })
        .await
        .unwrap();
        let factory = FrontendFactory::connect(bus.clone(), Default::default()).await.unwrap();
        (factory.shared.clone(), fresh)
    }

    /// The runner holding the kept container answers every cell with `error`.
    async fn runner_says(bus: &Bus, cancel: &CancellationToken, kind: ErrorKind, message: &str) {
        let message = message.to_string();
        let subject = subjects::runner(RUNNER).unwrap();
        bus.serve(&subject, queue_groups::SANDBOX_RUNNER, cancel.clone(), move |_: KeptRequest| {
            let error = WireError { kind: kind.clone(), message: message.clone() };
            async move { Err::<KeptReply, _>(error) }
        })
        .await
        .unwrap();
    }

    fn scope() -> At {
        At { session: code_mode_proto::subjects::stateless_scope(Some("alice")), asker: Some("s1".into()) }
    }

    #[tokio::test]
    async fn a_runners_refusal_of_a_handle_is_the_handle_error_and_never_a_fresh_container() {
        let expired = "the kept container under that key was removed: no run within its idle time (--session-idle)";
        let cases = [
            (ErrorKind::KeptExpired, expired, "has ended (no run within its idle time (--session-idle))"),
            (ErrorKind::KeptForeign, "another session's", "belongs to another client identity"),
            (ErrorKind::KeptLost, "nothing under that key", "no sandbox of this server is known"),
            (ErrorKind::KeptBusy, "a cell runs", "a run of this session is running already"),
        ];
        for (kind, said, expected) in cases {
            let (bus, cancel) = (Bus::in_process(), CancellationToken::new());
            let (shared, fresh) = frontend(&bus, &cancel).await;
            runner_says(&bus, &cancel, kind.clone(), said).await;
            let ran = run_handle_cell(&shared, &scope(), None, &order("x"), KeepConfig::default(), Some(at())).await;
            let error = ran.expect_err("a refused handle fails the cell").to_string();
            assert!(error.contains(expected), "{kind:?}: {error}");
            assert_eq!(fresh.load(Ordering::SeqCst), 0, "{kind:?}: no fresh container ran instead");
            cancel.cancel();
        }
        // No runner serves the handle's runner id: it stopped or restarted.
        let (bus, cancel) = (Bus::in_process(), CancellationToken::new());
        let (shared, fresh) = frontend(&bus, &cancel).await;
        let ran = run_handle_cell(&shared, &scope(), None, &order("x"), KeepConfig::default(), Some(at())).await;
        let error = ran.expect_err("a handle of a gone runner fails").to_string();
        assert!(error.contains("its sandbox-runner stopped or restarted"), "{error}");
        assert_eq!(fresh.load(Ordering::SeqCst), 0);
        // Without a handle (`session: "new"`) a kept container starts, and
        // the result names it.
        let ran = run_handle_cell(&shared, &scope(), None, &order("y = 1"), KeepConfig::default(), None).await;
        let ran = ran.expect("a new kept container");
        assert_eq!((ran.report.stdout.as_str(), ran.kept.map(|k| k.key)), ("y = 1", Some("new0key".to_string())));
        cancel.cancel();
    }

    #[tokio::test]
    async fn a_sessions_container_gone_at_its_runner_starts_a_fresh_one_whose_output_says_why() {
        let (bus, cancel) = (Bus::in_process(), CancellationToken::new());
        let (shared, fresh) = frontend(&bus, &cancel).await;
        runner_says(&bus, &cancel, ErrorKind::KeptLost, "nothing under that key").await;
        let session = At { session: "6f1c0d3e-session".into(), asker: None };
        let container = Container { at: Some(at()), born: None, last: None, lost: None };
        let keep = KeepConfig::default();
        let (report, container) = run_kept_cell(&shared, &session, None, &order("print(1)"), keep, container).await;
        let report = report.expect("the cell runs in a fresh container");
        assert!(report.stdout.starts_with("code-mode: the session's sandbox is gone"), "{}", report.stdout);
        assert_eq!(fresh.load(Ordering::SeqCst), 1);
        assert_eq!(container.at.map(|a| a.key), Some("new0key".to_string()), "the next cell goes to the new one");
        cancel.cancel();
    }
}
