//! Client-side abuse: slow request heads (slowloris), slow bodies, a crowd of
//! idle connections and a client that never reads its stream must not stop the
//! gateway from serving everyone else, nor grow its memory.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use junction_testkit::{
    spawn_gateway, Behavior, Fault, FaultyUpstream, MockSpec, MockTool, MockUpstream, TestClient,
};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_junction"))
}

/// Reads until EOF (or 10 s, which would be a failure of the limits).
async fn read_all(s: &mut TcpStream) -> Option<String> {
    let mut buf = Vec::new();
    match tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut buf)).await {
        Ok(_) => Some(String::from_utf8_lossy(&buf).into_owned()),
        Err(_) => None,
    }
}

#[tokio::test]
async fn slow_heads_slow_bodies_and_idle_crowds_are_cut_off_while_others_are_served() {
    let up = MockUpstream::start(MockSpec::modern("up", vec![MockTool::echo("echo")])).await;
    let yaml = format!(
        "server: {{listen: 127.0.0.1:0}}\nupstreams:\n  - {{id: up, url: {}}}\nlimits: {{header_read_timeout: 1s, body_read_timeout: 1s}}\n",
        up.url
    );
    let gw = spawn_gateway(bin(), &yaml).await;

    // A crowd of idle connections that never send a byte.
    let mut idle = Vec::new();
    for _ in 0..200 {
        idle.push(TcpStream::connect(gw.addr).await.unwrap());
    }
    // Slowloris: half a request head, then silence.
    let mut slow_head = TcpStream::connect(gw.addr).await.unwrap();
    slow_head
        .write_all(b"POST /mcp HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n")
        .await
        .unwrap();
    // A complete head promising a body that never fully arrives.
    let mut slow_body = TcpStream::connect(gw.addr).await.unwrap();
    slow_body
        .write_all(b"POST /mcp HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"jsonrpc\"")
        .await
        .unwrap();

    // Everyone else is still served meanwhile.
    let c = TestClient::modern(&gw.url("/mcp"));
    assert_eq!(
        c.call_tool("up__echo", json!({})).await.result()["structuredContent"]["tool"],
        "echo"
    );

    let head = read_all(&mut slow_head)
        .await
        .expect("the slow head is cut off");
    assert!(
        head.is_empty() || head.starts_with("HTTP/1.1 408"),
        "{head:?}"
    );
    let body = read_all(&mut slow_body)
        .await
        .expect("the slow body is cut off");
    assert!(body.starts_with("HTTP/1.1 408"), "{body:?}");
    for s in idle.iter_mut().take(5) {
        assert!(
            read_all(s).await.is_some(),
            "idle connections are closed by the head timeout"
        );
    }
    // A new client: the first one's pooled connection sat idle past the 1 s head
    // timeout of this config, so the gateway has closed it (as it should).
    let c = TestClient::modern(&gw.url("/mcp"));
    assert_eq!(c.call_tool("up__echo", json!({})).await.status, 200);
    let gzip = c
        .request_with_headers(
            "tools/list",
            json!({}),
            vec![("content-encoding".into(), "gzip".into())],
        )
        .await;
    assert_eq!(
        gzip.status, 415,
        "compressed bodies are refused, never inflated"
    );
    assert!(!gw.stderr().contains("panicked"));
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next().and_then(|n| n.parse().ok()))
        .unwrap_or(0)
}

#[tokio::test]
async fn a_client_that_never_reads_its_stream_is_bounded_then_disconnected() {
    let flood = FaultyUpstream::start(Fault::FloodSse)
        .await
        .on_methods(&["tools/call"]);
    let good = MockUpstream::start(MockSpec::modern("good", vec![MockTool::echo("echo")])).await;
    let yaml = format!(
        "server: {{listen: 127.0.0.1:0}}\nupstreams:\n  - {{id: flood, url: {}, timeout: 3s}}\n  - {{id: good, url: {}}}\nlimits: {{idle_timeout: 4s}}\n",
        flood.url, good.url
    );
    let gw = spawn_gateway(bin(), &yaml).await;
    let pid = gw.pid().unwrap();
    let c = TestClient::modern(&gw.url("/mcp"));
    assert!(c.request("tools/list", json!({})).await.result()["tools"].is_array());
    let before = rss_kib(pid);

    // A modern tools/call that streams endless progress, sent by hand and never read.
    let body = c.envelope(
        "tools/call",
        json!({"name": "flood__echo", "arguments": {}, "_meta": {"progressToken": 1}}),
    );
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\n",
        body.to_string().len()
    );
    for (n, v) in c.headers_for(&body) {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let mut stuck = TcpStream::connect(gw.addr).await.unwrap();
    stuck.write_all(head.as_bytes()).await.unwrap();
    stuck.write_all(body.to_string().as_bytes()).await.unwrap();

    // The flood runs into the stalled reader for a while; others are served.
    let mut peak = before;
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        peak = peak.max(rss_kib(pid));
        let r = c.call_tool("good__echo", json!({})).await;
        assert_eq!(
            r.result()["structuredContent"]["tool"],
            "echo",
            "{}",
            r.text()
        );
    }
    assert!(
        peak < before + 32 * 1024,
        "a stalled reader must not make the gateway buffer the flood: RSS {before} KiB → {peak} KiB"
    );
    // Past the upstream deadline the gateway gives up on the stream, and once
    // its writes have made no progress for limits.idle_timeout it closes the
    // connection: reading now drains what the kernel buffered, then EOF.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let drained = tokio::time::timeout(Duration::from_secs(15), async {
        let mut buf = vec![0u8; 64 * 1024];
        let mut total = 0usize;
        loop {
            match stuck.read(&mut buf).await {
                Ok(0) | Err(_) => return total,
                Ok(n) => total += n,
            }
        }
    })
    .await
    .expect("the stalled stream is closed by the gateway, not held forever");
    assert!(drained > 0, "the client did get the start of its stream");
    assert!(!gw.stderr().contains("panicked"));
}

#[tokio::test]
async fn a_kept_alive_connection_may_idle_past_the_head_limit_but_not_dawdle_in_a_head() {
    let up = MockUpstream::start(MockSpec::modern("up", vec![MockTool::echo("echo")])).await;
    let yaml = format!(
        "server: {{listen: 127.0.0.1:0}}\nupstreams:\n  - {{id: up, url: {}}}\nlimits: {{header_read_timeout: 1s, idle_timeout: 30s}}\n",
        up.url
    );
    let gw = spawn_gateway(bin(), &yaml).await;
    let c = TestClient::modern(&gw.url("/mcp"));
    let mut s = TcpStream::connect(gw.addr).await.unwrap();
    let list = c.envelope("tools/list", json!({}));
    assert!(c
        .exchange_on(&mut s, &list)
        .await
        .starts_with("HTTP/1.1 200"));
    // Idle for longer than the head limit: a pooled client reusing it now must
    // not find it closed under its request.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let again = c.exchange_on(&mut s, &list).await;
    assert!(again.starts_with("HTTP/1.1 200"), "{again:?}");
    // A head started on the kept-alive connection is still on the head clock.
    s.write_all(b"POST /mcp HTTP/1.1\r\nhost: x\r\n")
        .await
        .unwrap();
    let cut = read_all(&mut s)
        .await
        .expect("the dawdling head is cut off");
    assert!(cut.is_empty() || cut.starts_with("HTTP/1.1 408"), "{cut:?}");
}

#[tokio::test]
async fn a_call_outlasting_the_idle_limit_is_answered_then_the_idle_connection_closed() {
    let slow = MockTool::new(
        "slow",
        json!({"type": "object"}),
        Behavior::Slow(Duration::from_secs(3)),
    );
    let up = MockUpstream::start(MockSpec::modern("up", vec![slow])).await;
    let yaml = format!(
        "server: {{listen: 127.0.0.1:0}}\nupstreams:\n  - {{id: up, url: {}}}\nlimits: {{header_read_timeout: 1s, idle_timeout: 2s}}\n",
        up.url
    );
    let gw = spawn_gateway(bin(), &yaml).await;
    let c = TestClient::modern(&gw.url("/mcp"));
    let mut s = TcpStream::connect(gw.addr).await.unwrap();
    // Nothing moves on the connection for 3 s while the call runs: it is in
    // flight, so the idle clock does not run.
    let call = c.envelope("tools/call", json!({"name": "up__slow", "arguments": {}}));
    let answer = c.exchange_on(&mut s, &call).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer:?}");
    assert!(answer.contains("\"tool\":\"slow\""), "{answer:?}");
    // Answered and idle: closed once idle for limits.idle_timeout.
    let rest = read_all(&mut s)
        .await
        .expect("the idle connection is closed by the gateway");
    assert!(rest.is_empty(), "{rest:?}");
}
