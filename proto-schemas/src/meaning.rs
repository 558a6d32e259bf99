//! Search by meaning ([`subjects::SEARCH_MEANING`]): a cell's
//! `search_tools`, unsure between tools its words rank alike, asks the
//! bridge how near in meaning the question is to each tool it offers.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[cfg(doc)]
use crate::*;

/// The longest question, in characters, a cell may ask about; longer ones
/// are cut (the encoder reads at most 256 word pieces anyway).
pub const MAX_MEANING_QUERY_CHARS: usize = 1_000;

/// The questions by meaning one cell may ask; past them the runner
/// answers "unavailable" itself and the cell ranks by words alone (each
/// costs the host an encoder pass, ~10 ms of one core).
pub const MAX_MEANING_ASKS_PER_CELL: u32 = 200;

/// How long the runner waits for the bridge's answer, in milliseconds;
/// the cell waits a little longer for the runner's.
pub const MEANING_WAIT_MS: u64 = 2_000;

/// A cell's question: how near in meaning is `query` to each offered tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MeaningAsk {
    /// The question as the code gave it to `search_tools`, cut to
    /// [`MAX_MEANING_QUERY_CHARS`].
    pub query: String,
}

/// One tool's nearness to the question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolNearness {
    /// The tool's Python name, as in the catalog.
    pub tool: String,
    /// The cosine of the question's and the tool's embeddings (-1 to 1).
    pub cosine: f32,
}

/// The bridge's answer to a [`MeaningAsk`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "answer", rename_all = "snake_case", deny_unknown_fields)]
pub enum MeaningReply {
    /// Every tool the catalog offers, with its nearness.
    Near {
        /// The tools, in catalog order.
        tools: Vec<ToolNearness>,
    },
    /// No answer by meaning: the bridge has no encoder, or its tools are
    /// still being read. The cell ranks by words alone.
    Unavailable {
        /// Why, for the logs (never shown to the code as an error).
        reason: String,
    },
}
