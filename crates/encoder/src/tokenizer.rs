//! BERT's WordPiece tokenizer, as `tokenizer.json` describes it: the
//! special tokens written literally in a text, the normaliser (clean the
//! text, space out CJK ideographs, strip accents, lowercase), the split on
//! whitespace and punctuation, and greedy longest-match WordPiece with a
//! continuation prefix. Owns the vocabulary; gives ids, `[CLS] … [SEP]`,
//! truncated to a maximum length.
//!
//! It follows Hugging Face's `tokenizers` (`BertNormalizer`,
//! `BertPreTokenizer`, `WordPiece`) so the ids equal the ones the model was
//! trained with; `tests/it/reference.rs` checks that on texts of every kind.
//! One known difference: its character tables are older than Unicode 14, so
//! punctuation or format characters Unicode added since (U+061D, U+0890…)
//! are split or dropped here and not there. Over 13,806 texts (every string
//! of `testing/search-eval`'s catalog, question and tool files, and 3,000
//! random strings of many scripts) one id sequence differed, from U+061D.

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;
use unicode_general_category::{GeneralCategory, get_general_category};
use unicode_normalization::UnicodeNormalization;

use crate::EncoderError;

/// What the normaliser does (`normalizer` in `tokenizer.json`).
#[derive(Debug, Clone, Copy)]
struct Normalizer {
    clean_text: bool,
    chinese_chars: bool,
    strip_accents: bool,
    lowercase: bool,
}

/// A WordPiece tokenizer loaded from `tokenizer.json`.
pub(crate) struct Tokenizer {
    vocab: HashMap<String, u32>,
    /// Tokens matched verbatim in the raw text before normalising (`[CLS]`,
    /// `[MASK]`…).
    added: Vec<(String, u32)>,
    normalizer: Normalizer,
    prefix: String,
    max_word_chars: usize,
    unk: u32,
    cls: u32,
    sep: u32,
}

/// A summary: the vocabulary has 30,000 entries.
impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("vocab", &self.vocab.len())
            .field("normalizer", &self.normalizer)
            .field("max_word_chars", &self.max_word_chars)
            .finish_non_exhaustive()
    }
}

fn bad(path: &Path, key: &str, problem: impl Into<String>) -> EncoderError {
    EncoderError::Bad { path: path.to_path_buf(), key: key.into(), problem: problem.into() }
}

/// A boolean option of the normaliser; `None` when absent or `null` (its default then).
fn flag(path: &Path, obj: &Value, key: &str) -> Result<Option<bool>, EncoderError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(other) => {
            Err(bad(path, &format!("normalizer.{key}"), format!("expected true, false or null, found {other}")))
        }
    }
}

impl Tokenizer {
    /// Parse the text of `tokenizer.json` (`path` names it in errors).
    pub(crate) fn from_json(path: &Path, text: &[u8]) -> Result<Self, EncoderError> {
        let json: Value =
            serde_json::from_slice(text).map_err(|e| bad(path, "(document)", format!("not valid JSON: {e}")))?;
        let model = json.get("model").ok_or_else(|| bad(path, "model", "missing"))?;
        match model.get("type").and_then(Value::as_str) {
            Some("WordPiece") => {}
            other => return Err(bad(path, "model.type", format!("expected \"WordPiece\", found {other:?}"))),
        }
        let entries = model
            .get("vocab")
            .and_then(Value::as_object)
            .ok_or_else(|| bad(path, "model.vocab", "missing or not an object of token to id"))?;
        let mut vocab = HashMap::with_capacity(entries.len());
        for (token, id) in entries {
            let id = id
                .as_u64()
                .and_then(|id| u32::try_from(id).ok())
                .ok_or_else(|| bad(path, &format!("model.vocab[{token:?}]"), format!("id {id} is not a u32")))?;
            vocab.insert(token.clone(), id);
        }
        let string = |key: &str, default: &str| -> Result<String, EncoderError> {
            match model.get(key) {
                None | Some(Value::Null) => Ok(default.to_string()),
                Some(Value::String(s)) => Ok(s.clone()),
                Some(other) => Err(bad(path, &format!("model.{key}"), format!("expected a string, found {other}"))),
            }
        };
        let prefix = string("continuing_subword_prefix", "##")?;
        let unk_token = string("unk_token", "[UNK]")?;
        let max_word_chars = match model.get("max_input_chars_per_word") {
            None | Some(Value::Null) => 100,
            Some(v) => v
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| bad(path, "model.max_input_chars_per_word", format!("expected a count, found {v}")))?,
        };
        let id_of = |token: &str, key: &str| {
            vocab.get(token).copied().ok_or_else(|| bad(path, key, format!("the vocabulary has no {token} token")))
        };
        let unk = id_of(&unk_token, "model.unk_token")?;
        let cls = id_of("[CLS]", "model.vocab")?;
        let sep = id_of("[SEP]", "model.vocab")?;
        let normalizer = Self::normalizer(path, &json)?;
        if let Some(pre) = json.get("pre_tokenizer").filter(|p| !p.is_null()) {
            match pre.get("type").and_then(Value::as_str) {
                Some("BertPreTokenizer") => {}
                other => {
                    return Err(bad(
                        path,
                        "pre_tokenizer.type",
                        format!("expected \"BertPreTokenizer\", found {other:?}"),
                    ));
                }
            }
        }
        let mut added = Vec::new();
        if let Some(list) = json.get("added_tokens").and_then(Value::as_array) {
            for (i, token) in list.iter().enumerate() {
                let content = token.get("content").and_then(Value::as_str);
                let id = token.get("id").and_then(Value::as_u64).and_then(|id| u32::try_from(id).ok());
                match (content, id) {
                    (Some(content), Some(id)) if !content.is_empty() => added.push((content.to_string(), id)),
                    _ => {
                        return Err(bad(
                            path,
                            &format!("added_tokens[{i}]"),
                            "expected a non-empty content and a u32 id",
                        ));
                    }
                }
            }
        }
        Ok(Self { vocab, added, normalizer, prefix, max_word_chars, unk, cls, sep })
    }

    fn normalizer(path: &Path, json: &Value) -> Result<Normalizer, EncoderError> {
        let Some(norm) = json.get("normalizer").filter(|n| !n.is_null()) else {
            return Ok(Normalizer { clean_text: false, chinese_chars: false, strip_accents: false, lowercase: false });
        };
        match norm.get("type").and_then(Value::as_str) {
            Some("BertNormalizer") => {}
            other => return Err(bad(path, "normalizer.type", format!("expected \"BertNormalizer\", found {other:?}"))),
        }
        let lowercase = flag(path, norm, "lowercase")?.unwrap_or(true);
        Ok(Normalizer {
            clean_text: flag(path, norm, "clean_text")?.unwrap_or(true),
            chinese_chars: flag(path, norm, "handle_chinese_chars")?.unwrap_or(true),
            // BERT's rule: accents are stripped when unspecified and lowercasing.
            strip_accents: flag(path, norm, "strip_accents")?.unwrap_or(lowercase),
            lowercase,
        })
    }

    /// The largest id the tokenizer can give (checked against the model's embedding rows).
    pub(crate) fn max_id(&self) -> u32 {
        let vocab = self.vocab.values().copied().max().unwrap_or(0);
        let added = self.added.iter().map(|(_, id)| *id).max().unwrap_or(0);
        vocab.max(added)
    }

    /// `[CLS]`, the ids of `text`, `[SEP]`: at most `max_len` ids in all (at least 2).
    pub(crate) fn encode(&self, text: &str, max_len: usize) -> Vec<u32> {
        let mut ids = vec![self.cls];
        let budget = max_len.max(2) - 1;
        let mut rest = text;
        'text: while !rest.is_empty() && ids.len() < budget {
            // The next special token written in the text (at one offset the
            // longest): its offset, length and id.
            let special = self
                .added
                .iter()
                .filter_map(|(content, id)| rest.find(content.as_str()).map(|at| (at, content.len(), *id)))
                .min_by_key(|&(at, len, _)| (at, std::cmp::Reverse(len)));
            let plain = special.map_or(rest, |(at, _, _)| &rest[..at]);
            // Normalised piece by piece, so a long text costs only the pieces
            // read before the budget is spent. Cutting at whitespace changes
            // nothing: the normaliser maps it to a space and the split drops it
            // (control characters among whitespace are dropped, not cut at).
            for piece in plain.split(|c: char| c.is_whitespace() && !is_control(c)) {
                for word in split_words(&self.normalize(piece)) {
                    self.word_pieces(word, &mut ids);
                    if ids.len() >= budget {
                        break 'text;
                    }
                }
            }
            match special {
                Some((at, len, id)) => {
                    ids.push(id);
                    rest = &rest[at + len..];
                }
                None => break,
            }
        }
        ids.truncate(budget);
        ids.push(self.sep);
        ids
    }

    /// BERT's normaliser: drop control characters, whitespace to a space,
    /// spaces around CJK ideographs, accents stripped (NFD without the
    /// nonspacing marks), lowercase (per character, as the model was trained).
    fn normalize(&self, text: &str) -> String {
        let n = self.normalizer;
        let mut out = String::with_capacity(text.len() + 8);
        for c in text.chars() {
            if n.clean_text {
                if c == '\0' || c == '\u{fffd}' || is_control(c) {
                    continue;
                }
                if c.is_whitespace() {
                    out.push(' ');
                    continue;
                }
            }
            if n.chinese_chars && is_cjk_ideograph(c) {
                out.push(' ');
                out.push(c);
                out.push(' ');
            } else {
                out.push(c);
            }
        }
        if n.strip_accents {
            out = out.nfd().filter(|&c| get_general_category(c) != GeneralCategory::NonspacingMark).collect();
        }
        if n.lowercase {
            out = out.chars().flat_map(char::to_lowercase).collect();
        }
        out
    }

    /// Greedy longest-match WordPiece of one word; a word that cannot be
    /// cut into vocabulary pieces, or is too long, is one `[UNK]`.
    fn word_pieces(&self, word: &str, ids: &mut Vec<u32>) {
        if word.chars().count() > self.max_word_chars {
            ids.push(self.unk);
            return;
        }
        let first = ids.len();
        let mut start = 0;
        let mut piece = String::with_capacity(word.len() + self.prefix.len());
        while start < word.len() {
            let mut end = word.len();
            let found = loop {
                piece.clear();
                if start > 0 {
                    piece.push_str(&self.prefix);
                }
                piece.push_str(&word[start..end]);
                if let Some(&id) = self.vocab.get(&piece) {
                    break Some(id);
                }
                // Shorten by one character.
                match word[start..end].char_indices().next_back() {
                    Some((0, _)) | None => break None,
                    Some((last, _)) => end = start + last,
                }
            };
            match found {
                Some(id) => ids.push(id),
                None => {
                    ids.truncate(first);
                    ids.push(self.unk);
                    return;
                }
            }
            start = end;
        }
    }
}

/// BERT's pre-tokenizer: split on whitespace (dropped) and around every
/// punctuation character (kept as a word of its own).
fn split_words(text: &str) -> Vec<&str> {
    let mut words = Vec::new();
    let mut start = None;
    for (at, c) in text.char_indices() {
        if c.is_whitespace() || is_punctuation(c) {
            if let Some(s) = start.take() {
                words.push(&text[s..at]);
            }
            if !c.is_whitespace() {
                words.push(&text[at..at + c.len_utf8()]);
            }
        } else if start.is_none() {
            start = Some(at);
        }
    }
    if let Some(s) = start {
        words.push(&text[s..]);
    }
    words
}

/// The characters BERT's cleaning drops: controls, format characters and
/// private use, except the tab and line breaks (whitespace). Unassigned code
/// points stay, as in Hugging Face's tokenizer (they become `[UNK]`).
fn is_control(c: char) -> bool {
    if matches!(c, '\t' | '\n' | '\r') {
        return false;
    }
    use GeneralCategory::*;
    matches!(get_general_category(c), Control | Format | PrivateUse)
}

/// BERT's punctuation: all of ASCII's non-alphanumeric printable characters
/// (`$`, `+`, `^`, `` ` `` included) and Unicode's P* categories.
fn is_punctuation(c: char) -> bool {
    if c.is_ascii_punctuation() {
        return true;
    }
    use GeneralCategory::*;
    matches!(
        get_general_category(c),
        ConnectorPunctuation
            | DashPunctuation
            | OpenPunctuation
            | ClosePunctuation
            | InitialPunctuation
            | FinalPunctuation
            | OtherPunctuation
    )
}

/// The CJK ideograph blocks BERT spaces out (the ranges of Hugging Face's
/// tokenizer, which the reference ids come from). Kana and Hangul are not in them.
fn is_cjk_ideograph(c: char) -> bool {
    matches!(
        u32::from(c),
        0x4E00..=0x9FFF
            | 0x3400..=0x4DBF
            | 0x20000..=0x2A6DF
            | 0x2A700..=0x2B73F
            | 0x2B740..=0x2B81F
            | 0x2B920..=0x2CEAF
            | 0xF900..=0xFAFF
            | 0x2F800..=0x2FA1F
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokenizer(vocab: &[&str]) -> Tokenizer {
        let vocab: serde_json::Map<String, Value> =
            vocab.iter().enumerate().map(|(i, t)| (t.to_string(), Value::from(i))).collect();
        let json = serde_json::json!({
            "added_tokens": [{"id": 1, "content": "[CLS]"}, {"id": 2, "content": "[SEP]"}],
            "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true,
                           "strip_accents": null, "lowercase": true},
            "pre_tokenizer": {"type": "BertPreTokenizer"},
            "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                      "max_input_chars_per_word": 100, "vocab": vocab},
        });
        Tokenizer::from_json(Path::new("tokenizer.json"), json.to_string().as_bytes()).unwrap()
    }

    #[test]
    fn words_split_on_whitespace_and_around_punctuation() {
        assert_eq!(split_words(" get_user(id)  x$ "), ["get", "_", "user", "(", "id", ")", "x", "$"]);
    }

    #[test]
    fn the_normaliser_strips_accents_lowercases_and_spaces_out_ideographs() {
        let t = tokenizer(&["[UNK]", "[CLS]", "[SEP]"]);
        assert_eq!(t.normalize("Café\u{0}\tNAÏVE東京"), "cafe naive 東  京 ");
    }

    #[test]
    fn wordpiece_takes_the_longest_pieces_and_an_unknown_piece_makes_the_word_unknown() {
        let t = tokenizer(&["[UNK]", "[CLS]", "[SEP]", "play", "##ing", "##in", "p", "##z"]);
        assert_eq!(t.encode("playing", 256), [1, 3, 4, 2]);
        assert_eq!(t.encode("playingq play", 256), [1, 0, 3, 2]);
    }

    #[test]
    fn encoding_truncates_to_the_maximum_with_the_closing_separator() {
        let t = tokenizer(&["[UNK]", "[CLS]", "[SEP]", "a"]);
        assert_eq!(t.encode("a a a a a", 4), [1, 3, 3, 2]);
        assert_eq!(t.encode("", 4), [1, 2]);
        assert_eq!(t.encode("a [SEP] a", 256), [1, 3, 2, 3, 2]);
    }
}
