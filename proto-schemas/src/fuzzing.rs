//! Entry point of the cargo-fuzz target in `fuzz/` (not an API): takes the
//! fuzzer's bytes and asserts what must hold for any input, so the
//! committed seeds and every past crash replay as ordinary tests too.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::*;

fn round_trip<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(data: &[u8]) {
    let Ok(value) = serde_json::from_slice::<T>(data) else { return };
    let again = serde_json::to_vec(&value).expect("a decoded message encodes");
    let back: T = serde_json::from_slice(&again).expect("an encoded message decodes");
    assert_eq!(back, value, "a message changed meaning on a second hop");
}

/// Every bus message decoded from arbitrary bytes, as a service receives
/// it. Holds, besides "never panics": whatever decodes encodes again and
/// decodes to the same value, and a session id that gets an approval
/// subject is exactly one subject token.
pub fn messages(data: &[u8]) {
    round_trip::<CatalogRequest>(data);
    round_trip::<Reply<Catalog>>(data);
    round_trip::<RunCell>(data);
    round_trip::<Reply<CellReport>>(data);
    round_trip::<ToolCall>(data);
    round_trip::<Reply<ToolReply>>(data);
    round_trip::<ApprovalRequest>(data);
    round_trip::<Reply<ApprovalReply>>(data);
    round_trip::<SessionEnd>(data);
    round_trip::<Reply<SessionEnded>>(data);
    round_trip::<WireError>(data);
    round_trip::<ErrorKind>(data);
    if let Ok(session) = std::str::from_utf8(data)
        && let Some(subject) = subjects::approval(session)
    {
        let token = subject.strip_prefix(subjects::APPROVAL).and_then(|t| t.strip_prefix('.'));
        assert_eq!(token, Some(session));
        assert!(!session.contains(['.', '*', '>']) && !session.chars().any(char::is_whitespace));
    }
}

#[cfg(test)]
mod tests {
    /// The committed seeds and crash regressions of `fuzz/seeds/`.
    #[test]
    fn the_committed_fuzz_inputs_of_the_messages_pass() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../fuzz/seeds/proto_messages");
        let mut seen = 0;
        for entry in std::fs::read_dir(dir).expect("fuzz/seeds/proto_messages") {
            super::messages(&std::fs::read(entry.unwrap().path()).unwrap());
            seen += 1;
        }
        assert!(seen > 0);
    }
}
