//! TLS for MCP over HTTP without a proxy (`--tls-cert FILE --tls-key FILE`):
//! reads the certificate chain and the private key from PEM files and makes
//! the rustls server configuration actix-web listens with.
//!
//! Both files are read once, at startup; any fault stops startup naming the
//! file and what is wrong with it (unreadable, not PEM, no certificate, no
//! key, a key that does not belong to the certificate). The crypto provider
//! is `ring`, the one the rest of the workspace uses (async-nats): two
//! providers in one process make rustls refuse to pick one.
//!
//! TLS protects the bytes on the wire (tokens, code, results) and proves the
//! server's name to clients that check it; it does not say who the client
//! is: authentication stays with `--auth-tokens` or `--oauth-issuer`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// The PEM files to serve TLS with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain, the server's own certificate first
    /// (`--tls-cert`).
    pub cert: PathBuf,
    /// Its private key, PKCS#8, PKCS#1 or SEC1 (`--tls-key`).
    pub key: PathBuf,
}

/// Why TLS cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file cannot be read.
    #[error("cannot read the TLS {what} file {}: {reason}", path.display())]
    Unreadable {
        /// `certificate` or `key`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        reason: std::io::Error,
    },
    /// A file is not what it should hold.
    #[error("the TLS {what} file {}: {reason}", path.display())]
    Invalid {
        /// `certificate` or `key`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The two files do not make a usable pair.
    #[error("the TLS certificate {} and key {} cannot serve together: {reason}", cert.display(), key.display())]
    Pair {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// rustls's reason.
        reason: String,
    },
}

fn read(what: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|reason| TlsError::Unreadable { what, path: path.to_path_buf(), reason })
}

/// The certificates of `path`, in order.
fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read("certificate", path)?;
    let invalid = |reason: String| TlsError::Invalid { what: "certificate", path: path.to_path_buf(), reason };
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(format!("not valid PEM ({e})")))?;
    if certs.is_empty() {
        return Err(invalid("it holds no PEM certificate (a -----BEGIN CERTIFICATE----- block)".into()));
    }
    Ok(certs)
}

/// The private key of `path`.
fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let pem = read("key", path)?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| {
        let reason = match e {
            rustls::pki_types::pem::Error::NoItemsFound => {
                "it holds no PEM private key (a -----BEGIN PRIVATE KEY-----, RSA PRIVATE KEY or EC PRIVATE KEY block)"
                    .to_string()
            }
            other => format!("not valid PEM ({other})"),
        };
        TlsError::Invalid { what: "key", path: path.to_path_buf(), reason }
    })
}

/// The rustls server configuration of `files` (HTTP/1.1 over TLS 1.2 or
/// 1.3, no client certificates).
pub fn server_config(files: &TlsFiles) -> Result<rustls::ServerConfig, TlsError> {
    let certs = certificates(&files.cert)?;
    let key = private_key(&files.key)?;
    let pair = |reason: String| TlsError::Pair { cert: files.cert.clone(), key: files.key.clone(), reason };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| pair(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| match e {
            rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch) => {
                pair("the key does not belong to the certificate (their public keys differ)".into())
            }
            other => pair(other.to_string()),
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str, contents: &str) -> PathBuf {
        let path = std::env::temp_dir().join(format!("code-mode-tls-{}-{name}", uuid::Uuid::new_v4().simple()));
        std::fs::write(&path, contents).unwrap();
        path
    }

    #[test]
    fn a_missing_or_empty_or_broken_file_is_refused_naming_it_and_why() {
        let missing = TlsFiles { cert: "/nonexistent/cert.pem".into(), key: "/nonexistent/key.pem".into() };
        let e = server_config(&missing).unwrap_err().to_string();
        assert!(e.contains("cannot read the TLS certificate file /nonexistent/cert.pem"), "{e}");

        let empty = temp("empty.pem", "just text\n");
        let e = server_config(&TlsFiles { cert: empty.clone(), key: empty.clone() }).unwrap_err().to_string();
        assert!(e.contains(&empty.display().to_string()) && e.contains("holds no PEM certificate"), "{e}");

        let broken = temp("broken.pem", "-----BEGIN CERTIFICATE-----\n!!!not base64!!!\n-----END CERTIFICATE-----\n");
        let e = server_config(&TlsFiles { cert: broken.clone(), key: broken.clone() }).unwrap_err().to_string();
        assert!(e.contains(&broken.display().to_string()) && e.contains("not valid PEM"), "{e}");
        for path in [empty, broken] {
            let _ = std::fs::remove_file(path);
        }
    }
}
