use junction_demo::{handle_line, DemoKind, DemoState};
use serde_json::{json, Value};

fn meta(caps: Value) -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
           "io.modelcontextprotocol/clientCapabilities": caps,
           "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"}})
}

fn send(msg: Value) -> Vec<Value> {
    let mut st = DemoState::new(DemoKind::Weather);
    handle_line(&mut st, &msg.to_string())
        .iter()
        .map(|l| serde_json::from_str(l).expect("reply is JSON"))
        .collect()
}

fn one(method: &str, params: Value) -> Value {
    let out = send(json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}));
    assert_eq!(out.len(), 1, "exactly one reply: {out:?}");
    assert_eq!(out[0]["id"], 7);
    out[0].clone()
}

fn call(name: &str, args: Value) -> Value {
    one(
        "tools/call",
        json!({"name": name, "arguments": args, "_meta": meta(json!({}))}),
    )
}

#[test]
fn discover_reports_modern_version_and_cache_hints() {
    let r = one("server/discover", json!({"_meta": meta(json!({}))}));
    let res = &r["result"];
    assert_eq!(res["supportedVersions"], json!(["2026-07-28"]));
    assert!(res["capabilities"]["tools"].is_object());
    assert_eq!(res["cacheScope"], "public");
    assert!(res["ttlMs"].as_u64().is_some());
    assert_eq!(res["resultType"], "complete");
    assert_eq!(
        res["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "junction-demo-weather"
    );
}

#[test]
fn tools_list_is_cacheable_and_annotates_city_header() {
    let r = one("tools/list", json!({"_meta": meta(json!({}))}));
    let res = &r["result"];
    assert_eq!(res["resultType"], "complete");
    assert_eq!(res["cacheScope"], "public");
    assert!(res["ttlMs"].is_u64());
    let names: Vec<&str> = res["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["add", "confirm_reset", "forecast"]);
    let forecast = &res["tools"][2];
    assert_eq!(
        forecast["inputSchema"]["properties"]["city"]["x-mcp-header"],
        "City"
    );
}

#[test]
fn missing_meta_is_invalid_params() {
    let r = one("tools/list", json!({}));
    assert_eq!(r["error"]["code"], -32602);
    let r = one(
        "tools/list",
        json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}),
    );
    assert_eq!(
        r["error"]["code"], -32602,
        "clientCapabilities is required too"
    );
}

#[test]
fn unsupported_version_lists_supported() {
    let mut m = meta(json!({}));
    m["io.modelcontextprotocol/protocolVersion"] = json!("2031-01-01");
    let r = one("tools/list", json!({"_meta": m}));
    assert_eq!(r["error"]["code"], -32022);
    assert_eq!(r["error"]["data"]["supported"], json!(["2026-07-28"]));
    assert_eq!(r["error"]["data"]["requested"], "2031-01-01");
}

#[test]
fn initialize_from_legacy_client_is_refused_with_supported_versions() {
    let r = one(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "old", "version": "1"}}),
    );
    assert_eq!(r["error"]["code"], -32022);
    assert_eq!(r["error"]["data"]["supported"], json!(["2026-07-28"]));
}

#[test]
fn unknown_method_and_tool() {
    assert_eq!(
        one("ping", json!({"_meta": meta(json!({}))}))["error"]["code"],
        -32601
    );
    assert_eq!(call("nope", json!({}))["error"]["code"], -32602);
}

#[test]
fn forecast_is_deterministic_with_structured_content() {
    let a = call("forecast", json!({"city": "Zürich", "days": 2}));
    let b = call("forecast", json!({"city": "Zürich", "days": 2}));
    assert_eq!(a["result"], b["result"]);
    let res = &a["result"];
    assert_eq!(res["resultType"], "complete");
    assert_eq!(res["isError"], false);
    assert!(res["content"][0]["text"]
        .as_str()
        .unwrap()
        .starts_with("Forecast for Zürich"));
    assert_eq!(res["structuredContent"]["city"], "Zürich");
    assert_eq!(
        res["structuredContent"]["days"].as_array().unwrap().len(),
        2
    );
    let bad = call("forecast", json!({"city": "Oslo", "days": 30}));
    assert_eq!(bad["result"]["isError"], true);
}

#[test]
fn add_sums_and_reports_bad_arguments_as_tool_errors() {
    let r = call("add", json!({"a": 40, "b": 2}));
    assert_eq!(r["result"]["content"][0]["text"], "42");
    assert_eq!(r["result"]["structuredContent"]["sum"], 42);
    assert_eq!(
        call("add", json!({"a": "x", "b": 2}))["result"]["isError"],
        true
    );
    assert_eq!(
        call("add", json!({"a": i64::MAX, "b": 1}))["result"]["isError"],
        true
    );
}

#[test]
fn confirm_reset_mrtr_round_trip() {
    let caps = json!({"elicitation": {"form": {}}});
    let first = one(
        "tools/call",
        json!({"name": "confirm_reset", "arguments": {"target": "db"},
        "_meta": meta(caps.clone())}),
    );
    let res = &first["result"];
    assert_eq!(res["resultType"], "input_required");
    let req = &res["inputRequests"]["confirm"];
    assert_eq!(req["method"], "elicitation/create");
    assert_eq!(req["params"]["mode"], "form");
    assert!(req["params"]["requestedSchema"].is_object());
    let state = res["requestState"]
        .as_str()
        .expect("requestState")
        .to_string();

    let retry = one(
        "tools/call",
        json!({"name": "confirm_reset", "arguments": {"target": "db"},
        "inputResponses": {"confirm": {"action": "accept", "content": {"ok": true}}},
        "requestState": state, "_meta": meta(caps.clone())}),
    );
    assert_eq!(retry["result"]["resultType"], "complete");
    assert_eq!(retry["result"]["structuredContent"]["reset"], true);

    let declined = one(
        "tools/call",
        json!({"name": "confirm_reset", "arguments": {"target": "db"},
        "inputResponses": {"confirm": {"action": "decline"}}, "requestState": state, "_meta": meta(caps.clone())}),
    );
    assert_eq!(declined["result"]["structuredContent"]["reset"], false);

    let forged = one(
        "tools/call",
        json!({"name": "confirm_reset", "arguments": {"target": "prod"},
        "inputResponses": {"confirm": {"action": "accept"}}, "requestState": state, "_meta": meta(caps)}),
    );
    assert_eq!(
        forged["error"]["code"], -32602,
        "state for db must not reset prod"
    );
}

#[test]
fn confirm_reset_without_elicitation_capability_is_a_tool_error() {
    let r = call("confirm_reset", json!({"target": "db"}));
    assert_eq!(r["result"]["isError"], true);
    assert_eq!(r["result"]["resultType"], "complete");
    assert!(r["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("elicitation"));
}

#[test]
fn bad_lines_get_errors_and_notifications_get_nothing() {
    let mut st = DemoState::new(DemoKind::Weather);
    let out = handle_line(&mut st, "{not json");
    let v: Value = serde_json::from_str(&out[0]).unwrap();
    assert_eq!(v["error"]["code"], -32700);
    assert_eq!(v["id"], Value::Null);
    let out = handle_line(
        &mut st,
        r#"[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]"#,
    );
    let v: Value = serde_json::from_str(&out[0]).unwrap();
    assert_eq!(v["error"]["code"], -32600);
    assert!(handle_line(
        &mut st,
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#
    )
    .is_empty());
}

#[test]
fn kind_parses_from_str() {
    assert_eq!("weather".parse::<DemoKind>().unwrap(), DemoKind::Weather);
    assert_eq!("notes".parse::<DemoKind>().unwrap(), DemoKind::Notes);
    assert!("other".parse::<DemoKind>().is_err());
}
