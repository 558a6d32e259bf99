//! The notes a wrapped server sent on one session, numbered in the order
//! they arrived, so that a call's result goes to its client only after the
//! notes the server sent before it (its last progress note, a log line of
//! the call, the withdrawal of a question it asked) have been relayed.
//!
//! rmcp hands each notification to a task of its own, so by the time a
//! call's result is read the handler may not even have started on a note
//! that arrived before it. The transport itself is the one place that sees
//! every message in the order the server sent it: [`Noting`] wraps a
//! session's transport and, as a progress or log notification passes, gives
//! it a number and a [`NoteOnItsWay`] that rides in the notification's
//! extensions into the handler's context and is dropped with it, once the
//! handler is done. A call that has its result asks [`Arrivals::settled`]
//! for every note numbered up to the last one that had arrived: the wait
//! is exact (no fixed grace), usually nothing, and bounded.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{GetExtensions, JsonRpcMessage, ServerNotification};
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::sync::Notify;

/// How long a call's result waits at most for its notes to be relayed.
pub(crate) const NOTE_SETTLE: Duration = Duration::from_secs(1);

/// The notes of one session: how many arrived, and which are still on
/// their way. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub(crate) struct Arrivals {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    state: std::sync::Mutex<State>,
    relayed: Notify,
}

#[derive(Debug, Default)]
struct State {
    /// The number of the last note that arrived.
    last: u64,
    /// Those not yet relayed.
    on_their_way: BTreeSet<u64>,
}

impl Arrivals {
    /// A note arrived: it is on its way until the returned value drops.
    pub(crate) fn arrived(&self) -> Arc<NoteOnItsWay> {
        let mut state = code_mode_core::sync::lock(&self.inner.state);
        state.last += 1;
        let number = state.last;
        state.on_their_way.insert(number);
        Arc::new(NoteOnItsWay { arrivals: self.clone(), number })
    }

    /// The number of the last note that arrived so far.
    pub(crate) fn last(&self) -> u64 {
        code_mode_core::sync::lock(&self.inner.state).last
    }

    /// Wait until every note numbered up to `upto` has been relayed, or
    /// [`NOTE_SETTLE`] has passed (a note stuck on its way holds a result
    /// no longer).
    pub(crate) async fn settled(&self, upto: u64) {
        let deadline = tokio::time::Instant::now() + NOTE_SETTLE;
        loop {
            // Created before the check: a note relayed in between still wakes it.
            let relayed = self.inner.relayed.notified();
            let earliest = code_mode_core::sync::lock(&self.inner.state).on_their_way.first().copied();
            if earliest.is_none_or(|earliest| earliest > upto) {
                return;
            }
            if tokio::time::timeout_at(deadline, relayed).await.is_err() {
                return;
            }
        }
    }
}

/// One note on its way to its client; relayed when dropped.
#[derive(Debug)]
pub(crate) struct NoteOnItsWay {
    arrivals: Arrivals,
    number: u64,
}

impl Drop for NoteOnItsWay {
    fn drop(&mut self) {
        code_mode_core::sync::lock(&self.arrivals.inner.state).on_their_way.remove(&self.number);
        self.arrivals.inner.relayed.notify_waiters();
    }
}

/// A session's transport that numbers the notes passing it
/// ([`Arrivals::arrived`]): the progress and log notifications the relay
/// passes on, and a server's withdrawal of its own question
/// (`notifications/cancelled`), which counts as relayed once the client
/// was told (see `Relay::on_cancelled`); everything else goes through
/// untouched.
pub(crate) struct Noting<T> {
    inner: T,
    arrivals: Arrivals,
}

impl<T> Noting<T> {
    pub(crate) fn new(inner: T, arrivals: Arrivals) -> Self {
        Self { inner, arrivals }
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for Noting<T> {
    type Error = T::Error;

    fn name() -> std::borrow::Cow<'static, str> {
        T::name()
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        let arrivals = self.arrivals.clone();
        let next = self.inner.receive();
        async move {
            let mut message = next.await?;
            if let JsonRpcMessage::Notification(note) = &mut message
                && matches!(
                    note.notification,
                    ServerNotification::ProgressNotification(_)
                        | ServerNotification::LoggingMessageNotification(_)
                        | ServerNotification::CancelledNotification(_)
                )
            {
                note.notification.extensions_mut().insert(arrivals.arrived());
            }
            Some(message)
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

#[cfg(test)]
mod tests {
    //! Under paused time: each wait ends as soon as what it waits for
    //! happens, and is bounded.

    use super::*;
    use tokio::time::Instant;

    #[tokio::test(start_paused = true)]
    async fn a_result_waits_for_the_notes_that_arrived_before_it_and_only_until_the_last_is_relayed() {
        let arrivals = Arrivals::default();
        let first = arrivals.arrived();
        let second = arrivals.arrived();
        let upto = arrivals.last();
        // A note after the result is not waited for.
        let _later = arrivals.arrived();
        let relaying = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            drop(second);
            tokio::time::sleep(Duration::from_millis(200)).await;
            drop(first);
        });
        let started = Instant::now();
        arrivals.settled(upto).await;
        assert_eq!(started.elapsed(), Duration::from_millis(300), "it returned as the earlier notes were relayed");
        relaying.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_result_with_no_note_before_it_waits_not_at_all_and_a_stuck_note_at_most_the_settle_time() {
        let arrivals = Arrivals::default();
        let started = Instant::now();
        arrivals.settled(arrivals.last()).await;
        assert_eq!(started.elapsed(), Duration::ZERO, "no fixed grace");
        let _stuck = arrivals.arrived();
        let started = Instant::now();
        arrivals.settled(arrivals.last()).await;
        assert_eq!(started.elapsed(), NOTE_SETTLE, "a note never relayed holds the result no longer");
    }
}
