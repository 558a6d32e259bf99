//! `code-mode run --out DIR` (issue 42): the files a cell wrote to
//! `/tmp/out` (and its whole printed output, `output.txt`, when it was cut)
//! written to a folder of the host once the cell ended, since one-shot
//! `run` keeps no file store to read them from later.
//!
//! The files come from the run's store (the run's bounds hold: 64 files,
//! 64 MiB, output kept up to 8 MiB). Each name is the relative path the
//! runner already checked (no `..`, not absolute); it is checked again
//! here, each folder on the way is made or must be a real folder (a
//! symlink is never followed), and each file is created new (`O_EXCL`: an
//! existing file or symlink is left as it is and the file not written).
//! The report's `files` (links nobody can read once `run` exits) become
//! lines in `files_notes` saying where each file went, or why not.

use std::io::Write as _;
use std::path::{Component, Path, PathBuf};

use code_mode_core::files::FileStore;
use code_mode_proto::CellReport;

/// Write the files `report` links from `store` under `dir` (made when
/// missing), noting each in the report.
pub fn write_out(dir: &Path, store: &FileStore, report: &mut CellReport) {
    if report.files.is_empty() {
        return;
    }
    if let Err(e) = std::fs::create_dir_all(dir) {
        report.files_notes.push(format!("no file written: cannot make the folder {}: {e}", dir.display()));
        report.files.clear();
        return;
    }
    for link in std::mem::take(&mut report.files) {
        let Some((_, file)) = store.take(&link.uri) else {
            report.files_notes.push(format!("'{}' not written: gone from the run's store", link.name));
            continue;
        };
        match write_one(dir, &link.name, &file.bytes) {
            Ok(path) => report.files_notes.push(format!(
                "'{}' ({} bytes) written to {}",
                link.name,
                file.bytes.len(),
                path.display()
            )),
            Err(why) => report.files_notes.push(format!("'{}' not written: {why}", link.name)),
        }
    }
}

/// Write `bytes` as `name` under `dir`: its path, or why not.
fn write_one(dir: &Path, name: &str, bytes: &[u8]) -> Result<PathBuf, String> {
    let parts: Vec<&str> = name.split('/').collect();
    let plain = |part: &&str| {
        !part.is_empty() && matches!(Path::new(part).components().collect::<Vec<_>>()[..], [Component::Normal(_)])
    };
    if !parts.iter().all(plain) {
        return Err("not a plain relative name".into());
    }
    let (file_name, folders) = parts.split_last().ok_or("an empty name")?;
    let mut path = dir.to_path_buf();
    for folder in folders {
        path.push(folder);
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.file_type().is_dir() => {}
            Ok(_) => {
                return Err(format!("{} is there and is not a folder (a symlink is not followed)", path.display()));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir(&path).map_err(|e| format!("cannot make {}: {e}", path.display()))?
            }
            Err(e) => return Err(format!("{}: {e}", path.display())),
        }
    }
    path.push(file_name);
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(|e| format!("cannot create {} (an existing file is not replaced): {e}", path.display()))?;
    out.write_all(bytes).map_err(|e| format!("writing {}: {e}", path.display()))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_leave_the_folder_or_go_through_a_symlink_or_over_a_file_are_not_written() {
        let dir = std::env::temp_dir().join(format!("code-mode-out-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(write_one(&dir, "a/b.txt", b"hi").unwrap(), dir.join("a/b.txt"));
        assert_eq!(std::fs::read(dir.join("a/b.txt")).unwrap(), b"hi");
        for bad in ["../up", "a/../../up", "/etc/x", "a//b", ""] {
            assert!(write_one(&dir, bad, b"x").unwrap_err().contains("plain relative"), "{bad}");
        }
        std::os::unix::fs::symlink("/tmp", dir.join("link")).unwrap();
        assert!(write_one(&dir, "link/x", b"x").unwrap_err().contains("not a folder"));
        std::os::unix::fs::symlink("/etc/passwd", dir.join("passwd")).unwrap();
        assert!(write_one(&dir, "passwd", b"x").unwrap_err().contains("not replaced"));
        assert!(write_one(&dir, "a/b.txt", b"again").unwrap_err().contains("not replaced"));
        assert_eq!(std::fs::read(dir.join("a/b.txt")).unwrap(), b"hi");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
