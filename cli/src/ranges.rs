//! The allowed range of every numeric option, and the value parsers that
//! hold a value to it.
//!
//! Each numeric flag names one of these parsers, so a value out of range
//! stops at parsing with clap's "invalid value 'V' for '--OPTION'" followed
//! by the range, and [`crate::settings`] runs the same parser on values from
//! a settings file or the environment, so those name the file, table and
//! key (or the variable) instead. A parsed value is therefore always one the
//! services can use: no duration overflows a timer (`Duration::from_secs_f64`
//! panics on 1e20), no count asks for an absurd semaphore or pool. The
//! bounds themselves live in `code_mode_core::defaults`, beside the
//! defaults; the options tables of docs/options.md state them.

use std::time::Duration;

use code_mode_core::defaults;

/// A number of seconds between `min` and `max`, parsed to a [`Duration`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Seconds {
    /// The shortest allowed.
    pub min: Duration,
    /// The longest allowed.
    pub max: Duration,
}

/// Every time option: deadline, call and approval timeouts, capacity wait.
pub const TIME: Seconds = Seconds { min: defaults::MIN_SECONDS, max: defaults::MAX_SECONDS };
/// `--stateless-idle`: from an idle HTTP session's life to 30 days.
pub const STATELESS_IDLE: Seconds =
    Seconds { min: defaults::MIN_STATELESS_IDLE, max: Duration::from_secs(30 * 86_400) };

impl Seconds {
    /// The range as people read it.
    pub fn describe(&self) -> String {
        format!("a number of seconds from {} to {}", self.min.as_secs_f64(), self.max.as_secs_f64())
    }

    /// Parse `text` (a decimal number such as `30`, `2.5` or `1e2`); the
    /// error says what is wrong and the range.
    pub fn parse(&self, text: &str) -> Result<Duration, String> {
        let Ok(value) = text.trim().parse::<f64>() else {
            return Err(format!("not a number; {} is allowed", self.describe()));
        };
        // NaN fails both comparisons, so it is refused here too.
        if !(value >= self.min.as_secs_f64() && value <= self.max.as_secs_f64()) {
            return Err(format!("out of range; {} is allowed", self.describe()));
        }
        // In range, so far from what `from_secs_f64` cannot represent.
        Ok(Duration::from_secs_f64(value))
    }

    /// This range as a clap value parser.
    pub fn parser(self) -> impl Fn(&str) -> Result<Duration, String> + Clone + Send + Sync + 'static {
        move |text: &str| self.parse(text)
    }
}

/// A whole number between `min` and `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Count {
    /// The smallest allowed.
    pub min: u64,
    /// The largest allowed.
    pub max: u64,
}

/// `--max-calls`.
pub const CALLS: Count = Count { min: 0, max: defaults::MAX_CALLS_LIMIT as u64 };
/// `--max-code`, in bytes.
pub const CODE_BYTES: Count = Count { min: 1, max: defaults::MAX_CODE_LIMIT as u64 };
/// `--description-budget`, in characters.
pub const DESCRIPTION_CHARS: Count = Count { min: 0, max: defaults::MAX_DESCRIPTION_BUDGET as u64 };
/// `--max-concurrent` and `--capacity`.
pub const CELLS: Count = Count { min: 1, max: defaults::MAX_CELLS_LIMIT as u64 };
/// `--warm` and `--warm-max`.
pub const WARM: Count = Count { min: 0, max: defaults::MAX_WARM as u64 };
/// `--jetstream-replicas` (a JetStream stream has at most 5 replicas).
pub const REPLICAS: Count = Count { min: 1, max: 5 };
/// `--max-handles`.
pub const HANDLES: Count = Count { min: 1, max: 64 };
/// `--max-sessions` and `--max-sessions-per-identity`.
pub const SESSIONS: Count = Count { min: 1, max: 100_000 };
/// `--max-body`, in bytes (1 KiB to 64 MiB).
pub const BODY_BYTES: Count = Count { min: 1024, max: 64 << 20 };
/// `--files-max-bytes` (1 MiB to 1 TiB).
pub const FILES_BYTES: Count = Count { min: 1 << 20, max: 1 << 40 };
/// `--files-quota` (at most 1 TiB).
pub const FILES_QUOTA: Count = Count { min: 1, max: 1 << 40 };
/// `--audit-rotate-bytes` (0: never; at most 1 TiB).
pub const AUDIT_ROTATE_BYTES: Count = Count { min: 0, max: 1 << 40 };
/// `--audit-retention-days` (0: for ever; at most a hundred years, so the
/// days in seconds never overflow).
pub const RETENTION_DAYS: Count = Count { min: 0, max: 36_500 };

impl Count {
    /// The range as people read it.
    pub fn describe(&self) -> String {
        format!("a whole number from {} to {}", self.min, self.max)
    }

    /// Parse `text` as a whole number in range, converted to `T`.
    pub fn parse<T: TryFrom<u64>>(&self, text: &str) -> Result<T, String> {
        let text = text.trim();
        let value = match text.parse::<u64>() {
            Ok(v) => v,
            // Digits that do not fit u64 are a number out of range, not a
            // malformed one.
            Err(_) if !text.is_empty() && text.trim_start_matches('+').bytes().all(|b| b.is_ascii_digit()) => {
                return Err(format!("out of range; {} is allowed", self.describe()));
            }
            Err(_) => return Err(format!("not a whole number; {} is allowed", self.describe())),
        };
        if value < self.min || value > self.max {
            return Err(format!("out of range; {} is allowed", self.describe()));
        }
        T::try_from(value).map_err(|_| format!("out of range; {} is allowed", self.describe()))
    }

    /// This range as a clap value parser producing `T`.
    pub fn parser<T>(self) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static
    where
        T: TryFrom<u64> + Clone + Send + Sync + 'static,
    {
        move |text: &str| self.parse::<T>(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_accept_their_range_and_refuse_everything_else_naming_it() {
        assert_eq!(TIME.parse("90"), Ok(Duration::from_secs(90)));
        assert_eq!(TIME.parse("0.001"), Ok(Duration::from_millis(1)));
        assert_eq!(TIME.parse("86400"), Ok(Duration::from_secs(86_400)));
        assert_eq!(TIME.parse("2.5"), Ok(Duration::from_millis(2500)));
        for bad in ["0", "-1", "0.0009", "86400.5", "1e20", "inf", "-inf", "NaN", "nan"] {
            let err = TIME.parse(bad).unwrap_err();
            assert_eq!(err, "out of range; a number of seconds from 0.001 to 86400 is allowed", "{bad}");
        }
        for bad in ["", "5s", "ten", "1,5", "0x10"] {
            let err = TIME.parse(bad).unwrap_err();
            assert!(err.starts_with("not a number;") && err.contains("0.001 to 86400"), "{bad}: {err}");
        }
    }

    #[test]
    fn counts_accept_their_range_and_refuse_everything_else_naming_it() {
        assert_eq!(CELLS.parse::<usize>("1"), Ok(1));
        assert_eq!(CELLS.parse::<usize>("1024"), Ok(1024));
        assert_eq!(CALLS.parse::<u32>("0"), Ok(0));
        for bad in ["0", "1025", "18446744073709551615", "18446744073709551616", "99999999999999999999999"] {
            let err = CELLS.parse::<usize>(bad).unwrap_err();
            assert_eq!(err, "out of range; a whole number from 1 to 1024 is allowed", "{bad}");
        }
        for bad in ["-1", "1.5", "1e3", "", "NaN", "inf", "four"] {
            let err = CELLS.parse::<usize>(bad).unwrap_err();
            assert_eq!(err, "not a whole number; a whole number from 1 to 1024 is allowed", "{bad}");
        }
    }
}

/// Every duration and size option of every subcommand, walked with extreme
/// values from the command line, a settings file and the environment: each
/// value is either accepted (and then within the option's range) or refused
/// with a clear error naming where it came from, the value and the range;
/// never a panic.
#[cfg(test)]
mod every_option {
    use clap::CommandFactory;
    use proptest::prelude::*;

    use crate::cli::Cli;
    use crate::settings;

    /// What the walk needs of one numeric option.
    #[derive(Debug, Clone)]
    struct Numeric {
        sub: String,
        long: String,
        min: f64,
        max: f64,
        whole: bool,
    }

    /// Value names of the duration and size options.
    const NUMERIC_VALUE_NAMES: [&str; 5] = ["SECONDS", "N", "BYTES", "CHARS", "DAYS"];

    /// The arguments a subcommand needs besides the option under test.
    fn required(sub: &str) -> &'static [&'static str] {
        match sub {
            "serve" | "run" => &[],
            "frontend" | "sandbox-runner" | "bridge" => &["--nats", "nats://127.0.0.1:4222"],
            _ => &[],
        }
    }

    fn tail(sub: &str) -> &'static [&'static str] {
        match sub {
            "serve" | "run" | "bridge" | "describe" => &["--", "server"],
            _ => &[],
        }
    }

    /// The range an option documents in its help, `(MIN to MAX)`.
    fn documented_range(help: &str) -> (f64, f64) {
        let open = help.rfind('(').unwrap_or_else(|| panic!("no range in {help:?}"));
        let inner = help[open + 1..].trim_end_matches(['.', ')']);
        let inner = inner.rsplit("; ").next().unwrap();
        let (min, max) = inner.split_once(" to ").unwrap_or_else(|| panic!("no range in {help:?}"));
        (min.parse().unwrap(), max.parse().unwrap())
    }

    fn numeric_options() -> Vec<Numeric> {
        let command = Cli::command();
        let mut found = Vec::new();
        for sub in command.get_subcommands() {
            for arg in sub.get_arguments() {
                let Some(long) = arg.get_long() else { continue };
                let names: Vec<&str> = arg.get_value_names().unwrap_or_default().iter().map(|s| s.as_str()).collect();
                if !names.iter().any(|n| NUMERIC_VALUE_NAMES.contains(n)) {
                    continue;
                }
                let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
                let (min, max) = documented_range(&help);
                let whole = !names.contains(&"SECONDS");
                found.push(Numeric { sub: sub.get_name().into(), long: long.into(), min, max, whole });
            }
        }
        found
    }

    #[test]
    fn the_walk_covers_every_duration_and_size_option() {
        let mut seen: Vec<String> = numeric_options().iter().map(|o| format!("{} --{}", o.sub, o.long)).collect();
        seen.sort();
        let mut expected = Vec::new();
        for sub in ["serve", "run"] {
            for long in ["approval-timeout", "call-timeout", "deadline", "description-budget", "max-calls", "max-code"]
            {
                expected.push(format!("{sub} --{long}"));
            }
            expected.push(format!("{sub} --warm"));
            expected.push(format!("{sub} --warm-max"));
            expected.push(format!("{sub} --warm-window"));
        }
        expected.push("serve --max-concurrent".into());
        for sub in ["serve", "frontend", "sandbox-runner"] {
            expected.push(format!("{sub} --files-ttl"));
            expected.push(format!("{sub} --files-max-bytes"));
            expected.push(format!("{sub} --files-quota"));
        }
        expected.push("login --timeout".into());
        for long in ["capacity-wait", "deadline", "description-budget", "max-code", "max-concurrent"] {
            expected.push(format!("frontend --{long}"));
        }
        for sub in ["serve", "frontend"] {
            for long in ["max-cells-per-session", "max-sessions", "max-sessions-per-identity", "max-body"] {
                expected.push(format!("{sub} --{long}"));
            }
        }
        expected.push("run --max-cells-per-session".into());
        for long in ["approval-timeout", "call-timeout", "max-calls", "stateless-idle"] {
            expected.push(format!("bridge --{long}"));
        }
        for sub in ["serve", "run"] {
            expected.push(format!("{sub} --stateless-idle"));
        }
        for long in ["capacity", "warm", "warm-max", "warm-window"] {
            expected.push(format!("sandbox-runner --{long}"));
        }
        for sub in ["serve", "run", "bridge", "sandbox-runner"] {
            for long in ["audit-checkpoint", "audit-retention-days", "audit-rotate-bytes"] {
                expected.push(format!("{sub} --{long}"));
            }
        }
        for sub in ["frontend", "bridge", "sandbox-runner"] {
            expected.push(format!("{sub} --jetstream-replicas"));
        }
        for sub in ["serve", "frontend"] {
            expected.push(format!("{sub} --session-idle"));
            expected.push(format!("{sub} --session-max"));
            expected.push(format!("{sub} --max-direct-calls"));
            expected.push(format!("{sub} --max-handles"));
            expected.push(format!("{sub} --task-deadline"));
            expected.push(format!("{sub} --task-ttl"));
        }
        // `describe` takes serve's options that shape what the model reads.
        for long in [
            "approval-timeout",
            "call-timeout",
            "deadline",
            "description-budget",
            "max-calls",
            "max-cells-per-session",
            "max-code",
            "max-handles",
            "session-idle",
            "session-max",
            "stateless-idle",
        ] {
            expected.push(format!("describe --{long}"));
        }
        expected.sort();
        assert_eq!(seen, expected);
    }

    #[test]
    fn the_docs_state_the_range_of_every_numeric_option() {
        let options = include_str!("../../docs/options.md");
        for option in numeric_options() {
            let range = format!("{} to {}", option.min, option.max);
            let stated = options.lines().any(|line| {
                line.starts_with('|') && line.contains(&format!("`--{} ", option.long)) && line.contains(&range)
            });
            assert!(stated, "docs/options.md has no table row for --{} saying {range}", option.long);
        }
    }

    #[test]
    fn the_defaults_of_the_flags_are_the_core_defaults() {
        use code_mode_core::defaults;
        let cli = <Cli as clap::Parser>::parse_from(["code-mode", "serve", "--", "server"]);
        let crate::cli::Command::Serve(serve) = cli.command else { panic!("not serve") };
        let s = &serve.stack;
        assert_eq!(s.frontend.deadline, defaults::DEADLINE);
        assert_eq!(s.bridge.call_timeout, defaults::CALL_TIMEOUT);
        assert_eq!(s.bridge.approval_timeout, defaults::APPROVAL_TIMEOUT);
        let cli = <Cli as clap::Parser>::parse_from(["code-mode", "frontend", "--nats", "n"]);
        let crate::cli::Command::Frontend(frontend) = cli.command else { panic!("not frontend") };
        assert_eq!(frontend.capacity_wait, defaults::CAPACITY_WAIT);
    }

    /// Is `value` inside the option's range, as the option reads numbers?
    fn in_range(option: &Numeric, value: &str) -> bool {
        let value = value.trim();
        if option.whole {
            value.parse::<u64>().is_ok_and(|v| v as f64 >= option.min && v as f64 <= option.max)
        } else {
            value.parse::<f64>().is_ok_and(|v| v >= option.min && v <= option.max)
        }
    }

    fn range_text(option: &Numeric) -> String {
        format!("from {} to {}", option.min, option.max)
    }

    /// From the command line, as `--opt VALUE` and `--opt=VALUE`.
    fn check_flag(option: &Numeric, value: &str) {
        for form in [vec![format!("--{}", option.long), value.to_string()], vec![format!("--{}={value}", option.long)]]
        {
            let mut argv = vec!["code-mode".to_string(), option.sub.clone()];
            argv.extend(required(&option.sub).iter().map(|s| s.to_string()));
            argv.extend(form);
            argv.extend(tail(&option.sub).iter().map(|s| s.to_string()));
            match Cli::try_parse_from_checked(&argv) {
                Ok(()) => assert!(in_range(option, value), "{argv:?} was accepted out of range"),
                Err(message) => {
                    assert!(!in_range(option, value), "{argv:?} was refused in range: {message}");
                    assert!(message.contains(&format!("'--{}", option.long)), "no option named: {message}");
                    assert!(message.contains(&format!("'{value}'")), "no value named: {message}");
                    assert!(message.contains(&range_text(option)), "no range named: {message}");
                }
            }
        }
    }

    /// From a settings file, with `literal` written as TOML.
    fn check_file(option: &Numeric, literal: &str) {
        let dir = code_mode_core::testing::TempDir::new("ranges");
        let path = dir.0.join("settings.toml");
        std::fs::write(&path, format!("[{}]\n{} = {literal}\n", option.sub, option.long)).unwrap();
        let path = path.display().to_string();
        let mut argv: Vec<std::ffi::OsString> = vec!["code-mode".into(), "--settings".into(), (&path).into()];
        argv.push((&option.sub).into());
        argv.extend(required(&option.sub).iter().map(Into::into));
        argv.extend(tail(&option.sub).iter().map(Into::into));
        match settings::apply(argv, &[]) {
            Ok(out) => {
                let out: Vec<String> = out.into_iter().map(|s| s.into_string().unwrap()).collect();
                if let Err(message) = Cli::try_parse_from_checked(&out) {
                    panic!("{literal:?} from a file passed the settings but not the parser: {message}");
                }
            }
            Err(e) => {
                let message = e.to_string();
                assert!(message.contains(&path), "no file named for {literal:?}: {message}");
                if let settings::SettingsError::BadValue { .. } = e {
                    let at = format!("[{}] {}: ", option.sub, option.long);
                    assert!(message.contains(&at), "no table and key for {literal:?}: {message}");
                    let scalar = !literal.starts_with(['[', '{']);
                    assert!(!scalar || message.contains(&range_text(option)), "no range for {literal:?}: {message}");
                }
            }
        }
    }

    /// From the environment.
    fn check_env(option: &Numeric, value: &str) {
        let variable = format!(
            "CODE_MODE_{}__{}",
            option.sub.to_uppercase().replace('-', "_"),
            option.long.to_uppercase().replace('-', "_")
        );
        let env = vec![(variable.clone(), value.to_string())];
        let mut argv: Vec<std::ffi::OsString> = vec!["code-mode".into(), (&option.sub).into()];
        argv.extend(required(&option.sub).iter().map(Into::into));
        argv.extend(tail(&option.sub).iter().map(Into::into));
        match settings::apply(argv, &env) {
            Ok(out) => {
                let out: Vec<String> = out.into_iter().map(|s| s.into_string().unwrap()).collect();
                if let Err(message) = Cli::try_parse_from_checked(&out) {
                    panic!("{value:?} from {variable} passed the settings but not the parser: {message}");
                }
                // A list option aside, a value out of range never passes.
                if !value.trim().is_empty() {
                    assert!(in_range(option, value), "{value:?} from {variable} was accepted out of range");
                }
            }
            Err(e) => {
                let message = e.to_string();
                assert!(message.starts_with(&format!("{variable}: [{}] ", option.sub)), "{message}");
                assert!(message.contains(&range_text(option)), "no range for {value:?}: {message}");
            }
        }
    }

    trait TryParseChecked {
        fn try_parse_from_checked(argv: &[String]) -> Result<(), String>;
    }

    impl TryParseChecked for Cli {
        /// Parse; a refusal must be a value error, rendered as clap prints it.
        fn try_parse_from_checked(argv: &[String]) -> Result<(), String> {
            match <Cli as clap::Parser>::try_parse_from(argv) {
                Ok(_) => Ok(()),
                Err(e) => {
                    use clap::error::ErrorKind;
                    assert!(
                        matches!(e.kind(), ErrorKind::ValueValidation | ErrorKind::InvalidValue),
                        "{argv:?} failed with {:?}: {e}",
                        e.kind()
                    );
                    Err(e.to_string())
                }
            }
        }
    }

    /// The values every option is tried with, as text (flags and the
    /// environment) and as TOML (files).
    const EXTREMES: [&str; 24] = [
        "0",
        "-0",
        "1",
        "-1",
        "0.001",
        "0.0009",
        "86400",
        "86400.001",
        "NaN",
        "nan",
        "inf",
        "-inf",
        "infinity",
        "1e20",
        "-1e20",
        "1e-20",
        "18446744073709551615",
        "18446744073709551616",
        "-9223372036854775808",
        "4294967296",
        "1.5",
        "5s",
        "",
        "0x10",
    ];

    #[test]
    fn extreme_values_are_accepted_in_range_or_refused_naming_option_value_and_range() {
        let options = numeric_options();
        for option in &options {
            for value in EXTREMES {
                check_flag(option, value);
                check_env(option, value);
                check_file(option, &format!("{value:?}"));
            }
            // TOML numbers and other types, including those TOML itself
            // refuses (u64::MAX does not fit its integers).
            for literal in [
                "0",
                "-1",
                "1",
                "nan",
                "inf",
                "-inf",
                "1e20",
                "18446744073709551615",
                "1.5",
                "true",
                "[1, 2]",
                "{a = 1}",
            ] {
                check_file(option, literal);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        #[test]
        fn any_number_or_text_is_accepted_in_range_or_refused_clearly(
            index in 0usize..64,
            value in prop_oneof![
                any::<f64>().prop_map(|v| v.to_string()),
                any::<f64>().prop_map(|v| format!("{v:e}")),
                any::<u64>().prop_map(|v| v.to_string()),
                any::<i64>().prop_map(|v| v.to_string()),
                (0u64..200_000).prop_map(|v| v.to_string()),
                (0u64..100_000_000).prop_map(|v| format!("{}.{:03}", v / 1000, v % 1000)),
                "[ -~]{0,12}",
            ],
        ) {
            let options = numeric_options();
            let option = &options[index % options.len()];
            check_flag(option, &value);
            check_env(option, &value);
            check_file(option, &format!("{value:?}"));
            if value.parse::<f64>().is_ok() && !value.contains(['N', 'n', 'i']) {
                check_file(option, &value);
            }
        }
    }
}
