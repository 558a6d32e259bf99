//! The value parsers of the options that are not numbers (a header, a
//! group, a URL, a server's name): a bad value stops at parsing, naming the
//! option. The numeric ones are in [`crate::ranges`].

/// A `--header NAME:VALUE`: the name (a valid HTTP header name) and the
/// value, trimmed.
pub(crate) fn header_value(text: &str) -> Result<(String, String), String> {
    let (name, value) = text.split_once(':').ok_or_else(|| format!("{text:?} is not NAME:VALUE"))?;
    let name = name.trim();
    http::HeaderName::from_bytes(name.as_bytes()).map_err(|_| format!("{name:?} is not an HTTP header name"))?;
    Ok((name.to_string(), value.trim().to_string()))
}

/// A group name (`--console-operators`): 1 to 64 characters, no space or
/// comma.
pub(crate) fn parse_group(text: &str) -> Result<String, String> {
    code_mode_mcp_frontend::auth::check_group(text)?;
    Ok(text.to_string())
}

/// A public base URL (`--public-url`): `http://` or `https://` and a host.
pub(crate) fn parse_public_url(text: &str) -> Result<String, String> {
    let rest = text.strip_prefix("https://").or_else(|| text.strip_prefix("http://"));
    match rest {
        Some(rest) if !rest.is_empty() && !rest.starts_with('/') && !text.contains(char::is_whitespace) => {
            Ok(text.trim_end_matches('/').to_string())
        }
        _ => Err(format!("{text:?} is not an http(s) URL with a host")),
    }
}

/// A wrapped server's name (`--name`): 1 to 64 characters, letters, digits,
/// `-`, `_` and `.` (it appears in logs, questions and refusals).
pub(crate) fn parse_server_name(text: &str) -> Result<String, String> {
    let fine = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if text.is_empty() || text.len() > 64 || !text.chars().all(fine) {
        return Err(format!("{text:?} is not a server name: 1 to 64 letters, digits, '-', '_' or '.'"));
    }
    Ok(text.to_string())
}
