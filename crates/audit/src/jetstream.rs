//! The JetStream backend: one stream ([`STREAM`], subject [`SUBJECT`]) that
//! every bridge and sandbox-runner replica of a stack appends to, so the
//! stack has one ordered, durable record.
//!
//! Replicas chain concurrently by optimistic concurrency on the stream's
//! own sequence: a writer builds its record on the head it knows (`seq` =
//! head + 1, `prev` = the head's hash) and publishes it with
//! `Nats-Expected-Last-Sequence` = head (for the very first record, which
//! the server would not check against 0,
//! `Nats-Expected-Last-Subject-Sequence` = 0). The stream stores it only if no
//! one appended in between, so a stored record's `seq` is its stream
//! sequence and its `prev` the hash of the message just before it. A
//! writer that lost the race reads the new last message, rebuilds its
//! record on it and tries again. Each logical record carries one
//! `Nats-Msg-Id` across its attempts, so an attempt whose acknowledgement
//! was lost is not stored twice (the stream's duplicate window).
//!
//! The stream is created when missing (file storage, the retention
//! setting as its maximum age, `deny_delete` and `deny_purge`, direct get
//! on); `deploy/nats-server.conf` lets the bridge and sandbox-runner users
//! create it, read it and publish to it, and nobody delete, purge or
//! change it.

use std::time::Duration;

use async_nats::jetstream::{self, context::PublishErrorKind, stream};
use bytes::Bytes;

use crate::AuditError;
use crate::record::line_hash;
use crate::sink::{Head, Wrote, unwritable};

/// The stream.
pub const STREAM: &str = "CODEMODE_AUDIT";
/// Its one subject.
pub const SUBJECT: &str = "codemode.v1.audit";
/// The bound on each call to JetStream.
pub const TIMEOUT: Duration = Duration::from_secs(2);

/// How the stream is made when it is missing.
#[derive(Debug, Clone)]
pub struct StreamConfig {
    /// The stream's name.
    pub stream: String,
    /// Its subject.
    pub subject: String,
    /// How long records are kept (`None`: for ever).
    pub retention: Option<Duration>,
    /// Replicas (1 for one server, 3 in a cluster).
    pub replicas: usize,
}

impl Default for StreamConfig {
    fn default() -> Self {
        Self { stream: STREAM.into(), subject: SUBJECT.into(), retention: None, replicas: 1 }
    }
}

/// Appends to the stream.
pub struct NatsBackend {
    js: jetstream::Context,
    stream: stream::Stream,
    config: StreamConfig,
    /// The head as last seen; `None` when it must be read again.
    head: Option<Head>,
}

/// How long a record waits for a replicated stream to elect a new leader.
const FAILOVER_WAIT: Duration = Duration::from_secs(5);

/// How long opening waits for a replicated stream's leader.
const LEADER_WAIT: Duration = Duration::from_secs(10);

fn sink_name(config: &StreamConfig) -> String {
    format!("nats:{}", config.stream)
}

/// The stream, created as `config` says when it is missing.
pub async fn open_stream(js: &jetstream::Context, config: &StreamConfig) -> Result<stream::Stream, AuditError> {
    let fail = |e: &dyn std::fmt::Display| AuditError::Open { sink: sink_name(config), reason: e.to_string() };
    match js.get_stream(&config.stream).await {
        Ok(s) => {
            let wanted = config.retention.unwrap_or_default();
            if s.cached_info().config.max_age != wanted {
                tracing::warn!(stream = %config.stream, kept = ?s.cached_info().config.max_age, wanted = ?wanted,
                    "the audit stream exists with another retention: it is kept (an operator changes it)");
            }
            Ok(s)
        }
        Err(e) if is_not_found(&e) => js
            .create_stream(stream::Config {
                name: config.stream.clone(),
                subjects: vec![config.subject.clone()],
                storage: stream::StorageType::File,
                max_age: config.retention.unwrap_or_default(),
                num_replicas: config.replicas.max(1),
                deny_delete: true,
                deny_purge: true,
                allow_direct: true,
                duplicate_window: Duration::from_secs(120),
                description: Some("code-mode audit records (hash-chained)".into()),
                ..Default::default()
            })
            .await
            .map_err(|e| fail(&e)),
        Err(e) => Err(fail(&e)),
    }
}

fn is_not_found(e: &jetstream::context::GetStreamError) -> bool {
    matches!(e.kind(), jetstream::context::GetStreamErrorKind::JetStream(j)
        if j.error_code() == jetstream::ErrorCode::STREAM_NOT_FOUND)
}

impl NatsBackend {
    /// Open (or create) the stream.
    pub async fn open(client: async_nats::Client, config: StreamConfig) -> Result<Self, AuditError> {
        let mut js = jetstream::new(client);
        js.set_timeout(TIMEOUT);
        // Services starting together create the stream at once; under load
        // creating a replicated stream can take longer than one request.
        let give_up = tokio::time::Instant::now() + LEADER_WAIT;
        let stream = loop {
            match open_stream(&js, &config).await {
                Ok(stream) => break stream,
                Err(e) if tokio::time::Instant::now() >= give_up => return Err(e),
                Err(e) => {
                    tracing::info!(error = %e, "the audit stream is not ready yet; trying again");
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
            }
        };
        // Created with replicas by this or another service a moment ago,
        // it answers reads only once it has a leader.
        code_mode_core::nats::wait_for_stream_leader(&stream, LEADER_WAIT).await;
        Ok(Self { js, stream, config, head: None })
    }

    /// The stream's name.
    pub fn stream_name(&self) -> &str {
        &self.config.stream
    }

    /// The head: cached, else the stream's last message.
    pub(crate) async fn head(&mut self) -> Result<Head, AuditError> {
        if let Some(head) = &self.head {
            return Ok(head.clone());
        }
        let sink = sink_name(&self.config);
        for _ in 0..10 {
            let head = match self.stream.direct_get_last_for_subject(self.config.subject.clone()).await {
                Ok(message) => Some((message.sequence, Some(line_hash(&String::from_utf8_lossy(&message.payload))))),
                Err(e) if matches!(e.kind(), stream::DirectGetErrorKind::NotFound) => {
                    let info = self.stream.get_info().await.map_err(|e| unwritable(&sink, &e))?;
                    if info.state.messages > 0 {
                        // A record landed between the two requests: read it.
                        continue;
                    }
                    // Empty, or every record aged out: the chain goes on
                    // from the stream's last sequence, with no hash to name.
                    let last = info.state.last_sequence;
                    (last > 0).then_some((last, None))
                }
                Err(e) => return Err(unwritable(&sink, &e)),
            };
            self.head = Some(head.clone());
            return Ok(head);
        }
        Err(unwritable(&sink, &"the stream's last record could not be read"))
    }

    pub(crate) async fn write(&mut self, seq: u64, line: &str, id: &str) -> Result<Wrote, AuditError> {
        let sink = sink_name(&self.config);
        let publish =
            jetstream::message::PublishMessage::build().payload(Bytes::copy_from_slice(line.as_bytes())).message_id(id);
        // The server ignores an expected last stream sequence of 0, so the
        // first record expects "no record yet" of the stream's one subject
        // (as a key-value create does).
        let publish =
            if seq == 1 { publish.expected_last_subject_sequence(0) } else { publish.expected_last_sequence(seq - 1) };
        let acked = self.publish(publish).await;
        match acked {
            Ok(ack) if ack.duplicate || ack.sequence != seq => {
                // An earlier attempt of this record was stored after all.
                self.head = None;
                Ok(Wrote::At(ack.sequence))
            }
            Ok(ack) => {
                self.head = Some(Some((ack.sequence, Some(line_hash(line)))));
                Ok(Wrote::At(ack.sequence))
            }
            Err(e) if another_wrote_first(&e) => {
                self.head = None;
                Ok(Wrote::Conflict)
            }
            Err(e) => {
                self.head = None;
                Err(unwritable(&sink, &e))
            }
        }
    }

    /// Publish one record, riding out a leader election: in a cluster, a
    /// replicated stream whose leader's node died answers "no stream" until
    /// its replicas elect another (about 2 s), while the client is already
    /// connected to a live node. Retrying then is safe: every attempt
    /// carries the record's message id and expected sequence, so the stream
    /// stores it at most once. A client that is not connected fails at once
    /// (a lone nats-server is down: the sink fails closed as before).
    async fn publish(
        &self,
        publish: jetstream::message::PublishMessage,
    ) -> Result<jetstream::publish::PublishAck, jetstream::context::PublishError> {
        let give_up = tokio::time::Instant::now() + FAILOVER_WAIT;
        loop {
            let acked = match self.js.send_publish(self.config.subject.clone(), publish.clone()).await {
                Ok(future) => future.await,
                Err(e) => Err(e),
            };
            match acked {
                Err(e)
                    if e.kind() == PublishErrorKind::StreamNotFound
                        && self.js.client().connection_state() == async_nats::connection::State::Connected
                        && tokio::time::Instant::now() < give_up =>
                {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                other => return other,
            }
        }
    }

    /// Writable again? The stream answers.
    pub(crate) async fn probe(&mut self) -> Result<(), AuditError> {
        let sink = sink_name(&self.config);
        self.stream.get_info().await.map_err(|e| unwritable(&sink, &e))?;
        self.head = None;
        Ok(())
    }
}

/// Every record still in the stream, oldest first, as `(sequence, line)`;
/// also whether records before the first were removed (retention).
pub async fn read_all(client: async_nats::Client, stream_name: &str) -> Result<(Vec<(u64, String)>, bool), AuditError> {
    let mut js = jetstream::new(client);
    js.set_timeout(TIMEOUT);
    let fail =
        |e: &dyn std::fmt::Display| AuditError::Open { sink: format!("nats:{stream_name}"), reason: e.to_string() };
    let stream = js.get_stream(stream_name).await.map_err(|e| fail(&e))?;
    let info = stream.get_info().await.map_err(|e| fail(&e))?;
    let (first, last) = (info.state.first_sequence, info.state.last_sequence);
    let mut out = Vec::new();
    if info.state.messages > 0 {
        for seq in first..=last {
            match stream.direct_get(seq).await {
                Ok(m) => out.push((m.sequence, String::from_utf8_lossy(&m.payload).into_owned())),
                // A record no longer there shows up as missing when checked.
                Err(e) if matches!(e.kind(), stream::DirectGetErrorKind::NotFound) => {}
                Err(e) => return Err(fail(&e)),
            }
        }
    }
    Ok((out, first > 1))
}

/// Did the stream refuse the record because another writer appended
/// first? A single server says so with error code 10071, which async-nats
/// reads as [`PublishErrorKind::WrongLastSequence`]; a replicated stream's
/// leader refuses the very first record (an expected last subject sequence
/// of 0) with 10164, "wrong last sequence" without the number, which
/// async-nats 0.51 reads as `Other`. Both mean: read the head again and
/// rebuild the record on it.
fn another_wrote_first(e: &jetstream::context::PublishError) -> bool {
    e.kind() == PublishErrorKind::WrongLastSequence
        || std::error::Error::source(e)
            .and_then(|source| source.downcast_ref::<jetstream::Error>())
            .is_some_and(|server| server.error_code() == jetstream::ErrorCode::STREAM_WRONG_LAST_SEQUENCE_CONSTANT)
}

#[cfg(test)]
mod tests {
    // A panic in a test is the test failing.
    #![allow(clippy::unwrap_used)]

    use super::*;
    use code_mode_core::testing::NatsCluster;

    /// The race a fresh stack runs at its start: the bridge and each runner
    /// write their `open` record to the new stream at once, each as its
    /// first record. On a three-node cluster the stream's leader refuses a
    /// writer whose first record arrives while another's is still being
    /// replicated with error code 10164; that writer's service failed to
    /// start (the sink failed closed). It lost a race: it must read the
    /// head again and chain on the winner.
    #[tokio::test]
    async fn writers_racing_for_a_replicated_streams_first_record_each_either_win_or_chain_on_the_winner() {
        let Some((cluster, users)) = NatsCluster::start_secured(3) else { return };
        const WRITERS: usize = 8;
        let config = StreamConfig { replicas: 3, ..Default::default() };
        let mut writers = Vec::new();
        for w in 0..WRITERS {
            // Each writer on a node of its own, as the services of a stack are.
            let client =
                async_nats::ConnectOptions::with_user_and_password("bridge".into(), users.password("bridge").into())
                    .custom_inbox_prefix("_INBOX.bridge")
                    .connect(cluster.url(w % 3))
                    .await
                    .unwrap();
            let mut backend = NatsBackend::open(client, config.clone()).await.unwrap();
            assert_eq!(backend.head().await.unwrap(), None, "every writer saw the empty stream");
            writers.push(backend);
        }
        let mut racing = tokio::task::JoinSet::new();
        for (w, mut backend) in writers.into_iter().enumerate() {
            racing.spawn(async move {
                let line = format!("{{\"seq\":1,\"writer\":{w}}}");
                let wrote = backend.write(1, &line, &format!("first-{w}")).await;
                (w, wrote, backend)
            });
        }
        let (mut won, mut losers) = (0, Vec::new());
        while let Some(done) = racing.join_next().await {
            let (w, wrote, backend) = done.unwrap();
            match wrote {
                Ok(Wrote::At(1)) => won += 1,
                Ok(Wrote::At(at)) => panic!("writer {w}'s first record was stored at {at}"),
                Ok(Wrote::Conflict) => losers.push(backend),
                Err(e) => panic!("writer {w} lost the race and was refused instead of retrying: {e}"),
            }
        }
        assert_eq!((won, losers.len()), (1, WRITERS - 1), "one writer's record is the first");
        // A loser chains on the winner.
        let loser = &mut losers[0];
        let head = loser.head().await.unwrap();
        assert_eq!(head.as_ref().map(|(seq, _)| *seq), Some(1), "the head is the winner's record");
        assert!(matches!(loser.write(2, "{\"seq\":2}", "second").await.unwrap(), Wrote::At(2)));
    }
}
