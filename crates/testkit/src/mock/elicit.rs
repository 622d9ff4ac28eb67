//! `AskingUpstream`: a handshake-era HTTP MCP server whose one tool, `ask_all`,
//! sends a scripted set of server->client requests (`elicitation/create`,
//! `sampling/createMessage`, `roots/list`, …) at once on the call's SSE stream,
//! waits for every answer the client POSTs, and returns them:
//! `structuredContent = {"answers": {"<request id>": <result or error>}}`.
//! For the gateway's era-bridging tests (several requests in one round, some of
//! them for capabilities the client lacks). Lax about headers; records every body.
//! `start_unrelated` sends the requests on the session's GET stream instead,
//! naming no call (as the TypeScript SDK's `server.request(...)` without
//! `relatedRequestId` does); with no GET stream open they are dropped.

use super::http::{error_body, result_body, Body};
use super::lock;
use crate::sse;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

/// How long `ask_all` waits for the client's answers.
const ANSWER_WAIT: Duration = Duration::from_secs(30);

#[derive(Default)]
struct State {
    asks: Vec<(String, Value)>,
    recorded: Vec<Value>,
    waiting: HashMap<String, oneshot::Sender<Value>>,
    /// Asks go to the GET stream (`start_unrelated`), whose sender this is once open.
    unrelated: bool,
    get_stream: Option<mpsc::Sender<Value>>,
}

/// A running asking upstream on 127.0.0.1; dropping it stops it.
pub struct AskingUpstream {
    /// `http://127.0.0.1:<port>/mcp`
    pub url: String,
    state: Arc<Mutex<State>>,
    task: JoinHandle<()>,
}

impl AskingUpstream {
    /// `asks`: (method, params) of every server request `ask_all` sends; their
    /// ids are `ask-0`, `ask-1`, … in this order.
    pub async fn start(asks: Vec<(&str, Value)>) -> AskingUpstream {
        Self::start_with(asks, false).await
    }

    /// Like `start`, but the requests go on the session's GET stream (405
    /// otherwise), related to no call; dropped while no GET stream is open.
    pub async fn start_unrelated(asks: Vec<(&str, Value)>) -> AskingUpstream {
        Self::start_with(asks, true).await
    }

    /// Whether a GET stream is open (`start_unrelated`).
    pub fn get_stream_open(&self) -> bool {
        lock(&self.state)
            .get_stream
            .as_ref()
            .is_some_and(|tx| !tx.is_closed())
    }

    async fn start_with(asks: Vec<(&str, Value)>, unrelated: bool) -> AskingUpstream {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("AskingUpstream cannot bind 127.0.0.1:0: {e}"));
        let port = listener.local_addr().map(|a| a.port()).unwrap_or_default();
        let state = Arc::new(Mutex::new(State {
            asks: asks.into_iter().map(|(m, p)| (m.to_owned(), p)).collect(),
            unrelated,
            ..State::default()
        }));
        let shared = state.clone();
        let task = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let shared = shared.clone();
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                        let shared = shared.clone();
                        async move { Ok::<_, Infallible>(handle(&shared, req).await) }
                    });
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(tcp), svc)
                        .await;
                });
            }
        });
        AskingUpstream {
            url: format!("http://127.0.0.1:{port}/mcp"),
            state,
            task,
        }
    }

    /// Every JSON body received, in order (requests, notifications, answers).
    pub fn recorded(&self) -> Vec<Value> {
        lock(&self.state).recorded.clone()
    }

    /// The answers (JSON-RPC responses) the client side sent back.
    pub fn answers(&self) -> Vec<Value> {
        self.recorded()
            .into_iter()
            .filter(|b| b.get("method").is_none() && b.get("id").is_some())
            .collect()
    }

    /// How many times `ask_all` was called.
    pub fn calls(&self) -> usize {
        self.recorded()
            .iter()
            .filter(|b| b["method"] == "tools/call")
            .count()
    }
}

impl Drop for AskingUpstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn json_response(status: u16, body: &Value) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(body.to_string())).boxed());
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r.headers_mut().insert(
        "mcp-session-id",
        hyper::header::HeaderValue::from_static("asking-session"),
    );
    r
}

fn empty(status: u16) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::new()).boxed());
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    r
}

async fn handle(state: &Arc<Mutex<State>>, req: Request<Incoming>) -> Response<Body> {
    if req.method() == hyper::Method::GET && lock(state).unrelated {
        let (tx, rx) = mpsc::channel::<Value>(16);
        lock(state).get_stream = Some(tx);
        return sse_response(rx);
    }
    if req.method() != hyper::Method::POST {
        return empty(405);
    }
    let bytes = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    lock(state).recorded.push(body.clone());
    let id = body.get("id").cloned();
    let method = body.get("method").and_then(Value::as_str).unwrap_or("");
    match (id, method) {
        (Some(id), "") => {
            let key = id.as_str().map_or_else(|| id.to_string(), str::to_owned);
            if let Some(waiter) = lock(state).waiting.remove(&key) {
                let _ = waiter.send(body);
            }
            empty(202)
        }
        (None, _) => empty(202),
        (Some(id), "initialize") => {
            let version = body
                .pointer("/params/protocolVersion")
                .cloned()
                .unwrap_or_else(|| json!("2025-11-25"));
            let result = json!({"protocolVersion": version, "capabilities": {"tools": {}},
                                "serverInfo": {"name": "asking", "version": "1"}});
            json_response(200, &result_body(&id, result))
        }
        (Some(id), "tools/list") => {
            let tools = json!({"tools": [{"name": "ask_all", "inputSchema": {"type": "object"}}]});
            json_response(200, &result_body(&id, tools))
        }
        (Some(id), "tools/call") => ask_all(state, id),
        (Some(id), "ping") => json_response(200, &result_body(&id, json!({}))),
        (Some(id), m) => json_response(
            200,
            &error_body(&id, -32601, &format!("Method not found: {m}"), None),
        ),
    }
}

/// Send every scripted request, then the result once all were answered.
fn ask_all(state: &Arc<Mutex<State>>, call_id: Value) -> Response<Body> {
    let (tx, rx) = mpsc::channel::<Value>(16);
    let mut waits = Vec::new();
    let mut requests = Vec::new();
    let asks_to;
    {
        let mut s = lock(state);
        asks_to = match (s.unrelated, &s.get_stream) {
            (false, _) => Some(tx.clone()),
            (true, get) => get.clone(),
        };
        let asks = s.asks.clone();
        for (i, (method, params)) in asks.into_iter().enumerate() {
            let rid = format!("ask-{i}");
            let (done, wait) = oneshot::channel();
            s.waiting.insert(rid.clone(), done);
            waits.push((rid.clone(), wait));
            requests.push(json!({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}));
        }
    }
    tokio::spawn(async move {
        // Unrelated asks with no GET stream open are dropped (the TS SDK does so).
        if let Some(to) = asks_to {
            for r in requests {
                if to.send(r).await.is_err() {
                    return;
                }
            }
        }
        let mut answers = Map::new();
        for (rid, wait) in waits {
            let got = tokio::select! {
                a = tokio::time::timeout(ANSWER_WAIT, wait) => a.ok().and_then(Result::ok),
                _ = tx.closed() => return,
            };
            let Some(answer) = got else { return };
            let outcome = answer
                .get("result")
                .or_else(|| answer.get("error"))
                .cloned()
                .unwrap_or(Value::Null);
            answers.insert(rid, outcome);
        }
        let payload = json!({"answers": answers});
        let result = json!({"content": [{"type": "text", "text": payload.to_string()}],
                            "structuredContent": payload, "isError": false});
        let _ = tx.send(result_body(&call_id, result)).await;
    });
    sse_response(rx)
}

/// An SSE response of the messages `rx` yields.
fn sse_response(rx: mpsc::Receiver<Value>) -> Response<Body> {
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|m| (Ok::<_, Infallible>(Frame::data(sse::event(&m))), rx))
    });
    let mut r = Response::new(StreamBody::new(stream).boxed());
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/event-stream"),
    );
    r
}
