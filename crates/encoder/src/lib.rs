//! A sentence encoder (all-MiniLM-L6-v2: BERT WordPiece tokens, six
//! transformer layers, mean pooling, unit length) loaded from a directory of
//! local files only. It never opens a network connection.
//!
//! [`Encoder::load`] reads and checks `config.json`, `tokenizer.json` and
//! `model.safetensors`: a file that is missing, truncated or of another
//! model is an [`EncoderError`] naming the file and the key or tensor. After
//! that [`Encoder::embed`] cannot fail: it is a pure function of the text,
//! safe to call from many threads at once.

mod model;
mod safetensors;
mod tokenizer;

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::model::{Config, Model};
use crate::tokenizer::Tokenizer;

/// The width of one embedding.
pub const DIM: usize = 384;

/// The most tokens of one text the encoder reads (`[CLS]` and `[SEP]`
/// included); the rest is cut. sentence-transformers' setting for this model.
pub const MAX_TOKENS: usize = 256;

/// Why a model directory could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum EncoderError {
    /// A file of the model could not be read.
    #[error("{path}: cannot read: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    /// A file was read but does not hold what a model of this shape needs.
    #[error("{path}: {key}: {problem}")]
    Bad { path: PathBuf, key: String, problem: String },
}

/// A loaded encoder: immutable, shared between threads.
#[derive(Debug)]
pub struct Encoder {
    tokenizer: Tokenizer,
    model: Model,
    max_tokens: usize,
    fingerprint: String,
}

fn read(path: PathBuf) -> Result<(PathBuf, Vec<u8>), EncoderError> {
    match std::fs::read(&path) {
        Ok(bytes) => Ok((path, bytes)),
        Err(source) => Err(EncoderError::Read { path, source }),
    }
}

/// The file at `path` opened for reading, and its length.
fn open(path: PathBuf) -> Result<(PathBuf, std::fs::File, u64), EncoderError> {
    match std::fs::File::open(&path).and_then(|file| Ok((file.metadata()?.len(), file))) {
        Ok((len, file)) => Ok((path, file, len)),
        Err(source) => Err(EncoderError::Read { path, source }),
    }
}

impl Encoder {
    /// Load `config.json`, `tokenizer.json` and `model.safetensors` from `dir`.
    ///
    /// The weights are streamed from the file (not held whole beside their
    /// decoded form), and hashed on the way for the fingerprint: the SHA-256
    /// of each file's length (8 bytes, little-endian) then its bytes, in the
    /// order config, tokenizer, model; its first 8 bytes in hex.
    pub fn load(dir: &Path) -> Result<Self, EncoderError> {
        let (config_path, config_bytes) = read(dir.join("config.json"))?;
        let (tokenizer_path, tokenizer_bytes) = read(dir.join("tokenizer.json"))?;
        let (model_path, model_file, model_len) = open(dir.join("model.safetensors"))?;
        let config = Config::from_json(&config_path, &config_bytes)?;
        let tokenizer = Tokenizer::from_json(&tokenizer_path, &tokenizer_bytes)?;
        let mut digest = Sha256::new();
        for bytes in [config_bytes, tokenizer_bytes] {
            digest.update((bytes.len() as u64).to_le_bytes());
            digest.update(bytes);
        }
        digest.update(model_len.to_le_bytes());
        let model = Model::from_safetensors(&model_path, model_file, model_len, &mut digest, config)?;
        let max_id = tokenizer.max_id();
        if max_id as usize >= model.vocab_size() {
            return Err(EncoderError::Bad {
                path: tokenizer_path,
                key: "model.vocab".into(),
                problem: format!("id {max_id} is past the model's {} word embeddings", model.vocab_size()),
            });
        }
        let fingerprint = hex::encode(&digest.finalize()[..8]);
        let max_tokens = MAX_TOKENS.min(model.max_positions());
        Ok(Self { tokenizer, model, max_tokens, fingerprint })
    }

    /// The unit-length embedding of `text` (its first [`MAX_TOKENS`] tokens).
    pub fn embed(&self, text: &str) -> Vec<f32> {
        let ids = self.tokenizer.encode(text, self.max_tokens);
        let mut v = self.model.pooled(&ids).to_vec();
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm > 0.0 && norm.is_finite() {
            v.iter_mut().for_each(|x| *x /= norm);
        }
        v
    }

    /// The token ids the encoder reads for `text`: `[CLS]`, the text's
    /// WordPiece ids, `[SEP]`, at most [`MAX_TOKENS`] in all.
    pub fn token_ids(&self, text: &str) -> Vec<u32> {
        self.tokenizer.encode(text, self.max_tokens)
    }

    /// A short hex digest of the model's files: caches of embeddings are kept under it.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }
}

/// The cosine of two unit-length embeddings (their dot product).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_encoder_can_be_shared_between_threads() {
        fn shared<T: Send + Sync>() {}
        shared::<Encoder>();
    }
}
