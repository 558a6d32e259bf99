//! Who owns which MCP session, and how many sessions each identity holds.
//!
//! One actor per HTTP server owns the map from an MCP session id
//! (`Mcp-Session-Id`) to the identity that opened it, and the count of open
//! sessions, in all and per identity. The HTTP gate asks it on every
//! request naming a session (so a request with another identity's token is
//! refused before the transport sees it, and the session is not touched),
//! and before a request that may open one (a `POST` without a session id:
//! an `initialize`, or a stateless client's call, which is a session of its
//! own for as long as it runs).
//!
//! A granted place is a [`Lease`]: the gate binds it to the session id the
//! transport answers with, and hands it to the session's actor, which keeps
//! it for its life. The place is given back when the last clone of the
//! lease is dropped (the session actor ended: the session was closed,
//! timed out, or the stateless request and its cells are done). Leases are
//! given back over an unbounded channel because a `Drop` cannot wait; it
//! holds at most one message per lease granted, and at most
//! `--max-sessions` leases exist.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use super::Identity;

/// Requests that may wait at the actor.
const REQUESTS: usize = 256;

/// How many sessions may be open (`None`: no limit).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionLimits {
    /// Across every identity (`--max-sessions`).
    pub max_sessions: Option<usize>,
    /// Per identity (`--max-sessions-per-identity`).
    pub max_per_identity: Option<usize>,
}

/// Why a new session was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitError {
    /// The server holds its most sessions.
    #[error("the server already holds its most sessions ({max}, --max-sessions): close one or try again later")]
    Sessions {
        /// The limit.
        max: usize,
    },
    /// This identity holds its most sessions.
    #[error(
        "this identity already holds its most sessions ({max}, --max-sessions-per-identity): close one of its \
         sessions first"
    )]
    PerIdentity {
        /// The limit.
        max: usize,
    },
}

/// A place among the open sessions; given back when the last clone is
/// dropped.
#[derive(Clone, Debug)]
pub struct Lease(Arc<LeaseInner>);

#[derive(Debug)]
struct LeaseInner {
    id: u64,
    release: mpsc::UnboundedSender<u64>,
}

impl Drop for LeaseInner {
    fn drop(&mut self) {
        let _ = self.release.send(self.id);
    }
}

enum Command {
    Reserve {
        identity: Option<Identity>,
        reply: oneshot::Sender<Result<Lease, LimitError>>,
    },
    Bind {
        lease: u64,
        session: String,
    },
    Owner {
        session: String,
        reply: oneshot::Sender<Option<Option<Identity>>>,
    },
    #[cfg(test)]
    Count {
        reply: oneshot::Sender<usize>,
    },
}

/// A handle on the owners actor. Cheap to clone.
#[derive(Clone, Debug)]
pub(crate) struct Owners {
    requests: mpsc::Sender<Command>,
}

struct Held {
    identity: Option<Identity>,
    session: Option<String>,
}

impl Owners {
    /// Start the actor; it ends with its last handle.
    pub fn start(limits: SessionLimits) -> Owners {
        let (requests, inbox) = mpsc::channel(REQUESTS);
        let (release, released) = mpsc::unbounded_channel();
        tokio::spawn(run(limits, inbox, release, released));
        Owners { requests }
    }

    /// A place for a new session of `identity`, within the limits.
    pub async fn reserve(&self, identity: Option<Identity>) -> Result<Lease, LimitError> {
        let (reply, answer) = oneshot::channel();
        if self.requests.send(Command::Reserve { identity, reply }).await.is_err() {
            return Err(LimitError::Sessions { max: 0 });
        }
        answer.await.unwrap_or(Err(LimitError::Sessions { max: 0 }))
    }

    /// The transport answered `lease`'s request with session id `session`.
    pub async fn bind(&self, lease: &Lease, session: String) {
        let _ = self.requests.send(Command::Bind { lease: lease.0.id, session }).await;
    }

    /// Who opened `session`: `None` when no open session has that id
    /// (`Some(None)`: opened without authentication).
    pub async fn owner(&self, session: &str) -> Option<Option<Identity>> {
        let (reply, answer) = oneshot::channel();
        self.requests.send(Command::Owner { session: session.to_string(), reply }).await.ok()?;
        answer.await.ok().flatten()
    }

    /// Sessions open now (for tests).
    #[cfg(test)]
    pub async fn count(&self) -> usize {
        let (reply, answer) = oneshot::channel();
        if self.requests.send(Command::Count { reply }).await.is_err() {
            return 0;
        }
        answer.await.unwrap_or(0)
    }
}

async fn run(
    limits: SessionLimits,
    mut inbox: mpsc::Receiver<Command>,
    release: mpsc::UnboundedSender<u64>,
    mut released: mpsc::UnboundedReceiver<u64>,
) {
    let mut held: HashMap<u64, Held> = HashMap::new();
    let mut sessions: HashMap<String, u64> = HashMap::new();
    let mut per_identity: HashMap<Option<Identity>, usize> = HashMap::new();
    let mut next = 0u64;
    loop {
        tokio::select! {
            // Give places back first, so a closed session's place is free
            // for the next request.
            biased;
            Some(id) = released.recv() => {
                if let Some(gone) = held.remove(&id) {
                    if let Some(session) = gone.session {
                        sessions.remove(&session);
                    }
                    if let Some(n) = per_identity.get_mut(&gone.identity) {
                        *n -= 1;
                        if *n == 0 {
                            per_identity.remove(&gone.identity);
                        }
                    }
                }
            }
            command = inbox.recv() => match command {
                None => break,
                Some(Command::Reserve { identity, reply }) => {
                    let mine = per_identity.get(&identity).copied().unwrap_or(0);
                    let answer = match (limits.max_sessions, limits.max_per_identity) {
                        (Some(max), _) if held.len() >= max => Err(LimitError::Sessions { max }),
                        (_, Some(max)) if mine >= max => Err(LimitError::PerIdentity { max }),
                        _ => {
                            next += 1;
                            held.insert(next, Held { identity: identity.clone(), session: None });
                            *per_identity.entry(identity).or_default() += 1;
                            Ok(Lease(Arc::new(LeaseInner { id: next, release: release.clone() })))
                        }
                    };
                    let _ = reply.send(answer);
                }
                Some(Command::Bind { lease, session }) => {
                    if let Some(h) = held.get_mut(&lease) {
                        h.session = Some(session.clone());
                        sessions.insert(session, lease);
                    }
                }
                Some(Command::Owner { session, reply }) => {
                    let owner = sessions.get(&session).and_then(|l| held.get(l)).map(|h| h.identity.clone());
                    let _ = reply.send(owner);
                }
                #[cfg(test)]
                Some(Command::Count { reply }) => {
                    let _ = reply.send(held.len());
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn who(name: &str) -> Option<Identity> {
        Some(Identity::new(name))
    }

    #[tokio::test]
    async fn places_are_counted_in_all_and_per_identity_and_come_back_when_the_last_lease_goes() {
        let owners = Owners::start(SessionLimits { max_sessions: Some(3), max_per_identity: Some(2) });
        let a1 = owners.reserve(who("alice")).await.unwrap();
        let a2 = owners.reserve(who("alice")).await.unwrap();
        assert_eq!(owners.reserve(who("alice")).await.unwrap_err(), LimitError::PerIdentity { max: 2 });
        let b1 = owners.reserve(who("bob")).await.unwrap();
        assert_eq!(owners.reserve(who("carol")).await.unwrap_err(), LimitError::Sessions { max: 3 });
        owners.bind(&a1, "s1".into()).await;
        assert_eq!(owners.owner("s1").await, Some(who("alice")));
        assert_eq!(owners.owner("s2").await, None);
        let copy = a1.clone();
        drop(a1);
        assert_eq!(owners.owner("s1").await, Some(who("alice")), "a clone still holds the place");
        drop(copy);
        assert_eq!(owners.owner("s1").await, None, "the session is forgotten with its last lease");
        assert_eq!(owners.count().await, 2);
        let _a3 = owners.reserve(who("alice")).await.expect("alice's place came back");
        drop((a2, b1));
    }
}
