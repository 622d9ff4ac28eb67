//! OpenTelemetry traces end to end: Junction exports over OTLP/HTTP to a real
//! receiver built on the official OTLP protobuf definitions
//! (`tests/otel/receiver.py`), continuing the client's W3C trace: a server span
//! per MCP request, a client span per upstream request and per list fan-out
//! member, the span's context carried upstream as headers and in `_meta`.
//! Everything listens on 127.0.0.1.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use junction_testkit::peers::{python, repo, spawn_peer, Peer};
use junction_testkit::{spawn_gateway, Gateway, MockSpec, MockTool, MockUpstream, TestClient};
use serde_json::{json, Value};
use tokio::process::Command;

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";

fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_junction"))
}

async fn receiver() -> Peer {
    let mut cmd = Command::new(python("py-oauth"));
    cmd.arg(repo().join("tests/otel/receiver.py"));
    spawn_peer(cmd, "otlp receiver").await
}

async fn spans(r: &Peer) -> Vec<Value> {
    let got = TestClient::modern(&format!("{}/spans", r.url))
        .raw("GET", vec![], vec![])
        .await;
    serde_json::from_slice(&got.raw).unwrap()
}

/// The spans once `done` holds for them, within 15 s (export is batched).
async fn spans_until(r: &Peer, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    for _ in 0..150 {
        let s = spans(r).await;
        if done(&s) {
            return s;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("spans never complete: {:#}", json!(spans(r).await));
}

struct World {
    alpha: MockUpstream,
    _beta: MockUpstream,
    receiver: Peer,
    gw: Gateway,
}

async fn world(ratio: f64) -> World {
    let receiver = receiver().await;
    let alpha = MockUpstream::start(MockSpec::modern("alpha", vec![MockTool::echo("echo")])).await;
    let beta = MockUpstream::start(MockSpec::modern("beta", vec![MockTool::echo("echo")])).await;
    let yaml = format!(
        r#"
server: {{listen: 127.0.0.1:0}}
upstreams:
  - {{id: alpha, url: "{a}"}}
  - {{id: beta, url: "{b}"}}
tracing:
  enabled: true
  endpoint: "{r}/v1/traces"
  sampling_ratio: {ratio}
  service_name: junction-test
"#,
        a = alpha.url,
        b = beta.url,
        r = receiver.url,
    );
    let gw = spawn_gateway(bin(), &yaml).await;
    World {
        alpha,
        _beta: beta,
        receiver,
        gw,
    }
}

fn named<'a>(spans: &'a [Value], name: &str) -> Vec<&'a Value> {
    spans.iter().filter(|s| s["name"] == name).collect()
}

fn children<'a>(spans: &'a [Value], parent: &Value) -> Vec<&'a Value> {
    spans
        .iter()
        .filter(|s| s["parent_span_id"] == parent["span_id"])
        .collect()
}

#[tokio::test]
async fn a_call_through_two_upstreams_is_one_trace() {
    let w = world(1.0).await;
    let client = TestClient::modern(&w.gw.url("/mcp"))
        .with_header("traceparent", &format!("00-{TRACE}-{CLIENT_SPAN}-01"));
    // prompts/list fans out to both upstreams on this request (tools were
    // listed at start, outside any request).
    assert_eq!(client.request("prompts/list", json!({})).await.status, 200);
    let call = client.call_tool("alpha__echo", json!({"x": 1})).await;
    assert_eq!(call.status, 200, "{}", w.gw.stderr());

    let all = spans_until(&w.receiver, |s| {
        named(s, "MCP /mcp").len() >= 2 && !named(s, "tools/call alpha").is_empty()
    })
    .await;
    let servers: Vec<&Value> = named(&all, "MCP /mcp")
        .into_iter()
        .filter(|s| s["trace_id"] == TRACE)
        .collect();
    assert_eq!(servers.len(), 2, "{all:#?}");
    for s in &servers {
        assert_eq!(
            s["parent_span_id"], CLIENT_SPAN,
            "the client's trace continues"
        );
        assert_eq!(s["kind"], "SPAN_KIND_SERVER");
        assert_eq!(s["service"], "junction-test");
    }
    let list = servers
        .iter()
        .find(|s| s["attributes"]["mcp.method.name"] == "prompts/list")
        .expect("the list's span");
    let mut fanned: Vec<&str> = children(&all, list)
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    fanned.sort();
    assert_eq!(
        fanned,
        ["prompts/list alpha", "prompts/list beta"],
        "{all:#?}"
    );

    let server = servers
        .iter()
        .find(|s| s["attributes"]["mcp.method.name"] == "tools/call")
        .expect("the call's span");
    let a = &server["attributes"];
    assert_eq!(a["junction.target"], "alpha__echo");
    assert_eq!(a["junction.upstream"], "alpha");
    assert_eq!(a["junction.outcome"], "ok");
    assert_eq!(a["http.response.status_code"], 200);
    let upstream = children(&all, server);
    assert_eq!(upstream.len(), 1, "{all:#?}");
    let upstream = upstream[0];
    assert_eq!(upstream["name"], "tools/call alpha");
    assert_eq!(upstream["kind"], "SPAN_KIND_CLIENT");
    assert_eq!(upstream["trace_id"], TRACE);

    // The upstream got the trace as a header and in `_meta`, naming the
    // client span (not the caller's own traceparent).
    let want = format!("00-{TRACE}-{}-01", upstream["span_id"].as_str().unwrap());
    let got = w.alpha.calls("echo");
    let r = got.last().expect("the call reached alpha");
    assert_eq!(r.header("traceparent"), Some(want.as_str()));
    assert_eq!(r.body["params"]["_meta"]["traceparent"], want.as_str());

    let scrape = TestClient::modern(&w.gw.url("/metrics"))
        .raw("GET", vec![], vec![])
        .await;
    let scrape = String::from_utf8_lossy(&scrape.raw);
    assert_eq!(
        junction_testkit::metric(&scrape, "junction_trace_spans_dropped_total"),
        Some(0.0),
        "{scrape}"
    );
}

#[tokio::test]
async fn ratio_zero_records_no_new_trace_but_follows_a_sampled_caller() {
    let w = world(0.0).await;
    let url = w.gw.url("/mcp");
    assert_eq!(
        TestClient::modern(&url)
            .call_tool("alpha__echo", json!({}))
            .await
            .status,
        200
    );
    let sampled = TestClient::modern(&url)
        .with_header("traceparent", &format!("00-{TRACE}-{CLIENT_SPAN}-01"));
    assert_eq!(
        sampled.call_tool("alpha__echo", json!({})).await.status,
        200
    );
    let all = spans_until(&w.receiver, |s| !named(s, "tools/call alpha").is_empty()).await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    let all = if all.len() < 2 {
        spans(&w.receiver).await
    } else {
        all
    };
    assert!(
        all.iter().all(|s| s["trace_id"] == TRACE),
        "only the caller's sampled trace is recorded: {all:#?}"
    );
}
