//! Response builders: JSON bodies, SSE streams, and the rendering of a
//! `GatewayError` into a response (via `GatewayError::render`, the one mapping).

use std::convert::Infallible;

use bytes::Bytes;
use http::{header, HeaderValue, Response, StatusCode};
use http_body_util::{combinators::BoxBody, BodyExt, Full, StreamBody};
use hyper::body::Frame;
use junction_protocol::jsonrpc::{error_bytes, Id};
use tokio::sync::mpsc;

use crate::error::GatewayError;

pub type Body = BoxBody<Bytes, Infallible>;

pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).boxed()
}

pub fn empty(status: StatusCode) -> Response<Body> {
    let mut r = Response::new(full(Bytes::new()));
    *r.status_mut() = status;
    r
}

pub fn json(status: StatusCode, bytes: Vec<u8>) -> Response<Body> {
    // A constant, not a `from_static` call: that checks every byte again on
    // each response.
    const JSON: HeaderValue = HeaderValue::from_static("application/json");
    let mut r = Response::new(full(bytes));
    *r.status_mut() = status;
    r.headers_mut().insert(header::CONTENT_TYPE, JSON);
    r
}

pub fn text(status: StatusCode, body: &'static str) -> Response<Body> {
    let mut r = Response::new(full(body));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// The response for a refused request, with its JSON-RPC error code (for the
/// access line: the error is rendered once).
pub fn error(id: Option<&Id>, err: &GatewayError) -> (Response<Body>, i64) {
    let (status, rpc) = err.render();
    let mut r = json(status, error_bytes(id, &rpc));
    for (name, value) in err.headers() {
        if let Ok(v) = HeaderValue::from_str(&value) {
            r.headers_mut().insert(name, v);
        }
    }
    (r, rpc.code)
}

/// One SSE event carrying one JSON-RPC message.
pub fn sse_event(message: &[u8]) -> Bytes {
    let mut b = Vec::with_capacity(message.len() + 16);
    b.extend_from_slice(b"event: message\ndata: ");
    b.extend_from_slice(message);
    b.extend_from_slice(b"\n\n");
    Bytes::from(b)
}

/// An SSE response fed by a channel; when the client goes away the receiver is
/// dropped, the sender's next `send` fails and the producer stops (cancellation).
pub fn sse(rx: mpsc::Receiver<Bytes>) -> Response<Body> {
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<_, Infallible>(Frame::data(b)), rx))
    });
    let mut r = Response::new(StreamBody::new(stream).boxed());
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    r
}

/// A 200 JSON answer re-sent as an SSE stream of that one message; anything
/// else (errors with their HTTP status, 202, streams) is returned as it is.
pub async fn as_sse(r: Response<Body>) -> Response<Body> {
    let is_json = r
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes() == b"application/json");
    if r.status() != StatusCode::OK || !is_json {
        return r;
    }
    let (parts, body) = r.into_parts();
    // A JSON body here is always `Full`: collecting it cannot wait or fail.
    let bytes = match body.collect().await {
        Ok(c) => c.to_bytes(),
        Err(never) => match never {},
    };
    let (tx, rx) = mpsc::channel(1);
    let _ = tx.try_send(sse_event(&bytes));
    let mut out = sse(rx);
    for (name, value) in parts.headers {
        if let Some(name) = name {
            if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
                out.headers_mut().insert(name, value);
            }
        }
    }
    out
}
