//! Files out of a cell over NATS (issue 42): with the frontend and the
//! sandbox-runner apart, the runner hands the files a cell wrote to the
//! JetStream bucket `codemode_files` and any frontend replica serves the
//! links from there, only to the identity that ran the cell. Real
//! nats-server (the deployment's users and permissions), real Docker,
//! rmcp's client.

use rmcp::model::ReadResourceRequestParams;

use crate::auth::{TokenFile, connect_as, token_new};
use crate::files_out::{WRITE_BOTH, csv_text, links, png_bytes, read_back};
use crate::http::run_python;
use crate::support::{self, SplitHttp};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_nats_a_cells_files_are_read_byte_for_byte_through_any_frontend_replica_and_another_identity_finds_nothing()
 {
    let Some(split) = SplitHttp::start() else { return };
    let (alice, bob) = (token_new("alice"), token_new("bob"));
    let tokens = TokenFile::of(&[&alice, &bob]);
    let (_bridge, _runner) = split.services(&[], &[], &["--warm", "0"]);
    let (_first, first_url) = split.frontend(&tokens).await;
    let (_second, second_url) = split.frontend(&tokens).await;

    let client = connect_as(&first_url, &alice, ()).await;
    let result = run_python(&client, WRITE_BOTH).await;
    let report = support::report(&result);
    assert_eq!(report["stdout"], "written\n", "{report}");
    assert!(report.get("files_notes").is_none(), "every file handed out: {report}");
    let links = links(&result);
    let names: Vec<&str> = links.iter().map(|l| l.0.as_str()).collect();
    assert_eq!(names, ["table.csv", "plots/chart.png"], "{result:?}");
    let (csv, png) = (csv_text(), png_bytes());
    assert_eq!(String::from_utf8(read_back(&client, &links[0].1).await).unwrap(), csv);
    assert!(read_back(&client, &links[1].1).await == png, "the PNG read back differs");
    client.cancel().await.ok();

    // Another frontend replica serves the same links (the shared bucket).
    let through_second = connect_as(&second_url, &alice, ()).await;
    assert!(read_back(&through_second, &links[1].1).await == png, "the second replica's PNG differs");
    through_second.cancel().await.ok();

    // Bob: the same answer as for a URI that never existed.
    let bob_client = connect_as(&first_url, &bob, ()).await;
    for uri in [links[0].1.clone(), links[1].1.clone()] {
        let refused = bob_client.read_resource(ReadResourceRequestParams::new(uri.clone())).await.unwrap_err();
        let text = refused.to_string();
        assert!(text.contains(&format!("unknown resource: {uri} (no such file, or expired)")), "{text}");
    }
    bob_client.cancel().await.ok();
}
