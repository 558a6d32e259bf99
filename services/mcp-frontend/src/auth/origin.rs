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
//!
//! Before any of that, the value must be what RFC 6454 §7 says an `Origin`
//! is: one serialized origin (§6.2), `scheme "://" host [":" port]` and
//! nothing else. A lenient URI parser reads `http://localhost:3000.evil.com`
//! as host `localhost`, `http://[::1].evil.com` as `[::1]` and
//! `http://evil.com@localhost` as `localhost`, so values no browser sends
//! would pass as loopback origins (issue 36). Here the authority is held to
//! the rules the `Host` check uses ([`crate::host::check_authority`]: no
//! user information, a port of digits up to 65535, a bracketed host exactly
//! an IPv6 address), the port may not be empty, and nothing may follow it,
//! not even `/`. One `Origin` field only. `null` (an opaque origin, §6.1:
//! a sandboxed frame, a file) is well formed but names no site: it is never
//! allowed. A value that is not a serialized origin gets 403 at `/mcp` and
//! at `/console` alike ([`of_request`]).

use std::net::{IpAddr, SocketAddr};

use actix_web::http::header::{self, HeaderMap};

use crate::host::{AuthorityError, check_authority};

/// Why a value is not a serialized origin.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OriginError {
    /// `null`: an opaque origin, which names no site.
    #[error("`null` is an opaque origin (a sandboxed page, a file), which names no site")]
    Opaque,
    /// No `scheme://`, or a scheme with other characters.
    #[error("an origin starts with a scheme (a letter, then letters, digits, `+`, `-` or `.`) and `://`")]
    Scheme,
    /// A path, query or fragment after the authority (a trailing `/` too).
    #[error("an origin ends after its host and port, but {0:?} follows (no path, query or fragment, not even `/`)")]
    Trailing(char),
    /// `host:` with no digits.
    #[error("the port is empty")]
    EmptyPort,
    /// The authority is malformed.
    #[error("{0}")]
    Authority(#[from] AuthorityError),
    /// More than one `Origin` field.
    #[error("the request has more than one Origin header")]
    Several,
    /// A value that is not visible ASCII.
    #[error("the Origin header is not text")]
    NotText,
}

/// One serialized origin: scheme and host in lower case, the port `None`
/// when absent or the scheme's default (`http` 80, `https` 443), as RFC
/// 6454 compares origins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    scheme: String,
    /// As written: an IPv6 address keeps its brackets.
    host: String,
    port: Option<u16>,
}

impl std::str::FromStr for Origin {
    type Err = OriginError;

    fn from_str(value: &str) -> Result<Self, OriginError> {
        if value == "null" {
            return Err(OriginError::Opaque);
        }
        let (scheme, rest) = value.split_once("://").ok_or(OriginError::Scheme)?;
        let mut letters = scheme.chars();
        let scheme_ok = letters.next().is_some_and(|c| c.is_ascii_alphabetic())
            && letters.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
        if !scheme_ok {
            return Err(OriginError::Scheme);
        }
        if let Some(c) = rest.chars().find(|c| matches!(c, '/' | '?' | '#')) {
            return Err(OriginError::Trailing(c));
        }
        check_authority(rest)?;
        let (host, port) = match rest.find(']') {
            // Checked: `[` IPv6 `]`, then nothing or `:` and the port.
            Some(end) => (&rest[..=end], rest[end + 1..].strip_prefix(':')),
            None => match rest.split_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (rest, None),
            },
        };
        let scheme = scheme.to_ascii_lowercase();
        let port = match port {
            None => None,
            Some("") => return Err(OriginError::EmptyPort),
            // Checked: digits, at most 65535.
            Some(port) => Some(port.parse::<u16>().map_err(|_| AuthorityError::Port(port.to_string()))?),
        };
        let default = match scheme.as_str() {
            "http" => Some(80),
            "https" => Some(443),
            _ => None,
        };
        let port = port.filter(|p| Some(*p) != default);
        Ok(Self { scheme, host: host.to_ascii_lowercase(), port })
    }
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}://{}", self.scheme, self.host)?;
        match self.port {
            Some(port) => write!(f, ":{port}"),
            None => Ok(()),
        }
    }
}

impl Origin {
    /// Whether the host is a loopback one: `localhost`, `127.0.0.0/8`,
    /// `[::1]`.
    pub fn is_loopback(&self) -> bool {
        let host = self.host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(&self.host);
        host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
    }
}

/// The origin a request's headers name: `Ok(None)` without an `Origin`
/// field, `Err` for a value that is not one serialized origin (or several
/// fields).
pub fn of_request(headers: &HeaderMap) -> Result<Option<Origin>, OriginError> {
    let mut fields = headers.get_all(header::ORIGIN);
    let Some(first) = fields.next() else { return Ok(None) };
    if fields.next().is_some() {
        return Err(OriginError::Several);
    }
    first.to_str().map_err(|_| OriginError::NotText)?.parse().map(Some)
}

/// The origins allowed (`--allowed-origin`).
#[derive(Debug, Clone, Default)]
pub struct Origins {
    allowed: Vec<Origin>,
}

impl Origins {
    /// Allow these origins (`scheme://host[:port]`, compared without case;
    /// a trailing `/` is forgiven here, as URLs are often written so). An
    /// entry that is not an origin: `Err` with the entry and why.
    pub fn new(allowed: &[String]) -> Result<Self, (String, OriginError)> {
        let allowed = allowed
            .iter()
            .map(|entry| {
                let trimmed = entry.trim();
                trimmed.strip_suffix('/').unwrap_or(trimmed).parse::<Origin>().map_err(|e| (entry.clone(), e))
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { allowed })
    }

    /// Whether a request from `origin` (a well-formed one, or none),
    /// arriving at the server's address `local` (unknown: `None`), may go
    /// on.
    pub fn admits(&self, origin: Option<&Origin>, local: Option<SocketAddr>) -> bool {
        match origin {
            None => true,
            Some(origin) => {
                self.allowed.contains(origin) || (local.is_some_and(|l| l.ip().is_loopback()) && origin.is_loopback())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(addr: &str) -> Option<SocketAddr> {
        Some(addr.parse().unwrap())
    }

    fn admits(origins: &Origins, origin: &str, local: Option<SocketAddr>) -> bool {
        origin.parse::<Origin>().is_ok_and(|o| origins.admits(Some(&o), local))
    }

    #[test]
    fn only_listed_origins_and_requests_without_one_pass() {
        let none = Origins::new(&[]).unwrap();
        let public = at("10.1.2.3:8080");
        assert!(none.admits(None, public));
        assert!(!admits(&none, "https://evil.example", public));
        let some = Origins::new(&["https://app.example.com/".into()]).unwrap();
        assert!(admits(&some, "HTTPS://app.example.com", public));
        assert!(admits(&some, "https://app.example.com:443", public), "the default port is the same origin");
        assert!(!admits(&some, "https://app.example.com:8443", public));
        assert!(!admits(&some, "https://app.example.com.evil.example", public));
        assert!(!admits(&some, "http://app.example.com", public));
        assert!(!admits(&some, "https://app.example.com/", public), "a value with a path is no origin");
    }

    #[test]
    fn an_allowed_origin_that_is_not_one_is_named_with_why() {
        for (entry, why) in [
            ("null", OriginError::Opaque),
            ("app.example.com", OriginError::Scheme),
            ("https://app.example.com/app", OriginError::Trailing('/')),
            ("https://user@app.example.com", OriginError::Authority(AuthorityError::UserInfo)),
            ("*", OriginError::Scheme),
        ] {
            assert_eq!(Origins::new(&[entry.to_string()]).unwrap_err(), (entry.to_string(), why), "{entry}");
        }
    }

    #[test]
    fn a_loopback_origin_passes_at_a_loopback_server_and_nowhere_else() {
        let none = Origins::new(&[]).unwrap();
        for local in [at("127.0.0.1:3000"), at("[::1]:3000")] {
            for origin in [
                "http://localhost:3000",
                "http://LOCALHOST",
                "https://127.0.0.1:9",
                "http://127.8.9.10",
                "http://[::1]:3000",
                "http://[0:0:0:0:0:0:0:1]",
            ] {
                assert!(admits(&none, origin, local), "{origin} at {local:?}");
            }
            for origin in [
                "http://evil.com",
                "http://localhost.evil.com",
                "http://127.0.0.1.nip.io",
                "http://[::2]",
                "http://[::ffff:127.0.0.1]",
            ] {
                assert!(!admits(&none, origin, local), "{origin} at {local:?}");
            }
        }
        for local in [at("0.0.0.0:3000"), at("192.168.1.5:3000"), None] {
            assert!(!admits(&none, "http://localhost:3000", local), "a loopback origin at {local:?}");
        }
    }

    #[test]
    fn values_that_are_not_one_serialized_origin_are_refused_saying_why() {
        let cases = [
            ("http://localhost:3000.evil.com", OriginError::Authority(AuthorityError::Port("3000.evil.com".into()))),
            ("http://[::1].evil.com:3000", OriginError::Authority(AuthorityError::Bracket)),
            ("http://user@localhost:3000", OriginError::Authority(AuthorityError::UserInfo)),
            ("http://evil.com@localhost", OriginError::Authority(AuthorityError::UserInfo)),
            ("http://localhost:abc", OriginError::Authority(AuthorityError::Port("abc".into()))),
            ("http://localhost:65536", OriginError::Authority(AuthorityError::Port("65536".into()))),
            ("http://localhost:", OriginError::EmptyPort),
            ("http://[::1]:", OriginError::EmptyPort),
            ("http://localhost/", OriginError::Trailing('/')),
            ("http://localhost:3000/x", OriginError::Trailing('/')),
            ("http://localhost?x", OriginError::Trailing('?')),
            ("http://localhost#x", OriginError::Trailing('#')),
            ("http://[localhost]", OriginError::Authority(AuthorityError::Bracket)),
            ("http://[::1", OriginError::Authority(AuthorityError::Bracket)),
            ("http://", OriginError::Authority(AuthorityError::Empty)),
            ("http://localhost http://evil.com", OriginError::Trailing('/')),
            ("http://local host", OriginError::Authority(AuthorityError::Character(' '))),
            ("localhost", OriginError::Scheme),
            ("//localhost", OriginError::Scheme),
            ("1http://localhost", OriginError::Scheme),
            ("null", OriginError::Opaque),
        ];
        for (value, why) in cases {
            assert_eq!(value.parse::<Origin>(), Err(why), "{value}");
        }
    }

    #[test]
    fn a_request_names_at_most_one_origin() {
        let mut headers = HeaderMap::new();
        assert_eq!(of_request(&headers), Ok(None));
        headers.insert(header::ORIGIN, header::HeaderValue::from_static("http://localhost:3000"));
        assert!(of_request(&headers).unwrap().unwrap().is_loopback());
        headers.append(header::ORIGIN, header::HeaderValue::from_static("http://evil.com"));
        assert_eq!(of_request(&headers), Err(OriginError::Several));
        let mut bytes = HeaderMap::new();
        bytes.insert(header::ORIGIN, header::HeaderValue::from_bytes(b"http://\xffhost").unwrap());
        assert_eq!(of_request(&bytes), Err(OriginError::NotText));
    }
}
