//! The BERT encoder of all-MiniLM-L6-v2 and its forward pass: embeddings
//! (word + position + token type 0) and LayerNorm, then per layer
//! multi-head self-attention and a GELU feed-forward block, each with a
//! residual and LayerNorm; mean pooling over the tokens. Owns the weights
//! (read-only after loading, so one model serves every thread).
//!
//! The products run through `ndarray` (matrixmultiply underneath, one
//! thread): no `unsafe` here.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;

use ndarray::{Array1, Array2, Axis, Slice, linalg::general_mat_mul};
use serde_json::Value;
use sha2::Sha256;

use crate::safetensors::{self, Wanted};
use crate::{DIM, EncoderError};

/// The shape of the model, from `config.json`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Config {
    pub(crate) vocab_size: usize,
    pub(crate) layers: usize,
    pub(crate) heads: usize,
    pub(crate) intermediate: usize,
    pub(crate) max_positions: usize,
    pub(crate) type_vocab_size: usize,
    pub(crate) layer_norm_eps: f32,
}

fn bad(path: &Path, key: &str, problem: impl Into<String>) -> EncoderError {
    EncoderError::Bad { path: path.to_path_buf(), key: key.into(), problem: problem.into() }
}

impl Config {
    /// Parse and check `config.json`: a BERT of hidden size [`DIM`] with
    /// absolute positions and GELU.
    pub(crate) fn from_json(path: &Path, text: &[u8]) -> Result<Self, EncoderError> {
        let json: Value =
            serde_json::from_slice(text).map_err(|e| bad(path, "(document)", format!("not valid JSON: {e}")))?;
        let size = |key: &str, min: usize, max: usize| -> Result<usize, EncoderError> {
            let value = json.get(key).ok_or_else(|| bad(path, key, "missing"))?;
            value
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .filter(|n| (min..=max).contains(n))
                .ok_or_else(|| bad(path, key, format!("{value} is not a whole number from {min} to {max}")))
        };
        let hidden = size("hidden_size", 1, 1 << 16)?;
        if hidden != DIM {
            return Err(bad(path, "hidden_size", format!("{hidden}: this encoder gives {DIM}-wide embeddings")));
        }
        let heads = size("num_attention_heads", 1, DIM)?;
        if !DIM.is_multiple_of(heads) {
            return Err(bad(path, "num_attention_heads", format!("{heads} does not divide hidden_size {DIM}")));
        }
        let text_of = |key: &str, want: &str| -> Result<(), EncoderError> {
            match json.get(key) {
                None => Ok(()),
                Some(Value::String(s)) if s == want => Ok(()),
                Some(other) => Err(bad(path, key, format!("{other}: only \"{want}\" is supported"))),
            }
        };
        text_of("hidden_act", "gelu")?;
        text_of("position_embedding_type", "absolute")?;
        text_of("model_type", "bert")?;
        let layer_norm_eps = match json.get("layer_norm_eps") {
            None => 1e-12,
            Some(v) => v
                .as_f64()
                .filter(|e| *e > 0.0 && *e < 1.0)
                .ok_or_else(|| bad(path, "layer_norm_eps", format!("{v} is not a small positive number")))?
                as f32,
        };
        Ok(Self {
            vocab_size: size("vocab_size", 3, 1 << 22)?,
            layers: size("num_hidden_layers", 1, 64)?,
            heads,
            intermediate: size("intermediate_size", 1, 1 << 16)?,
            // [CLS] and [SEP] need two positions.
            max_positions: size("max_position_embeddings", 2, 1 << 16)?,
            type_vocab_size: json.get("type_vocab_size").map_or(Ok(2), |_| size("type_vocab_size", 1, 1 << 10))?,
            layer_norm_eps,
        })
    }
}

/// A LayerNorm's scale and shift.
struct Norm {
    gamma: Array1<f32>,
    beta: Array1<f32>,
}

/// A dense layer `y = x Wᵀ + b`, `W` as stored: (outputs, inputs).
struct Dense {
    weight: Array2<f32>,
    bias: Array1<f32>,
}

struct Layer {
    /// Query, key and value in one (3·DIM, DIM) product.
    qkv: Dense,
    attention_out: Dense,
    attention_norm: Norm,
    intermediate: Dense,
    output: Dense,
    output_norm: Norm,
}

/// The weights of the encoder.
pub(crate) struct Model {
    config: Config,
    word: Array2<f32>,
    position: Array2<f32>,
    token_type0: Array1<f32>,
    embedding_norm: Norm,
    layers: Vec<Layer>,
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model").field("config", &self.config).finish_non_exhaustive()
    }
}

/// The tensors a BERT of `config` has, with their shapes, in the order they
/// are checked (so a foreign file is named by the first of them that is wrong)
/// and [`Reader`] takes them.
fn tensors(config: &Config) -> Vec<Wanted> {
    fn dense(all: &mut Vec<Wanted>, prefix: &str, outputs: usize, inputs: usize) {
        all.push((format!("{prefix}.weight"), vec![outputs, inputs]));
        all.push((format!("{prefix}.bias"), vec![outputs]));
    }
    fn norm(all: &mut Vec<Wanted>, prefix: &str) {
        all.push((format!("{prefix}.weight"), vec![DIM]));
        all.push((format!("{prefix}.bias"), vec![DIM]));
    }
    let mut all: Vec<Wanted> = vec![
        ("embeddings.token_type_embeddings.weight".into(), vec![config.type_vocab_size, DIM]),
        ("embeddings.word_embeddings.weight".into(), vec![config.vocab_size, DIM]),
        ("embeddings.position_embeddings.weight".into(), vec![config.max_positions, DIM]),
    ];
    norm(&mut all, "embeddings.LayerNorm");
    for l in 0..config.layers {
        let p = format!("encoder.layer.{l}");
        for part in ["query", "key", "value"] {
            dense(&mut all, &format!("{p}.attention.self.{part}"), DIM, DIM);
        }
        dense(&mut all, &format!("{p}.attention.output.dense"), DIM, DIM);
        norm(&mut all, &format!("{p}.attention.output.LayerNorm"));
        dense(&mut all, &format!("{p}.intermediate.dense"), config.intermediate, DIM);
        dense(&mut all, &format!("{p}.output.dense"), DIM, config.intermediate);
        norm(&mut all, &format!("{p}.output.LayerNorm"));
    }
    all
}

/// Hands out the tensors [`tensors`] named, read and checked, as arrays.
struct Reader {
    tensors: HashMap<String, Vec<f32>>,
}

impl Reader {
    fn take(&mut self, name: &str) -> Vec<f32> {
        self.tensors.remove(name).unwrap_or_else(|| panic!("{name} is among the tensors read"))
    }

    fn matrix(&mut self, name: &str, rows: usize, cols: usize) -> Array2<f32> {
        Array2::from_shape_vec((rows, cols), self.take(name)).expect("the reader checked the shape")
    }

    fn vector(&mut self, name: &str) -> Array1<f32> {
        Array1::from(self.take(name))
    }

    fn dense(&mut self, prefix: &str, outputs: usize, inputs: usize) -> Dense {
        Dense {
            weight: self.matrix(&format!("{prefix}.weight"), outputs, inputs),
            bias: self.vector(&format!("{prefix}.bias")),
        }
    }

    fn norm(&mut self, prefix: &str) -> Norm {
        Norm { gamma: self.vector(&format!("{prefix}.weight")), beta: self.vector(&format!("{prefix}.bias")) }
    }

    fn layer(&mut self, l: usize, config: &Config) -> Layer {
        let p = format!("encoder.layer.{l}");
        let (q, k, v) = (
            self.dense(&format!("{p}.attention.self.query"), DIM, DIM),
            self.dense(&format!("{p}.attention.self.key"), DIM, DIM),
            self.dense(&format!("{p}.attention.self.value"), DIM, DIM),
        );
        let weight = ndarray::concatenate(Axis(0), &[q.weight.view(), k.weight.view(), v.weight.view()])
            .expect("three (DIM, DIM) matrices stack");
        let bias = ndarray::concatenate(Axis(0), &[q.bias.view(), k.bias.view(), v.bias.view()])
            .expect("three DIM vectors stack");
        Layer {
            qkv: Dense { weight, bias },
            attention_out: self.dense(&format!("{p}.attention.output.dense"), DIM, DIM),
            attention_norm: self.norm(&format!("{p}.attention.output.LayerNorm")),
            intermediate: self.dense(&format!("{p}.intermediate.dense"), config.intermediate, DIM),
            output: self.dense(&format!("{p}.output.dense"), DIM, config.intermediate),
            output_norm: self.norm(&format!("{p}.output.LayerNorm")),
        }
    }
}

impl Model {
    /// The weights of a model of `config` from the safetensors `file` at
    /// `path`, `len` bytes long, read once from start to end with every
    /// byte fed to `digest`.
    pub(crate) fn from_safetensors(
        path: &Path,
        file: impl Read,
        len: u64,
        digest: &mut Sha256,
        config: Config,
    ) -> Result<Self, EncoderError> {
        let mut r = Reader { tensors: safetensors::read(path, file, len, digest, &tensors(&config))? };
        let token_types = r.matrix("embeddings.token_type_embeddings.weight", config.type_vocab_size, DIM);
        Ok(Self {
            word: r.matrix("embeddings.word_embeddings.weight", config.vocab_size, DIM),
            position: r.matrix("embeddings.position_embeddings.weight", config.max_positions, DIM),
            token_type0: token_types.row(0).to_owned(),
            embedding_norm: r.norm("embeddings.LayerNorm"),
            layers: (0..config.layers).map(|l| r.layer(l, &config)).collect(),
            config,
        })
        .inspect(|_| debug_assert!(r.tensors.is_empty(), "tensors read but not used: {:?}", r.tensors.keys()))
    }

    /// The number of rows of the word embeddings: ids must stay below it.
    pub(crate) fn vocab_size(&self) -> usize {
        self.config.vocab_size
    }

    /// The most tokens one text may have (`[CLS]` and `[SEP]` included).
    pub(crate) fn max_positions(&self) -> usize {
        self.config.max_positions
    }

    /// The mean of the last layer's token vectors (not normalised) for `ids`,
    /// which the caller keeps under [`Self::max_positions`] and [`Self::vocab_size`].
    pub(crate) fn pooled(&self, ids: &[u32]) -> Array1<f32> {
        let n = ids.len();
        let mut x = Array2::<f32>::zeros((n, DIM));
        for (i, (mut row, &id)) in x.rows_mut().into_iter().zip(ids).enumerate() {
            row.assign(&self.word.row(id as usize));
            row += &self.position.row(i);
            row += &self.token_type0;
        }
        let eps = self.config.layer_norm_eps;
        layer_norm(&mut x, &self.embedding_norm, eps);
        let heads = self.config.heads;
        let head_dim = DIM / heads;
        let scale = 1.0 / (head_dim as f32).sqrt();
        let mut scores = Array2::<f32>::zeros((n, n));
        let mut context = Array2::<f32>::zeros((n, DIM));
        for layer in &self.layers {
            let qkv = dense(&x, &layer.qkv);
            for h in 0..heads {
                // Head h's columns of the query, key or value part (`s!` is unsafe inside).
                let cols = |part: usize| Slice::from(part * DIM + h * head_dim..part * DIM + (h + 1) * head_dim);
                let (q, k, v) = (
                    qkv.slice_axis(Axis(1), cols(0)),
                    qkv.slice_axis(Axis(1), cols(1)),
                    qkv.slice_axis(Axis(1), cols(2)),
                );
                general_mat_mul(scale, &q, &k.t(), 0.0, &mut scores);
                scores
                    .rows_mut()
                    .into_iter()
                    .for_each(|mut row| softmax(row.as_slice_mut().expect("rows are contiguous")));
                // The head's context goes to its columns of the first part's width.
                general_mat_mul(1.0, &scores, &v, 0.0, &mut context.slice_axis_mut(Axis(1), cols(0)));
            }
            x += &dense(&context, &layer.attention_out);
            layer_norm(&mut x, &layer.attention_norm, eps);
            let mut hidden = dense(&x, &layer.intermediate);
            hidden.mapv_inplace(gelu);
            x += &dense(&hidden, &layer.output);
            layer_norm(&mut x, &layer.output_norm, eps);
        }
        x.mean_axis(Axis(0)).expect("a text has at least [CLS] and [SEP]")
    }
}

/// `x Wᵀ + b` for the rows of `x`.
fn dense(x: &Array2<f32>, d: &Dense) -> Array2<f32> {
    let mut y = Array2::from_shape_fn((x.nrows(), d.bias.len()), |(_, j)| d.bias[j]);
    general_mat_mul(1.0, x, &d.weight.t(), 1.0, &mut y);
    y
}

fn layer_norm(x: &mut Array2<f32>, norm: &Norm, eps: f32) {
    for mut row in x.rows_mut() {
        let mean = row.mean().unwrap_or(0.0);
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / DIM as f32;
        let inv = 1.0 / (var + eps).sqrt();
        ndarray::Zip::from(&mut row)
            .and(&norm.gamma)
            .and(&norm.beta)
            .for_each(|v, g, b| *v = (*v - mean) * inv * g + b);
    }
}

fn softmax(row: &mut [f32]) {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0;
    for v in row.iter_mut() {
        *v = (*v - max).exp();
        sum += *v;
    }
    let inv = 1.0 / sum;
    row.iter_mut().for_each(|v| *v *= inv);
}

/// GELU, the tanh approximation (the reference's): the embeddings stay within
/// a cosine of 0.999997 of sentence-transformers' (exact erf GELU) on the
/// fixture texts. Written as `x·σ(2u)`, which equals `x·(1 + tanh u)/2`, since
/// `exp` costs a third of `tanh` (a long text has a million of these).
fn gelu(x: f32) -> f32 {
    const TWO_SQRT_2_OVER_PI: f32 = 1.595_769_2;
    x / (1.0 + (-TWO_SQRT_2_OVER_PI * (x + 0.044_715 * x * x * x)).exp())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gelu_is_the_tanh_approximation_and_stays_finite_at_the_extremes() {
        for x in [-30.0f32, -3.0, -0.5, 0.0, 0.5, 3.0, 30.0] {
            let tanh_form = 0.5 * x * (1.0 + (0.797_884_6 * (x + 0.044_715 * x * x * x)).tanh());
            assert!((gelu(x) - tanh_form).abs() < 1e-5, "{x}: {} against {tanh_form}", gelu(x));
        }
        assert_eq!(gelu(-1e6), 0.0);
        assert_eq!(gelu(1e6), 1e6);
    }

    #[test]
    fn the_tensors_listed_are_the_tensors_the_model_takes() {
        // A tiny model, its tensors written in reverse order of the list with
        // a gap between each: the reader takes each of them, no more.
        let config = Config {
            vocab_size: 5,
            layers: 2,
            heads: 4,
            intermediate: 3,
            max_positions: 4,
            type_vocab_size: 2,
            layer_norm_eps: 1e-12,
        };
        let (mut header, mut data) = (serde_json::Map::new(), Vec::new());
        for (name, shape) in tensors(&config).into_iter().rev() {
            data.extend_from_slice(&[0; 3]);
            let begin = data.len();
            let n: usize = shape.iter().product();
            data.extend((0..n).flat_map(|i| (i as f32 / n as f32).to_le_bytes()));
            let offsets = [begin, data.len()];
            header.insert(name, serde_json::json!({"dtype": "F32", "shape": shape, "data_offsets": offsets}));
        }
        let header = serde_json::to_vec(&header).unwrap();
        let mut file = (header.len() as u64).to_le_bytes().to_vec();
        file.extend(header);
        file.extend(data);
        let mut digest = <Sha256 as sha2::Digest>::new();
        let model = Model::from_safetensors(Path::new("m"), &file[..], file.len() as u64, &mut digest, config).unwrap();
        assert!(model.pooled(&[0, 4, 1]).iter().all(|v| v.is_finite()));
    }
}
