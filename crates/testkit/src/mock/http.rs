//! HTTP plumbing of the mocks: one hyper connection per socket, recording,
//! dispatch by era, and turning a `Reply` into a response.

use super::{legacy, lock, modern, MockEra, Recorded, Shared};
use crate::sse;
use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{json, Value};
use std::convert::Infallible;
use std::sync::Arc;
use tokio::net::TcpStream;
use tokio::sync::mpsc;

pub(crate) type Body = BoxBody<Bytes, Infallible>;

/// What a handler wants sent back.
pub(crate) enum Reply {
    Json {
        status: u16,
        body: Value,
        headers: Vec<(String, String)>,
    },
    Empty {
        status: u16,
    },
    /// An SSE stream; each message is one JSON-RPC message, the stream ends when
    /// the sender is dropped.
    Stream {
        rx: mpsc::Receiver<Value>,
        headers: Vec<(String, String)>,
    },
}

impl Reply {
    pub(crate) fn json(status: u16, body: Value) -> Reply {
        Reply::Json {
            status,
            body,
            headers: Vec::new(),
        }
    }
}

/// The request as the handlers see it.
pub(crate) struct Req {
    pub(crate) http_method: String,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

impl Req {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

pub(crate) fn error_body(id: &Value, code: i64, message: &str, data: Option<Value>) -> Value {
    let mut err = json!({"code": code, "message": message});
    if let Some(data) = data {
        err["data"] = data;
    }
    json!({"jsonrpc": "2.0", "id": id, "error": err})
}

pub(crate) fn result_body(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

pub(crate) async fn serve_connection(shared: Arc<Shared>, stream: TcpStream) {
    let service = hyper::service::service_fn(move |req| {
        let shared = shared.clone();
        async move { Ok::<_, Infallible>(handle(shared, req).await) }
    });
    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    // A client that hangs up mid-request is normal in these tests.
    let _ = builder
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> Response<Body> {
    let http_method = req.method().as_str().to_string();
    let headers: Vec<(String, String)> = req
        .headers()
        .iter()
        .map(|(n, v)| {
            (
                n.as_str().to_ascii_lowercase(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let path_ok = req.uri().path() == "/mcp";
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes().to_vec(),
        Err(_) => return to_response(Reply::Empty { status: 400 }),
    };
    let recorded_body = if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()))
    };
    lock(&shared.recorded).push(Recorded {
        http_method: http_method.clone(),
        headers: headers.clone(),
        body: recorded_body,
    });
    if !path_ok {
        return to_response(Reply::Empty { status: 404 });
    }
    let req = Req {
        http_method,
        headers,
        body,
    };
    let reply = match shared.era {
        MockEra::Modern => modern::handle(&shared, &req).await,
        MockEra::Legacy => legacy::handle(&shared, &req).await,
        MockEra::Dual if is_modern_message(&req) => modern::handle(&shared, &req).await,
        MockEra::Dual => legacy::handle(&shared, &req).await,
    };
    to_response(reply)
}

/// Dual-era routing, decided per message: a session id or `initialize` means the
/// handshake era; per-request `_meta` with a version means modern.
fn is_modern_message(req: &Req) -> bool {
    if req.http_method != "POST" || req.header("mcp-session-id").is_some() {
        return false;
    }
    let Ok(body) = serde_json::from_slice::<Value>(&req.body) else {
        return true;
    };
    if body.get("method").and_then(Value::as_str) == Some("initialize") {
        return false;
    }
    body.pointer("/params/_meta/io.modelcontextprotocol~1protocolVersion")
        .is_some()
}

fn to_response(reply: Reply) -> Response<Body> {
    let (status, headers, body, content_type) = match reply {
        Reply::Json {
            status,
            body,
            headers,
        } => (
            status,
            headers,
            Full::new(Bytes::from(body.to_string())).boxed(),
            Some("application/json"),
        ),
        Reply::Empty { status } => (status, Vec::new(), Full::new(Bytes::new()).boxed(), None),
        Reply::Stream { rx, mut headers } => {
            headers.push(("x-accel-buffering".into(), "no".into()));
            headers.push(("cache-control".into(), "no-cache".into()));
            let stream = futures_util::stream::unfold(rx, |mut rx| async move {
                rx.recv()
                    .await
                    .map(|msg| (Ok::<_, Infallible>(Frame::data(sse::event(&msg))), rx))
            });
            (
                200,
                headers,
                StreamBody::new(stream).boxed(),
                Some("text/event-stream"),
            )
        }
    };
    let mut resp = Response::new(body);
    *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let h = resp.headers_mut();
    if let Some(ct) = content_type {
        h.insert(
            hyper::header::CONTENT_TYPE,
            hyper::header::HeaderValue::from_static(ct),
        );
    }
    for (name, value) in headers {
        if let (Ok(n), Ok(v)) = (
            hyper::header::HeaderName::try_from(name),
            hyper::header::HeaderValue::try_from(value),
        ) {
            h.append(n, v);
        }
    }
    resp
}

/// Parsed POST body: a request, a notification, a client response, or the error
/// reply to send for garbage.
pub(crate) enum Message {
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    Notification,
    Response {
        id: Value,
        message: Value,
    },
}

pub(crate) fn parse_message(body: &[u8]) -> Result<Message, Value> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| error_body(&Value::Null, -32700, &format!("Parse error: {e}"), None))?;
    let invalid = |m: &str| error_body(&Value::Null, -32600, m, None);
    let Some(obj) = v.as_object() else {
        return Err(invalid("Invalid Request: body must be one JSON-RPC object"));
    };
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(invalid("Invalid Request: jsonrpc must be \"2.0\""));
    }
    let id = obj.get("id").cloned();
    if let Some(id) = &id {
        if !(id.is_string() || id.is_i64() || id.is_u64()) {
            return Err(invalid(
                "Invalid Request: id must be a string or an integer",
            ));
        }
    }
    match (obj.get("method").and_then(Value::as_str), id) {
        (Some(method), Some(id)) => {
            let params = obj.get("params").cloned().unwrap_or(Value::Null);
            if !(params.is_object() || params.is_null()) {
                return Err(invalid("Invalid Request: params must be an object"));
            }
            Ok(Message::Request {
                id,
                method: method.to_string(),
                params,
            })
        }
        (Some(_), None) => Ok(Message::Notification),
        (None, Some(id)) if obj.contains_key("result") || obj.contains_key("error") => {
            Ok(Message::Response {
                id,
                message: v.clone(),
            })
        }
        (None, _) => Err(invalid("Invalid Request: missing method")),
    }
}
