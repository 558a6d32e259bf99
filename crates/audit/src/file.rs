//! The file backend: one record per line, appended, never rewritten.
//!
//! It owns the open file, its size and the chain head. Opening an existing
//! file continues its chain from its last record (a restarted writer does
//! not start a second chain in one file); a file whose last line is
//! incomplete or not a record stops the start, naming the file and line,
//! rather than chaining onto something unknown. A missing or empty file
//! whose rotated predecessors exist continues theirs.
//!
//! Each record is one `write` of the whole line; when it fails, the bytes
//! of a partial line are cut off again, so a later record never follows a
//! torn one. A cell's end (and every checkpoint) is `fsync`ed.
//!
//! Rotation: once the file holds `rotate_bytes`, it is synced and renamed
//! to `<file>.<seq of its first record, 12 digits>` and a new file starts,
//! whose first record is a checkpoint naming the head of the one before.
//! Names sort in chain order, so `audit verify <file>.* <file>` checks the
//! whole chain across files.

use std::path::{Path, PathBuf};

use tokio::fs::{File, OpenOptions};
use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};

use crate::AuditError;
use crate::record::{line_hash, parse_line};
use crate::sink::{Durability, Head, Wrote, unwritable};

/// How much of a file's end is read to find its last record.
const TAIL_BYTES: u64 = 4 * 1024 * 1024;

/// An append-only audit file.
pub struct FileBackend {
    path: PathBuf,
    file: File,
    size: u64,
    head: Head,
    /// The `seq` of the first record in the current file.
    first_seq: Option<u64>,
    rotate_bytes: Option<u64>,
    rotated: bool,
}

impl FileBackend {
    /// Open (or create) `path` for appending and read the chain head.
    pub async fn open(path: &Path, rotate_bytes: Option<u64>) -> Result<Self, AuditError> {
        let open_err =
            |e: &dyn std::fmt::Display| AuditError::Open { sink: path.display().to_string(), reason: e.to_string() };
        let file = OpenOptions::new().create(true).append(true).open(path).await.map_err(|e| open_err(&e))?;
        let size = file.metadata().await.map_err(|e| open_err(&e))?.len();
        let (head, first_seq) = if size > 0 {
            let (first, last) = first_and_last(path).await?;
            (Some((last.0, Some(last.1))), Some(first))
        } else {
            match latest_rotated(path)? {
                Some(previous) => {
                    let (_, last) = first_and_last(&previous).await?;
                    (Some((last.0, Some(last.1))), None)
                }
                None => (None, None),
            }
        };
        Ok(Self {
            path: path.to_path_buf(),
            file,
            size,
            head,
            first_seq,
            rotate_bytes: rotate_bytes.filter(|b| *b > 0),
            rotated: false,
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn head(&self) -> Head {
        self.head.clone()
    }

    pub(crate) async fn write(&mut self, seq: u64, line: &str, durability: Durability) -> Result<Wrote, AuditError> {
        let sink = self.path.display().to_string();
        let text = format!("{line}\n");
        let written = async {
            self.file.write_all(text.as_bytes()).await?;
            self.file.flush().await?;
            if durability == Durability::Synced {
                self.file.sync_data().await?;
            }
            std::io::Result::Ok(())
        }
        .await;
        if let Err(e) = written {
            // Cut off whatever part of the line got in, so the next record
            // does not follow a torn one.
            if let Ok(meta) = self.file.metadata().await
                && meta.len() > self.size
            {
                let _ = self.file.set_len(self.size).await;
            }
            return Err(unwritable(&sink, &e));
        }
        self.size += text.len() as u64;
        self.head = Some((seq, Some(line_hash(line))));
        self.first_seq.get_or_insert(seq);
        if let Some(limit) = self.rotate_bytes
            && self.size >= limit
        {
            self.rotate().await?;
        }
        Ok(Wrote::At(seq))
    }

    /// Sync and rename the current file, start a new one.
    async fn rotate(&mut self) -> Result<(), AuditError> {
        let sink = self.path.display().to_string();
        self.file.sync_all().await.map_err(|e| unwritable(&sink, &e))?;
        let first = self.first_seq.unwrap_or(0);
        let rotated = rotated_name(&self.path, first);
        tokio::fs::rename(&self.path, &rotated).await.map_err(|e| unwritable(&sink, &e))?;
        self.file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(&self.path)
            .await
            .map_err(|e| unwritable(&sink, &e))?;
        if let Some(dir) = self.path.parent()
            && let Ok(dir) = File::open(if dir.as_os_str().is_empty() { Path::new(".") } else { dir }).await
        {
            let _ = dir.sync_all().await;
        }
        tracing::info!(file = %self.path.display(), rotated = %rotated.display(), "audit log rotated");
        self.size = 0;
        self.first_seq = None;
        self.rotated = true;
        Ok(())
    }

    pub(crate) fn take_rotated(&mut self) -> bool {
        std::mem::take(&mut self.rotated)
    }

    /// Writable again? The file must still be there and open for appending
    /// (an immutable or read-only file is not); the handle is replaced by
    /// the new one.
    pub(crate) async fn probe(&mut self) -> Result<(), AuditError> {
        let sink = self.path.display().to_string();
        let file = OpenOptions::new().append(true).open(&self.path).await.map_err(|e| unwritable(&sink, &e))?;
        let size = file.metadata().await.map_err(|e| unwritable(&sink, &e))?.len();
        if size != self.size {
            return Err(unwritable(
                &sink,
                &format!("the file changed size behind the writer ({} bytes, not {})", size, self.size),
            ));
        }
        self.file = file;
        Ok(())
    }

    pub(crate) async fn sync(&mut self) -> Result<(), AuditError> {
        let sink = self.path.display().to_string();
        self.file.sync_all().await.map_err(|e| unwritable(&sink, &e))
    }
}

/// `<file>.<first seq, 12 digits>`.
pub fn rotated_name(path: &Path, first_seq: u64) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(format!(".{first_seq:012}"));
    PathBuf::from(name)
}

/// The rotated predecessors of `path`, oldest first.
pub fn rotated_files(path: &Path) -> std::io::Result<Vec<PathBuf>> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let Some(base) = path.file_name().and_then(|n| n.to_str()) else { return Ok(Vec::new()) };
    let prefix = format!("{base}.");
    let mut found: Vec<(u64, PathBuf)> = Vec::new();
    for entry in std::fs::read_dir(&dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(digits) = name.strip_prefix(&prefix)
            && digits.len() == 12
            && let Ok(n) = digits.parse::<u64>()
        {
            found.push((n, dir.join(name)));
        }
    }
    found.sort();
    Ok(found.into_iter().map(|(_, p)| p).collect())
}

fn latest_rotated(path: &Path) -> Result<Option<PathBuf>, AuditError> {
    rotated_files(path)
        .map(|files| files.last().cloned())
        .map_err(|e| AuditError::Open { sink: path.display().to_string(), reason: e.to_string() })
}

/// The `seq` of the first record and the `seq` and hash of the last one.
async fn first_and_last(path: &Path) -> Result<(u64, (u64, String)), AuditError> {
    let sink = path.display().to_string();
    let open_err = |e: &dyn std::fmt::Display| AuditError::Open { sink: sink.clone(), reason: e.to_string() };
    let mut file = File::open(path).await.map_err(|e| open_err(&e))?;
    let size = file.metadata().await.map_err(|e| open_err(&e))?.len();
    let mut first_line = String::new();
    {
        let mut buf = vec![0u8; size.min(TAIL_BYTES) as usize];
        file.read_exact(&mut buf).await.map_err(|e| open_err(&e))?;
        let text = String::from_utf8_lossy(&buf);
        if let Some(line) = text.split('\n').next() {
            first_line = line.to_string();
        }
    }
    let start = size.saturating_sub(TAIL_BYTES);
    file.seek(std::io::SeekFrom::Start(start)).await.map_err(|e| open_err(&e))?;
    let mut tail = Vec::new();
    file.read_to_end(&mut tail).await.map_err(|e| open_err(&e))?;
    let corrupt = |line: usize, reason: String| AuditError::Corrupt { file: sink.clone(), line, reason };
    let lines_before = if start == 0 { 0 } else { count_lines(path, start).await };
    if tail.last() != Some(&b'\n') {
        let total = lines_before + tail.iter().filter(|b| **b == b'\n').count() + 1;
        return Err(corrupt(
            total,
            "the last line is incomplete (a write was cut short); move the file aside to start a new chain".into(),
        ));
    }
    let text = String::from_utf8(tail).map_err(|_| corrupt(0, "the end of the file is not UTF-8".into()))?;
    let lines: Vec<&str> = text.trim_end_matches('\n').split('\n').collect();
    let last = lines.last().copied().unwrap_or("");
    let last_no = lines_before + lines.len();
    let parsed = parse_line(last).map_err(|e| {
        corrupt(last_no, format!("the last line is not a record ({e}), so its chain cannot be continued"))
    })?;
    let first = parse_line(&first_line).map(|p| p.seq).unwrap_or(parsed.seq);
    Ok((first, (parsed.seq, parsed.hash)))
}

async fn count_lines(path: &Path, upto: u64) -> usize {
    let Ok(file) = File::open(path).await else { return 0 };
    let mut reader = file.take(upto);
    let mut buf = vec![0u8; 64 * 1024];
    let mut n = 0;
    while let Ok(read) = reader.read(&mut buf).await {
        if read == 0 {
            break;
        }
        n += buf[..read].iter().filter(|b| **b == b'\n').count();
    }
    n
}
