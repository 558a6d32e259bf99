//! Asking the person at the terminal (`code-mode run --ask`) whether a call
//! a policy holds for approval may go out: the question goes to the
//! process's controlling terminal (`/dev/tty`, not stdout, which carries the
//! report, nor stdin, which may carry the code), and only `y` or `yes`
//! approves. Questions of calls made at once are asked one after another.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;

use code_mode_mcp_frontend::approval::{LocalAsker, message};
use code_mode_proto::{ApprovalReply, ApprovalRequest};
use tokio::sync::mpsc;

/// The controlling terminal.
const TTY: &str = "/dev/tty";

/// Asks on the controlling terminal. One thread reads the terminal's lines
/// (started at the first question); a question takes the first line typed
/// after it was shown, so an answer typed too late for one question never
/// answers the next.
#[derive(Debug)]
pub struct TerminalAsker {
    path: PathBuf,
    /// The lines typed, once the reader runs; held by the question being
    /// asked, so questions take turns.
    lines: Arc<tokio::sync::Mutex<Option<mpsc::UnboundedReceiver<String>>>>,
}

impl TerminalAsker {
    /// The asker, or why there is no terminal to ask on.
    pub fn open() -> Result<Arc<Self>, String> {
        let path = PathBuf::from(TTY);
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| format!("--ask needs a terminal, and {TTY} cannot be opened: {e}"))?;
        Ok(Arc::new(Self { path, lines: Arc::default() }))
    }
}

impl LocalAsker for TerminalAsker {
    fn ask(&self, request: ApprovalRequest) -> Pin<Box<dyn Future<Output = ApprovalReply> + Send>> {
        let path = self.path.clone();
        let question = message(&request);
        let lines = self.lines.clone();
        Box::pin(async move {
            let mut lines = lines.lock().await;
            let typed = match lines.as_mut() {
                Some(typed) => typed,
                None => match read_lines(&path) {
                    Ok(typed) => lines.insert(typed),
                    Err(e) => return ApprovalReply::Unavailable { reason: format!("{}: {e}", path.display()) },
                },
            };
            // Whatever was typed before this question is no answer to it.
            while typed.try_recv().is_ok() {}
            if let Err(e) = show(&path, &question) {
                return ApprovalReply::Unavailable { reason: format!("the terminal cannot be written: {e}") };
            }
            match typed.recv().await {
                Some(line) => answer_of(&line),
                // The terminal closed (end of input).
                None => ApprovalReply::Cancelled,
            }
        })
    }
}

/// Start the thread reading the terminal's lines.
fn read_lines(path: &Path) -> std::io::Result<mpsc::UnboundedReceiver<String>> {
    let tty = std::fs::File::open(path)?;
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::Builder::new().name("code-mode-tty".into()).spawn(move || {
        for line in BufReader::new(tty).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    })?;
    Ok(rx)
}

/// Write the question and the prompt to the terminal.
fn show(path: &Path, question: &str) -> std::io::Result<()> {
    let mut tty = std::fs::OpenOptions::new().write(true).open(path)?;
    write!(tty, "\n{question}\nAllow this call? [y/N] ")?;
    tty.flush()
}

/// Only `y` or `yes` (any case) approves.
fn answer_of(line: &str) -> ApprovalReply {
    match line.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => ApprovalReply::Approved,
        _ => ApprovalReply::Declined,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_y_or_yes_approves() {
        for yes in ["y\n", "Y", " yes \r\n"] {
            assert_eq!(answer_of(yes), ApprovalReply::Approved, "{yes:?}");
        }
        for no in ["", "\n", "n", "no", "yess", "sure"] {
            assert_eq!(answer_of(no), ApprovalReply::Declined, "{no:?}");
        }
    }
}
