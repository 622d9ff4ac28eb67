//! The bad-input table (issue 6): one data-driven test of hostile or broken
//! client requests against the built gateway, each with the HTTP status and
//! JSON-RPC error a client must get (DESIGN §5, NOTES §2, §4.1). Every row
//! runs, mismatches are collected and reported together, and nothing in the
//! table may reach the upstream (only catalog traffic may).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use junction_testkit::{
    spawn_gateway_with_env, Behavior, Gateway, MockSpec, MockTool, MockUpstream, TestClient,
};
use serde_json::{json, Value};

const PARSE: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;
const HEADER_MISMATCH: i64 = -32020;
const UNSUPPORTED_VERSION: i64 = -32022;
const FORBIDDEN: i64 = -31005;

const KEY_A: &str = "bad-input-key-a-0123456789abcdef0123456789";
const KEY_B: &str = "bad-input-key-b-0123456789abcdef0123456789";

fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_junction"))
}

fn tools() -> Vec<MockTool> {
    let obj = json!({"type": "object"});
    vec![
        MockTool::echo("echo"),
        MockTool::new(
            "forecast",
            json!({"type": "object", "properties": {
                "city": {"type": "string", "x-mcp-header": "City"},
                "days": {"type": "integer", "x-mcp-header": "Days"}}}),
            Behavior::Echo,
        ),
        MockTool::new("mrtr", obj.clone(), Behavior::InputRequired),
        MockTool::new("mrtr2", obj, Behavior::InputRequired),
    ]
}

async fn gateway(upstream: &MockUpstream, key: &str, extra: &str) -> Gateway {
    let yaml = format!(
        "server: {{listen: 127.0.0.1:0}}\nupstreams:\n  - {{id: alpha, url: {}}}\n\
         request_state: {{secret_env: JUNCTION_TEST_KEY}}\n\
         limits: {{max_body_bytes: 16KiB, max_header_count: 50}}\n{extra}",
        upstream.url
    );
    spawn_gateway_with_env(bin(), &yaml, &[("JUNCTION_TEST_KEY", key)]).await
}

/// Tokens the table needs, minted by real gateways before it runs.
struct Tokens {
    state: String,
    foreign_state: String,
    expired_state: String,
    cursor: String,
    foreign_cursor: String,
    stale_cursor: String,
    session: String,
    foreign_session: String,
    expired_session: String,
}

async fn request_state(gw: &Gateway) -> String {
    let c =
        TestClient::modern(&gw.url("/mcp")).with_capabilities(json!({"elicitation": {"form": {}}}));
    let r = c.call_tool("alpha__mrtr", json!({})).await;
    r.result()["requestState"]
        .as_str()
        .unwrap_or_else(|| panic!("no requestState: {}", r.text()))
        .to_owned()
}

async fn cursor(gw: &Gateway) -> String {
    let r = TestClient::modern(&gw.url("/mcp"))
        .request("tools/list", json!({}))
        .await;
    r.result()["nextCursor"]
        .as_str()
        .unwrap_or_else(|| panic!("no nextCursor: {}", r.text()))
        .to_owned()
}

async fn session(gw: &Gateway) -> String {
    let c = TestClient::legacy(&gw.url("/mcp"), "2025-11-25");
    let init = c.initialize().await;
    c.session_id()
        .unwrap_or_else(|| panic!("no session id: {}", init.text()))
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Want {
    /// A gateway-made JSON-RPC error with this code.
    Err(i64),
    /// A result, no error.
    Ok,
    /// Only the status matters (202, 405: no JSON-RPC body required).
    Status,
}

struct Case {
    name: &'static str,
    http: &'static str,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    status: u16,
    want: Want,
}

type Headers = Vec<(String, String)>;

fn set(mut h: Headers, name: &str, value: &str) -> Headers {
    h.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
    h.push((name.to_ascii_lowercase(), value.to_owned()));
    h
}

fn unset(mut h: Headers, name: &str) -> Headers {
    h.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
    h
}

fn remove(v: &mut Value, key: &str) {
    if let Some(o) = v.as_object_mut() {
        o.remove(key);
    }
}

/// The table. `m` builds correct modern requests, `l` handshake-era ones.
#[rustfmt::skip]
fn table(m: &TestClient, l: &TestClient, t: &Tokens) -> Vec<Case> {
    let mut cases = Vec::new();
    let std = |body: &Value| m.headers_for(body);
    let list = m.envelope("tools/list", json!({}));
    let list_h = std(&list);
    let mut add = |name, http, headers, body: Vec<u8>, status, want| {
        cases.push(Case {
            name,
            http,
            headers,
            body,
            status,
            want,
        })
    };
    let bytes = |v: &Value| v.to_string().into_bytes();
    // A modern request with this body and the headers a correct client sends for it.
    let call = |params: Value| m.envelope("tools/call", params);
    let forecast = |args: Value| call(json!({"name": "alpha__forecast", "arguments": args}));
    let mrtr_retry = |tool: &str, state: Value| {
        call(json!({"name": tool, "arguments": {},
            "inputResponses": {"x": {"action": "accept", "content": {}}}, "requestState": state}))
    };

    // --- JSON and JSON-RPC envelope ---
    add("invalid JSON", "POST", list_h.clone(), b"{\"jsonrpc\":".to_vec(), 400, Want::Err(PARSE));
    add("empty body", "POST", list_h.clone(), Vec::new(), 400, Want::Err(PARSE));
    add("body not UTF-8", "POST", list_h.clone(), b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\"}".to_vec(), 400, Want::Err(PARSE));
    add("batch of two requests", "POST", list_h.clone(), format!("[{list},{list}]").into_bytes(), 400, Want::Err(INVALID_REQUEST));
    add("empty batch", "POST", list_h.clone(), b"[]".to_vec(), 400, Want::Err(INVALID_REQUEST));
    add("JSON string", "POST", list_h.clone(), b"\"tools/list\"".to_vec(), 400, Want::Err(INVALID_REQUEST));
    add("JSON number", "POST", list_h.clone(), b"42".to_vec(), 400, Want::Err(INVALID_REQUEST));
    add("result response sent as a request", "POST", list_h.clone(), bytes(&json!({"jsonrpc": "2.0", "id": 1, "result": {}})), 400, Want::Err(INVALID_REQUEST));
    add("error response sent as a request", "POST", list_h.clone(), bytes(&json!({"jsonrpc": "2.0", "id": 1, "error": {"code": 1, "message": "x"}})), 400, Want::Err(INVALID_REQUEST));
    let mut v = list.clone();
    v["jsonrpc"] = json!("1.0");
    add("jsonrpc 1.0", "POST", list_h.clone(), bytes(&v), 400, Want::Err(INVALID_REQUEST));
    let mut v = list.clone();
    remove(&mut v, "jsonrpc");
    add("jsonrpc missing", "POST", list_h.clone(), bytes(&v), 400, Want::Err(INVALID_REQUEST));
    for (name, id) in [
        ("id null", json!(null)),
        ("float id", json!(1.5)),
        ("integral float id 1.0", json!(1.0)),
        ("id object", json!({"n": 1})),
        ("id boolean", json!(true)),
    ] {
        let mut v = list.clone();
        v["id"] = id;
        add(name, "POST", list_h.clone(), bytes(&v), 400, Want::Err(INVALID_REQUEST));
    }
    let mut v = list.clone();
    v["method"] = json!(5);
    add("method not a string", "POST", list_h.clone(), bytes(&v), 400, Want::Err(INVALID_REQUEST));
    let mut v = list.clone();
    v["params"] = json!([1, 2]);
    add("params an array", "POST", list_h.clone(), bytes(&v), 400, Want::Err(INVALID_REQUEST));
    let dup = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"alpha__echo","name":"alpha__mrtr","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    add("duplicate params key", "POST", set(list_h.clone(), "mcp-method", "tools/call").into_iter().chain([("mcp-name".into(), "alpha__echo".into())]).collect(), dup.to_vec(), 400, Want::Err(INVALID_REQUEST));
    add("notification with an unknown method", "POST", list_h.clone(), bytes(&json!({"jsonrpc": "2.0", "method": "notifications/bogus"})), 202, Want::Status);

    // --- _meta ---
    let mut v = list.clone();
    remove(&mut v, "params");
    add("no params at all", "POST", list_h.clone(), bytes(&v), 400, Want::Err(INVALID_PARAMS));
    let mut v = list.clone();
    v["params"] = json!({});
    add("params without _meta", "POST", list_h.clone(), bytes(&v), 400, Want::Err(INVALID_PARAMS));
    let mut v = list.clone();
    v["params"]["_meta"] = json!([]);
    add("_meta an array", "POST", list_h.clone(), bytes(&v), 400, Want::Err(INVALID_PARAMS));
    let mut v = list.clone();
    remove(&mut v["params"]["_meta"], "io.modelcontextprotocol/protocolVersion");
    add("_meta without protocolVersion", "POST", list_h.clone(), bytes(&v), 400, Want::Err(INVALID_PARAMS));
    let mut v = list.clone();
    remove(&mut v["params"]["_meta"], "io.modelcontextprotocol/clientCapabilities");
    add("_meta without clientCapabilities", "POST", list_h.clone(), bytes(&v), 400, Want::Err(INVALID_PARAMS));
    let mut v = list.clone();
    v["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!(20260728);
    add("protocolVersion a number", "POST", list_h.clone(), bytes(&v), 400, Want::Err(INVALID_PARAMS));
    let mut v = list.clone();
    v["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] = json!("all");
    add("clientCapabilities a string", "POST", list_h.clone(), bytes(&v), 400, Want::Err(INVALID_PARAMS));
    let mut v = list.clone();
    v["params"]["_meta"]["com.example/extra"] = json!({"any": 1});
    add("extra _meta key is fine", "POST", list_h.clone(), bytes(&v), 200, Want::Ok);
    let mut v = list.clone();
    v["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
    add("unsupported version", "POST", set(list_h.clone(), "mcp-protocol-version", "2099-01-01"), bytes(&v), 400, Want::Err(UNSUPPORTED_VERSION));
    let mut v = list.clone();
    v["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2025-11-25");
    add("handshake-era version in _meta, modern header (header checked first)", "POST", list_h.clone(), bytes(&v), 400, Want::Err(HEADER_MISMATCH));

    // --- mirrored headers ---
    add("MCP-Protocol-Version missing", "POST", unset(list_h.clone(), "mcp-protocol-version"), bytes(&list), 400, Want::Err(HEADER_MISMATCH));
    add("MCP-Protocol-Version differs", "POST", set(list_h.clone(), "mcp-protocol-version", "2026-07-27"), bytes(&list), 400, Want::Err(HEADER_MISMATCH));
    add("Mcp-Method missing", "POST", unset(list_h.clone(), "mcp-method"), bytes(&list), 400, Want::Err(HEADER_MISMATCH));
    add("Mcp-Method differs", "POST", set(list_h.clone(), "mcp-method", "server/discover"), bytes(&list), 400, Want::Err(HEADER_MISMATCH));
    add("Mcp-Method wrong case", "POST", set(list_h.clone(), "mcp-method", "TOOLS/LIST"), bytes(&list), 400, Want::Err(HEADER_MISMATCH));
    let echo = call(json!({"name": "alpha__echo", "arguments": {}}));
    let echo_h = std(&echo);
    add("Mcp-Name missing", "POST", unset(echo_h.clone(), "mcp-name"), bytes(&echo), 400, Want::Err(HEADER_MISMATCH));
    add("Mcp-Name differs", "POST", set(echo_h.clone(), "mcp-name", "alpha__mrtr"), bytes(&echo), 400, Want::Err(HEADER_MISMATCH));
    add("Mcp-Name bad base64 in sentinel", "POST", set(echo_h.clone(), "mcp-name", "=?base64?***?="), bytes(&echo), 400, Want::Err(HEADER_MISMATCH));
    add("Mcp-Name sentinel of non-UTF-8", "POST", set(echo_h.clone(), "mcp-name", "=?base64?/w==?="), bytes(&echo), 400, Want::Err(HEADER_MISMATCH));
    add("Mcp-Name upper-case sentinel is plain text", "POST", set(echo_h.clone(), "mcp-name", "=?BASE64?YWxwaGFfX2VjaG8=?="), bytes(&echo), 400, Want::Err(HEADER_MISMATCH));
    add("Mcp-Name sentinel of another name", "POST", set(echo_h.clone(), "mcp-name", "=?base64?YWxwaGFfX21ydHI=?="), bytes(&echo), 400, Want::Err(HEADER_MISMATCH));
    add("Mcp-Name raw UTF-8", "POST", set(echo_h.clone(), "mcp-name", "alpha__\u{e9}cho"), bytes(&echo), 400, Want::Err(HEADER_MISMATCH));
    let f = forecast(json!({"city": "Oslo", "days": 3}));
    let fh = set(set(std(&f), "mcp-param-city", "Oslo"), "mcp-param-days", "3");
    add("Mcp-Param-City missing", "POST", unset(fh.clone(), "mcp-param-city"), bytes(&f), 400, Want::Err(HEADER_MISMATCH));
    add("Mcp-Param-City differs", "POST", set(fh.clone(), "mcp-param-city", "Bergen"), bytes(&f), 400, Want::Err(HEADER_MISMATCH));
    add("Mcp-Param-Days differs numerically", "POST", set(fh.clone(), "mcp-param-days", "4"), bytes(&f), 400, Want::Err(HEADER_MISMATCH));
    add("Mcp-Param-City bad base64", "POST", set(fh.clone(), "mcp-param-city", "=?base64?%%%?="), bytes(&f), 400, Want::Err(HEADER_MISMATCH));
    add("Mcp-Param-City sentinel of non-UTF-8", "POST", set(fh.clone(), "mcp-param-city", "=?base64?/w==?="), bytes(&f), 400, Want::Err(HEADER_MISMATCH));
    let z = forecast(json!({"city": "Z\u{fc}rich"}));
    add("Mcp-Param-City raw UTF-8 instead of the sentinel", "POST", set(std(&z), "mcp-param-city", "Z\u{fc}rich"), bytes(&z), 400, Want::Err(HEADER_MISMATCH));
    let crlf = forecast(json!({"city": "a\r\nb"}));
    add("Mcp-Param-City CR/LF value sent plain", "POST", set(std(&crlf), "mcp-param-city", "a  b"), bytes(&crlf), 400, Want::Err(HEADER_MISMATCH));
    let absent = forecast(json!({"days": 3}));
    add("Mcp-Param-City sent for an absent argument", "POST", set(set(std(&absent), "mcp-param-city", "Oslo"), "mcp-param-days", "3"), bytes(&absent), 400, Want::Err(HEADER_MISMATCH));
    let null = forecast(json!({"city": null}));
    add("Mcp-Param-City sent for a null argument", "POST", set(std(&null), "mcp-param-city", "null"), bytes(&null), 400, Want::Err(HEADER_MISMATCH));

    // --- methods, tools, wrong types ---
    let v = m.envelope("foo/bar", json!({}));
    add("unknown method (modern)", "POST", std(&v), bytes(&v), 404, Want::Err(METHOD_NOT_FOUND));
    let v = l.envelope("foo/bar", json!({}));
    add("unknown method (handshake era)", "POST", l.headers_for(&v), bytes(&v), 200, Want::Err(METHOD_NOT_FOUND));
    for (name, tool) in [("unknown tool", "alpha__nope"), ("tool of an unknown upstream", "zeta__echo"), ("tool name without prefix", "echo")] {
        let v = call(json!({"name": tool, "arguments": {}}));
        add(name, "POST", std(&v), bytes(&v), 200, Want::Err(INVALID_PARAMS));
    }
    let v = call(json!({"name": 5, "arguments": {}}));
    add("tool name a number", "POST", set(std(&v), "mcp-name", "5"), bytes(&v), 200, Want::Err(INVALID_PARAMS));
    let v = call(json!({"arguments": {}}));
    add("tool name missing", "POST", set(std(&v), "mcp-name", "alpha__echo"), bytes(&v), 200, Want::Err(INVALID_PARAMS));
    let v = call(json!({"name": "alpha__echo", "arguments": "x"}));
    add("arguments a string", "POST", std(&v), bytes(&v), 200, Want::Err(INVALID_PARAMS));

    // --- cursors ---
    for (name, c) in [
        ("forged cursor", json!("bm90LWEtY3Vyc29y")),
        ("cursor a number", json!(2)),
        ("cursor from another gateway key", json!(t.foreign_cursor)),
        ("stale cursor (other catalog version)", json!(t.stale_cursor)),
        ("session id used as a cursor", json!(t.session)),
        ("tampered cursor", json!(format!("{}A", t.cursor))),
    ] {
        let v = m.envelope("tools/list", json!({"cursor": c}));
        add(name, "POST", std(&v), bytes(&v), 200, Want::Err(INVALID_PARAMS));
    }

    // --- requestState ---
    let mut tampered = t.state.clone();
    tampered.insert(4, if tampered.as_bytes().get(4) == Some(&b'A') { 'B' } else { 'A' });
    for (name, tool, state) in [
        ("forged requestState", "alpha__mrtr", json!("not-a-sealed-state")),
        ("tampered requestState", "alpha__mrtr", json!(tampered)),
        ("expired requestState", "alpha__mrtr", json!(t.expired_state)),
        ("requestState from another gateway key", "alpha__mrtr", json!(t.foreign_state)),
        ("requestState of another tool", "alpha__mrtr2", json!(t.state)),
        ("requestState an object", "alpha__mrtr", json!({"s": t.state})),
        ("cursor used as requestState", "alpha__mrtr", json!(t.cursor)),
    ] {
        let v = mrtr_retry(tool, state);
        add(name, "POST", std(&v), bytes(&v), 200, Want::Err(INVALID_PARAMS));
    }

    // --- handshake-era sessions ---
    let ll = l.envelope("tools/list", json!({}));
    let lh = l.headers_for(&ll);
    add("legacy request without a session", "POST", unset(lh.clone(), "mcp-session-id"), bytes(&ll), 400, Want::Err(INVALID_REQUEST));
    for (name, sid) in [
        ("forged session id", "made-up-session".to_owned()),
        ("tampered session id", format!("{}x", t.session)),
        ("session id from another gateway key", t.foreign_session.clone()),
        ("expired session id", t.expired_session.clone()),
        ("cursor used as a session id", t.cursor.clone()),
    ] {
        add(name, "POST", set(lh.clone(), "mcp-session-id", &sid), bytes(&ll), 404, Want::Err(INVALID_REQUEST));
    }
    add("session version header unsupported", "POST", set(lh.clone(), "mcp-protocol-version", "2024-11-05"), bytes(&ll), 400, Want::Err(HEADER_MISMATCH));
    // SHOULD be the negotiated one; another served handshake-era version is
    // accepted, as the SDKs' servers do (conformance 0.1.16 sends 2025-03-26).
    add("session version header another served version", "POST", set(lh.clone(), "mcp-protocol-version", "2025-03-26"), bytes(&ll), 200, Want::Ok);
    let init = |params: Value| bytes(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}));
    let ih = vec![("content-type".to_owned(), "application/json".to_owned()), ("accept".to_owned(), "application/json, text/event-stream".to_owned())];
    add("initialize with a numeric version", "POST", ih.clone(), init(json!({"protocolVersion": 20251125, "capabilities": {}})), 200, Want::Err(INVALID_PARAMS));
    add("initialize with string capabilities", "POST", ih.clone(), init(json!({"protocolVersion": "2025-11-25", "capabilities": "all"})), 200, Want::Err(INVALID_PARAMS));
    add("DELETE with a forged session id", "DELETE", vec![("mcp-session-id".into(), "made-up".into())], Vec::new(), 404, Want::Err(INVALID_REQUEST));

    // --- edge limits and HTTP methods ---
    let big = forecast(json!({"blob": "x".repeat(20 * 1024)}));
    add("oversized body", "POST", std(&big), bytes(&big), 413, Want::Status);
    let many: Headers = list_h.iter().cloned().chain((0..60).map(|i| (format!("x-filler-{i}"), "1".to_owned()))).collect();
    add("too many headers", "POST", many, bytes(&list), 431, Want::Status);
    add("one huge header", "POST", set(list_h.clone(), "x-huge", &"h".repeat(20 * 1024)), bytes(&list), 431, Want::Status);
    add("foreign Origin", "POST", set(list_h.clone(), "origin", "https://evil.example"), bytes(&list), 403, Want::Err(FORBIDDEN));
    add("Origin null", "POST", set(list_h.clone(), "origin", "null"), bytes(&list), 403, Want::Err(FORBIDDEN));
    add("GET", "GET", vec![("accept".into(), "text/event-stream".into())], Vec::new(), 405, Want::Status);
    add("DELETE without a session", "DELETE", Vec::new(), Vec::new(), 405, Want::Status);
    add("PUT", "PUT", list_h.clone(), bytes(&list), 405, Want::Status);
    cases
}

fn check(case: &Case, status: u16, body: &Value, raw: &str) -> Option<String> {
    let code = body.pointer("/error/code").and_then(Value::as_i64);
    let origin = body.pointer("/error/data/origin").and_then(Value::as_str);
    let ok = status == case.status
        && match case.want {
            Want::Err(want) => code == Some(want) && origin == Some("gateway"),
            Want::Ok => body.get("result").is_some() && code.is_none(),
            Want::Status => true,
        };
    (!ok).then(|| {
        format!(
            "{:<48} want {} {:?}, got {} {}",
            case.name,
            case.status,
            case.want,
            status,
            raw.chars().take(200).collect::<String>()
        )
    })
}

#[tokio::test]
async fn the_bad_input_table() {
    let alpha = MockUpstream::start(MockSpec::modern("alpha", tools())).await;
    let alpha_b = MockUpstream::start(MockSpec::modern("alpha", tools())).await;
    let alpha_c = MockUpstream::start(MockSpec::modern(
        "alpha",
        vec![
            MockTool::echo("echo"),
            MockTool::new("mrtr", json!({"type": "object"}), Behavior::InputRequired),
        ],
    ))
    .await;
    let page = "catalog: {page_size: 1}\n";
    let a = gateway(&alpha, KEY_A, page).await;
    // Same catalog, other key: its tokens are foreign to `a`.
    let b = gateway(&alpha_b, KEY_B, page).await;
    // Same key, other catalog, short lifetimes: stale cursors, expired tokens.
    let short = "catalog: {page_size: 1}\nsessions: {ttl: 1s}\n";
    let c = gateway(
        &alpha_c,
        KEY_A,
        &format!("{short}request_state: {{secret_env: JUNCTION_TEST_KEY, ttl: 1s}}\n"),
    )
    .await;
    let tokens = Tokens {
        state: request_state(&a).await,
        foreign_state: request_state(&b).await,
        expired_state: request_state(&c).await,
        cursor: cursor(&a).await,
        foreign_cursor: cursor(&b).await,
        stale_cursor: cursor(&c).await,
        session: session(&a).await,
        foreign_session: session(&b).await,
        expired_session: session(&c).await,
    };
    tokio::time::sleep(Duration::from_millis(1500)).await;

    let m = TestClient::modern(&a.url("/mcp"));
    let l = TestClient::legacy(&a.url("/mcp"), "2025-11-25");
    l.set_session_id(Some(tokens.session.clone()));
    let calls_before = alpha.requests_for("tools/call").len();
    let seen_before = alpha.requests().len();

    let cases = table(&m, &l, &tokens);
    assert!(cases.len() >= 40, "the table has {} rows", cases.len());
    let mut mismatches = Vec::new();
    for case in &cases {
        let r = m
            .raw(case.http, case.headers.clone(), case.body.clone())
            .await;
        mismatches.extend(check(case, r.status, &r.body, &r.text()));
    }

    let after: Vec<String> = alpha.requests()[seen_before..]
        .iter()
        .map(|r| r.method().unwrap_or("<none>").to_owned())
        .filter(|m| m != "tools/list" && m != "server/discover")
        .collect();
    if !after.is_empty() || alpha.requests_for("tools/call").len() != calls_before {
        mismatches.push(format!(
            "the upstream saw more than catalog traffic: {after:?}"
        ));
    }
    assert!(
        mismatches.is_empty(),
        "{} of {} rows failed:\n{}\n--- gateway stderr (tail) ---\n{}",
        mismatches.len(),
        cases.len(),
        mismatches.join("\n"),
        a.stderr()
            .lines()
            .rev()
            .take(20)
            .collect::<Vec<_>>()
            .join("\n")
    );
    for gw in [a, b, c] {
        gw.stop().await;
    }
}
