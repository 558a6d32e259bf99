//! The person's step of a login: the authorization URL shown (and opened
//! in a browser when one is at hand), and the redirect received on a
//! loopback port (RFC 8252: `http://127.0.0.1:<port>/callback`, bound to
//! the loopback interface only).
//!
//! The listener answers only `GET <its path>`; a redirect whose `state`
//! is not the one this login is waiting for (forged, or from another
//! attempt) gets a page saying so and is otherwise ignored, so it can
//! neither end the login nor reach the token endpoint. Nothing the request
//! carries is echoed into the page.

use std::time::Duration;

use subtle::ConstantTimeEq as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;
use tokio::time::Instant;

/// The largest request head read from the browser.
const MAX_HEAD: usize = 16 * 1024;
/// How long one connection may take to send its request.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Check that `uri` is a loopback redirect URI: `http`, a loopback host
/// (`127.0.0.1`, `[::1]`, `localhost`), a port and a path.
pub fn check_loopback(uri: &str) -> Result<(), String> {
    let url = Url::parse(uri).map_err(|e| format!("not a URL ({e})"))?;
    if url.scheme() != "http" {
        return Err(
            "a login's redirect URI must be http:// on a loopback address (RFC 8252), not another scheme".into()
        );
    }
    let loopback = match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        None => false,
    };
    if !loopback {
        return Err(format!(
            "the redirect URI must be on a loopback address (127.0.0.1, [::1] or localhost), not {}: the login's code would leave this machine",
            url.host_str().unwrap_or("no host")
        ));
    }
    if url.port().is_none() {
        return Err("the redirect URI must name its port".into());
    }
    Ok(())
}

use url::Url;

/// The start error of a server without an `auth` block that answered
/// `401` with a login challenge: what it asked for and what to add.
pub fn needs_auth_block(server: &str, url: &str, challenge: &str) -> String {
    let metadata = Url::parse(url)
        .ok()
        .and_then(|base| rmcp::transport::WWWAuthenticateParams::parse(challenge, &base).resource_metadata_url)
        .map(|m| format!(", its resource metadata at {m}"))
        .unwrap_or_default();
    format!(
        "{url} answered 401 Unauthorized: it requires an OAuth login{metadata}. Give it an auth block \
         (\"auth\": {{\"type\": \"oauth\"}} in its mcpServers entry, or --auth oauth beside --url), \
         then run `code-mode login` for {server}"
    )
}

/// What the authorization server's redirect carried.
#[derive(Clone)]
pub struct Callback {
    /// The authorization code.
    pub code: String,
    /// The `state` (equal to the one waited for).
    pub state: String,
    /// The RFC 9207 `iss`, when sent.
    pub iss: Option<String>,
}

impl std::fmt::Debug for Callback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Callback").field("iss", &self.iss).finish_non_exhaustive()
    }
}

/// A loopback listener waiting for one login's redirect.
#[derive(Debug)]
pub struct Loopback {
    listener: TcpListener,
    redirect_uri: String,
    path: String,
}

impl Loopback {
    /// Listen for the redirect: on `redirect_uri` (a pre-registered
    /// client's, checked to be loopback) or on a free port of 127.0.0.1 at
    /// `/callback`.
    pub async fn bind(redirect_uri: Option<&str>) -> Result<Self, String> {
        let Some(uri) = redirect_uri else {
            let listener = TcpListener::bind(("127.0.0.1", 0))
                .await
                .map_err(|e| format!("cannot listen on a loopback port for the login's redirect: {e}"))?;
            let port = listener.local_addr().map_err(|e| e.to_string())?.port();
            return Ok(Self {
                listener,
                redirect_uri: format!("http://127.0.0.1:{port}/callback"),
                path: "/callback".into(),
            });
        };
        check_loopback(uri)?;
        let url = Url::parse(uri).map_err(|e| e.to_string())?;
        let port = url.port().unwrap_or(80);
        let host = match url.host_str() {
            Some("[::1]") | Some("::1") => "::1",
            _ => "127.0.0.1",
        };
        let listener = TcpListener::bind((host, port))
            .await
            .map_err(|e| format!("cannot listen on {host}:{port} for the login's redirect ({uri}): {e}"))?;
        Ok(Self { listener, redirect_uri: uri.to_string(), path: url.path().to_string() })
    }

    /// The redirect URI to register and send.
    pub fn redirect_uri(&self) -> &str {
        &self.redirect_uri
    }

    /// Wait until `deadline` for the redirect carrying `state`.
    pub async fn wait(&self, state: &str, deadline: Instant) -> Result<Callback, String> {
        loop {
            let accepted = tokio::time::timeout_at(deadline, self.listener.accept()).await;
            let (mut stream, _) = match accepted {
                Err(_) => return Err("nobody completed the login in the browser in time".into()),
                Ok(Err(e)) => return Err(format!("the login's loopback listener failed: {e}")),
                Ok(Ok(accepted)) => accepted,
            };
            let head = match tokio::time::timeout(READ_TIMEOUT, read_head(&mut stream)).await {
                Ok(Some(head)) => head,
                _ => continue,
            };
            match self.judge(&head, state) {
                Verdict::Done(callback) => {
                    respond(&mut stream, 200, "Logged in", "code-mode has the login. You can close this tab.").await;
                    return Ok(callback);
                }
                Verdict::Refused { error, description } => {
                    respond(
                        &mut stream,
                        200,
                        "Login refused",
                        "The authorization server refused the login; code-mode says why on its terminal.",
                    )
                    .await;
                    return Err(format!(
                        "the authorization server refused the login: {error}{}",
                        description.map(|d| format!(" ({})", crate::printable(&d, 200))).unwrap_or_default()
                    ));
                }
                Verdict::WrongState => {
                    tracing::warn!("a login redirect with a state this login did not send was refused");
                    respond(&mut stream, 400, "Not this login", "This response is not the one code-mode is waiting for (its state does not match), so it was ignored.").await;
                }
                Verdict::NotHere => respond(&mut stream, 404, "Not found", "Nothing here.").await,
            }
        }
    }

    fn judge(&self, head: &str, expected_state: &str) -> Verdict {
        let Some(line) = head.lines().next() else { return Verdict::NotHere };
        let mut parts = line.split(' ');
        let (Some("GET"), Some(target)) = (parts.next(), parts.next()) else { return Verdict::NotHere };
        let Ok(url) = Url::parse(&format!("http://loopback{target}")) else { return Verdict::NotHere };
        if url.path() != self.path {
            return Verdict::NotHere;
        }
        let mut code = None;
        let mut state = None;
        let mut iss = None;
        let mut error = None;
        let mut description = None;
        for (key, value) in url.query_pairs() {
            let slot = match key.as_ref() {
                "code" => &mut code,
                "state" => &mut state,
                "iss" => &mut iss,
                "error" => &mut error,
                "error_description" => &mut description,
                _ => continue,
            };
            if slot.is_some() {
                // A parameter given twice is not a response we sent for.
                return Verdict::WrongState;
            }
            *slot = Some(value.into_owned());
        }
        let matches = state.as_deref().is_some_and(|s| bool::from(s.as_bytes().ct_eq(expected_state.as_bytes())));
        if !matches {
            return Verdict::WrongState;
        }
        if let Some(error) = error {
            return Verdict::Refused { error: crate::printable(&error, 64), description };
        }
        match (code, state) {
            (Some(code), Some(state)) => Verdict::Done(Callback { code, state, iss }),
            _ => Verdict::WrongState,
        }
    }
}

enum Verdict {
    Done(Callback),
    Refused { error: String, description: Option<String> },
    WrongState,
    NotHere,
}

async fn read_head(stream: &mut tokio::net::TcpStream) -> Option<String> {
    let mut buffer = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
        if buffer.windows(4).any(|w| w == b"\r\n\r\n") || buffer.windows(2).any(|w| w == b"\n\n") {
            return String::from_utf8(buffer).ok();
        }
        if buffer.len() > MAX_HEAD {
            return None;
        }
    }
}

async fn respond(stream: &mut tokio::net::TcpStream, status: u16, title: &str, text: &str) {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        _ => "Not Found",
    };
    let body = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>code-mode: {title}</title></head>\
         <body><h1>{title}</h1><p>{text}</p></body></html>"
    );
    let response = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\n\
         Cache-Control: no-store\r\nReferrer-Policy: no-referrer\r\nX-Content-Type-Options: nosniff\r\n\
         Content-Security-Policy: default-src 'none'\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// Open `url` in a browser when one is at hand: `$BROWSER`, else
/// `xdg-open` with a display. Never waits for it; false when none.
pub fn open_browser(url: &str) -> bool {
    let command = match std::env::var("BROWSER") {
        Ok(browser) if !browser.trim().is_empty() => browser.split(':').next().unwrap_or_default().to_string(),
        _ => {
            let display =
                ["DISPLAY", "WAYLAND_DISPLAY"].iter().any(|v| std::env::var_os(v).is_some_and(|d| !d.is_empty()));
            if !display {
                return false;
            }
            "xdg-open".to_string()
        }
    };
    std::process::Command::new(command.trim())
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_http_redirects_are_taken() {
        assert!(check_loopback("http://127.0.0.1:8765/callback").is_ok());
        assert!(check_loopback("http://localhost:3000/callback").is_ok());
        assert!(check_loopback("http://[::1]:9/cb").is_ok());
        let far = check_loopback("http://10.0.0.5:8765/callback").unwrap_err();
        assert!(far.contains("loopback"), "{far}");
        assert!(check_loopback("https://evil.example/callback").is_err());
        assert!(check_loopback("http://127.0.0.1/callback").unwrap_err().contains("port"));
        assert!(check_loopback("http://127.0.0.1.evil.example:80/cb").is_err());
    }

    async fn get(uri: &str) -> (u16, String) {
        let url = Url::parse(uri).unwrap();
        let mut stream = tokio::net::TcpStream::connect((url.host_str().unwrap(), url.port().unwrap())).await.unwrap();
        let target = match url.query() {
            Some(q) => format!("{}?{q}", url.path()),
            None => url.path().to_string(),
        };
        stream.write_all(format!("GET {target} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes()).await.unwrap();
        let mut out = String::new();
        stream.read_to_string(&mut out).await.unwrap();
        (out[9..12].parse().unwrap(), out)
    }

    #[tokio::test]
    async fn a_forged_state_is_refused_and_the_real_redirect_still_completes_the_login() {
        let loopback = Loopback::bind(None).await.unwrap();
        let base = loopback.redirect_uri().to_string();
        let deadline = Instant::now() + Duration::from_secs(10);
        let waiting = async { loopback.wait("expected-state", deadline).await };
        let browser = async {
            let (status, page) = get(&format!("{base}?code=stolen&state=forged&iss=x")).await;
            assert_eq!(status, 400);
            assert!(!page.contains("stolen") && !page.contains("forged"), "nothing is echoed: {page}");
            assert_eq!(get(&format!("{base}?code=c&state=expected-state&state=expected-state")).await.0, 400);
            assert_eq!(get(&base.replace("/callback", "/other")).await.0, 404);
            assert_eq!(get(&format!("{base}?code=real&state=expected-state&iss=https%3A%2F%2Fas")).await.0, 200);
        };
        let (callback, ()) = tokio::join!(waiting, browser);
        let callback = callback.unwrap();
        assert_eq!(callback.code, "real");
        assert_eq!(callback.iss.as_deref(), Some("https://as"));
    }

    #[tokio::test]
    async fn a_refusal_by_the_authorization_server_ends_the_login_saying_so() {
        let loopback = Loopback::bind(None).await.unwrap();
        let base = loopback.redirect_uri().to_string();
        let deadline = Instant::now() + Duration::from_secs(10);
        let refusal = format!("{base}?error=access_denied&error_description=no&state=s");
        let (result, _) = tokio::join!(loopback.wait("s", deadline), get(&refusal));
        assert!(result.unwrap_err().contains("access_denied"));
        let deadline = Instant::now() + Duration::from_millis(200);
        assert!(loopback.wait("s", deadline).await.unwrap_err().contains("in time"));
    }
}
