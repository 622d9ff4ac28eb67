//! Logging and cancellation across protocol eras (NOTES §12.3): a handshake-era
//! client's `logging/setLevel` reaches modern upstreams as a per-request
//! `logLevel` and filters what it is sent; a modern client's `logLevel` filters
//! what any upstream sends; a handshake-era `notifications/cancelled` ends the
//! upstream call.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use junction_testkit::{
    spawn_gateway, Behavior, Gateway, MockSpec, MockTool, MockUpstream, TestClient,
};
use serde_json::{json, Value};

fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_junction"))
}

struct World {
    modern: MockUpstream,
    legacy: MockUpstream,
    gw: Gateway,
}

fn tools() -> Vec<MockTool> {
    vec![
        MockTool::new("chatty", json!({"type": "object"}), Behavior::Logs),
        MockTool::new(
            "slow",
            json!({"type": "object"}),
            Behavior::Slow(Duration::from_secs(30)),
        ),
        MockTool::new(
            "pause",
            json!({"type": "object"}),
            Behavior::Slow(Duration::from_millis(1500)),
        ),
    ]
}

async fn world() -> World {
    let modern = MockUpstream::start(MockSpec::modern("m", tools()).with_sse(true)).await;
    let legacy = MockUpstream::start(MockSpec::legacy("l", tools()).with_sse(true)).await;
    let yaml = format!(
        "server: {{listen: 127.0.0.1:0}}\nupstreams:\n  - {{id: m, url: {}}}\n  - {{id: l, url: {}}}\n",
        modern.url, legacy.url
    );
    let gw = spawn_gateway(bin(), &yaml).await;
    World { modern, legacy, gw }
}

async fn legacy_client(gw: &Gateway) -> TestClient {
    let c = TestClient::legacy(&gw.url("/mcp"), "2025-11-25");
    assert_eq!(c.initialize().await.status, 200, "{}", gw.stderr());
    c
}

/// The levels of the log messages a call's response carried, in order, and
/// whether it ended with the tool's result.
async fn call_and_collect_levels(c: &TestClient, tool: &str, meta: Value) -> (Vec<String>, bool) {
    let mut params = json!({"name": tool, "arguments": {}});
    if !meta.is_null() {
        params["_meta"] = meta;
    }
    let messages = c
        .stream("tools/call", params, vec![])
        .await
        .collect(Duration::from_secs(10))
        .await;
    let levels = messages
        .iter()
        .filter(|m| m["method"] == "notifications/message")
        .map(|m| m["params"]["level"].as_str().unwrap_or("?").to_owned())
        .collect();
    let done = messages
        .last()
        .is_some_and(|m| m.pointer("/result/structuredContent/tool").is_some());
    (levels, done)
}

fn upstream_log_level(up: &MockUpstream) -> Option<Value> {
    let calls = up.calls("chatty");
    let last = calls.last().expect("the upstream got the call");
    last.body
        .pointer("/params/_meta/io.modelcontextprotocol~1logLevel")
        .cloned()
}

#[tokio::test]
async fn a_legacy_session_level_is_stamped_upstream_and_filters_messages() {
    let w = world().await;
    let c = legacy_client(&w.gw).await;
    let init = c.initialize().await;
    assert!(
        init.result()["capabilities"]["logging"].is_object(),
        "logging is advertised: {}",
        init.text()
    );

    // No level set: whatever the upstream sends, and no level stamped.
    let (levels, done) = call_and_collect_levels(&c, "m__chatty", Value::Null).await;
    assert!(done, "{}", w.gw.stderr());
    assert_eq!(levels, ["debug", "info", "warning", "error"]);
    assert_eq!(upstream_log_level(&w.modern), None);

    let set = c
        .request("logging/setLevel", json!({"level": "warning"}))
        .await;
    assert_eq!(set.status, 200, "{}", set.text());
    assert_eq!(set.result(), &json!({}));

    // Modern upstream: told the level in `_meta`, and its messages filtered.
    let (levels, done) = call_and_collect_levels(&c, "m__chatty", Value::Null).await;
    assert!(done);
    assert_eq!(levels, ["warning", "error"]);
    assert_eq!(upstream_log_level(&w.modern), Some(json!("warning")));

    // Handshake-era upstream (sends every level): filtered by Junction.
    let (levels, done) = call_and_collect_levels(&c, "l__chatty", Value::Null).await;
    assert!(done);
    assert_eq!(levels, ["warning", "error"]);

    // The level belongs to that session only.
    let other = legacy_client(&w.gw).await;
    let (levels, _) = call_and_collect_levels(&other, "m__chatty", Value::Null).await;
    assert_eq!(levels.len(), 4);
}

#[tokio::test]
async fn a_bad_level_is_refused_and_modern_clients_have_no_set_level() {
    let w = world().await;
    let c = legacy_client(&w.gw).await;
    let bad = c
        .request("logging/setLevel", json!({"level": "loud"}))
        .await;
    assert_eq!(bad.error_code(), Some(-32602), "{}", bad.text());
    let missing = c.request("logging/setLevel", json!({})).await;
    assert_eq!(missing.error_code(), Some(-32602), "{}", missing.text());

    let modern = TestClient::modern(&w.gw.url("/mcp"));
    let gone = modern
        .request("logging/setLevel", json!({"level": "info"}))
        .await;
    assert_eq!((gone.status, gone.error_code()), (404, Some(-32601)));
    let bad_meta = modern
        .request(
            "tools/call",
            json!({"name": "m__chatty", "arguments": {},
                   "_meta": {"io.modelcontextprotocol/logLevel": "chatty"}}),
        )
        .await;
    assert_eq!(bad_meta.error_code(), Some(-32602), "{}", bad_meta.text());
    assert!(
        w.modern.calls("chatty").is_empty(),
        "nothing reached upstream"
    );
}

#[tokio::test]
async fn a_modern_client_gets_log_messages_only_at_the_level_it_asked_for() {
    let w = world().await;
    let c = TestClient::modern(&w.gw.url("/mcp"));
    for tool in ["m__chatty", "l__chatty"] {
        let (levels, done) = call_and_collect_levels(&c, tool, Value::Null).await;
        assert!(done, "{tool}: {}", w.gw.stderr());
        assert!(
            levels.is_empty(),
            "{tool}: no logLevel, no log messages: {levels:?}"
        );

        let meta = json!({"io.modelcontextprotocol/logLevel": "info"});
        let (levels, done) = call_and_collect_levels(&c, tool, meta).await;
        assert!(done, "{tool}");
        assert_eq!(levels, ["info", "warning", "error"], "{tool}");
    }
    assert_eq!(upstream_log_level(&w.modern), Some(json!("info")));
}

/// Calls `tool` on a stream, cancels it by notification, and checks the
/// response ends without a result and the upstream saw its call cancelled.
async fn cancel_by_notification(w: &World, up: &MockUpstream, tool: &str) {
    let c = legacy_client(&w.gw).await;
    let body = c.envelope("tools/call", json!({"name": tool, "arguments": {}}));
    let id = body["id"].clone();
    let call = {
        let body = body.clone();
        let c = &c;
        async move { c.stream_body(&body, vec![]).await }
    };
    let watcher = async {
        // Cancel once the upstream is running the call.
        for _ in 0..200 {
            if !up.calls("slow").is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        assert_eq!(up.calls("slow").len(), 1, "{}", w.gw.stderr());
        let n = c
            .notify(
                "notifications/cancelled",
                json!({"requestId": id, "reason": "user"}),
            )
            .await;
        assert_eq!(n.status, 202);
    };
    let (mut stream, ()) = tokio::join!(call, watcher);
    assert_eq!(stream.status, 200);
    let mut messages = Vec::new();
    while let Some(m) = stream.next(Duration::from_secs(10)).await {
        messages.push(m);
    }
    assert!(stream.ended(), "the response ended (did not hang)");
    assert!(
        messages
            .iter()
            .all(|m| m.get("result").is_none() && m.get("error").is_none()),
        "no response for a cancelled request: {messages:?}"
    );
    let cancelled = up.saw_cancellation(Duration::from_secs(5)).await;
    assert!(
        cancelled,
        "{tool}: upstream call cancelled: {}",
        w.gw.stderr()
    );
}

#[tokio::test]
async fn a_legacy_cancellation_ends_the_upstream_call_of_either_era() {
    let w = world().await;
    cancel_by_notification(&w, &w.modern, "m__slow").await;
    cancel_by_notification(&w, &w.legacy, "l__slow").await;
}

#[tokio::test]
async fn a_cancellation_from_another_session_changes_nothing() {
    let w = world().await;
    let owner = legacy_client(&w.gw).await;
    let stranger = legacy_client(&w.gw).await;
    let body = owner.envelope("tools/call", json!({"name": "m__pause", "arguments": {}}));
    let id = body["id"].clone();
    let call = async {
        owner
            .stream_body(&body, vec![])
            .await
            .collect(Duration::from_secs(10))
            .await
    };
    let meddle = async {
        for _ in 0..200 {
            if !w.modern.calls("pause").is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // Same id, wrong session; right session, an id that runs nowhere.
        let n = stranger
            .notify("notifications/cancelled", json!({"requestId": id}))
            .await;
        assert_eq!(n.status, 202);
        let n = owner
            .notify(
                "notifications/cancelled",
                json!({"requestId": "no-such-call"}),
            )
            .await;
        assert_eq!(n.status, 202);
    };
    let (messages, ()) = tokio::join!(call, meddle);
    assert!(
        messages
            .last()
            .is_some_and(|m| m.pointer("/result/structuredContent/tool") == Some(&json!("pause"))),
        "the call finished: {messages:?}"
    );
    assert!(w.modern.cancelled().is_empty());
}

#[tokio::test]
async fn a_session_token_stays_small_whatever_whitespace_the_client_sent() {
    // The session id carries the client's capabilities and comes back in a
    // header on every request: written compactly, 60 KB of a client's
    // whitespace must not push its later requests past the header limit.
    let w = world().await;
    let c = TestClient::legacy(&w.gw.url("/mcp"), "2025-11-25");
    let pad = " ".repeat(20_000);
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-11-25","capabilities":{{{pad}"roots":{pad}{{}}{pad}}},"clientInfo":{{"name":"t","version":"1"}}}}}}"#
    );
    let headers = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
    ]
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .to_vec();
    let init = c.raw("POST", headers, body.into_bytes()).await;
    assert_eq!(init.status, 200, "{}", w.gw.stderr());
    let sid = init.header("mcp-session-id").expect("a session").to_owned();
    assert!(sid.len() < 1_000, "session id of {} bytes", sid.len());
    c.set_session_id(Some(sid));
    assert_eq!(
        c.notify("notifications/initialized", json!({}))
            .await
            .status,
        202
    );
    let list = c.request("tools/list", json!({})).await;
    assert_eq!(list.status, 200);
    assert!(list.error_code().is_none(), "{:?}", list.error());
}
