use junction_testkit::{Behavior, MockSpec, MockTool, MockUpstream, TestClient};
use serde_json::json;
use std::time::Duration;

fn h(n: &str, v: &str) -> (String, String) {
    (n.to_string(), v.to_string())
}

#[tokio::test]
async fn session_flow() {
    let up = MockUpstream::start(MockSpec::legacy("old", vec![MockTool::echo("hello")])).await;
    let c = TestClient::legacy(&up.url, "2025-06-18");
    let init = c.initialize().await;
    assert_eq!(init.status, 200);
    assert_eq!(init.result()["protocolVersion"], "2025-06-18");
    assert!(init.result()["serverInfo"]["name"].is_string());
    let sid = c.session_id().expect("Mcp-Session-Id");
    assert_eq!(up.requests_for("notifications/initialized").len(), 1);

    let l = c.request("tools/list", json!({})).await;
    assert_eq!(l.result()["tools"][0]["name"], "hello");
    assert!(l.result().get("resultType").is_none());
    assert!(l.result().get("ttlMs").is_none());

    let r = c.call_tool("hello", json!({"k": 1})).await;
    assert!(r.result().get("resultType").is_none());
    assert_eq!(r.result()["structuredContent"]["upstream"], "old");
    let rec = &up.calls("hello")[0];
    assert_eq!(rec.header("mcp-session-id"), Some(sid.as_str()));
    assert_eq!(rec.header("mcp-protocol-version"), Some("2025-06-18"));

    assert_eq!(c.request("ping", json!({})).await.result(), &json!({}));
    assert_eq!(
        c.notify("notifications/cancelled", json!({"requestId": 5}))
            .await
            .status,
        202
    );

    // Wrong version header for this session.
    let r = c
        .request_with_headers(
            "ping",
            json!({}),
            vec![h("mcp-protocol-version", "2025-11-25")],
        )
        .await;
    assert_eq!(r.status, 400);

    up.expire_sessions();
    let r = c.request("tools/list", json!({})).await;
    assert_eq!(r.status, 404);
    c.initialize().await;
    assert_ne!(c.session_id().unwrap(), sid);
    assert_eq!(c.request("tools/list", json!({})).await.status, 200);

    assert_eq!(c.delete_session().await.status, 200);
    assert_eq!(up.session_count(), 0);
    assert_eq!(c.request("tools/list", json!({})).await.status, 404);
}

#[tokio::test]
async fn missing_session_and_modern_probe_get_non_modern_400() {
    let up = MockUpstream::start(MockSpec::legacy("old", vec![])).await;
    let modern = TestClient::modern(&up.url);
    let r = modern.request("server/discover", json!({})).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.error_code(), Some(-32600));
    assert_eq!(
        r.body["error"]["message"],
        "Bad Request: Missing session ID"
    );
    let c = TestClient::legacy(&up.url, "2024-01-01");
    assert_eq!(
        c.initialize().await.result()["protocolVersion"],
        "2025-11-25"
    );
    assert_eq!(
        c.request("server/discover", json!({})).await.error_code(),
        Some(-32601)
    );
    assert_eq!(c.raw("GET", vec![], vec![]).await.status, 405);
}

#[tokio::test]
async fn sse_progress_and_server_request_elicitation() {
    let tools = vec![
        MockTool::new(
            "work",
            json!({"type": "object"}),
            Behavior::Progress { steps: 2 },
        ),
        MockTool::new(
            "confirm",
            json!({"type": "object"}),
            Behavior::InputRequired,
        ),
    ];
    let up = MockUpstream::start(MockSpec::legacy("old", tools).with_sse(true)).await;
    let c = TestClient::legacy(&up.url, "2025-11-25").with_capabilities(json!({"elicitation": {}}));
    let init = c.initialize().await;
    assert!(init.is_sse());
    assert!(c.session_id().is_some());

    let r = c
        .request(
            "tools/call",
            json!({"name": "work", "arguments": {}, "_meta": {"progressToken": 7}}),
        )
        .await;
    let methods: Vec<_> = r
        .events
        .iter()
        .map(|e| e["method"].as_str().unwrap_or("response"))
        .collect();
    assert_eq!(
        methods,
        [
            "notifications/progress",
            "notifications/progress",
            "response"
        ]
    );
    assert_eq!(r.events[1]["params"]["progress"], 2);

    let mut s = c
        .stream(
            "tools/call",
            json!({"name": "confirm", "arguments": {"a": 1}}),
            vec![],
        )
        .await;
    let ask = s
        .next(Duration::from_secs(10))
        .await
        .expect("elicitation request");
    assert_eq!(ask["method"], "elicitation/create");
    let answered = c
        .respond(
            ask["id"].clone(),
            json!({"action": "accept", "content": {"ok": true}}),
        )
        .await;
    assert_eq!(answered.status, 202);
    let done = s.next(Duration::from_secs(10)).await.expect("final result");
    assert_eq!(
        done["result"]["structuredContent"]["elicitation"]["action"],
        "accept"
    );
}
