//! Files in over NATS (issue 42), with the frontend, the bridge and the
//! sandbox-runner as separate processes: a file in past the NATS server's
//! 1 MiB message bound (a wrapped server's 5 MB resource, a tool's 5 MB
//! text) reaches the cell whole, its hash the host's, through the shared
//! store the bridge writes and the runners read; a file past the files-in
//! limit is refused naming it. Real nats-server (the deployment's users and
//! permissions, its default `max_payload`), real Docker, rmcp's client.

use serde_json::json;

use crate::auth::connect_as;
use crate::files_in::{error_of, run_with_files, sha256};
use crate::support::{self, SplitHttp};

/// Each file under `/tmp/in`: its name, size and SHA-256.
const HASH_INPUTS: &str = r#"
import hashlib, os
for name in sorted(os.listdir("/tmp/in")):
    data = open(os.path.join("/tmp/in", name), "rb").read()
    print(name, len(data), hashlib.sha256(data).hexdigest())
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_nats_a_5_mb_file_in_from_a_resource_or_a_tool_reaches_the_cell_whole_and_one_past_the_limit_is_refused() {
    let Some(split) = SplitHttp::start() else { return };
    let (alice, tokens) = support::alice();
    let (_bridge, _runner) = split.services(&[], &["--resources", "--resource-host", "wiki"], &["--warm", "0"]);
    let (_frontend, url) = split.frontend(&tokens).await;
    let client = connect_as(&url, &alice, ()).await;

    // A wrapped server's 5 MB resource: five times the NATS message bound.
    let resource = "x".repeat(5_000_000);
    let result =
        run_with_files(&client, HASH_INPUTS, json!([{"uri": "test://wiki/big/5000000", "name": "big.txt"}])).await;
    let report = support::report(&result);
    assert_eq!(report["error"], serde_json::Value::Null, "{report}");
    assert_eq!(report["stdout"], format!("big.txt 5000000 {}\n", sha256(resource.as_bytes())), "{report}");

    // A tool's 5 MB text (echo repeated), and a small resource beside it.
    let text = "abcd".repeat(1_250_000);
    let files = json!([
        {"tool": "echo", "arguments": {"text": "abcd", "repeat": 1_250_000}, "name": "echo.txt"},
        {"uri": "test://wiki/small", "name": "small"},
    ]);
    let result = run_with_files(&client, HASH_INPUTS, files).await;
    let report = support::report(&result);
    assert_eq!(report["error"], serde_json::Value::Null, "{report}");
    let expected = format!("echo.txt 5000000 {}\nsmall 5 {}\n", sha256(text.as_bytes()), sha256(b"small"));
    assert_eq!(report["stdout"], expected.as_str(), "{report}");

    // Past the files-in limit: refused naming it, no code run.
    let result = run_with_files(&client, "print('ran')", json!([{"uri": "test://wiki/big/8388609"}])).await;
    let error = error_of(&result);
    assert!(
        error.contains(
            "files[0] (test://wiki/big/8388609): resources/read test://wiki/big/8388609: the file is 8388609 bytes, \
             over the 8388608 byte limit of files in (refused, not cut)"
        ),
        "{error}"
    );
    if let Some(report) = &result.structured_content {
        assert_eq!(report["stdout"], "", "the code ran: {report}");
    }
    client.cancel().await.ok();

    // The bytes went through the bucket codemode_files_in: bounded and
    // expiring, its chunks there for the runners (who read it), while the
    // frontends cannot even look at it.
    let runner = jetstream_as(&split.nats, &split.users, "sandbox-runner").await;
    let mut stream = runner.get_stream("KV_codemode_files_in").await.expect("the runners see the files-in bucket");
    let info = stream.info().await.expect("its info");
    assert_eq!(info.config.max_age, code_mode_core::files_in_shared::INPUTS_TTL);
    assert_eq!(info.config.max_bytes, code_mode_core::files_in_shared::INPUTS_MAX_BYTES);
    assert!(info.state.messages >= 40, "two 5 MB files in 256 KiB chunks: {:?}", info.state);
    let frontend = jetstream_as(&split.nats, &split.users, "frontend").await;
    assert!(frontend.get_stream("KV_codemode_files_in").await.is_err(), "a frontend may not read files in");
}

/// JetStream as `user` of the deployment's NATS configuration.
pub(crate) async fn jetstream_as(
    nats: &code_mode_core::testing::NatsServer,
    users: &code_mode_core::testing::NatsUsers,
    user: &str,
) -> async_nats::jetstream::Context {
    let client = async_nats::ConnectOptions::with_user_and_password(user.into(), users.password(user).into())
        .custom_inbox_prefix(format!("_INBOX.{user}"))
        .connect(nats.url())
        .await
        .expect("the test connects as a service's user");
    let mut context = async_nats::jetstream::new(client);
    context.set_timeout(std::time::Duration::from_secs(3));
    context
}
