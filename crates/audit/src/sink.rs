//! The audit sink: where records go, and the one task that chains them.
//!
//! [`AuditSink`] is a cheap `Clone` handle on a writer task that owns the
//! backend (a [`crate::file`] log, stderr, or a [`crate::jetstream`]
//! stream) and the chain head. Every service of a process shares one
//! handle, so all its records form one chain. [`AuditSink::append`] waits
//! until its record is written (and, for a cell's end, synced to disk): a
//! caller learns of a failed write at once, and refuses what it was about
//! to do (fail closed). After a failure, [`AuditSink::ready`] probes the
//! backend again (at most once a second), so the sink comes back by itself
//! once the file is writable or NATS is back.
//!
//! The task writes an `open` record first (the sink's first record names
//! the sink; a resumed chain says so), a `checkpoint` every
//! [`SinkOptions::checkpoint_every`] records or every
//! [`SinkOptions::checkpoint_interval`] with something new, and one more
//! when it closes. Each checkpoint is also logged (`tracing`, target
//! `code_mode::audit`), so the chain head lands in a second place.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, oneshot, watch};

use crate::record::{Body, Checkpoint, Open, Record, VERSION, line_hash, rfc3339};
use crate::{AuditError, file::FileBackend, jetstream::NatsBackend};

/// How many appends may wait for the writer task.
const QUEUE: usize = 1024;
/// How often a failed sink is probed at most.
const PROBE_EVERY: Duration = Duration::from_secs(1);
/// How many times an append is tried against a concurrent writer.
const MAX_ATTEMPTS: u32 = 100;

/// Settings of a sink.
#[derive(Debug, Clone)]
pub struct SinkOptions {
    /// Who writes (`<service>@<host>:<pid>`); see [`writer_name`].
    pub writer: String,
    /// A checkpoint after this many records.
    pub checkpoint_every: u64,
    /// A checkpoint after this long with something new since the last.
    pub checkpoint_interval: Duration,
}

impl SinkOptions {
    /// Defaults for `service`: a checkpoint every 1000 records or 60 s.
    pub fn for_service(service: &str) -> Self {
        Self { writer: writer_name(service), checkpoint_every: 1000, checkpoint_interval: Duration::from_secs(60) }
    }
}

/// `<service>@<host>:<pid>`.
pub fn writer_name(service: &str) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".into());
    format!("{service}@{host}:{}", std::process::id())
}

/// How durable one record must be before [`AuditSink::append`] returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Written to the backend (a file: handed to the kernel).
    Written,
    /// On stable storage (a file: `fsync`ed). A cell's end is synced.
    Synced,
}

/// The chain head: the last record's `seq` and hash (`None` before the first).
pub(crate) type Head = Option<(u64, Option<String>)>;

/// What a backend did with one line.
pub(crate) enum Wrote {
    /// The line is the record at this `seq`.
    At(u64),
    /// Another writer appended first: read the head again and retry.
    Conflict,
}

/// Where lines go.
pub(crate) enum Backend {
    File(Box<FileBackend>),
    Stderr { head: Head },
    Nats(Box<NatsBackend>),
}

impl Backend {
    /// The head, as the backend knows it (a stream is asked when unknown).
    async fn head(&mut self) -> Result<Head, AuditError> {
        match self {
            Backend::File(f) => Ok(f.head()),
            Backend::Stderr { head } => Ok(head.clone()),
            Backend::Nats(n) => n.head().await,
        }
    }

    async fn write(&mut self, seq: u64, line: &str, durability: Durability, id: &str) -> Result<Wrote, AuditError> {
        match self {
            Backend::File(f) => f.write(seq, line, durability).await,
            Backend::Stderr { head } => {
                let mut out = tokio::io::stderr();
                let text = format!("{line}\n");
                out.write_all(text.as_bytes()).await.map_err(|e| unwritable("stderr", &e))?;
                out.flush().await.map_err(|e| unwritable("stderr", &e))?;
                *head = Some((seq, Some(line_hash(line))));
                Ok(Wrote::At(seq))
            }
            Backend::Nats(n) => n.write(seq, line, id).await,
        }
    }

    /// Is the backend writable again? (A file: it can be opened for
    /// appending; a stream: it answers.)
    async fn probe(&mut self) -> Result<(), AuditError> {
        match self {
            Backend::File(f) => f.probe().await,
            Backend::Stderr { .. } => Ok(()),
            Backend::Nats(n) => n.probe().await,
        }
    }

    /// Sync what was written (a file), before a close.
    async fn sync(&mut self) -> Result<(), AuditError> {
        match self {
            Backend::File(f) => f.sync().await,
            _ => Ok(()),
        }
    }

    /// True when the last write started a new file, whose first record
    /// should be a checkpoint.
    fn rotated(&mut self) -> bool {
        match self {
            Backend::File(f) => f.take_rotated(),
            _ => false,
        }
    }

    fn describe(&self) -> String {
        match self {
            Backend::File(f) => format!("file:{}", f.path().display()),
            Backend::Stderr { .. } => "stderr".into(),
            Backend::Nats(n) => format!("nats:{}", n.stream_name()),
        }
    }

    /// True when the chain already has records (the `open` resumes it).
    fn resumes(&self, head: &Head) -> bool {
        head.is_some()
    }
}

pub(crate) fn unwritable(sink: &str, e: &dyn std::fmt::Display) -> AuditError {
    AuditError::Unwritable { sink: sink.to_string(), reason: e.to_string() }
}

enum Command {
    Append { body: Box<Body>, durability: Durability, reply: oneshot::Sender<Result<u64, AuditError>> },
    Probe { reply: oneshot::Sender<Result<(), AuditError>> },
    Close { reply: oneshot::Sender<()> },
}

/// Where audit records go: a handle on the writer task. Cheap to clone.
///
/// The sink's health (why its last write failed, while it is failing)
/// belongs to the writer task, the only one that writes or probes the
/// backend; handles read it through a `watch` channel, so a healthy sink
/// costs a caller of [`AuditSink::ready`] no hop to the task.
#[derive(Debug, Clone)]
pub struct AuditSink {
    tx: mpsc::Sender<Command>,
    /// The sink, for messages (`file:/var/log/code-mode/audit.jsonl`).
    name: Arc<str>,
    /// Why the last write failed, while the sink is failing (the writer
    /// task's, published).
    failure: watch::Receiver<Option<String>>,
}

impl AuditSink {
    /// Start the writer task on `backend` and write the `open` record. An
    /// `open` that cannot be written is the error: nothing would be
    /// recorded.
    pub(crate) async fn start(backend: Backend, options: SinkOptions) -> Result<Self, AuditError> {
        let name = backend.describe();
        let (health, failure) = watch::channel(None);
        let mut writer = Writer { backend, options, since_checkpoint: 0, health, probed: None };
        let head = writer.backend.head().await?;
        let open = Body::Open(Open { sink: name.clone(), resumed: writer.backend.resumes(&head) });
        writer.append(&open, Durability::Synced).await?;
        code_mode_telemetry::audit_write(true);
        let (tx, rx) = mpsc::channel(QUEUE);
        tokio::spawn(writer.run(rx));
        Ok(Self { tx, name: name.into(), failure })
    }

    /// A sink writing to this process's stderr, one chain per process.
    pub async fn stderr(options: SinkOptions) -> Result<Self, AuditError> {
        Self::start(Backend::Stderr { head: None }, options).await
    }

    /// The sink's name (`file:<path>`, `stderr`, `nats:<stream>`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Append one record; returns its `seq` once it is written as
    /// `durability` asks. An error means it was not recorded: refuse what
    /// it was to record.
    pub async fn append(&self, body: Body, durability: Durability) -> Result<u64, AuditError> {
        let (reply, answer) = oneshot::channel();
        let sent = self.tx.send(Command::Append { body: Box::new(body), durability, reply }).await;
        let result = match sent {
            Ok(()) => answer.await.unwrap_or(Err(AuditError::Closed)),
            Err(_) => Err(AuditError::Closed),
        };
        code_mode_telemetry::audit_write(result.is_ok());
        result
    }

    /// `Ok` when the last write succeeded; after a failure, ask the writer
    /// task to probe the backend (it does at most once a second) and say
    /// whether it is writable again. Callers check this before an effect
    /// they would record afterwards (a tool call goes out, its record comes
    /// back with the result). A closed sink is never ready.
    pub async fn ready(&self) -> Result<(), AuditError> {
        if self.tx.is_closed() {
            return Err(AuditError::Closed);
        }
        if self.failure.borrow().is_none() {
            return Ok(());
        }
        let (reply, answer) = oneshot::channel();
        if self.tx.send(Command::Probe { reply }).await.is_err() {
            return Err(AuditError::Closed);
        }
        answer.await.unwrap_or(Err(AuditError::Closed))
    }

    /// Write a last checkpoint, sync, and stop the writer task (records
    /// appended after this fail with [`AuditError::Closed`]).
    pub async fn close(&self) {
        let (reply, done) = oneshot::channel();
        if self.tx.send(Command::Close { reply }).await.is_ok() {
            let _ = done.await;
        }
    }
}

/// The writer task's state.
struct Writer {
    backend: Backend,
    options: SinkOptions,
    since_checkpoint: u64,
    /// Why the last write failed, while the sink is failing, published to
    /// the handles.
    health: watch::Sender<Option<String>>,
    /// When a failing sink was last probed.
    probed: Option<Instant>,
}

impl Writer {
    async fn run(mut self, mut rx: mpsc::Receiver<Command>) {
        let mut ticker = tokio::time::interval(self.options.checkpoint_interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticker.tick().await;
        loop {
            tokio::select! {
                command = rx.recv() => match command {
                    None => break,
                    Some(Command::Append { body, durability, reply }) => {
                        let result = self.append(&body, durability).await;
                        self.health.send_replace(result.as_ref().err().map(ToString::to_string));
                        if result.is_ok() && self.since_checkpoint >= self.options.checkpoint_every {
                            self.checkpoint().await;
                        }
                        let _ = reply.send(result);
                    }
                    Some(Command::Probe { reply }) => {
                        let _ = reply.send(self.probe().await);
                    }
                    Some(Command::Close { reply }) => {
                        if self.since_checkpoint > 0 {
                            self.checkpoint().await;
                        }
                        if let Err(e) = self.backend.sync().await {
                            tracing::error!(error = %e, "the audit log could not be synced at close");
                        }
                        let _ = reply.send(());
                        return;
                    }
                },
                _ = ticker.tick() => {
                    if self.since_checkpoint > 0 {
                        self.checkpoint().await;
                    }
                }
            }
        }
        if self.since_checkpoint > 0 {
            self.checkpoint().await;
        }
        let _ = self.backend.sync().await;
    }

    /// Whether a failing sink is writable again: the backend is probed at
    /// most once every [`PROBE_EVERY`] (in between, the last failure
    /// stands); the answer is published to the handles.
    async fn probe(&mut self) -> Result<(), AuditError> {
        let Some(reason) = self.health.borrow().clone() else { return Ok(()) };
        if self.probed.is_some_and(|t| t.elapsed() < PROBE_EVERY) {
            return Err(AuditError::Unwritable { sink: self.backend.describe(), reason });
        }
        self.probed = Some(Instant::now());
        let probed = self.backend.probe().await;
        code_mode_telemetry::audit_probed(probed.is_ok());
        match &probed {
            Ok(()) => {
                self.health.send_replace(None);
                tracing::info!(sink = %self.backend.describe(), "the audit sink is writable again");
            }
            Err(e) => {
                self.health.send_replace(Some(e.to_string()));
            }
        }
        probed
    }

    /// Chain and write one record, retrying against concurrent writers.
    async fn append(&mut self, body: &Body, durability: Durability) -> Result<u64, AuditError> {
        let id = uuid::Uuid::new_v4().simple().to_string();
        for _ in 0..MAX_ATTEMPTS {
            let head = self.backend.head().await?;
            let (seq, prev) = match head {
                None => (1, None),
                Some((seq, hash)) => (seq + 1, hash),
            };
            // A checkpoint names the head it is chained on, whatever head
            // the attempt ends up with.
            let body = match (body, &prev) {
                (Body::Checkpoint(_), Some(head)) => {
                    Body::Checkpoint(Checkpoint { head: head.clone(), records: seq - 1 })
                }
                _ => body.clone(),
            };
            let record = Record {
                v: VERSION,
                seq,
                prev,
                time: rfc3339(SystemTime::now()),
                writer: self.options.writer.clone(),
                body,
            };
            let line = record.to_line();
            match self.backend.write(seq, &line, durability, &id).await {
                Ok(Wrote::At(at)) => {
                    self.since_checkpoint += 1;
                    if self.backend.rotated() {
                        self.checkpoint().await;
                    }
                    return Ok(at);
                }
                Ok(Wrote::Conflict) => continue,
                Err(e) => {
                    tracing::error!(sink = %self.backend.describe(), error = %e, record = %line, "an audit record could not be written");
                    return Err(e);
                }
            }
        }
        Err(AuditError::Unwritable {
            sink: self.backend.describe(),
            reason: format!("other writers kept appending first ({MAX_ATTEMPTS} attempts)"),
        })
    }

    /// Write a checkpoint naming the current head (and log it).
    async fn checkpoint(&mut self) {
        let head = match self.backend.head().await {
            Ok(Some((seq, Some(hash)))) => (seq, hash),
            Ok(_) => return,
            Err(e) => {
                tracing::warn!(error = %e, "no audit checkpoint: the head could not be read");
                return;
            }
        };
        let body = Body::Checkpoint(Checkpoint { head: head.1.clone(), records: head.0 });
        self.since_checkpoint = 0;
        match Box::pin(self.append(&body, Durability::Synced)).await {
            Ok(seq) => {
                self.since_checkpoint = 0;
                tracing::info!(target: "code_mode::audit", sink = %self.backend.describe(), seq, head_seq = head.0, head = %head.1, "audit checkpoint (audit verify --checkpoint HEAD_SEQ:HEAD checks it later)");
            }
            Err(e) => tracing::warn!(error = %e, "the audit checkpoint could not be written"),
        }
    }
}

impl AuditSink {
    /// A sink appending to the file at `path` (see [`crate::file`]):
    /// continues the chain of the file (or of its latest rotated file) if
    /// there is one. `rotate_bytes`: start a new file once this one holds
    /// that many bytes (`None`: never).
    pub async fn file(
        path: &std::path::Path,
        rotate_bytes: Option<u64>,
        options: SinkOptions,
    ) -> Result<Self, AuditError> {
        let backend = FileBackend::open(path, rotate_bytes).await?;
        Self::start(Backend::File(Box::new(backend)), options).await
    }

    /// A sink appending to the JetStream stream of [`crate::jetstream`] over
    /// `client`, created with `retention` when missing.
    pub async fn nats(
        client: async_nats::Client,
        config: crate::jetstream::StreamConfig,
        options: SinkOptions,
    ) -> Result<Self, AuditError> {
        let backend = NatsBackend::open(client, config).await?;
        Self::start(Backend::Nats(Box::new(backend)), options).await
    }
}
