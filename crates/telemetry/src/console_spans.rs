//! `OTEL_TRACES_EXPORTER=console`: each exported span as one line on
//! stderr, when it ends, so a trace can be read on the machine that made
//! it without any collector.
//!
//! The line holds what the OTLP export would send, nothing more (the same
//! spans of [`crate::trace::TARGET`], the same attributes):
//!
//! ```text
//! span trace=4bf92f3577b34da6a3ce929d0e0e4736 id=00f067aa0ba902b7 parent=b7ad6b7169203331 name=tool_call service=code-mode-bridge start_us=1764928800123456 duration_ms=3.214 cell.id=... call.index=0 op=tools/call server=test tool=add outcome=ok busy_ns=812345 idle_ns=2401877
//! ```
//!
//! `parent=-` marks a trace's root. A span is written when it ends, so a
//! parent's line comes after its children's; each process writes its own
//! spans (the split services each on their own stderr), and `trace=`
//! gathers one trace's lines from all of them (`start_us`, microseconds
//! since the Unix epoch, orders them). stdout is never written: it
//! is the MCP channel of a stdio server.

use std::fmt::Write as _;
use std::time::SystemTime;

use opentelemetry::trace::Status;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};

/// Writes each span it is given as one line on stderr.
#[derive(Debug, Default)]
pub struct ConsoleExporter {
    service: String,
}

impl SpanExporter for ConsoleExporter {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let mut text = String::new();
        for span in &batch {
            text.push_str(&line(span, &self.service));
            text.push('\n');
        }
        // One write per batch (one span with the simple processor), so the
        // lines of concurrent spans never interleave.
        use std::io::Write as _;
        let _ = std::io::stderr().lock().write_all(text.as_bytes());
        Ok(())
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.service =
            resource.get(&opentelemetry::Key::new("service.name")).map(|v| v.to_string()).unwrap_or_default();
    }
}

/// The line of one span (without its newline).
pub fn line(span: &SpanData, service: &str) -> String {
    let context = &span.span_context;
    let parent = if span.parent_span_id == opentelemetry::trace::SpanId::INVALID {
        "-".to_string()
    } else {
        span.parent_span_id.to_string()
    };
    let took = span.end_time.duration_since(span.start_time).unwrap_or_default();
    let mut out = format!(
        "span trace={} id={} parent={parent} name={} service={} start_us={} duration_ms={:.3}",
        context.trace_id(),
        context.span_id(),
        word(&span.name),
        word(service),
        unix_micros(span.start_time),
        took.as_secs_f64() * 1000.0,
    );
    if let Status::Error { description } = &span.status {
        let _ = write!(out, " status=error:{}", word(description));
    }
    for attribute in &span.attributes {
        let _ = write!(out, " {}={}", word(attribute.key.as_str()), word(&attribute.value.as_str()));
    }
    out
}

/// A value as one word of the line: spaces and `=` replaced, so the line
/// splits back into its keys and values.
fn word(text: &str) -> String {
    if text.is_empty() {
        return "\"\"".to_string();
    }
    text.chars().map(|c| if c.is_whitespace() || c == '=' { '_' } else { c }).collect()
}

/// Microseconds since the Unix epoch (sorts the lines of one trace in the
/// order their spans started, across processes).
fn unix_micros(at: SystemTime) -> u128 {
    at.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_micros()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_keep_the_line_one_key_value_pair_per_word() {
        let at = SystemTime::UNIX_EPOCH + std::time::Duration::from_micros(1_709_251_199_123_456);
        assert_eq!(unix_micros(at), 1_709_251_199_123_456);
        assert_eq!(word("tools/call"), "tools/call");
        assert_eq!(word("a b=c"), "a_b_c");
        assert_eq!(word(""), "\"\"");
    }
}
