//! A reader of the safetensors format, enough for one model: an 8-byte
//! little-endian header length, a JSON header naming each tensor's dtype,
//! shape and byte range, then the data. Every tensor is checked (present,
//! `F32`, the expected shape, its bytes inside the file) before use, so a
//! truncated or foreign file is an error naming the tensor, never a panic.
//!
//! The file is streamed, never held whole: the header, then the data in file
//! order through one bounded buffer, each wanted tensor decoded straight into
//! its `f32`s and every byte fed to the caller's digest on the way. So loading
//! needs about the decoded weights plus the buffer, not the file as well.

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Take};
use std::path::Path;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::EncoderError;

/// Bytes read at a time: a multiple of 4, so no `f32` straddles two reads.
const BUFFER: usize = 64 * 1024;

/// A tensor to read: its name and the shape it must have.
pub(crate) type Wanted = (String, Vec<usize>);

fn bad(path: &Path, key: &str, problem: impl Into<String>) -> EncoderError {
    EncoderError::Bad { path: path.to_path_buf(), key: key.into(), problem: problem.into() }
}

/// The file being read: every byte read goes to the digest.
struct Stream<'a, R> {
    path: &'a Path,
    file: Take<R>,
    digest: &'a mut Sha256,
}

impl<R: Read> Stream<'_, R> {
    /// Fill `into` from the file; an early end is the error `ended` makes.
    fn fill(&mut self, into: &mut [u8], ended: impl FnOnce() -> EncoderError) -> Result<(), EncoderError> {
        match self.file.read_exact(into) {
            Ok(()) => {
                self.digest.update(&*into);
                Ok(())
            }
            Err(e) if e.kind() == ErrorKind::UnexpectedEof => Err(ended()),
            Err(source) => Err(EncoderError::Read { path: self.path.to_path_buf(), source }),
        }
    }

    /// Read the next `n` bytes through `buffer`, handing each piece to `each`
    /// (pieces are whole `f32`s when `n` is a multiple of 4).
    fn pass(
        &mut self,
        buffer: &mut [u8],
        mut n: u64,
        ended: &impl Fn() -> EncoderError,
        mut each: impl FnMut(&[u8]),
    ) -> Result<(), EncoderError> {
        while n > 0 {
            let piece = usize::try_from(n).map_or(buffer.len(), |n| n.min(buffer.len()));
            self.fill(&mut buffer[..piece], ended)?;
            each(&buffer[..piece]);
            n -= piece as u64;
        }
        Ok(())
    }
}

/// Read the safetensors `file` (at `path`, `len` bytes long) from start to
/// end, every byte into `digest`, and decode the tensors `wanted` by name.
/// They are checked in the order given, so the first wrong one asked for is
/// the one named; a tensor the file holds but nobody asks for is only checked
/// to lie inside the file.
pub(crate) fn read(
    path: &Path,
    file: impl Read,
    len: u64,
    digest: &mut Sha256,
    wanted: &[Wanted],
) -> Result<HashMap<String, Vec<f32>>, EncoderError> {
    let mut stream = Stream { path, file: file.take(len), digest };
    let Some(rest) = len.checked_sub(8) else {
        return Err(bad(path, "(header)", format!("the file is {len} bytes, too short for a header")));
    };
    let ended = || bad(path, "(header)", "the file ended inside the header (changed while read?)");
    let mut word = [0; 8];
    stream.fill(&mut word, ended)?;
    let said = u64::from_le_bytes(word);
    let Some(header_len) = Some(said).filter(|&l| l <= rest).and_then(|l| usize::try_from(l).ok()) else {
        return Err(bad(
            path,
            "(header)",
            format!("the header is said to be {said} bytes but only {rest} follow (truncated?)"),
        ));
    };
    let mut header = vec![0; header_len];
    stream.fill(&mut header, ended)?;
    let header: Value =
        serde_json::from_slice(&header).map_err(|e| bad(path, "(header)", format!("not valid JSON: {e}")))?;
    let Value::Object(header) = header else {
        return Err(bad(path, "(header)", "not a JSON object of tensors"));
    };
    let data = rest - said;
    // A cut file is refused even when only tensors this encoder does not read are cut.
    for (name, entry) in header.iter().filter(|(name, _)| *name != "__metadata__") {
        let end = entry.pointer("/data_offsets/1").and_then(Value::as_u64).unwrap_or(0);
        if end > data {
            return Err(bad(path, name, past_the_end(entry, data)));
        }
    }
    let ranges =
        wanted.iter().map(|(name, shape)| locate(path, &header, name, shape)).collect::<Result<Vec<_>, _>>()?;
    // The data is read once, in file order: tensors sharing bytes are refused.
    let mut order: Vec<usize> = (0..wanted.len()).collect();
    order.sort_by_key(|&i| ranges[i]);
    for pair in order.windows(2) {
        let ((a, (_, a_end)), (b, (b_begin, b_end))) = ((pair[0], ranges[pair[0]]), (pair[1], ranges[pair[1]]));
        if b_begin < a_end {
            return Err(bad(
                path,
                &wanted[b].0,
                format!("its bytes {b_begin}..{b_end} overlap those of {}", wanted[a].0),
            ));
        }
    }
    let mut buffer = vec![0; BUFFER];
    let mut values: Vec<Vec<f32>> = vec![Vec::new(); wanted.len()];
    let mut at = 0;
    for i in order {
        let (name, (begin, end)) = (&wanted[i].0, ranges[i]);
        let ended = || {
            bad(path, name, format!("its bytes {begin}..{end} run past the end of the data (it shrank while read?)"))
        };
        stream.pass(&mut buffer, begin - at, &ended, |_| {})?;
        let out = &mut values[i];
        out.reserve_exact(usize::try_from((end - begin) / 4).unwrap_or(0));
        stream.pass(&mut buffer, end - begin, &ended, |bytes| {
            out.extend(bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])));
        })?;
        at = end;
    }
    // The rest (tensors not read here, anything after them) still goes to the digest.
    let ended = || bad(path, "(data)", "the file ended early (it shrank while read?)");
    stream.pass(&mut buffer, data - at, &ended, |_| {})?;
    for ((name, _), values) in wanted.iter().zip(&values) {
        if let Some(at) = values.iter().position(|v| !v.is_finite()) {
            return Err(bad(path, name, format!("value {at} is {}, not a finite number", values[at])));
        }
    }
    Ok(wanted.iter().map(|(name, _)| name.clone()).zip(values).collect())
}

/// The byte range, within the data, of the tensor `name`, which must be `F32` of exactly `shape`.
fn locate(path: &Path, header: &Map<String, Value>, name: &str, shape: &[usize]) -> Result<(u64, u64), EncoderError> {
    let bad = |problem: String| bad(path, name, problem);
    let entry = header.get(name).ok_or_else(|| bad("the tensor is missing".into()))?;
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
    let offsets: Option<Vec<u64>> =
        entry.get("data_offsets").and_then(Value::as_array).and_then(|o| o.iter().map(Value::as_u64).collect());
    let (begin, end) = match offsets.as_deref() {
        Some(&[begin, end]) if begin <= end => (begin, end),
        _ => return Err(bad("data_offsets is not a pair [begin, end]".into())),
    };
    let want = shape.iter().map(|&d| d as u64).product::<u64>() * 4;
    if end - begin != want {
        return Err(bad(format!("holds {} bytes, its shape needs {want}", end - begin)));
    }
    // Inside the data: `read` checked every entry's end before.
    Ok((begin, end))
}

fn past_the_end(entry: &Value, data: u64) -> String {
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

    fn floats(values: &[f32]) -> Vec<u8> {
        values.iter().flat_map(|f| f.to_le_bytes()).collect()
    }

    /// `read` of all of `bytes` as the file `path`, asking for `wanted`.
    fn read_all(
        path: &str,
        bytes: &[u8],
        wanted: &[(&str, &[usize])],
    ) -> Result<HashMap<String, Vec<f32>>, EncoderError> {
        read_cut(path, bytes, bytes.len(), wanted)
    }

    /// `read` of a file said to be as long as `bytes` whose reader ends after `keep` bytes.
    fn read_cut(
        path: &str,
        bytes: &[u8],
        keep: usize,
        wanted: &[(&str, &[usize])],
    ) -> Result<HashMap<String, Vec<f32>>, EncoderError> {
        let wanted: Vec<Wanted> = wanted.iter().map(|(n, s)| ((*n).to_string(), s.to_vec())).collect();
        read(Path::new(path), &bytes[..keep], bytes.len() as u64, &mut Sha256::new(), &wanted)
    }

    fn problem<T>(result: Result<T, EncoderError>) -> String {
        match result {
            Ok(_) => panic!("expected an error"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn a_well_formed_tensor_is_read_in_row_major_order() {
        let bytes = file(
            r#"{"t": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}}"#,
            &floats(&[1.0, 2.0, 3.0, 4.0]),
        );
        assert_eq!(read_all("m.safetensors", &bytes, &[("t", &[2, 2])]).unwrap()["t"], [1.0, 2.0, 3.0, 4.0]);
        assert_eq!(
            problem(read_all("m.safetensors", &bytes, &[("t", &[4])])),
            "m.safetensors: t: shape is [2, 2], expected [4]"
        );
        assert_eq!(
            problem(read_all("m.safetensors", &bytes, &[("u", &[4])])),
            "m.safetensors: u: the tensor is missing"
        );
    }

    #[test]
    fn a_file_cut_short_names_the_tensor_whose_bytes_are_missing() {
        let bytes = file(r#"{"t": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}}"#, &[0; 8]);
        assert!(
            problem(read_all("m.safetensors", &bytes, &[("t", &[2, 2])]))
                .starts_with("m.safetensors: t: its bytes [0,16] run past the end")
        );
        let bytes = file(r#"{"t": {}}"#, &[]);
        assert!(problem(read_all("m", &bytes[..12], &[])).contains("(header): the header is said to be"));
        assert!(problem(read_all("m", &bytes[..5], &[])).contains("too short for a header"));
    }

    #[test]
    fn a_file_that_ends_before_its_length_names_the_tensor_being_read() {
        // The length is taken before reading: a file that shrinks meanwhile
        // is an error naming where it ended, not a panic or zeros.
        let bytes = file(
            r#"{"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                "b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}}"#,
            &floats(&[1.0, 2.0, 3.0, 4.0]),
        );
        let wanted: &[(&str, &[usize])] = &[("a", &[2]), ("b", &[2])];
        let header_end = bytes.len() - 16;
        assert_eq!(
            problem(read_cut("m", &bytes, header_end + 12, wanted)),
            "m: b: its bytes 8..16 run past the end of the data (it shrank while read?)"
        );
        assert!(problem(read_cut("m", &bytes, header_end + 4, wanted)).starts_with("m: a: its bytes 0..8"));
        assert!(
            problem(read_cut("m", &bytes, 20, wanted)).starts_with("m: (header): the file ended inside the header")
        );
        assert_eq!(read_cut("m", &bytes, bytes.len(), wanted).unwrap()["b"], [3.0, 4.0]);
    }

    #[test]
    fn every_byte_goes_to_the_digest_once_in_order_whatever_is_read() {
        // A gap, a tensor not asked for, a tensor longer than the buffer and
        // trailing bytes no tensor covers: the digest is that of the whole file.
        let long: Vec<f32> = (0..BUFFER / 2).map(|i| i as f32).collect();
        let mut data = vec![7; 3];
        data.extend(floats(&long));
        data.extend(floats(&[5.0]));
        data.extend(b"trailing junk");
        let header = format!(
            r#"{{"__metadata__": {{"format": "pt"}},
                "long": {{"dtype": "F32", "shape": [{}], "data_offsets": [3, {}]}},
                "unread": {{"dtype": "F16", "shape": [2], "data_offsets": [{}, {}]}}}}"#,
            long.len(),
            3 + long.len() * 4,
            3 + long.len() * 4,
            7 + long.len() * 4,
        );
        let bytes = file(&header, &data);
        for wanted in [&[("long", &[long.len()][..])][..], &[]] {
            let wanted: Vec<Wanted> = wanted.iter().map(|(n, s)| ((*n).to_string(), s.to_vec())).collect();
            let mut digest = Sha256::new();
            let tensors = read(Path::new("m"), &bytes[..], bytes.len() as u64, &mut digest, &wanted).unwrap();
            assert_eq!(digest.finalize(), Sha256::digest(&bytes));
            if !wanted.is_empty() {
                assert_eq!(tensors["long"], long);
            }
        }
    }

    #[test]
    fn tensors_sharing_bytes_are_refused_by_name() {
        let bytes = file(
            r#"{"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}"#,
            &floats(&[1.0, 2.0, 3.0]),
        );
        assert_eq!(
            problem(read_all("m", &bytes, &[("a", &[2]), ("b", &[2])])),
            "m: b: its bytes 4..12 overlap those of a"
        );
    }

    #[test]
    fn a_tensor_holding_nan_is_refused() {
        let bytes = file(r#"{"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}"#, &floats(&[1.0, f32::NAN]));
        assert_eq!(problem(read_all("m", &bytes, &[("t", &[2])])), "m: t: value 1 is NaN, not a finite number");
    }

    #[test]
    fn a_tensor_of_another_dtype_is_refused() {
        let bytes = file(r#"{"t": {"dtype": "F16", "shape": [2], "data_offsets": [0, 4]}}"#, &[0; 4]);
        assert_eq!(problem(read_all("m", &bytes, &[("t", &[2])])), "m: t: dtype is F16, expected F32");
    }
}
