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
//! key that is not a flag of the subcommand, or a value its flag's parser
//! refuses (a wrong type such as `deadline = "5s"`, a number out of its
//! range), stops startup naming the file (or variable), the table and the
//! key; the value is checked here, by the flag's own parser, so the message
//! names where the value came from rather than a flag the user never typed.
//!
//! `--settings` is a global option: `code-mode --settings FILE run ...` and
//! `code-mode run --settings FILE ...` read the same file. A file is never
//! dropped silently: two different `--settings` stop startup.

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
    /// `--settings` given more than once (before and after the subcommand,
    /// or twice), naming different files: which one wins would be a guess.
    #[error("--settings is given more than once ({}): give one settings file", .files.join(", "))]
    Repeated {
        /// The files, in the order given.
        files: Vec<String>,
    },
    /// A value of the wrong kind or out of range.
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
    apply_reading(argv, env, |file| std::fs::read_to_string(file).map_err(|e| e.to_string()))
}

/// [`apply`] with the settings file's text from `read` (the fuzz target
/// hands it the text under test; `Err` is why the file cannot be read).
pub(crate) fn apply_reading(
    argv: Vec<OsString>,
    env: &[(String, String)],
    read: impl Fn(&std::path::Path) -> Result<String, String>,
) -> Result<Vec<OsString>, SettingsError> {
    // Global options may come before the subcommand:
    // `code-mode --settings FILE run ...`.
    let mut at = 1;
    let mut leading = Vec::new();
    while let Some(arg) = argv.get(at).and_then(|s| s.to_str()) {
        if arg == "--settings" {
            leading.extend(argv.get(at + 1).and_then(|v| v.to_str()));
            at += 2;
        } else if let Some(path) = arg.strip_prefix("--settings=") {
            leading.push(path);
            at += 1;
        } else {
            break;
        }
    }
    let Some(sub) = argv.get(at).and_then(|s| s.to_str()).map(str::to_string) else {
        return Ok(argv);
    };
    let command = Cli::command();
    let Some(subcommand) = command.find_subcommand(&sub) else {
        return Ok(argv); // clap reports it
    };
    let user = &argv[at + 1..];
    let before_dashdash: Vec<&str> = user.iter().take_while(|a| *a != "--").filter_map(|a| a.to_str()).collect();
    let mut given_files: Vec<&str> = leading;
    given_files.extend(settings_files(&before_dashdash));
    let file = match given_files.as_slice() {
        [] => env.iter().find(|(k, _)| k == SETTINGS_ENV).map(|(_, v)| PathBuf::from(v)),
        [one] => Some(PathBuf::from(one)),
        [first, rest @ ..] if rest.iter().all(|f| f == first) => Some(PathBuf::from(first)),
        many => return Err(SettingsError::Repeated { files: many.iter().map(|f| f.to_string()).collect() }),
    };

    let mut settings: Vec<(String, Setting)> = Vec::new();
    if let Some(file) = &file {
        let text = read(file).map_err(|reason| SettingsError::File { file: file.display().to_string(), reason })?;
        for s in from_file(file, &text, &sub, subcommand)? {
            settings.push((s.flag.clone(), s));
        }
    }
    for s in from_env(env, &sub, subcommand)? {
        settings.retain(|(f, _)| f != &s.flag);
        settings.push((s.flag.clone(), s));
    }
    let given =
        |flag: &str| before_dashdash.iter().any(|a| *a == format!("--{flag}") || a.starts_with(&format!("--{flag}=")));
    let mut out: Vec<OsString> = argv[..=at].to_vec();
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

/// True when the flag may be given several times (`--allow`, `--env`, ...).
fn is_list(subcommand: &clap::Command, flag: &str) -> bool {
    subcommand.get_arguments().any(|a| a.get_long() == Some(flag) && matches!(a.get_action(), clap::ArgAction::Append))
}

/// The `--settings` values among the subcommand's arguments.
fn settings_files<'a>(args: &[&'a str]) -> Vec<&'a str> {
    let mut files = Vec::new();
    for (i, a) in args.iter().enumerate() {
        if *a == "--settings" {
            files.extend(args.get(i + 1).copied());
        } else if let Some(path) = a.strip_prefix("--settings=") {
            files.push(path);
        }
    }
    files
}

/// Check `value` with the parser of the subcommand's flag `--{flag}`, so a
/// wrong type or a number out of range is reported against the file or
/// variable it came from. `Err` holds the reason.
fn check_value(subcommand: &clap::Command, flag: &str, value: &str) -> Result<(), String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    // clap parses values before it checks for missing arguments, so parsing
    // the subcommand with only this flag reports a bad value first; any
    // other complaint (a required argument missing) means the value passed.
    let argv = [subcommand.get_name().to_string(), format!("--{flag}={value}")];
    let Err(error) = subcommand.clone().try_get_matches_from(argv) else { return Ok(()) };
    match error.kind() {
        ErrorKind::ValueValidation | ErrorKind::InvalidValue => {}
        _ => return Ok(()),
    }
    if let Some(source) = std::error::Error::source(&error) {
        return Err(format!("{value:?}: {source}"));
    }
    if let Some(ContextValue::Strings(valid)) = error.get(ContextKind::ValidValue) {
        return Err(format!("{value:?} is not one of {}", valid.join(", ")));
    }
    Err(format!("{value:?} is not a valid value"))
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

fn from_file(
    file: &std::path::Path,
    text: &str,
    sub: &str,
    subcommand: &clap::Command,
) -> Result<Vec<Setting>, SettingsError> {
    let name = file.display().to_string();
    let file_error = |reason: String| SettingsError::File { file: name.clone(), reason };
    let config = config::Config::builder()
        .add_source(config::File::from_str(text, config::FileFormat::Toml))
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
            config::ValueKind::Array(_) if !is_list(subcommand, &flag) => {
                return Err(bad("this setting takes one value, not a list".into()));
            }
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
        if takes_value {
            for v in &values {
                check_value(subcommand, &flag, v).map_err(bad)?;
            }
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
        let values: Vec<String> = if takes_value && is_list(subcommand, &flag) {
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
        if takes_value {
            for v in &values {
                check_value(subcommand, &flag, v).map_err(|reason| SettingsError::BadValue {
                    source_name: name.clone(),
                    table: sub.to_string(),
                    key: key.clone(),
                    reason,
                })?;
            }
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
    fn a_settings_file_before_the_subcommand_is_applied_like_one_after_it() {
        let (_d, path) = file("[run]\nmax-calls = 1\nallow = [\"add\"]\n");
        let before = apply(argv(&["--settings", &path, "run", "--code", "1", "--", "srv"]), &[]).unwrap();
        assert_eq!(
            strings(before),
            ["code-mode", "--settings", &path, "run", "--allow", "add", "--max-calls", "1", "--code", "1", "--", "srv"]
        );
        let equals = apply(argv(&[&format!("--settings={path}"), "run", "--", "srv"]), &[]).unwrap();
        assert_eq!(strings(equals)[2..6], ["run", "--allow", "add", "--max-calls"]);
        // The flag wins over CODE_MODE_SETTINGS in either position.
        let (_d2, other) = file("[run]\nmax-calls = 9\n");
        let env = vec![(SETTINGS_ENV.to_string(), other)];
        let out = apply(argv(&["--settings", &path, "run", "--", "srv"]), &env).unwrap();
        assert!(strings(out).windows(2).any(|w| w == ["--max-calls", "1"]));
        // And the parsed command line holds the file's values.
        let out = apply(argv(&["--settings", &path, "run", "--code", "1", "--", "srv"]), &[]).unwrap();
        let Cli { command: crate::cli::Command::Run(run), settings } = <Cli as clap::Parser>::parse_from(out) else {
            panic!("not run")
        };
        assert_eq!(settings.as_deref(), Some(std::path::Path::new(&path)));
        assert_eq!((run.stack.bridge.max_calls, run.stack.bridge.allow), (1, vec!["add".to_string()]));
    }

    #[test]
    fn a_bad_file_before_the_subcommand_stops_startup_naming_it() {
        let (_d, path) = file("[run]\nmax-calls = 1\nno-such = 2\n");
        let err = apply(argv(&["--settings", &path, "run", "--", "srv"]), &[]).unwrap_err().to_string();
        assert!(err.contains(&path) && err.contains("[run] no-such: no such setting"), "{err}");
    }

    #[test]
    fn two_different_settings_files_stop_startup_naming_both() {
        let (_d, a) = file("[run]\nmax-calls = 1\n");
        let (_d2, b) = file("[run]\nmax-calls = 2\n");
        for args in [
            vec!["--settings", &a, "run", "--settings", &b, "--", "srv"],
            vec!["run", "--settings", &a, "--settings", &b, "--", "srv"],
        ] {
            let err = apply(argv(&args), &[]).unwrap_err().to_string();
            assert_eq!(err, format!("--settings is given more than once ({a}, {b}): give one settings file"));
        }
        // The same file twice is no ambiguity.
        assert!(apply(argv(&["--settings", &a, "run", "--settings", &a, "--", "srv"]), &[]).is_ok());
    }

    #[test]
    fn a_value_of_the_wrong_type_names_the_file_table_and_key_not_a_flag() {
        let (_d, path) = file("[run]\ndeadline = \"5s\"\n");
        let err = apply(argv(&["run", "--settings", &path, "--", "srv"]), &[]).unwrap_err().to_string();
        assert_eq!(
            err,
            format!("{path}: [run] deadline: \"5s\": not a number; a number of seconds from 0.001 to 86400 is allowed")
        );
        let (_d, path) = file("[sandbox-runner]\nbase = \"floppy\"\n");
        let err = apply(argv(&["sandbox-runner", "--settings", &path]), &[]).unwrap_err().to_string();
        assert!(err.starts_with(&format!("{path}: [sandbox-runner] base: \"floppy\"")), "{err}");
        assert!(err.contains("auto") && err.contains("debootstrap"), "the allowed values are listed: {err}");
        let env = vec![("CODE_MODE_FRONTEND__MAX_CONCURRENT".to_string(), "0".to_string())];
        let err = apply(argv(&["frontend"]), &env).unwrap_err().to_string();
        assert_eq!(
            err,
            "CODE_MODE_FRONTEND__MAX_CONCURRENT: [frontend] max_concurrent: \"0\": out of range; a whole number \
             from 1 to 1024 is allowed"
        );
    }

    #[test]
    fn expose_tools_is_a_setting_and_the_bare_flag_means_beside() {
        use clap::Parser;

        use crate::cli::{Command, ExposeTools};
        let parsed = |args: Vec<OsString>| match Cli::try_parse_from(args).expect("parses").command {
            Command::Serve(serve) => (serve.clients.direct.expose_tools, serve.clients.direct.max_direct_calls),
            _ => unreachable!(),
        };
        let (_d, path) = file("[serve]\nexpose-tools = \"only\"\nmax-direct-calls = 5\n");
        let out = apply(argv(&["serve", "--settings", &path, "--", "srv"]), &[]).unwrap();
        assert_eq!(parsed(out), (ExposeTools::Only, Some(5)));
        let env = vec![("CODE_MODE_SERVE__EXPOSE_TOOLS".to_string(), "beside".to_string())];
        assert_eq!(parsed(apply(argv(&["serve", "--", "srv"]), &env).unwrap()).0, ExposeTools::Beside);
        assert_eq!(parsed(argv(&["serve", "--expose-tools", "--", "srv"])).0, ExposeTools::Beside);
        assert_eq!(parsed(argv(&["serve", "--", "srv"])).0, ExposeTools::Off);
        let err = Cli::try_parse_from(argv(&["serve", "--expose-tools=all", "--", "srv"])).unwrap_err().to_string();
        assert!(err.contains("'all'") && err.contains("beside, only"), "{err}");
    }

    #[test]
    fn packages_are_settings_of_the_commands_that_pick_an_image() {
        use clap::Parser;
        let (_d, path) = file(
            "[run]\nrequirements = \"reqs.txt\"\napt = [\"python3-numpy\", \"python3-scipy\"]\nwheels = \"wheels\"\n\n\
             [sandbox-runner]\nrequirements = \"reqs.txt\"\n\n[build-image]\napt = [\"python3-numpy\"]\n",
        );
        let out = apply(argv(&["run", "--settings", &path, "--code", "1", "--", "srv"]), &[]).unwrap();
        let crate::cli::Command::Run(run) = Cli::try_parse_from(out).expect("parses").command else {
            panic!("not run")
        };
        let packages = run.stack.runner.packages.packages();
        assert_eq!(packages.requirements.as_deref(), Some(std::path::Path::new("reqs.txt")));
        assert_eq!(packages.apt, ["python3-numpy", "python3-scipy"]);
        assert_eq!(packages.wheels.as_deref(), Some(std::path::Path::new("wheels")));
        let out = apply(argv(&["sandbox-runner", "--settings", &path, "--nats", "n"]), &[]).unwrap();
        assert!(strings(out).windows(2).any(|w| w == ["--requirements", "reqs.txt"]));
        let env = vec![("CODE_MODE_DOCTOR__APT".to_string(), "python3-numpy,python3-pandas".to_string())];
        let out = apply(argv(&["doctor"]), &env).unwrap();
        assert_eq!(strings(out), ["code-mode", "doctor", "--apt", "python3-numpy", "--apt", "python3-pandas"]);
        let out = apply(argv(&["build-image", "--settings", &path]), &[]).unwrap();
        assert_eq!(strings(out)[2..4], ["--apt", "python3-numpy"]);
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
