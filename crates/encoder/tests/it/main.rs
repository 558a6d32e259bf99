//! Integration tests of the encoder against the real model files (env
//! `CODE_MODE_MODEL_DIR`, default `/opt/code-mode/models/all-minilm-l6-v2`,
//! made by `scripts/get-model.sh`): one test binary for the crate.
//!
//! Under `CI=true` a missing model fails these tests; on a developer's
//! machine they report that they did not run.

// A panic in a test is the test failing.
#![allow(clippy::unwrap_used)]

mod load_errors;
mod reference;

use std::path::PathBuf;
use std::sync::OnceLock;

use code_mode_encoder::Encoder;

/// The model directory (`code_mode_core::testing::peers::search_model`:
/// `CODE_MODE_MODEL_DIR` or where `scripts/get-model.sh` puts it), or
/// `None` (after saying why) on a developer's machine without it; under
/// `CI=true` its absence fails the test.
pub fn model_dir_or_skip() -> Option<PathBuf> {
    code_mode_core::testing::peers::search_model()
}

/// The encoder of the model directory, loaded once for all tests.
pub fn encoder() -> Option<&'static Encoder> {
    static ENCODER: OnceLock<Encoder> = OnceLock::new();
    let dir = model_dir_or_skip()?;
    Some(ENCODER.get_or_init(|| Encoder::load(&dir).unwrap()))
}

/// A fresh empty directory, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        use std::sync::atomic::{AtomicU32, Ordering};
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("code-mode-encoder-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        Self(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
