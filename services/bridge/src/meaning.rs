//! Search by meaning, the bridge's side: a cell's `search_tools`, unsure
//! between tools its words rank alike, asks how near in meaning its
//! question is to each tool the catalog offers ([`subjects::SEARCH_MEANING`]).
//!
//! [`Meaning`] is the handle of an actor that owns the tools' embeddings:
//! it reads each catalog once, in a blocking task, reusing the vector of
//! every tool text it has read before (a refresh that changes one tool
//! embeds one), and keeps only the current catalog's. A question is
//! embedded on a blocking thread too, at most [`AT_ONCE`] at a time; a
//! question whose catalog is not read within [`READ_WAIT`] (soon after the
//! start or a refresh), or that finds every permit taken for longer than
//! [`BUSY_WAIT`], gets [`Unanswered`] (the cell is told `unavailable`, the
//! metric says which) and the cell ranks by words alone. Nothing here can
//! fail a cell.
//!
//! Faults: the actor dies only with the bridge (its stop token); a
//! blocking task that panics leaves the catalog unread and the next
//! question starts another read. The encoder never touches the network:
//! it was loaded from local files ([`code_mode_encoder::Encoder::load`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use code_mode_encoder::Encoder;
#[cfg(doc)]
use code_mode_proto::subjects;
use code_mode_proto::{MAX_MEANING_QUERY_CHARS, ToolNearness};
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::catalog::Catalog;

/// Questions embedded at once; more wait up to [`BUSY_WAIT`].
pub const AT_ONCE: usize = 2;
/// How long a question waits for a permit before it is answered
/// "unavailable" (the cell waits at most 2 s in all).
pub const BUSY_WAIT: Duration = Duration::from_millis(500);
/// How long a question waits for its catalog's tools to be read (a
/// question soon after the start or a refresh): then "unavailable".
pub const READ_WAIT: Duration = Duration::from_millis(1_200);

/// The embeddings of one catalog's tools, in catalog order.
#[derive(Debug)]
struct Read {
    version: u64,
    names: Vec<String>,
    vectors: Vec<Arc<[f32]>>,
}

enum Message {
    /// The vectors of catalog `version`, if read; otherwise start reading it.
    Get { version: u64, catalog: Arc<Catalog>, reply: oneshot::Sender<Option<Arc<Read>>> },
    /// A blocking read finished: its tools' vectors, by text.
    Done { version: u64, names: Vec<String>, texts: Vec<String>, vectors: Vec<Arc<[f32]>> },
    /// A blocking read ended without its vectors (it panicked).
    Failed { version: u64 },
}

/// The handle of the actor that ranks by meaning.
#[derive(Clone)]
pub struct Meaning {
    to_actor: mpsc::Sender<Message>,
    encoder: Arc<Encoder>,
    permits: Arc<Semaphore>,
}

impl std::fmt::Debug for Meaning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Meaning").field("model", &self.encoder.fingerprint()).finish()
    }
}

impl Meaning {
    /// Start the actor on the current runtime; it ends with `stop`.
    pub fn start(encoder: Arc<Encoder>, tasks: &tokio_util::task::TaskTracker, stop: CancellationToken) -> Self {
        let (to_actor, inbox) = mpsc::channel(64);
        let actor = Actor {
            encoder: encoder.clone(),
            to_self: to_actor.downgrade(),
            read: None,
            reading: None,
            wanted: None,
            waiting: Vec::new(),
            by_text: HashMap::new(),
        };
        tasks.spawn(actor.run(inbox, stop));
        Self { to_actor, encoder, permits: Arc::new(Semaphore::new(AT_ONCE)) }
    }

    /// Start reading catalog `version` now, so the first question finds
    /// it read (dropped when the actor's inbox is full: the next question
    /// asks again).
    pub fn prepare(&self, version: u64, catalog: Arc<Catalog>) {
        let (reply, _) = oneshot::channel();
        let _ = self.to_actor.try_send(Message::Get { version, catalog, reply });
    }

    /// The vectors of catalog `version` (or a newer one), waiting for its
    /// read at most `within`.
    async fn vectors(&self, version: u64, catalog: Arc<Catalog>, within: Duration) -> Option<Arc<Read>> {
        let (reply, answer) = oneshot::channel();
        self.to_actor.send(Message::Get { version, catalog, reply }).await.ok()?;
        tokio::time::timeout(within, answer).await.ok()?.ok()?
    }

    /// Wait at most `within` until catalog `version`'s tools are read;
    /// true when they are.
    pub async fn read(&self, version: u64, catalog: Arc<Catalog>, within: Duration) -> bool {
        self.vectors(version, catalog, within).await.is_some()
    }

    /// How near `query` is to each tool of catalog `version`, or why it
    /// cannot be told.
    pub async fn ask(&self, version: u64, catalog: Arc<Catalog>, query: &str) -> Result<Vec<ToolNearness>, Unanswered> {
        let read = self.vectors(version, catalog, READ_WAIT).await.ok_or(Unanswered::NotRead)?;
        let Ok(Ok(permit)) = tokio::time::timeout(BUSY_WAIT, self.permits.clone().acquire_owned()).await else {
            return Err(Unanswered::Busy);
        };
        let query: String = query.chars().take(MAX_MEANING_QUERY_CHARS).collect();
        let encoder = self.encoder.clone();
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let asked = encoder.embed(&query);
            read.names
                .iter()
                .zip(&read.vectors)
                .map(|(tool, vector)| ToolNearness {
                    tool: tool.clone(),
                    cosine: code_mode_encoder::cosine(&asked, vector),
                })
                .collect::<Vec<_>>()
        })
        .await
        .map_err(|_| Unanswered::Failed)
    }
}

/// Why a question got no answer by meaning (the cell ranks by words).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unanswered {
    /// Its catalog's tools were not read within [`READ_WAIT`].
    NotRead,
    /// Every encoder thread stayed taken for [`BUSY_WAIT`].
    Busy,
    /// The encoder's thread ended without an answer.
    Failed,
}

impl Unanswered {
    /// The `answer` label of `codemode_search_meaning_total`.
    pub fn label(self) -> &'static str {
        match self {
            Self::NotRead => "not_read",
            Self::Busy => "busy",
            Self::Failed => "failed",
        }
    }

    /// What the cell is told.
    pub fn reason(self) -> &'static str {
        match self {
            Self::NotRead => "the tools are still being read",
            Self::Busy => "busy: every encoder thread is taken",
            Self::Failed => "the question could not be embedded",
        }
    }
}

/// The state: the read catalog, the one being read, the vectors by text.
struct Actor {
    encoder: Arc<Encoder>,
    to_self: mpsc::WeakSender<Message>,
    read: Option<Arc<Read>>,
    /// The version a blocking task reads now.
    reading: Option<u64>,
    /// The newest version asked for and its catalog, when it is not read.
    wanted: Option<(u64, Arc<Catalog>)>,
    /// Questions waiting for their catalog's read (its version or newer).
    waiting: Vec<(u64, oneshot::Sender<Option<Arc<Read>>>)>,
    /// Every text of the read catalog (and of reads since), by text.
    by_text: HashMap<String, Arc<[f32]>>,
}

impl Actor {
    async fn run(mut self, mut inbox: mpsc::Receiver<Message>, stop: CancellationToken) {
        loop {
            let message = tokio::select! {
                _ = stop.cancelled() => break,
                message = inbox.recv() => match message { Some(m) => m, None => break },
            };
            match message {
                Message::Get { version, catalog, reply } => {
                    match self.read.clone().filter(|read| read.version >= version) {
                        Some(read) => {
                            let _ = reply.send(Some(read));
                        }
                        None => {
                            if self.wanted.as_ref().is_none_or(|(v, _)| *v < version) && self.reading != Some(version) {
                                self.wanted = Some((version, catalog));
                            }
                            self.waiting.retain(|(_, waiter)| !waiter.is_closed());
                            self.waiting.push((version, reply));
                        }
                    }
                }
                Message::Done { version, names, texts, vectors } => {
                    self.reading = None;
                    let newer = self.read.as_ref().is_none_or(|read| read.version < version);
                    // Keep the vectors of this catalog's texts only.
                    self.by_text = texts.into_iter().zip(vectors.iter().cloned()).collect();
                    if newer {
                        tracing::info!(version, tools = names.len(), "search by meaning: the catalog's tools are read");
                        let read = Arc::new(Read { version, names, vectors });
                        for (_, waiter) in self.waiting.extract_if(.., |(asked, _)| *asked <= version) {
                            let _ = waiter.send(Some(read.clone()));
                        }
                        self.read = Some(read);
                    }
                    if self.wanted.as_ref().is_some_and(|(v, _)| *v <= version) {
                        self.wanted = None;
                    }
                }
                Message::Failed { version } => {
                    tracing::warn!(version, "search by meaning: reading the catalog's tools failed");
                    self.reading = None;
                    for (_, waiter) in self.waiting.extract_if(.., |(asked, _)| *asked <= version) {
                        let _ = waiter.send(None);
                    }
                }
            }
            self.start_read();
        }
    }

    /// Start reading the wanted catalog when no read runs.
    fn start_read(&mut self) {
        if self.reading.is_some() {
            return;
        }
        let Some((version, catalog)) = self.wanted.take() else { return };
        self.reading = Some(version);
        let (names, texts): (Vec<String>, Vec<String>) =
            catalog.tools().iter().map(|t| (t.name.clone(), t.search.for_meaning())).unzip();
        let known: Vec<Option<Arc<[f32]>>> = texts.iter().map(|t| self.by_text.get(t).cloned()).collect();
        let encoder = self.encoder.clone();
        let to_self = self.to_self.clone();
        std::mem::drop(tokio::task::spawn_blocking(move || {
            let started = std::time::Instant::now();
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                texts
                    .iter()
                    .zip(known)
                    .map(|(text, known)| known.unwrap_or_else(|| encoder.embed(text).into()))
                    .collect::<Vec<Arc<[f32]>>>()
            }));
            tracing::debug!(
                version,
                tools = names.len(),
                took_ms = started.elapsed().as_millis() as u64,
                "search by meaning: read"
            );
            let message = match outcome {
                Ok(vectors) => Message::Done { version, names, texts, vectors },
                Err(_) => Message::Failed { version },
            };
            if let Some(to_self) = to_self.upgrade() {
                let _ = to_self.blocking_send(message);
            }
        }));
    }
}
