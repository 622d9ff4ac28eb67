use junction_demo::{handle_line, DemoKind, DemoState};
use serde_json::{json, Value};

fn send(st: &mut DemoState, id: i64, method: &str, params: Value) -> Vec<Value> {
    let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
    handle_line(st, &line)
        .iter()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect()
}

fn init(st: &mut DemoState, version: &str) -> Value {
    let out = send(
        st,
        1,
        "initialize",
        json!({"protocolVersion": version, "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}),
    );
    assert!(handle_line(
        st,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#
    )
    .is_empty());
    out[0].clone()
}

#[test]
fn requires_initialize_but_answers_ping() {
    let mut st = DemoState::new(DemoKind::Notes);
    let r = send(&mut st, 1, "tools/list", json!({}));
    assert_eq!(r[0]["error"]["code"], -32600);
    assert_eq!(r[0]["error"]["message"], "not initialized");
    assert_eq!(send(&mut st, 2, "ping", json!({}))[0]["result"], json!({}));
}

#[test]
fn initialize_echoes_known_versions_and_offers_latest_otherwise() {
    for v in ["2025-11-25", "2025-06-18", "2025-03-26"] {
        let mut st = DemoState::new(DemoKind::Notes);
        let r = init(&mut st, v);
        assert_eq!(r["result"]["protocolVersion"], v);
        assert!(r["result"]["capabilities"]["tools"].is_object());
        assert_eq!(r["result"]["serverInfo"]["name"], "junction-demo-notes");
    }
    let mut st = DemoState::new(DemoKind::Notes);
    assert_eq!(
        init(&mut st, "2026-07-28")["result"]["protocolVersion"],
        "2025-11-25"
    );
}

#[test]
fn server_discover_is_method_not_found() {
    let mut st = DemoState::new(DemoKind::Notes);
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}});
    assert_eq!(
        send(&mut st, 1, "server/discover", json!({"_meta": meta}))[0]["error"]["code"],
        -32601
    );
}

#[test]
fn notes_round_trip_without_result_type() {
    let mut st = DemoState::new(DemoKind::Notes);
    init(&mut st, "2025-11-25");
    let list = send(&mut st, 2, "tools/list", json!({}));
    assert!(list[0]["result"].get("resultType").is_none());
    let names: Vec<&str> = list[0]["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["add_note", "countdown", "list_notes"]);
    let added = send(
        &mut st,
        3,
        "tools/call",
        json!({"name": "add_note", "arguments": {"text": "buy milk"}}),
    );
    assert!(added[0]["result"].get("resultType").is_none());
    assert_eq!(added[0]["result"]["isError"], false);
    send(
        &mut st,
        4,
        "tools/call",
        json!({"name": "add_note", "arguments": {"text": "call Ana"}}),
    );
    let listed = send(
        &mut st,
        5,
        "tools/call",
        json!({"name": "list_notes", "arguments": {}}),
    );
    assert_eq!(
        listed[0]["result"]["structuredContent"]["notes"],
        json!(["buy milk", "call Ana"])
    );
    let bad = send(
        &mut st,
        6,
        "tools/call",
        json!({"name": "add_note", "arguments": {}}),
    );
    assert_eq!(bad[0]["result"]["isError"], true);
    assert_eq!(
        send(&mut st, 7, "tools/call", json!({"name": "x"}))[0]["error"]["code"],
        -32602
    );
}

#[test]
fn countdown_sends_progress_before_result() {
    let mut st = DemoState::new(DemoKind::Notes);
    init(&mut st, "2025-11-25");
    let out = send(
        &mut st,
        9,
        "tools/call",
        json!({"name": "countdown", "arguments": {"n": 3},
        "_meta": {"progressToken": "tok-1"}}),
    );
    assert_eq!(out.len(), 4);
    for (i, n) in out[..3].iter().enumerate() {
        assert_eq!(n["method"], "notifications/progress");
        assert!(n.get("id").is_none());
        assert_eq!(n["params"]["progressToken"], "tok-1");
        assert_eq!(n["params"]["progress"], i as i64 + 1);
        assert_eq!(n["params"]["total"], 3);
    }
    assert_eq!(out[3]["id"], 9);
    assert!(out[3]["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("3"));
}

#[test]
fn countdown_without_token_sends_only_the_result() {
    let mut st = DemoState::new(DemoKind::Notes);
    init(&mut st, "2025-11-25");
    let out = send(
        &mut st,
        9,
        "tools/call",
        json!({"name": "countdown", "arguments": {"n": 5}}),
    );
    assert_eq!(out.len(), 1);
    assert_eq!(out[0]["id"], 9);
}

#[test]
fn cancelled_notification_is_silent() {
    let mut st = DemoState::new(DemoKind::Notes);
    init(&mut st, "2025-11-25");
    let line = r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9,"reason":"x"}}"#;
    assert!(handle_line(&mut st, line).is_empty());
}
