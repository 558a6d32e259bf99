//! The `code-mode` binary; everything lives in the library.

fn main() -> std::process::ExitCode {
    code_mode::main()
}
