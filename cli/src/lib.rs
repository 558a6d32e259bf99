//! `code-mode`: let a model drive any MCP server by writing Python, run in a
//! locked-down Docker sandbox, with every tool call checked on the host.
//!
//! This crate is the `code-mode` command and a library for your own agent
//! loop. The library runs everything in this process (no NATS):
//!
//! - [`Bridge`] starts the wrapped MCP servers ([`Server`], or an
//!   `mcpServers` file) and checks every call; [`Bridge::stubs`] gives the
//!   tools' Python stubs for your own prompt.
//! - [`run_code`] runs one cell of Python in a fresh container.
//! - [`Sandbox`] keeps variables between cells, with a call [`Budget`] per
//!   cell.
//! - [`build_server`] gives the `run_python` MCP server without starting it.
//!
//! ```no_run
//! # async fn demo() -> Result<(), code_mode::Error> {
//! use code_mode::{Bridge, Sandbox, Server, run_code};
//!
//! let bridge = Bridge::start(Server::command("my-mcp-server").allow(["add"])).await?;
//! let prompt = format!("You can call these tools:\n{}", bridge.stubs());
//! let cell = run_code(&bridge, "print(await add({'a': 2, 'b': 3}))").await?;
//! let sandbox = Sandbox::new(&bridge).await?;
//! sandbox.run("x = 1", bridge.budget(0)).await?;
//! let next = sandbox.run("print(x + 1)", bridge.budget(3)).await?;
//! # let _ = (prompt, cell, next);
//! sandbox.close().await;
//! bridge.close().await;
//! # Ok(()) }
//! ```
//!
//! `examples/one_cell.rs` and `examples/agent_loop.rs` run against a real
//! server; `docs/library.md` maps the Python API of the reference project
//! to this one.
//!
//! The command: `serve` and `run` start the bridge (with its wrapped
//! server), a sandbox-runner and the frontend in this one process over the
//! in-process bus; `build-image` builds the sandbox image. Parsing lives in
//! [`cli`] (with [`settings`] from a file and the environment, and
//! [`ranges`] holding every numeric option to its range), the commands in
//! [`app`], what the flags mean for the services in [`parts`], and the
//! one place the services are put together in [`stack`]
//! (the commands, the library and the load tests all start them there);
//! `main.rs` only calls [`main`].

pub mod app;
pub mod audit;
pub mod cli;
pub mod cli_login;
pub mod cli_token;
pub mod describe;
pub mod files_args;
pub mod login;
pub mod out_dir;
pub mod parts;
pub mod pid_file;
pub mod ranges;
pub mod settings;
pub mod stack;
pub mod task_args;
pub mod terminal;
mod text_values;

// The cargo-fuzz targets' entry points: only with the `fuzzing` feature
// (the fuzz crate enables it) and in this crate's tests.
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;
mod library;

pub use code_mode_mcp_frontend::KeepConfig;
pub use code_mode_sandbox_runner::image::Packages;
pub use library::{Bridge, Budget, CellReport, Error, McpServer, Options, Sandbox, Server, build_server, run_code};

/// The `service.name` of a command's spans (`OTEL_SERVICE_NAME` overrides
/// it): each split service its own, the all-in-one commands `code-mode`.
fn trace_service(command: &cli::Command) -> &'static str {
    match command {
        cli::Command::Frontend(_) => "code-mode-frontend",
        cli::Command::Bridge(_) => "code-mode-bridge",
        cli::Command::SandboxRunner(_) => "code-mode-sandbox-runner",
        _ => "code-mode",
    }
}

/// Entry point of the binary.
pub fn main() -> std::process::ExitCode {
    use clap::Parser;
    let env: Vec<(String, String)> = std::env::vars().collect();
    let argv = match settings::apply(std::env::args_os().collect(), &env) {
        Ok(argv) => argv,
        Err(e) => {
            eprintln!("code-mode: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let args = match cli::Cli::try_parse_from(&argv) {
        Ok(args) => args,
        Err(e) => match cli::server_form_hint(&e, &argv) {
            Some(hint) => {
                eprintln!("{hint}");
                return std::process::ExitCode::from(2);
            }
            None => e.exit(),
        },
    };
    let tracing = code_mode_core::init_logging_and_traces("warn,code_mode=info", trace_service(&args.command));
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("code-mode: could not start the async runtime: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let ran = runtime.block_on(app::run(args));
    // The service has stopped: its last spans go out before it exits.
    tracing.shutdown();
    match ran {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => match e.downcast_ref::<audit::Exit>() {
            // The command printed its verdict already.
            Some(audit::Exit(status)) => std::process::ExitCode::from(*status),
            None => {
                eprintln!("code-mode: {}", code_mode_core::error::report(e.as_ref()));
                std::process::ExitCode::from(1)
            }
        },
    }
}
