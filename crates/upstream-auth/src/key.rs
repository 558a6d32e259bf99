//! The key that encrypts stored tokens, and where code-mode keeps its
//! state by default.
//!
//! The key is 32 random bytes, from `CODE_MODE_TOKEN_KEY` (base64 or 64
//! hex digits; a secrets manager or the service's environment can supply
//! it) or from a key file (`CODE_MODE_TOKEN_KEY_FILE`, default
//! `<state dir>/token.key`, base64, mode 0600). `code-mode login` makes the
//! default key file when no key exists yet; nothing else ever makes one, so
//! a key that went missing is an error, never a silent new key or
//! plaintext.

use std::path::{Path, PathBuf};

use base64::Engine as _;

use crate::error::VaultError;

/// The variable holding the key itself.
pub const KEY_VAR: &str = "CODE_MODE_TOKEN_KEY";
/// The variable naming the key file.
pub const KEY_FILE_VAR: &str = "CODE_MODE_TOKEN_KEY_FILE";
/// The variable naming code-mode's state folder.
pub const STATE_DIR_VAR: &str = "CODE_MODE_STATE_DIR";

/// A 256-bit key and where it came from (for messages, never the bytes).
#[derive(Clone)]
pub struct Key {
    pub(crate) bytes: [u8; 32],
    /// Where it came from, e.g. `CODE_MODE_TOKEN_KEY` or a file path.
    pub source: String,
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Key").field("source", &self.source).finish_non_exhaustive()
    }
}

/// code-mode's state folder: `CODE_MODE_STATE_DIR`, else
/// `$XDG_STATE_HOME/code-mode`, else `~/.local/state/code-mode`.
pub fn state_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os(STATE_DIR_VAR).filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir).join("code-mode");
    }
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("."));
    home.join(".local/state/code-mode")
}

/// The key file looked for when `CODE_MODE_TOKEN_KEY` is not set.
pub fn key_file() -> PathBuf {
    match std::env::var_os(KEY_FILE_VAR).filter(|f| !f.is_empty()) {
        Some(file) => PathBuf::from(file),
        None => state_dir().join("token.key"),
    }
}

impl Key {
    /// The key of this process: `CODE_MODE_TOKEN_KEY`, else the key file;
    /// `Ok(None)` when neither exists (nobody logged in yet). A key that is
    /// there but unusable is an error naming where it came from.
    /// An empty `CODE_MODE_TOKEN_KEY` counts as unset, as the other
    /// variables here do: a compose file passes an unset variable on as
    /// empty (`${CODE_MODE_TOKEN_KEY:-}`).
    pub fn from_environment() -> Result<Option<Key>, VaultError> {
        if let Some(key) = Self::from_variable(std::env::var(KEY_VAR).ok())? {
            return Ok(Some(key));
        }
        let file = key_file();
        match std::fs::read_to_string(&file) {
            Ok(text) => {
                check_private(&file)?;
                Key::parse(&text, &file.display().to_string()).map(Some)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(VaultError::File { path: file, doing: "read", why: e.to_string() }),
        }
    }

    /// The key the variable's value holds; `None` when it is unset or
    /// empty.
    fn from_variable(value: Option<String>) -> Result<Option<Key>, VaultError> {
        match value.filter(|text| !text.trim().is_empty()) {
            Some(text) => Key::parse(&text, KEY_VAR).map(Some),
            None => Ok(None),
        }
    }

    /// Make a new random key in the key file (mode 0600, its folder 0700);
    /// only when no key exists (`login`).
    pub fn create_file(file: &Path) -> Result<Key, VaultError> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes)
            .map_err(|e| VaultError::BadKey { source_name: "the system's random source".into(), why: e.to_string() })?;
        if let Some(dir) = file.parent() {
            private_dir(dir)?;
        }
        let text = format!("{}\n", base64::engine::general_purpose::STANDARD.encode(bytes));
        write_private(file, text.as_bytes(), true)?;
        Ok(Key { bytes, source: file.display().to_string() })
    }

    /// A key from its text: base64 (standard or URL-safe, padded or not)
    /// or 64 hex digits, of exactly 32 bytes.
    pub fn parse(text: &str, source: &str) -> Result<Key, VaultError> {
        let text = text.trim();
        let bad = |why: &str| VaultError::BadKey { source_name: source.to_string(), why: why.to_string() };
        let decoded = if text.len() == 64 && text.chars().all(|c| c.is_ascii_hexdigit()) {
            hex::decode(text).map_err(|_| bad("not hex"))?
        } else {
            let engines = [
                &base64::engine::general_purpose::STANDARD,
                &base64::engine::general_purpose::STANDARD_NO_PAD,
                &base64::engine::general_purpose::URL_SAFE,
                &base64::engine::general_purpose::URL_SAFE_NO_PAD,
            ];
            engines
                .iter()
                .find_map(|engine| engine.decode(text).ok())
                .ok_or_else(|| bad("expected 32 bytes as base64 or 64 hex digits"))?
        };
        let bytes: [u8; 32] = decoded.try_into().map_err(|_| bad("expected exactly 32 bytes (256 bits)"))?;
        Ok(Key { bytes, source: source.to_string() })
    }
}

/// Refuse a key file others may read.
fn check_private(file: &Path) -> Result<(), VaultError> {
    use std::os::unix::fs::PermissionsExt as _;
    let meta = std::fs::metadata(file).map_err(|e| VaultError::File {
        path: file.to_path_buf(),
        doing: "read",
        why: e.to_string(),
    })?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(VaultError::BadKey {
            source_name: file.display().to_string(),
            why: format!("others may read it (mode {mode:03o}): chmod 600 {}", file.display()),
        });
    }
    Ok(())
}

/// Make `dir` (and its parents) if missing, mode 0700.
pub(crate) fn private_dir(dir: &Path) -> Result<(), VaultError> {
    use std::os::unix::fs::DirBuilderExt as _;
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(|e| VaultError::File {
        path: dir.to_path_buf(),
        doing: "created",
        why: e.to_string(),
    })
}

/// Write `bytes` to `file` with mode 0600, atomically (a temporary file in
/// the same folder, synced, then renamed over it). `new_only`: fail if the
/// file exists.
pub(crate) fn write_private(file: &Path, bytes: &[u8], new_only: bool) -> Result<(), VaultError> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let failed = |doing: &'static str, e: std::io::Error| VaultError::File {
        path: file.to_path_buf(),
        doing,
        why: e.to_string(),
    };
    if new_only && file.exists() {
        return Err(failed("created", std::io::Error::from(std::io::ErrorKind::AlreadyExists)));
    }
    let dir = file.parent().unwrap_or(Path::new("."));
    let mut name = [0u8; 8];
    getrandom::fill(&mut name).map_err(|e| failed("written", std::io::Error::other(e.to_string())))?;
    let temporary = dir.join(format!(".{}.tmp", hex::encode(name)));
    let written = (|| {
        let mut out = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&temporary)?;
        out.write_all(bytes)?;
        out.sync_all()?;
        std::fs::rename(&temporary, file)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temporary);
        return Err(failed("written", e));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_reads_as_base64_or_hex_and_must_be_32_bytes() {
        let hex_key = "00".repeat(32);
        assert_eq!(Key::parse(&hex_key, "t").unwrap().bytes, [0u8; 32]);
        let b64 = base64::engine::general_purpose::STANDARD.encode([7u8; 32]);
        assert_eq!(Key::parse(&format!("{b64}\n"), "t").unwrap().bytes, [7u8; 32]);
        let short = base64::engine::general_purpose::STANDARD.encode([7u8; 16]);
        let e = Key::parse(&short, "CODE_MODE_TOKEN_KEY").unwrap_err().to_string();
        assert!(e.contains("CODE_MODE_TOKEN_KEY") && e.contains("32 bytes"), "{e}");
    }

    #[test]
    fn an_empty_key_variable_counts_as_unset_and_a_bad_one_is_an_error_naming_it() {
        assert!(Key::from_variable(None).unwrap().is_none());
        assert!(Key::from_variable(Some(String::new())).unwrap().is_none());
        assert!(Key::from_variable(Some("  ".into())).unwrap().is_none());
        let key = Key::from_variable(Some("11".repeat(32))).unwrap().expect("a key");
        assert_eq!(key.bytes, [0x11u8; 32]);
        assert_eq!(key.source, KEY_VAR);
        let bad = Key::from_variable(Some("short".into())).unwrap_err().to_string();
        assert!(bad.contains(KEY_VAR), "{bad}");
    }

    #[test]
    fn a_made_key_file_is_private_and_reads_back() {
        let dir = std::env::temp_dir().join(format!("cm-key-{}", std::process::id()));
        let file = dir.join("sub/token.key");
        let key = Key::create_file(&file).unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::metadata(file.parent().unwrap()).unwrap().permissions().mode() & 0o777, 0o700);
        let again = Key::parse(&std::fs::read_to_string(&file).unwrap(), "f").unwrap();
        assert_eq!(again.bytes, key.bytes);
        assert!(Key::create_file(&file).is_err(), "an existing key is never replaced");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(check_private(&file).unwrap_err().to_string().contains("chmod 600"));
        let _ = std::fs::remove_dir_all(dir);
    }
}
