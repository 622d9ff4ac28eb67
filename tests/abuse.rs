//! Client-side abuse: slow request heads (slowloris), slow bodies, and a crowd
//! of idle connections must not stop the gateway from serving everyone else.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use junction_testkit::{spawn_gateway, MockSpec, MockTool, MockUpstream, TestClient};
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
