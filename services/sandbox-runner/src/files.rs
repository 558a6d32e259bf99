//! Files out (issue 42): what a cell's code wrote to its output folder
//! (`/tmp/out`, also through `save_file`), read off the protocol channel
//! after the code finished, checked as untrusted input, and kept in the
//! shared [`FileStore`] under the identity that ran the cell; the report
//! names each kept file by a `code-mode://files/...` link.
//!
//! The bytes leave the container only on the protocol channel: `runner.py`
//! sends a `file` line (name, MIME type, size), then the bytes in
//! `file_data` lines (base64, each within the line limit). The runner in
//! the container refuses symlinks, other non-regular files and names with
//! `..` first, and stops at the run's bounds ([`MAX_FILES_OUT`] files,
//! [`MAX_FILES_OUT_BYTES`] bytes), each with a `file_note` line the report
//! carries; here the same bounds are held again, and a line past them (or
//! out of order) is a protocol violation. A file whose bytes did not all
//! arrive (the run was stopped halfway) is never offered: a note says so.
//!
//! The whole printed output, when the cell's limits ask for it, comes as
//! `output_kept` lines while the code runs (once the output outgrew what
//! the model reads), up to [`MAX_OUTPUT_KEPT`]; it is kept first, as the
//! file [`OUTPUT_FILE`], and counts in the run's bounds like any file.

use base64::Engine as _;
use bytes::Bytes;
use code_mode_core::files::{FileStore, KeptFile};
use code_mode_core::files_shared::SharedFiles;
use code_mode_proto::{FileLink, MAX_FILES_OUT, MAX_FILES_OUT_BYTES, MAX_OUTPUT_KEPT, OUTPUT_FILE};

use crate::protocol::Violation;

/// Notes kept per run, and characters per note: the rest are dropped (the
/// runner in the container sends at most one per refused file).
const MAX_NOTES: usize = 16;
const NOTE_CHARS: usize = 300;
/// The longest file name (a path under the output folder), in bytes.
pub const MAX_NAME: usize = 255;

/// A file being received or received whole.
#[derive(Debug)]
struct Incoming {
    name: String,
    mime_type: String,
    size: u64,
    data: Vec<u8>,
}

/// The files of one run as they arrive.
#[derive(Debug, Default)]
pub(crate) struct Collector {
    whole: Vec<Incoming>,
    current: Option<Incoming>,
    bytes: u64,
    notes: Vec<String>,
    /// The whole printed output as it came (`output_kept` lines).
    output: Vec<u8>,
    /// Bytes of it the cell's limits asked for (0: none).
    pub(crate) output_bound: u64,
    /// Where kept files go; `None`: nowhere here (the files are dropped,
    /// and the report says so).
    pub(crate) store: Option<FileStore>,
    /// A kept session's cell: its files stay while the session lives
    /// ([`FileStore::put_held`]).
    pub(crate) held: bool,
}

impl Collector {
    /// A `file` line: the previous file must be whole.
    pub(crate) fn start(&mut self, name: String, mime_type: Option<String>, size: u64) -> Result<(), Violation> {
        self.close()?;
        if self.whole.len() + usize::from(!self.output.is_empty()) >= MAX_FILES_OUT {
            return Err(Violation::OutOfOrder("more files handed out than a run may"));
        }
        match self.bytes.checked_add(size) {
            Some(total) if total <= MAX_FILES_OUT_BYTES => self.bytes = total,
            _ => return Err(Violation::OutOfOrder("more bytes of files handed out than a run may")),
        }
        if !is_safe_name(&name) {
            return Err(Violation::OutOfOrder("a file name that is not a plain path under the output folder"));
        }
        let mime_type = match mime_type {
            Some(m) if crate::protocol::is_mime_type(&m) => m,
            _ => "application/octet-stream".to_string(),
        };
        // The size is bounded above, so the buffer is too.
        self.current = Some(Incoming { name, mime_type, size, data: Vec::with_capacity(size as usize) });
        Ok(())
    }

    /// A `file_data` line: more of the current file, never past its size.
    pub(crate) fn data(&mut self, data: &str) -> Result<(), Violation> {
        let Some(current) = self.current.as_mut() else {
            return Err(Violation::OutOfOrder("file data without a file"));
        };
        let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(data) else {
            return Err(Violation::OutOfOrder("file data that is not base64"));
        };
        if current.data.len() as u64 + bytes.len() as u64 > current.size {
            return Err(Violation::OutOfOrder("more file data than the file's size"));
        }
        current.data.extend_from_slice(&bytes);
        Ok(())
    }

    /// An `output_kept` line: more of the whole printed output, never past
    /// what the limits asked for; before any file (the files come after
    /// the code finished).
    pub(crate) fn output(&mut self, data: &str) -> Result<(), Violation> {
        if self.current.is_some() || !self.whole.is_empty() {
            return Err(Violation::OutOfOrder("printed output after the files"));
        }
        let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(data) else {
            return Err(Violation::OutOfOrder("kept output that is not base64"));
        };
        let total = self.output.len() as u64 + bytes.len() as u64;
        if total > self.output_bound.min(MAX_OUTPUT_KEPT) {
            return Err(Violation::OutOfOrder("more kept output than the cell's limits ask for"));
        }
        self.bytes = self.bytes.saturating_add(bytes.len() as u64);
        self.output.extend_from_slice(&bytes);
        Ok(())
    }

    /// A `file_note` line: kept (bounded) for the report.
    pub(crate) fn note(&mut self, note: &str) {
        if self.notes.len() < MAX_NOTES {
            self.notes.push(note.chars().filter(|c| !c.is_control()).take(NOTE_CHARS).collect());
        }
    }

    /// The current file ends here (another file starts, or the run ends):
    /// it must be whole.
    fn close(&mut self) -> Result<(), Violation> {
        match self.current.take() {
            Some(file) if file.data.len() as u64 == file.size => {
                self.whole.push(file);
                Ok(())
            }
            Some(_) => Err(Violation::OutOfOrder("a file shorter than its size")),
            None => Ok(()),
        }
    }

    /// Keep the whole files for `owner` (the cell's identity, empty for
    /// none): their links, and the notes (for a file cut short by the run's
    /// end, and one where a bound of the store ended the collection). The printed output kept comes
    /// first; `stopped`: the run did not end on its own, so it holds what
    /// was printed before (a note says so).
    pub(crate) fn finish(mut self, owner: &str, stopped: bool) -> (Vec<FileLink>, Vec<String>) {
        if !self.output.is_empty() {
            if stopped {
                let got = self.output.len();
                self.note(&format!("{OUTPUT_FILE}: the run was stopped: it holds the {got} bytes printed before"));
            }
            let output = Incoming {
                name: OUTPUT_FILE.to_string(),
                mime_type: "text/plain; charset=utf-8".to_string(),
                size: self.output.len() as u64,
                data: std::mem::take(&mut self.output),
            };
            self.whole.insert(0, output);
        }
        match self.current.take() {
            Some(file) if file.data.len() as u64 == file.size => self.whole.push(file),
            Some(cut) => {
                let (got, size) = (cut.data.len(), cut.size);
                self.note(&format!("{}: not offered: the run ended after {got} of its {size} bytes", cut.name));
            }
            None => {}
        }
        let mut links = Vec::new();
        let Some(store) = self.store.clone() else {
            if !self.whole.is_empty() {
                let n = self.whole.len();
                self.note(&format!(
                    "{n} file(s) of /tmp/out not handed out: no file store here (`code-mode serve` offers them, \
                     and the services over NATS with the bucket codemode_files)"
                ));
            }
            return (links, self.notes);
        };
        let files = std::mem::take(&mut self.whole);
        for file in files {
            let (name, size) = (file.name.clone(), file.size);
            let kept = KeptFile { name: file.name, mime_type: file.mime_type.clone(), bytes: Bytes::from(file.data) };
            let put = if self.held { store.put_held(owner, kept) } else { store.put(owner, kept) };
            match put {
                Ok(uri) => links.push(FileLink { uri, name, mime_type: file.mime_type, size }),
                // A bound of the store: the collection ends here.
                Err(e) => {
                    self.note(&format!("'{name}' and any later files not kept: {e}"));
                    break;
                }
            }
        }
        (links, self.notes)
    }
}

/// Over NATS: move each linked file of `report` from the runner's own
/// store `local` to the store the services share, so any frontend serves
/// it; a file that cannot go there loses its link and gets a note. At a
/// bound of the bucket (full, or the identity's quota) the hand-off ends
/// there: that file and every later one lose their links, one note saying
/// which bound.
pub(crate) async fn hand_over(local: &FileStore, shared: &SharedFiles, report: &mut code_mode_proto::CellReport) {
    let links = std::mem::take(&mut report.files);
    if links.is_empty() {
        return;
    }
    let bytes: u64 = links.iter().map(|l| l.size).sum();
    tracing::info!(files = links.len(), bytes, "handing a cell's files out to the bucket codemode_files");
    let mut kept = Vec::with_capacity(links.len());
    let mut links = links.into_iter();
    while let Some(link) = links.next() {
        let Some((owner, file)) = local.take(&link.uri) else {
            report.files_notes.push(format!("{}: not handed out: gone from the runner's store", link.name));
            continue;
        };
        match shared.put(&owner, &link.uri, &file).await {
            Ok(()) => kept.push(link),
            Err(e) if e.is_bound() => {
                tracing::info!(error = %e, file = %link.name, "a cell's files out stop at a bound of the bucket");
                report.files_notes.push(format!("'{}' and any later files not handed out: {e}", link.name));
                for later in links.by_ref() {
                    local.take(&later.uri);
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, file = %link.name, "a file out could not be handed to the frontends");
                report.files_notes.push(format!("{}: not handed out: {e}", link.name));
            }
        }
    }
    report.files = kept;
}

/// A relative path of plain names: no empty, `.` or `..` part, no leading
/// `/`, no backslash or control character, at most [`MAX_NAME`] bytes.
pub fn is_safe_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && !name.chars().any(|c| c.is_control() || c == '\\')
        && name.split('/').all(|part| !part.is_empty() && part != "." && part != "..")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(bytes: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    #[test]
    fn names_that_could_leave_the_folder_are_not_safe() {
        for bad in ["", "../x", "a/../b", "/etc/passwd", "a//b", "./a", "a\\b", "a\nb", &"x".repeat(256)] {
            assert!(!is_safe_name(bad), "{bad:?}");
        }
        for good in ["a.csv", "plots/fig 1.png", "..x", "x.."] {
            assert!(is_safe_name(good), "{good:?}");
        }
    }

    #[test]
    fn whole_files_are_kept_for_the_identity_and_a_cut_one_is_named_not_offered() {
        let store = FileStore::with_ttl(std::time::Duration::from_secs(60));
        let mut c = Collector { store: Some(store.clone()), ..Collector::default() };
        c.start("a.csv".into(), Some("text/csv".into()), 3).unwrap();
        c.data(&b64(b"a,b")).unwrap();
        c.start("b.bin".into(), None, 4).unwrap();
        c.data(&b64(b"xy")).unwrap();
        let (links, notes) = c.finish("alice", false);
        assert_eq!(links.len(), 1);
        let mut last_whole = Collector { store: Some(store.clone()), ..Collector::default() };
        last_whole.start("c.txt".into(), None, 1).unwrap();
        last_whole.data(&b64(b"c")).unwrap();
        assert_eq!(last_whole.finish("alice", false).0.len(), 1, "the last file, whole, is kept");
        assert_eq!((links[0].name.as_str(), links[0].mime_type.as_str(), links[0].size), ("a.csv", "text/csv", 3));
        assert_eq!(&store.get("alice", &links[0].uri).unwrap().bytes[..], b"a,b");
        assert_eq!(notes, ["b.bin: not offered: the run ended after 2 of its 4 bytes"]);
    }

    #[test]
    fn lines_past_the_bounds_or_out_of_order_are_violations() {
        let mut c = Collector::default();
        assert!(c.data(&b64(b"x")).is_err());
        assert!(c.start("a".into(), None, MAX_FILES_OUT_BYTES + 1).is_err());
        assert!(c.start("../a".into(), None, 1).is_err());
        let mut c = Collector::default();
        c.start("a".into(), None, 1).unwrap();
        assert!(c.data(&b64(b"xy")).is_err());
        let mut c = Collector::default();
        for i in 0..MAX_FILES_OUT {
            c.start(format!("f{i}"), None, 0).unwrap();
        }
        assert!(c.start("one-more".into(), None, 0).is_err());
    }

    #[test]
    fn the_whole_output_is_kept_first_as_output_txt_and_counts_in_the_run_bounds() {
        let store = FileStore::with_ttl(std::time::Duration::from_secs(60));
        let mut c = Collector { store: Some(store.clone()), output_bound: 8, ..Collector::default() };
        c.output(&b64(b"hello ")).unwrap();
        c.output(&b64(b"wo")).unwrap();
        assert!(c.output(&b64(b"r")).is_err(), "past the bound the cell's limits asked for");
        for i in 0..MAX_FILES_OUT - 1 {
            c.start(format!("f{i}"), None, 0).unwrap();
        }
        assert!(c.start("one-more".into(), None, 0).is_err(), "output.txt is one of the run's files");
        assert!(c.output(&b64(b"late")).is_err(), "printed output after the files");
        let (links, notes) = c.finish("alice", true);
        assert_eq!((links[0].name.as_str(), links[0].size), (OUTPUT_FILE, 8));
        assert_eq!(links[0].mime_type, "text/plain; charset=utf-8");
        assert_eq!(&store.get("alice", &links[0].uri).unwrap().bytes[..], b"hello wo");
        assert_eq!(notes, ["output.txt: the run was stopped: it holds the 8 bytes printed before"]);
        let mut none = Collector::default();
        assert!(none.output(&b64(b"x")).is_err(), "no output is kept unless the limits ask for it");
    }

    #[test]
    fn at_a_bound_of_the_store_the_collection_ends_with_one_note() {
        let store = FileStore::new(std::time::Duration::from_secs(60), 1024, 4);
        let mut c = Collector { store: Some(store), ..Collector::default() };
        for (name, bytes) in [("a", &b"abc"[..]), ("b", b"de"), ("c", b"f")] {
            c.start(name.into(), None, bytes.len() as u64).unwrap();
            c.data(&b64(bytes)).unwrap();
        }
        let (links, notes) = c.finish("alice", false);
        assert_eq!(links.iter().map(|l| l.name.as_str()).collect::<Vec<_>>(), ["a"]);
        assert_eq!(
            notes,
            ["'b' and any later files not kept: this identity's kept files reached their quota (4 bytes)"]
        );
    }

    #[test]
    fn without_a_store_the_report_says_the_files_were_not_handed_out() {
        let mut c = Collector::default();
        c.start("a".into(), None, 0).unwrap();
        let (links, notes) = c.finish("", false);
        assert!(links.is_empty());
        assert!(notes[0].contains("no file store here"), "{notes:?}");
    }
}
