//! The `Origin` check of the streamable HTTP transport: a request a browser
//! sends from a web page carries the page's origin, and a page the operator
//! did not name must not drive the server (with the `Host` check, against
//! DNS rebinding). Clients that are not browsers send no `Origin`, so a
//! request without one passes; one with an origin not listed with
//! `--allowed-origin` (none by default) is refused with 403.

/// The origins allowed (`scheme://host[:port]`, compared without case and
/// without a trailing slash).
#[derive(Debug, Clone, Default)]
pub struct Origins {
    allowed: Vec<String>,
}

impl Origins {
    /// Allow these origins.
    pub fn new(allowed: &[String]) -> Self {
        Self { allowed: allowed.iter().map(|o| normal(o)).collect() }
    }

    /// Whether a request with this `Origin` header (if any) may go on.
    pub fn admits(&self, origin: Option<&str>) -> bool {
        match origin {
            None => true,
            Some(origin) => self.allowed.iter().any(|a| *a == normal(origin)),
        }
    }
}

fn normal(origin: &str) -> String {
    origin.trim().trim_end_matches('/').to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_listed_origins_and_requests_without_one_pass() {
        let none = Origins::new(&[]);
        assert!(none.admits(None));
        assert!(!none.admits(Some("https://evil.example")));
        assert!(!none.admits(Some("null")));
        let some = Origins::new(&["https://app.example.com/".into()]);
        assert!(some.admits(Some("HTTPS://app.example.com")));
        assert!(!some.admits(Some("https://app.example.com.evil.example")));
        assert!(!some.admits(Some("http://app.example.com")));
    }
}
