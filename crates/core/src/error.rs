//! Showing an error to a person: the message and its causes, each once.
//!
//! The services' error enums name their cause in their own message (so a
//! log line, a refusal or a test sees the whole story in `to_string()`)
//! and also expose it as `source()` (so programs can walk to the typed
//! cause). Printing the chain as-is would say the cause twice; [`report`]
//! skips a cause whose text the message already holds.

use std::error::Error;

/// `error`'s message followed by each cause the text does not hold yet,
/// joined by ": ".
pub fn report(error: &(dyn Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(next) = cause {
        let said = next.to_string();
        if !said.is_empty() && !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        cause = next.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot read {path}: {source}")]
    struct Read {
        path: String,
        #[source]
        source: std::io::Error,
    }

    #[derive(Debug, thiserror::Error)]
    #[error("the config file is unusable")]
    struct Outer(#[source] Read);

    #[test]
    fn a_cause_the_message_names_is_said_once_and_one_it_does_not_is_added() {
        let read = Read { path: "/x".into(), source: std::io::Error::other("no such file") };
        assert_eq!(report(&read), "cannot read /x: no such file");
        let outer = Outer(Read { path: "/x".into(), source: std::io::Error::other("no such file") });
        assert_eq!(report(&outer), "the config file is unusable: cannot read /x: no such file");
    }
}
