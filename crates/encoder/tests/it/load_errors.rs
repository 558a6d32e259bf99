//! A model directory with a missing, corrupt or foreign file: `load` gives
//! an error naming the file and the key or tensor, never a panic. Each test
//! builds a directory of the real files (symbolic links) with one changed.

use std::path::Path;
use std::sync::OnceLock;

use code_mode_encoder::{Encoder, EncoderError};
use serde_json::Value;

use crate::{TempDir, model_dir_or_skip};

const FILES: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];

/// A directory of the model's files with `name` replaced by `bytes`
/// (`None`: left out).
fn model_with(model: &Path, name: &str, bytes: Option<&[u8]>) -> TempDir {
    let dir = TempDir::new("model");
    for file in FILES {
        if file != name {
            std::os::unix::fs::symlink(model.join(file), dir.0.join(file)).unwrap();
        }
    }
    if let Some(bytes) = bytes {
        std::fs::write(dir.0.join(name), bytes).unwrap();
    }
    dir
}

/// The error of loading `dir`, as (file name, key, message).
fn load_error(dir: &Path) -> (String, String, String) {
    let error = match Encoder::load(dir) {
        Ok(_) => panic!("{} loaded", dir.display()),
        Err(e) => e,
    };
    let message = error.to_string();
    match error {
        EncoderError::Bad { path, key, .. } => (file_name(&path), key, message),
        EncoderError::Read { path, .. } => (file_name(&path), String::new(), message),
    }
}

fn file_name(path: &Path) -> String {
    path.file_name().unwrap().to_string_lossy().into_owned()
}

fn json_of(model: &Path, name: &str) -> Value {
    serde_json::from_slice(&std::fs::read(model.join(name)).unwrap()).unwrap()
}

/// The bytes of the real `model.safetensors`, read once.
fn safetensors(model: &Path) -> &'static [u8] {
    static BYTES: OnceLock<Vec<u8>> = OnceLock::new();
    BYTES.get_or_init(|| std::fs::read(model.join("model.safetensors")).unwrap())
}

/// The real `model.safetensors` with its header changed by `edit`.
fn safetensors_with_header(model: &Path, edit: impl FnOnce(&mut serde_json::Map<String, Value>)) -> Vec<u8> {
    let bytes = safetensors(model);
    let len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let mut header: Value = serde_json::from_slice(&bytes[8..8 + len]).unwrap();
    edit(header.as_object_mut().unwrap());
    let header = serde_json::to_vec(&header).unwrap();
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&header);
    out.extend_from_slice(&bytes[8 + len..]);
    out
}

const TENSOR: &str = "encoder.layer.3.intermediate.dense.weight";

#[test]
fn a_missing_file_is_a_read_error_naming_it() {
    let Some(model) = model_dir_or_skip() else { return };
    for name in FILES {
        let dir = model_with(&model, name, None);
        let (file, _, message) = load_error(&dir.0);
        assert_eq!(file, name);
        assert!(message.contains("cannot read"), "{message}");
    }
}

#[test]
fn a_truncated_safetensors_names_the_tensor_it_cuts_off() {
    let Some(model) = model_dir_or_skip() else { return };
    let bytes = safetensors(&model);
    // Cut near the end (the pooler's weights, which the encoder does not
    // read) and in the middle.
    for keep in [bytes.len() - 1000, bytes.len() / 2] {
        let dir = model_with(&model, "model.safetensors", Some(&bytes[..keep]));
        let (file, key, message) = load_error(&dir.0);
        assert_eq!(file, "model.safetensors");
        assert!(key.contains(".weight") || key.contains(".bias"), "{message}");
        assert!(message.contains("run past the end"), "{message}");
    }
    // Cut inside the header.
    let dir = model_with(&model, "model.safetensors", Some(&bytes[..100]));
    let (file, key, message) = load_error(&dir.0);
    assert_eq!((file.as_str(), key.as_str()), ("model.safetensors", "(header)"), "{message}");
}

#[test]
fn a_tensor_of_another_dtype_is_refused_by_name() {
    let Some(model) = model_dir_or_skip() else { return };
    let bytes = safetensors_with_header(&model, |h| h[TENSOR]["dtype"] = "F16".into());
    let dir = model_with(&model, "model.safetensors", Some(&bytes));
    let (file, key, message) = load_error(&dir.0);
    assert_eq!((file.as_str(), key.as_str()), ("model.safetensors", TENSOR));
    assert!(message.contains("dtype is F16, expected F32"), "{message}");
}

#[test]
fn a_tensor_of_another_shape_is_refused_by_name() {
    let Some(model) = model_dir_or_skip() else { return };
    let bytes = safetensors_with_header(&model, |h| h[TENSOR]["shape"] = serde_json::json!([384, 1536]));
    let dir = model_with(&model, "model.safetensors", Some(&bytes));
    let (file, key, message) = load_error(&dir.0);
    assert_eq!((file.as_str(), key.as_str()), ("model.safetensors", TENSOR));
    assert!(message.contains("shape is [384, 1536], expected [1536, 384]"), "{message}");
}

#[test]
fn a_missing_tensor_is_refused_by_name() {
    let Some(model) = model_dir_or_skip() else { return };
    let bytes = safetensors_with_header(&model, |h| {
        h.remove(TENSOR);
    });
    let dir = model_with(&model, "model.safetensors", Some(&bytes));
    let (file, key, message) = load_error(&dir.0);
    assert_eq!((file.as_str(), key.as_str()), ("model.safetensors", TENSOR));
    assert!(message.contains("missing"), "{message}");
}

#[test]
fn a_file_that_is_not_json_is_refused_naming_it() {
    let Some(model) = model_dir_or_skip() else { return };
    for name in ["config.json", "tokenizer.json"] {
        let dir = model_with(&model, name, Some(b"{\"hidden_size\": 384,"));
        let (file, key, message) = load_error(&dir.0);
        assert_eq!((file.as_str(), key.as_str()), (name, "(document)"));
        assert!(message.contains("not valid JSON"), "{message}");
    }
}

#[test]
fn a_config_of_another_shape_is_refused_at_its_key() {
    let Some(model) = model_dir_or_skip() else { return };
    for (key, value, says) in [
        ("hidden_size", Value::from(768), "384-wide"),
        ("num_attention_heads", Value::from(7), "does not divide"),
        ("num_hidden_layers", Value::from("six"), "not a whole number"),
        ("hidden_act", Value::from("relu"), "only \"gelu\""),
    ] {
        let mut config = json_of(&model, "config.json");
        config[key] = value;
        let dir = model_with(&model, "config.json", Some(&serde_json::to_vec(&config).unwrap()));
        let (file, found, message) = load_error(&dir.0);
        assert_eq!((file.as_str(), found.as_str()), ("config.json", key), "{message}");
        assert!(message.contains(says), "{message}");
    }
    // Shapes the tensors do not have: the tensor that disagrees is named.
    let mut config = json_of(&model, "config.json");
    config["intermediate_size"] = 1024.into();
    let dir = model_with(&model, "config.json", Some(&serde_json::to_vec(&config).unwrap()));
    let (file, key, message) = load_error(&dir.0);
    assert_eq!((file.as_str(), key.as_str()), ("model.safetensors", "encoder.layer.0.intermediate.dense.weight"));
    assert!(message.contains("expected [1024, 384]"), "{message}");
}

#[test]
fn a_vocabulary_without_a_special_token_is_refused() {
    let Some(model) = model_dir_or_skip() else { return };
    for token in ["[CLS]", "[SEP]", "[UNK]"] {
        let mut tokenizer = json_of(&model, "tokenizer.json");
        tokenizer["model"]["vocab"].as_object_mut().unwrap().remove(token);
        let dir = model_with(&model, "tokenizer.json", Some(&serde_json::to_vec(&tokenizer).unwrap()));
        let (file, _, message) = load_error(&dir.0);
        assert_eq!(file, "tokenizer.json");
        assert!(message.contains(&format!("has no {token} token")), "{message}");
    }
}

#[test]
fn a_tokenizer_of_another_kind_is_refused_at_its_key() {
    let Some(model) = model_dir_or_skip() else { return };
    let mut tokenizer = json_of(&model, "tokenizer.json");
    tokenizer["model"]["type"] = "BPE".into();
    let dir = model_with(&model, "tokenizer.json", Some(&serde_json::to_vec(&tokenizer).unwrap()));
    assert_eq!(load_error(&dir.0).1, "model.type");
    let mut tokenizer = json_of(&model, "tokenizer.json");
    tokenizer["model"]["vocab"]["zzz"] = 40000.into();
    let dir = model_with(&model, "tokenizer.json", Some(&serde_json::to_vec(&tokenizer).unwrap()));
    let (file, key, message) = load_error(&dir.0);
    assert_eq!((file.as_str(), key.as_str()), ("tokenizer.json", "model.vocab"));
    assert!(message.contains("past the model's 30522 word embeddings"), "{message}");
}

#[test]
fn the_fingerprint_is_short_hex_and_follows_the_files() {
    let Some(model) = model_dir_or_skip() else { return };
    let Some(encoder) = crate::encoder() else { return };
    let fingerprint = encoder.fingerprint();
    assert_eq!(fingerprint.len(), 16);
    assert!(fingerprint.chars().all(|c| c.is_ascii_hexdigit()));
    let mut config = std::fs::read(model.join("config.json")).unwrap();
    config.push(b'\n');
    let dir = model_with(&model, "config.json", Some(&config));
    let changed = Encoder::load(&dir.0).unwrap();
    assert_ne!(changed.fingerprint(), fingerprint);
    let again = model_with(&model, "", None);
    assert_eq!(Encoder::load(&again.0).unwrap().fingerprint(), fingerprint);
}

/// The fingerprint as documented, from the whole files: SHA-256 of each
/// file's length (8 bytes, little-endian) and bytes, config, tokenizer, model.
fn fingerprint_of(dir: &Path) -> String {
    use sha2::{Digest, Sha256};
    let mut digest = Sha256::new();
    for name in FILES {
        let bytes = std::fs::read(dir.join(name)).unwrap();
        digest.update((bytes.len() as u64).to_le_bytes());
        digest.update(&bytes);
    }
    hex::encode(&digest.finalize()[..8])
}

#[test]
fn the_fingerprint_hashes_every_byte_of_the_streamed_weights() {
    let Some(model) = model_dir_or_skip() else { return };
    let Some(encoder) = crate::encoder() else { return };
    assert_eq!(encoder.fingerprint(), fingerprint_of(&model));
    // Bytes after the last tensor are read by no tensor, yet the fingerprint follows them.
    let mut bytes = safetensors(&model).to_vec();
    bytes.extend_from_slice(b"trailing bytes of no tensor");
    let dir = model_with(&model, "model.safetensors", Some(&bytes));
    let loaded = Encoder::load(&dir.0).unwrap();
    assert_eq!(loaded.fingerprint(), fingerprint_of(&dir.0));
    assert_ne!(loaded.fingerprint(), encoder.fingerprint());
    assert_eq!(loaded.embed("read a file"), encoder.embed("read a file"));
}
