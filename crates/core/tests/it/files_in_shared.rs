//! Files in over NATS past the reply bound (issue 42): the bucket
//! `codemode_files_in` the bridge writes and the runners read, with the
//! deployment's users of `deploy/nats-server.conf` on a real nats-server.
//! A file comes back whole and equal, or not at all: a description whose
//! size, hash or chunks do not match what the bucket holds is refused, as
//! is one past the limit; only the bridge may write, the frontend may not
//! even open the bucket. Inline files in go the same way through the
//! frontends' own bucket `codemode_files_in_inline`, which the frontends
//! write and cannot read and the bridges cannot open.

use std::time::Duration;

use code_mode_core::files_in_shared::{CHUNK_BYTES, SharedInputs, SharedInputsError, StoredInput};
use code_mode_core::testing::{NatsServer, NatsUsers};

async fn client_as(server: &NatsServer, users: &NatsUsers, user: &str) -> async_nats::Client {
    async_nats::ConnectOptions::with_user_and_password(user.into(), users.password(user).into())
        .custom_inbox_prefix(format!("_INBOX.{user}"))
        .connect(server.url())
        .await
        .unwrap_or_else(|e| panic!("{user} connects: {e}"))
}

#[tokio::test]
async fn a_file_in_comes_back_whole_and_equal_or_is_refused_and_only_the_bridge_writes_the_bucket() {
    let Some((server, users)) = NatsServer::start_secured() else { return };
    let bridge =
        SharedInputs::create(client_as(&server, &users, "bridge").await, 1).await.expect("the bridge creates it");
    let runner = SharedInputs::reader(client_as(&server, &users, "sandbox-runner").await);

    // 600,000 bytes: three chunks, the last one short.
    let bytes: Vec<u8> = (0..600_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let stored = bridge.put(&bytes).await.expect("the bridge writes it");
    assert_eq!((stored.size, stored.chunks), (600_000, 3));
    assert!(runner.take(&stored, 8 << 20).await.expect("the runner reads it") == bytes, "the bytes differ");

    // Descriptions that do not match what the bucket holds: refused, never cut bytes.
    let broken = |stored: StoredInput| {
        let runner = runner.clone();
        async move {
            match runner.take(&stored, 8 << 20).await {
                Err(SharedInputsError::Broken { why, .. }) => why,
                other => panic!("{stored:?} is refused as broken: {other:?}"),
            }
        }
    };
    let wrong_hash = StoredInput { sha256: "00".repeat(32), ..stored.clone() };
    assert!(broken(wrong_hash).await.contains("not the ones described"));
    let shorter = StoredInput { size: 2 * CHUNK_BYTES as u64 + 1, ..stored.clone() };
    assert!(broken(shorter).await.contains("does not fit the described size"));
    let unknown = StoredInput { id: "0123456789abcdef0123456789abcdef".into(), ..stored.clone() };
    assert!(broken(unknown).await.contains("chunk 0 is gone"));
    let forged_count = StoredInput { chunks: 1, ..stored.clone() };
    assert!(broken(forged_count).await.contains("1 chunks cannot hold 600000 bytes"));
    let past_limit = runner.take(&stored, 599_999).await.unwrap_err().to_string();
    assert!(past_limit.contains("it is 600000 bytes, over the 599999 byte limit"), "{past_limit}");

    // The runner may only read: its writes are refused by the server.
    let mut as_runner = async_nats::jetstream::new(client_as(&server, &users, "sandbox-runner").await);
    as_runner.set_timeout(Duration::from_secs(2));
    let store = as_runner.get_key_value("codemode_files_in").await.expect("the runner opens it");
    assert!(store.put(format!("{}.c0", stored.id), "forged".into()).await.is_err(), "the runner cannot write");
    // The frontend cannot open it at all.
    let mut as_frontend = async_nats::jetstream::new(client_as(&server, &users, "frontend").await);
    as_frontend.set_timeout(Duration::from_secs(2));
    assert!(as_frontend.get_key_value("codemode_files_in").await.is_err(), "the frontend cannot open it");
}

#[tokio::test]
async fn inline_files_in_go_from_the_frontend_to_the_runner_whole_and_the_frontend_can_neither_read_them_nor_touch_the_bridges_bucket()
 {
    use code_mode_core::files_in_shared::{INLINE_BUCKET, INPUTS_BUCKET};
    let Some((server, users)) = NatsServer::start_secured() else { return };
    let frontend = SharedInputs::create_inline(client_as(&server, &users, "frontend").await, 1)
        .await
        .expect("the frontend creates the bucket of inline files in");
    let bridge =
        SharedInputs::create(client_as(&server, &users, "bridge").await, 1).await.expect("the bridge creates its own");
    let runner = SharedInputs::reader(client_as(&server, &users, "sandbox-runner").await);

    // 700,000 bytes of a client's: three chunks, whole and equal at the runner.
    let bytes: Vec<u8> = (0..700_000u32).map(|i| (i * 13 % 253) as u8).collect();
    let stored = frontend.put(&bytes).await.expect("the frontend writes it");
    assert_eq!((stored.size, stored.chunks), (700_000, 3));
    let inline = runner.inline_reader();
    assert_eq!(inline.bucket(), INLINE_BUCKET);
    assert!(inline.take(&stored, 2 << 20).await.expect("the runner reads it") == bytes, "the bytes differ");
    // Past the 2 MiB inline limit the runner holds it to: refused.
    let past = inline.take(&stored, 699_999).await.unwrap_err().to_string();
    assert!(past.contains("it is 700000 bytes, over the 699999 byte limit"), "{past}");

    // A runner reads an inline file only from the frontends' bucket: a
    // description naming a bridge's file in finds nothing there.
    let bridges = bridge.put(b"the bridge's file").await.expect("the bridge writes");
    let gone = inline.take(&bridges, 2 << 20).await.unwrap_err().to_string();
    assert!(gone.contains("chunk 0 is gone") && gone.contains(INLINE_BUCKET), "{gone}");

    // The attacks of a frontend (its NATS user): read back what frontends
    // wrote (get, list), open, write or purge the bridges' bucket.
    let mut as_frontend = async_nats::jetstream::new(client_as(&server, &users, "frontend").await);
    as_frontend.set_timeout(Duration::from_secs(2));
    let store = as_frontend.get_key_value(INLINE_BUCKET).await.expect("the frontend opens its bucket (stream info)");
    assert!(store.get(format!("{}.c0", stored.id)).await.is_err(), "a frontend cannot read an inline file in");
    assert!(store.keys().await.is_err(), "a frontend cannot list the inline files in");
    assert!(as_frontend.get_key_value(INPUTS_BUCKET).await.is_err(), "a frontend cannot open the bridges' bucket");
    let forged = as_frontend.publish(format!("$KV.{INPUTS_BUCKET}.{}.c0", bridges.id), "forged".into()).await;
    let acked = match forged {
        Ok(ack) => ack.await.is_ok(),
        Err(_) => false,
    };
    assert!(!acked, "a frontend cannot write the bridges' bucket");
    assert!(runner.take(&bridges, 2 << 20).await.is_ok(), "the bridge's file is untouched");

    // A chunk swapped after its description (a frontend may overwrite its
    // own entries): the runner refuses it, never places other bytes.
    store.put(format!("{}.c1", stored.id), vec![0u8; CHUNK_BYTES].into()).await.expect("the frontend may put");
    let swapped = inline.take(&stored, 2 << 20).await.unwrap_err().to_string();
    assert!(swapped.contains("not the ones described"), "{swapped}");

    // The runner may only read it; the bridge cannot open it at all.
    let mut as_runner = async_nats::jetstream::new(client_as(&server, &users, "sandbox-runner").await);
    as_runner.set_timeout(Duration::from_secs(2));
    let store = as_runner.get_key_value(INLINE_BUCKET).await.expect("the runner opens it");
    assert!(store.put(format!("{}.c0", stored.id), "forged".into()).await.is_err(), "the runner cannot write");
    let mut as_bridge = async_nats::jetstream::new(client_as(&server, &users, "bridge").await);
    as_bridge.set_timeout(Duration::from_secs(2));
    assert!(as_bridge.get_key_value(INLINE_BUCKET).await.is_err(), "the bridge cannot open the frontends' bucket");
}
