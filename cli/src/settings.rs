//! Settings from a file and the environment, under the command-line flags.
//!
//! Every setting of a subcommand is one of its long flags, so the flags are
//! the single definition of what can be set (and `--help` documents it).
//! Values come, weakest first, from:
//!
//! 1. the flag's default;
//! 2. a TOML file given by `--settings FILE` or `CODE_MODE_SETTINGS`, one
//!    table per subcommand (`[serve]`, `[bridge]`, `[sandbox-runner]`, ...),
//!    keys named like the flags (`max-calls = 50`, `allow = ["add"]`);
//! 3. the environment: `CODE_MODE_<SUBCOMMAND>__<KEY>` (upper case, `-` as
//!    `_`; lists comma-separated), e.g. `CODE_MODE_SANDBOX_RUNNER__CAPACITY=8`;
//! 4. the flags given on the command line, which always win.
//!
//! The file and environment values are turned into flags placed before the
//! user's own, and the parser lets a later flag override an earlier one. A
//! key that is not a flag of the subcommand stops startup, naming the file
//! (or variable), the table and the key.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::CommandFactory;

use crate::cli::Cli;

/// The environment variable naming the settings file.
pub const SETTINGS_ENV: &str = "CODE_MODE_SETTINGS";

/// Why the settings could not be used.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// The file could not be read or parsed.
    #[error("settings file {file}: {reason}")]
    File {
        /// The file.
        file: String,
        /// What went wrong.
        reason: String,
    },
    /// A key is not a setting of the subcommand.
    #[error("{source_name}: [{table}] {key}: no such setting (known: {known})")]
    UnknownKey {
        /// The file or the variable.
        source_name: String,
        /// The subcommand's table.
        table: String,
        /// The key.
        key: String,
        /// The settings the subcommand has.
        known: String,
    },
    /// A value of the wrong kind.
    #[error("{source_name}: [{table}] {key}: {reason}")]
    BadValue {
        /// The file or the variable.
        source_name: String,
        /// The subcommand's table.
        table: String,
        /// The key.
        key: String,
        /// What is wrong.
        reason: String,
    },
}

/// One setting, as flags.
#[derive(Debug, Clone, PartialEq)]
struct Setting {
    flag: String,
    values: Vec<String>,
    takes_value: bool,
}

/// The command line with the settings of the file and the environment
/// placed before the user's own flags. `env` is the process environment.
pub fn apply(argv: Vec<OsString>, env: &[(String, String)]) -> Result<Vec<OsString>, SettingsError> {
    let Some(sub) = argv.get(1).and_then(|s| s.to_str()).map(str::to_string) else {
        return Ok(argv);
    };
    let command = Cli::command();
    let Some(subcommand) = command.find_subcommand(&sub) else {
        return Ok(argv); // clap reports it
    };
    let user = &argv[2..];
    let before_dashdash: Vec<&str> = user.iter().take_while(|a| *a != "--").filter_map(|a| a.to_str()).collect();
    let file = settings_file(&before_dashdash, env);

    let mut settings: Vec<(String, Setting)> = Vec::new();
    if let Some(file) = &file {
        for s in from_file(file, &sub, subcommand)? {
            settings.push((s.flag.clone(), s));
        }
    }
    for s in from_env(env, &sub, subcommand)? {
        settings.retain(|(f, _)| f != &s.flag);
        settings.push((s.flag.clone(), s));
    }
    let given =
        |flag: &str| before_dashdash.iter().any(|a| *a == format!("--{flag}") || a.starts_with(&format!("--{flag}=")));
    let mut out: Vec<OsString> = argv[..2].to_vec();
    for (flag, setting) in settings {
        if given(&flag) {
            continue;
        }
        if setting.takes_value {
            for v in &setting.values {
                out.push(format!("--{flag}").into());
                out.push(v.into());
            }
        } else if setting.values.first().is_some_and(|v| v == "true") {
            out.push(format!("--{flag}").into());
        }
    }
    out.extend(user.iter().cloned());
    Ok(out)
}

fn settings_file(args: &[&str], env: &[(String, String)]) -> Option<PathBuf> {
    for (i, a) in args.iter().enumerate() {
        if *a == "--settings" {
            return args.get(i + 1).map(PathBuf::from);
        }
        if let Some(path) = a.strip_prefix("--settings=") {
            return Some(PathBuf::from(path));
        }
    }
    env.iter().find(|(k, _)| k == SETTINGS_ENV).map(|(_, v)| PathBuf::from(v))
}

fn known_flags(subcommand: &clap::Command) -> Vec<(String, bool)> {
    subcommand
        .get_arguments()
        .filter_map(|a| a.get_long().map(|l| (l.to_string(), a.get_action().takes_values())))
        .filter(|(l, _)| l != "settings" && l != "help")
        .collect()
}

fn lookup(
    subcommand: &clap::Command,
    source_name: &str,
    table: &str,
    key: &str,
) -> Result<(String, bool), SettingsError> {
    let flag = key.replace('_', "-");
    let known = known_flags(subcommand);
    known.iter().find(|(l, _)| *l == flag).cloned().ok_or_else(|| SettingsError::UnknownKey {
        source_name: source_name.to_string(),
        table: table.to_string(),
        key: key.to_string(),
        known: known.iter().map(|(l, _)| l.as_str()).collect::<Vec<_>>().join(", "),
    })
}

fn from_file(file: &std::path::Path, sub: &str, subcommand: &clap::Command) -> Result<Vec<Setting>, SettingsError> {
    let name = file.display().to_string();
    let file_error = |reason: String| SettingsError::File { file: name.clone(), reason };
    let config = config::Config::builder()
        .add_source(config::File::from(file.to_path_buf()).format(config::FileFormat::Toml).required(true))
        .build()
        .map_err(|e| file_error(e.to_string()))?;
    let tables = config
        .try_deserialize::<std::collections::BTreeMap<String, config::Value>>()
        .map_err(|e| file_error(e.to_string()))?;
    let known_tables: Vec<String> = Cli::command().get_subcommands().map(|c| c.get_name().to_string()).collect();
    for table in tables.keys() {
        if !known_tables.contains(table) {
            return Err(file_error(format!(
                "[{table}]: no such subcommand (tables are named after subcommands: {})",
                known_tables.join(", ")
            )));
        }
    }
    let Some(table) = tables.get(sub) else { return Ok(Vec::new()) };
    let entries = table.clone().into_table().map_err(|_| file_error(format!("{sub} must be a table")))?;
    let mut settings = Vec::new();
    for (key, value) in entries {
        let (flag, takes_value) = lookup(subcommand, &name, sub, &key)?;
        let bad = |reason: String| SettingsError::BadValue {
            source_name: name.clone(),
            table: sub.to_string(),
            key: key.clone(),
            reason,
        };
        let values = match value.kind {
            config::ValueKind::Array(items) => {
                items.into_iter().map(|v| v.into_string().map_err(|e| bad(e.to_string()))).collect::<Result<_, _>>()?
            }
            config::ValueKind::Table(_) => return Err(bad("a table is not a setting value".into())),
            config::ValueKind::Nil => return Err(bad("no value".into())),
            _ => vec![value.into_string().map_err(|e| bad(e.to_string()))?],
        };
        if !takes_value && values.iter().any(|v| v != "true" && v != "false") {
            return Err(bad("this setting is true or false".into()));
        }
        settings.push(Setting { flag, values, takes_value });
    }
    // The parsed table does not keep the file's order: sort, so the command
    // line built from it is the same every time.
    settings.sort_by(|a, b| a.flag.cmp(&b.flag));
    Ok(settings)
}

fn from_env(env: &[(String, String)], sub: &str, subcommand: &clap::Command) -> Result<Vec<Setting>, SettingsError> {
    let prefix = format!("CODE_MODE_{}__", sub.to_uppercase().replace('-', "_"));
    let mut settings = Vec::new();
    for (name, value) in env {
        let Some(key) = name.strip_prefix(&prefix) else { continue };
        let key = key.to_lowercase();
        let (flag, takes_value) = lookup(subcommand, name, sub, &key)?;
        let values: Vec<String> = if takes_value
            && subcommand
                .get_arguments()
                .any(|a| a.get_long() == Some(flag.as_str()) && matches!(a.get_action(), clap::ArgAction::Append))
        {
            value.split(',').map(str::trim).filter(|v| !v.is_empty()).map(String::from).collect()
        } else {
            vec![value.clone()]
        };
        if !takes_value && values.iter().any(|v| v != "true" && v != "false") {
            return Err(SettingsError::BadValue {
                source_name: name.clone(),
                table: sub.to_string(),
                key,
                reason: "this setting is true or false".into(),
            });
        }
        settings.push(Setting { flag, values, takes_value });
    }
    settings.sort_by(|a, b| a.flag.cmp(&b.flag));
    Ok(settings)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(args: &[&str]) -> Vec<OsString> {
        std::iter::once("code-mode").chain(args.iter().copied()).map(OsString::from).collect()
    }

    fn strings(v: Vec<OsString>) -> Vec<String> {
        v.into_iter().map(|s| s.into_string().unwrap()).collect()
    }

    fn file(text: &str) -> (code_mode_core::testing::TempDir, String) {
        let dir = code_mode_core::testing::TempDir::new("settings");
        let path = dir.0.join("settings.toml");
        std::fs::write(&path, text).unwrap();
        let p = path.display().to_string();
        (dir, p)
    }

    #[test]
    fn file_values_become_flags_that_the_command_line_overrides() {
        let (_d, path) = file("[bridge]\nmax-calls = 50\nallow = [\"add\", \"echo\"]\ncall_timeout = 2.5\n");
        let out =
            apply(argv(&["bridge", "--settings", &path, "--max-calls", "7", "--", "srv", "--max-calls"]), &[]).unwrap();
        assert_eq!(
            strings(out),
            [
                "code-mode",
                "bridge",
                "--allow",
                "add",
                "--allow",
                "echo",
                "--call-timeout",
                "2.5",
                "--settings",
                &path,
                "--max-calls",
                "7",
                "--",
                "srv",
                "--max-calls"
            ]
        );
    }

    #[test]
    fn the_environment_overrides_the_file_and_splits_lists() {
        let (_d, path) = file("[sandbox-runner]\ncapacity = 2\n");
        let env = vec![
            (SETTINGS_ENV.to_string(), path.clone()),
            ("CODE_MODE_SANDBOX_RUNNER__CAPACITY".to_string(), "8".to_string()),
            ("CODE_MODE_BRIDGE__ALLOW".to_string(), "ignored for another subcommand".to_string()),
        ];
        let out = apply(argv(&["sandbox-runner", "--nats", "nats://x"]), &env).unwrap();
        assert_eq!(strings(out), ["code-mode", "sandbox-runner", "--capacity", "8", "--nats", "nats://x"]);
        let env = vec![("CODE_MODE_BRIDGE__ALLOW".to_string(), "add, echo".to_string())];
        let out = apply(argv(&["bridge", "--nats", "n", "--", "s"]), &env).unwrap();
        assert_eq!(
            strings(out),
            ["code-mode", "bridge", "--allow", "add", "--allow", "echo", "--nats", "n", "--", "s"]
        );
    }

    #[test]
    fn an_unknown_key_stops_startup_naming_the_file_table_and_key() {
        let (_d, path) = file("[bridge]\nalow = [\"add\"]\n");
        let err = apply(argv(&["bridge", "--settings", &path]), &[]).unwrap_err().to_string();
        assert!(err.contains(&path) && err.contains("[bridge] alow: no such setting"), "{err}");
        assert!(err.contains("allow"), "the known settings are listed: {err}");
        let env = vec![("CODE_MODE_FRONTEND__DEADLIN".to_string(), "3".to_string())];
        let err = apply(argv(&["frontend"]), &env).unwrap_err().to_string();
        assert!(err.contains("CODE_MODE_FRONTEND__DEADLIN: [frontend] deadlin: no such setting"), "{err}");
    }

    #[test]
    fn an_unknown_table_or_a_bad_file_stops_startup() {
        let (_d, path) = file("[brige]\nallow = [\"add\"]\n");
        let err = apply(argv(&["bridge", "--settings", &path]), &[]).unwrap_err().to_string();
        assert!(err.contains("[brige]: no such subcommand"), "{err}");
        let (_d, path) = file("[bridge\n");
        let err = apply(argv(&["bridge", "--settings", &path]), &[]).unwrap_err().to_string();
        assert!(err.starts_with(&format!("settings file {path}")), "{err}");
        let err = apply(argv(&["bridge", "--settings", "/nonexistent/s.toml"]), &[]).unwrap_err().to_string();
        assert!(err.contains("/nonexistent/s.toml"), "{err}");
    }

    #[test]
    fn a_switch_takes_true_or_false() {
        let (_d, path) = file("[build-image]\nif-missing = true\n");
        let out = apply(argv(&["build-image", "--settings", &path]), &[]).unwrap();
        assert_eq!(strings(out), ["code-mode", "build-image", "--if-missing", "--settings", &path]);
        let (_d, path) = file("[build-image]\nif-missing = \"yes\"\n");
        let err = apply(argv(&["build-image", "--settings", &path]), &[]).unwrap_err().to_string();
        assert!(err.contains("true or false"), "{err}");
    }
}
