//! Upstreams that misbehave on purpose, one fault each, for the fault matrix.
//!
//! A `FaultyUpstream` is a lax modern server with one tool, `echo`. It answers
//! every method normally except the faulty ones (default `tools/list` and
//! `tools/call`; `"*"` means every method), so the gateway's era probe passes
//! and the fault hits the request under test. `LegacyExpiredSession404` is a
//! handshake-era server instead (its `server/discover` is refused, as a real
//! one's is). Every request is recorded, like the other mocks.

use super::http::{error_body, result_body, Body};
use super::{lock, Recorded};
use crate::sse;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{json, Value};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};

/// What goes wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Nothing listens: the port was bound once, then closed.
    RefuseConnections,
    /// The faulty method's request is read, then never answered.
    AcceptThenHang,
    /// The right answer, one byte per this interval.
    SlowBytes(Duration),
    /// An SSE response with one progress notification, then end of stream.
    CloseMidSse,
    /// HTTP 200 `application/json` whose body is not JSON.
    InvalidJson,
    /// A well-formed response to a different JSON-RPC id.
    WrongId,
    /// A valid response whose body is about this many bytes.
    HugeBody(usize),
    /// This HTTP status with a plain-text body.
    Status(u16),
    /// An SSE response of progress notifications (about 1 KiB each), sent as
    /// fast as the reader takes them and never ending: for clients that never read.
    FloodSse,
    /// Handshake era: `initialize` works, every faulty method gets 404
    /// "Session not found", even right after a new `initialize`.
    LegacyExpiredSession404,
}

struct State {
    fault: Option<Fault>,
    methods: Vec<String>,
    recorded: Vec<Recorded>,
}

/// A running faulty upstream on 127.0.0.1. Dropping it stops it.
pub struct FaultyUpstream {
    /// `http://127.0.0.1:PORT/mcp`
    pub url: String,
    pub addr: SocketAddr,
    state: Arc<Mutex<State>>,
    task: Option<JoinHandle<()>>,
}

impl FaultyUpstream {
    /// Bind 127.0.0.1:0 and serve with this fault on `tools/list` and
    /// `tools/call`. Panics if loopback cannot be bound (test helper).
    pub async fn start(fault: Fault) -> FaultyUpstream {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("faulty upstream: cannot bind 127.0.0.1:0: {e}"));
        let addr = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("faulty upstream: no local addr: {e}"));
        let refuse = fault == Fault::RefuseConnections;
        let state = Arc::new(Mutex::new(State {
            fault: Some(fault),
            methods: vec!["tools/list".into(), "tools/call".into()],
            recorded: Vec::new(),
        }));
        let task = if refuse {
            drop(listener);
            None
        } else {
            Some(tokio::spawn(accept_loop(listener, state.clone())))
        };
        FaultyUpstream {
            url: format!("http://{addr}/mcp"),
            addr,
            state,
            task,
        }
    }

    /// Which JSON-RPC methods the fault hits (`"*"`: all of them, including
    /// `server/discover` and `initialize`).
    pub fn on_methods(self, methods: &[&str]) -> Self {
        lock(&self.state).methods = methods.iter().map(|m| m.to_string()).collect();
        self
    }

    /// Change the fault; `None` heals the upstream (it answers everything).
    /// `RefuseConnections` cannot be switched on or off here.
    pub fn set_fault(&self, fault: Option<Fault>) {
        lock(&self.state).fault = fault;
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        lock(&self.state).recorded.clone()
    }

    /// Requests with this JSON-RPC method.
    pub fn requests_for(&self, method: &str) -> Vec<Recorded> {
        self.requests()
            .into_iter()
            .filter(|r| r.method() == Some(method))
            .collect()
    }
}

impl Drop for FaultyUpstream {
    fn drop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

/// The stdio fault fixture (python3): `faulty_stdio.py MODE [N]` with MODE
/// `crash-after N` (exits, unanswered, on its N+1-th request; a `pid` tool
/// shows which process answered), `garbage` (junk lines around every answer;
/// the `only_garbage` tool is never answered) or `flood-stderr` (256 KiB of
/// stderr before every answer, more than a pipe holds).
pub fn faulty_stdio_script() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/faulty_stdio.py")
}

async fn accept_loop(listener: TcpListener, state: Arc<Mutex<State>>) {
    // Owned here, so aborting this task closes every connection too.
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                if let Ok((stream, _)) = accepted {
                    let state = state.clone();
                    conns.spawn(async move {
                        let service = hyper::service::service_fn(move |req| {
                            let state = state.clone();
                            async move { Ok::<_, Infallible>(handle(state, req).await) }
                        });
                        let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    });
                }
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

async fn handle(state: Arc<Mutex<State>>, req: Request<Incoming>) -> Response<Body> {
    let http_method = req.method().as_str().to_string();
    let headers: Vec<(String, String)> = req
        .headers()
        .iter()
        .map(|(n, v)| {
            let v = String::from_utf8_lossy(v.as_bytes()).into_owned();
            (n.as_str().to_ascii_lowercase(), v)
        })
        .collect();
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes().to_vec(),
        Err(_) => return plain(400, "unreadable body"),
    };
    let msg: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let method = msg.get("method").and_then(Value::as_str).map(str::to_owned);
    let id = msg.get("id").cloned();
    let has_session = headers.iter().any(|(n, _)| n == "mcp-session-id");
    let fault = {
        let mut s = lock(&state);
        s.recorded.push(Recorded {
            http_method: http_method.clone(),
            headers,
            body: msg.clone(),
        });
        let hit = method
            .as_deref()
            .is_some_and(|m| s.methods.iter().any(|x| x == "*" || x == m));
        match &s.fault {
            // The legacy fault also shapes the healthy methods (handshake era).
            Some(Fault::LegacyExpiredSession404) => {
                return legacy(method.as_deref(), id, has_session, hit)
            }
            Some(f) if hit => Some(f.clone()),
            _ => None,
        }
    };
    if http_method != "POST" {
        return plain(405, "POST only");
    }
    let (Some(method), Some(id)) = (method, id) else {
        // Notifications (and garbage) are accepted and ignored.
        return empty(202);
    };
    let answer = healthy_answer(&method, &id, &msg);
    match fault {
        None => json_response(200, answer.to_string().into_bytes()),
        Some(f) => faulty(f, &id, answer, &msg).await,
    }
}

fn healthy_answer(method: &str, id: &Value, msg: &Value) -> Value {
    match method {
        "server/discover" => result_body(
            id,
            json!({"resultType": "complete", "supportedVersions": ["2026-07-28"],
                   "capabilities": {"tools": {}}, "ttlMs": 1000, "cacheScope": "public"}),
        ),
        "tools/list" => result_body(
            id,
            json!({"resultType": "complete", "ttlMs": 1000, "cacheScope": "public",
                   "tools": [{"name": "echo", "description": "echo from faulty",
                              "inputSchema": {"type": "object"}}]}),
        ),
        "tools/call" => {
            let args = msg.pointer("/params/arguments").cloned();
            let payload = json!({"upstream": "faulty", "arguments": args});
            result_body(
                id,
                json!({"resultType": "complete", "structuredContent": payload,
                       "content": [{"type": "text", "text": payload.to_string()}]}),
            )
        }
        other => error_body(id, -32601, &format!("Method not found: {other}"), None),
    }
}

async fn faulty(fault: Fault, id: &Value, answer: Value, msg: &Value) -> Response<Body> {
    match fault {
        // Connections are never accepted then; kept total for the match.
        Fault::RefuseConnections | Fault::LegacyExpiredSession404 => empty(500),
        Fault::AcceptThenHang => {
            std::future::pending::<()>().await;
            empty(500)
        }
        Fault::SlowBytes(every) => {
            let bytes = answer.to_string().into_bytes();
            let stream =
                futures_util::stream::unfold(bytes.into_iter(), move |mut rest| async move {
                    let b = rest.next()?;
                    tokio::time::sleep(every).await;
                    Some((Ok::<_, Infallible>(Frame::data(Bytes::from(vec![b]))), rest))
                });
            with_type(200, "application/json", StreamBody::new(stream).boxed())
        }
        Fault::CloseMidSse => {
            let token = msg
                .pointer("/params/_meta/progressToken")
                .cloned()
                .unwrap_or(json!("faulty-progress"));
            let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                                  "params": {"progressToken": token, "progress": 1, "total": 2}});
            let body = Full::new(sse::event(&progress)).boxed();
            with_type(200, "text/event-stream", body)
        }
        Fault::FloodSse => {
            let token = msg
                .pointer("/params/_meta/progressToken")
                .cloned()
                .unwrap_or(json!("faulty-progress"));
            let pad = "p".repeat(1000);
            let stream = futures_util::stream::unfold(1u64, move |n| {
                let event = sse::event(
                    &json!({"jsonrpc": "2.0", "method": "notifications/progress",
                    "params": {"progressToken": token, "progress": n, "message": pad}}),
                );
                async move { Some((Ok::<_, Infallible>(Frame::data(event)), n + 1)) }
            });
            with_type(200, "text/event-stream", StreamBody::new(stream).boxed())
        }
        Fault::InvalidJson => json_response(200, b"{\"jsonrpc\": \"2.0\", \"id\": oops".to_vec()),
        Fault::WrongId => {
            let mut wrong = answer;
            wrong["id"] = json!(format!("not-{id}"));
            json_response(200, wrong.to_string().into_bytes())
        }
        Fault::HugeBody(size) => huge(id, size),
        Fault::Status(code) => plain(code, &format!("fault: HTTP {code}")),
    }
}

/// `{"jsonrpc":"2.0","id":…,"result":{"content":[{"type":"text","text":"xxx…"}]}}`,
/// streamed in 64 KiB chunks so the mock never holds it whole.
fn huge(id: &Value, size: usize) -> Response<Body> {
    const CHUNK: usize = 64 * 1024;
    let head =
        format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":""#);
    let tail = r#""}]}}"#;
    let filler = size.saturating_sub(head.len() + tail.len());
    let chunks = std::iter::once(Bytes::from(head))
        .chain((0..filler.div_ceil(CHUNK)).map(move |i| {
            let n = CHUNK.min(filler - i * CHUNK);
            Bytes::from(vec![b'x'; n])
        }))
        .chain(std::iter::once(Bytes::from_static(tail.as_bytes())))
        .map(|b| Ok::<_, Infallible>(Frame::data(b)));
    let body = StreamBody::new(futures_util::stream::iter(chunks)).boxed();
    with_type(200, "application/json", body)
}

/// The handshake-era server of `LegacyExpiredSession404`, in the Python SDK
/// 1.x manner: no `server/discover`, sessions from `initialize`.
fn legacy(method: Option<&str>, id: Option<Value>, has_session: bool, hit: bool) -> Response<Body> {
    let transport = |status: u16, message: &str| {
        let body = error_body(&json!("server-error"), -32600, message, None);
        json_response(status, body.to_string().into_bytes())
    };
    match (method, id) {
        (Some("initialize"), Some(id)) if !hit => {
            let result = json!({"protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "faulty-legacy", "version": "0.0.0"}});
            let mut resp = json_response(200, result_body(&id, result).to_string().into_bytes());
            resp.headers_mut().insert(
                "mcp-session-id",
                hyper::header::HeaderValue::from_static("faulty-session"),
            );
            resp
        }
        _ if !has_session => transport(400, "Bad Request: Missing session ID"),
        _ if hit => transport(404, "Session not found"),
        (Some(m), Some(id)) => {
            let mut answer = healthy_answer(m, &id, &Value::Null);
            if let Some(r) = answer.get_mut("result").and_then(Value::as_object_mut) {
                for k in ["resultType", "ttlMs", "cacheScope"] {
                    r.remove(k);
                }
            }
            json_response(200, answer.to_string().into_bytes())
        }
        _ => empty(202),
    }
}

fn with_type(status: u16, content_type: &'static str, body: Body) -> Response<Body> {
    let mut resp = Response::new(body);
    *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(content_type),
    );
    resp
}

fn json_response(status: u16, bytes: Vec<u8>) -> Response<Body> {
    with_type(
        status,
        "application/json",
        Full::new(Bytes::from(bytes)).boxed(),
    )
}

fn plain(status: u16, text: &str) -> Response<Body> {
    with_type(
        status,
        "text/plain",
        Full::new(Bytes::from(text.to_owned())).boxed(),
    )
}

fn empty(status: u16) -> Response<Body> {
    let mut resp = Response::new(Full::new(Bytes::new()).boxed());
    *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    resp
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TestClient;

    #[tokio::test]
    async fn discover_passes_and_the_fault_hits_the_chosen_methods() {
        let f = FaultyUpstream::start(Fault::Status(503)).await;
        let c = TestClient::modern(&f.url);
        let d = c.request("server/discover", json!({})).await;
        assert_eq!(d.status, 200);
        assert_eq!(d.result()["supportedVersions"], json!(["2026-07-28"]));
        assert_eq!(c.request("tools/list", json!({})).await.status, 503);

        let f = f.on_methods(&["tools/call"]);
        let l = c.request("tools/list", json!({})).await;
        assert_eq!(l.result()["tools"][0]["name"], "echo");
        assert_eq!(c.call_tool("echo", json!({})).await.status, 503);
        f.set_fault(None);
        let ok = c.call_tool("echo", json!({"a": 1})).await;
        assert_eq!(
            ok.result()["structuredContent"]["arguments"],
            json!({"a": 1})
        );
        assert_eq!(f.requests_for("tools/call").len(), 2);
    }

    #[tokio::test]
    async fn wrong_id_invalid_json_huge_and_mid_sse() {
        let f = FaultyUpstream::start(Fault::WrongId).await;
        let c = TestClient::modern(&f.url);
        let body = c.envelope("tools/call", json!({"name": "echo"}));
        let r = c.send(&body, Vec::new()).await;
        assert!(r.result().is_object());
        assert_ne!(r.body["id"], body["id"]);

        f.set_fault(Some(Fault::InvalidJson));
        let r = c.call_tool("echo", json!({})).await;
        assert!(serde_json::from_slice::<Value>(&r.raw).is_err());

        f.set_fault(Some(Fault::HugeBody(300_000)));
        let r = c.call_tool("echo", json!({})).await;
        assert!(r.raw.len() >= 300_000, "{}", r.raw.len());
        assert!(r.result()["content"][0]["text"].is_string(), "valid JSON");

        f.set_fault(Some(Fault::CloseMidSse));
        let r = c.call_tool("echo", json!({})).await;
        assert!(r.is_sse());
        assert_eq!(r.events.len(), 1);
        assert_eq!(r.events[0]["method"], "notifications/progress");
    }

    #[tokio::test]
    async fn refused_and_legacy_404() {
        let f = FaultyUpstream::start(Fault::RefuseConnections).await;
        assert!(tokio::net::TcpStream::connect(f.addr).await.is_err());

        let f = FaultyUpstream::start(Fault::LegacyExpiredSession404).await;
        let c = TestClient::legacy(&f.url, "2025-11-25");
        assert_eq!(c.request("server/discover", json!({})).await.status, 400);
        let init = c.initialize().await;
        assert_eq!(init.status, 200);
        assert!(c.session_id().is_some());
        assert_eq!(c.request("tools/list", json!({})).await.status, 404);
    }

    #[test]
    fn the_stdio_fixture_exists() {
        assert!(faulty_stdio_script().is_file());
    }
}
