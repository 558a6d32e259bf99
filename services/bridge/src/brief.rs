//! A tool's description made short for its typed line (the summary the
//! description's typed tier and `search_tools` show).
//!
//! A line cut in the middle of a sentence can hide what matters (the
//! filesystem server's `search_files`: the cut fell before the sentence
//! saying that `*.ext` does not look into subdirectories). So the line
//! keeps whole sentences of the description's first paragraph, as many as
//! fit [`MAX_BRIEF_CHARS`], and always the first one (up to
//! [`MAX_FIRST_SENTENCE`]); when anything was left out it ends with
//! [`CUT_MARK`], so the model knows that `TOOLS[name]` has the rest.

/// Characters of a description a typed line keeps, in whole sentences
/// (the first sentence is kept whole even when longer).
pub const MAX_BRIEF_CHARS: usize = 200;

/// Characters of a first sentence kept whole; a longer one (a description
/// with no full stop) is cut at a word.
pub const MAX_FIRST_SENTENCE: usize = 400;

/// What a typed line that left part of its description out ends with.
pub const CUT_MARK: &str = " (cut; TOOLS[name] has the rest)";

/// The sentences of `description` a typed line shows (see the module doc),
/// with [`CUT_MARK`] when some were left out; empty for no description.
pub fn brief(description: &str) -> String {
    let text = description.trim();
    let mut lines = text.lines();
    // The first paragraph, its lines joined and its spaces collapsed.
    let mut paragraph = String::new();
    let mut more_paragraphs = false;
    for line in lines.by_ref() {
        let line = line.trim();
        if line.is_empty() {
            break;
        }
        // A list, a heading or a labelled block (`Args:`) after the first
        // line is not more of its sentences.
        if !paragraph.is_empty() && starts_a_block(line) {
            more_paragraphs = true;
            break;
        }
        for word in line.split_whitespace() {
            if !paragraph.is_empty() {
                paragraph.push(' ');
            }
            paragraph.push_str(word);
        }
    }
    let more_paragraphs = more_paragraphs || lines.any(|l| !l.trim().is_empty());
    let mut kept = 0;
    for end in sentence_ends(&paragraph) {
        if kept == 0 || paragraph[..end].chars().count() <= MAX_BRIEF_CHARS {
            kept = end;
        } else {
            break;
        }
    }
    let mut line = paragraph[..kept].to_string();
    let mut cut = kept < paragraph.len() || more_paragraphs;
    if line.chars().count() > MAX_FIRST_SENTENCE {
        line = at_a_word(&line, MAX_FIRST_SENTENCE);
        cut = true;
    }
    if cut && !line.is_empty() {
        line.push_str(CUT_MARK);
    }
    line
}

/// Whether `line` starts a list item, a heading or a labelled block.
fn starts_a_block(line: &str) -> bool {
    let numbered =
        line.split_once(['.', ')']).is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    line.starts_with(['-', '*', '#', '•', '|']) || numbered || line.ends_with(':')
}

/// Where each sentence of `text` ends (byte offsets after its `.`, `!` or
/// `?`), the text's end last. A stop ends a sentence when a space follows
/// and then a capital, a digit or an opening mark, so `e.g. a file` and
/// `Node.js` do not.
fn sentence_ends(text: &str) -> Vec<usize> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut ends = Vec::new();
    for (i, &(at, c)) in chars.iter().enumerate() {
        if !matches!(c, '.' | '!' | '?') {
            continue;
        }
        let (Some(&(_, space)), Some(&(_, next))) = (chars.get(i + 1), chars.get(i + 2)) else { continue };
        let opens = next.is_uppercase() || next.is_ascii_digit() || matches!(next, '`' | '"' | '\'' | '(' | '[' | '*');
        if space == ' ' && opens {
            ends.push(at + c.len_utf8());
        }
    }
    if ends.last() != Some(&text.len()) {
        ends.push(text.len());
    }
    ends
}

/// `text` cut to at most `max` characters at a word, with `...`.
fn at_a_word(text: &str, max: usize) -> String {
    let kept: String = text.chars().take(max.saturating_sub(3)).collect();
    let kept = match kept.rfind(' ') {
        Some(space) if space > kept.len() / 2 => &kept[..space],
        _ => kept.as_str(),
    };
    format!("{}...", kept.trim_end_matches([' ', ',', ';', ':']))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The filesystem server's `search_files` description, as it lists it.
    const SEARCH_FILES: &str = "Recursively search for files and directories matching a pattern. The patterns should \
        be glob-style patterns that match paths relative to the working directory. Use pattern like '*.ext' to match \
        files in current directory, and '**/*.ext' to match files in all subdirectories. Returns full paths to all \
        matching items. Great for finding files when you don't know their exact location. Only searches within \
        allowed directories.";

    #[test]
    fn a_line_keeps_whole_sentences_that_fit_and_says_it_was_cut() {
        let line = brief(SEARCH_FILES);
        assert_eq!(
            line,
            format!(
                "Recursively search for files and directories matching a pattern. The patterns should be glob-style \
                 patterns that match paths relative to the working directory.{CUT_MARK}"
            )
        );
        assert!(line.chars().count() - CUT_MARK.chars().count() <= MAX_BRIEF_CHARS);
    }

    #[test]
    fn a_description_that_fits_is_whole_and_unmarked() {
        assert_eq!(brief("Add two integers."), "Add two integers.");
        assert_eq!(brief("  Echo text back.\n"), "Echo text back.");
        assert_eq!(brief(""), "");
        // A stop inside a sentence ends nothing.
        assert_eq!(brief("Reads e.g. a file with Node.js tools."), "Reads e.g. a file with Node.js tools.");
    }

    #[test]
    fn the_first_sentence_is_kept_whole_even_past_the_limit() {
        let long = format!("Read {} in one go. Then more.", "the file ".repeat(20));
        let line = brief(&long);
        assert!(line.starts_with("Read the file") && line.ends_with(&format!("in one go.{CUT_MARK}")), "{line}");
    }

    #[test]
    fn a_later_paragraph_counts_as_cut_and_a_sentence_without_end_is_cut_at_a_word() {
        assert_eq!(brief("Short one.\n\nDetails follow here."), format!("Short one.{CUT_MARK}"));
        assert_eq!(brief("Lines of\none paragraph."), "Lines of one paragraph.");
        assert_eq!(brief("Search files.\nArgs:\n  pattern: a glob"), format!("Search files.{CUT_MARK}"));
        assert_eq!(brief("List items.\n- one\n- two"), format!("List items.{CUT_MARK}"));
        assert_eq!(brief("Steps.\n1. one"), format!("Steps.{CUT_MARK}"));
        let endless = "word ".repeat(200);
        let line = brief(&endless);
        assert!(line.ends_with(&format!("word...{CUT_MARK}")), "{line}");
        assert!(line.chars().count() <= MAX_FIRST_SENTENCE + CUT_MARK.chars().count(), "{line}");
    }
}
