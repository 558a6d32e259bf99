//! Cutting text to a bound, one way for every service: the result, its
//! mark included, is at most the bound (in characters, or in bytes for a
//! byte budget, cut at a character boundary), and a text within the bound
//! comes back whole. The mark says that something was left out: `...` in
//! what the model reads (plain ASCII, as the descriptions and stubs are),
//! `…` in what people read (the console, an approval question).

/// The mark of a cut in what the model reads.
pub const MODEL_MARK: &str = "...";
/// The mark of a cut in what people read.
pub const PEOPLE_MARK: &str = "…";

/// `text` in at most `max` characters, `mark` ending it when it was cut.
pub fn cut_chars(text: &str, max: usize, mark: &str) -> String {
    match text.char_indices().nth(max) {
        None => text.to_string(),
        Some(_) => {
            let keep = max.saturating_sub(mark.chars().count());
            let end = text.char_indices().nth(keep).map_or(text.len(), |(at, _)| at);
            format!("{}{mark}", &text[..end])
        }
    }
}

/// `text` in at most `max` bytes, `mark` ending it when it was cut (never
/// in the middle of a character).
pub fn cut_bytes(text: &str, max: usize, mark: &str) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max.saturating_sub(mark.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{mark}", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_within_the_bound_comes_back_whole() {
        assert_eq!(cut_chars("héllo", 5, PEOPLE_MARK), "héllo");
        assert_eq!(cut_bytes("héllo", 6, MODEL_MARK), "héllo");
        assert_eq!(cut_chars("", 0, MODEL_MARK), "");
    }

    #[test]
    fn a_cut_text_with_its_mark_stays_within_the_bound_in_characters() {
        assert_eq!(cut_chars("héllo wörld", 4, PEOPLE_MARK), "hél…");
        assert_eq!(cut_chars("héllo wörld", 6, MODEL_MARK), "hél...");
        for max in 0..12 {
            assert!(cut_chars("héllo wörld", max, MODEL_MARK).chars().count() <= max.max(3), "{max}");
        }
    }

    #[test]
    fn a_byte_cut_never_splits_a_character_and_stays_within_the_bound() {
        // "é" is two bytes: a cut at byte 2 would split it.
        assert_eq!(cut_bytes("héllo", 5, MODEL_MARK), "h...");
        for max in 3..12 {
            let cut = cut_bytes("héllo wörld", max, MODEL_MARK);
            assert!(cut.len() <= max, "{max}: {cut}");
        }
    }
}
