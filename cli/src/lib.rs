//! The `code-mode` command: composes the three services.
//!
//! `serve` and `run` start the bridge (with its wrapped server), a
//! sandbox-runner and the frontend in this one process over the in-process
//! bus; `build-image` builds the sandbox image. Parsing lives in [`cli`]
//! (with [`settings`] from a file and the environment, and [`ranges`] holding
//! every numeric option to its range), composition in
//! [`app`]; `main.rs` only calls [`main`].

pub mod app;
pub mod audit;
pub mod cli;
pub mod ranges;
pub mod settings;
pub mod terminal;

#[doc(hidden)]
pub mod fuzzing;

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
    code_mode_core::init_logging("warn,code_mode=info");
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("code-mode: could not start the async runtime: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    match runtime.block_on(app::run(args)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => match e.downcast_ref::<audit::Exit>() {
            // The command printed its verdict already.
            Some(audit::Exit(status)) => std::process::ExitCode::from(*status),
            None => {
                eprintln!("code-mode: {e:#}");
                std::process::ExitCode::from(1)
            }
        },
    }
}
