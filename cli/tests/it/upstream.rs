//! The harness of the upstream login tests: a real authorization server
//! (npm `oidc-provider`, `testing/peers/oidc_upstream_issuer.mjs`, tokens
//! living a few seconds, refresh tokens, open registration) and a real
//! resource server (`code-mode-test-server --http --oauth-issuer`, which
//! checks every token and has `whoami`), a state folder and key of the
//! test's own, `code-mode login` with the person's step done as a browser
//! would (the authorization URL followed through its redirects, cookies
//! kept, to code-mode's loopback port).

use std::collections::HashMap;
use std::io::BufRead as _;
use std::path::PathBuf;

use base64::Engine as _;
use code_mode_upstream_auth::{Key, Vault};
use serde_json::Value;

use crate::oauth::Issuer;
use crate::support;

/// A free loopback port (bound and released).
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A test server; killed when dropped.
pub(crate) struct Server {
    child: std::process::Child,
    pub(crate) url: String,
}

impl Server {
    /// `code-mode-test-server --http 127.0.0.1:PORT` with `args`.
    pub(crate) fn start(port: u16, args: &[&str]) -> Self {
        Self::try_start(port, args).unwrap_or_else(|said| panic!("the test server does not listen: {said}"))
    }

    /// [`Server::start`], or what the server said on stderr when it ended
    /// without listening (another process took the free port between
    /// [`free_port`] and its bind: tests run in parallel).
    pub(crate) fn try_start(port: u16, args: &[&str]) -> Result<Self, String> {
        let log = std::env::temp_dir().join(format!("cm-test-server-{}.log", uuid::Uuid::new_v4().simple()));
        let mut child = std::process::Command::new(support::test_server())
            .args(["--http", &format!("127.0.0.1:{port}")])
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::fs::File::create(&log).expect("a log file for the test server"))
            .spawn()
            .expect("the test server starts");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).expect("it says where it listens");
        let listening = line.trim().strip_prefix("listening on ").map(str::to_string);
        let said = if listening.is_none() {
            let _ = child.wait();
            std::fs::read_to_string(&log).unwrap_or_default()
        } else {
            String::new()
        };
        let _ = std::fs::remove_file(&log);
        match listening {
            Some(url) => Ok(Self { child, url }),
            None => Err(format!("stdout {line:?}, stderr {said:?}")),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One remote server behind its authorization server, and this test's
/// state folder and token key.
pub(crate) struct Upstream {
    pub(crate) issuer: Issuer,
    pub(crate) _server: Server,
    pub(crate) url: String,
    pub(crate) state: PathBuf,
    pub(crate) key: String,
}

impl Drop for Upstream {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.state);
    }
}

impl Upstream {
    /// The issuer (tokens living `ttl` seconds) and the resource server
    /// (needing `mcp:read`, and `server_args`); `None` off CI without the
    /// peers.
    pub(crate) fn start(ttl: u32, server_args: &[&str]) -> Option<Self> {
        Self::start_with(ttl, &[], server_args)
    }

    /// [`Upstream::start`] with `issuer_args` for the issuer too (such as
    /// `--pages`: its own login and consent pages, for a real browser).
    pub(crate) fn start_with(ttl: u32, issuer_args: &[&str], server_args: &[&str]) -> Option<Self> {
        let ttl = ttl.to_string();
        let mut tries = 0;
        // The resource's URL (its port) goes to the issuer before the
        // server binds it: a port taken meanwhile means both again.
        let (issuer, server, url) = loop {
            let port = free_port();
            let url = format!("http://127.0.0.1:{port}/mcp");
            let mut all = vec![url.as_str(), "--ttl", ttl.as_str()];
            all.extend_from_slice(issuer_args);
            let issuer = Issuer::spawn("oidc_upstream_issuer.mjs", &all)?;
            let mut args = vec!["--oauth-issuer", issuer.url.as_str(), "--oauth-scope", "mcp:read"];
            args.extend_from_slice(server_args);
            match Server::try_start(port, &args) {
                Ok(server) => break (issuer, server, url),
                Err(said) if tries < 2 => {
                    tries += 1;
                    eprintln!("the test server did not listen on {port} ({said}); again on another port");
                }
                Err(said) => panic!("the test server does not listen: {said}"),
            }
        };
        assert_eq!(server.url, url);
        let state = std::env::temp_dir().join(format!("cm-upstream-{}", uuid::Uuid::new_v4().simple()));
        let mut bytes = uuid::Uuid::new_v4().as_bytes().to_vec();
        bytes.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
        let key = base64::engine::general_purpose::STANDARD.encode(bytes);
        Some(Self { issuer, _server: server, url, state, key })
    }

    /// `code-mode ARGS` in this test's state folder, with its key.
    pub(crate) fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(support::code_mode());
        command
            .args(args)
            .env("CODE_MODE_STATE_DIR", &self.state)
            .env("CODE_MODE_TOKEN_KEY", &self.key)
            .env_remove("BROWSER")
            .env_remove("DISPLAY")
            .kill_on_drop(true);
        command
    }

    /// The environment prefix that runs `code-mode` as [`Upstream::command`]
    /// does, for a client that starts it (`env VAR=... code-mode ...`).
    pub(crate) fn env_prefix(&self) -> Vec<String> {
        vec![
            "env".into(),
            format!("CODE_MODE_STATE_DIR={}", self.state.display()),
            format!("CODE_MODE_TOKEN_KEY={}", self.key),
            support::code_mode().display().to_string(),
        ]
    }

    /// `code-mode login --url URL` with `args`, the person's step done as a
    /// browser would; `tamper` may change the redirect before it reaches
    /// code-mode. Whether it succeeded, and what it said.
    pub(crate) async fn login_with(&self, args: &[&str], tamper: impl Fn(&str) -> String) -> (bool, String) {
        let mut all = vec!["login", "--url", self.url.as_str(), "--no-browser", "--timeout", "30"];
        all.extend_from_slice(args);
        self.login_command(&all, tamper).await
    }

    /// [`Upstream::login_with`] a redirect left as it is.
    pub(crate) async fn login(&self) -> (bool, String) {
        self.login_with(&[], str::to_string).await
    }

    /// Run a `code-mode login ...` command, following each URL it prints.
    pub(crate) async fn login_command(&self, args: &[&str], tamper: impl Fn(&str) -> String) -> (bool, String) {
        self.login_command_env(args, &[], tamper).await
    }

    /// [`Upstream::login_command`] with `env` set too.
    pub(crate) async fn login_command_env(
        &self,
        args: &[&str],
        env: &[(&str, &str)],
        tamper: impl Fn(&str) -> String,
    ) -> (bool, String) {
        use tokio::io::AsyncBufReadExt as _;
        let mut child = self
            .command(args)
            .envs(env.iter().copied())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("code-mode login starts");
        let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
        let mut said = String::new();
        while let Some(line) = lines.next_line().await.unwrap() {
            said.push_str(&line);
            said.push('\n');
            if line.starts_with("http://") || line.starts_with("https://") {
                follow(&line, &tamper).await;
            }
        }
        let status = child.wait().await.unwrap();
        (status.success(), said)
    }

    /// How many token requests the issuer served, by grant type.
    pub(crate) fn counts(&self) -> Value {
        let (status, body) = crate::oauth::http(&self.issuer.url, "GET", "/test/counts", &[], "");
        assert_eq!(status, 200, "{body}");
        serde_json::from_str(&body).unwrap()
    }

    /// Revoke every grant at the issuer.
    pub(crate) fn revoke(&self) {
        let (status, body) = crate::oauth::http(&self.issuer.url, "POST", "/test/revoke", &[], "");
        assert_eq!(status, 204, "{body}");
    }

    /// Make every token request wait `ms` milliseconds.
    pub(crate) fn slow(&self, ms: u64) {
        let (status, body) = crate::oauth::http(&self.issuer.url, "POST", &format!("/test/slow?ms={ms}"), &[], "");
        assert_eq!(status, 204, "{body}");
    }

    /// The vault this test's code-mode keeps its grants in.
    pub(crate) fn vault(&self) -> Vault {
        Vault::files(self.state.join("upstream-tokens"), Some(Key::parse(&self.key, "the test").unwrap()))
    }
}

/// GET `url` as a browser does: with the `cookies` kept so far, keeping
/// those the answer sets.
pub(crate) async fn browser_get(
    client: &reqwest::Client,
    url: reqwest::Url,
    cookies: &mut HashMap<String, String>,
) -> reqwest::Response {
    let jar: Vec<String> = cookies.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let response = client.get(url).header("cookie", jar.join("; ")).send().await.unwrap();
    for value in response.headers().get_all("set-cookie") {
        if let Some((pair, _)) = value.to_str().unwrap_or_default().split_once(';')
            && let Some((name, value)) = pair.split_once('=')
        {
            cookies.insert(name.trim().to_string(), value.trim().to_string());
        }
    }
    response
}

/// Follow `url` as a browser does: every redirect, cookies kept, until it
/// reaches the loopback `/callback` (changed by `tamper` first). The
/// status of the last page.
pub(crate) async fn follow(url: &str, tamper: &impl Fn(&str) -> String) -> u16 {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let mut cookies: HashMap<String, String> = HashMap::new();
    let mut next = url.to_string();
    for _ in 0..12 {
        let parsed = reqwest::Url::parse(&next).unwrap();
        if parsed.path() == "/callback" {
            let tampered = tamper(&next);
            return match client.get(&tampered).send().await {
                Ok(response) => response.status().as_u16(),
                Err(_) => 0,
            };
        }
        let response = browser_get(&client, parsed.clone(), &mut cookies).await;
        let Some(location) = response.headers().get("location").and_then(|l| l.to_str().ok()) else {
            return response.status().as_u16();
        };
        next = parsed.join(location).unwrap().to_string();
    }
    panic!("the login redirected more than 12 times from {url}");
}
