//! A reader of the safetensors format, enough for one model: an 8-byte
//! little-endian header length, a JSON header naming each tensor's dtype,
//! shape and byte range, then the data. Every tensor is checked (present,
//! `F32`, the expected shape, its bytes inside the file) before use, so a
//! truncated or foreign file is an error naming the tensor, never a panic.

use std::path::Path;

use serde_json::{Map, Value};

use crate::EncoderError;

/// The header of a safetensors file and the bytes it describes.
pub(crate) struct SafeTensors<'a> {
    path: &'a Path,
    header: Map<String, Value>,
    data: &'a [u8],
}

fn bad(path: &Path, key: &str, problem: impl Into<String>) -> EncoderError {
    EncoderError::Bad { path: path.to_path_buf(), key: key.into(), problem: problem.into() }
}

impl<'a> SafeTensors<'a> {
    /// Read the header of `bytes` (the file at `path`).
    pub(crate) fn parse(path: &'a Path, bytes: &'a [u8]) -> Result<Self, EncoderError> {
        let Some((len, rest)) = bytes.split_first_chunk::<8>() else {
            return Err(bad(path, "(header)", format!("the file is {} bytes, too short for a header", bytes.len())));
        };
        let len = u64::from_le_bytes(*len);
        let Some(len) = usize::try_from(len).ok().filter(|&l| l <= rest.len()) else {
            return Err(bad(
                path,
                "(header)",
                format!("the header is said to be {len} bytes but only {} follow (truncated?)", rest.len()),
            ));
        };
        let (header, data) = rest.split_at(len);
        let header: Value =
            serde_json::from_slice(header).map_err(|e| bad(path, "(header)", format!("not valid JSON: {e}")))?;
        let Value::Object(header) = header else {
            return Err(bad(path, "(header)", "not a JSON object of tensors"));
        };
        // A cut file is refused even when only tensors this encoder does not read are cut.
        for (name, entry) in header.iter().filter(|(name, _)| *name != "__metadata__") {
            let end = entry.pointer("/data_offsets/1").and_then(Value::as_u64).unwrap_or(0);
            if usize::try_from(end).map_or(true, |end| end > data.len()) {
                return Err(bad(path, name, past_the_end(entry, data.len())));
            }
        }
        Ok(Self { path, header, data })
    }

    /// The tensor `name`, which must be `F32` of exactly `shape`, as a flat row-major vector.
    pub(crate) fn f32s(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, EncoderError> {
        let bad = |problem: String| bad(self.path, name, problem);
        let entry = self.header.get(name).ok_or_else(|| bad("the tensor is missing".into()))?;
        match entry.get("dtype").and_then(Value::as_str) {
            Some("F32") => {}
            other => return Err(bad(format!("dtype is {}, expected F32", other.unwrap_or("missing")))),
        }
        let found: Option<Vec<usize>> = entry
            .get("shape")
            .and_then(Value::as_array)
            .and_then(|dims| dims.iter().map(|d| d.as_u64().and_then(|d| usize::try_from(d).ok())).collect());
        match found {
            Some(found) if found == shape => {}
            Some(found) => return Err(bad(format!("shape is {found:?}, expected {shape:?}"))),
            None => return Err(bad("shape is missing or not a list of sizes".into())),
        }
        let offsets: Option<Vec<usize>> = entry
            .get("data_offsets")
            .and_then(Value::as_array)
            .and_then(|o| o.iter().map(|d| d.as_u64().and_then(|d| usize::try_from(d).ok())).collect());
        let (begin, end) = match offsets.as_deref() {
            Some(&[begin, end]) if begin <= end => (begin, end),
            _ => return Err(bad("data_offsets is not a pair [begin, end]".into())),
        };
        let want = shape.iter().product::<usize>() * 4;
        if end - begin != want {
            return Err(bad(format!("holds {} bytes, its shape needs {want}", end - begin)));
        }
        let bytes = self.data.get(begin..end).ok_or_else(|| {
            bad(format!(
                "its bytes {begin}..{end} run past the end of the data ({} bytes; truncated?)",
                self.data.len()
            ))
        })?;
        let values: Vec<f32> = bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
        if let Some(at) = values.iter().position(|v| !v.is_finite()) {
            return Err(bad(format!("value {at} is {}, not a finite number", values[at])));
        }
        Ok(values)
    }
}

fn past_the_end(entry: &Value, data: usize) -> String {
    let offsets = entry.get("data_offsets").map_or_else(|| "?".into(), Value::to_string);
    format!("its bytes {offsets} run past the end of the data ({data} bytes; truncated?)")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(header: &str, data: &[u8]) -> Vec<u8> {
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(header.as_bytes());
        bytes.extend_from_slice(data);
        bytes
    }

    fn problem<T>(result: Result<T, EncoderError>) -> String {
        match result {
            Ok(_) => panic!("expected an error"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn a_well_formed_tensor_is_read_in_row_major_order() {
        let data: Vec<u8> = [1.0f32, 2.0, 3.0, 4.0].iter().flat_map(|f| f.to_le_bytes()).collect();
        let bytes = file(r#"{"t": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}}"#, &data);
        let st = SafeTensors::parse(Path::new("m.safetensors"), &bytes).unwrap();
        assert_eq!(st.f32s("t", &[2, 2]).unwrap(), [1.0, 2.0, 3.0, 4.0]);
        assert_eq!(problem(st.f32s("t", &[4])), "m.safetensors: t: shape is [2, 2], expected [4]");
        assert_eq!(problem(st.f32s("u", &[4])), "m.safetensors: u: the tensor is missing");
    }

    #[test]
    fn a_file_cut_short_names_the_tensor_whose_bytes_are_missing() {
        let bytes = file(r#"{"t": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}}"#, &[0; 8]);
        assert!(
            problem(SafeTensors::parse(Path::new("m.safetensors"), &bytes))
                .starts_with("m.safetensors: t: its bytes [0,16] run past the end")
        );
        let bytes = file(r#"{"t": {}}"#, &[]);
        assert!(
            problem(SafeTensors::parse(Path::new("m"), &bytes[..12])).contains("(header): the header is said to be")
        );
        assert!(problem(SafeTensors::parse(Path::new("m"), &bytes[..5])).contains("too short for a header"));
    }

    #[test]
    fn a_tensor_holding_nan_is_refused() {
        let data: Vec<u8> = [1.0f32, f32::NAN].iter().flat_map(|f| f.to_le_bytes()).collect();
        let bytes = file(r#"{"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}"#, &data);
        let st = SafeTensors::parse(Path::new("m"), &bytes).unwrap();
        assert_eq!(problem(st.f32s("t", &[2])), "m: t: value 1 is NaN, not a finite number");
    }

    #[test]
    fn a_tensor_of_another_dtype_is_refused() {
        let bytes = file(r#"{"t": {"dtype": "F16", "shape": [2], "data_offsets": [0, 4]}}"#, &[0; 4]);
        let st = SafeTensors::parse(Path::new("m"), &bytes).unwrap();
        assert_eq!(problem(st.f32s("t", &[2])), "m: t: dtype is F16, expected F32");
    }
}
