//! A handshake-era upstream that sends its server requests on the session's
//! GET stream, naming no call (the TypeScript SDK's `server.request(...)`
//! without `relatedRequestId`, as the conformance suite's own fixture does for
//! sampling and elicitation): Junction's change watcher holds that stream, and
//! such a request goes to the one handshake-era client's call in flight, which
//! relays it to its client as a real server request on its SSE response.

use super::*;
use bytes::Bytes;
use http_body_util::Empty;
use junction_testkit::mock::AskingUpstream;

/// A handshake-era client's GET stream on Junction: it makes Junction watch
/// the upstream, whose own GET stream it then holds.
async fn hold_get(url: &str, sid: &str) -> hyper::Response<hyper::body::Incoming> {
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<Empty<Bytes>>();
    let req = hyper::Request::builder()
        .method("GET")
        .uri(url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", sid)
        .header("mcp-protocol-version", "2025-11-25")
        .body(Empty::new())
        .unwrap();
    tokio::time::timeout(WAIT, client.request(req))
        .await
        .unwrap()
        .unwrap()
}

#[tokio::test]
async fn legacy_client_answers_a_legacy_upstreams_requests_from_its_get_stream() {
    let up = AskingUpstream::start_unrelated(vec![
        (
            "sampling/createMessage",
            json!({"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
                   "maxTokens": 5}),
        ),
        (
            "elicitation/create",
            json!({"message": "Name?", "requestedSchema": {"type": "object",
                   "properties": {"name": {"type": "string"}}}}),
        ),
    ])
    .await;
    let yaml = format!(
        "server:\n  listen: 127.0.0.1:0\nupstreams:\n  - id: asker\n    url: {}\nroutes:\n  - {{path: /mcp, upstreams: [asker], prefix: never}}\n",
        up.url
    );
    let gw = spawn_gateway(bin(), &yaml).await;
    let c = TestClient::legacy(&gw.url("/mcp"), "2025-11-25")
        .with_capabilities(json!({"sampling": {}, "elicitation": {}}));
    assert_eq!(c.initialize().await.status, 200);
    let get = hold_get(&gw.url("/mcp"), &c.session_id().unwrap()).await;
    assert_eq!(get.status(), 200);
    let deadline = tokio::time::Instant::now() + WAIT;
    while !up.get_stream_open() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "Junction never opened the upstream's GET stream"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let mut stream = c
        .stream(
            "tools/call",
            json!({"name": "ask_all", "arguments": {}}),
            vec![],
        )
        .await;
    assert_eq!(stream.status, 200);
    let sampling = stream.next(WAIT).await.expect("sampling/createMessage");
    assert_eq!(sampling["method"], "sampling/createMessage", "{sampling}");
    let ack = c
        .respond(
            sampling["id"].clone(),
            json!({"role": "assistant", "content": {"type": "text", "text": "hello"},
                   "model": "m"}),
        )
        .await;
    assert_eq!(ack.status, 202, "{}", ack.text());
    let elicit = stream.next(WAIT).await.expect("elicitation/create");
    assert_eq!(elicit["method"], "elicitation/create", "{elicit}");
    let ack = c
        .respond(
            elicit["id"].clone(),
            json!({"action": "accept", "content": {"name": "Ada"}}),
        )
        .await;
    assert_eq!(ack.status, 202, "{}", ack.text());
    let last = stream.next(WAIT).await.expect("the final result");
    let answers = &last["result"]["structuredContent"]["answers"];
    assert_eq!(answers["ask-0"]["model"], "m", "{last}");
    assert_eq!(answers["ask-1"]["content"]["name"], "Ada", "{last}");
    drop(get);
}
