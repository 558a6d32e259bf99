//! Issue 43's held-out question sets since the sentence encoder was built
//! (rounds 15 to 21): each written by a helper from the tool lists alone,
//! committed before the round's ranker changed, and measured by words alone
//! and with the encoder, before and after its round
//! (`testing/search-eval/README.md`). Each test holds the floor measured, so
//! that a change cannot lose what was gained.

use crate::search_eval::{REAL_TOOLS, encoder, python, questions};
use crate::search_meaning::{percent, print_misses, print_row, ranks, ranks_with, recall};
use code_mode_encoder::Encoder;

/// Round 15's held-out questions (`heldout-43-round15.json`, 240: 200 over
/// the 42 tools, 40 over the 300-tool catalog), written by a helper from
/// the tool lists alone after round 15's ranker and encoder were built,
/// and measured once, words alone and with the encoder: by words 224 of
/// 240 first (93.3 %) and 236 in the top three (98.3 %); with meaning 228
/// (95.0 %) and 236 (98.3 %), meaning asked for 37; no empty answer. Read
/// after that measurement, it tunes since round 17 (floors unchanged).
const HELD_OUT_15: &str = "heldout-43-round15.json";
const ROUND_15_WORDS_FLOORS: (f64, f64) = (93.3, 98.3);
const ROUND_15_MEANING_FLOORS: (f64, f64) = (95.0, 98.3);

#[test]
fn on_round_15s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_15, ROUND_15_WORDS_FLOORS, ROUND_15_MEANING_FLOORS);
}

/// Round 16's held-out questions (`heldout-43-round16.json`, 240: 200 over
/// the 42 tools, 40 over the 300-tool catalog), written by a helper from
/// the tool lists alone after round 15's measurement, as a second set
/// apart, and measured once (nothing changed between the two): by words
/// 222 of 240 first (92.5 %) and 236 in the top three (98.3 %); with
/// meaning 223 (92.9 %) and 236 (98.3 %), meaning asked for 32; no empty
/// answer. Read after that measurement, it tunes since round 17.
const HELD_OUT_16: &str = "heldout-43-round16.json";
const ROUND_16_WORDS_FLOORS: (f64, f64) = (92.5, 98.3);
const ROUND_16_MEANING_FLOORS: (f64, f64) = (92.9, 98.3);

#[test]
fn on_round_16s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_16, ROUND_16_WORDS_FLOORS, ROUND_16_MEANING_FLOORS);
}

/// Round 17's held-out questions (`heldout-43-round17.json`, 240: 200 over
/// the 42 tools, 40 over the 300-tool catalog), written by a helper from
/// the tool lists alone and committed before round 17's ranker; measured
/// once before and once after it (testing/search-eval/README.md, round 17).
/// Before (round 16's ranker): by words 226 of 240 first (94.2 %) and 234
/// in the top three (97.5 %); with meaning 225 (93.8 %) and 234, asked for
/// 27. After: 228 (95.0 %) and 236 (98.3 %) both ways, asked for 27; no
/// empty answer. Read after that measurement, it tunes since round 18.
const HELD_OUT_17: &str = "heldout-43-round17.json";
const ROUND_17_WORDS_FLOORS: (f64, f64) = (95.0, 98.3);
const ROUND_17_MEANING_FLOORS: (f64, f64) = (95.0, 98.3);

#[test]
fn on_round_17s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_17, ROUND_17_WORDS_FLOORS, ROUND_17_MEANING_FLOORS);
}

/// Round 18's held-out questions (`heldout-43-round18.json`, 240: 200 over
/// the 42 tools, 40 over the 300-tool catalog), written by a helper from
/// the tool lists alone and committed before round 18's ranker; measured
/// once before and once after it (testing/search-eval/README.md, round 18).
/// Before (round 17's ranker): by words 221 of 240 first (92.1 %) and 234
/// in the top three (97.5 %); with meaning 224 (93.3 %) and 234, asked for
/// 26. After: by words 222 (92.5 %) and 234; with meaning 226 (94.2 %) and
/// 234 (97.5 %), asked for 24; no empty answer. Read after that
/// measurement, it tunes since round 19.
const HELD_OUT_18: &str = "heldout-43-round18.json";
const ROUND_18_WORDS_FLOORS: (f64, f64) = (92.5, 97.5);
const ROUND_18_MEANING_FLOORS: (f64, f64) = (94.1, 97.5);

#[test]
fn on_round_18s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_18, ROUND_18_WORDS_FLOORS, ROUND_18_MEANING_FLOORS);
}

/// Round 19's held-out questions (`heldout-43-round19.json`, 240: 200 over
/// the 42 tools, 40 over the 300-tool catalog), written by a helper from
/// the tool lists alone and committed before round 19's ranker; measured
/// once before and once after it (testing/search-eval/README.md, round 19).
/// Before (round 18's ranker): by words 227 of 240 first (94.6 %) and 238
/// in the top three (99.2 %); with meaning 230 (95.8 %) and 238, asked for
/// 30. After: by words 228 (95.0 %) and 238; with meaning 231 (96.2 %) and
/// 238 (99.2 %), asked for 29; no empty answer. Read after that
/// measurement, it tunes since round 20.
const HELD_OUT_19: &str = "heldout-43-round19.json";
const ROUND_19_WORDS_FLOORS: (f64, f64) = (95.0, 99.1);
const ROUND_19_MEANING_FLOORS: (f64, f64) = (96.2, 99.1);

#[test]
fn on_round_19s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_19, ROUND_19_WORDS_FLOORS, ROUND_19_MEANING_FLOORS);
}

/// Round 20's held-out questions (`heldout-43-round20.json`, 240: 200 over
/// the 42 tools, 40 over the 300-tool catalog), written by a helper from
/// the tool lists alone and committed before round 20's ranker; measured
/// once before and once after it (testing/search-eval/README.md, round 20).
/// Before (round 19's ranker, on questions it never saw): 230 of 240 first
/// (95.8 %) and 238 in the top three (99.2 %), by words and with meaning
/// alike, asked for 24. After: 231 (96.2 %) and 238 (99.2 %) both ways; no
/// empty answer.
const HELD_OUT_20: &str = "heldout-43-round20.json";
const ROUND_20_WORDS_FLOORS: (f64, f64) = (96.2, 99.1);
const ROUND_20_MEANING_FLOORS: (f64, f64) = (96.2, 99.1);

#[test]
fn on_round_20s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_20, ROUND_20_WORDS_FLOORS, ROUND_20_MEANING_FLOORS);
}

/// Round 21's held-out questions (`heldout-43-round21.json`, 240: 200 over
/// the 42 tools, 40 over the 300-tool catalog), written by a helper from
/// the tool lists alone after round 20's ranker was committed, and
/// measured once on it with nothing changed afterwards: a confirmation,
/// not a round (testing/search-eval/README.md). By words 229 of 240 first
/// (95.4 %) and 237 in the top three (98.8 %); with meaning 230 (95.8 %)
/// and 237 (98.8 %), asked for 30; no empty answer. Read after that
/// measurement, it tunes since round 22.
const HELD_OUT_21: &str = "heldout-43-round21.json";
const ROUND_21_WORDS_FLOORS: (f64, f64) = (95.4, 98.7);
const ROUND_21_MEANING_FLOORS: (f64, f64) = (95.8, 98.7);

#[test]
fn on_round_21s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_21, ROUND_21_WORDS_FLOORS, ROUND_21_MEANING_FLOORS);
}

/// Ranks a held-out file by words alone and with the encoder, prints both
/// by catalog, fails on an empty answer either way or below the floors
/// (first, top three; percent).
fn measure_held_out_once(file: &str, words_floors: Floors, meaning_floors: Floors) {
    let Some(python) = python() else { return };
    let Some(encoder) = encoder() else { return };
    rank_and_hold(&python, &encoder, file, words_floors, meaning_floors);
}

/// What [`measure_held_out_once`] does, with the ranker and encoder given;
/// the ranks by words and with meaning, for a caller that pools sets.
fn rank_and_hold(
    python: &str,
    encoder: &Encoder,
    file: &str,
    words_floors: Floors,
    meaning_floors: Floors,
) -> (Ranked, Ranked) {
    let held = questions(file);
    assert!(held.len() >= 240 && held.iter().all(|q| q.set == "heldout"), "{} questions", held.len());
    let words = ranks(python, &held);
    let meaning = ranks_with(python, &held, Some(encoder));
    let on = |rs: &[(usize, Vec<String>)], catalog: usize| -> Vec<(usize, Vec<String>)> {
        held.iter()
            .zip(rs)
            .filter(|(q, _)| (q.catalog == REAL_TOOLS) == (catalog == REAL_TOOLS))
            .map(|(_, r)| r.clone())
            .collect()
    };
    for (label, rs) in [("words alone", &words), ("with meaning", &meaning)] {
        print_row(&format!("{file}, 42, {label}"), recall(&on(rs, REAL_TOOLS)));
        print_row(&format!("{file}, 300, {label}"), recall(&on(rs, 300)));
        print_row(&format!("{file}, all, {label}"), recall(rs));
    }
    if std::env::var_os("SHOW_HELD_OUT_MISSES").is_some() {
        // Only for the docs, after the measurement: never to tune on.
        print_misses(&format!("{file}, with meaning"), &held, &meaning);
    }
    for (label, rs) in [("words alone", &words), ("with meaning", &meaning)] {
        let empty: Vec<&str> =
            held.iter().zip(rs).filter(|(_, (_, names))| names.is_empty()).map(|(q, _)| q.query.as_str()).collect();
        assert!(empty.is_empty(), "{file}: questions with no tool, {label}: {empty:?}");
    }
    for ((n, first, top3), (first_floor, top3_floor), label) in
        [(recall(&words), words_floors, "words alone"), (recall(&meaning), meaning_floors, "with meaning")]
    {
        assert!(percent(first, n) >= first_floor, "{file}, {label}: the wanted tool is first for only {first} of {n}");
        assert!(percent(top3, n) >= top3_floor, "{file}, {label}: in the top three for only {top3} of {n}");
    }
    (words, meaning)
}

/// Floors, in percent: the wanted tool first, and in the top three.
type Floors = (f64, f64);

/// One file's ranks: for each question, where the wanted tool came and the
/// names answered.
type Ranked = Vec<(usize, Vec<String>)>;

/// Round 22's held-out questions (`heldout-43-round22.json`, 240: 200 over
/// the 42 tools, 40 over the 300-tool catalog), written by a helper from
/// the tool lists alone and committed before round 22's ranker; measured
/// once before (round 20's ranker, which round 21 only measured) and once
/// after (testing/search-eval/README.md, round 22). Before: by words 225
/// of 240 first (93.8 %) and 237 in the top three (98.8 %); with meaning
/// 230 (95.8 %) and 237 (98.8 %), asked for 39. After: by words 226
/// (94.2 %) and 237; with meaning 231 (96.2 %) and 237 (98.8 %), asked for
/// 37; no empty answer. Read after that measurement, it tunes since round
/// 23.
const HELD_OUT_22: &str = "heldout-43-round22.json";
const ROUND_22_WORDS_FLOORS: (f64, f64) = (94.1, 98.7);
const ROUND_22_MEANING_FLOORS: (f64, f64) = (96.2, 98.7);

#[test]
fn on_round_22s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_22, ROUND_22_WORDS_FLOORS, ROUND_22_MEANING_FLOORS);
}

/// Round 23's held-out questions (`heldout-43-round23.json`, 240: 200 over
/// the 42 tools, 40 over the 300-tool catalog), written by a helper from
/// the tool lists alone and committed before round 23's ranker; measured
/// once before and once after (testing/search-eval/README.md, round 23).
/// Before (round 22's ranker) and after alike: by words 224 of 240 first
/// (93.3 %) and 236 in the top three (98.3 %); with meaning 228 (95.0 %)
/// and 236 (98.3 %), asked for 29; no empty answer.
const HELD_OUT_23: &str = "heldout-43-round23.json";
const ROUND_23_WORDS_FLOORS: (f64, f64) = (93.3, 98.3);
const ROUND_23_MEANING_FLOORS: (f64, f64) = (95.0, 98.3);

#[test]
fn on_round_23s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_23, ROUND_23_WORDS_FLOORS, ROUND_23_MEANING_FLOORS);
}

/// Round 24's held-out questions (`heldout-43-round24.json`, 240: 200 over
/// the 42 tools, 40 over the 300-tool catalog), written by a helper from
/// the tool lists alone and committed before round 24's ranker; measured
/// once before and once after (testing/search-eval/README.md, round 24).
/// Before (round 23's ranker): by words 226 of 240 first (94.2 %) and 233
/// in the top three (97.1 %); with meaning 226 (94.2 %) and 234 (97.5 %).
/// After: by words 229 (95.4 %) and 235 (97.9 %); with meaning 229
/// (95.4 %) and 236 (98.3 %), asked for 28; no empty answer. Read after
/// that measurement, it tunes since round 25.
const HELD_OUT_24: &str = "heldout-43-round24.json";
const ROUND_24_WORDS_FLOORS: (f64, f64) = (95.4, 97.9);
const ROUND_24_MEANING_FLOORS: (f64, f64) = (95.4, 98.3);

#[test]
fn on_round_24s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_24, ROUND_24_WORDS_FLOORS, ROUND_24_MEANING_FLOORS);
}

/// Round 25's held-out questions (`heldout-43-round25.json`, 240: 200 over
/// the 42 tools, 40 over the 300-tool catalog), written by a helper from
/// the tool lists alone and committed before round 25's ranker; measured
/// once before and once after (testing/search-eval/README.md, round 25).
/// Before (round 24's ranker): by words and with meaning alike 225 of 240
/// first (93.8 %) and 238 in the top three (99.2 %). After: 227 (94.6 %)
/// and 238 (99.2 %) both ways, meaning asked for 27; no empty answer.
/// Read after that measurement, it tunes since round 26.
const HELD_OUT_25: &str = "heldout-43-round25.json";
const ROUND_25_WORDS_FLOORS: (f64, f64) = (94.5, 99.1);
const ROUND_25_MEANING_FLOORS: (f64, f64) = (94.5, 99.1);

#[test]
fn on_round_25s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_25, ROUND_25_WORDS_FLOORS, ROUND_25_MEANING_FLOORS);
}

/// Round 26's held-out questions (`heldout-43-round26.json`, 240: 200 over
/// the 42 tools, 40 over the 300-tool catalog), written by a helper from
/// the tool lists alone and committed before round 26's ranker; measured
/// once before and once after (testing/search-eval/README.md, round 26).
/// Before (round 25's ranker) and after alike: by words 224 of 240 first
/// (93.3 %) and 234 in the top three (97.5 %); with meaning 225 (93.8 %)
/// and 234 (97.5 %), asked for 23; no empty answer.
const HELD_OUT_26: &str = "heldout-43-round26.json";
const ROUND_26_WORDS_FLOORS: (f64, f64) = (93.3, 97.5);
const ROUND_26_MEANING_FLOORS: (f64, f64) = (93.7, 97.5);

#[test]
fn on_round_26s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_26, ROUND_26_WORDS_FLOORS, ROUND_26_MEANING_FLOORS);
}

/// Round 27's held-out questions (`heldout-43-round27.json`, 240: 200 over
/// the 42 tools, 40 over the 300-tool catalog), written by a helper from
/// the tool lists alone after round 26's ranker was committed; measured
/// once on it as a confirmation, nothing changed after
/// (testing/search-eval/README.md, round 27). With meaning 234 of 240
/// first (97.5 %) and 237 in the top three (98.8 %), asked for 26; by
/// words 232 (96.7 %) and 237 (98.8 %); no empty answer. (Round 23's
/// ranker, this session's start, on the same set: 229 (95.4 %) and 234
/// (97.5 %) with meaning.) Read after that measurement, it tunes since
/// round 28.
const HELD_OUT_27: &str = "heldout-43-round27.json";
const ROUND_27_WORDS_FLOORS: (f64, f64) = (96.6, 98.7);
const ROUND_27_MEANING_FLOORS: (f64, f64) = (97.5, 98.7);

#[test]
fn on_round_27s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_27, ROUND_27_WORDS_FLOORS, ROUND_27_MEANING_FLOORS);
}

/// Round 28's held-out questions (`heldout-43-round28.json`, 240: 200 over
/// the 42 tools, 40 over the 300-tool catalog), written by a helper from
/// the tool lists alone and committed before round 28's ranker; measured
/// once before and once after (testing/search-eval/README.md, round 28).
/// Before (round 26's ranker): by words 231 of 240 first (96.2 %) and 236
/// in the top three (98.3 %); with meaning 233 (97.1 %) and 236 (98.3 %),
/// asked for 27. After: by words 234 (97.5 %) and 238 (99.2 %); with
/// meaning 235 (97.9 %) and 238 (99.2 %), asked for 24; no empty answer.
const HELD_OUT_28: &str = "heldout-43-round28.json";
const ROUND_28_WORDS_FLOORS: (f64, f64) = (97.5, 99.1);
const ROUND_28_MEANING_FLOORS: (f64, f64) = (97.9, 99.1);

#[test]
fn on_round_28s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_28, ROUND_28_WORDS_FLOORS, ROUND_28_MEANING_FLOORS);
}

/// Round 29's held-out questions (`heldout-43-round29.json`, 240: 200 over
/// the 42 tools, 40 over the 300-tool catalog), written by a helper from
/// the tool lists alone after round 28's ranker was committed; measured
/// once on it as a confirmation, nothing changed after
/// (testing/search-eval/README.md, round 29). With meaning 222 of 240
/// first (92.5 %) and 231 in the top three (96.2 %), asked for 27; by
/// words 223 (92.9 %) and 231, and two questions got no tool by words (one
/// in Japanese, one in Spanish). (Round 23's ranker on the same set: 216
/// (90.0 %) and 226 (94.2 %) with meaning.) Read after that measurement,
/// it tunes since round 30: 232 (96.7 %) and 237 (98.8 %) both ways after
/// round 30, no empty answer.
const HELD_OUT_29: &str = "heldout-43-round29.json";
const ROUND_29_WORDS_FLOORS: (f64, f64) = (92.9, 96.2);
const ROUND_29_MEANING_FLOORS: (f64, f64) = (92.5, 96.2);

#[test]
fn on_round_29s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_29, ROUND_29_WORDS_FLOORS, ROUND_29_MEANING_FLOORS);
}

/// Round 30's held-out questions (`heldout-43-round30.json`, 240: 200 over
/// the 42 tools, 40 over the 300-tool catalog), written by a helper from
/// the tool lists alone and committed before round 30's ranker; measured
/// once before and once after (testing/search-eval/README.md, round 30).
/// Before (round 28's ranker) and after alike: by words 226 of 240 first
/// (94.2 %) and 238 in the top three (99.2 %); with meaning 228 (95.0 %)
/// and 238 (99.2 %), asked for 31; no empty answer.
const HELD_OUT_30: &str = "heldout-43-round30.json";
const ROUND_30_WORDS_FLOORS: (f64, f64) = (94.1, 99.1);
const ROUND_30_MEANING_FLOORS: (f64, f64) = (95.0, 99.1);

#[test]
fn on_round_30s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_30, ROUND_30_WORDS_FLOORS, ROUND_30_MEANING_FLOORS);
}

/// Round 31's held-out questions (`heldout-43-round31.json`, 240: 200 over
/// the 42 tools, 40 over the 300-tool catalog), written by a helper from
/// the tool lists alone after round 30's ranker was committed; measured
/// once on it as a confirmation, nothing changed after
/// (testing/search-eval/README.md, round 31). With meaning 230 of 240
/// first (95.8 %) and 237 in the top three (98.8 %), asked for 29; by
/// words 228 (95.0 %) and 237 (98.8 %); no empty answer. (Round 23's
/// ranker on the same set: 226 (94.2 %) and 234 (97.5 %) with meaning.)
/// Read after that measurement, it tunes since round 32.
const HELD_OUT_31: &str = "heldout-43-round31.json";
const ROUND_31_WORDS_FLOORS: (f64, f64) = (95.0, 98.7);
const ROUND_31_MEANING_FLOORS: (f64, f64) = (95.8, 98.7);

#[test]
fn on_round_31s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_31, ROUND_31_WORDS_FLOORS, ROUND_31_MEANING_FLOORS);
}

/// Round 32's held-out questions (`heldout-43-round32.json`, 240: 200 over
/// the 42 tools, 40 over the 300-tool catalog), written by a helper from
/// the tool lists alone and committed before round 32's ranker; measured
/// once before and once after (testing/search-eval/README.md, round 32).
/// Before (round 30's ranker) and after alike: by words 230 of 240 first
/// (95.8 %) and 236 in the top three (98.3 %); with meaning 231 (96.2 %)
/// and 236 (98.3 %), asked for 26; no empty answer.
const HELD_OUT_32: &str = "heldout-43-round32.json";
const ROUND_32_WORDS_FLOORS: (f64, f64) = (95.8, 98.3);
const ROUND_32_MEANING_FLOORS: (f64, f64) = (96.2, 98.3);

#[test]
fn on_round_32s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_32, ROUND_32_WORDS_FLOORS, ROUND_32_MEANING_FLOORS);
}

/// Round 33's held-out questions (`heldout-43-round33.json`, 240: 200 over
/// the 42 tools, 40 over the 300-tool catalog), written by a helper from
/// the tool lists alone after round 32's ranker was committed; measured
/// once on it as a confirmation, nothing changed after
/// (testing/search-eval/README.md, round 33). With meaning 232 of 240
/// first (96.7 %) and 238 in the top three (99.2 %), asked for 22; by
/// words 230 (95.8 %) and 238 (99.2 %); no empty answer. (Round 23's
/// ranker on the same set: 228 (95.0 %) and 236 (98.3 %) with meaning.)
const HELD_OUT_33: &str = "heldout-43-round33.json";
const ROUND_33_WORDS_FLOORS: (f64, f64) = (95.8, 99.1);
const ROUND_33_MEANING_FLOORS: (f64, f64) = (96.6, 99.1);

#[test]
fn on_round_33s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_33, ROUND_33_WORDS_FLOORS, ROUND_33_MEANING_FLOORS);
}

/// Round 34's held-out questions (`heldout-43-round34.json`, 240: 200 over
/// the 42 tools, 40 over the 300-tool catalog), written by a helper from
/// the tool lists alone and committed before round 34's ranker; measured
/// once before (round 32's ranker) and once after
/// (testing/search-eval/README.md, round 34). Before: with meaning 228 of
/// 240 first (95.0 %) and 237 in the top three (98.8 %), asked for 18; by
/// words 228 (95.0 %) and 236 (98.3 %), and two questions got no tool by
/// words (Japanese, Chinese). After: with meaning 229 (95.4 %) and 237 (98.8
/// %), asked for 19; by words 229 and 236, the same two empty. Read after
/// that measurement, it tunes since round 36: 236 (98.3 %) and 240 both
/// ways, no empty answer.
const HELD_OUT_34: &str = "heldout-43-round34.json";
const ROUND_34_WORDS_FLOORS: (f64, f64) = (98.3, 99.9);
const ROUND_34_MEANING_FLOORS: (f64, f64) = (98.3, 99.9);

#[test]
fn on_round_34s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_34, ROUND_34_WORDS_FLOORS, ROUND_34_MEANING_FLOORS);
}

/// Round 35's held-out questions (`heldout-43-round35.json`, 240: 200 over
/// the 42 tools, 40 over the 300-tool catalog), written by a helper from
/// the tool lists alone while round 34's ranker was made and measured once
/// on it as a confirmation, nothing changed after
/// (testing/search-eval/README.md, round 35). With meaning 220 of 240
/// first (91.7 %) and 232 in the top three (96.7 %), asked for 28; by
/// words 220 and 232, one question without a tool by words (Hindi).
/// (Round 32's ranker on the same set: 220 and 231 with meaning.) Read
/// after that measurement, it tunes since round 36: with meaning 233 (97.1
/// %) and 239 (99.6 %), by words 232 and 239, no empty answer.
const HELD_OUT_35: &str = "heldout-43-round35.json";
const ROUND_35_WORDS_FLOORS: (f64, f64) = (96.6, 99.5);
const ROUND_35_MEANING_FLOORS: (f64, f64) = (97.0, 99.5);

#[test]
fn on_round_35s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_35, ROUND_35_WORDS_FLOORS, ROUND_35_MEANING_FLOORS);
}

/// Round 36's held-out questions (`heldout-43-round36.json`, 240: 200 over
/// the 42 tools, 40 over the 300-tool catalog), written by a helper from
/// the tool list alone and committed before round 36's ranker; measured
/// once before (round 34's ranker) and once after
/// (testing/search-eval/README.md, round 36). Before: with meaning 226 of
/// 240 first (94.2 %) and 236 in the top three (98.3 %), asked for 23; by
/// words 223 (92.9 %) and 235 (97.9 %), and two questions got no tool by
/// words (Japanese, Chinese). After: with meaning 225 (93.8 %) and 236 (98.3 %), asked for 21;
/// by words 223 (92.9 %) and 236 (98.3 %); no empty answer.
const HELD_OUT_36: &str = "heldout-43-round36.json";
const ROUND_36_WORDS_FLOORS: (f64, f64) = (92.9, 98.3);
const ROUND_36_MEANING_FLOORS: (f64, f64) = (93.7, 98.3);

#[test]
fn on_round_36s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_36, ROUND_36_WORDS_FLOORS, ROUND_36_MEANING_FLOORS);
}

/// Round 37's held-out questions (`heldout-43-round37.json`, 240: 200 over
/// the 42 tools, 40 over the 300-tool catalog), written by a helper from
/// the tool list alone and committed before round 37's ranker; measured
/// once before (round 36's ranker) and once after
/// (testing/search-eval/README.md, round 37). Before and after alike: with
/// meaning 234 of 240 first (97.5 %) and 240 in the top three (100 %),
/// asked for 24; by words 231 (96.2 %) and 239 (99.6 %); no empty answer.
/// (Round 32's ranker, this work's start: 232 and 238 with meaning, two
/// questions without a tool by words.)
const HELD_OUT_37: &str = "heldout-43-round37.json";
const ROUND_37_WORDS_FLOORS: (f64, f64) = (96.2, 99.5);
const ROUND_37_MEANING_FLOORS: (f64, f64) = (97.5, 99.9);

#[test]
fn on_round_37s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_37, ROUND_37_WORDS_FLOORS, ROUND_37_MEANING_FLOORS);
}

/// Round 38's held-out questions (`heldout-43-round38.json`, 240: 200 over
/// the 42 tools, 40 over the 300-tool catalog), written by a helper from
/// the tool list alone while round 37's ranker was made and measured once
/// on it as a confirmation, nothing changed after
/// (testing/search-eval/README.md, round 38). With meaning 231 of 240
/// first (96.2 %) and 239 in the top three (99.6 %), asked for 19; by
/// words 230 (95.8 %) and 239; no empty answer. (Round 32's ranker, this
/// work's start: 228 (95.0 %) and 237 (98.8 %) with meaning, and two
/// questions without a tool by words, Japanese and Chinese.)
const HELD_OUT_38: &str = "heldout-43-round38.json";
const ROUND_38_WORDS_FLOORS: (f64, f64) = (95.8, 99.5);
const ROUND_38_MEANING_FLOORS: (f64, f64) = (96.2, 99.5);

#[test]
fn on_round_38s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_38, ROUND_38_WORDS_FLOORS, ROUND_38_MEANING_FLOORS);
}

/// Round 39's held-out questions (`heldout-43-round39.json`, 240: 200 over
/// the 42 tools, 40 over the 300-tool catalog), written by a helper from
/// the tool list alone and committed before round 39's ranker; measured
/// once before (round 37's ranker) and once after
/// (testing/search-eval/README.md, round 39). The same both times: with
/// meaning 229 of 240 first (95.4 %) and 235 in the top three (97.9 %),
/// asked for 22; by words 225 (93.8 %) and 235, one question without a
/// tool by words (Japanese). Read after that measurement, it tunes since
/// round 41: 238 (99.2 %) and 240 with meaning, 234 and 240 by words, no
/// empty answer.
const HELD_OUT_39: &str = "heldout-43-round39.json";
const ROUND_39_WORDS_FLOORS: (f64, f64) = (97.5, 99.9);
const ROUND_39_MEANING_FLOORS: (f64, f64) = (99.1, 99.9);

#[test]
fn on_round_39s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_39, ROUND_39_WORDS_FLOORS, ROUND_39_MEANING_FLOORS);
}

/// Round 40's held-out questions (`heldout-43-round40.json`, 240: 200 over
/// the 42 tools, 40 over the 300-tool catalog), written by a helper from
/// the tool list alone while round 39's ranker was made and measured once
/// on it as a confirmation, nothing changed after
/// (testing/search-eval/README.md, round 40). With meaning 228 of 240
/// first (95.0 %) and 239 in the top three (99.6 %), asked for 20; by
/// words 224 (93.3 %) and 239; no empty answer. (Round 32's ranker, this
/// work's start: 224 (93.3 %) and 237 (98.8 %) with meaning, two questions
/// without a tool by words.) Read after that measurement, it tunes since
/// round 41: 233 (97.1 %) and 239 with meaning, 229 and 239 by words.
const HELD_OUT_40: &str = "heldout-43-round40.json";
const ROUND_40_WORDS_FLOORS: (f64, f64) = (95.4, 99.5);
const ROUND_40_MEANING_FLOORS: (f64, f64) = (97.0, 99.5);

#[test]
fn on_round_40s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_40, ROUND_40_WORDS_FLOORS, ROUND_40_MEANING_FLOORS);
}

/// Round 41's held-out questions (`heldout-43-round41.json`, 240: 200 over
/// the 42 tools, 40 over the 300-tool catalog), written by a helper from
/// the tool list alone and committed before round 41's ranker; measured
/// once before (round 39's ranker) and once after
/// (testing/search-eval/README.md, round 41). The same both times: with
/// meaning 230 of 240 first (95.8 %) and 237 in the top three (98.8 %),
/// asked for 27; by words 231 (96.2 %) and 238 (99.2 %); no empty answer.
/// (Round 32's ranker, this work's start: 225 (93.8 %) and 234 (97.5 %)
/// with meaning, three questions without a tool by words.)
const HELD_OUT_41: &str = "heldout-43-round41.json";
const ROUND_41_WORDS_FLOORS: (f64, f64) = (96.2, 99.1);
const ROUND_41_MEANING_FLOORS: (f64, f64) = (95.8, 98.7);

#[test]
fn on_round_41s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_41, ROUND_41_WORDS_FLOORS, ROUND_41_MEANING_FLOORS);
}

/// Round 42's held-out questions (`heldout-43-round42.json`, 240: 200 over
/// the 42 tools, 40 over the 300-tool catalog), written by a helper from
/// the tool list alone while round 41's ranker was made and measured once
/// on it as a confirmation, nothing changed after
/// (testing/search-eval/README.md, round 42). With meaning 230 of 240
/// first (95.8 %) and 237 in the top three (98.8 %), asked for 26; by
/// words 229 (95.4 %) and 237; no empty answer. (Round 32's ranker, this
/// work's start: 228 (95.0 %) and 236 (98.3 %) with meaning, one question
/// without a tool by words.)
const HELD_OUT_42: &str = "heldout-43-round42.json";
const ROUND_42_WORDS_FLOORS: (f64, f64) = (95.4, 98.7);
const ROUND_42_MEANING_FLOORS: (f64, f64) = (95.8, 98.7);

#[test]
fn on_round_42s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_42, ROUND_42_WORDS_FLOORS, ROUND_42_MEANING_FLOORS);
}

/// Round 43's held-out questions (`heldout-43-round43.json`, 240: 200 over
/// the 42 tools, 40 over the 300-tool catalog), written by a helper from
/// the tool list alone and committed before round 43's ranker; measured
/// once before (round 41's ranker) and once after
/// (testing/search-eval/README.md, round 43). The same both times: with
/// meaning 225 of 240 first (93.8 %) and 235 in the top three (97.9 %),
/// asked for 26; by words 223 (92.9 %) and 234 (97.5 %); no empty answer.
/// (Round 32's ranker, this work's start: 224 and 234 with meaning, two
/// questions without a tool by words.)
const HELD_OUT_43: &str = "heldout-43-round43.json";
const ROUND_43_WORDS_FLOORS: (f64, f64) = (92.9, 97.5);
const ROUND_43_MEANING_FLOORS: (f64, f64) = (93.7, 97.9);

#[test]
fn on_round_43s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_43, ROUND_43_WORDS_FLOORS, ROUND_43_MEANING_FLOORS);
}

/// Round 44's held-out questions (`heldout-43-round44.json`, 240: 200 over
/// the 42 tools, 40 over the 300-tool catalog), written by a helper from
/// the tool list alone while round 43's ranker was made and measured once
/// on it as a confirmation, nothing changed after
/// (testing/search-eval/README.md, round 44). With meaning 232 of 240
/// first (96.7 %) and 239 in the top three (99.6 %), asked for 17; by
/// words 231 (96.2 %) and 238 (99.2 %); no empty answer. (Round 32's
/// ranker, this work's start: 229 (95.4 %) and 237 (98.8 %) with meaning,
/// two questions without a tool by words.)
const HELD_OUT_44: &str = "heldout-43-round44.json";
const ROUND_44_WORDS_FLOORS: (f64, f64) = (96.2, 99.1);
const ROUND_44_MEANING_FLOORS: (f64, f64) = (96.6, 99.5);

#[test]
fn on_round_44s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_44, ROUND_44_WORDS_FLOORS, ROUND_44_MEANING_FLOORS);
}

/// Round 45's held-out questions (`heldout-43-round45.json`, 240: 200 over
/// the 42 tools, 40 over the 300-tool catalog), written by a helper from
/// the tool list alone and measured once on round 43's ranker, a second
/// confirmation after round 44's, nothing changed after
/// (testing/search-eval/README.md, round 45). With meaning 232 of 240
/// first (96.7 %) and 236 in the top three (98.3 %), asked for 26; by
/// words 231 (96.2 %) and 236; no empty answer. (Round 32's ranker, this
/// work's start: 227 (94.6 %) and 233 (97.1 %) with meaning, one question
/// without a tool by words.)
const HELD_OUT_45: &str = "heldout-43-round45.json";
const ROUND_45_WORDS_FLOORS: (f64, f64) = (96.2, 98.3);
const ROUND_45_MEANING_FLOORS: (f64, f64) = (96.6, 98.3);

#[test]
fn on_round_45s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_45, ROUND_45_WORDS_FLOORS, ROUND_45_MEANING_FLOORS);
}

/// Round 46's held-out questions (`heldout-43-round46.json`, 240: 200 over
/// the 42 tools, 40 over the 300-tool catalog), written by a helper from
/// the tool list alone and committed before round 46's ranker; measured
/// once before (round 43's ranker) and once after
/// (testing/search-eval/README.md, round 46). Before: with meaning 232 of
/// 240 first (96.7 %) and 238 in the top three (99.2 %), asked for 15; by
/// words 232 and 238, one question without a tool by words (Swedish).
/// After: with meaning 233 (97.1 %) and 238 (99.2 %), asked for 15; by
/// words 233 and 238, the same one empty. Read after that measurement, it
/// tunes since round 47: 238 (99.2 %) and 239 both ways, no empty answer.
const HELD_OUT_46: &str = "heldout-43-round46.json";
const ROUND_46_WORDS_FLOORS: (f64, f64) = (99.1, 99.5);
const ROUND_46_MEANING_FLOORS: (f64, f64) = (99.1, 99.5);

#[test]
fn on_round_46s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_46, ROUND_46_WORDS_FLOORS, ROUND_46_MEANING_FLOORS);
}

/// Round 47's held-out questions (`heldout-43-round47.json`, 240: 200 over
/// the 42 tools, 40 over the 300-tool catalog), written by a helper from
/// the tool list alone and measured once on round 47's ranker, the last
/// of this work, nothing changed after (testing/search-eval/README.md,
/// round 47). With meaning 230 of 240 first (95.8 %) and 239 in the top
/// three (99.6 %), asked for 18; by words 227 (94.6 %) and 239; no empty
/// answer. (Round 32's ranker, this work's start: 226 (94.2 %) and 235
/// (97.9 %) with meaning, four questions without a tool by words.)
const HELD_OUT_47: &str = "heldout-43-round47.json";
const ROUND_47_WORDS_FLOORS: (f64, f64) = (94.5, 99.5);
const ROUND_47_MEANING_FLOORS: (f64, f64) = (95.8, 99.5);

#[test]
fn on_round_47s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_47, ROUND_47_WORDS_FLOORS, ROUND_47_MEANING_FLOORS);
}

/// Round 48's held-out questions (`heldout-43-round48.json`, 240: 200 over
/// the 42 tools, 40 over the 300-tool catalog), written by a helper from
/// the tool list alone and committed before round 48's ranker; measured
/// once before (round 47's ranker) and once after
/// (testing/search-eval/README.md, round 48). The same both times: with
/// meaning 233 of 240 first (97.1 %) and 236 in the top three (98.3 %),
/// asked for 20; by words 231 (96.2 %) and 236; no empty answer. (Round
/// 32's ranker, this work's start: 227 (94.6 %) and 232 (96.7 %) with
/// meaning, two questions without a tool by words.)
const HELD_OUT_48: &str = "heldout-43-round48.json";
const ROUND_48_WORDS_FLOORS: (f64, f64) = (96.2, 98.3);
const ROUND_48_MEANING_FLOORS: (f64, f64) = (97.0, 98.3);

#[test]
fn on_round_48s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_48, ROUND_48_WORDS_FLOORS, ROUND_48_MEANING_FLOORS);
}

/// Round 49's held-out questions (`heldout-43-round49.json`, 240: 200 over
/// the 42 tools, 40 over the 300-tool catalog; about 25 in other
/// languages, twice the other sets'), written by a helper from the tool
/// list alone and measured once on round 48's ranker, the last of this
/// work, nothing changed after (testing/search-eval/README.md, round 49).
/// With meaning 234 of 240 first (97.5 %) and 236 in the top three (98.3
/// %), asked for 22; by words 232 (96.7 %) and 236; no empty answer.
/// (Round 32's ranker: 228 (95.0 %) and 233 (97.1 %) with meaning, one
/// question without a tool by words.)
const HELD_OUT_49: &str = "heldout-43-round49.json";
const ROUND_49_WORDS_FLOORS: (f64, f64) = (96.6, 98.3);
const ROUND_49_MEANING_FLOORS: (f64, f64) = (97.5, 98.3);

#[test]
fn on_round_49s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_49, ROUND_49_WORDS_FLOORS, ROUND_49_MEANING_FLOORS);
}

/// Round 50's held-out questions (`heldout-43-round50.json`, 240: 200 over
/// the 42 tools, 40 over the 300-tool catalog; 23 in other languages),
/// written by a helper from the tool list alone and measured first on
/// round 48's ranker (the last before it), which never saw them (testing/search-eval/README.md,
/// round 50): with meaning 238 of 240 first (99.2 %) and 239 in the top
/// three (99.6 %), asked for 16; by words 236 (98.3 %) and 239; no empty
/// answer. The same on round 50's first readings of rounds 43 to 49's
/// misses (written before this set was read). Read after that measurement, it tunes since
/// round 50: 240 and 240 with meaning, 238 and 240 by words. (Round 32's
/// ranker: 232 (96.7 %) and 234 (97.5 %) with meaning, five questions
/// without a tool by words.)
const HELD_OUT_50: &str = "heldout-43-round50.json";
const ROUND_50_WORDS_FLOORS: (f64, f64) = (99.1, 99.9);
const ROUND_50_MEANING_FLOORS: (f64, f64) = (99.9, 99.9);

#[test]
fn on_round_50s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_50, ROUND_50_WORDS_FLOORS, ROUND_50_MEANING_FLOORS);
}

/// Round 51's held-out questions (`heldout-43-round51.json`, 240: 200 over
/// the 42 tools, 40 over the 300-tool catalog; about 22 in other
/// languages), written by a second helper beside round 50's and measured
/// first on round 48's ranker (testing/search-eval/README.md, round 50):
/// with meaning 234 of 240 first (97.5 %) and 236 in the top three (98.3
/// %), asked for 16; by words 233 (97.1 %) and 236, one question without
/// a tool by words (Japanese). Read after that measurement, it tunes since
/// round 50: 239 and 240 with meaning, 238 and 240 by words, no empty
/// answer. (Round 32's ranker: 228 (95.0 %) and 231 (96.2 %) with
/// meaning, five questions without a tool by words.)
const HELD_OUT_51: &str = "heldout-43-round51.json";
const ROUND_51_WORDS_FLOORS: (f64, f64) = (99.1, 99.9);
const ROUND_51_MEANING_FLOORS: (f64, f64) = (99.5, 99.9);

#[test]
fn on_round_51s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_51, ROUND_51_WORDS_FLOORS, ROUND_51_MEANING_FLOORS);
}

/// Round 52's held-out questions (`heldout-43-round52.json`, 240: 200 over
/// the 42 tools, 40 over the 300-tool catalog; 22 in other languages),
/// written by a helper from the tool list alone and measured first on
/// round 50's ranker, which never saw them (testing/search-eval/README.md,
/// round 51): with meaning 235 of 240 first (97.9 %) and 238 in the top
/// three (99.2 %), asked for 18; by words 235 and 238, two questions
/// without a tool by words (Russian, Korean). Read after that
/// measurement, it tunes since round 51: 239 and 240 both ways, no empty
/// answer. (Round 48's ranker: 234 / 237 with meaning, three empty by
/// words; round 32's: 229 (95.4 %) / 235 (97.9 %), six empty by words.)
const HELD_OUT_52: &str = "heldout-43-round52.json";
const ROUND_52_WORDS_FLOORS: (f64, f64) = (99.5, 99.9);
const ROUND_52_MEANING_FLOORS: (f64, f64) = (99.5, 99.9);

#[test]
fn on_round_52s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_52, ROUND_52_WORDS_FLOORS, ROUND_52_MEANING_FLOORS);
}

/// Round 53's held-out questions (`heldout-43-round53.json`, 240: 200 over
/// the 42 tools, 40 over the 300-tool catalog; 21 in other languages),
/// written by a second helper beside round 52's and measured first on
/// round 50's ranker (testing/search-eval/README.md, round 51): with
/// meaning 239 of 240 first (99.6 %) and 240 in the top three (100 %),
/// asked for 18; by words 236 (98.3 %) and 240; no empty answer. Its one
/// miss was read; nothing changed for it, and round 51's ranker scores
/// the same. (Round 48's ranker: 237 / 239 with meaning; round 32's: 227
/// (94.6 %) / 233 (97.1 %), four empty by words.)
const HELD_OUT_53: &str = "heldout-43-round53.json";
const ROUND_53_WORDS_FLOORS: (f64, f64) = (98.3, 99.9);
const ROUND_53_MEANING_FLOORS: (f64, f64) = (99.5, 99.9);

#[test]
fn on_round_53s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_53, ROUND_53_WORDS_FLOORS, ROUND_53_MEANING_FLOORS);
}

/// Round 54's held-out questions (`heldout-43-round54.json`, 240: 200 over
/// the 42 tools, 40 over the 300-tool catalog; about 22 in other
/// languages), written by a helper from the tool list alone and measured
/// first on round 51's ranker, which never saw them
/// (testing/search-eval/README.md, round 52): with meaning 235 of 240
/// first (97.9 %) and 240 in the top three (100 %), asked for 18; by
/// words 236 (98.3 %) and 240; no empty answer. Read after that
/// measurement, it tunes since round 52: 237 and 240 both ways. (Round
/// 48's ranker: 234 / 239 with meaning, one empty by words; round 32's:
/// 227 (94.6 %) / 232 (96.7 %), five empty by words.)
const HELD_OUT_54: &str = "heldout-43-round54.json";
const ROUND_54_WORDS_FLOORS: (f64, f64) = (98.7, 99.9);
const ROUND_54_MEANING_FLOORS: (f64, f64) = (98.7, 99.9);

#[test]
fn on_round_54s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_54, ROUND_54_WORDS_FLOORS, ROUND_54_MEANING_FLOORS);
}

/// Round 55's held-out questions (`heldout-43-round55.json`, 240: 200 over
/// the 42 tools, 40 over the 300-tool catalog; 21 in other languages),
/// written by a second helper beside round 54's and measured first on
/// round 51's ranker (testing/search-eval/README.md, round 52): with
/// meaning 234 of 240 first (97.5 %) and 237 in the top three (98.8 %),
/// asked for 21; by words 231 (96.2 %) and 238; no empty answer. Read
/// after that measurement, it tunes since round 52: 238 and 240 with
/// meaning, 235 and 240 by words. (Round 48's ranker: 234 / 237 with
/// meaning; round 32's: 228 (95.0 %) / 232 (96.7 %), nine empty by words.)
const HELD_OUT_55: &str = "heldout-43-round55.json";
const ROUND_55_WORDS_FLOORS: (f64, f64) = (97.9, 99.9);
const ROUND_55_MEANING_FLOORS: (f64, f64) = (99.1, 99.9);

#[test]
fn on_round_55s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_55, ROUND_55_WORDS_FLOORS, ROUND_55_MEANING_FLOORS);
}

/// Round 56's held-out questions (`heldout-43-round56.json`, 240: 200 over
/// the 42 tools, 40 over the 300-tool catalog; about 21 in other
/// languages), written by a helper from the tool list alone and measured
/// first on round 52's ranker, which never saw them
/// (testing/search-eval/README.md, round 53): with meaning 229 of 240
/// first (95.4 %) and 238 in the top three (99.2 %), asked for 18; by
/// words 229 and 238, two questions without a tool by words (Japanese).
/// Only those two were read; round 53 gave them their words: 231 (96.2
/// %) and 240 both ways, no empty answer. (Round 48's ranker: 228 / 237,
/// three empty by words; round 32's: 226 (94.2 %) / 233 (97.1 %), six.)
const HELD_OUT_56: &str = "heldout-43-round56.json";
const ROUND_56_WORDS_FLOORS: (f64, f64) = (96.2, 99.9);
const ROUND_56_MEANING_FLOORS: (f64, f64) = (96.2, 99.9);

#[test]
fn on_round_56s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_56, ROUND_56_WORDS_FLOORS, ROUND_56_MEANING_FLOORS);
}

/// Round 57's held-out questions (`heldout-43-round57.json`, 240: 200 over
/// the 42 tools, 40 over the 300-tool catalog; about 28 in other
/// languages), written by a second helper beside round 56's and measured
/// once on round 52's ranker, never read (testing/search-eval/README.md,
/// round 53): with meaning 237 of 240 first (98.8 %) and 238 in the top
/// three (99.2 %), asked for 16; by words the same; no empty answer.
/// Round 53's words for round 56's two questions change nothing here.
/// (Round 48's ranker: 236 / 237, one empty by words; round 32's: 231
/// (96.2 %) / 232 (96.7 %), two empty by words.) Round 54's Dutch "een"
/// reads one more of its requests: 238 and 238 both ways.
const HELD_OUT_57: &str = "heldout-43-round57.json";
const ROUND_57_WORDS_FLOORS: (f64, f64) = (98.7, 99.1);
const ROUND_57_MEANING_FLOORS: (f64, f64) = (98.7, 99.1);

#[test]
fn on_round_57s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_57, ROUND_57_WORDS_FLOORS, ROUND_57_MEANING_FLOORS);
}

/// Round 58's held-out questions (`heldout-43-round58.json`, 240: 200 over
/// the 42 tools, 40 over the 300-tool catalog; about 27 in other
/// languages), written by a helper from the tool list alone and measured
/// once on round 53's ranker, never read (testing/search-eval/README.md,
/// round 54): with meaning 236 of 240 first (98.3 %) and 239 in the top
/// three (99.6 %), asked for 16; by words 235 (97.9 %) and 239; no empty
/// answer; round 54's two Dutch words change nothing here. (Round 48's
/// ranker: 233 / 236 with meaning; round 32's: 226 (94.2 %) / 231 (96.2
/// %), five empty by words.)
const HELD_OUT_58: &str = "heldout-43-round58.json";
const ROUND_58_WORDS_FLOORS: (f64, f64) = (97.9, 99.5);
const ROUND_58_MEANING_FLOORS: (f64, f64) = (98.3, 99.5);

#[test]
fn on_round_58s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_58, ROUND_58_WORDS_FLOORS, ROUND_58_MEANING_FLOORS);
}

/// Round 59's held-out questions (`heldout-43-round59.json`, 240: 200 over
/// the 42 tools, 40 over the 300-tool catalog; about 30 in other
/// languages), written by a second helper beside round 58's and measured
/// first on round 53's ranker (testing/search-eval/README.md, round 54):
/// with meaning 232 of 240 first (96.7 %) and 239 in the top three (99.6
/// %), asked for 21; by words 233 and 239, one question without a tool by
/// words (Dutch). Only that one was read; round 54 gave it its words: 233
/// and 240 with meaning, 234 and 240 by words, no empty answer. (Round
/// 48's ranker: 230 / 238, two empty by words; round 32's: 223 (92.9 %) /
/// 229 (95.4 %), eight.)
const HELD_OUT_59: &str = "heldout-43-round59.json";
const ROUND_59_WORDS_FLOORS: (f64, f64) = (97.4, 99.9);
const ROUND_59_MEANING_FLOORS: (f64, f64) = (97.0, 99.9);

#[test]
fn on_round_59s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_59, ROUND_59_WORDS_FLOORS, ROUND_59_MEANING_FLOORS);
}

/// Round 60's held-out questions (`heldout-43-round60.json`, 240: 200 over
/// the 42 tools, 40 over the 300-tool catalog; leaning to long requests
/// with context and close siblings, 22 in other languages), written by a
/// helper from the tool list alone and measured first on round 54's
/// ranker (testing/search-eval/README.md, round 55): with meaning 230 of
/// 240 first (95.8 %) and 236 in the top three (98.3 %), asked for 28; by
/// words 228 and 236, no empty answer. Read after that measurement; round
/// 55's ranker: 237 (98.8 %) and 240 with meaning, 235 and 240 by words.
/// (Round 48's ranker: 229 / 235; round 32's: 219 (91.2 %) / 231, five
/// empty by words.)
const HELD_OUT_60: &str = "heldout-43-round60.json";
const ROUND_60_WORDS_FLOORS: (f64, f64) = (97.5, 99.9);
const ROUND_60_MEANING_FLOORS: (f64, f64) = (98.3, 99.9);

#[test]
fn on_round_60s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_60, ROUND_60_WORDS_FLOORS, ROUND_60_MEANING_FLOORS);
}

/// Round 61's held-out questions (`heldout-43-round61.json`, 240: 200 over
/// the 42 tools, 40 over the 300-tool catalog; leaning to terse commands,
/// typos and about 40 requests in other languages), written by a second
/// helper beside round 60's and measured first on round 54's ranker
/// (testing/search-eval/README.md, round 55): with meaning 232 of 240
/// first (96.7 %) and 237 in the top three (98.8 %), asked for 20; by
/// words 232 and 236, one question without a tool by words (Polish). Read
/// after that measurement; round 55's ranker: 239 (99.6 %) and 240 with
/// meaning, 239 and 240 by words. (Round 48's ranker: 230 / 235, two
/// empty by words; round 32's: 218 (90.8 %) / 226 (94.2 %), eleven.)
const HELD_OUT_61: &str = "heldout-43-round61.json";
const ROUND_61_WORDS_FLOORS: (f64, f64) = (99.5, 99.9);
const ROUND_61_MEANING_FLOORS: (f64, f64) = (99.5, 99.9);

#[test]
fn on_round_61s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_61, ROUND_61_WORDS_FLOORS, ROUND_61_MEANING_FLOORS);
}

/// Round 62's held-out questions (`heldout-43-round62.json`, 240: 200 over
/// the 42 tools, 40 over the 300-tool catalog; leaning to needs stated as
/// goals and to the everything server's protocol demos as a developer
/// testing a client names them; 22 in other languages), written by a
/// helper from the tool list alone and measured first on round 55's
/// ranker (testing/search-eval/README.md, round 56): with meaning **218 of
/// 240 first (90.8 %)** and 234 in the top three (97.5 %), asked for 31;
/// by words 215 and 235, one question without a tool by words (Turkish).
/// Read after that measurement; round 56's ranker: 230 (95.8 %) and 240
/// with meaning, 226 and 240 by words. (Round 48's ranker: 217 / 233, one
/// empty by words; round 32's: 212 (88.3 %) / 228 (95.0 %), four.)
const HELD_OUT_62: &str = "heldout-43-round62.json";
const ROUND_62_WORDS_FLOORS: (f64, f64) = (94.1, 99.9);
const ROUND_62_MEANING_FLOORS: (f64, f64) = (95.7, 99.9);

#[test]
fn on_round_62s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_62, ROUND_62_WORDS_FLOORS, ROUND_62_MEANING_FLOORS);
}

/// Round 63's held-out questions (`heldout-43-round63.json`, 240; leaning
/// to pasted context before the ask and to requests mixing two
/// languages), written by a second helper beside round 62's and measured
/// first on round 55's ranker (testing/search-eval/README.md, round 56):
/// with meaning 224 of 240 first (93.3 %) and 233 in the top three (97.1
/// %), asked for 23; by words 224 and 234, no empty answer. Read after
/// that measurement; round 56's ranker: 235 (97.9 %) and 239 (99.6 %),
/// the same by words. (Round 48's ranker: 221 / 231, one empty by words;
/// round 32's: 216 (90.0 %) / 228 (95.0 %), three.)
const HELD_OUT_63: &str = "heldout-43-round63.json";
const ROUND_63_WORDS_FLOORS: (f64, f64) = (97.8, 99.5);
const ROUND_63_MEANING_FLOORS: (f64, f64) = (97.8, 99.5);

#[test]
fn on_round_63s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_63, ROUND_63_WORDS_FLOORS, ROUND_63_MEANING_FLOORS);
}

/// Round 64's held-out questions (`heldout-43-round64.json`, 240, a
/// balanced mix, 24 in other languages), written by a helper from the
/// tool list alone after round 55's ranker and measured first on it
/// (testing/search-eval/README.md, round 56): with meaning 230 of 240
/// first (95.8 %) and 236 in the top three (98.3 %), asked for 23; by
/// words 230 and 236, one question without a tool by words (Turkish).
/// Read after that measurement; round 56's ranker: 235 (97.9 %) and 240,
/// the same by words. (Round 48's ranker: 229 / 236, one empty by words;
/// round 32's: 220 (91.7 %) / 226 (94.2 %), six.)
const HELD_OUT_64: &str = "heldout-43-round64.json";
const ROUND_64_WORDS_FLOORS: (f64, f64) = (97.8, 99.9);
const ROUND_64_MEANING_FLOORS: (f64, f64) = (97.8, 99.9);

#[test]
fn on_round_64s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_64, ROUND_64_WORDS_FLOORS, ROUND_64_MEANING_FLOORS);
}

/// Round 65's held-out questions (`heldout-43-round65.json`, 240; about
/// half phrased as an AI agent in the middle of a task states its next
/// need), written by a second helper beside round 64's and measured first
/// on round 55's ranker (testing/search-eval/README.md, round 56): with
/// meaning 230 of 240 first (95.8 %) and 237 in the top three (98.8 %),
/// asked for 24; the same by words, no empty answer. Read after that
/// measurement; round 56's ranker: 232 (96.7 %) and 239 (99.6 %), the
/// same by words. (Round 48's ranker: 227 / 235, one empty by words;
/// round 32's: 221 (92.1 %) / 228 (95.0 %), eight.)
const HELD_OUT_65: &str = "heldout-43-round65.json";
const ROUND_65_WORDS_FLOORS: (f64, f64) = (96.6, 99.5);
const ROUND_65_MEANING_FLOORS: (f64, f64) = (96.6, 99.5);

#[test]
fn on_round_65s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_65, ROUND_65_WORDS_FLOORS, ROUND_65_MEANING_FLOORS);
}

/// Round 66's held-out questions (`heldout-43-round66.json`, 240, a
/// balanced mix, 22 in other languages), written by a helper from the
/// tool list alone after round 56's ranker and measured once on it
/// (testing/search-eval/README.md, round 56): with meaning 236 of 240
/// first (98.3 %) and 238 in the top three (99.2 %), asked for 17; by
/// words 233 (97.1 %) and 238; no empty answer. Read after round 56;
/// round 57's ranker: 239 (99.6 %) and 240, by words 236 and 240. (Round
/// 48's ranker: 234 / 237; round 32's: 225 (93.8 %) / 231 (96.2 %), six empty
/// by words.)
const HELD_OUT_66: &str = "heldout-43-round66.json";
const ROUND_66_WORDS_FLOORS: (f64, f64) = (98.3, 99.9);
const ROUND_66_MEANING_FLOORS: (f64, f64) = (99.5, 99.9);

#[test]
fn on_round_66s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_66, ROUND_66_WORDS_FLOORS, ROUND_66_MEANING_FLOORS);
}

/// Round 67's held-out questions (`heldout-43-round67.json`, 240, as a
/// team's developers, support staff and analysts would ask; 21 in other
/// languages), written by a second helper beside round 66's and measured
/// once on round 56's ranker (testing/search-eval/README.md, round 56):
/// with meaning 237 of 240 first (98.8 %) and 239 in the top three (99.6
/// %), asked for 21; by words 235 (97.9 %) and 239; no empty answer.
/// Read after round 56; round 57's ranker: 239 (99.6 %) and 240, by words
/// 237 and 240. (Round 48's ranker: 232 / 236, one empty by words; round
/// 32's: 222 (92.5 %) / 232 (96.7 %), four.)
const HELD_OUT_67: &str = "heldout-43-round67.json";
const ROUND_67_WORDS_FLOORS: (f64, f64) = (98.7, 99.9);
const ROUND_67_MEANING_FLOORS: (f64, f64) = (99.5, 99.9);

#[test]
fn on_round_67s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_67, ROUND_67_WORDS_FLOORS, ROUND_67_MEANING_FLOORS);
}

/// Round 68's held-out questions (`heldout-43-round68.json`, 240, a
/// balanced mix from people new to these tools to protocol experts; 20 in
/// other languages), written by a helper from the tool list alone after
/// round 56's ranker and measured once on it (testing/search-eval/README.md,
/// round 56): with meaning 233 of 240 first (97.1 %) and 239 in the top
/// three (99.6 %), asked for 26; by words 231 (96.2 %) and 239; no empty
/// answer. Read after round 56 (round 55's ranker put one more first: a French
/// request for "une référence ..., pas une liste de liens", which round
/// 56's "liens" now reads as links); round 57's ranker: 236 (98.3 %) and
/// 240, by words 234 and 240. (Round 48's ranker: 233 / 238, one
/// empty by words; round 32's: 225 (93.8 %) / 233 (97.1 %), six.)
const HELD_OUT_68: &str = "heldout-43-round68.json";
const ROUND_68_WORDS_FLOORS: (f64, f64) = (97.4, 99.9);
const ROUND_68_MEANING_FLOORS: (f64, f64) = (98.3, 99.9);

#[test]
fn on_round_68s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_68, ROUND_68_WORDS_FLOORS, ROUND_68_MEANING_FLOORS);
}

/// Round 69's held-out questions (`heldout-43-round69.json`, 240; partly
/// the short needs a model searches for while it writes a program that
/// calls the tools; 21 in other languages), written by a second helper
/// beside round 68's and measured once on round 56's ranker
/// (testing/search-eval/README.md, round 56): with meaning 234 of 240
/// first (97.5 %) and 236 in the top three (98.3 %), asked for 18; by
/// words 233 (97.1 %) and 237; no empty answer. Read after round 56;
/// round 57's ranker: 238 (99.2 %) and 240, by words 237 and 240. (Round
/// 55's ranker: the same as 56's; round 48's: 231 / 236, one empty by words; round
/// 32's: 228 (95.0 %) / 232 (96.7 %), three.)
const HELD_OUT_69: &str = "heldout-43-round69.json";
const ROUND_69_WORDS_FLOORS: (f64, f64) = (98.7, 99.9);
const ROUND_69_MEANING_FLOORS: (f64, f64) = (99.1, 99.9);

#[test]
fn on_round_69s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_69, ROUND_69_WORDS_FLOORS, ROUND_69_MEANING_FLOORS);
}

/// Round 70's held-out questions (`heldout-43-round70.json`, 240, a
/// balanced mix, 21 in other languages), written by a helper from the
/// tool list alone after round 56's ranker and measured first on round
/// 57's (testing/search-eval/README.md, round 57): with meaning 233 of 240
/// first (97.1 %) and 237 in the top three (98.8 %), asked for 17; by
/// words 233 and 237, one question without a tool by words (Czech). Only
/// that one was read; round 57 gave it its words: 234 (97.5 %) and 238
/// (99.2 %), the same by words, no empty answer. (Round 56's ranker: 233 /
/// 237; round 48's: 233 / 237, one empty by words; round 32's: 227 (94.6
/// %) / 231 (96.2 %), four.)
const HELD_OUT_70: &str = "heldout-43-round70.json";
const ROUND_70_WORDS_FLOORS: (f64, f64) = (97.4, 99.1);
const ROUND_70_MEANING_FLOORS: (f64, f64) = (97.4, 99.1);

#[test]
fn on_round_70s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_70, ROUND_70_WORDS_FLOORS, ROUND_70_MEANING_FLOORS);
}

/// Round 71's held-out questions (`heldout-43-round71.json`, 240, written
/// as people type in chat: lower case, run-on, slang, typos; 20 in other
/// languages), written by a second helper beside round 70's and measured
/// once on round 57's ranker (testing/search-eval/README.md, round 57):
/// with meaning 235 of 240 first (97.9 %) and 240 in the top three (100
/// %), asked for 20; by words 234 (97.5 %) and 240; no empty answer. Never
/// read. (Round 56's ranker: 232 / 237; round 48's: 231 / 237; round 32's:
/// 224 (93.3 %) / 228 (95.0 %), seven empty by words.)
const HELD_OUT_71: &str = "heldout-43-round71.json";
const ROUND_71_WORDS_FLOORS: (f64, f64) = (97.4, 99.9);
const ROUND_71_MEANING_FLOORS: (f64, f64) = (97.8, 99.9);

#[test]
fn on_round_71s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_71, ROUND_71_WORDS_FLOORS, ROUND_71_MEANING_FLOORS);
}

/// Round 72's held-out questions (`heldout-43-round72.json`, 240, an
/// operations engineer mid-incident: terse, pasted log lines and paths; 26
/// in other languages, Vietnamese, Ukrainian, Romanian, Indonesian and
/// Greek among them), written by a helper from the tool list alone and
/// measured first on round 57's ranker (testing/search-eval/README.md,
/// round 58): with meaning 219 of 240 first (91.3 %) and 229 in the top
/// three (95.4 %), asked for 31; by words 215 and 228, three questions
/// without a tool by words. Read in round 58: with meaning 236 (98.3 %) and
/// 239 (99.6 %), by words 232 (96.7 %) and 239. (Round 48's ranker: 218 /
/// 228; round 32's: 215 / 226, six empty by words.)
const HELD_OUT_72: &str = "heldout-43-round72.json";
const ROUND_72_WORDS_FLOORS: (f64, f64) = (96.6, 99.5);
const ROUND_72_MEANING_FLOORS: (f64, f64) = (98.3, 99.5);

#[test]
fn on_round_72s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_72, ROUND_72_WORDS_FLOORS, ROUND_72_MEANING_FLOORS);
}

/// Round 73's held-out questions (`heldout-43-round73.json`, 240, people
/// who are no programmers asking in everyday words, some long, some
/// misspelt; 22 in other languages, Arabic, Hebrew, Thai and Greek among
/// them), written by a second helper beside round 72's and measured first
/// on round 57's ranker: with meaning 217 of 240 first (90.4 %) and 230 in
/// the top three (95.8 %), asked for 37; by words 214 and 228, four without
/// a tool by words. Read in round 58: with meaning 232 (96.7 %) and 240
/// (100 %), by words 227 (94.6 %) and 239 (99.6 %). (Round 48's ranker:
/// 216 / 228; round 32's: 213 / 226, seven empty by words.)
const HELD_OUT_73: &str = "heldout-43-round73.json";
const ROUND_73_WORDS_FLOORS: (f64, f64) = (94.5, 99.5);
const ROUND_73_MEANING_FLOORS: (f64, f64) = (96.6, 99.9);

#[test]
fn on_round_73s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_73, ROUND_73_WORDS_FLOORS, ROUND_73_MEANING_FLOORS);
}

/// Round 74's held-out questions (`heldout-43-round74.json`, 240, a data
/// analyst and a student mid-task, pasted JSON, listings and errors; 24 in
/// other languages, Finnish, Danish, Norwegian, Hungarian, Malay and
/// Swahili among them), written while round 58 read sets 72 and 73 and
/// measured first on round 58's ranker as it then stood, which had never
/// seen it: with meaning 229 of 240 first (95.4 %) and 232 in the top three
/// (96.7 %), asked for 23; by words 225 and 232, one without a tool by
/// words. Read in round 58: with meaning 237 (98.8 %) and 239 (99.6 %), by
/// words 233 (97.1 %) and 239. (Round 57's ranker: 229 / 232; round 48's:
/// 228 / 232; round 32's: 222 / 228, five empty by words.)
const HELD_OUT_74: &str = "heldout-43-round74.json";
const ROUND_74_WORDS_FLOORS: (f64, f64) = (97.0, 99.5);
const ROUND_74_MEANING_FLOORS: (f64, f64) = (98.7, 99.5);

#[test]
fn on_round_74s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_74, ROUND_74_WORDS_FLOORS, ROUND_74_MEANING_FLOORS);
}

/// Round 75's held-out questions (`heldout-43-round75.json`, 240, close
/// siblings each told apart in everyday words, and negations, some in other
/// languages; 22 in other languages), written beside round 74's and
/// measured first likewise: with meaning 231 of 240 first (96.3 %) and 240
/// in the top three (100 %), asked for 23; by words 232 and 239, one without
/// a tool by words (Russian). Read in round 58: with meaning 232 (96.7 %)
/// and 240, by words 233 (97.1 %) and 240. (Round 57's ranker: 231 / 239;
/// round 48's: 223 / 234; round 32's: 219 / 230, nine empty by words.)
const HELD_OUT_75: &str = "heldout-43-round75.json";
const ROUND_75_WORDS_FLOORS: (f64, f64) = (97.0, 99.9);
const ROUND_75_MEANING_FLOORS: (f64, f64) = (96.6, 99.9);

#[test]
fn on_round_75s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_75, ROUND_75_WORDS_FLOORS, ROUND_75_MEANING_FLOORS);
}

/// Round 76's held-out questions (`heldout-43-round76.json`, 240, a team of
/// developers with an AI coding assistant over a week; 23 in other
/// languages), written by a helper from the tool list alone after round 58
/// and measured first on round 58's ranker (testing/search-eval/README.md,
/// round 59): with meaning 234 of 240 first (97.5 %) and 236 in the top
/// three (98.3 %), asked for 21; by words 230 and 235, one question without
/// a tool by words (Hindi). Read in round 59: with meaning 238 (99.2 %) and
/// 240 (100 %), by words 234 (97.5 %) and 239 (99.6 %). (Round 57's
/// ranker: 231 / 234; round 48's: 227 / 232; round 32's: 219 (91.3 %) / 226
/// (94.2 %), four empty by words.)
const HELD_OUT_76: &str = "heldout-43-round76.json";
const ROUND_76_WORDS_FLOORS: (f64, f64) = (97.4, 99.5);
const ROUND_76_MEANING_FLOORS: (f64, f64) = (99.1, 99.9);

#[test]
fn on_round_76s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_76, ROUND_76_WORDS_FLOORS, ROUND_76_MEANING_FLOORS);
}

/// Round 77's held-out questions (`heldout-43-round77.json`, 240, an agent
/// stating sub-goals and their reasons, and a help desk relaying users'
/// requests in the users' words; 23 in other languages), written beside
/// round 76's and measured first likewise: with meaning 211 of 240 first
/// (87.9 %) and 228 in the top three (95.0 %), asked for 45; by words 208
/// and 225, two without a tool by words (Czech, Arabic). Most misses were
/// requests relayed in quotes, read as a value. Read in round 59: with
/// meaning 231 (96.3 %) and 239 (99.6 %), by words 230 (95.8 %) and 239.
/// (Round 57's ranker: 211 / 228; round 48's: 209 / 226; round 32's: 202
/// (84.2 %) / 221 (92.1 %), five empty by words.)
const HELD_OUT_77: &str = "heldout-43-round77.json";
const ROUND_77_WORDS_FLOORS: (f64, f64) = (95.8, 99.5);
const ROUND_77_MEANING_FLOORS: (f64, f64) = (96.2, 99.5);

#[test]
fn on_round_77s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_77, ROUND_77_WORDS_FLOORS, ROUND_77_MEANING_FLOORS);
}

/// Round 78's held-out questions (`heldout-43-round78.json`, 240, a small
/// business's owner, bookkeeper and office manager in everyday words with
/// typos; 20 in other languages), written by a helper from the tool list
/// alone after round 59 and measured once on round 59's ranker
/// (testing/search-eval/README.md, round 59): with meaning 228 of 240 first
/// (95.0 %) and 238 in the top three (99.2 %), asked for 22; by words 227
/// (94.6 %) and 237 (98.8 %); no empty answer. Never read. (Round 57's
/// ranker: the same; round 48's: 226 / 236, two empty by words; round
/// 32's: 219 (91.3 %) / 234 (97.5 %), six.)
const HELD_OUT_78: &str = "heldout-43-round78.json";
const ROUND_78_WORDS_FLOORS: (f64, f64) = (94.5, 98.7);
const ROUND_78_MEANING_FLOORS: (f64, f64) = (94.9, 99.1);

#[test]
fn on_round_78s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_78, ROUND_78_WORDS_FLOORS, ROUND_78_MEANING_FLOORS);
}

/// Round 79's held-out questions (`heldout-43-round79.json`, 240, an MCP
/// developer testing a client in the protocol's words beside ordinary
/// requests; 21 in other languages), written beside round 78's and
/// measured once likewise: with meaning 233 of 240 first (97.1 %) and 237
/// in the top three (98.8 %), asked for 31; by words 230 and 237, one
/// question without a tool by words (Chinese "相加", add up). Only that one
/// was read: 234 (97.5 %) and 238 (99.2 %), by words 231 and 238, no empty
/// answer. (Round 57's ranker: 233 / 237; round 48's: 230 / 235, one empty
/// by words; round 32's: 221 (92.1 %) / 230 (95.8 %), five.)
const HELD_OUT_79: &str = "heldout-43-round79.json";
const ROUND_79_WORDS_FLOORS: (f64, f64) = (96.2, 99.1);
const ROUND_79_MEANING_FLOORS: (f64, f64) = (97.4, 99.1);

#[test]
fn on_round_79s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_79, ROUND_79_WORDS_FLOORS, ROUND_79_MEANING_FLOORS);
}

/// Round 80's held-out questions (`heldout-43-round80.json`, 240, typed
/// into a search box in a few words or dictated by voice without
/// punctuation; 21 in other languages), measured once on round 59's ranker
/// before any was read: with meaning 211 of 240 first (87.9 %) and 232 in
/// the top three (96.7 %), asked for 40; by words 210 and 232, three
/// questions without a tool by words (German compounds, Czech, Hindi).
/// Read in round 60: 228 (95.0 %) and 240 (100 %), by words 229 and 240,
/// no empty answer. (Round 57's ranker: 211 / 232; round 48's: 210 / 230,
/// five empty by words; round 32's: 203 (84.6 %) / 224 (93.3 %), nine.)
const HELD_OUT_80: &str = "heldout-43-round80.json";
const ROUND_80_WORDS_FLOORS: (f64, f64) = (95.0, 99.5);
const ROUND_80_MEANING_FLOORS: (f64, f64) = (94.9, 99.5);

#[test]
fn on_round_80s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_80, ROUND_80_WORDS_FLOORS, ROUND_80_MEANING_FLOORS);
}

/// Round 81's held-out questions (`heldout-43-round81.json`, 240, English
/// as a second language with its slips, two languages mixed in a sentence,
/// and a tester's test steps; 23 wholly in other languages), written beside
/// round 80's and measured once likewise: with meaning 222 of 240 first
/// (92.5 %) and 233 in the top three (97.1 %), asked for 32; by words 216
/// and 233, no empty answer. Read in round 60: 234 (97.5 %) and 239
/// (99.6 %), by words 229 and 239. (Round 57's ranker: 222 / 233; round
/// 48's: 220 / 230, one empty by words; round 32's: 212 (88.3 %) / 223
/// (92.9 %), six.)
const HELD_OUT_81: &str = "heldout-43-round81.json";
const ROUND_81_WORDS_FLOORS: (f64, f64) = (95.0, 99.5);
const ROUND_81_MEANING_FLOORS: (f64, f64) = (97.4, 99.5);

#[test]
fn on_round_81s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_81, ROUND_81_WORDS_FLOORS, ROUND_81_MEANING_FLOORS);
}

/// Round 82's held-out questions (`heldout-43-round82.json`, 240, an AI
/// agent searching mid-task: capability phrases, guessed tool names of
/// other ecosystems, lines of its plan; 23 in other languages), measured
/// once on round 60's ranker before any was read: with meaning 230 of 240
/// first (95.8 %) and 237 in the top three (98.8 %), asked for 31; by words
/// 226 and 235, two questions without a tool by words ("os.listdir",
/// Czech). Read in round 61: 237 (98.8 %) and 240 (100 %), by words 234
/// and 239, no empty answer. (Round 59's ranker: 230 / 236; round 48's:
/// 226 / 236, three empty by words; round 32's: 216 (90.0 %) / 229
/// (95.4 %), eight.)
const HELD_OUT_82: &str = "heldout-43-round82.json";
const ROUND_82_WORDS_FLOORS: (f64, f64) = (97.4, 99.5);
const ROUND_82_MEANING_FLOORS: (f64, f64) = (98.7, 99.5);

#[test]
fn on_round_82s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_82, ROUND_82_WORDS_FLOORS, ROUND_82_MEANING_FLOORS);
}

/// Round 83's held-out questions (`heldout-43-round83.json`, 240, people of
/// other trades in their own words (a lawyer, a nurse, a teacher, a chef,
/// a journalist, a researcher) and very polite long-winded users; 22 in
/// other languages), written beside round 82's and measured once likewise:
/// with meaning 226 of 240 first (94.2 %) and 238 in the top three
/// (99.2 %), asked for 24; by words 228 and 238, no empty answer. Read in
/// round 61: 237 (98.8 %) and 240 (100 %), by words 237 and 240. (Round
/// 59's ranker: 226 / 238; round 48's: 223 / 238; round 32's: 218
/// (90.8 %) / 231 (96.3 %), six empty by words.)
const HELD_OUT_83: &str = "heldout-43-round83.json";
const ROUND_83_WORDS_FLOORS: (f64, f64) = (98.7, 99.5);
const ROUND_83_MEANING_FLOORS: (f64, f64) = (98.7, 99.5);

#[test]
fn on_round_83s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_83, ROUND_83_WORDS_FLOORS, ROUND_83_MEANING_FLOORS);
}

/// Round 84's held-out questions (`heldout-43-round84.json`, 240, people
/// describing a problem rather than asking, asking whether there is a way,
/// or following up on an earlier turn; 20 in other languages), measured
/// once on round 61's ranker before any was read: with meaning 212 of 240
/// first (88.3 %) and 226 in the top three (94.2 %), asked for 31; by
/// words 212 and 225, one question without a tool by words (Hindi). Read
/// in round 62: 226 (94.2 %) and 240 (100 %), by words 226 and 239, no
/// empty answer. (Round 60's ranker: 212 / 226; round 59's: 210 / 226;
/// round 48's: 208 / 223, three empty by words; round 32's: 203 (84.6 %) /
/// 221 (92.1 %), five.)
const HELD_OUT_84: &str = "heldout-43-round84.json";
const ROUND_84_WORDS_FLOORS: (f64, f64) = (94.1, 99.5);
const ROUND_84_MEANING_FLOORS: (f64, f64) = (94.1, 99.5);

#[test]
fn on_round_84s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_84, ROUND_84_WORDS_FLOORS, ROUND_84_MEANING_FLOORS);
}

/// Round 85's held-out questions (`heldout-43-round85.json`, 240, chat
/// slang and emoji, and phone writing with autocorrect's wrong words; 21
/// in other languages), written beside round 84's and measured once
/// likewise: with meaning 227 of 240 first (94.6 %) and 233 in the top
/// three (97.1 %), asked for 22; by words 228 and 234, no empty answer.
/// Read in round 62: 234 (97.5 %) and 240 (100 %), by words 235 and 240.
/// (Round 60's ranker: 226 / 233; round 59's: 224 / 233; round 48's:
/// 223 / 233; round 32's: 215 (89.6 %) / 226 (94.2 %), four empty by
/// words.)
const HELD_OUT_85: &str = "heldout-43-round85.json";
const ROUND_85_WORDS_FLOORS: (f64, f64) = (97.9, 99.5);
const ROUND_85_MEANING_FLOORS: (f64, f64) = (97.4, 99.5);

#[test]
fn on_round_85s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_85, ROUND_85_WORDS_FLOORS, ROUND_85_MEANING_FLOORS);
}

/// Round 86's held-out questions (`heldout-43-round86.json`, 240, a data
/// engineer and a DevOps person pasting log lines, tracebacks, YAML, JSON,
/// cron lines, globs and git status beside the request, and a product
/// manager writing user stories with acceptance criteria; 21 in other
/// languages), measured once on round 62's ranker before any was read:
/// with meaning 223 of 240 first (92.9 %) and 237 in the top three
/// (98.8 %), asked for 29; by words 222 and 237, no empty answer. Read in
/// round 63: 226 (94.2 %) and 240 (100 %), by words 225 and 240. (Round
/// 61's ranker: 222 / 237; round 59's: 221 / 236; round 48's: 220 / 235;
/// round 32's: 215 (89.6 %) / 230 (95.8 %), five empty by words.)
const HELD_OUT_86: &str = "heldout-43-round86.json";
const ROUND_86_WORDS_FLOORS: (f64, f64) = (93.7, 99.5);
const ROUND_86_MEANING_FLOORS: (f64, f64) = (94.1, 99.5);

#[test]
fn on_round_86s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_86, ROUND_86_WORDS_FLOORS, ROUND_86_MEANING_FLOORS);
}

/// Round 87's held-out questions (`heldout-43-round87.json`, 240, needs put
/// through comparisons, conditions and contrasts, and asks that come last
/// after sentences of background; 21 in other languages), written beside
/// round 86's and measured once likewise: with meaning 223 of 240 first
/// (92.9 %) and 235 in the top three (97.9 %), asked for 22; by words 223
/// and 235, no empty answer. Read in round 63: 229 (95.4 %) and 239
/// (99.6 %), by words 229 and 240. (Round 61's ranker: 223 / 235; round
/// 59's: 222 / 235; round 48's: 219 / 233; round 32's: 210 (87.5 %) / 226
/// (94.2 %), five empty by words.)
const HELD_OUT_87: &str = "heldout-43-round87.json";
const ROUND_87_WORDS_FLOORS: (f64, f64) = (95.4, 99.5);
const ROUND_87_MEANING_FLOORS: (f64, f64) = (95.4, 99.5);

#[test]
fn on_round_87s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_87, ROUND_87_WORDS_FLOORS, ROUND_87_MEANING_FLOORS);
}

/// Round 88's held-out questions (`heldout-43-round88.json`, 240, an
/// ordinary mix of everyday users on a working day with no theme; 21 in
/// other languages), measured once on round 63's ranker: with meaning 232
/// of 240 first (96.7 %) and 237 in the top three (98.8 %), asked for 25;
/// by words 230 and 237, no empty answer. Read in round 64: 236 (98.3 %)
/// and 240 (100 %), by words 234 and 240. (Round 62's ranker: the same as
/// round 63's; round 59's: 230 / 237; round 48's: 224 / 232, two empty by
/// words; round 32's: 221 (92.1 %) / 229 (95.4 %), five.)
const HELD_OUT_88: &str = "heldout-43-round88.json";
const ROUND_88_WORDS_FLOORS: (f64, f64) = (97.5, 99.5);
const ROUND_88_MEANING_FLOORS: (f64, f64) = (98.3, 99.5);

#[test]
fn on_round_88s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_88, ROUND_88_WORDS_FLOORS, ROUND_88_MEANING_FLOORS);
}

/// Round 89's held-out questions (`heldout-43-round89.json`, 240, people who
/// live in one of the four servers all day, in that habit's shorthand, and
/// newcomers to each; 22 in other languages), written beside round 88's
/// and measured once likewise: with meaning 227 of 240 first (94.6 %) and
/// 239 in the top three (99.6 %), asked for 21; by words 225 and 236, no
/// empty answer. Read in round 64: 234 (97.5 %) and 240 (100 %), by words
/// 232 and 239. (Round 62's ranker: the same as round 63's; round 59's:
/// 225 / 239; round 48's: 224 / 237, one empty by words; round 32's: 214
/// (89.2 %) / 229 (95.4 %), six.)
const HELD_OUT_89: &str = "heldout-43-round89.json";
const ROUND_89_WORDS_FLOORS: (f64, f64) = (96.6, 99.5);
const ROUND_89_MEANING_FLOORS: (f64, f64) = (97.5, 99.5);

#[test]
fn on_round_89s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_89, ROUND_89_WORDS_FLOORS, ROUND_89_MEANING_FLOORS);
}

/// Round 90's held-out questions (`heldout-43-round90.json`, 240, people
/// using an assistant for their household life (trips, family events,
/// hobbies, recipes, a renovation, a child's school project) who talk of
/// their life more than of tools, some in short phone-typed asks; 21 in
/// other languages), measured once on round 63's ranker before any was read:
/// with meaning 225 of 240 first (93.8 %) and 231 in the top three (96.2 %),
/// asked for 33; by words 224 and 231, no empty answer. Read in round 64:
/// 236 (98.3 %) and 239 (99.6 %), by words 235 and 239. (Round 59's ranker:
/// 223 / 231; round 48's: 220 / 229; round 32's: 213 (88.8 %) / 225 (93.8
/// %), two empty by words.)
const HELD_OUT_90: &str = "heldout-43-round90.json";
const ROUND_90_WORDS_FLOORS: (f64, f64) = (97.9, 99.5);
const ROUND_90_MEANING_FLOORS: (f64, f64) = (98.3, 99.5);

#[test]
fn on_round_90s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_90, ROUND_90_WORDS_FLOORS, ROUND_90_MEANING_FLOORS);
}

/// Round 91's held-out questions (`heldout-43-round91.json`, 240, security
/// and compliance people (auditors, sysadmins, incident reviewers) writing
/// ticket-style requests and audit checklist items, with shell-habit
/// shorthand; 22 in other languages), written beside round 90's and measured
/// once likewise: with meaning 224 of 240 first (93.3 %) and 232 in the top
/// three (96.7 %), asked for 34; by words 221 and 232, no empty answer. Read
/// in round 64: 235 (97.9 %) and 240 (100 %), by words 232 and 240. (Round
/// 59's ranker: 223 / 231, one empty by words; round 48's: 218 / 227, two
/// empty by words; round 32's: 213 (88.8 %) / 221 (92.1 %), seven empty by
/// words.)
const HELD_OUT_91: &str = "heldout-43-round91.json";
const ROUND_91_WORDS_FLOORS: (f64, f64) = (96.6, 99.5);
const ROUND_91_MEANING_FLOORS: (f64, f64) = (97.9, 99.5);

#[test]
fn on_round_91s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_91, ROUND_91_WORDS_FLOORS, ROUND_91_MEANING_FLOORS);
}

/// Round 92's held-out questions (`heldout-43-round92.json`, 240, people who
/// talk in idioms, metaphors and jokes, and some in formal or old-fashioned
/// prose; 25 in other languages), written beside round 90's and measured
/// once likewise: with meaning 219 of 240 first (91.2 %) and 236 in the top
/// three (98.3 %), asked for 31; by words 216 and 234, no empty answer. Read
/// in round 64: 231 (96.2 %) and 240 (100 %), by words 228 and 239. (Round
/// 59's ranker: 218 / 236; round 48's: 215 / 234, one empty by words; round
/// 32's: 209 (87.1 %) / 230 (95.8 %), four empty by words.)
const HELD_OUT_92: &str = "heldout-43-round92.json";
const ROUND_92_WORDS_FLOORS: (f64, f64) = (94.9, 99.5);
const ROUND_92_MEANING_FLOORS: (f64, f64) = (96.2, 99.5);

#[test]
fn on_round_92s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_92, ROUND_92_WORDS_FLOORS, ROUND_92_MEANING_FLOORS);
}

/// Round 93's held-out questions (`heldout-43-round93.json`, 240, teachers,
/// researchers and data scientists writing notebook cells, code comments,
/// lab notes and lesson plans, and their students; 23 in other languages),
/// written beside round 90's and measured once likewise: with meaning 235 of
/// 240 first (97.9 %) and 239 in the top three (99.6 %), asked for 19; by
/// words 232 and 239, no empty answer. Read in round 64: 239 (99.6 %) and
/// 240 (100 %), by words 235 and 240. (Round 59's ranker: 235 / 239; round
/// 48's: 230 / 236; round 32's: 224 (93.3 %) / 230 (95.8 %), four empty by
/// words.)
const HELD_OUT_93: &str = "heldout-43-round93.json";
const ROUND_93_WORDS_FLOORS: (f64, f64) = (97.9, 99.5);
const ROUND_93_MEANING_FLOORS: (f64, f64) = (99.5, 99.5);

#[test]
fn on_round_93s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_93, ROUND_93_WORDS_FLOORS, ROUND_93_MEANING_FLOORS);
}

/// Round 94's held-out questions (`heldout-43-round94.json`, 240, people new
/// to computers, many of them elderly, who describe things vaguely by how
/// they look or what they do ("the box where my letters are kept", "the
/// thingy that says back what I type"), apologetic and rambling, some naming
/// the wrong thing; 21 in other languages), measured once on round 64's
/// ranker before any was read: with meaning 200 of 240 first (83.3 %) and
/// 225 in the top three (93.8 %), asked for 44; by words 194 and 224, no
/// empty answer. Read in round 65: 216 (90 %) and 237 (98.8 %), by words 211
/// and 236. (Round 63's ranker: the same; round 59's: 195 / 222, one empty
/// by words; round 48's: 191 / 219, one; round 32's: 184 (76.7 %) / 210
/// (87.5 %), seven.)
const HELD_OUT_94: &str = "heldout-43-round94.json";
const ROUND_94_WORDS_FLOORS: (f64, f64) = (87.9, 98.3);
const ROUND_94_MEANING_FLOORS: (f64, f64) = (89.9, 98.7);

#[test]
fn on_round_94s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_94, ROUND_94_WORDS_FLOORS, ROUND_94_MEANING_FLOORS);
}

/// Round 95's held-out questions (`heldout-43-round95.json`, 240, game
/// masters, novelists and worldbuilders keeping a story world: characters,
/// factions and places in the memory, drafts and maps in files, scenes
/// across time zones; 21 in other languages), written beside round 94's and
/// measured once likewise: with meaning 227 of 240 first (94.6 %) and 234 in
/// the top three (97.5 %), asked for 32; by words 226 and 234, no empty
/// answer. Never read (round 65's ranker: the same). (Round 63's ranker: the
/// same; round 59's: 226 / 232, one empty by words; round 48's: 222 / 231,
/// two; round 32's: 214 (89.2 %) / 226 (94.2 %), seven.)
const HELD_OUT_95: &str = "heldout-43-round95.json";
const ROUND_95_WORDS_FLOORS: (f64, f64) = (94.1, 97.4);
const ROUND_95_MEANING_FLOORS: (f64, f64) = (94.5, 97.4);

#[test]
fn on_round_95s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_95, ROUND_95_WORDS_FLOORS, ROUND_95_MEANING_FLOORS);
}

/// Round 96's held-out questions (`heldout-43-round96.json`, 240, support
/// agents and product managers relaying someone else's need: "customer
/// says", "user reports", lines of a PRD, Given/When/Then acceptance
/// criteria, escalation notes; 24 in other languages), written beside round
/// 94's and measured once likewise: with meaning 215 of 240 first (89.6 %)
/// and 232 in the top three (96.7 %), asked for 41; by words 214 and 230, no
/// empty answer. Read in round 65: 226 (94.2 %) and 238 (99.2 %), by words
/// 225 and 238. (Round 63's ranker: 214 / 232; round 59's: 212 / 231, one
/// empty by words; round 48's: 209 / 229, one; round 32's: 207 (86.2 %) /
/// 224 (93.3 %), five.)
const HELD_OUT_96: &str = "heldout-43-round96.json";
const ROUND_96_WORDS_FLOORS: (f64, f64) = (93.7, 99.1);
const ROUND_96_MEANING_FLOORS: (f64, f64) = (94.1, 99.1);

#[test]
fn on_round_96s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_96, ROUND_96_WORDS_FLOORS, ROUND_96_MEANING_FLOORS);
}

/// Round 97's held-out questions (`heldout-43-round97.json`, 240, people who
/// ask by the shape of the answer they want (a JSON object, name and size
/// pairs, one ISO timestamp, a yes or no) or by ruling tools out ("not the
/// tree one, the flat one with sizes"); 23 in other languages), written
/// beside round 94's and measured once likewise: with meaning 229 of 240
/// first (95.4 %) and 240 in the top three (100 %), asked for 17; by words
/// 229 and 240, no empty answer. Never read (round 65's ranker: the same).
/// (Round 63's ranker: the same; round 59's: 229 / 240; round 48's: 226 /
/// 239; round 32's: 217 (90.4 %) / 234 (97.5 %), three empty by words.)
const HELD_OUT_97: &str = "heldout-43-round97.json";
const ROUND_97_WORDS_FLOORS: (f64, f64) = (95.4, 99.5);
const ROUND_97_MEANING_FLOORS: (f64, f64) = (95.4, 99.5);

#[test]
fn on_round_97s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_97, ROUND_97_WORDS_FLOORS, ROUND_97_MEANING_FLOORS);
}

/// Round 98's held-out questions (`heldout-43-round98.json`, 240, people
/// whose work crosses places and time zones (airline crew, sailors,
/// logistics coordinators, travelling consultants, remote team leads) in
/// their trade's shorthand: Zulu time, ETA and ETD, layovers, manifests and
/// logbooks in files, crews and ports in the memory; 23 in other languages),
/// measured once on round 65's ranker before any was read: with meaning 229
/// of 240 first (95.4 %) and 239 in the top three (99.6 %), asked for 21; by
/// words 229 and 239, no empty answer. Never read. (Round 64's ranker: the
/// same; round 63's: 228 / 239; round 59's: 226 / 237; round 48's: 221 /
/// 234; round 32's: 218 (90.8 %) / 232 (96.7 %), one empty by words.)
const HELD_OUT_98: &str = "heldout-43-round98.json";
const ROUND_98_WORDS_FLOORS: (f64, f64) = (95.4, 99.5);
const ROUND_98_MEANING_FLOORS: (f64, f64) = (95.4, 99.5);

#[test]
fn on_round_98s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_98, ROUND_98_WORDS_FLOORS, ROUND_98_MEANING_FLOORS);
}

/// Round 99's held-out questions (`heldout-43-round99.json`, 240,
/// salespeople, account managers and recruiters keeping contacts, accounts,
/// deals and candidates in the memory and proposals, CVs and contracts in
/// files, in CRM speech: touchpoints, pipelines, warm intros, closed-won; 22
/// in other languages), written beside round 98's and measured once
/// likewise: with meaning 228 of 240 first (95 %) and 236 in the top three
/// (98.3 %), asked for 23; by words 227 and 237, no empty answer. Never
/// read. (Round 64's and 63's rankers: 227 / 236; round 59's: 224 / 235;
/// round 48's: 223 / 234; round 32's: 219 (91.2 %) / 229 (95.4 %), four
/// empty by words.)
const HELD_OUT_99: &str = "heldout-43-round99.json";
const ROUND_99_WORDS_FLOORS: (f64, f64) = (94.5, 98.7);
const ROUND_99_MEANING_FLOORS: (f64, f64) = (94.9, 98.3);

#[test]
fn on_round_99s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_99, ROUND_99_WORDS_FLOORS, ROUND_99_MEANING_FLOORS);
}

/// Round 100's held-out questions (`heldout-43-round100.json`, 240, librarians,
/// archivists, museum and records staff cataloguing, accessioning, weeding and
/// cross-referencing ("see also" links, finding aids, provenance), and their
/// patrons; 23 in other languages), measured once on round 65's ranker before
/// any was read: with meaning 230 of 240 first (95.8 %) and 239 in the top
/// three (99.6 %), asked for 20; by words 229 and 239, no empty answer. Read in
/// rounds 66 and 67: 240 (100 %) and 240 (100 %), by words 238 and 240. (Round
/// 59's ranker: 228 / 239; round 48's: 222 / 233, two; round 32's: 214 (89.2 %)
/// / 225 (93.8 %), six.)
const HELD_OUT_100: &str = "heldout-43-round100.json";
const ROUND_100_WORDS_FLOORS: (f64, f64) = (99.1, 99.5);
const ROUND_100_MEANING_FLOORS: (f64, f64) = (99.5, 99.5);

#[test]
fn on_round_100s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_100, ROUND_100_WORDS_FLOORS, ROUND_100_MEANING_FLOORS);
}

/// Round 101's held-out questions (`heldout-43-round101.json`, 240, programmers
/// asking by the equivalent they know from a shell or another language
/// (`os.walk`, `du -sh`, `Get-ChildItem -Recurse`, `date -u`, a Redis SET, HEAD
/// in HTTP), mixed with plain requests; 22 in other languages), measured once
/// on round 65's ranker before any was read: with meaning 223 of 240 first
/// (92.9 %) and 236 in the top three (98.3 %), asked for 29; by words 219 and
/// 236, no empty answer. Read in rounds 66 and 67: 234 (97.5 %) and 240
/// (100 %), by words 231 and 240. (Round 59's ranker: 221 / 235; round 48's:
/// 218 / 232, one; round 32's: 211 (87.9 %) / 227 (94.6 %), six.)
const HELD_OUT_101: &str = "heldout-43-round101.json";
const ROUND_101_WORDS_FLOORS: (f64, f64) = (96.2, 99.5);
const ROUND_101_MEANING_FLOORS: (f64, f64) = (97.4, 99.5);

#[test]
fn on_round_101s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_101, ROUND_101_WORDS_FLOORS, ROUND_101_MEANING_FLOORS);
}

/// Round 102's held-out questions (`heldout-43-round102.json`, 240, paralegals,
/// claims handlers, HR and public-office clerks writing formal, passive prose
/// ("it is requested that ...", "the undersigned wishes to have recorded ...")
/// with case numbers, claim IDs and exhibits; 20 in other languages), measured
/// once on round 65's ranker before any was read: with meaning 214 of 240 first
/// (89.2 %) and 229 in the top three (95.4 %), asked for 46; by words 209 and
/// 228, no empty answer. Read in rounds 66 and 67: 239 (99.6 %) and 239
/// (99.6 %), by words 232 and 238. (Round 59's ranker: 211 / 228, one empty by
/// words; round 48's: 209 / 226, one; round 32's: 203 (84.6 %) / 221 (92.1 %),
/// four.)
const HELD_OUT_102: &str = "heldout-43-round102.json";
const ROUND_102_WORDS_FLOORS: (f64, f64) = (96.6, 99.1);
const ROUND_102_MEANING_FLOORS: (f64, f64) = (99.5, 99.5);

#[test]
fn on_round_102s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_102, ROUND_102_WORDS_FLOORS, ROUND_102_MEANING_FLOORS);
}

/// Round 103's held-out questions (`heldout-43-round103.json`, 240,
/// schoolteachers, kids and teenagers: homework folders, science projects,
/// gaming clans and school clubs, in simple or slangy words; 21 in other
/// languages), measured once on round 65's ranker before any was read: with
/// meaning 232 of 240 first (96.7 %) and 236 in the top three (98.3 %), asked
/// for 18; by words 231 and 236, no empty answer. Read in rounds 66 and 67: 238
/// (99.2 %) and 240 (100 %), by words 238 and 240. (Round 59's ranker: 231 /
/// 235; round 48's: 228 / 233, one; round 32's: 221 (92.1 %) / 228 (95 %),
/// four.)
const HELD_OUT_103: &str = "heldout-43-round103.json";
const ROUND_103_WORDS_FLOORS: (f64, f64) = (99.1, 99.5);
const ROUND_103_MEANING_FLOORS: (f64, f64) = (99.1, 99.5);

#[test]
fn on_round_103s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_103, ROUND_103_WORDS_FLOORS, ROUND_103_MEANING_FLOORS);
}

/// Round 104's held-out questions (`heldout-43-round104.json`, 240, farmers,
/// gardeners, beekeepers and foresters, and the family helping them: field
/// notes, harvest logs, hive records, seed inventories, frost and sunrise
/// across zones; 22 in other languages), measured once on round 65's ranker
/// before any was read: with meaning 231 of 240 first (96.2 %) and 236 in the
/// top three (98.3 %), asked for 18; by words 230 and 237, no empty answer.
/// Read in round 67: 238 (99.2 %) and 240 (100 %), by words 236 and 240. (Round
/// 66's ranker: 232 / 237; round 59's: 229 / 234, one empty by words; round
/// 48's: 226 / 231, two; round 32's: 225 (93.8 %) / 230 (95.8 %), five.)
const HELD_OUT_104: &str = "heldout-43-round104.json";
const ROUND_104_WORDS_FLOORS: (f64, f64) = (98.3, 99.5);
const ROUND_104_MEANING_FLOORS: (f64, f64) = (99.1, 99.5);

#[test]
fn on_round_104s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_104, ROUND_104_WORDS_FLOORS, ROUND_104_MEANING_FLOORS);
}

/// Round 105's held-out questions (`heldout-43-round105.json`, 240,
/// journalists, editors and fact-checkers on deadline: sources, quotes, embargo
/// times in other zones, who introduced whom, newsroom shorthand; 22 in other
/// languages), measured once on round 65's ranker before any was read: with
/// meaning 228 of 240 first (95 %) and 236 in the top three (98.3 %), asked for
/// 19; by words 228 and 236, no empty answer. Read in round 67: 236 (98.3 %)
/// and 240 (100 %), by words 236 and 240. (Round 66's ranker: the same; round
/// 59's: 225 / 233; round 48's: 224 / 231, one; round 32's: 220 (91.7 %) / 228
/// (95 %), five.)
const HELD_OUT_105: &str = "heldout-43-round105.json";
const ROUND_105_WORDS_FLOORS: (f64, f64) = (98.3, 99.5);
const ROUND_105_MEANING_FLOORS: (f64, f64) = (98.3, 99.5);

#[test]
fn on_round_105s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_105, ROUND_105_WORDS_FLOORS, ROUND_105_MEANING_FLOORS);
}

/// Round 106's held-out questions (`heldout-43-round106.json`, 240, musicians,
/// podcasters, video editors and streamers: stems, takes, renders, show notes,
/// guests across zones, trade words that pull the wrong tool ("drop", "track",
/// "master"); 25 in other languages), measured once on round 65's ranker before
/// any was read: with meaning 232 of 240 first (96.7 %) and 236 in the top
/// three (98.3 %), asked for 22; by words 232 and 236, one empty. Read in round
/// 67: 236 (98.3 %) and 240 (100 %), by words 235 and 240. (Round 66's ranker:
/// the same; round 59's: 230 / 235, one empty by words; round 48's: 228 / 231,
/// two; round 32's: 226 (94.2 %) / 229 (95.4 %), five.)
const HELD_OUT_106: &str = "heldout-43-round106.json";
const ROUND_106_WORDS_FLOORS: (f64, f64) = (97.9, 99.5);
const ROUND_106_MEANING_FLOORS: (f64, f64) = (98.3, 99.5);

#[test]
fn on_round_106s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_106, ROUND_106_WORDS_FLOORS, ROUND_106_MEANING_FLOORS);
}

/// Round 107's held-out questions (`heldout-43-round107.json`, 240, hobbyist
/// makers (3D printing, electronics, home automation, model railways,
/// woodworking): G-code and STL files, Home Assistant YAML, part inventories,
/// which part connects to which; 22 in other languages), measured once on round
/// 65's ranker before any was read: with meaning 227 of 240 first (94.6 %) and
/// 237 in the top three (98.8 %), asked for 23; by words 228 and 237, no empty
/// answer. Read in round 67: 236 (98.3 %) and 240 (100 %), by words 237 and
/// 240. (Round 66's ranker: the same; round 59's: 225 / 236, one empty by
/// words; round 48's: 223 / 236, one; round 32's: 216 (90 %) / 230 (95.8 %),
/// six.)
const HELD_OUT_107: &str = "heldout-43-round107.json";
const ROUND_107_WORDS_FLOORS: (f64, f64) = (98.7, 99.5);
const ROUND_107_MEANING_FLOORS: (f64, f64) = (98.3, 99.5);

#[test]
fn on_round_107s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_107, ROUND_107_WORDS_FLOORS, ROUND_107_MEANING_FLOORS);
}

/// Round 108's held-out questions (`heldout-43-round108.json`, 240, property
/// managers, landlords, letting agents and superintendents: leases, units,
/// tenants, maintenance tickets, inspection photos, who rents what from whom;
/// 21 in other languages), measured once on round 67's ranker before any was
/// read: with meaning 230 of 240 first (95.8 %) and 240 in the top three
/// (100 %), asked for 22; by words 230 and 238, no empty answer. Read in round 68: 239 (99.6 %) and 240 (100 %), by words 238 and 238.
/// (Round 66's and 65's rankers: the same; round 59's: 226 / 239; round 48's:
/// 223 / 237, one; round 32's: 215 (89.6 %) / 232 (96.7 %), five.)
const HELD_OUT_108: &str = "heldout-43-round108.json";
const ROUND_108_WORDS_FLOORS: (f64, f64) = (99.1, 99.1);
const ROUND_108_MEANING_FLOORS: (f64, f64) = (99.5, 99.5);

#[test]
fn on_round_108s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_108, ROUND_108_WORDS_FLOORS, ROUND_108_MEANING_FLOORS);
}

/// Round 109's held-out questions (`heldout-43-round109.json`, 240, event and
/// wedding planners and travel agents: vendors, guest lists, seating,
/// itineraries, flights across zones, who is whose plus-one; 20 in other
/// languages), measured once on round 67's ranker before any was read: with
/// meaning 231 of 240 first (96.2 %) and 238 in the top three (99.2 %), asked
/// for 23; by words 232 and 238, no empty answer. Read in round 68: 239 (99.6 %) and 240 (100 %), by words 239 and 240. (Round 66's
/// ranker: the same; round 65's: 230 / 238; round 59's: 225 / 238; round 48's:
/// 219 / 235, three; round 32's: 214 (89.2 %) / 230 (95.8 %), five.)
const HELD_OUT_109: &str = "heldout-43-round109.json";
const ROUND_109_WORDS_FLOORS: (f64, f64) = (99.5, 99.5);
const ROUND_109_MEANING_FLOORS: (f64, f64) = (99.5, 99.5);

#[test]
fn on_round_109s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_109, ROUND_109_WORDS_FLOORS, ROUND_109_MEANING_FLOORS);
}

/// Round 110's held-out questions (`heldout-43-round110.json`, 240,
/// accountants, bookkeepers and tax preparers: ledgers, receipts, invoices,
/// quarter-end close, sums of two amounts, deadlines in other zones, which
/// client is a subsidiary of which; 22 in other languages), measured once on
/// round 67's ranker before any was read: with meaning 234 of 240 first
/// (97.5 %) and 237 in the top three (98.8 %), asked for 17; by words 231 and
/// 236, no empty answer. Read in round 68: 240 (100 %) and 240 (100 %), by words 237 and 240. (Round 66's and 65's rankers: 233 / 237;
/// round 59's: 229 / 234; round 48's: 224 / 233; round 32's: 215 (89.6 %) / 226
/// (94.2 %), five.)
const HELD_OUT_110: &str = "heldout-43-round110.json";
const ROUND_110_WORDS_FLOORS: (f64, f64) = (98.7, 99.5);
const ROUND_110_MEANING_FLOORS: (f64, f64) = (99.5, 99.5);

#[test]
fn on_round_110s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_110, ROUND_110_WORDS_FLOORS, ROUND_110_MEANING_FLOORS);
}

/// Round 111's held-out questions (`heldout-43-round111.json`, 240, translators
/// and localisation teams: strings files (.po, .xliff, .json), locales,
/// glossaries, term bases, reviewers in other zones, which term maps to which;
/// 21 in other languages), measured once on round 67's ranker before any was
/// read: with meaning 231 of 240 first (96.2 %) and 237 in the top three
/// (98.8 %), asked for 19; by words 230 and 237, no empty answer. Read in round 68: 239 (99.6 %) and 240 (100 %), by words 237 and 240.
/// (Round 66's and 65's rankers: the same; round 59's: 229 / 236; round 48's:
/// 222 / 231, three; round 32's: 215 (89.6 %) / 225 (93.8 %), seven.)
const HELD_OUT_111: &str = "heldout-43-round111.json";
const ROUND_111_WORDS_FLOORS: (f64, f64) = (98.7, 99.5);
const ROUND_111_MEANING_FLOORS: (f64, f64) = (99.5, 99.5);

#[test]
fn on_round_111s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_111, ROUND_111_WORDS_FLOORS, ROUND_111_MEANING_FLOORS);
}

/// Round 112's held-out questions (`heldout-43-round112.json`, 240,
/// genealogists and family historians: relatives and ancestors, parish
/// registers, GEDCOM files, scanned letters and photographs, archives in other
/// zones; 40 in other languages), measured once on round 67's ranker after its
/// review before any was read: with meaning 228 of 240 first (95 %) and 236 in
/// the top three (98.3 %), asked for 24; by words 226 and 236, one empty
/// answer. Read in round 69: 238 (99.2 %) and 240 (100 %), by words 236 and
/// 240. (Round 68's first version: the same; round 59's: 225 / 235, two empty
/// by words; round 48's: 220 / 233, two; round 32's: 209 (87.1 %) / 224 (93.3
/// %), seven.)
const HELD_OUT_112: &str = "heldout-43-round112.json";
const ROUND_112_WORDS_FLOORS: (f64, f64) = (98.3, 99.5);
const ROUND_112_MEANING_FLOORS: (f64, f64) = (99.1, 99.5);

#[test]
fn on_round_112s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_112, ROUND_112_WORDS_FLOORS, ROUND_112_MEANING_FLOORS);
}

/// Round 113's held-out questions (`heldout-43-round113.json`, 240, sports
/// coaches, athletes, trainers and team managers: training logs, match footage,
/// rosters, fixtures across zones, who coaches whom; 22 in other languages),
/// measured once on round 67's ranker after its review before any was read:
/// with meaning 237 of 240 first (98.8 %) and 240 in the top three (100 %),
/// asked for 18; by words 237 and 240, no empty answer. Read in round 69: 240
/// (100 %) and 240 (100 %), by words 240 and 240. (Round 68's first version:
/// the same; round 59's: 231 / 238; round 48's: 227 / 235, two; round 32's: 223
/// (92.9 %) / 231 (96.2 %), five.)
const HELD_OUT_113: &str = "heldout-43-round113.json";
const ROUND_113_WORDS_FLOORS: (f64, f64) = (99.5, 99.5);
const ROUND_113_MEANING_FLOORS: (f64, f64) = (99.5, 99.5);

#[test]
fn on_round_113s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_113, ROUND_113_WORDS_FLOORS, ROUND_113_MEANING_FLOORS);
}

/// Round 114's held-out questions (`heldout-43-round114.json`, 240, chefs,
/// bakers, restaurant staff and small-shop owners: recipes, suppliers, menus,
/// stock sheets, rotas, dish photos; 22 in other languages), measured once on
/// round 67's ranker after its review before any was read: with meaning 233 of
/// 240 first (97.1 %) and 238 in the top three (99.2 %), asked for 20; by words
/// 231 and 238, no empty answer. Read in round 69: 239 (99.6 %) and 240 (100
/// %), by words 237 and 240. (Round 68's first version: 235 / 239; round 59's:
/// 229 / 236, one; round 48's: 229 / 236, one; round 32's: 223 (92.9 %) / 231
/// (96.2 %), five.)
const HELD_OUT_114: &str = "heldout-43-round114.json";
const ROUND_114_WORDS_FLOORS: (f64, f64) = (98.7, 99.5);
const ROUND_114_MEANING_FLOORS: (f64, f64) = (99.5, 99.5);

#[test]
fn on_round_114s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_114, ROUND_114_WORDS_FLOORS, ROUND_114_MEANING_FLOORS);
}

/// Round 115's held-out questions (`heldout-43-round115.json`, 240, volunteer
/// coordinators, community organisers and club secretaries: volunteers, donors,
/// minutes, flyers, partners abroad; 21 in other languages), measured once on
/// round 67's ranker after its review before any was read: with meaning 226 of
/// 240 first (94.2 %) and 237 in the top three (98.8 %), asked for 21; by words
/// 226 and 236, no empty answer. Read in round 69: 236 (98.3 %) and 240 (100
/// %), by words 236 and 239. (Round 68's first version: 227 / 237; round 59's:
/// 224 / 236; round 48's: 221 / 234; round 32's: 219 (91.2 %) / 231 (96.2 %),
/// four.)
const HELD_OUT_115: &str = "heldout-43-round115.json";
const ROUND_115_WORDS_FLOORS: (f64, f64) = (98.3, 99.5);
const ROUND_115_MEANING_FLOORS: (f64, f64) = (98.3, 99.5);

#[test]
fn on_round_115s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_115, ROUND_115_WORDS_FLOORS, ROUND_115_MEANING_FLOORS);
}

/// Round 116's held-out questions (`heldout-43-round116.json`, 240, clinic and
/// hospital administrators, pharmacists and lab technicians: rotas, supplier
/// catalogues, lab result files, scanned forms; 22 in other languages),
/// measured once on round 67's ranker after its review before any was read:
/// with meaning 233 of 240 first (97.1 %) and 237 in the top three (98.8 %),
/// asked for 25; by words 232 and 238, no empty answer. Read in round 70: 236
/// (98.3 %) and 238 (99.2 %), by words 236 and 239. (Round 69's first version:
/// the same; round 59's: 230 / 237; round 48's: 226 / 233, one; round 32's: 219
/// (91.2 %) / 228 (95 %), two.)
const HELD_OUT_116: &str = "heldout-43-round116.json";
const ROUND_116_WORDS_FLOORS: (f64, f64) = (98.3, 99.5);
const ROUND_116_MEANING_FLOORS: (f64, f64) = (98.3, 99.1);

#[test]
fn on_round_116s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_116, ROUND_116_WORDS_FLOORS, ROUND_116_MEANING_FLOORS);
}

/// Round 117's held-out questions (`heldout-43-round117.json`, 240, field
/// scientists (ecologists, geologists, astronomers, oceanographers): instrument
/// logs, sample IDs, field photos, observatories; 22 in other languages),
/// measured once on round 67's ranker after its review before any was read:
/// with meaning 228 of 240 first (95 %) and 234 in the top three (97.5 %),
/// asked for 21; by words 225 and 234, no empty answer. Read in round 70: 240
/// (100 %) and 240 (100 %), by words 237 and 240. (Round 69's first version:
/// 229 / 235; round 59's: 224 / 232, one; round 48's: 221 / 230, one; round
/// 32's: 212 (88.3 %) / 225 (93.8 %), five.)
const HELD_OUT_117: &str = "heldout-43-round117.json";
const ROUND_117_WORDS_FLOORS: (f64, f64) = (98.7, 99.5);
const ROUND_117_MEANING_FLOORS: (f64, f64) = (99.5, 99.5);

#[test]
fn on_round_117s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_117, ROUND_117_WORDS_FLOORS, ROUND_117_MEANING_FLOORS);
}

/// Round 118's held-out questions (`heldout-43-round118.json`, 240, site
/// managers, architects and civil engineers: drawings, CAD exports, site
/// photos, snag lists, suppliers abroad; 23 in other languages), measured once
/// on round 67's ranker after its review before any was read: with meaning 229
/// of 240 first (95.4 %) and 238 in the top three (99.2 %), asked for 17; by
/// words 229 and 238, no empty answer. Read in round 70: 236 (98.3 %) and 240
/// (100 %), by words 235 and 240. (Round 69's first version: 231 / 238; round
/// 59's: 227 / 236; round 48's: 223 / 233; round 32's: 219 (91.2 %) / 228 (95
/// %), four.)
const HELD_OUT_118: &str = "heldout-43-round118.json";
const ROUND_118_WORDS_FLOORS: (f64, f64) = (97.9, 99.5);
const ROUND_118_MEANING_FLOORS: (f64, f64) = (98.3, 99.5);

#[test]
fn on_round_118s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_118, ROUND_118_WORDS_FLOORS, ROUND_118_MEANING_FLOORS);
}

/// Round 119's held-out questions (`heldout-43-round119.json`, 240, hotel
/// front-desk, housekeeping and concierge staff: guest requests, room lists,
/// lost and found, shift handovers; 25 in other languages), measured once on
/// round 67's ranker after its review before any was read: with meaning 227 of
/// 240 first (94.6 %) and 236 in the top three (98.3 %), asked for 24; by words
/// 227 and 236, one empty answer. Read in round 70: 236 (98.3 %) and 239 (99.6
/// %), by words 236 and 239. (Round 69's first version: 230 / 236; round 59's:
/// 224 / 233, one; round 48's: 218 / 229, three; round 32's: 212 (88.3 %) / 223
/// (92.9 %), seven.)
const HELD_OUT_119: &str = "heldout-43-round119.json";
const ROUND_119_WORDS_FLOORS: (f64, f64) = (98.3, 99.5);
const ROUND_119_MEANING_FLOORS: (f64, f64) = (98.3, 99.5);

#[test]
fn on_round_119s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_119, ROUND_119_WORDS_FLOORS, ROUND_119_MEANING_FLOORS);
}

/// Round 120's held-out questions (`heldout-43-round120.json`, 240, veterinary
/// clinic staff and animal-shelter volunteers: animals' records, adopters,
/// vaccinations, X-rays, partner shelters; 24 in other languages), measured
/// once on round 70's ranker before any was read: with meaning 231 of 240 first
/// (96.2 %) and 237 in the top three (98.8 %), asked for 22; by words 230 and
/// 237, no empty answer. Read in round 71: 235 (97.9 %) and 239 (99.6 %), by
/// words 234 and 239. (Round 67's after its review: the same; round 59's: 229 /
/// 236; round 48's: 226 / 234, two; round 32's: 218 (90.8 %) / 227 (94.6 %),
/// five.)
const HELD_OUT_120: &str = "heldout-43-round120.json";
const ROUND_120_WORDS_FLOORS: (f64, f64) = (97.4, 99.5);
const ROUND_120_MEANING_FLOORS: (f64, f64) = (97.9, 99.5);

#[test]
fn on_round_120s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_120, ROUND_120_WORDS_FLOORS, ROUND_120_MEANING_FLOORS);
}

/// Round 121's held-out questions (`heldout-43-round121.json`, 240, open-source
/// maintainers triaging issues and cutting releases: changelogs, contributors,
/// CI logs, who maintains what; 21 in other languages), measured once on round
/// 70's ranker before any was read: with meaning 233 of 240 first (97.1 %) and
/// 239 in the top three (99.6 %), asked for 17; by words 232 and 239, no empty
/// answer. Read in round 71: 235 (97.9 %) and 239 (99.6 %), by words 233 and
/// 239. (Round 67's after its review: the same; round 59's: 230 / 239, one;
/// round 48's: 226 / 237, one; round 32's: 221 (92.1 %) / 230 (95.8 %), three.)
const HELD_OUT_121: &str = "heldout-43-round121.json";
const ROUND_121_WORDS_FLOORS: (f64, f64) = (97.0, 99.5);
const ROUND_121_MEANING_FLOORS: (f64, f64) = (97.9, 99.5);

#[test]
fn on_round_121s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_121, ROUND_121_WORDS_FLOORS, ROUND_121_MEANING_FLOORS);
}

/// Round 122's held-out questions (`heldout-43-round122.json`, 240, fashion
/// designers, tailors and boutique owners: pattern files, fabric suppliers,
/// lookbook photos, size charts, fittings across zones; 21 in other languages),
/// measured once on round 70's ranker before any was read: with meaning 232 of
/// 240 first (96.7 %) and 237 in the top three (98.8 %), asked for 25; by words
/// 232 and 237, no empty answer. Read in round 71: 235 (97.9 %) and 239 (99.6
/// %), by words 235 and 239. (Round 67's after its review: 231 / 237; round
/// 59's: 227 / 235; round 48's: 222 / 232, two; round 32's: 217 (90.4 %) / 226
/// (94.2 %), eight.)
const HELD_OUT_122: &str = "heldout-43-round122.json";
const ROUND_122_WORDS_FLOORS: (f64, f64) = (97.9, 99.5);
const ROUND_122_MEANING_FLOORS: (f64, f64) = (97.9, 99.5);

#[test]
fn on_round_122s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_122, ROUND_122_WORDS_FLOORS, ROUND_122_MEANING_FLOORS);
}

/// Round 123's held-out questions (`heldout-43-round123.json`, 240, town-hall
/// clerks and local public servants: permits, council minutes, residents'
/// requests, scanned forms, twin towns; 23 in other languages), measured once
/// on round 70's ranker before any was read: with meaning 231 of 240 first
/// (96.2 %) and 238 in the top three (99.2 %), asked for 18; by words 230 and
/// 238, no empty answer. Read in round 71: 237 (98.8 %) and 239 (99.6 %), by
/// words 235 and 239. (Round 67's after its review: 231 / 238; round 59's: 229
/// / 237; round 48's: 227 / 235, two; round 32's: 222 (92.5 %) / 230 (95.8 %),
/// six.)
const HELD_OUT_123: &str = "heldout-43-round123.json";
const ROUND_123_WORDS_FLOORS: (f64, f64) = (97.9, 99.5);
const ROUND_123_MEANING_FLOORS: (f64, f64) = (98.7, 99.5);

#[test]
fn on_round_123s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_123, ROUND_123_WORDS_FLOORS, ROUND_123_MEANING_FLOORS);
}

/// Round 124's held-out questions (`heldout-43-round124.json`, 240, insurance
/// claims adjusters and loss assessors: claim files, photos of damage, policy
/// wording, site visits, reinsurers abroad; about 22 in other languages),
/// measured once on round 70's ranker before any was read: with meaning 234 of
/// 240 first (97.5 %) and 239 in the top three (99.6 %), asked for 27; by words
/// 233 and 240, no empty answer. Read in round 71: 235 (97.9 %) and 239 (99.6
/// %), by words 234 and 240. (Round 59's: 229 / 239; round 48's: 228 / 238;
/// round 32's: 223 (92.9 %) / 235 (97.9 %), two.)
const HELD_OUT_124: &str = "heldout-43-round124.json";
const ROUND_124_WORDS_FLOORS: (f64, f64) = (97.4, 99.5);
const ROUND_124_MEANING_FLOORS: (f64, f64) = (97.9, 99.5);

#[test]
fn on_round_124s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_124, ROUND_124_WORDS_FLOORS, ROUND_124_MEANING_FLOORS);
}

/// Round 125's held-out questions (`heldout-43-round125.json`, 240, musicians,
/// music teachers and sound engineers: rehearsals, stems and takes, setlists,
/// tour dates across zones, students; about 22 in other languages), measured
/// once on round 70's ranker before any was read: with meaning 236 of 240 first
/// (98.3 %) and 239 in the top three (99.6 %), asked for 24; by words 232 and
/// 240, no empty answer. Read in round 71: 237 (98.8 %) and 240 (100 %), by
/// words 233 and 240. (Round 59's: 232 / 238, one; round 48's: 230 / 237, two;
/// round 32's: 222 (92.5 %) / 230 (95.8 %), four.)
const HELD_OUT_125: &str = "heldout-43-round125.json";
const ROUND_125_WORDS_FLOORS: (f64, f64) = (97.0, 99.5);
const ROUND_125_MEANING_FLOORS: (f64, f64) = (98.7, 99.5);

#[test]
fn on_round_125s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_125, ROUND_125_WORDS_FLOORS, ROUND_125_MEANING_FLOORS);
}

/// Round 126's held-out questions (`heldout-43-round126.json`, 240, freight
/// dispatchers and truck drivers: loads, manifests, drivers' hours, depots,
/// delivery windows across zones; about 24 in other languages), measured once
/// on round 70's ranker before any was read: with meaning 234 of 240 first
/// (97.5 %) and 240 in the top three (100 %), asked for 13; by words 233 and
/// 240, no empty answer. Read in round 71: 237 (98.8 %) and 240 (100 %), by
/// words 236 and 240. (Round 59's: 232 / 240; round 48's: 231 / 240, one; round
/// 32's: 224 (93.3 %) / 233 (97.1 %), seven.)
const HELD_OUT_126: &str = "heldout-43-round126.json";
const ROUND_126_WORDS_FLOORS: (f64, f64) = (98.3, 99.5);
const ROUND_126_MEANING_FLOORS: (f64, f64) = (98.7, 99.5);

#[test]
fn on_round_126s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_126, ROUND_126_WORDS_FLOORS, ROUND_126_MEANING_FLOORS);
}

/// Round 127's held-out questions (`heldout-43-round127.json`, 240, museum
/// curators and collection registrars: object records, loans, condition
/// reports, image files, openings abroad; about 22 in other languages),
/// measured once on round 70's ranker before any was read: with meaning 233 of
/// 240 first (97.1 %) and 238 in the top three (99.2 %), asked for 19; by words
/// 233 and 238, no empty answer. Read in round 71: 239 (99.6 %) and 240 (100
/// %), by words 239 and 240. (Round 59's: 230 / 236; round 48's: 228 / 234;
/// round 32's: 223 (92.9 %) / 230 (95.8 %), three.)
const HELD_OUT_127: &str = "heldout-43-round127.json";
const ROUND_127_WORDS_FLOORS: (f64, f64) = (99.5, 99.5);
const ROUND_127_MEANING_FLOORS: (f64, f64) = (99.5, 99.5);

#[test]
fn on_round_127s_held_out_questions_search_tools_ranks_the_wanted_tool_first_by_words_and_more_with_meaning() {
    measure_held_out_once(HELD_OUT_127, ROUND_127_WORDS_FLOORS, ROUND_127_MEANING_FLOORS);
}

/// The eight sets written while round 71 was under way (`heldout-43-round128`
/// to `135`, 1,920 questions, each by a helper from the tool list alone),
/// measured once on round 70's ranker (f847d8f, committed before any was
/// written) and once on round 71's; never read, save the two questions round
/// 70's ranker answered empty by words (one each in 130 and 131, read in
/// round 71). With meaning / by words, first / top three (meaning asked):
/// - 128, airline dispatchers and pilots: 231 / 240 (26), by words 232 / 240;
///   round 71's: 231 / 240, by words 232 / 240
/// - 129, farmers and beekeepers: 232 / 240 (20), by words 232 / 240; round
///   71's: 233 / 240, by words 233 / 240
/// - 130, wedding and event photographers: 229 / 234 (23), by words 228 / 234,
///   one empty answer; round 71's: 230 / 235, by words 229 / 235
/// - 131, port agents and ship chandlers: 234 / 239 (23), by words 233 / 239,
///   one empty answer; round 71's: 235 / 240, by words 234 / 240
/// - 132, indie game developers: 235 / 239 (16), by words 234 / 239; round
///   71's: 235 / 239, by words 234 / 239
/// - 133, recruiters: 232 / 239 (20), by words 233 / 239; round 71's: 232 /
///   239, by words 233 / 239
/// - 134, call-centre and customer-support agents: 232 / 238 (20), by words
///   229 / 238; round 71's: 232 / 238, by words 229 / 238
/// - 135, public librarians: 236 / 239 (21), by words 234 / 238; round 71's:
///   236 / 239, by words 234 / 238
///
/// Pooled on round 71's ranker: with meaning 1,864 of 1,920 first (97.1 %)
/// and 1,910 in the top three (99.5 %); by words 1,858 (96.8 %) and 1,909
/// (99.4 %). Each set holds its floors, and the pool the issue's targets
/// themselves: first at least 95 %, the top three at least 99 %, both ways.
const NEVER_READ: [(&str, Floors, Floors); 8] = [
    ("heldout-43-round128.json", (96.6, 99.5), (96.2, 99.5)),
    ("heldout-43-round129.json", (97.0, 99.5), (97.0, 99.5)),
    ("heldout-43-round130.json", (95.4, 97.9), (95.8, 97.9)),
    ("heldout-43-round131.json", (97.4, 99.5), (97.9, 99.5)),
    ("heldout-43-round132.json", (97.4, 99.5), (97.9, 99.5)),
    ("heldout-43-round133.json", (97.0, 99.5), (96.6, 99.5)),
    ("heldout-43-round134.json", (95.4, 99.1), (96.6, 99.1)),
    ("heldout-43-round135.json", (97.4, 99.1), (98.3, 99.5)),
];

/// The issue's targets on held-out questions, in percent: the wanted tool
/// first, and in the top three.
const TARGETS: (f64, f64) = (95.0, 99.0);

#[test]
fn on_eight_sets_never_read_search_tools_meets_the_issues_targets_pooled_and_each_set_holds_its_floors() {
    let Some(python) = python() else { return };
    let Some(encoder) = encoder() else { return };
    let (mut words, mut meaning) = (Ranked::new(), Ranked::new());
    for (file, words_floors, meaning_floors) in NEVER_READ {
        let (by_words, with_meaning) = rank_and_hold(&python, &encoder, file, words_floors, meaning_floors);
        words.extend(by_words);
        meaning.extend(with_meaning);
    }
    for (label, rs) in [("words alone", &words), ("with meaning", &meaning)] {
        let (n, first, top3) = recall(rs);
        print_row(&format!("the eight never read, pooled, {label}"), (n, first, top3));
        assert_eq!(n, 1920, "{label}: eight sets of 240");
        assert!(percent(first, n) >= TARGETS.0, "{label}: the wanted tool is first for only {first} of {n}");
        assert!(percent(top3, n) >= TARGETS.1, "{label}: in the top three for only {top3} of {n}");
    }
}
