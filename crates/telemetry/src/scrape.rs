//! Scraping a live service (the load-test binary and the tests): a blocking HTTP/1.0 GET
//! over a raw [`TcpStream`] (no HTTP client crate in the tree), and a parser
//! of the Prometheus text exposition format good enough to find a sample by
//! name and labels.
//!
//! Blocking on purpose: call them from `spawn_blocking` (or a plain thread)
//! in async tests.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// An HTTP response: status code, headers (lower-case names) and body.
#[derive(Debug, Clone)]
pub struct HttpResponse {
    /// The status code.
    pub status: u16,
    /// Headers, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// The body (chunked transfer decoded).
    pub body: String,
}

impl HttpResponse {
    /// The first header named `name` (lower-case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// `GET path` from `addr` with HTTP/1.0 (so the body ends at close).
pub fn http_get(addr: SocketAddr, path: &str) -> std::io::Result<HttpResponse> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\nAccept: */*\r\nConnection: close\r\n\r\n")?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    parse_response(&raw).ok_or_else(|| std::io::Error::other(format!("not an HTTP response from {addr}{path}")))
}

fn parse_response(raw: &[u8]) -> Option<HttpResponse> {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..split]).ok()?;
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split_whitespace().nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    let chunked = headers.iter().any(|(n, v)| n == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"));
    if chunked {
        body = dechunk(&body)?;
    }
    Some(HttpResponse { status, headers, body: String::from_utf8_lossy(&body).into_owned() })
}

fn dechunk(mut data: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = data.windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&data[..line_end]).ok()?;
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        data = &data[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(data.get(..size)?);
        data = data.get(size + 2..)?;
    }
}

/// One sample line: metric name, labels, value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The sample's name (for a histogram: `..._bucket`, `..._sum`, `..._count`).
    pub name: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Its value.
    pub value: f64,
}

/// A parsed scrape: the samples and the `# TYPE` of each family.
#[derive(Debug, Clone, Default)]
pub struct Exposition {
    /// Every sample, in order.
    pub samples: Vec<Sample>,
    /// Family name to its type (`counter`, `gauge`, `histogram`, ...).
    pub types: BTreeMap<String, String>,
}

/// A line of the text format that could not be parsed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("line {line}: {problem}: {text:?}")]
pub struct ParseError {
    /// The line number, from 1.
    pub line: usize,
    /// What is wrong.
    pub problem: &'static str,
    /// The line.
    pub text: String,
}

impl Exposition {
    /// Parse the text exposition format (version 0.0.4). Fails on any
    /// line that is not a comment, a blank, or a well-formed sample.
    pub fn parse(text: &str) -> Result<Self, ParseError> {
        let mut parsed = Exposition::default();
        for (i, line) in text.lines().enumerate() {
            let fail = |problem| ParseError { line: i + 1, problem, text: line.to_string() };
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            if let Some(comment) = line.strip_prefix('#') {
                let mut words = comment.split_whitespace();
                if words.next() == Some("TYPE") {
                    let name = words.next().ok_or_else(|| fail("TYPE without a name"))?;
                    let kind = words.next().ok_or_else(|| fail("TYPE without a type"))?;
                    parsed.types.insert(name.to_string(), kind.to_string());
                }
                continue;
            }
            parsed.samples.push(parse_sample(line).map_err(fail)?);
        }
        Ok(parsed)
    }

    /// The value of the sample named `name` whose labels are exactly `labels`.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let wanted: BTreeMap<String, String> = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        self.samples.iter().find(|s| s.name == name && s.labels == wanted).map(|s| s.value)
    }

    /// The value as [`value`](Self::value), 0 when the series is absent (a
    /// labelled counter appears only once it has moved).
    pub fn value_or_zero(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.value(name, labels).unwrap_or(0.0)
    }

    /// The sum over the samples named `name` whose labels include `labels`.
    pub fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.samples
            .iter()
            .filter(|s| s.name == name && labels.iter().all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(v)))
            .map(|s| s.value)
            .sum()
    }
}

fn parse_sample(line: &str) -> Result<Sample, &'static str> {
    let name_end = line.find(['{', ' ']).ok_or("a sample without a value")?;
    let name = &line[..name_end];
    let valid_name = name
        .chars()
        .enumerate()
        .all(|(i, c)| c.is_ascii_alphabetic() || c == '_' || c == ':' || (i > 0 && c.is_ascii_digit()));
    if name.is_empty() || !valid_name {
        return Err("an invalid metric name");
    }
    let mut rest = &line[name_end..];
    let mut labels = BTreeMap::new();
    if let Some(after) = rest.strip_prefix('{') {
        rest = after;
        loop {
            rest = rest.trim_start_matches([' ', ',']);
            if let Some(after) = rest.strip_prefix('}') {
                rest = after;
                break;
            }
            let eq = rest.find('=').ok_or("a label without '='")?;
            let key = rest[..eq].trim().to_string();
            rest = rest[eq + 1..].strip_prefix('"').ok_or("a label value without quotes")?;
            let mut value = String::new();
            let mut chars = rest.char_indices();
            let end = loop {
                match chars.next().ok_or("an unterminated label value")? {
                    (i, '"') => break i,
                    (_, '\\') => match chars.next().ok_or("a dangling escape")?.1 {
                        'n' => value.push('\n'),
                        c => value.push(c),
                    },
                    (_, c) => value.push(c),
                }
            };
            labels.insert(key, value);
            rest = &rest[end + 1..];
        }
    }
    let value_text = rest.split_whitespace().next().ok_or("a sample without a value")?;
    let value = match value_text {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        "NaN" => f64::NAN,
        v => v.parse().map_err(|_| "a value that is not a number")?,
    };
    Ok(Sample { name: name.to_string(), labels, value })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_with_escaped_labels_and_histogram_buckets_parse() {
        let text = "# HELP x_total X.\n# TYPE x_total counter\nx_total{a=\"q\\\"uote\",b=\"two\"} 3\n\
                    h_bucket{le=\"+Inf\"} 7\nplain 1.5e3\n";
        let parsed = Exposition::parse(text).unwrap();
        assert_eq!(parsed.types["x_total"], "counter");
        assert_eq!(parsed.value("x_total", &[("a", "q\"uote"), ("b", "two")]), Some(3.0));
        assert_eq!(parsed.value("h_bucket", &[("le", "+Inf")]), Some(7.0));
        assert_eq!(parsed.value("plain", &[]), Some(1500.0));
        assert_eq!(parsed.sum("x_total", &[("b", "two")]), 3.0);
    }

    #[test]
    fn a_malformed_line_is_an_error_naming_the_line() {
        let err = Exposition::parse("ok 1\nbroken{a=\"x} 1\n").unwrap_err();
        assert_eq!(err.line, 2);
        let err = Exposition::parse("ok one\n").unwrap_err();
        assert_eq!(err.problem, "a value that is not a number");
    }

    #[test]
    fn a_chunked_body_is_decoded() {
        let raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n3\r\nefg\r\n0\r\n\r\n";
        let response = parse_response(raw).unwrap();
        assert_eq!(response.status, 200);
        assert_eq!(response.body, "abcdefg");
    }
}
