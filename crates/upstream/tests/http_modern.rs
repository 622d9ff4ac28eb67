//! Modern (2026-07-28) HTTP upstreams: JSON and SSE answers, headers, errors.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use junction_protocol::jsonrpc::RawParams;
use junction_upstream::{EraPref, UpstreamError, UpstreamEvent, UpstreamRequest};
use serde_json::json;
use tokio::sync::Notify;

fn call(name: &str, args: &str) -> UpstreamRequest<'static> {
    let mut params = RawParams::new();
    params.insert(
        "name".into(),
        std::borrow::Cow::Owned(raw(&serde_json::to_string(name).expect("name"))),
    );
    params.insert("arguments".into(), std::borrow::Cow::Owned(raw(args)));
    UpstreamRequest {
        method: "tools/call".into(),
        params,
        ..UpstreamRequest::default()
    }
}

#[tokio::test]
async fn json_response_is_one_result() {
    let fake =
        serve(|r| Reply::result(&r.id(), json!({"resultType":"complete","content":[]}))).await;
    let up = http_upstream(&fake.url, EraPref::Modern);
    let events = collect(up.request(call("echo", "{}")).await.expect("request")).await;
    assert_eq!(events.len(), 1);
    assert_eq!(result_json(&events[0])["resultType"], "complete");
}

#[tokio::test]
async fn sse_notifications_are_relayed_before_the_result_arrives() {
    let gate = Arc::new(Notify::new());
    let g = gate.clone();
    let fake = serve(move |r| {
        let id = r.id();
        let token = r.body["params"]["_meta"]["progressToken"].clone();
        let p = |n: u32| json!({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":token,"progress":n}}).to_string();
        Reply::Sse {
            before: vec![p(1), p(2)],
            gate: Some(g.clone()),
            after: vec![json!({"jsonrpc":"2.0","id":id,"result":{"resultType":"complete","content":[]}}).to_string()],
        }
    })
    .await;
    let up = http_upstream(&fake.url, EraPref::Modern);
    let mut req = call("slow", "{}");
    req.meta.push(("progressToken".into(), raw(r#""tok-1""#)));
    let mut stream = up.request(req).await.expect("request");
    // The server holds the result back until we have seen both notifications.
    for n in 1..=2 {
        let ev = stream.next().await.expect("event");
        let v = notification_json(&ev);
        assert_eq!(v["params"]["progress"], n);
        assert_eq!(
            v["params"]["progressToken"], "tok-1",
            "HTTP leaves tokens as they are"
        );
    }
    gate.notify_one();
    let last = stream.next().await.expect("result");
    assert_eq!(result_json(&last)["resultType"], "complete");
    assert!(
        stream.next().await.is_none(),
        "stream ends after the result"
    );
}

#[tokio::test]
async fn modern_request_headers_and_meta() {
    let fake = serve(|r| Reply::result(&r.id(), json!({"resultType":"complete"}))).await;
    let up = http_upstream(&fake.url, EraPref::Modern);
    let args = r#"{"city":"Zürich",  "n":1}"#;
    let mut req = call("wetter-zürich", args);
    req.meta.push(("progressToken".into(), raw("5")));
    req.meta.push((
        "io.modelcontextprotocol/protocolVersion".into(),
        raw(r#""1999-01-01""#),
    ));
    req.client_capabilities = Some(std::borrow::Cow::Owned(raw(r#"{"elicitation":{}}"#)));
    req.param_headers
        .push(("Mcp-Param-City".into(), "=?base64?WsO8cmljaA==?=".into()));
    req.forward_headers
        .push(("traceparent".into(), "00-abc-def-01".into()));
    req.forward_headers
        .push(("authorization".into(), "Bearer client-token".into()));
    collect(up.request(req).await.expect("request")).await;

    let calls = fake.calls("tools/call");
    assert_eq!(calls.len(), 1);
    let r = &calls[0];
    assert_eq!(r.header("mcp-protocol-version"), Some("2026-07-28"));
    assert_eq!(r.header("mcp-method"), Some("tools/call"));
    assert_eq!(
        r.header("mcp-name"),
        Some("=?base64?d2V0dGVyLXrDvHJpY2g=?=")
    );
    assert_eq!(r.header("mcp-param-city"), Some("=?base64?WsO8cmljaA==?="));
    assert_eq!(r.header("traceparent"), Some("00-abc-def-01"));
    assert_eq!(
        r.header("authorization"),
        Some("Bearer upstream-secret"),
        "client token never forwarded"
    );
    assert_eq!(
        r.header("accept"),
        Some("application/json, text/event-stream")
    );
    assert_eq!(r.header("content-type"), Some("application/json"));
    let meta = &r.body["params"]["_meta"];
    assert_eq!(
        meta["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    assert_eq!(
        meta["io.modelcontextprotocol/clientCapabilities"],
        json!({"elicitation":{}})
    );
    assert_eq!(
        meta["io.modelcontextprotocol/clientInfo"]["name"],
        "junction"
    );
    assert_eq!(meta["progressToken"], 5);
    assert!(
        r.raw.contains(args),
        "arguments forwarded byte for byte: {}",
        r.raw
    );
}

#[tokio::test]
async fn wrong_response_id_is_a_protocol_error() {
    let fake = serve(|_| Reply::result(&json!(999_999), json!({}))).await;
    let up = http_upstream(&fake.url, EraPref::Modern);
    let events = collect(up.request(call("x", "{}")).await.expect("request")).await;
    assert!(
        matches!(events.as_slice(), [Err(UpstreamError::Protocol(_))]),
        "{events:?}"
    );
}

#[tokio::test]
async fn invalid_json_is_a_protocol_error() {
    let fake = serve(|_| Reply::json("{not json".into())).await;
    let up = http_upstream(&fake.url, EraPref::Modern);
    let err = match up.request(call("x", "{}")).await {
        Ok(s) => collect(s).await.into_iter().find_map(Result::err),
        Err(e) => Some(e),
    };
    assert!(matches!(err, Some(UpstreamError::Protocol(_))), "{err:?}");
}

#[tokio::test]
async fn truncated_sse_is_a_protocol_error() {
    let fake = serve(|_| Reply::Sse {
        before: vec![json!({"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}).to_string()],
        gate: None,
        after: vec![],
    })
    .await;
    let up = http_upstream(&fake.url, EraPref::Modern);
    let events = collect(up.request(call("x", "{}")).await.expect("request")).await;
    assert!(
        matches!(
            events.as_slice(),
            [
                Ok(UpstreamEvent::Notification(_)),
                Err(UpstreamError::Protocol(_))
            ]
        ),
        "{events:?}"
    );
}

#[tokio::test]
async fn upstream_json_rpc_error_passes_through() {
    let fake = serve(|r| {
        Reply::json(json!({"jsonrpc":"2.0","id":r.id(),"error":{"code":-32602,"message":"unknown tool","data":{"k":1}}}).to_string())
    })
    .await;
    let up = http_upstream(&fake.url, EraPref::Modern);
    let events = collect(up.request(call("x", "{}")).await.expect("request")).await;
    match events.as_slice() {
        [Ok(UpstreamEvent::Error(e))] => {
            assert_eq!(e.code, -32602);
            assert_eq!(e.data, Some(json!({"k":1})));
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn connection_refused_is_unavailable_and_never_reached() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().expect("addr"));
    drop(listener);
    let up = http_upstream(&url, EraPref::Modern);
    let err = up.request(call("x", "{}")).await.expect_err("refused");
    assert!(matches!(err, UpstreamError::Unavailable(_)), "{err:?}");
    assert!(!err.request_may_have_reached_upstream());
}

#[tokio::test]
async fn silent_upstream_times_out() {
    let fake = serve(|_| Reply::Hang).await;
    let up = http_upstream(&fake.url, EraPref::Modern);
    let mut req = call("x", "{}");
    req.timeout = Some(Duration::from_millis(300));
    let err = up.request(req).await.expect_err("timeout");
    assert!(matches!(err, UpstreamError::Timeout), "{err:?}");
    assert!(err.request_may_have_reached_upstream());
}

#[tokio::test]
async fn server_error_status_is_http_error() {
    let fake = serve(|_| Reply::Json {
        status: 503,
        body: "overloaded".into(),
        headers: vec![],
    })
    .await;
    let up = http_upstream(&fake.url, EraPref::Modern);
    let err = up.request(call("x", "{}")).await.expect_err("503");
    assert!(
        matches!(&err, UpstreamError::Http { status: 503, body } if body == "overloaded"),
        "{err:?}"
    );
}

#[tokio::test]
async fn list_tools_page_reads_cursor_and_cache_hints() {
    let fake = serve(|r| {
        let page2 = r.body["params"]["cursor"] == "p2";
        let tools = if page2 {
            json!([{"name":"b"}])
        } else {
            json!([{"name":"a"}])
        };
        let mut res =
            json!({"resultType":"complete","tools":tools,"ttlMs":60000,"cacheScope":"public"});
        if !page2 {
            res["nextCursor"] = json!("p2");
        }
        Reply::result(&r.id(), res)
    })
    .await;
    let up = http_upstream(&fake.url, EraPref::Modern);
    let p1 = up.list_tools_page(None).await.expect("page 1");
    assert_eq!(p1.next_cursor.as_deref(), Some("p2"));
    assert_eq!((p1.ttl_ms, p1.cache_public), (Some(60000), true));
    let p2 = up.list_tools_page(p1.next_cursor).await.expect("page 2");
    assert_eq!(*p2.tools, vec![json!({"name":"b"})]);
    assert_eq!(p2.next_cursor, None);
    let ids: Vec<_> = fake.calls("tools/list").iter().map(|r| r.id()).collect();
    assert_ne!(ids[0], ids[1], "every request gets a fresh id");
}
