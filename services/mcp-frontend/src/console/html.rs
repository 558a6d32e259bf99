//! The console's HTML: one escaping function ([`escape`]) that every
//! value from a tool, a policy, a client or code goes through, cut to a
//! bound first ([`shown`]); and the pages, built as strings (no template
//! engine, no JavaScript). A page's only active parts are links and forms
//! posting to the console itself, each form with its CSRF field.

use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use code_mode_proto::{Decision, ReloadStatus, RunnerStatus, WaitingCall};

use crate::activity::{RunningCell, Snapshot};

/// Longest text of one value shown (a name, a rule, a note), in
/// characters.
pub const SHORT: usize = 200;
/// Longest argument summary shown (the bridge cuts it to 400 already).
pub const SUMMARY: usize = 1000;
/// Longest `args` JSON or audit record shown.
pub const LONG: usize = 4000;
/// Longest cell code shown (the bridge cuts it to
/// [`code_mode_proto::CODE_SHOWN`] already, and says how much it cut).
pub const CODE: usize = code_mode_proto::CODE_SHOWN + 200;

/// `text` safe inside HTML text and inside a double- or single-quoted
/// attribute: `&`, `<`, `>`, `"` and `'` become entities. Every value that
/// did not come from this file goes through here.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `text` in at most `max` characters (a cut one ends with `…`).
pub fn cut(text: &str, max: usize) -> String {
    code_mode_core::text::cut_chars(text, max, code_mode_core::text::PEOPLE_MARK)
}

/// `text` cut to `max` characters, then escaped: how every outside value
/// reaches a page.
pub fn shown(text: &str, max: usize) -> String {
    escape(&cut(text, max))
}

/// `text` as one URL path segment: anything but unreserved characters is
/// percent-encoded (question ids are UUIDs, but nothing relies on it).
pub fn path_segment(text: &str) -> String {
    let mut out = String::new();
    for b in cut(text, SHORT).bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// Unix milliseconds now.
pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// Unix milliseconds as `YYYY-MM-DD HH:MM:SS UTC`.
pub fn utc(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = code_mode_core::calendar::civil_date(days);
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC", rest / 3600, rest % 3600 / 60, rest % 60)
}

/// A duration in seconds as `1 h 2 min`, `3 min 4 s` or `5 s`.
pub fn span(secs: u64) -> String {
    match secs {
        0..60 => format!("{secs} s"),
        60..3600 => format!("{} min {} s", secs / 60, secs % 60),
        _ => format!("{} h {} min", secs / 3600, secs % 3600 / 60),
    }
}

/// What a page knows of its viewer, for the frame.
pub struct Frame<'a> {
    /// The viewer's name (`None`: the login page).
    pub viewer: Option<&'a str>,
    /// The CSRF value of the viewer's forms.
    pub csrf: &'a str,
    /// The viewer is an operator (the operations link is shown).
    pub operator: bool,
    /// Refresh the page every 5 s.
    pub refresh: bool,
}

/// A whole page: the frame around `body` (already HTML).
pub fn page(title: &str, frame: &Frame<'_>, body: &str) -> String {
    let refresh = if frame.refresh { "<meta http-equiv=\"refresh\" content=\"5\">\n" } else { "" };
    framed(title, frame, body, refresh)
}

/// A whole page that sends the browser on to `to` (a path of the console)
/// at once, by a meta refresh: a navigation the console's own page starts.
pub fn page_going_to(title: &str, frame: &Frame<'_>, body: &str, to: &str) -> String {
    framed(title, frame, body, &format!("<meta http-equiv=\"refresh\" content=\"0; url={}\">\n", escape(to)))
}

fn framed(title: &str, frame: &Frame<'_>, body: &str, refresh: &str) -> String {
    let mut nav = String::new();
    if let Some(viewer) = frame.viewer {
        nav.push_str("<nav><a href=\"/console\">Waiting calls</a> <a href=\"/console/accounts\">Accounts</a>");
        if frame.operator {
            nav.push_str(" <a href=\"/console/operations\">Operations</a>");
        }
        let _ = write!(
            nav,
            " <span class=\"who\">{}</span> <form method=\"post\" action=\"/console/logout\" class=\"inline\">\
             <input type=\"hidden\" name=\"csrf\" value=\"{}\"><button type=\"submit\">Log out</button></form></nav>",
            shown(viewer, SHORT),
            escape(frame.csrf),
        );
    }
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n{refresh}\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{title} · code-mode console</title>\n<link rel=\"stylesheet\" href=\"/console/style.css\">\n</head>\n\
         <body>\n<header><strong>code-mode</strong> console {nav}</header>\n<main>\n<h1>{title}</h1>\n{body}</main>\n\
         </body>\n</html>\n",
        title = escape(title),
    )
}

/// The login form (`error`: why the last try failed, our own text); with
/// `issuer`, a link signing in there first.
/// `next`: the console path to go to once logged in (a connect link).
pub fn login(csrf: &str, error: Option<&str>, issuer: Option<&str>, next: Option<&str>) -> String {
    let back = next.map(|n| format!("?next={}", path_segment(n))).unwrap_or_default();
    let next =
        next.map(|n| format!("<input type=\"hidden\" name=\"next\" value=\"{}\">\n", escape(n))).unwrap_or_default();
    let error = error.map(|e| format!("<p class=\"refusal\">{}</p>\n", escape(e))).unwrap_or_default();
    let oauth = issuer
        .map(|issuer| {
            format!(
                "<p><a class=\"sign-in\" href=\"/console/login/oauth{back}\">Sign in with {}</a></p>\n<p class=\"muted\">\
                 Or:</p>\n",
                shown(issuer, SHORT)
            )
        })
        .unwrap_or_default();
    let body = format!(
        "{error}{oauth}<p>Paste the bearer token you use for MCP (a static token or an OAuth access token). The console \
         keeps it in a cookie for this site only and checks it again on every page.</p>\n\
         <form method=\"post\" action=\"/console/login\">\n<input type=\"hidden\" name=\"csrf\" value=\"{}\">\n{next}\
         <label for=\"token\">Token</label>\n<input type=\"password\" id=\"token\" name=\"token\" autocomplete=\"off\" \
         required>\n<button type=\"submit\">Log in</button>\n</form>\n",
        escape(csrf)
    );
    page("Log in", &Frame { viewer: None, csrf, operator: false, refresh: false }, &body)
}

/// One waiting call, with its decision form.
pub fn waiting_call(call: &WaitingCall, csrf: &str, now: u64) -> String {
    let mut out = String::new();
    let left = (call.asked_ms.saturating_add(call.timeout_ms)).saturating_sub(now) / 1000;
    let since = now.saturating_sub(call.asked_ms) / 1000;
    let _ = write!(
        out,
        "<section class=\"call\">\n<h2><code>{tool}</code> of <code>{server}</code></h2>\n<dl>\n\
         <dt>Rule</dt><dd><code>{rule}</code></dd>\n",
        tool = shown(&call.tool, SHORT),
        server = shown(&call.server, SHORT),
        rule = shown(&call.rule, SHORT),
    );
    if let Some(reason) = &call.reason {
        let _ = writeln!(out, "<dt>Reason</dt><dd>{}</dd>", shown(reason, SHORT));
    }
    let _ = writeln!(out, "<dt>Arguments</dt><dd><pre>{}</pre></dd>", shown(&call.arguments, SUMMARY));
    if let Some(args) = &call.args {
        let text = serde_json::to_string_pretty(args).unwrap_or_default();
        let _ = writeln!(out, "<dt>Arguments in full</dt><dd><pre>{}</pre></dd>", shown(&text, LONG));
    }
    // The code that made the call (the bridge got it from the runner):
    // what the call is part of, and what the code will do with its result.
    match &call.code {
        Some(code) => {
            let _ = writeln!(out, "<dt>Code of the cell</dt><dd><pre class=\"code\">{}</pre></dd>", shown(code, CODE));
        }
        None => {
            let _ = writeln!(
                out,
                "<dt>Code of the cell</dt><dd class=\"muted\">not known (a direct call, or its runner did not say)</dd>"
            );
        }
    }
    // Whether the answer still has a taker: a request that went (cancelled,
    // its client gone) stopped its cell, and its question is withdrawn.
    let waited = match call.still_waited {
        Some(true) => "<dd class=\"waited\">yes: the request that asked is open, its cell paused until you decide</dd>",
        Some(false) => {
            "<dd class=\"gone\">no: the request that asked is gone; the question is being withdrawn and cannot be \
             approved</dd>"
        }
        None => "<dd class=\"muted\">not known (a direct call, or its runner did not answer)</dd>",
    };
    let _ = writeln!(out, "<dt>Still waited for</dt>{waited}");
    let who = call.identity.as_deref().unwrap_or("(no identity)");
    let _ = write!(
        out,
        "<dt>Asked by</dt><dd>{who} <span class=\"muted\">session {session}, cell {cell}</span></dd>\n\
         <dt>Since</dt><dd>{at} ({ago} ago)</dd>\n<dt>Time left</dt><dd>{left}</dd>\n\
         <dt>Approvers</dt><dd>{approvers}</dd>\n<dt>Question</dt><dd><a href=\"/console/approvals/{link}\">{id}</a> \
         <span class=\"muted\">sha256 {sha}</span></dd>\n</dl>\n",
        who = shown(who, SHORT),
        session = shown(&call.session, SHORT),
        cell = shown(&call.cell_id, SHORT),
        at = utc(call.asked_ms),
        ago = span(since),
        left = if left == 0 { "none: it ends now".to_string() } else { span(left) },
        approvers = shown(&call.approvers.join(", "), SHORT),
        link = path_segment(&call.id),
        id = shown(&call.id, SHORT),
        sha = shown(&call.question_sha256, 64),
    );
    let _ = write!(
        out,
        "<form method=\"post\" action=\"/console/approvals/{link}\">\n\
         <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\n\
         <label for=\"note-{link}\">Note</label> <input type=\"text\" id=\"note-{link}\" name=\"note\" maxlength=\"500\">\n\
         <button type=\"submit\" name=\"decision\" value=\"approve\" class=\"approve\">Approve</button>\n\
         <button type=\"submit\" name=\"decision\" value=\"decline\" class=\"decline\">Decline</button>\n\
         </form>\n</section>\n",
        link = path_segment(&call.id),
        csrf = escape(csrf),
    );
    out
}

/// The table of decisions.
pub fn decisions(recent: &[Decision]) -> String {
    if recent.is_empty() {
        return "<p class=\"muted\">No decisions yet.</p>\n".into();
    }
    let mut out = String::from(
        "<table>\n<tr><th>When</th><th>Tool</th><th>Server</th><th>Asked by</th><th>Outcome</th><th>By</th>\
         <th>Note</th></tr>\n",
    );
    for d in recent.iter().take(50) {
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td><td class=\"{}\">{}</td><td>{}</td><td>{}</td></tr>",
            utc(d.at_ms),
            shown(&d.tool, SHORT),
            shown(&d.server, SHORT),
            shown(d.identity.as_deref().unwrap_or("-"), SHORT),
            outcome_class(&d.outcome),
            shown(&d.outcome, SHORT),
            shown(d.by.as_deref().unwrap_or("-"), SHORT),
            shown(&d.note, SHORT),
        );
    }
    out.push_str("</table>\n");
    out
}

/// A CSS class for an outcome (one of ours, never the outcome's text).
fn outcome_class(outcome: &str) -> &'static str {
    match outcome {
        "approved" => "approve",
        "declined" => "decline",
        _ => "muted",
    }
}

/// The board: what waits for the viewer, how many wait for others, the
/// recent decisions.
pub fn board(waiting: &[WaitingCall], others: u32, recent: &[Decision], csrf: &str) -> String {
    let now = now_ms();
    let mut out = String::new();
    if waiting.is_empty() {
        out.push_str("<p class=\"empty\">Nothing waits for you.</p>\n");
    }
    for call in waiting.iter().take(100) {
        out.push_str(&waiting_call(call, csrf, now));
    }
    let _ = writeln!(
        out,
        "<p class=\"muted\">{others} question{} wait{} for other approvers.</p>",
        if others == 1 { "" } else { "s" },
        if others == 1 { "s" } else { "" }
    );
    out.push_str("<h2>Recent decisions</h2>\n");
    out.push_str(&decisions(recent));
    out
}

/// A short message page's body: `text` is our own HTML.
pub fn message(text: &str) -> String {
    format!("<p>{text}</p>\n<p><a href=\"/console\">Back to the waiting calls</a></p>\n")
}

/// The operations view: this frontend's sessions and cells, the audit
/// log's tail.
/// What the bridges told the operations view: the runners' slots, the
/// sessions tainted by private data, the bridges' last config reloads
/// (each `Err` says why it is unknown).
pub struct FromBridges<'a> {
    /// The runners heard from lately.
    pub runners: Result<&'a [RunnerStatus], &'a str>,
    /// The tainted sessions among this frontend's.
    pub tainted: Result<&'a [String], &'a str>,
    /// Each bridge's last reload.
    pub reloads: Result<&'a [ReloadStatus], &'a str>,
}

/// The bridges' last config reloads: a failed one first, as a refusal,
/// with why the running config stayed.
fn reloads(out: &mut String, reloads: Result<&[ReloadStatus], &str>) {
    out.push_str("<h2>Config reloads</h2>\n");
    match reloads {
        Ok([]) => out.push_str("<p class=\"muted\">No bridge has reloaded its config (SIGHUP) since it started.</p>\n"),
        Ok(reloads) => {
            for r in reloads.iter().filter(|r| r.result != "ok").take(20) {
                let _ = writeln!(
                    out,
                    "<p class=\"refusal\">The last reload of bridge <code>{}</code> at {} did not apply ({}): the \
                     running config stays. {}</p>",
                    shown(&r.bridge, SHORT),
                    utc(r.at_ms),
                    shown(&r.result, SHORT),
                    shown(r.error.as_deref().unwrap_or(""), LONG),
                );
            }
            out.push_str("<table>\n<tr><th>Bridge</th><th>Last reload</th><th>Result</th><th>File</th></tr>\n");
            for r in reloads.iter().take(50) {
                let class = if r.result == "ok" { "approve" } else { "decline" };
                let _ = writeln!(
                    out,
                    "<tr><td><code>{}</code></td><td>{}</td><td class=\"{class}\">{}</td><td><code>{}</code></td></tr>",
                    shown(&r.bridge, SHORT),
                    utc(r.at_ms),
                    shown(&r.result, SHORT),
                    shown(&r.source, SHORT),
                );
            }
            out.push_str("</table>\n");
        }
        Err(why) => {
            let _ = writeln!(out, "<p class=\"refusal\">The reloads are unknown: {}</p>", shown(why, SHORT));
        }
    }
}

/// The cells running now, each with how long it ran and whether it is
/// held while a person decides on one of its calls (that time is not run
/// time: its container is paused and its deadline stopped).
fn running_cells(out: &mut String, running: &[RunningCell], now: SystemTime) {
    out.push_str("<h2>Cells running now</h2>\n");
    if running.is_empty() {
        out.push_str("<p class=\"muted\">No cell runs now.</p>\n");
        return;
    }
    out.push_str(
        "<table>\n<tr><th>Since</th><th>Cell</th><th>Identity</th><th>Session</th><th>Run for</th><th>State</th></tr>\n",
    );
    for c in running.iter().take(500) {
        let elapsed = now.duration_since(c.started).map_or(0, |d| d.as_secs());
        let held = c.held.map_or(0, |h| h.held_ms / 1000);
        let state = match c.held {
            Some(h) if h.paused => format!("<strong>held</strong>: a call waits for a person ({})", span(held)),
            Some(_) if held > 0 => format!("running (was held {})", span(held)),
            _ => "running".to_string(),
        };
        let started = c.started.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td><code>{}</code></td><td>{}</td><td><code>{}</code></td><td>{}</td><td>{state}</td></tr>",
            utc(started),
            shown(&c.cell_id, SHORT),
            shown(c.identity.as_deref().unwrap_or("-"), SHORT),
            shown(&c.session, SHORT),
            span(elapsed.saturating_sub(held)),
        );
    }
    out.push_str("</table>\n");
}

pub fn operations(
    snapshot: &Snapshot,
    bridges: FromBridges<'_>,
    audit: Result<(&[String], &str), &str>,
    now: SystemTime,
) -> String {
    let (sessions, cells) = (&snapshot.sessions, &snapshot.cells);
    let mut out = String::new();
    // A config reload that did not apply comes first: the running config
    // is not the one on disk.
    reloads(&mut out, bridges.reloads);
    out.push_str("<h2>Live sessions of this frontend</h2>\n");
    if sessions.is_empty() {
        out.push_str("<p class=\"muted\">No live session.</p>\n");
    } else {
        out.push_str(
            "<table>\n<tr><th>Identity</th><th>Session</th><th>Cells run</th><th>Taint</th><th>Kept container</th>\
             <th>Open for</th></tr>\n",
        );
        for s in sessions.iter().take(500) {
            let open = now.duration_since(s.started).map_or(0, |d| d.as_secs());
            let taint = match bridges.tainted {
                Ok(tainted) if tainted.contains(&s.id) => "tainted: only private tools",
                Ok(_) => "clean",
                Err(_) => "unknown",
            };
            let _ = writeln!(
                out,
                "<tr><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td>\
                 <td>{}</td><td>{}</td></tr>",
                shown(s.identity.as_deref().unwrap_or("-"), SHORT),
                shown(&s.id, SHORT),
                s.cells,
                taint,
                s.kept.as_deref().map_or_else(|| "none".to_string(), |r| format!("on runner {}", shown(r, SHORT))),
                span(open),
            );
        }
        out.push_str("</table>\n");
    }
    if let Err(why) = bridges.tainted {
        let _ = writeln!(out, "<p class=\"muted\">The sessions' taint is unknown: {}</p>", shown(why, SHORT));
    }
    running_cells(&mut out, &snapshot.running, now);
    out.push_str("<h2>Last cells of this frontend</h2>\n");
    if cells.is_empty() {
        out.push_str("<p class=\"muted\">No cell has ended yet.</p>\n");
    } else {
        out.push_str("<table>\n<tr><th>Ended</th><th>Cell</th><th>Identity</th><th>Outcome</th><th>Took</th></tr>\n");
        for c in cells {
            let ended = c.ended.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
            let _ = writeln!(
                out,
                "<tr><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td><td>{} ms</td></tr>",
                utc(ended),
                shown(&c.cell_id, SHORT),
                shown(c.identity.as_deref().unwrap_or("-"), SHORT),
                shown(&c.outcome, SHORT),
                c.duration.as_millis(),
            );
        }
        out.push_str("</table>\n");
    }
    out.push_str("<h2>Sandbox-runners</h2>\n");
    match bridges.runners {
        Ok([]) => out.push_str("<p class=\"muted\">No runner reported in the last 15 s.</p>\n"),
        Ok(runners) => {
            out.push_str(
                "<table>\n<tr><th>Runner</th><th>Free slots</th><th>Capacity</th><th>Warm</th><th>Heard</th></tr>\n",
            );
            for r in runners.iter().take(200) {
                let _ = writeln!(
                    out,
                    "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                    shown(&r.id, SHORT),
                    r.free,
                    r.capacity,
                    r.warm,
                    utc(r.at_ms),
                );
            }
            out.push_str("</table>\n");
        }
        Err(why) => {
            let _ = writeln!(out, "<p class=\"refusal\">The runners are unknown: {}</p>", shown(why, SHORT));
        }
    }
    out.push_str("<h2>Audit log</h2>\n");
    match audit {
        Ok((records, chain)) => {
            let _ = writeln!(out, "<p>Chain: <strong>{}</strong></p>", shown(chain, SHORT));
            if records.is_empty() {
                out.push_str("<p class=\"muted\">No record.</p>\n");
            } else {
                out.push_str("<pre class=\"audit\">");
                for record in records.iter().take(100) {
                    out.push_str(&shown(record, LONG));
                    out.push('\n');
                }
                out.push_str("</pre>\n");
            }
        }
        Err(why) => {
            let _ = writeln!(out, "<p class=\"refusal\">The audit log could not be read: {}</p>", shown(why, SHORT));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_leaves_no_markup_and_no_way_out_of_an_attribute() {
        assert_eq!(escape("<script>alert(1)</script>"), "&lt;script&gt;alert(1)&lt;/script&gt;");
        assert_eq!(escape("\"><img onerror=alert(1)>"), "&quot;&gt;&lt;img onerror=alert(1)&gt;");
        assert_eq!(escape("it's \"quoted\" & more"), "it&#39;s &quot;quoted&quot; &amp; more");
        assert_eq!(escape("plain ünïcode"), "plain ünïcode");
        for hostile in ["<script>", "\"><img onerror=alert(1)>", "'onmouseover='x"] {
            let escaped = escape(hostile);
            assert!(!escaped.contains(['<', '>', '"', '\'']), "{escaped}");
        }
    }

    #[test]
    fn a_mebibyte_of_hostile_text_is_escaped_whole_and_cut_when_shown() {
        let big = "<\"'&>".repeat(1024 * 1024 / 5 + 1);
        assert!(big.len() >= 1024 * 1024);
        let escaped = escape(&big);
        assert!(!escaped.contains(['<', '>', '"', '\'']));
        assert_eq!(escaped.matches("&amp;").count(), big.matches('&').count());
        let shown = shown(&big, SUMMARY);
        assert!(shown.ends_with('…') && !shown.contains(['<', '>', '"', '\'']));
        assert!(shown.chars().count() <= SUMMARY * 6 + 1, "cut before escaping");
    }

    #[test]
    fn cutting_counts_characters_not_bytes() {
        assert_eq!(cut("héllo", 10), "héllo");
        assert_eq!(cut("héllo", 3), "hé…");
    }

    #[test]
    fn a_path_segment_holds_only_unreserved_characters() {
        assert_eq!(path_segment("3f2a-b_c.d~e"), "3f2a-b_c.d~e");
        assert_eq!(path_segment("../x\"><"), "..%2Fx%22%3E%3C");
    }

    #[test]
    fn times_read_as_utc_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(1_709_251_199_000), "2024-02-29 23:59:59 UTC");
        assert_eq!(span(59), "59 s");
        assert_eq!(span(61), "1 min 1 s");
        assert_eq!(span(7260), "2 h 1 min");
    }

    #[test]
    fn every_value_of_a_waiting_call_reaches_the_page_escaped() {
        let hostile = "\"><img onerror=alert(1)><script>x</script>";
        let call = WaitingCall {
            id: hostile.into(),
            session: hostile.into(),
            identity: Some(hostile.into()),
            cell_id: hostile.into(),
            server: hostile.into(),
            tool: hostile.into(),
            arguments: hostile.into(),
            args: Some(serde_json::json!({"x": hostile})),
            rule: hostile.into(),
            reason: Some(hostile.into()),
            approvers: vec![hostile.into()],
            asked_ms: 0,
            timeout_ms: 1000,
            question_sha256: hostile.into(),
            code: Some(hostile.into()),
            still_waited: Some(true),
        };
        let html = board(&[call], 0, &[], "c\"srf");
        assert!(!html.contains("<img") && !html.contains("<script"), "{html}");
        assert!(html.contains("&lt;script&gt;") && html.contains("value=\"c&quot;srf\""));
    }
}
