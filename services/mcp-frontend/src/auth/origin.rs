//! The `Origin` check of the streamable HTTP transport: a request a browser
//! sends from a web page carries the page's origin, and a page the operator
//! did not name must not drive the server (with the `Host` check, against
//! DNS rebinding). Clients that are not browsers send no `Origin`, so a
//! request without one passes. A request from a loopback origin
//! (`localhost`, `127.0.0.0/8`, `[::1]`, any scheme and port) to a server
//! listening on a loopback address passes too: a page on this machine that
//! reaches a loopback server is as local as the server. Any other origin
//! not listed with `--allowed-origin` (none by default) is refused with 403;
//! so is a loopback origin at a server listening on another address, where
//! a loopback origin says nothing about who sent the request.

use std::net::{IpAddr, SocketAddr};

/// The origins allowed (`scheme://host[:port]`, compared without case and
/// without a trailing slash).
#[derive(Debug, Clone, Default)]
pub struct Origins {
    allowed: Vec<String>,
}

impl Origins {
    /// Allow these origins.
    pub fn new(allowed: &[String]) -> Self {
        Self { allowed: allowed.iter().map(|o| normal(o)).collect() }
    }

    /// Whether a request with this `Origin` header (if any), arriving at
    /// the server's address `local` (unknown: `None`), may go on.
    pub fn admits(&self, origin: Option<&str>, local: Option<SocketAddr>) -> bool {
        match origin {
            None => true,
            Some(origin) => {
                self.allowed.iter().any(|a| *a == normal(origin))
                    || (local.is_some_and(|l| l.ip().is_loopback()) && is_loopback_origin(origin))
            }
        }
    }
}

/// Whether `origin` (`scheme://host[:port]`) names a loopback host.
fn is_loopback_origin(origin: &str) -> bool {
    let Ok(uri) = origin.trim().parse::<http::Uri>() else { return false };
    if uri.scheme().is_none() || uri.path_and_query().is_some_and(|p| !matches!(p.as_str(), "" | "/")) {
        return false;
    }
    let Some(host) = uri.host() else { return false };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost") || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

fn normal(origin: &str) -> String {
    origin.trim().trim_end_matches('/').to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(addr: &str) -> Option<SocketAddr> {
        Some(addr.parse().unwrap())
    }

    #[test]
    fn only_listed_origins_and_requests_without_one_pass() {
        let none = Origins::new(&[]);
        let public = at("10.1.2.3:8080");
        assert!(none.admits(None, public));
        assert!(!none.admits(Some("https://evil.example"), public));
        assert!(!none.admits(Some("null"), public));
        let some = Origins::new(&["https://app.example.com/".into()]);
        assert!(some.admits(Some("HTTPS://app.example.com"), public));
        assert!(!some.admits(Some("https://app.example.com.evil.example"), public));
        assert!(!some.admits(Some("http://app.example.com"), public));
    }

    #[test]
    fn a_loopback_origin_passes_at_a_loopback_server_and_nowhere_else() {
        let none = Origins::new(&[]);
        for local in [at("127.0.0.1:3000"), at("[::1]:3000")] {
            for origin in [
                "http://localhost:3000",
                "http://LOCALHOST",
                "https://127.0.0.1:9",
                "http://127.8.9.10",
                "http://[::1]:3000/",
            ] {
                assert!(none.admits(Some(origin), local), "{origin} at {local:?}");
            }
            for origin in [
                "http://evil.com",
                "http://localhost.evil.com",
                "http://127.0.0.1.nip.io",
                "null",
                "localhost",
                "http://[::2]",
                "http://localhost/x",
            ] {
                assert!(!none.admits(Some(origin), local), "{origin} at {local:?}");
            }
        }
        for local in [at("0.0.0.0:3000"), at("192.168.1.5:3000"), None] {
            assert!(!none.admits(Some("http://localhost:3000"), local), "a loopback origin at {local:?}");
        }
    }
}
