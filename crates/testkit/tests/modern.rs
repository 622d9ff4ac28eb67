use junction_testkit::{
    codec, Behavior, MockSpec, MockTool, MockUpstream, TestClient, REQUEST_STATE,
};
use serde_json::json;
use std::time::Duration;

fn h(n: &str, v: &str) -> (String, String) {
    (n.to_string(), v.to_string())
}

fn region_tool() -> MockTool {
    MockTool::new(
        "query",
        json!({"type": "object", "properties": {
            "target": {"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}},
            "limit": {"type": "integer", "x-mcp-header": "Limit"},
            "sql": {"type": "string"}}}),
        Behavior::Echo,
    )
}

#[tokio::test]
async fn discover_list_and_echo_call() {
    let up = MockUpstream::start(
        MockSpec::modern("alpha", vec![MockTool::echo("hello")]).with_ttl_ms(1234),
    )
    .await;
    let c = TestClient::modern(&up.url);

    let d = c.request("server/discover", json!({})).await;
    assert_eq!(d.status, 200);
    assert_eq!(d.result()["supportedVersions"], json!(["2026-07-28"]));
    assert_eq!(d.result()["resultType"], "complete");
    assert_eq!(d.result()["ttlMs"], 1234);

    let l = c.request("tools/list", json!({})).await;
    assert_eq!(l.result()["tools"][0]["name"], "hello");
    assert_eq!(l.result()["cacheScope"], "public");
    assert_eq!(l.result()["ttlMs"], 1234);
    assert_eq!(l.result()["resultType"], "complete");

    let r = c.call_tool("hello", json!({"x": [1, "ü"]})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.result()["resultType"], "complete");
    assert_eq!(
        r.result()["structuredContent"],
        json!({"upstream": "alpha", "tool": "hello", "arguments": {"x": [1, "ü"]}})
    );
    let text: serde_json::Value =
        serde_json::from_str(r.result()["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text["upstream"], "alpha");

    let calls = up.calls("hello");
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].header("mcp-method"), Some("tools/call"));
    assert_eq!(calls[0].header("Mcp-Name"), Some("hello"));
    assert_eq!(calls[0].header("mcp-protocol-version"), Some("2026-07-28"));
    assert_eq!(
        calls[0].body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
}

#[tokio::test]
async fn envelope_validation_errors() {
    let up = MockUpstream::start(MockSpec::modern("alpha", vec![MockTool::echo("hello")])).await;
    let c = TestClient::modern(&up.url);

    // Mcp-Method disagreeing with the body.
    let r = c
        .request_with_headers("tools/list", json!({}), vec![h("Mcp-Method", "tools/call")])
        .await;
    assert_eq!((r.status, r.error_code()), (400, Some(-32020)));
    // MCP-Protocol-Version disagreeing with _meta.
    let r = c
        .request_with_headers(
            "tools/list",
            json!({}),
            vec![h("MCP-Protocol-Version", "2025-11-25")],
        )
        .await;
    assert_eq!((r.status, r.error_code()), (400, Some(-32020)));
    // Mcp-Name disagreeing with params.name.
    let body = c.envelope("tools/call", json!({"name": "hello"}));
    let r = c.send(&body, vec![h("mcp-name", "other")]).await;
    assert_eq!((r.status, r.error_code()), (400, Some(-32020)));
    // Missing _meta entirely.
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}});
    let r = c.send(&body, vec![]).await;
    assert_eq!((r.status, r.error_code()), (400, Some(-32602)));
    // Unsupported version, consistently in header and _meta.
    let r = c
        .request_with_headers(
            "tools/list",
            json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2099-01-01"}}),
            vec![],
        )
        .await;
    assert_eq!((r.status, r.error_code()), (400, Some(-32022)));
    assert_eq!(r.body["error"]["data"]["supported"], json!(["2026-07-28"]));
    assert_eq!(r.body["error"]["data"]["requested"], "2099-01-01");
    // initialize on a modern-only server.
    let legacy = TestClient::legacy(&up.url, "2025-11-25");
    let r = legacy.initialize().await;
    assert_eq!((r.status, r.error_code()), (400, Some(-32022)));
    assert_eq!(r.body["error"]["data"]["supported"], json!(["2026-07-28"]));
    // Unknown method, unknown tool, GET/DELETE.
    let r = c.request("example/unknown", json!({})).await;
    assert_eq!((r.status, r.error_code()), (404, Some(-32601)));
    let r = c.call_tool("nope", json!({})).await;
    assert_eq!((r.status, r.error_code()), (200, Some(-32602)));
    assert_eq!(c.raw("GET", vec![], vec![]).await.status, 405);
    assert_eq!(c.raw("DELETE", vec![], vec![]).await.status, 405);
    // Garbage body.
    let r = c
        .raw(
            "POST",
            vec![h("content-type", "application/json")],
            b"{nope".to_vec(),
        )
        .await;
    assert_eq!((r.status, r.error_code()), (400, Some(-32700)));
    // A notification is accepted without a body.
    assert_eq!(
        c.notify("notifications/cancelled", json!({"requestId": 1}))
            .await
            .status,
        202
    );
}

#[tokio::test]
async fn mcp_name_is_decoded_before_comparing() {
    let up = MockUpstream::start(MockSpec::modern("alpha", vec![MockTool::echo("grüße")])).await;
    let c = TestClient::modern(&up.url);
    let r = c.call_tool("grüße", json!({})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        up.calls("grüße")[0].header("mcp-name"),
        Some(codec::encode("grüße").as_str())
    );
    assert!(up.calls("grüße")[0]
        .header("mcp-name")
        .unwrap()
        .starts_with("=?base64?"));
}

#[tokio::test]
async fn param_headers_are_required_and_checked() {
    let up = MockUpstream::start(MockSpec::modern("alpha", vec![region_tool()])).await;
    let c = TestClient::modern(&up.url);
    let args = json!({"target": {"region": "Zürich"}, "limit": 42, "sql": "x"});
    let good = vec![
        h("Mcp-Param-Region", &codec::encode("Zürich")),
        h("mcp-param-limit", "42.0"),
    ];

    let body = c.envelope("tools/call", json!({"name": "query", "arguments": args}));
    let r = c.send(&body, good.clone()).await;
    assert_eq!(r.status, 200, "{}", r.text());

    let missing = c
        .send(
            &c.envelope("tools/call", json!({"name": "query", "arguments": args})),
            vec![good[0].clone()],
        )
        .await;
    assert_eq!((missing.status, missing.error_code()), (400, Some(-32020)));

    let wrong = vec![h("Mcp-Param-Region", "Zurich"), good[1].clone()];
    let r = c
        .send(
            &c.envelope("tools/call", json!({"name": "query", "arguments": args})),
            wrong,
        )
        .await;
    assert_eq!((r.status, r.error_code()), (400, Some(-32020)));

    // Null or absent values must have no header.
    let sparse = json!({"target": {"region": null}, "sql": "x"});
    let r = c
        .send(
            &c.envelope("tools/call", json!({"name": "query", "arguments": sparse})),
            vec![],
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = c
        .send(
            &c.envelope("tools/call", json!({"name": "query", "arguments": sparse})),
            vec![h("Mcp-Param-Region", "x")],
        )
        .await;
    assert_eq!((r.status, r.error_code()), (400, Some(-32020)));
}

#[tokio::test]
async fn input_required_round_trip() {
    let tool = MockTool::new(
        "confirm",
        json!({"type": "object"}),
        Behavior::InputRequired,
    );
    let up = MockUpstream::start(MockSpec::modern("alpha", vec![tool])).await;

    let bare = TestClient::modern(&up.url);
    let r = bare.call_tool("confirm", json!({"a": 1})).await;
    assert_eq!(
        (r.status, r.error_code()),
        (400, Some(-32021)),
        "no elicitation capability declared"
    );

    let c = TestClient::modern(&up.url).with_capabilities(json!({"elicitation": {"form": {}}}));
    let first = c.call_tool("confirm", json!({"a": 1})).await;
    assert_eq!(first.result()["resultType"], "input_required");
    assert_eq!(
        first.result()["inputRequests"]["confirm"]["method"],
        "elicitation/create"
    );
    let state = first.result()["requestState"].as_str().unwrap();
    assert_eq!(state, REQUEST_STATE);

    let answer = json!({"confirm": {"action": "accept", "content": {"ok": true}}});
    let retry = c
        .request("tools/call", json!({"name": "confirm", "arguments": {"a": 1}, "inputResponses": answer, "requestState": state}))
        .await;
    assert_eq!(retry.result()["resultType"], "complete", "{}", retry.text());
    assert_eq!(
        retry.result()["structuredContent"]["inputResponses"],
        answer
    );
    assert_eq!(
        retry.result()["structuredContent"]["requestState"],
        REQUEST_STATE
    );
    assert_ne!(first.body["id"], retry.body["id"]);

    let tampered = c
        .request("tools/call", json!({"name": "confirm", "arguments": {"a": 1}, "inputResponses": answer, "requestState": "st+/= a \"quoted\" 1"}))
        .await;
    assert_eq!(tampered.error_code(), Some(-32602));
}

#[tokio::test]
async fn sse_progress_arrives_in_order_before_the_result() {
    let tool = MockTool::new(
        "work",
        json!({"type": "object"}),
        Behavior::Progress { steps: 3 },
    );
    let up = MockUpstream::start(MockSpec::modern("alpha", vec![tool])).await;
    let c = TestClient::modern(&up.url);
    let r = c
        .request(
            "tools/call",
            json!({"name": "work", "arguments": {}, "_meta": {"progressToken": "p-1"}}),
        )
        .await;
    assert!(r.is_sse());
    assert_eq!(r.header("x-accel-buffering"), Some("no"));
    assert_eq!(r.events.len(), 4, "{}", r.text());
    for (i, e) in r.events[..3].iter().enumerate() {
        assert_eq!(e["method"], "notifications/progress");
        assert_eq!(e["params"]["progressToken"], "p-1");
        assert_eq!(e["params"]["progress"], i as u64 + 1);
    }
    assert_eq!(r.events[3], r.body);
    assert_eq!(r.result()["structuredContent"]["steps"], 3);
}

#[tokio::test]
async fn sse_mode_streams_every_answer_and_close_is_cancellation() {
    let tools = vec![
        MockTool::echo("hello"),
        MockTool::new(
            "slow",
            json!({"type": "object"}),
            Behavior::Slow(Duration::from_secs(30)),
        ),
    ];
    let up = MockUpstream::start(MockSpec::modern("alpha", tools).with_sse(true)).await;
    let c = TestClient::modern(&up.url);
    let r = c.call_tool("hello", json!({})).await;
    assert!(r.is_sse());
    assert_eq!(r.result()["structuredContent"]["tool"], "hello");

    let stream = c
        .stream(
            "tools/call",
            json!({"name": "slow", "arguments": {}}),
            vec![],
        )
        .await;
    assert_eq!(stream.status, 200);
    let id = up.calls("slow")[0].body["id"].clone();
    drop(stream);
    let mut seen = false;
    for _ in 0..200 {
        if up.cancelled().contains(&id) {
            seen = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(seen, "closing the stream cancels the call");
}

#[tokio::test]
async fn errors_tool_errors_and_pagination() {
    let tools = vec![
        MockTool::echo("a"),
        MockTool::new(
            "b",
            json!({"type": "object"}),
            Behavior::Error {
                code: -32099,
                message: "boom".into(),
            },
        ),
        MockTool::new("c", json!({"type": "object"}), Behavior::ToolError),
    ];
    let up = MockUpstream::start(MockSpec::modern("alpha", tools).with_page_size(2)).await;
    let c = TestClient::modern(&up.url);
    let r = c.call_tool("b", json!({})).await;
    assert_eq!((r.status, r.error_code()), (200, Some(-32099)));
    assert_eq!(r.body["error"]["message"], "boom");
    let r = c.call_tool("c", json!({})).await;
    assert_eq!(r.result()["isError"], true);

    let p1 = c.request("tools/list", json!({})).await;
    assert_eq!(p1.result()["tools"].as_array().unwrap().len(), 2);
    let cursor = p1.result()["nextCursor"].as_str().unwrap().to_string();
    let p2 = c.request("tools/list", json!({"cursor": cursor})).await;
    assert_eq!(p2.result()["tools"][0]["name"], "c");
    assert!(p2.result().get("nextCursor").is_none());
    let bad = c.request("tools/list", json!({"cursor": "forged"})).await;
    assert_eq!(bad.error_code(), Some(-32602));

    up.set_tools(vec![MockTool::echo("z")]);
    let l = c.request("tools/list", json!({})).await;
    assert_eq!(l.result()["tools"][0]["name"], "z");
}

#[tokio::test]
async fn down_means_connection_refused_then_up_again() {
    let up = MockUpstream::start(MockSpec::modern("alpha", vec![MockTool::echo("hello")])).await;
    let c = TestClient::modern(&up.url);
    assert_eq!(c.call_tool("hello", json!({})).await.status, 200);
    up.set_down(true).await;
    assert!(
        tokio::net::TcpStream::connect(up.addr).await.is_err(),
        "connection refused while down"
    );
    up.set_down(false).await;
    assert_eq!(c.call_tool("hello", json!({})).await.status, 200);
    up.shutdown().await;
}
