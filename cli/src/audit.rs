//! The audit record from the command line: opening the sink `--audit`
//! names (for the services this process runs), `audit verify`, `audit
//! show` and `policy replay`.

use std::time::Duration;

use anyhow::{Context, bail};
use code_mode_audit::jetstream::{self, StreamConfig};
use code_mode_audit::show::{Filter, read_files, readable, select};
use code_mode_audit::verify::{SourceLine, VerifyOptions, verify};
use code_mode_audit::{AuditSink, SinkOptions};
use code_mode_core::nats::{NatsOptions, NatsTls, NatsTransport};

use crate::cli::{AuditArgs, AuditCommand, AuditCommandArgs, AuditSourceArgs, PolicyReplayArgs};

/// A command's verdict as an exit status (after it printed why): `audit
/// verify` exits 1 on a broken chain, `policy replay` 1 when something
/// would change; both 2 when they could not read or replay.
#[derive(Debug, thiserror::Error)]
#[error("exit status {0}")]
pub struct Exit(pub u8);

/// Open the sink `--audit` names for `service` (`nats` uses `nats`, the
/// service's own connection); `None` without `--audit`. A stream it creates
/// gets `replicas` replicas.
pub async fn open_sink(
    args: &AuditArgs,
    service: &str,
    nats: Option<&async_nats::Client>,
    replicas: usize,
) -> anyhow::Result<Option<AuditSink>> {
    let Some(target) = args.audit.as_deref() else { return Ok(None) };
    // The options' parsers hold each value to its range (`crate::ranges`).
    let options = SinkOptions { checkpoint_interval: args.audit_checkpoint, ..SinkOptions::for_service(service) };
    let stream = StreamConfig {
        retention: (args.audit_retention_days > 0).then(|| Duration::from_secs(args.audit_retention_days * 86_400)),
        replicas,
        ..StreamConfig::default()
    };
    let sink = match target {
        "stderr" => AuditSink::stderr(options).await,
        "nats" => {
            let Some(client) = nats else {
                bail!(
                    "--audit nats writes over the service's own NATS connection: with serve or run give nats://HOST:PORT"
                )
            };
            AuditSink::nats(client.clone(), stream, options).await
        }
        url if url.starts_with("nats://") || url.starts_with("tls://") => {
            let transport = NatsTransport::connect(&NatsOptions {
                url: url.to_string(),
                credentials: nats_credentials()?,
                name: Some(format!("code-mode-{service}-audit")),
                inbox_prefix: Some(format!("_INBOX.{service}")),
                tls: tls_from_env(),
            })
            .await
            .context("--audit: connecting to NATS")?;
            AuditSink::nats(transport.client().clone(), stream, options).await
        }
        file => {
            let rotate = (args.audit_rotate_bytes > 0).then_some(args.audit_rotate_bytes);
            AuditSink::file(std::path::Path::new(file), rotate, options).await
        }
    };
    Ok(Some(sink.context("--audit")?))
}

/// TLS files from `CODE_MODE_NATS_CA`, `CODE_MODE_NATS_CERT` and
/// `CODE_MODE_NATS_KEY` (the services' `--nats-ca`, `--nats-cert`,
/// `--nats-key`), for the connections opened here by URL.
fn tls_from_env() -> NatsTls {
    let path = |name: &str| std::env::var_os(name).map(std::path::PathBuf::from);
    NatsTls { ca: path("CODE_MODE_NATS_CA"), cert_and_key: path("CODE_MODE_NATS_CERT").zip(path("CODE_MODE_NATS_KEY")) }
}

/// User and password from `CODE_MODE_NATS_USER` and `CODE_MODE_NATS_PASSWORD`.
fn nats_credentials() -> anyhow::Result<Option<(String, String)>> {
    match (std::env::var("CODE_MODE_NATS_USER").ok(), std::env::var("CODE_MODE_NATS_PASSWORD").ok()) {
        (Some(u), Some(p)) => Ok(Some((u, p))),
        (None, None) => Ok(None),
        _ => bail!("CODE_MODE_NATS_USER and CODE_MODE_NATS_PASSWORD go together"),
    }
}

/// The records of the files, or of the stream.
async fn read(source: &AuditSourceArgs) -> anyhow::Result<(Vec<SourceLine>, bool)> {
    let Some(url) = &source.nats else { return Ok((read_files(&source.files)?, false)) };
    let credentials = nats_credentials()?;
    // The deployment's users may read replies only under their own inbox.
    let inbox_prefix = credentials.as_ref().map(|(user, _)| format!("_INBOX.{user}"));
    let transport = NatsTransport::connect(&NatsOptions {
        url: url.clone(),
        credentials,
        name: Some("code-mode-audit".into()),
        inbox_prefix,
        tls: tls_from_env(),
    })
    .await?;
    let (records, trimmed) = jetstream::read_all(transport.client().clone(), &source.stream).await?;
    let name = format!("nats:{}", source.stream);
    let lines = records.into_iter().map(|(seq, text)| SourceLine { source: name.clone(), line: seq, text }).collect();
    Ok((lines, trimmed))
}

/// `audit verify` and `audit show`.
pub async fn command(args: AuditCommandArgs) -> anyhow::Result<()> {
    match args.command {
        AuditCommand::Verify(args) => {
            let mut expect = Vec::new();
            for c in &args.checkpoints {
                let Some((seq, hash)) = c.split_once(':') else { bail!("--checkpoint {c}: expected SEQ:HASH") };
                let seq: u64 = seq.parse().with_context(|| format!("--checkpoint {c}: {seq:?} is not a number"))?;
                expect.push((seq, hash.to_string()));
            }
            let (lines, trimmed) = match read(&args.source).await {
                Ok(read) => read,
                Err(e) => {
                    eprintln!("code-mode: audit verify: {e:#}");
                    return Err(Exit(2).into());
                }
            };
            // A stream whose oldest records aged out starts mid-chain.
            let report = verify(&lines, &VerifyOptions { partial: args.partial || trimmed, expect });
            let what = match &args.source.nats {
                Some(_) => format!("nats:{}", args.source.stream),
                None => args.source.files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(" "),
            };
            match &report.problem {
                None => {
                    println!(
                        "{what}: {} records, seq {} to {}, {} checkpoints, head {}: the chain holds",
                        report.records,
                        report.first_seq.unwrap_or(0),
                        report.last_seq.unwrap_or(0),
                        report.checkpoints,
                        report.head.as_deref().unwrap_or("-"),
                    );
                    Ok(())
                }
                Some(problem) => {
                    println!("{what}: the chain is broken at {problem}");
                    Err(Exit(1).into())
                }
            }
        }
        AuditCommand::Show(args) => {
            let (lines, _) = read(&args.source).await?;
            let filter = Filter {
                session: args.session,
                identity: args.identity,
                tool: args.tool,
                decision: args.decision,
                kind: args.kind,
            };
            for record in select(&lines, &filter) {
                if args.json {
                    println!("{}", code_mode_audit::record::canonical(&record));
                } else {
                    println!("{}", readable(&record));
                }
            }
            Ok(())
        }
    }
}

/// `policy replay`: exit 0 when nothing would change, 1 when something
/// would, 2 when it could not replay (so a CI gate tells them apart).
pub async fn replay(args: PolicyReplayArgs) -> anyhow::Result<()> {
    match replay_report(args).await {
        Ok(changed) if changed => Err(Exit(1).into()),
        Ok(_) => Ok(()),
        Err(e) => {
            eprintln!("code-mode: policy replay: {e:#}");
            Err(Exit(2).into())
        }
    }
}

async fn replay_report(args: PolicyReplayArgs) -> anyhow::Result<bool> {
    let lines = read_files(&args.files)?;
    let records: Vec<serde_json::Value> = lines.iter().filter_map(|l| serde_json::from_str(&l.text).ok()).collect();
    let report = code_mode_bridge::replay::replay(&args.policy, &records, args.server.as_deref()).await?;
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{report}");
    }
    Ok(report.changes_anything())
}
