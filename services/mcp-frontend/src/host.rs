//! The syntax of the authority a request names, checked before anything
//! else on the HTTP server (`/mcp`, the console, the metadata document).
//!
//! The DNS-rebinding check (the transport's and the console's
//! `--allowed-host` rule) compares a request's host with the hosts
//! allowed. It parses the `Host` header leniently: `[::1].evil.com` reads
//! as `[::1]`, `evil.com@127.0.0.1` as `127.0.0.1`, `127.0.0.1:abc` as
//! `127.0.0.1` with no port. So a value no client sends would pass as a
//! loopback host. Here every request is first held to RFC 9112 §3.2 and
//! RFC 3986 §3.2: `Host = uri-host [ ":" port ]`, where `uri-host` is an
//! IPv6 address in brackets, an IPv4 address or a registered name
//! (unreserved characters, percent-encodings and sub-delimiters), and the
//! port is digits (at most 65535); no user information. A request with a
//! malformed `Host`, several `Host` fields, or none over HTTP/1.1 gets 400,
//! as RFC 9112 §3.2 requires.
//!
//! A request whose target is in absolute form (`POST http://evil.com/mcp`)
//! is judged by the target's authority, not by its `Host` header (RFC 9112
//! §3.2.2: the server MUST ignore `Host` then): the authority is checked
//! as above (user information refused, RFC 9110 §4.2.4) and replaces the
//! `Host` header, so every later check sees the host the request really
//! names. The same holds for HTTP/2's `:authority`.

use std::net::Ipv6Addr;

use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{Service, ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderValue};
use actix_web::http::{StatusCode, Version};
use actix_web::{Error, HttpResponse};

/// Why an authority is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthorityError {
    /// No host at all.
    #[error("the host is empty")]
    Empty,
    /// User information (`user@host`), which an HTTP authority may not hold.
    #[error("the authority holds user information (`user@`), which HTTP does not allow")]
    UserInfo,
    /// A bracketed host that is not an IPv6 address, or text after it.
    #[error("a host in brackets must be an IPv6 address, followed by nothing but a port")]
    Bracket,
    /// A character a host name may not hold.
    #[error("the host holds the character {0:?}, which a host name may not hold")]
    Character(char),
    /// A `%` not followed by two hex digits.
    #[error("the host holds a `%` not followed by two hex digits")]
    Percent,
    /// A port that is not a number of at most 65535.
    #[error("the port {0:?} is not a number from 0 to 65535")]
    Port(String),
}

/// Check `value` as an HTTP authority (`uri-host [":" port]`, RFC 9112
/// §3.2); `Ok` for a well-formed one.
pub fn check_authority(value: &str) -> Result<(), AuthorityError> {
    if value.is_empty() {
        return Err(AuthorityError::Empty);
    }
    if value.contains('@') {
        return Err(AuthorityError::UserInfo);
    }
    let port = if let Some(rest) = value.strip_prefix('[') {
        let (inside, after) = rest.split_once(']').ok_or(AuthorityError::Bracket)?;
        if inside.parse::<Ipv6Addr>().is_err() {
            return Err(AuthorityError::Bracket);
        }
        match after {
            "" => None,
            _ => Some(after.strip_prefix(':').ok_or(AuthorityError::Bracket)?),
        }
    } else {
        let (host, port) = match value.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (value, None),
        };
        check_reg_name(host)?;
        port
    };
    if let Some(port) = port {
        // RFC 3986 allows an empty port; a non-empty one is digits.
        let number = port.len() <= 5
            && port.bytes().all(|b| b.is_ascii_digit())
            && port.parse::<u32>().is_ok_and(|p| p <= 65535);
        if !port.is_empty() && !number {
            return Err(AuthorityError::Port(port.chars().take(20).collect()));
        }
    }
    Ok(())
}

/// An IPv4 address or a registered name (RFC 3986 `reg-name`: unreserved,
/// percent-encoded and sub-delimiter characters), not empty.
fn check_reg_name(host: &str) -> Result<(), AuthorityError> {
    if host.is_empty() {
        return Err(AuthorityError::Empty);
    }
    let bytes = host.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'%' => {
                let hex = bytes.get(i + 1..i + 3).is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit));
                if !hex {
                    return Err(AuthorityError::Percent);
                }
                i += 3;
                continue;
            }
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {}
            b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'=' => {}
            _ => return Err(AuthorityError::Character(host[i..].chars().next().unwrap_or('?'))),
        }
        i += 1;
    }
    Ok(())
}

/// What a request's authority is, or why it is refused (the answer's
/// text).
fn authority_of(request: &ServiceRequest) -> Result<Option<String>, String> {
    let uri = request.uri();
    if let Some(authority) = uri.authority() {
        // The absolute form (or HTTP/2's `:authority`) decides.
        let text = authority.as_str();
        check_authority(text).map_err(|e| format!("the request target's authority is malformed: {e}"))?;
        return Ok(Some(text.to_string()));
    }
    let mut hosts = request.headers().get_all(header::HOST);
    let Some(first) = hosts.next() else {
        return match request.version() {
            Version::HTTP_09 | Version::HTTP_10 => Ok(None),
            _ => Err("the request has no Host header".into()),
        };
    };
    if hosts.next().is_some() {
        return Err("the request has more than one Host header".into());
    }
    let text = first.to_str().map_err(|_| "the Host header is not text".to_string())?;
    check_authority(text).map_err(|e| format!("the Host header is malformed: {e}"))?;
    Ok(None)
}

/// The check as actix-web middleware (`App::wrap_fn`): a request naming a
/// malformed authority gets 400 and goes no further; an absolute-form
/// target's authority becomes the request's `Host`.
pub(crate) fn checked<S, B>(
    mut request: ServiceRequest,
    service: &S,
) -> impl Future<Output = Result<ServiceResponse<EitherBody<B>>, Error>> + use<S, B>
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = Error>,
    B: MessageBody,
{
    let verdict = authority_of(&request);
    let next = match verdict {
        Ok(Some(authority)) => match HeaderValue::from_str(&authority) {
            Ok(value) => {
                request.headers_mut().insert(header::HOST, value);
                Ok(service.call(request))
            }
            Err(_) => Err((request, "the request target's authority is not a header value".to_string())),
        },
        Ok(None) => Ok(service.call(request)),
        Err(why) => Err((request, why)),
    };
    async move {
        match next {
            Ok(answer) => Ok(answer.await?.map_into_left_body()),
            Err((request, why)) => {
                tracing::info!(peer = ?request.peer_addr(), %why, "refused a request naming a malformed host");
                let body = serde_json::json!({"error": "bad_host", "error_description": why});
                let answer = HttpResponse::build(StatusCode::BAD_REQUEST)
                    .content_type("application/json")
                    .insert_header((header::CONNECTION, "close"))
                    .body(body.to_string());
                Ok(request.into_response(answer).map_into_right_body())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn well_formed_authorities_pass() {
        for good in [
            "127.0.0.1",
            "127.0.0.1:8080",
            "localhost",
            "LOCALHOST:1",
            "[::1]",
            "[::1]:3000",
            "[2001:db8::7]:443",
            "mcp.example.com",
            "mcp-1.example.com:443",
            "a_b.example",
            "127.0.0.1:",
            "%41bc",
        ] {
            assert_eq!(check_authority(good), Ok(()), "{good}");
        }
    }

    #[test]
    fn the_malformed_hosts_of_issue_29_are_refused_each_saying_why() {
        let cases = [
            ("[::1].evil.com", AuthorityError::Bracket),
            ("[127.0.0.1].evil.com", AuthorityError::Bracket),
            ("[localhost]", AuthorityError::Bracket),
            ("evil.com@127.0.0.1", AuthorityError::UserInfo),
            ("a:b@localhost", AuthorityError::UserInfo),
            ("127.0.0.1:abc", AuthorityError::Port("abc".into())),
            ("127.0.0.1:-1", AuthorityError::Port("-1".into())),
            ("127.0.0.1:65536", AuthorityError::Port("65536".into())),
            ("127.0.0.1:80:80", AuthorityError::Port("80:80".into())),
            ("", AuthorityError::Empty),
            (":80", AuthorityError::Empty),
            ("evil.com/x", AuthorityError::Character('/')),
            ("evil com", AuthorityError::Character(' ')),
            ("[::1", AuthorityError::Bracket),
            ("::1", AuthorityError::Empty),
            ("%4", AuthorityError::Percent),
        ];
        for (bad, why) in cases {
            assert_eq!(check_authority(bad), Err(why), "{bad}");
        }
    }
}
