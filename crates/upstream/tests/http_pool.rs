//! The connection pool to an HTTP upstream: connections are reused once an
//! answer has been read, and a connection the upstream closed is never a
//! failed call.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::*;
use junction_upstream::{EraPref, UpstreamRequest};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

fn list() -> UpstreamRequest<'static> {
    UpstreamRequest {
        method: "tools/list".into(),
        ..UpstreamRequest::default()
    }
}

fn tools(id: &serde_json::Value) -> String {
    json!({"jsonrpc":"2.0","id":id,"result":{"resultType":"complete","tools":[]}}).to_string()
}

#[tokio::test]
async fn a_json_answer_gives_its_connection_back() {
    let fake = serve(|r| Reply::json(tools(&r.id()))).await;
    let up = http_upstream(&fake.url, EraPref::Modern);
    for _ in 0..6 {
        let events = collect(up.request(list()).await.expect("request")).await;
        assert_eq!(result_json(&events[0])["tools"], json!([]));
    }
    assert_eq!(fake.requests().len(), 6);
    assert_eq!(
        fake.connections(),
        1,
        "every call after the first reuses the connection"
    );
}

#[tokio::test]
async fn sse_answers_do_not_cost_a_connection_each() {
    // The upstream ends each stream right after the response; the stream's end
    // may arrive a moment after the response itself, so a call can find its
    // predecessor's connection not yet back. What must not happen is one new
    // connection per call.
    let fake = serve(|r| Reply::Sse {
        before: vec![],
        gate: None,
        after: vec![tools(&r.id())],
    })
    .await;
    let up = http_upstream(&fake.url, EraPref::Modern);
    for _ in 0..20 {
        let events = collect(up.request(list()).await.expect("request")).await;
        assert_eq!(result_json(&events[0])["tools"], json!([]));
    }
    let opened = fake.connections();
    assert!(
        opened <= 3,
        "{opened} connections for 20 sequential SSE answers"
    );
}

#[tokio::test]
async fn concurrent_calls_open_at_most_one_connection_each_and_keep_them() {
    let fake = serve(|r| Reply::json(tools(&r.id()))).await;
    let up = http_upstream(&fake.url, EraPref::Modern);
    let burst = || {
        let calls: Vec<_> = (0..8)
            .map(|_| {
                let up = up.clone();
                tokio::spawn(
                    async move { collect(up.request(list()).await.expect("request")).await },
                )
            })
            .collect();
        async move {
            for c in calls {
                let events = c.await.expect("task");
                assert_eq!(result_json(&events[0])["tools"], json!([]));
            }
        }
    };
    burst().await;
    let opened = fake.connections();
    assert!(
        (1..=8).contains(&opened),
        "{opened} connections for 8 calls"
    );
    burst().await;
    burst().await;
    assert_eq!(
        fake.connections(),
        opened,
        "later bursts reuse the connections of the first"
    );
}

/// An HTTP/1.1 server that answers one request per connection and then closes
/// it without saying so (no `Connection: close`): every pooled connection goes
/// stale right after its answer.
async fn one_answer_per_connection() -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let accepted: Arc<AtomicUsize> = Arc::default();
    let counter = accepted.clone();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                let body = loop {
                    let Ok(n) = tcp.read(&mut chunk).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&buf).into_owned();
                    let Some(end) = text.find("\r\n\r\n") else {
                        continue;
                    };
                    let length = text[..end]
                        .lines()
                        .find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case("content-length")
                                .then(|| v.trim().parse::<usize>().ok())?
                        })
                        .unwrap_or(0);
                    if buf.len() >= end + 4 + length {
                        break buf[end + 4..end + 4 + length].to_vec();
                    }
                };
                let msg: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
                let reply = tools(&msg["id"]);
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                    reply.len()
                );
                let _ = tcp.write_all(head.as_bytes()).await;
                let _ = tcp.write_all(reply.as_bytes()).await;
                // Dropping the socket closes the connection.
            });
        }
    });
    (format!("http://{addr}/mcp"), accepted)
}

#[tokio::test]
async fn a_connection_the_upstream_closed_is_never_a_failed_call() {
    let (url, accepted) = one_answer_per_connection().await;
    let up = http_upstream(&url, EraPref::Modern);
    for i in 0..30 {
        let stream = up
            .request(list())
            .await
            .unwrap_or_else(|e| panic!("call {i} failed: {e}"));
        let events = collect(stream).await;
        assert_eq!(result_json(&events[0])["tools"], json!([]), "call {i}");
    }
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        30,
        "one connection per call"
    );
}
