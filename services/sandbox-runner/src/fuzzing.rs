//! Entry points of the cargo-fuzz targets in `fuzz/` (not an API): each
//! takes the fuzzer's bytes and asserts what must hold for any input, so
//! the committed seeds and every past crash replay as ordinary tests too.

use crate::protocol::{LineReader, Violation, parse};

/// The host's reader of the runner's line protocol: arbitrary bytes from a
/// container, in arbitrary chunks, through [`LineReader`] and [`parse`].
/// The first byte picks the line limit (times 4; small limits reach the
/// edge cases), the second the chunk size the attach stream delivers.
///
/// Holds, besides "never panics": no line is longer than the limit or holds
/// a newline, the lines returned are exactly the input's lines in order
/// (nothing lost, nothing invented) unless the reader refused a line that
/// really was too long, and a malformed line's violation never echoes it.
pub fn line_protocol(data: &[u8]) {
    let [limit, chunk, rest @ ..] = data else { return };
    let max = usize::from(*limit) * 4;
    let chunk = usize::from(*chunk).max(1);
    let mut reader = LineReader::new(max);
    let mut lines = Vec::new();
    let mut fed = 0;
    for piece in rest.chunks(chunk) {
        match reader.feed(piece) {
            Ok(got) => {
                fed += piece.len();
                lines.extend(got);
            }
            Err(Violation::TooLong { max: m }) => {
                assert_eq!(m, max);
                let seen = &rest[..fed + piece.len()];
                assert!(seen.split(|&b| b == b'\n').any(|l| l.len() > max), "refused without a long line");
                return;
            }
            Err(other) => panic!("the reader only refuses long lines, not {other:?}"),
        }
    }
    let mut complete: Vec<&[u8]> = rest.split(|&b| b == b'\n').collect();
    let tail = complete.pop().unwrap_or_default();
    assert_eq!(reader.has_partial(), !tail.is_empty());
    assert_eq!(lines.len(), complete.len());
    for (line, expected) in lines.iter().zip(complete) {
        assert!(line.len() <= max && !line.contains(&b'\n'));
        assert_eq!(line.as_slice(), expected);
        if let Err(Violation::Malformed(why)) = parse(line) {
            assert!(why == "not JSON" || why == "unknown shape", "{why}");
        }
    }
    let _ = parse(rest);
}

#[cfg(test)]
mod tests {
    /// The committed seeds and crash regressions of `fuzz/seeds/`.
    #[test]
    fn the_committed_fuzz_inputs_of_the_line_protocol_pass() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/seeds/line_protocol");
        let mut seen = 0;
        for entry in std::fs::read_dir(dir).expect("fuzz/seeds/line_protocol") {
            super::line_protocol(&std::fs::read(entry.unwrap().path()).unwrap());
            seen += 1;
        }
        assert!(seen > 0);
    }
}
