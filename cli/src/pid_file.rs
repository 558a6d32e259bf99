//! `--pid-file FILE`: this process's id in a file for as long as it runs,
//! so an operator signals exactly this process (`kill -HUP "$(cat FILE)"`
//! reloads its config) instead of every process of the same name.
//!
//! The file is written whole under a temporary name and renamed, so a
//! reader never sees half of it; at exit it is removed, unless it no longer
//! holds this process's id (another process took the name meanwhile).

use std::path::{Path, PathBuf};

use anyhow::Context;

/// The pid file of this process, removed when dropped.
#[derive(Debug)]
pub struct PidFile {
    path: PathBuf,
    pid: u32,
}

impl PidFile {
    /// Write this process's id to `path` (replacing what it held): an error
    /// naming the file when it cannot be written.
    pub fn write(path: &Path) -> anyhow::Result<Self> {
        let pid = std::process::id();
        let mut temporary = path.as_os_str().to_owned();
        temporary.push(format!(".{pid}.tmp"));
        let temporary = PathBuf::from(temporary);
        std::fs::write(&temporary, format!("{pid}\n"))
            .and_then(|()| std::fs::rename(&temporary, path))
            .with_context(|| format!("--pid-file {}: cannot write it", path.display()))
            .inspect_err(|_| {
                let _ = std::fs::remove_file(&temporary);
            })?;
        Ok(Self { path: path.to_path_buf(), pid })
    }
}

impl Drop for PidFile {
    fn drop(&mut self) {
        let ours = std::fs::read_to_string(&self.path).is_ok_and(|text| text.trim() == self.pid.to_string());
        if ours {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_holds_this_process_id_while_it_lives_and_is_removed_only_if_still_ours() {
        let dir = code_mode_core::testing::TempDir::new("pid-file");
        let path = dir.0.join("code-mode.pid");
        let pid = PidFile::write(&path).expect("written");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), format!("{}\n", std::process::id()));
        drop(pid);
        assert!(!path.exists(), "removed at exit");
        // Another process took the name: its file stays.
        let pid = PidFile::write(&path).expect("written");
        std::fs::write(&path, "1\n").unwrap();
        drop(pid);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "1\n");
        let error = PidFile::write(&dir.0.join("no/such/dir/x.pid")).unwrap_err();
        assert!(
            format!("{error:#}").contains("--pid-file") && format!("{error:#}").contains("no/such/dir"),
            "{error:#}"
        );
    }
}
