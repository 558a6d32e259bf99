//! The console's defences that are not HTML escaping: the session cookie
//! and its flags, the CSRF value derived from the cookie's token (compared
//! in constant time), the `Origin` and `Host` checks, and the headers every
//! console response carries.

use actix_web::HttpRequest;
use actix_web::http::header;

use crate::auth::origin::{self, Origin};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The cookie holding the viewer's bearer token.
pub const COOKIE: &str = "codemode_console";
/// The cookie of a login form (a random value, before any token): the
/// login form's CSRF value derives from it.
pub const LOGIN_COOKIE: &str = "codemode_console_login";
/// How long a console cookie lives in the browser, in seconds (the token
/// may expire sooner: it is checked on every request).
pub const COOKIE_MAX_AGE: u64 = 8 * 3600;
/// Longest token the console takes into a cookie (browsers keep about 4
/// KiB per cookie).
pub const MAX_COOKIE_TOKEN: usize = 3800;

/// What the CSRF value of a token is derived with: a fixed label, so the
/// value is of no use as anything else.
const CSRF_LABEL: &[u8] = b"code-mode console csrf v1\0";

/// The headers on every console response.
pub const HEADERS: [(&str, &str); 4] = [
    (
        "content-security-policy",
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; \
         base-uri 'none'",
    ),
    ("x-content-type-options", "nosniff"),
    // Not `no-referrer`: under it a browser sends `Origin: null` with the
    // console's own forms, and the Origin check would refuse them. Other
    // sites still learn nothing (the console's URLs hold no secret anyway).
    ("referrer-policy", "same-origin"),
    ("cache-control", "no-store"),
];

/// The CSRF value of the forms of a session whose cookie holds `secret`:
/// hex SHA-256 of a fixed label and the secret. It says nothing of the
/// secret, and another site cannot compute it.
pub fn csrf_of(secret: &str) -> String {
    let mut hash = Sha256::new();
    hash.update(CSRF_LABEL);
    hash.update(secret.as_bytes());
    hex::encode(hash.finalize())
}

/// Whether `sent` is the CSRF value of `secret`, compared in constant time.
pub fn csrf_matches(secret: &str, sent: &str) -> bool {
    let expected = csrf_of(secret);
    expected.len() == sent.len() && bool::from(expected.as_bytes().ct_eq(sent.as_bytes()))
}

/// The `Set-Cookie` value starting a console session holding `token`:
/// HttpOnly (no script reads it), SameSite=Strict (no other site's page
/// sends it), Path=/console (`/mcp` never sees it), Secure over TLS.
pub fn session_cookie(token: &str, secure: bool) -> String {
    cookie(COOKIE, token, COOKIE_MAX_AGE, secure)
}

/// A `Set-Cookie` value with the console's flags; `max_age` 0 removes it.
pub fn cookie(name: &str, value: &str, max_age: u64, secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    format!("{name}={value}; Path=/console; HttpOnly; SameSite=Strict; Max-Age={max_age}{secure}")
}

/// The `Set-Cookie` value of an OAuth sign-in in progress
/// ([`super::oauth::COOKIE`], sealed): HttpOnly, SameSite=Lax (the issuer
/// sends the browser back with a top-level GET from its own site, which a
/// Strict cookie would not follow), Path=/console/login (only the start
/// and the callback see it), Secure over TLS; `max_age` 0 removes it.
pub fn sign_in_cookie(value: &str, max_age: u64, secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    format!(
        "{}={value}; Path={}; HttpOnly; SameSite=Lax; Max-Age={max_age}{secure}",
        super::oauth::COOKIE,
        super::oauth::COOKIE_PATH
    )
}

/// The cookie of an OAuth sign-in begun from a connect link: the console
/// path to go on to once signed in (checked again when read).
pub const NEXT_COOKIE: &str = "codemode_console_next";

/// The `Set-Cookie` value of [`NEXT_COOKIE`]: flags and path as the
/// sign-in cookie's; `max_age` 0 (or an empty value) removes it.
pub fn next_cookie(next: &str, max_age: u64, secure: bool) -> String {
    let max_age = if next.is_empty() { 0 } else { max_age };
    let secure = if secure { "; Secure" } else { "" };
    format!(
        "{NEXT_COOKIE}={next}; Path={}; HttpOnly; SameSite=Lax; Max-Age={max_age}{secure}",
        super::oauth::COOKIE_PATH
    )
}

/// Whether `token` can be held in a cookie as is (cookie-octets of RFC
/// 6265: no space, quote, comma, semicolon, backslash or control): a static
/// token (`cm_` and hex) and a JWT (base64url and dots) can.
pub fn cookie_safe(token: &str) -> bool {
    !token.is_empty()
        && token.len() <= MAX_COOKIE_TOKEN
        && token.bytes().all(|b| (0x21..=0x7e).contains(&b) && !b"\",;\\".contains(&b))
}

/// The value of cookie `name` in the request (the last one named so).
pub fn cookie_of(request: &HttpRequest, name: &str) -> Option<String> {
    let mut found = None;
    for value in request.headers().get_all(header::COOKIE) {
        let Ok(text) = value.to_str() else { continue };
        for pair in text.split(';') {
            if let Some((key, value)) = pair.trim().split_once('=')
                && key == name
                && !value.is_empty()
            {
                found = Some(value.to_string());
            }
        }
    }
    found
}

/// A fresh random value (the login cookie), 32 bytes as hex.
pub fn random_hex() -> Option<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).ok()?;
    Some(hex::encode(bytes))
}

/// `host[:port]` of an authority, lower case and without IPv6 brackets,
/// as rmcp's own `Host` check reads it.
fn authority(text: &str) -> Option<(String, Option<u16>)> {
    let parsed = http::uri::Authority::try_from(text.trim()).ok()?;
    Some((parsed.host().trim_matches(['[', ']']).to_ascii_lowercase(), parsed.port_u16()))
}

/// The `Host` values allowed when none is named: loopback, any port (as
/// the MCP transport's default).
const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// Whether the request's `Host` is one the server is reached by: the same
/// rule as the MCP transport's (`--allowed-host`, loopback by default; an
/// entry without a port allows any port).
pub fn host_allowed(request: &HttpRequest, allowed: &[String]) -> bool {
    let Some(host) = request.headers().get(header::HOST).and_then(|v| v.to_str().ok()).and_then(authority) else {
        return false;
    };
    let defaults: Vec<String>;
    let allowed = if allowed.is_empty() {
        defaults = LOOPBACK_HOSTS.iter().map(|h| h.to_string()).collect();
        &defaults
    } else {
        allowed
    };
    allowed
        .iter()
        .filter_map(|a| authority(a).or_else(|| Some((a.trim().to_ascii_lowercase(), None))))
        .any(|(name, port)| name == host.0 && port.is_none_or(|p| host.1 == Some(p)))
}

/// Whether a POST's `Origin` (if it sent one) is the console's own: the
/// public base URL's origin, or this scheme with the `Host` the request
/// came to (checked against the allowed hosts before). A value that is not
/// one serialized origin is nobody's ([`crate::auth::origin`]).
pub fn origin_allowed(request: &HttpRequest, base: Option<&str>, secure: bool) -> bool {
    let origin = match origin::of_request(request.headers()) {
        Ok(None) => return true,
        Ok(Some(origin)) => origin,
        Err(_) => return false,
    };
    let scheme = if secure { "https" } else { "http" };
    let by_host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .and_then(|host| format!("{scheme}://{}", host.trim()).parse::<Origin>().ok());
    let by_base = base.and_then(|base| origin_of(base).parse::<Origin>().ok());
    [by_host, by_base].into_iter().flatten().any(|own| own == origin)
}

/// `scheme://host[:port]` of a URL, lower case.
pub fn origin_of(url: &str) -> String {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    let end = url[after_scheme..].find('/').map_or(url.len(), |i| after_scheme + i);
    url[..end].to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use actix_web::test::TestRequest;

    use super::*;

    #[test]
    fn the_csrf_value_is_derived_from_the_token_and_compared_whole() {
        let value = csrf_of("cm_secret");
        assert_eq!(value.len(), 64);
        assert!(!value.contains("secret"));
        assert_eq!(value, csrf_of("cm_secret"), "stable, so a restart or a second replica accepts it");
        assert_ne!(value, csrf_of("cm_secreT"));
        assert_ne!(value, hex::encode(Sha256::digest(b"cm_secret")), "not the bare hash of the token");
        assert!(csrf_matches("cm_secret", &value));
        assert!(!csrf_matches("cm_secret", &value[..63]), "a prefix is not the value");
        assert!(!csrf_matches("cm_secret", &format!("{value}0")));
        assert!(!csrf_matches("cm_secret", ""));
        assert!(!csrf_matches("cm_other", &value));
    }

    #[test]
    fn the_session_cookie_is_http_only_strict_same_site_under_console_and_secure_over_tls() {
        let plain = session_cookie("cm_abc", false);
        for part in ["codemode_console=cm_abc", "HttpOnly", "SameSite=Strict", "Path=/console", "Max-Age="] {
            assert!(plain.contains(part), "{part} missing from {plain}");
        }
        assert!(!plain.contains("Secure"));
        assert!(session_cookie("cm_abc", true).ends_with("; Secure"));
        assert!(cookie(COOKIE, "", 0, false).contains("Max-Age=0"), "logging out removes it");
    }

    #[test]
    fn the_sign_in_cookie_is_http_only_lax_and_only_under_the_login_path() {
        let cookie = sign_in_cookie("sealed", 600, true);
        assert_eq!(
            cookie,
            "codemode_console_oauth=sealed; Path=/console/login; HttpOnly; SameSite=Lax; Max-Age=600; Secure"
        );
        assert!(sign_in_cookie("", 0, false).ends_with("Max-Age=0"));
    }

    #[test]
    fn only_tokens_made_of_cookie_octets_go_into_a_cookie() {
        assert!(cookie_safe("cm_0123abcd"));
        assert!(cookie_safe("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhIn0.c2ln-_"));
        for bad in ["", "a b", "a;b", "a,b", "a\"b", "a\\b", "a\nb", "é"] {
            assert!(!cookie_safe(bad), "{bad:?}");
        }
        assert!(!cookie_safe(&"a".repeat(MAX_COOKIE_TOKEN + 1)));
    }

    #[test]
    fn the_cookie_is_found_among_others() {
        let request = TestRequest::default()
            .insert_header((header::COOKIE, "a=1; codemode_console=cm_x; codemode_console_login=y"))
            .to_http_request();
        assert_eq!(cookie_of(&request, COOKIE).as_deref(), Some("cm_x"));
        assert_eq!(cookie_of(&request, LOGIN_COOKIE).as_deref(), Some("y"));
        assert_eq!(cookie_of(&request, "b"), None);
    }

    #[test]
    fn hosts_follow_the_mcp_transports_rule() {
        let with = |host: &str| TestRequest::default().insert_header((header::HOST, host)).to_http_request();
        assert!(host_allowed(&with("127.0.0.1:8080"), &[]));
        assert!(host_allowed(&with("localhost"), &[]));
        assert!(host_allowed(&with("[::1]:9"), &[]));
        assert!(!host_allowed(&with("evil.example"), &[]));
        let named = vec!["mcp.example.com".to_string(), "other.example:8443".to_string()];
        assert!(host_allowed(&with("MCP.example.com:443"), &named));
        assert!(host_allowed(&with("other.example:8443"), &named));
        assert!(!host_allowed(&with("other.example:8444"), &named));
        assert!(!host_allowed(&with("127.0.0.1"), &named));
        assert!(!host_allowed(&TestRequest::default().to_http_request(), &[]), "no Host, no page");
    }

    #[test]
    fn a_posts_origin_must_be_the_consoles_own() {
        let with = |origin: Option<&str>| {
            let mut request = TestRequest::default().insert_header((header::HOST, "127.0.0.1:8080"));
            if let Some(origin) = origin {
                request = request.insert_header((header::ORIGIN, origin));
            }
            request.to_http_request()
        };
        let base = Some("https://mcp.example.com");
        assert!(origin_allowed(&with(None), base, false), "no Origin: the CSRF field decides");
        assert!(origin_allowed(&with(Some("http://127.0.0.1:8080")), base, false));
        assert!(origin_allowed(&with(Some("https://mcp.example.com")), base, false));
        assert!(!origin_allowed(&with(Some("https://127.0.0.1:8080")), base, false), "another scheme");
        assert!(!origin_allowed(&with(Some("https://evil.example")), base, false));
        assert!(!origin_allowed(&with(Some("null")), base, false));
        assert!(origin_allowed(&with(Some("HTTP://127.0.0.1:8080")), base, false), "compared without case");
        for malformed in ["http://127.0.0.1:8080/", "http://user@127.0.0.1:8080", "http://127.0.0.1:8080/console"] {
            assert!(!origin_allowed(&with(Some(malformed)), base, false), "{malformed}");
        }
        assert_eq!(origin_of("https://Mcp.example.com:8443/mcp"), "https://mcp.example.com:8443");
    }
}
