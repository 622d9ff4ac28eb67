//! Server requests of handshake-era upstreams handed to the caller
//! (`next_bridged`) and answered on the same session (HTTP) or stdin (stdio).

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use junction_protocol::jsonrpc::{Id, RpcError};
use junction_upstream::{
    Bridged, EraPref, ServerRequest, TransportSpec, Upstream, UpstreamEvent, UpstreamRequest,
    UpstreamSpec,
};
use serde_json::{json, Value};
use tokio::sync::Notify;

fn call(name: &str) -> UpstreamRequest<'static> {
    let mut req = UpstreamRequest {
        method: "tools/call".into(),
        ..UpstreamRequest::default()
    };
    req.params.insert(
        "name".into(),
        std::borrow::Cow::Owned(raw(&serde_json::to_string(name).expect("name"))),
    );
    req.params
        .insert("arguments".into(), std::borrow::Cow::Owned(raw("{}")));
    req
}

fn expect_request(
    item: Option<Result<Bridged, junction_upstream::UpstreamError>>,
) -> ServerRequest {
    match item {
        Some(Ok(Bridged::ServerRequest(r))) => r,
        other => panic!("expected a server request, got {other:?}"),
    }
}

fn expect_result(item: Option<Result<Bridged, junction_upstream::UpstreamError>>) -> Value {
    match item {
        Some(Ok(Bridged::Event(UpstreamEvent::Result(r)))) => {
            serde_json::from_str(r.get()).expect("json")
        }
        other => panic!("expected a result, got {other:?}"),
    }
}

fn params_json(r: &ServerRequest) -> Value {
    r.params
        .as_ref()
        .map(|p| serde_json::from_str(p.get()).expect("json"))
        .unwrap_or(Value::Null)
}

#[tokio::test]
async fn legacy_http_elicitation_is_handed_out_and_answered_on_the_session() {
    let answered = Arc::new(Notify::new());
    let gate = answered.clone();
    // (The fake accepts answers to server requests with 202 by itself.)
    let fake = serve(move |r| {
        match r.rpc_method() {
            "initialize" => Reply::Json {
                status: 200,
                body: json!({"jsonrpc":"2.0","id":r.id(),"result":{"protocolVersion":"2025-11-25","capabilities":{}}}).to_string(),
                headers: vec![("mcp-session-id", "sess-9".into())],
            },
            "notifications/initialized" => Reply::Status(202),
            _ => Reply::Sse {
                before: vec![
                    json!({"jsonrpc":"2.0","id":"srv-ping","method":"ping"}).to_string(),
                    json!({"jsonrpc":"2.0","id":"el-1","method":"elicitation/create","params":{"message":"Sure?","requestedSchema":{"type":"object","properties":{}}}}).to_string(),
                ],
                gate: Some(gate.clone()),
                after: vec![json!({"jsonrpc":"2.0","id":r.id(),"result":{"content":[{"type":"text","text":"done"}]}}).to_string()],
            },
        }
    })
    .await;
    let up = http_upstream(&fake.url, EraPref::Legacy);
    let mut stream = up.request(call("ask")).await.expect("request");
    let asked = expect_request(stream.next_bridged().await);
    assert_eq!(asked.id, Id::Str("el-1".into()));
    assert_eq!(asked.method, "elicitation/create");
    assert_eq!(params_json(&asked)["message"], "Sure?");
    stream
        .reply(&asked.id, Ok(raw(r#"{"action":"accept","content":{}}"#)))
        .await
        .expect("reply posted");
    answered.notify_one();
    let result = expect_result(stream.next_bridged().await);
    assert_eq!(result["content"][0]["text"], "done");

    let seen = fake.requests();
    let reply = seen
        .iter()
        .find(|r| r.body["id"] == "el-1")
        .expect("the answer reached the upstream");
    assert_eq!(reply.body["result"]["action"], "accept");
    assert_eq!(reply.header("mcp-session-id"), Some("sess-9"));
    assert!(
        seen.iter()
            .any(|r| r.body["id"] == "srv-ping" && r.body["result"] == json!({})),
        "ping still answered by the upstream client itself"
    );
    let init = &fake.calls("initialize")[0];
    let caps = &init.body["params"]["capabilities"];
    assert!(
        caps.get("elicitation").is_some()
            && caps.get("sampling").is_some()
            && caps.get("roots").is_some(),
        "Junction offers what it can relay: {caps}"
    );
}

#[tokio::test]
async fn plain_next_refuses_server_requests_for_the_caller() {
    let answered = Arc::new(Notify::new());
    let gate = answered.clone();
    let notify = answered.clone();
    let fake = serve(move |r| match r.rpc_method() {
        "initialize" => Reply::result(
            &r.id(),
            json!({"protocolVersion":"2025-11-25","capabilities":{}}),
        ),
        "notifications/initialized" => Reply::Status(202),
        _ => Reply::Sse {
            before: vec![
                json!({"jsonrpc":"2.0","id":7,"method":"sampling/createMessage","params":{}})
                    .to_string(),
            ],
            gate: Some(gate.clone()),
            after: vec![json!({"jsonrpc":"2.0","id":r.id(),"result":{"content":[]}}).to_string()],
        },
    })
    .await;
    let up = http_upstream(&fake.url, EraPref::Legacy);
    let mut stream = up.request(call("ask")).await.expect("request");
    // The upstream finishes once it saw an answer to its request.
    let log = fake.log.clone();
    tokio::spawn(async move {
        loop {
            let answered = log
                .lock()
                .map(|l| l.iter().any(|r| r.body["id"] == 7))
                .unwrap_or(false);
            if answered {
                return notify.notify_one();
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    match stream.next().await {
        Some(Ok(UpstreamEvent::Result(_))) => {}
        other => panic!("expected the result, got {other:?}"),
    }
    let refusal = fake
        .requests()
        .into_iter()
        .find(|r| r.body["id"] == 7)
        .expect("refused");
    assert_eq!(refusal.body["error"]["code"], -32601);
}

#[tokio::test]
async fn stdio_elicitation_goes_to_the_one_call_in_flight_and_back_on_stdin() {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/elicit_stdio.py"
    );
    let up = Upstream::new(UpstreamSpec {
        id: "asker".into(),
        transport: TransportSpec::Stdio {
            command: vec!["python3".into(), "-u".into(), script.into()],
            env: vec![],
            cwd: None,
        },
        timeout: Duration::from_secs(10),
        era: EraPref::Legacy,
        max_message_bytes: junction_upstream::DEFAULT_MAX_MESSAGE_BYTES,
    })
    .expect("upstream");
    let mut stream = up.request(call("ask")).await.expect("request");
    let asked = expect_request(stream.next_bridged().await);
    assert_eq!(asked.method, "elicitation/create");
    assert_eq!(params_json(&asked)["message"], "Delete 3 rows?");
    stream
        .reply(
            &asked.id,
            Ok(raw(r#"{"action":"accept","content":{"ok":true}}"#)),
        )
        .await
        .expect("reply written");
    let result = expect_result(stream.next_bridged().await);
    let echoed: Value =
        serde_json::from_str(result["content"][0]["text"].as_str().expect("text")).expect("json");
    assert_eq!(echoed["id"], "e1");
    assert_eq!(echoed["result"]["content"]["ok"], true);

    // An error reply travels the same way.
    let mut stream = up.request(call("ask")).await.expect("request");
    let asked = expect_request(stream.next_bridged().await);
    let err = RpcError::new(-32601, "client did not declare elicitation");
    stream
        .reply(&asked.id, Err(err))
        .await
        .expect("reply written");
    let result = expect_result(stream.next_bridged().await);
    let echoed: Value =
        serde_json::from_str(result["content"][0]["text"].as_str().expect("text")).expect("json");
    assert_eq!(echoed["error"]["code"], -32601);
    up.shutdown().await;
}
