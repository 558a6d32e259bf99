//! Static bearer tokens (`--auth-tokens FILE`) for small deployments.
//!
//! The file has one line per client, `NAME sha256:HEX`: the client's name
//! (its identity) and the SHA-256 of its token, so the file holds no
//! secret. A third word `groups=security,ops` puts the identity in groups
//! (comma-separated names of 1 to 64 characters, no spaces), which the web
//! console's approver rules and `--console-operators` match. Blank lines and lines starting with `#` are skipped. A bad line
//! stops startup naming the file and the line.
//!
//! A presented token is hashed and compared with every entry in constant
//! time (no early exit, no comparison that stops at the first differing
//! byte), so the time taken says nothing about how close a guess was.
//!
//! One task per process owns the file: it rereads it on SIGHUP and
//! publishes the new set through a `watch` channel; a file that no longer
//! parses keeps the set in force, and the error is logged naming the line.
//! `code-mode token new NAME` makes a token and its line ([`new_token`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::{AuthError, Identity, check_group};

/// Prefix of the tokens `code-mode token new` makes (so a leaked one is
/// easy to recognise in a scan).
pub const TOKEN_PREFIX: &str = "cm_";

/// Longest client name accepted.
const MAX_NAME: usize = 64;

/// One client of the file.
#[derive(Debug, Clone)]
struct Entry {
    name: Identity,
    hash: [u8; 32],
}

/// The clients of one reading of the file.
#[derive(Debug, Clone, Default)]
pub struct TokenSet {
    entries: Vec<Entry>,
}

impl TokenSet {
    /// Parse the file's text; `path` names it in errors.
    pub fn parse(path: &Path, text: &str) -> Result<Self, AuthError> {
        let mut entries: Vec<Entry> = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad = |reason: String| AuthError::TokenFile { path: path.to_path_buf(), line: i + 1, reason };
            let mut words = line.split_whitespace();
            let (Some(name), Some(hash), groups, None) = (words.next(), words.next(), words.next(), words.next())
            else {
                return Err(bad("expected `NAME sha256:HEX [groups=G1,G2]` (two words, or three)".into()));
            };
            let groups = match groups {
                None => Vec::new(),
                Some(word) => parse_groups(word).map_err(bad)?,
            };
            check_name(name).map_err(bad)?;
            let Some(hex_digits) = hash.strip_prefix("sha256:") else {
                return Err(bad(format!("the hash of {name} must start with `sha256:`")));
            };
            let mut digest = [0u8; 32];
            if hex::decode_to_slice(hex_digits, &mut digest).is_err() {
                return Err(bad(format!("the hash of {name} must be 64 hexadecimal digits after `sha256:`")));
            }
            if entries.iter().any(|e| e.name.as_str() == name) {
                return Err(bad(format!("{name} is named twice")));
            }
            if entries.iter().any(|e| e.hash == digest) {
                return Err(bad(format!("{name} has the same token as an earlier line")));
            }
            entries.push(Entry { name: Identity::with_groups(name, groups), hash: digest });
        }
        Ok(Self { entries })
    }

    /// Read and parse the file.
    pub fn read(path: &Path) -> Result<Self, AuthError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| AuthError::TokenFileUnreadable { path: path.to_path_buf(), source })?;
        Self::parse(path, &text)
    }

    /// How many clients it names.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when it names nobody.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The identity whose token this is, comparing with every entry in
    /// constant time.
    pub fn identify(&self, token: &str) -> Option<Identity> {
        let presented: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let mut found = None;
        for entry in &self.entries {
            if bool::from(entry.hash.ct_eq(&presented)) {
                found = Some(entry.name.clone());
            }
        }
        found
    }
}

/// The groups of a line's third word, `groups=G1,G2`.
fn parse_groups(word: &str) -> Result<Vec<String>, String> {
    let Some(list) = word.strip_prefix("groups=") else {
        return Err(format!(
            "the third word must be `groups=G1,G2`, not {:?}",
            word.chars().take(40).collect::<String>()
        ));
    };
    let mut groups: Vec<String> = Vec::new();
    for group in list.split(',') {
        check_group(group)?;
        if !groups.iter().any(|g| g == group) {
            groups.push(group.to_string());
        }
    }
    Ok(groups)
}

/// Why a client name is refused, if it is.
fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.chars().count() > MAX_NAME {
        return Err(format!("a client name must be 1 to {MAX_NAME} characters"));
    }
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.@".contains(c)) {
        return Err(format!("the client name {name:?} may hold only letters, digits and - _ . @"));
    }
    Ok(())
}

/// A fresh random token for client `name`, and the line for the tokens
/// file.
pub fn new_token(name: &str) -> Result<(String, String), String> {
    check_name(name)?;
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| format!("no randomness from the system: {e}"))?;
    let token = format!("{TOKEN_PREFIX}{}", hex::encode(bytes));
    let line = format!("{name} sha256:{}", hex::encode(Sha256::digest(token.as_bytes())));
    Ok((token, line))
}

/// The token file and the tokens in force, reread on SIGHUP.
#[derive(Debug, Clone)]
pub struct StaticTokens {
    current: watch::Receiver<Arc<TokenSet>>,
}

impl StaticTokens {
    /// Read the file (an error stops startup) and reread it on each SIGHUP
    /// until `cancel` fires.
    pub fn open(path: &Path, cancel: CancellationToken) -> Result<Self, AuthError> {
        let first = TokenSet::read(path)?;
        tracing::info!(file = %path.display(), clients = first.len(), "static bearer tokens loaded");
        let (publish, current) = watch::channel(Arc::new(first));
        let hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
            .map_err(|source| AuthError::TokenFileUnreadable { path: path.to_path_buf(), source })?;
        tokio::spawn(reread_on_hangup(path.to_path_buf(), hangup, publish, cancel));
        Ok(Self { current })
    }

    /// The identity whose token this is.
    pub fn identify(&self, token: &str) -> Option<Identity> {
        self.current.borrow().identify(token)
    }
}

async fn reread_on_hangup(
    path: PathBuf,
    mut hangup: tokio::signal::unix::Signal,
    publish: watch::Sender<Arc<TokenSet>>,
    cancel: CancellationToken,
) {
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            signal = hangup.recv() => if signal.is_none() { return },
        }
        match TokenSet::read(&path) {
            Ok(set) => {
                tracing::info!(file = %path.display(), clients = set.len(), "SIGHUP: static bearer tokens reread");
                publish.send_replace(Arc::new(set));
            }
            Err(e) => tracing::error!(error = %e, "SIGHUP: the token file was not reread; the tokens in force stay"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_made_by_new_token_is_identified_by_its_line_and_no_other_token_is() {
        let (token, line) = new_token("alice").unwrap();
        let (other, other_line) = new_token("bob").unwrap();
        assert!(token.starts_with(TOKEN_PREFIX) && token.len() == TOKEN_PREFIX.len() + 64);
        let set = TokenSet::parse(Path::new("t"), &format!("# clients\n\n{line}\n{other_line}\n")).unwrap();
        assert_eq!(set.identify(&token).unwrap().as_str(), "alice");
        assert_eq!(set.identify(&other).unwrap().as_str(), "bob");
        assert!(set.identify("cm_guess").is_none());
        assert!(set.identify(&token[..token.len() - 1]).is_none());
        assert!(!line.contains(&token[TOKEN_PREFIX.len()..]), "the line holds no secret");
    }

    #[test]
    fn a_line_with_a_groups_word_puts_its_identity_in_those_groups() {
        let (token, line) = new_token("alice").unwrap();
        let (other, other_line) = new_token("bob").unwrap();
        let text = format!("{line} groups=security,ops,security\n{other_line}\n");
        let set = TokenSet::parse(Path::new("t"), &text).unwrap();
        let alice = set.identify(&token).unwrap();
        assert_eq!(alice.groups(), ["security", "ops"], "named once each, in order");
        assert!(alice.in_group("ops") && !alice.in_group("operators"));
        assert!(set.identify(&other).unwrap().groups().is_empty(), "no groups word, no groups");
    }

    #[test]
    fn bad_lines_are_refused_naming_the_file_and_the_line() {
        let hash = format!("sha256:{}", "ab".repeat(32));
        for (text, line, says) in [
            ("alice".to_string(), 1, "two words"),
            (format!("# c\nalice {hash} extra"), 2, "groups=G1,G2"),
            (format!("alice {hash} groups=a extra"), 1, "two words"),
            (format!("alice {hash} groups="), 1, "1 to 64"),
            (format!("alice {hash} groups=a,,b"), 1, "1 to 64"),
            (format!("alice {hash} groups={}", "g".repeat(65)), 1, "1 to 64"),
            (format!("alice {hash} groups=a,\u{7}"), 1, "control"),
            ("alice md5:00".into(), 1, "sha256:"),
            ("alice sha256:zz".into(), 1, "64 hexadecimal"),
            (format!("al ice {hash}"), 1, "groups=G1,G2"),
            (format!("al/ice {hash}"), 1, "letters, digits"),
            (format!("alice {hash}\nalice sha256:{}", "cd".repeat(32)), 2, "named twice"),
            (format!("alice {hash}\nbob {hash}"), 2, "same token"),
        ] {
            let e = TokenSet::parse(Path::new("/etc/tokens"), &text).unwrap_err().to_string();
            assert!(e.contains("/etc/tokens") && e.contains(&format!("line {line}")) && e.contains(says), "{e}");
        }
    }
}
