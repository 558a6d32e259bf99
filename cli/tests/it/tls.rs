//! TLS between the services and NATS, and between the nodes of a NATS
//! cluster, as `docs/deploy-multi-host.md` sets it up: certificates made
//! here with the `openssl` command (a CA of the stack, one certificate for
//! the nodes, one for the services, and a stranger's CA), two nats-servers
//! with `deploy/nats-tls.conf` started by `deploy/nats-start.sh`, the
//! bridge on one node and the runner and frontend on the other, so a cell's
//! messages cross the TLS route. Then the attacks: no CA, no client
//! certificate, a stranger's certificate, no TLS settings, and a stranger's
//! nats-server trying to join the cluster with the right route password.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use code_mode_core::nats::{NatsOptions, NatsTls, NatsTransport};
use code_mode_core::testing::{NatsCluster, TempDir};

use crate::support::{self, connect_client, report, run_python};

/// `openssl` with `args` in `dir`; false (after `unavailable`) without it.
pub(crate) fn openssl(dir: &Path, args: &[&str]) -> bool {
    match Command::new("openssl").args(args).current_dir(dir).output() {
        Ok(out) if out.status.success() => true,
        Ok(out) => panic!("openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr)),
        Err(e) => code_mode_core::testing::unavailable("openssl", &e.to_string()),
    }
}

/// A CA (`<ca>.pem`, `<ca>.key`) and certificates it signs.
fn make_ca(dir: &Path, ca: &str) -> bool {
    let subject = format!("/CN={ca}");
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-days",
            "1",
            "-keyout",
            &format!("{ca}.key"),
            "-out",
            &format!("{ca}.pem"),
            "-subj",
            &subject,
        ],
    )
}

/// `<name>.pem` and `<name>.key`, signed by `ca`, with these extensions.
fn make_cert(dir: &Path, ca: &str, name: &str, extensions: &str) -> bool {
    std::fs::write(dir.join(format!("{name}.ext")), extensions).unwrap();
    let subject = format!("/CN={name}");
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.csr"),
            "-subj",
            &subject,
        ],
    ) && openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &format!("{name}.csr"),
            "-CA",
            &format!("{ca}.pem"),
            "-CAkey",
            &format!("{ca}.key"),
            "-CAcreateserial",
            "-days",
            "1",
            "-out",
            &format!("{name}.pem"),
            "-extfile",
            &format!("{name}.ext"),
        ],
    )
}

const NODE: &str = "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n";
const CLIENT: &str = "extendedKeyUsage=clientAuth\n";

fn deploy(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy").join(file)
}

/// The servers' TLS files, as `deploy/nats-tls.conf` reads them.
fn node_env(dir: &Path, ca: &str, node: &str) -> Vec<(String, String)> {
    let file = |f: String| dir.join(f).to_string_lossy().into_owned();
    vec![
        ("CODE_MODE_NATS_TLS_CA".into(), file(format!("{ca}.pem"))),
        ("CODE_MODE_NATS_TLS_CERT".into(), file(format!("{node}.pem"))),
        ("CODE_MODE_NATS_TLS_KEY".into(), file(format!("{node}.key"))),
    ]
}

/// A connection attempt as the bridge's user with these TLS files.
async fn connect(url: &str, password: &str, tls: NatsTls) -> Result<NatsTransport, String> {
    let options = NatsOptions {
        url: url.to_string(),
        credentials: Some(("bridge".into(), password.into())),
        inbox_prefix: Some("_INBOX.bridge".into()),
        tls,
        ..Default::default()
    };
    tokio::time::timeout(Duration::from_secs(20), NatsTransport::connect(&options))
        .await
        .map_err(|_| "no answer within 20 s".to_string())?
        .map_err(|e| e.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_tls_the_services_run_cells_across_a_cluster_whose_clients_and_routes_need_certificates_of_the_stack_ca() {
    if !support::sandbox_available() {
        return;
    }
    let dir = TempDir::new("tls");
    let d = &dir.0;
    if !(make_ca(d, "stack-ca")
        && make_cert(d, "stack-ca", "node", NODE)
        && make_cert(d, "stack-ca", "service", CLIENT)
        && make_ca(d, "stranger-ca")
        && make_cert(d, "stranger-ca", "stranger", CLIENT)
        && make_cert(d, "stranger-ca", "stranger-node", NODE))
    {
        return;
    }
    let Some((cluster, users)) =
        NatsCluster::start_with_config(2, &deploy("nats-tls.conf"), &node_env(d, "stack-ca", "node"))
    else {
        return;
    };
    let routes = |i: usize| cluster.monitor(i, "/routez").map(|r| r["num_routes"].as_u64().unwrap_or(0)).unwrap_or(0);
    assert!(routes(0) > 0, "the two nodes are routed over TLS");
    let tls_url = |i: usize| cluster.url(i).replace("nats://", "tls://");
    let file = |f: &str| d.join(f).to_string_lossy().into_owned();
    let (ca, cert, key) = (file("stack-ca.pem"), file("service.pem"), file("service.key"));
    let tls_args = ["--nats-ca", &ca, "--nats-cert", &cert, "--nats-key", &key];

    // The bridge on node 1, the runner and the frontend on node 2.
    let _bridge = support::spawn_service(&tls_url(0), &users, "bridge", &tls_args, Some(&[]));
    let _runner = support::spawn_service(&tls_url(1), &users, "sandbox-runner", &tls_args, None);
    let mut frontend = tokio::process::Command::new(support::code_mode());
    frontend.arg("frontend").args(["--nats", &tls_url(1)]).args(tls_args);
    frontend.env("CODE_MODE_NATS_USER", "frontend").env("CODE_MODE_NATS_PASSWORD", users.password("frontend"));
    let (client, _) = connect_client(frontend).await;
    let result = run_python(&client, "print(await add({'a': 40, 'b': 2}))").await;
    assert_eq!(report(&result)["stdout"], "{\"sum\":42}\n", "a cell and its tool call crossed TLS and the route");
    client.cancel().await.ok();

    // Without the stack's CA a service does not trust the server, and
    // stops saying so.
    let out = Command::new(support::code_mode())
        .args(["frontend", "--nats", &tls_url(1), "--nats-cert", &cert, "--nats-key", &key])
        .env("CODE_MODE_NATS_USER", "frontend")
        .env("CODE_MODE_NATS_PASSWORD", users.password("frontend"))
        .stdin(std::process::Stdio::null())
        .output()
        .expect("the frontend runs");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && said.contains("cannot connect to NATS"), "{said}");
    assert!(said.contains("UnknownIssuer") || said.contains("certificate"), "it names the certificate: {said}");
    let missing = Command::new(support::code_mode())
        .args(["frontend", "--nats", &tls_url(1), "--nats-ca", "/nonexistent/ca.pem"])
        .env("CODE_MODE_NATS_USER", "frontend")
        .env("CODE_MODE_NATS_PASSWORD", users.password("frontend"))
        .stdin(std::process::Stdio::null())
        .output()
        .expect("the frontend runs");
    let said = String::from_utf8_lossy(&missing.stderr);
    assert!(said.contains("the CA file /nonexistent/ca.pem"), "a missing file is named: {said}");

    // The server refuses, each with the right password: no client
    // certificate, a stranger's certificate, no TLS settings at all (the
    // server demands TLS: the client must upgrade and trusts no server).
    let password = users.password("bridge");
    let stack_ca = NatsTls { ca: Some(d.join("stack-ca.pem")), cert_and_key: None };
    let err = connect(&tls_url(0), password, stack_ca.clone()).await.expect_err("no client certificate: refused");
    assert!(err.contains("CertificateRequired"), "without a client certificate: {err}");
    let stranger = NatsTls {
        ca: Some(d.join("stack-ca.pem")),
        cert_and_key: Some((d.join("stranger.pem"), d.join("stranger.key"))),
    };
    let err = connect(&tls_url(0), password, stranger).await.expect_err("a stranger's certificate: refused");
    assert!(err.contains("UnknownCA"), "with a stranger's certificate: {err}");
    let err = connect(&cluster.url(0), password, NatsTls::default()).await.expect_err("no TLS settings: refused");
    assert!(err.contains("UnknownIssuer"), "without TLS settings: {err}");
    let ours = NatsTls {
        ca: Some(d.join("stack-ca.pem")),
        cert_and_key: Some((d.join("service.pem"), d.join("service.key"))),
    };
    assert!(connect(&tls_url(0), password, ours).await.is_ok(), "the stack's certificate is let in");

    // A stranger's nats-server, with the route password but a certificate
    // of another CA, cannot join the cluster: the routes stay as they were.
    let before = routes(0);
    let Some((stranger_node, _)) =
        NatsCluster::start_joining(&cluster, &deploy("nats-tls.conf"), &node_env(d, "stranger-ca", "stranger-node"))
    else {
        return;
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(routes(0), before, "no route from a node the stack's CA did not sign");
    drop(stranger_node);
}
