//! The committed JSON Schemas in `schemas/` match the message types.
//!
//! Run with `UPDATE_SCHEMAS=1` to rewrite them after a deliberate change
//! (refused under `CI=true`, where the test only compares).

// A panic in a test is the test failing.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

#[test]
fn committed_schemas_match_the_message_types() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("schemas");
    let update = code_mode_core::testing::rewrite_golden("UPDATE_SCHEMAS");
    let mut stale = Vec::new();
    for (name, schema) in code_mode_proto::schemas() {
        let path = dir.join(format!("{name}.json"));
        let text = serde_json::to_string_pretty(&schema).unwrap() + "\n";
        if update {
            std::fs::write(&path, &text).unwrap();
            continue;
        }
        match std::fs::read_to_string(&path) {
            Ok(committed) if committed == text => {}
            _ => stale.push(path.display().to_string()),
        }
    }
    assert!(
        stale.is_empty(),
        "these schemas differ from the message types (rerun with UPDATE_SCHEMAS=1 if the change is deliberate): {stale:?}"
    );
}

#[test]
fn every_subject_is_versioned_and_distinct() {
    let subjects = code_mode_proto::subjects::ALL;
    for s in subjects {
        assert!(s.starts_with("codemode.v1."), "{s} is not versioned");
    }
    let mut unique = subjects.to_vec();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), subjects.len());
}

#[test]
fn a_tool_reply_is_tagged_by_status() {
    let reply = code_mode_proto::ToolReply::Refused { message: "no".into() };
    let json = serde_json::to_value(&reply).unwrap();
    assert_eq!(json, serde_json::json!({"status": "refused", "message": "no"}));
}

#[test]
fn a_session_id_that_is_not_one_subject_token_gets_no_approval_subject() {
    use code_mode_proto::subjects::approval;
    assert_eq!(approval("0b7f3c1e-aa").as_deref(), Some("codemode.v1.approval.0b7f3c1e-aa"));
    for bad in ["", "a.b", "a*", ">", "a b", "a\nb"] {
        assert_eq!(approval(bad), None, "{bad:?}");
    }
}

#[test]
fn an_approval_reply_is_tagged_by_decision() {
    let reply = code_mode_proto::ApprovalReply::Unavailable { reason: "no elicitation".into() };
    let json = serde_json::to_value(&reply).unwrap();
    assert_eq!(json, serde_json::json!({"decision": "unavailable", "reason": "no elicitation"}));
    let back: code_mode_proto::ApprovalReply =
        serde_json::from_value(serde_json::json!({"decision": "approved"})).unwrap();
    assert_eq!(back, code_mode_proto::ApprovalReply::Approved);
}

#[test]
fn error_kinds_keep_their_wire_spelling_and_unknown_kinds_still_decode() {
    use code_mode_proto::{ErrorKind, ToolReply, WireError};
    let known = [
        (ErrorKind::BadRequest, "bad_request"),
        (ErrorKind::NoCapacity, "no_capacity"),
        (ErrorKind::Sandbox, "sandbox"),
        (ErrorKind::SessionEndFailed, "session_end_failed"),
        (ErrorKind::KeptLost, "kept_lost"),
        (ErrorKind::KeptBusy, "kept_busy"),
        (ErrorKind::StateUnavailable, "state_unavailable"),
        (ErrorKind::McpError, "McpError"),
        (ErrorKind::TransportClosed, "TransportClosed"),
        (ErrorKind::ServerRestarting, "ServerRestarting"),
        (ErrorKind::BridgeUnavailable, "BridgeUnavailable"),
    ];
    for (kind, text) in known {
        assert_eq!(serde_json::to_value(&kind).unwrap(), serde_json::json!(text));
        assert_eq!(serde_json::from_value::<ErrorKind>(serde_json::json!(text)).unwrap(), kind);
        assert_eq!(kind.as_str(), text);
    }
    // A kind from a newer peer decodes, and encodes back as it came.
    let reply: ToolReply = serde_json::from_str(r#"{"status":"fault","kind":"QuotaExceeded"}"#).unwrap();
    assert_eq!(reply, ToolReply::Fault { kind: ErrorKind::Other("QuotaExceeded".into()) });
    assert_eq!(serde_json::to_string(&reply).unwrap(), r#"{"status":"fault","kind":"QuotaExceeded"}"#);
    let error: WireError = serde_json::from_str(r#"{"kind":"draining","message":"m"}"#).unwrap();
    assert_eq!(error.kind, ErrorKind::Other("draining".into()));
    assert_eq!(error.kind.to_string(), "draining");
    // Not a string is still not a kind.
    assert!(serde_json::from_str::<ErrorKind>("7").is_err());
}

#[test]
fn a_fresh_cell_carries_no_keep_field_and_a_kept_request_is_tagged_by_its_operation() {
    use code_mode_proto::{CellLimits, Keep, KeptEnd, KeptRequest, RunCell};
    let limits = CellLimits {
        deadline_ms: 1,
        max_calls: 1,
        call_timeout_ms: 1,
        approval_timeout_ms: 0,
        max_output: 1,
        stop_output: 1,
        max_line: 1,
    };
    let cell = RunCell {
        cell_id: "c".into(),
        session: "s".into(),
        asker: None,
        identity: None,
        code: "1".into(),
        tools: vec![],
        withheld: vec![],
        limits,
        keep: None,
        link: None,
        keep_report: false,
        inputs: vec![],
    };
    assert!(serde_json::to_value(&cell).unwrap().get("keep").is_none(), "a fresh cell's message is as before");
    assert!(serde_json::to_value(&cell).unwrap().get("link").is_none(), "a cell without a link is as before");
    assert!(serde_json::to_value(&cell).unwrap().get("keep_report").is_none(), "a cell not a task's is as before");
    let kept = RunCell { keep: Some(Keep { key: Some("k".into()), idle_ms: 5, max_ms: 9, most: None }), ..cell };
    let json = serde_json::to_value(KeptRequest::Run(kept.clone())).unwrap();
    assert_eq!(json["run"]["keep"], serde_json::json!({"key": "k", "idle_ms": 5, "max_ms": 9}));
    assert_eq!(serde_json::from_value::<KeptRequest>(json).unwrap(), KeptRequest::Run(kept));
    let end = serde_json::to_value(KeptRequest::End(KeptEnd { session: "s".into(), key: "k".into() })).unwrap();
    assert_eq!(end, serde_json::json!({"end": {"session": "s", "key": "k"}}));
}

#[test]
fn a_runner_id_that_is_not_one_subject_token_gets_no_subject() {
    use code_mode_proto::subjects::runner;
    assert_eq!(runner("5f2c").as_deref(), Some("codemode.v1.runner.5f2c"));
    for bad in ["", "a.b", "*", ">"] {
        assert_eq!(runner(bad), None, "{bad:?}");
    }
}

#[test]
fn a_tool_call_carries_no_op_and_another_request_names_its_op() {
    use code_mode_proto::{Target, ToolCall};
    let call = ToolCall {
        session: "s".into(),
        asker: None,
        identity: None,
        cell_id: "c".into(),
        call_index: 1,
        target: Target::Tool("add".into()),
        arguments: serde_json::json!({}),
        link: None,
        file_in: false,
    };
    let json = serde_json::to_value(&call).unwrap();
    assert!(json.get("op").is_none() && json.get("link").is_none(), "a tool call's message is as before: {json}");
    let read = ToolCall { target: Target::ReadResource("test://static-text".into()), ..call };
    let json = serde_json::to_value(&read).unwrap();
    assert_eq!(json["op"], "read_resource");
    assert_eq!(serde_json::from_value::<ToolCall>(json).unwrap(), read);
}

#[test]
fn an_approval_request_without_a_connect_question_is_as_before_and_one_with_it_names_flow_and_server() {
    use code_mode_proto::{ApprovalRequest, ConnectAsk};
    let request = ApprovalRequest {
        session: "s".into(),
        cell_id: "c".into(),
        server: "tracker".into(),
        tool: "whoami".into(),
        arguments: String::new(),
        rule: String::new(),
        timeout_ms: 1000,
        console: None,
        connect: None,
    };
    assert!(serde_json::to_value(&request).unwrap().get("connect").is_none(), "an approval's message is as before");
    let asked =
        ApprovalRequest { connect: Some(ConnectAsk { flow: "f1".into(), server: "tracker".into() }), ..request };
    let json = serde_json::to_value(&asked).unwrap();
    assert_eq!(json["connect"], serde_json::json!({"flow": "f1", "server": "tracker"}));
    assert_eq!(serde_json::from_value::<ApprovalRequest>(json).unwrap(), asked);
}

#[test]
fn an_accounts_request_is_tagged_by_op_and_its_reply_by_result_and_unknown_fields_are_refused() {
    use code_mode_proto::{AccountsReply, AccountsRequest};
    let begin = AccountsRequest::Begin {
        flow: "f".into(),
        viewer: "alice".into(),
        browser: "ab".into(),
        redirect_uri: "https://h/console/connect/callback".into(),
    };
    let json = serde_json::to_value(&begin).unwrap();
    assert_eq!(json["op"], "begin");
    assert_eq!(serde_json::from_value::<AccountsRequest>(json).unwrap(), begin);
    let finish: AccountsRequest =
        serde_json::from_str(r#"{"op": "finish", "state": "s", "code": "c", "browser": "b"}"#).unwrap();
    assert_eq!(finish, AccountsRequest::Finish { state: "s".into(), code: "c".into(), iss: None, browser: "b".into() });
    assert_eq!(serde_json::to_value(AccountsRequest::Counts).unwrap(), serde_json::json!({"op": "counts"}));
    assert!(serde_json::from_str::<AccountsRequest>(r#"{"op": "list", "identity": "a", "token": "t"}"#).is_err());
    let counts = AccountsReply::Counts { servers: vec![("tracker".into(), 2)] };
    assert_eq!(
        serde_json::to_value(&counts).unwrap(),
        serde_json::json!({"result": "counts", "servers": [["tracker", 2]]})
    );
    assert_eq!(
        serde_json::to_value(AccountsReply::Disconnected { revoked: true }).unwrap(),
        serde_json::json!({"result": "disconnected", "revoked": true})
    );
}
