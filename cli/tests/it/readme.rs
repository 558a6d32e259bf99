//! The examples of the documentation (the chapters in docs/ the README
//! points to) run as written and print what they say.

use std::process::Command;

use serde_json::Value;

use crate::support;

/// A chapter of the documentation: `docs/<name>`.
fn doc(name: &str) -> String {
    let path = format!("{}/../docs/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The first block of `lang` that starts with `starts`.
fn block(text: &str, lang: &str, starts: &str) -> String {
    let fence = format!("```{lang}\n");
    text.split(&fence)
        .skip(1)
        .map(|rest| rest.split("\n```").next().unwrap_or(""))
        .find(|b| b.trim_start().starts_with(starts))
        .unwrap_or_else(|| panic!("the chapter has a ```{lang} block starting with {starts:?}"))
        .to_string()
}

#[test]
fn the_several_servers_example_of_the_readme_runs_as_written() {
    if !support::sandbox_available() {
        return;
    }
    let text = doc("servers.md");
    let config = block(&text, "json", "{\"mcpServers\"");
    let command = block(&text, "sh", "NOTES_TOKEN=");
    let dir = code_mode_core::testing::TempDir::new("readme");
    let config_path = dir.0.join("servers.json");
    std::fs::write(&config_path, config).unwrap();
    // Run the chapter's command from the workspace root, with the config in
    // place of `servers.json` and the binary under test.
    let command = command
        .replace("servers.json", config_path.to_str().unwrap())
        .replace("./target/debug/code-mode ", &format!("{} ", support::code_mode().display()));
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let out = Command::new("bash").arg("-c").arg(&command).current_dir(root).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["stdout"], "{\"sum\":3}\nt0k\n", "{report}");
}

/// The text between the policy example markers (docs/policies.md).
fn policy_example(text: &str) -> &str {
    let start = text.find("<!-- policy example:").expect("docs/policies.md marks the start of the policy example");
    let rest = &text[start..];
    let end =
        rest.find("<!-- end of policy example -->").expect("docs/policies.md marks the end of the policy example");
    &rest[..end]
}

/// `text` with the number of seconds of every "try again in N s" as `N`.
fn any_wait(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("try again in ") {
        let (before, after) = rest.split_at(at + "try again in ".len());
        out.push_str(before);
        let digits = after.len() - after.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        out.push('N');
        rest = &after[digits..];
    }
    out.push_str(rest);
    out
}

#[test]
fn the_policy_example_of_the_readme_prints_what_the_readme_says() {
    if !support::sandbox_available() {
        return;
    }
    // The example's limit counts per minute: keep its calls in one minute.
    crate::policy::inside_one_window(60, 15);
    let text = doc("policies.md");
    let example = policy_example(&text);
    let policy = block(example, "json", "{\"version\"");
    let command = block(example, "sh", "./target/debug/code-mode run --policy policy.json");
    let expected = block(example, "text", "");
    let dir = code_mode_core::testing::TempDir::new("readme-policy");
    let policy_path = dir.0.join("policy.json");
    std::fs::write(&policy_path, policy).unwrap();
    let command = command
        .replace("policy.json", policy_path.to_str().unwrap())
        .replace("./target/debug/code-mode ", &format!("{} ", support::code_mode().display()));
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let out = Command::new("bash").arg("-c").arg(&command).current_dir(root).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["error"], Value::Null, "{report}");
    let stdout = report["stdout"].as_str().expect("stdout");
    assert_eq!(any_wait(stdout), any_wait(&format!("{}\n", expected.trim_end())), "{report}");
}

/// The text between the audit example markers (docs/policies.md).
fn audit_example(text: &str) -> &str {
    let start = text.find("<!-- audit example:").expect("docs/policies.md marks the start of the audit example");
    let rest = &text[start..];
    let end = rest.find("<!-- end of audit example -->").expect("docs/policies.md marks the end of the audit example");
    &rest[..end]
}

#[test]
fn the_audit_example_of_the_readme_runs_as_written() {
    if !support::sandbox_available() {
        return;
    }
    // The policy's limit counts per minute: keep the example's calls in one.
    crate::policy::inside_one_window(60, 15);
    let text = doc("policies.md");
    let example = audit_example(&text);
    // A folder laid out like the workspace root: the binaries under test at
    // ./target/debug, the policy of the policy example.
    let dir = code_mode_core::testing::TempDir::new("readme-audit");
    let debug = dir.0.join("target/debug");
    std::fs::create_dir_all(&debug).unwrap();
    std::os::unix::fs::symlink(support::code_mode(), debug.join("code-mode")).unwrap();
    std::os::unix::fs::symlink(support::test_server(), debug.join("code-mode-test-server")).unwrap();
    std::fs::write(dir.0.join("policy.json"), block(policy_example(&text), "json", "{\"version\"")).unwrap();
    std::fs::write(dir.0.join("stricter.json"), block(example, "json", "{\"version\"")).unwrap();
    let sh = |command: &str| Command::new("bash").arg("-c").arg(command).current_dir(&dir.0).output().unwrap();

    let recorded = sh(&block(example, "sh", "./target/debug/code-mode run --policy policy.json --audit"));
    assert!(recorded.status.success(), "{}", String::from_utf8_lossy(&recorded.stderr));
    let out = String::from_utf8_lossy(&recorded.stdout).into_owned();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "the verdict and three calls: {out}");
    assert!(
        lines[0].starts_with("audit.jsonl: 8 records, seq 1 to 8, 1 checkpoints, head ")
            && lines[0].ends_with(": the chain holds"),
        "{out}"
    );
    for (line, decision) in lines[1..].iter().zip(["allowed", "allowed", "rate_limited"]) {
        assert!(line.contains(&format!("code-mode-test-server/add {decision} /tools/add args 13 B")), "{out}");
    }

    let replayed = sh(&block(example, "sh", "./target/debug/code-mode policy replay"));
    assert_eq!(replayed.status.code(), Some(1), "something would change");
    assert_eq!(
        String::from_utf8_lossy(&replayed.stdout),
        format!("{}\n", block(example, "text", "replayed").trim_end())
    );

    let tampered = sh(&block(example, "sh", "sed -i"));
    assert_eq!(tampered.status.code(), Some(1), "a broken chain exits 1");
    assert_eq!(
        String::from_utf8_lossy(&tampered.stdout),
        format!("{}\n", block(example, "text", "audit.jsonl: the chain is broken").trim_end())
    );
}

#[test]
fn the_runtime_example_of_the_readme_runs_under_gvisor_as_written() {
    if !support::under_runsc_available() {
        return;
    }
    let text = doc("sandbox.md");
    let command = block(&text, "sh", "./target/debug/code-mode run --runtime runsc")
        .replace("./target/debug/code-mode-test-server", support::test_server().to_str().unwrap())
        .replace("./target/debug/code-mode ", &format!("{} ", support::code_mode().display()));
    let out = Command::new("bash").arg("-c").arg(&command).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    // gVisor's kernel presents itself as Linux 4.4.0, whatever the host runs.
    assert_eq!(report["stdout"], "4.4.0\n", "{report}");
}

#[tokio::test]
async fn the_kept_sessions_example_of_the_readme_prints_what_the_readme_says() {
    if !support::sandbox_available() {
        return;
    }
    let text = doc("sessions.md");
    let first = block(&text, "python", "# first run_python");
    let later = block(&text, "python", "# a later run_python of the same session");
    // The comment after the print is what it prints.
    let expected = later.lines().last().and_then(|l| l.split_once("# ")).map(|(_, e)| e.trim()).unwrap().to_string();
    let (client, _, _guards) = support::start(support::Deployment::AllInOne, &["--keep-variables"], &[]).await;
    for (code, printed) in [(first, String::new()), (later, format!("{expected}\n"))] {
        let report = support::report(&support::run_python(&client, &code).await);
        assert_eq!(report["error"], Value::Null, "{report}");
        assert_eq!(report["stdout"], printed.as_str(), "{report}");
    }
    client.cancel().await.unwrap();
}

/// The text between the direct-tools example markers (docs/direct-tools.md).
fn direct_example(text: &str) -> &str {
    let start = text.find("<!-- direct example:").expect("docs/direct-tools.md marks the start of the direct example");
    let rest = &text[start..];
    let end =
        rest.find("<!-- end of direct example -->").expect("docs/direct-tools.md marks the end of the direct example");
    &rest[..end]
}

#[test]
fn the_direct_tools_example_of_the_readme_prints_what_the_readme_says_with_no_docker_engine() {
    let Some(python) = code_mode_core::testing::peers::venv_bin("python") else { return };
    // The example's limit counts per minute: keep its calls in one minute.
    crate::policy::inside_one_window(60, 15);
    let text = doc("direct-tools.md");
    let example = direct_example(&text);
    // A folder laid out like the workspace root: the binaries under test at
    // ./target/debug, the example's two files.
    let dir = code_mode_core::testing::TempDir::new("readme-direct");
    let debug = dir.0.join("target/debug");
    std::fs::create_dir_all(&debug).unwrap();
    std::os::unix::fs::symlink(support::code_mode(), debug.join("code-mode")).unwrap();
    std::os::unix::fs::symlink(support::test_server(), debug.join("code-mode-test-server")).unwrap();
    std::fs::write(dir.0.join("gateway.json"), block(example, "json", "{\"mcpServers\"")).unwrap();
    std::fs::write(dir.0.join("gateway.py"), block(example, "python", "import asyncio")).unwrap();
    let out = Command::new(python)
        .arg("gateway.py")
        .current_dir(&dir.0)
        // No Docker engine: the gateway never asks for one.
        .env("DOCKER_HOST", "unix:///nonexistent/code-mode-readme/docker.sock")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let expected = block(example, "text", "[(");
    assert_eq!(any_wait(&String::from_utf8_lossy(&out.stdout)), any_wait(&format!("{}\n", expected.trim_end())));
}

/// docs/deployment.md from "### MCP over HTTP" to the end of "### With docker-compose".
fn http_section(text: &str) -> &str {
    let start = text.find("### MCP over HTTP").expect("docs/deployment.md has the HTTP section");
    let rest = &text[start..];
    let end = rest.find("#### Wrap your own servers in the stack").expect("the compose section is followed by one");
    &rest[..end]
}

/// Every block of `lang` in `text`.
fn blocks<'a>(text: &'a str, lang: &str) -> Vec<&'a str> {
    let fence = format!("```{lang}\n");
    text.split(&fence).skip(1).map(|rest| rest.split("\n```").next().unwrap_or("")).collect()
}

/// Checks a Python snippet against the installed SDK: every name it
/// imports exists, every keyword argument it passes to an imported callable
/// is one that callable takes; with `run`, executes it (top-level `await`
/// allowed) with `url` and `token` defined.
const PY_CHECK: &str = r#"
import ast, asyncio, importlib, inspect, sys
src, mode = sys.argv[1], sys.argv[2]
flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
tree = compile(src, "<readme>", "exec", flags=flags | ast.PyCF_ONLY_AST)
names = {}
for node in ast.walk(tree):
    if isinstance(node, ast.ImportFrom):
        module = importlib.import_module(node.module)
        for alias in node.names:
            names[alias.asname or alias.name] = getattr(module, alias.name)
    elif isinstance(node, ast.Import):
        for alias in node.names:
            names[alias.asname or alias.name] = importlib.import_module(alias.name)
for node in ast.walk(tree):
    if isinstance(node, ast.Call) and node.keywords:
        parts, f = [], node.func
        while isinstance(f, ast.Attribute):
            parts.append(f.attr)
            f = f.value
        if isinstance(f, ast.Name) and f.id in names:
            obj = names[f.id]
            for part in reversed(parts):
                obj = getattr(obj, part)
            params = inspect.signature(obj).parameters
            if not any(p.kind == p.VAR_KEYWORD for p in params.values()):
                for k in node.keywords:
                    assert k.arg in params, f"{ast.unparse(node.func)} takes no keyword {k.arg}"
            print("checked", ast.unparse(node.func), sorted(k.arg for k in node.keywords))
if mode == "run":
    code = compile(src, "<readme>", "exec", flags=flags)
    result = eval(code, {"url": sys.argv[3], "token": sys.argv[4]})
    if result is not None:
        asyncio.run(result)
"#;

#[tokio::test]
async fn the_http_client_examples_of_the_readme_name_what_exists_and_the_bearer_one_runs_as_written() {
    if !support::sandbox_available() {
        return;
    }
    let Some(python) = code_mode_core::testing::peers::venv_bin("python") else { return };
    let text = doc("deployment.md");
    let section = http_section(&text);

    // The MCP client entry: an HTTP server with a bearer header.
    let entry = blocks(section, "json").into_iter().find(|b| b.contains("\"headers\"")).expect("a .mcp.json entry");
    let entry: Value = serde_json::from_str(entry).expect("the .mcp.json entry is JSON");
    let server = &entry["mcpServers"]["code-mode"];
    assert_eq!(server["type"], "http", "{entry}");
    assert!(server["url"].as_str().unwrap().ends_with("/mcp"), "{entry}");
    assert!(server["headers"]["Authorization"].as_str().unwrap().starts_with("Bearer cm_"), "{entry}");

    // Every option the section's commands give exists on that subcommand.
    let mut checked = 0;
    for block in blocks(section, "sh") {
        for command in block.replace("\\\n", " ").lines() {
            let Some(rest) = command.trim().strip_prefix("./target/debug/code-mode ") else { continue };
            let words: Vec<&str> = rest.split_whitespace().take_while(|w| *w != "--" && !w.starts_with('#')).collect();
            let sub: Vec<&str> = words.iter().take_while(|w| !w.starts_with('-')).take(2).copied().collect();
            let sub = if sub.first() == Some(&"token") { sub } else { sub[..1].to_vec() };
            let help = Command::new(support::code_mode()).args(&sub).arg("--help").output().unwrap();
            assert!(help.status.success(), "code-mode {sub:?} --help: {}", String::from_utf8_lossy(&help.stderr));
            let help = String::from_utf8_lossy(&help.stdout);
            for flag in words.iter().filter(|w| w.starts_with("--")) {
                assert!(help.contains(&format!("{flag} ")), "the docs' `{command}` names {flag}, which {sub:?} lacks");
                checked += 1;
            }
        }
    }
    assert!(checked >= 10, "the section's commands were found ({checked} options)");

    // The Python snippets: names and keywords the installed SDK has; the
    // bearer one runs as written against a server with a token file.
    let snippets = blocks(section, "python");
    let bearer = snippets.iter().find(|s| s.contains("Authorization")).expect("the bearer snippet");
    let oauth = snippets.iter().find(|s| s.contains("ClientCredentialsOAuthProvider")).expect("the OAuth snippet");
    let out = Command::new(&python).args(["-c", PY_CHECK, oauth, "check"]).output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "the OAuth snippet: {}", String::from_utf8_lossy(&out.stderr));
    let both = said.contains("checked ClientCredentialsOAuthProvider") && said.contains("checked httpx2.AsyncClient");
    assert!(both, "the OAuth snippet's calls were checked: {said}");

    let alice = crate::auth::token_new("alice");
    let tokens = crate::auth::TokenFile::of(&[&alice]);
    let (_serve, url, _log) = crate::auth::serve(&["--warm", "0", "--auth-tokens", tokens.arg()]).await;
    let out = tokio::process::Command::new(&python)
        .args(["-c", PY_CHECK, bearer, "run", &url, &alice.token])
        .output()
        .await
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "the bearer snippet: {}", String::from_utf8_lossy(&out.stderr));
    assert!(said.contains("{\"sum\":3}"), "it prints the cell's result: {said}");
    // Its client waits out a cell longer than httpx's default 5 s.
    let slow = bearer.replace("print(await add(a=1, b=2))", "import time; time.sleep(7); print(await add(a=1, b=2))");
    assert_ne!(&slow, bearer, "the snippet's cell was found");
    let out = tokio::process::Command::new(&python)
        .args(["-c", PY_CHECK, &slow, "run", &url, &alice.token])
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "the bearer snippet, 7 s cell: {}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("{\"sum\":3}"));
}

#[tokio::test]
async fn the_session_handle_example_of_the_readme_runs_as_written_with_the_sdks_default_client() {
    if !support::sandbox_available() {
        return;
    }
    let Some(python) = code_mode_core::testing::peers::venv_bin("python") else { return };
    let text = doc("sessions.md");
    let start = text.find("## Sessions").expect("docs/sessions.md has the Sessions section");
    let snippet = blocks(&text[start..], "python")
        .into_iter()
        .find(|b| b.contains("\"session\": \"new\""))
        .expect("the Sessions section shows a handle in use");
    // The snippet's `client`: the SDK's high-level client at its defaults
    // (the stateless protocol), connected as the section above shows.
    let indented: String = snippet.lines().map(|l| format!("    {l}\n")).collect();
    let program = format!(
        "import httpx2\nfrom mcp import Client\nfrom mcp.client.streamable_http import streamable_http_client\n\
         async with Client(streamable_http_client(url, http_client=httpx2.AsyncClient())) as client:\n{indented}    \
         print(r.structured_content['stdout'], end='')\n"
    );
    let (_serve, url, _log) = crate::auth::serve(&["--keep-variables"]).await;
    let out =
        tokio::process::Command::new(&python).args(["-c", PY_CHECK, &program, "run", &url, ""]).output().await.unwrap();
    assert!(out.status.success(), "the snippet: {}", String::from_utf8_lossy(&out.stderr));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.ends_with("3\n"), "the second call sees the first one's rows: {said}");
}

/// Every `.rs` file of the workspace (build output, fuzz corpora and
/// installed packages left out).
fn rust_files(dir: &std::path::Path, found: &mut Vec<std::path::PathBuf>) {
    let skip = ["target", "node_modules", ".venv", ".git", "corpus", "artifacts"];
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if path.is_dir() {
            if !skip.iter().any(|s| name == *s) {
                rust_files(&path, found);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
}

/// The names a doc gives in backticks that read as a test's: snake case
/// of at least five words, alone or as the last segment of a path
/// (`module::a_name_of_five_words`); metric names (`codemode_...`) are not.
fn named_tests(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter_map(|quoted| {
            let last = quoted.rsplit("::").next()?;
            let snake = last.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
            let ident = quoted.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':');
            (ident && snake && last.matches('_').count() >= 4 && !last.starts_with("codemode_"))
                .then(|| last.to_string())
        })
        .collect()
}

#[test]
fn every_test_the_docs_name_as_evidence_exists() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let mut functions = std::collections::HashSet::new();
    for file in &files {
        let source = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        for rest in source.split("fn ").skip(1) {
            let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            functions.insert(name);
        }
    }
    assert!(functions.len() > 1000, "the walk found the workspace's functions: {}", functions.len());
    let mut docs: Vec<std::path::PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.extend(["README.md", "loadtests/README.md", "services/sandbox-runner/image/SECCOMP.md"].map(|p| root.join(p)));
    let mut missing = Vec::new();
    let mut named = 0;
    for doc in &docs {
        let text = std::fs::read_to_string(doc).unwrap_or_else(|e| panic!("{}: {e}", doc.display()));
        for test in named_tests(&text) {
            named += 1;
            if !functions.contains(&test) {
                missing.push(format!("{}: {test}", doc.strip_prefix(&root).unwrap_or(doc).display()));
            }
        }
    }
    assert!(named > 100, "the docs name their tests: {named}");
    assert!(missing.is_empty(), "the docs name tests that do not exist:\n{}", missing.join("\n"));
}
