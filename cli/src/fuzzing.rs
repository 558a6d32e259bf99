//! Entry point of the cargo-fuzz target in `fuzz/` (not an API): takes the
//! fuzzer's bytes, so the committed seeds and every past crash replay as
//! ordinary tests too.

use std::ffi::OsString;

const SUBCOMMANDS: [&str; 7] = ["serve", "run", "frontend", "bridge", "sandbox-runner", "build-image", "policy"];

/// The settings loader as `code-mode` starts: a hostile TOML settings file
/// for a chosen subcommand and a few environment variables, then the
/// command line they produce through clap. Never panics, whatever the input.
///
/// Input: the first byte picks the subcommand (low bits) and whether
/// `--settings` comes before it (high bit); the text up to the first NUL is
/// the file; each following NUL-separated `NAME=VALUE` is a variable, its
/// name put under the subcommand's `CODE_MODE_<SUB>__` prefix
/// (`SETTINGS=...` sets `CODE_MODE_SETTINGS`).
pub fn settings(data: &[u8]) {
    let [pick, rest @ ..] = data else { return };
    let Ok(text) = std::str::from_utf8(rest) else { return };
    let mut parts = text.split('\0');
    let toml = parts.next().unwrap_or("");
    let sub = SUBCOMMANDS[usize::from(pick % 7)];
    let prefix = format!("CODE_MODE_{}__", sub.to_uppercase().replace('-', "_"));
    let env: Vec<(String, String)> = parts
        .take(4)
        .filter_map(|p| p.split_once('='))
        .map(|(k, v)| {
            let name = if k == "SETTINGS" { crate::settings::SETTINGS_ENV.to_string() } else { format!("{prefix}{k}") };
            (name, v.to_string())
        })
        .collect();
    let settings = ["--settings", "fuzz.toml"];
    let before = pick & 0x80 != 0;
    let mut args: Vec<&str> = vec!["code-mode"];
    if before {
        args.extend(settings);
    }
    args.push(sub);
    if !before {
        args.extend(settings);
    }
    args.extend(match sub {
        "frontend" | "sandbox-runner" => &["--nats", "nats://127.0.0.1:4222"][..],
        "bridge" => &["--nats", "n", "--", "server"][..],
        "serve" | "run" => &["--", "server"][..],
        "policy" => &["check", "p.json", "--", "server"][..],
        _ => &[][..],
    });
    let argv: Vec<OsString> = args.into_iter().map(Into::into).collect();
    let Ok(argv) = crate::settings::apply_reading(argv, &env, |_| Ok(toml.to_string())) else { return };
    let _ = <crate::cli::Cli as clap::Parser>::try_parse_from(argv);
}

#[cfg(test)]
mod tests {
    /// The committed seeds and crash regressions of `fuzz/seeds/`.
    #[test]
    fn the_committed_fuzz_inputs_of_the_settings_pass() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../fuzz/seeds/settings_toml");
        let mut seen = 0;
        for entry in std::fs::read_dir(dir).expect("fuzz/seeds/settings_toml") {
            super::settings(&std::fs::read(entry.unwrap().path()).unwrap());
            seen += 1;
        }
        assert!(seen > 0);
    }
}
