//! Minimal in-test MCP-ish HTTP upstreams on 127.0.0.1:0. Each test scripts
//! replies with a closure; every request is recorded for assertions.
#![allow(dead_code)]

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::stream;
use http::{HeaderMap, Method, Request, Response, StatusCode};
use http_body_util::{combinators::BoxBody, BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use junction_upstream::{
    EraPref, ResponseStream, TransportSpec, Upstream, UpstreamError, UpstreamEvent, UpstreamSpec,
};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, Notify};

#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: Method,
    pub headers: HeaderMap,
    pub body: Value,
    pub raw: String,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
    pub fn rpc_method(&self) -> &str {
        self.body["method"].as_str().unwrap_or("")
    }
    pub fn id(&self) -> Value {
        self.body["id"].clone()
    }
}

pub enum Reply {
    Json {
        status: u16,
        body: String,
        headers: Vec<(&'static str, String)>,
    },
    /// SSE events; when `gate` is set, `before` is sent, then the server waits
    /// for the gate before sending `after`.
    Sse {
        before: Vec<String>,
        gate: Option<Arc<Notify>>,
        after: Vec<String>,
    },
    Status(u16),
    Hang,
}

impl Reply {
    pub fn json(body: String) -> Reply {
        Reply::Json {
            status: 200,
            body,
            headers: vec![],
        }
    }
    pub fn result(id: &Value, result: Value) -> Reply {
        Reply::json(serde_json::json!({"jsonrpc":"2.0","id":id,"result":result}).to_string())
    }
}

pub struct Fake {
    pub url: String,
    pub log: Arc<Mutex<Vec<Recorded>>>,
    accepted: Arc<AtomicUsize>,
}

impl Fake {
    pub fn requests(&self) -> Vec<Recorded> {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }
    pub fn calls(&self, rpc_method: &str) -> Vec<Recorded> {
        self.requests()
            .into_iter()
            .filter(|r| r.rpc_method() == rpc_method)
            .collect()
    }
    /// TCP connections accepted so far.
    pub fn connections(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

type Body = BoxBody<Bytes, Infallible>;

pub async fn serve<F>(handler: F) -> Fake
where
    F: Fn(&Recorded) -> Reply + Send + Sync + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let log: Arc<Mutex<Vec<Recorded>>> = Arc::default();
    let handler = Arc::new(handler);
    let log2 = log.clone();
    let accepted: Arc<AtomicUsize> = Arc::default();
    let counter = accepted.clone();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            counter.fetch_add(1, Ordering::SeqCst);
            let handler = handler.clone();
            let log = log2.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req: Request<Incoming>| {
                    let handler = handler.clone();
                    let log = log.clone();
                    async move { Ok::<_, Infallible>(handle(req, &*handler, &log).await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tcp), svc)
                    .await;
            });
        }
    });
    Fake {
        url: format!("http://{addr}/mcp"),
        log,
        accepted,
    }
}

async fn handle<F: Fn(&Recorded) -> Reply>(
    req: Request<Incoming>,
    handler: &F,
    log: &Mutex<Vec<Recorded>>,
) -> Response<Body> {
    let (parts, body) = req.into_parts();
    let bytes = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let raw = String::from_utf8_lossy(&bytes).into_owned();
    let rec = Recorded {
        method: parts.method,
        headers: parts.headers,
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        raw,
    };
    if let Ok(mut l) = log.lock() {
        l.push(rec.clone());
    }
    // Notifications, responses (answers to server requests) and DELETEs: accept.
    let b = &rec.body;
    let reply = if b.get("id").is_none() || b.get("result").is_some() || b.get("error").is_some() {
        Reply::Status(202)
    } else {
        handler(&rec)
    };
    match reply {
        Reply::Json {
            status,
            body,
            headers,
        } => {
            let mut b = Response::builder()
                .status(StatusCode::from_u16(status).unwrap_or(StatusCode::OK))
                .header("content-type", "application/json");
            for (k, v) in headers {
                b = b.header(k, v);
            }
            b.body(Full::new(Bytes::from(body)).boxed())
                .expect("response")
        }
        Reply::Status(status) => Response::builder()
            .status(StatusCode::from_u16(status).unwrap_or(StatusCode::OK))
            .body(Full::new(Bytes::new()).boxed())
            .expect("response"),
        Reply::Hang => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Response::new(Full::new(Bytes::new()).boxed())
        }
        Reply::Sse {
            before,
            gate,
            after,
        } => {
            let (tx, rx) = mpsc::channel::<Bytes>(16);
            tokio::spawn(async move {
                for e in before {
                    if tx
                        .send(Bytes::from(format!("data: {e}\n\n")))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
                if let Some(g) = gate {
                    g.notified().await;
                }
                for e in after {
                    if tx
                        .send(Bytes::from(format!("data: {e}\n\n")))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
            });
            let s = stream::unfold(rx, |mut rx| async move {
                rx.recv()
                    .await
                    .map(|b| (Ok::<_, Infallible>(Frame::data(b)), rx))
            });
            Response::builder()
                .header("content-type", "text/event-stream")
                .body(StreamBody::new(s).boxed())
                .expect("response")
        }
    }
}

pub fn http_upstream(url: &str, era: EraPref) -> Arc<Upstream> {
    Upstream::new(UpstreamSpec {
        id: "alpha".into(),
        transport: TransportSpec::Http {
            url: url.into(),
            headers: vec![("Authorization".into(), "Bearer upstream-secret".into())],
            ca_file: None,
            token: None,
        },
        timeout: Duration::from_secs(10),
        era,
        max_message_bytes: junction_upstream::DEFAULT_MAX_MESSAGE_BYTES,
    })
    .expect("upstream")
}

pub fn raw(s: &str) -> Box<serde_json::value::RawValue> {
    serde_json::value::RawValue::from_string(s.to_owned()).expect("raw json")
}

/// Every event until the stream ends.
pub async fn collect(mut s: ResponseStream) -> Vec<Result<UpstreamEvent, UpstreamError>> {
    let mut out = Vec::new();
    while let Some(e) = s.next().await {
        out.push(e);
    }
    out
}

pub fn result_json(e: &Result<UpstreamEvent, UpstreamError>) -> Value {
    match e {
        Ok(UpstreamEvent::Result(r)) => serde_json::from_str(r.get()).unwrap_or(Value::Null),
        other => panic!("expected a result, got {other:?}"),
    }
}

pub fn notification_json(e: &Result<UpstreamEvent, UpstreamError>) -> Value {
    match e {
        Ok(UpstreamEvent::Notification(r)) => serde_json::from_str(r.get()).unwrap_or(Value::Null),
        other => panic!("expected a notification, got {other:?}"),
    }
}
