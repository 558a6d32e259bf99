//! The bridge's side of search by meaning (issue 43): a real bridge over
//! the test server, with and without the sentence encoder
//! (`rank_by_meaning_with`), answering a cell's question
//! (`Bridge::meaning`, what `codemode.v1.search.meaning` serves).

use std::sync::Arc;
use std::time::Duration;

use code_mode_proto::{MeaningAsk, MeaningReply};
use serde_json::json;

use crate::search_eval::encoder;
use crate::support::{Harness, ok};

fn ask(query: &str) -> MeaningAsk {
    MeaningAsk { query: query.into() }
}

/// The tools of a `Near` answer, nearest first.
fn nearest(reply: MeaningReply) -> Vec<(String, f32)> {
    let MeaningReply::Near { tools } = reply else { panic!("no answer by meaning: {reply:?}") };
    let mut tools: Vec<(String, f32)> = tools.into_iter().map(|t| (t.tool, t.cosine)).collect();
    tools.sort_by(|a, b| b.1.total_cmp(&a.1));
    tools
}

#[tokio::test]
async fn a_bridge_without_a_search_model_answers_that_it_ranks_by_words_alone() {
    let h = Harness::with_args(&[]).await;
    match h.bridge.meaning(&ask("add two numbers")).await {
        MeaningReply::Unavailable { reason } => assert!(reason.contains("--search-model"), "{reason}"),
        other => panic!("an answer by meaning without a model: {other:?}"),
    }
    h.close().await;
}

#[tokio::test]
async fn asked_before_its_tools_are_read_the_bridge_waits_for_the_read_and_answers_every_offered_tool() {
    let Some(encoder) = encoder() else { return };
    let h = Harness::with_args(&["--add-tool"]).await;
    h.bridge.rank_by_meaning_with(Arc::new(encoder));
    // Asked at once: the read of the catalog has only begun.
    let near = nearest(h.bridge.meaning(&ask("sum of two integers")).await);
    let offered: Vec<String> = h.bridge.catalog().tools().iter().map(|t| t.name.clone()).collect();
    let mut answered: Vec<String> = near.iter().map(|(name, _)| name.clone()).collect();
    answered.sort();
    let mut sorted = offered.clone();
    sorted.sort();
    assert_eq!(answered, sorted, "every offered tool, once");
    assert_eq!(near[0].0, "add", "the nearest in meaning: {:?}", &near[..3]);
    assert!(near.iter().all(|(_, c)| c.is_finite() && (-1.01..=1.01).contains(c)), "{near:?}");

    // A tool the server adds later is read with the refreshed catalog.
    assert_eq!(ok(h.call("add_tool", json!({"name": "weather-report"})).await), "added weather-report");
    let mut found = false;
    for _ in 0..100 {
        let near = nearest(h.bridge.meaning(&ask("what is the forecast, weather report")).await);
        if near.iter().any(|(name, _)| name == "weather_report") {
            assert_eq!(near[0].0, "weather_report", "{:?}", &near[..3]);
            found = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(found, "the added tool is answered within 10 s");
    let metrics = code_mode_telemetry::metrics().render();
    assert!(
        metrics.lines().any(|l| l.starts_with("codemode_search_meaning_total{answer=\"near\"}") && !l.ends_with(" 0")),
        "the answers are counted: {metrics}"
    );
    h.close().await;
}

#[tokio::test]
async fn an_answer_by_meaning_names_only_the_tools_the_catalog_offers_never_one_a_policy_withholds() {
    let Some(encoder) = encoder() else { return };
    let h = crate::support::Setup::server(&[])
        .policy(r#"{"version": "1", "default": "allow", "tools": {"echo": {"action": "deny", "reason": "echo leaks text"}}}"#)
        .start()
        .await
        .expect("the bridge starts");
    assert!(h.bridge.catalog().get("echo").is_none(), "the denied tool is withheld");
    h.bridge.rank_by_meaning_with(Arc::new(encoder));
    let near = nearest(h.bridge.meaning(&ask("echo this text back to me")).await);
    let offered: std::collections::BTreeSet<String> =
        h.bridge.catalog().tools().iter().map(|t| t.name.clone()).collect();
    assert!(near.iter().all(|(name, _)| offered.contains(name)), "only offered tools: {near:?}");
    assert!(!near.iter().any(|(name, _)| name == "echo"), "the withheld tool is not named");
    h.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_past_the_encoders_threads_is_told_busy_within_the_bound_and_the_next_question_is_answered() {
    use code_mode_bridge::meaning::{AT_ONCE, BUSY_WAIT};
    let Some(encoder) = encoder() else { return };
    let h = Harness::with_args(&[]).await;
    h.bridge.rank_by_meaning_with(Arc::new(encoder));
    assert!(h.bridge.meaning_read(Duration::from_secs(30)).await, "the tools are read");
    // Long questions (~200 word pieces each, tens of ms of one core) at
    // once, a hundred for each encoder thread: far more than the threads
    // finish within one question's wait for them, however fast the machine
    // (a burst of 16 was all answered in CI, 0.94 s in all).
    let burst = 100 * AT_ONCE;
    let mut asked = tokio::task::JoinSet::new();
    for i in 0..burst {
        let bridge = h.bridge.clone();
        let query =
            format!("question {i}: ") + &"add these two numbers together and echo the sum back please ".repeat(16);
        asked.spawn(async move {
            let started = std::time::Instant::now();
            let reply = bridge.meaning(&ask(&query)).await;
            (reply, started.elapsed())
        });
    }
    let (mut near, mut busy) = (0, 0);
    while let Some(done) = asked.join_next().await {
        let (reply, took) = done.unwrap();
        match reply {
            MeaningReply::Near { tools } => {
                assert!(!tools.is_empty());
                near += 1;
            }
            MeaningReply::Unavailable { reason } => {
                assert!(reason.contains("busy"), "{reason}");
                // Told at once when its wait for a thread ends, never later
                // than the wait and one question's pass before it.
                assert!(took < BUSY_WAIT + Duration::from_secs(10), "told busy after {took:?}");
                busy += 1;
            }
        }
    }
    assert!(near >= AT_ONCE, "the first questions are answered: {near} of {burst}");
    assert!(busy > 0, "past the threads, questions are told busy: {near} answered of {burst}");
    eprintln!("measured: of {burst} long questions at once, {near} answered and {busy} told busy");
    // The threads are given back: the next question is answered.
    let after = nearest(h.bridge.meaning(&ask("add two numbers")).await);
    assert_eq!(after[0].0, "add", "{:?}", &after[..3]);
    let metrics = code_mode_telemetry::metrics().render();
    let counted = |answer: &str| {
        let line = format!("codemode_search_meaning_total{{answer=\"{answer}\"}} ");
        metrics.lines().find_map(|l| l.strip_prefix(&line)?.parse::<u64>().ok()).unwrap_or(0)
    };
    assert_eq!(counted("busy"), busy, "each busy answer is counted as busy: {metrics}");
    assert!(counted("near") > near as u64, "and each answer as near");
    h.close().await;
}

/// A question whose catalog takes longer than `READ_WAIT` to read (300
/// tools: seconds of one core) is told "not read" at that bound, so the
/// cell ranks by words at once, and the read goes on: once it is done the
/// same question is answered for every tool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_whose_tools_take_longer_than_the_read_wait_is_told_not_read_at_the_bound_and_answered_once_read() {
    use code_mode_bridge::meaning::{Meaning, READ_WAIT, Unanswered};
    let Some(encoder) = encoder() else { return };
    let tasks = tokio_util::task::TaskTracker::new();
    let stop = tokio_util::sync::CancellationToken::new();
    let meaning = Meaning::start(Arc::new(encoder), &tasks, stop.clone());
    let catalog = Arc::new(crate::search_eval::catalog_of(300));
    let started = std::time::Instant::now();
    let first = meaning.ask(1, catalog.clone(), "add two numbers").await;
    let waited = started.elapsed();
    let told = first.as_ref().err().copied();
    assert_eq!(told, Some(Unanswered::NotRead), "asked at once: {:?}", first.map(|n| n.len()));
    assert_eq!(Unanswered::NotRead.label(), "not_read");
    assert!(
        waited >= READ_WAIT && waited < READ_WAIT + Duration::from_secs(3),
        "told after {waited:?}, the bound is {READ_WAIT:?}"
    );
    assert!(meaning.read(1, catalog.clone(), Duration::from_secs(180)).await, "the 300 tools are read");
    eprintln!("measured: 300 tools read {:?} after the first question", started.elapsed());
    let near = meaning.ask(1, catalog.clone(), "add two numbers").await.expect("answered once read");
    assert_eq!(near.len(), catalog.tools().len(), "every tool of the catalog");
    stop.cancel();
    tasks.close();
    tasks.wait().await;
}
