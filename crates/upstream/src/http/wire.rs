//! The HTTP wire: the pooled client, one POST, and reading its answer as JSON
//! or as an SSE stream relayed event by event (`SseBody`, an `EventSource`);
//! a legacy session's `Responder` takes the `Reply`s to server requests.

use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, ACCEPT, CONTENT_TYPE};
use http::{Method, StatusCode, Uri};
use http_body_util::BodyExt;
use hyper::body::Body as _;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use junction_protocol::jsonrpc::{Id, RpcError};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use tokio::time::Instant;

use super::h1::Fields;
use super::pool::{chain, Answered, Leased, Pool, SendError};
use super::TokenSource;
use crate::body::ReadError;
use crate::envelope::{self, Incoming as Msg};
use crate::sse::SseParser;
use crate::stream::{
    is_bridgeable, Bridged, EventSource, Inner, Item, Reply, ReplyFuture, ServerRequest,
};
use crate::{UpstreamError, UpstreamEvent};

/// How long a response stream may stay open after our response before its
/// connection is given up rather than reused.
const SETTLE_GRACE: Duration = Duration::from_secs(1);

/// How much of an error body we keep for `UpstreamError::Http`.
const ERROR_BODY_KEEP: usize = 4096;

/// The connector for one upstream: TCP (no Nagle), TLS by rustls for https
/// (public roots plus `ca_file`), ALPN offering h2 and http/1.1.
pub(crate) fn build_connector(
    ca_file: Option<&Path>,
) -> Result<HttpsConnector<HttpConnector>, UpstreamError> {
    let bad = |m: String| UpstreamError::Unavailable(m);
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = ca_file {
        let pem =
            std::fs::read(path).map_err(|e| bad(format!("ca_file {}: {e}", path.display())))?;
        let mut added = 0;
        for cert in CertificateDer::pem_slice_iter(&pem) {
            let cert = cert.map_err(|e| bad(format!("ca_file {}: {e}", path.display())))?;
            roots
                .add(cert)
                .map_err(|e| bad(format!("ca_file {}: {e}", path.display())))?;
            added += 1;
        }
        if added == 0 {
            return Err(bad(format!("ca_file {}: no certificates", path.display())));
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| bad(format!("TLS setup: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    Ok(hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .enable_http2()
        .wrap_connector(http))
}

pub(crate) fn parse_url(url: &str) -> Result<Uri, UpstreamError> {
    let uri: Uri = url
        .parse()
        .map_err(|e| UpstreamError::Unavailable(format!("invalid upstream URL {url:?}: {e}")))?;
    match (uri.scheme_str(), uri.authority()) {
        (Some("http" | "https"), Some(_)) => Ok(uri),
        _ => Err(UpstreamError::Unavailable(format!(
            "upstream URL {url:?} must be http:// or https:// with a host"
        ))),
    }
}

pub(crate) fn header(name: &str, value: &str) -> Option<(HeaderName, HeaderValue)> {
    Some((
        HeaderName::from_bytes(name.as_bytes()).ok()?,
        HeaderValue::from_str(value).ok()?,
    ))
}

/// Connection-level facts shared by every request of one upstream.
pub(crate) struct Wire {
    pub(crate) upstream: String,
    pub(crate) pool: Arc<Pool>,
    pub(crate) static_headers: Vec<(HeaderName, HeaderValue)>,
    /// `Authorization` for requests that bring none (`TransportSpec::Http::token`).
    pub(crate) token: Option<Arc<dyn TokenSource>>,
    pub(crate) changes: tokio::sync::broadcast::Sender<String>,
    /// `upstreams[].max_response_bytes`: largest body or SSE event accepted.
    pub(crate) max_message: usize,
}

impl Wire {
    /// One request to the endpoint. `extra` headers are ours (they win over
    /// everything), then the token source's `Authorization` when `extra` has
    /// none, then `Content-Type`/`Accept`, then the static config headers;
    /// `forwarded` client headers never replace any of them.
    pub(crate) async fn send(
        &self,
        method: Method,
        body: Vec<u8>,
        extra: Fields,
        forwarded: &[(String, String)],
        deadline: Instant,
    ) -> Result<Answered, UpstreamError> {
        tokio::time::timeout_at(deadline, self.send_within(method, body, extra, forwarded))
            .await
            .unwrap_or(Err(UpstreamError::Timeout))
    }

    /// `send` without a timer of its own, for a caller whose timer already
    /// bounds the whole exchange (`Upstream::send_once`): one timer less per
    /// call on the hot path.
    pub(crate) async fn send_within(
        &self,
        method: Method,
        body: Vec<u8>,
        extra: Fields,
        forwarded: &[(String, String)],
    ) -> Result<Answered, UpstreamError> {
        // `extra` becomes the request's fields; every decision below is
        // taken against it as given, before anything is added.
        let mut headers = extra;
        if let Some(source) = &self.token {
            // Boxed: upstreams without a token source keep this future small.
            Box::pin(super::auth::authorize(
                &self.upstream,
                source.as_ref(),
                &mut headers,
            ))
            .await?;
        }
        let has_type = headers.contains(&CONTENT_TYPE);
        let has_accept = headers.contains(&ACCEPT);
        let mut add = Vec::with_capacity(self.static_headers.len() + forwarded.len());
        for (n, v) in &self.static_headers {
            if !headers.contains(n) {
                add.push((n.clone(), v.clone()));
            }
        }
        for (name, value) in forwarded {
            let Some((n, v)) = header(name, value) else {
                tracing::debug!(upstream = %self.upstream, header = %name, "skipping unencodable forwarded header");
                continue;
            };
            if is_protected(&n)
                || self.static_headers.iter().any(|(s, _)| *s == n)
                || headers.contains(&n)
            {
                continue;
            }
            add.push((n, v));
        }
        headers.reserve(add.len() + 2);
        for (n, v) in add {
            headers.append(n, v);
        }
        if method == Method::POST {
            if !has_type {
                headers.insert(CONTENT_TYPE, JSON);
            }
            if !has_accept {
                headers.insert(ACCEPT, JSON_OR_SSE);
            }
        } else if method == Method::GET && !has_accept {
            // The standalone stream is SSE only; servers refuse a GET that does
            // not say so (the Python SDK answers 406).
            headers.insert(ACCEPT, SSE);
        }
        match self.pool.send(method, headers, Bytes::from(body)).await {
            Ok(resp) => Ok(resp),
            Err(SendError::Connect(e)) => Err(UpstreamError::Unavailable(e)),
            Err(SendError::Invalid(e)) => Err(UpstreamError::Protocol(e)),
            Err(SendError::Failed(e)) => {
                tracing::debug!(upstream = %self.upstream, error = %e, "upstream request failed after connect");
                Err(UpstreamError::Closed)
            }
        }
    }
}

// Constants, not `from_static` calls: those check every byte again on
// each request.
const JSON: HeaderValue = HeaderValue::from_static("application/json");
const JSON_OR_SSE: HeaderValue = HeaderValue::from_static("application/json, text/event-stream");
const SSE: HeaderValue = HeaderValue::from_static("text/event-stream");

/// Names only Junction decides; a forwarded client header never sets them:
/// the connection's own framing fields (`h1::is_framing`), the MCP ones,
/// credentials and content negotiation.
fn is_protected(name: &HeaderName) -> bool {
    let n = name.as_str();
    n.starts_with("mcp-")
        || super::h1::is_framing(name)
        || matches!(
            n,
            "authorization" | "cookie" | "content-type" | "accept" | "proxy-authorization"
        )
}

/// What one POST answered, after looking at status and content type.
pub(crate) enum Answer {
    /// 2xx with a JSON-RPC answer for our id (JSON already read, or SSE to read).
    Stream(Inner),
    /// 400 or 404 whose body is a JSON-RPC error.
    RpcError { status: u16, error: RpcError },
    /// Any other status.
    Status { status: u16, body: String },
}

/// Answering server→client requests on a legacy SSE stream.
pub(crate) struct Responder {
    pub(crate) wire: Arc<Wire>,
    pub(crate) headers: Fields,
}

impl Responder {
    /// POST one JSON-RPC response on the session; the upstream answers 202.
    pub(crate) async fn post(&self, body: Vec<u8>, deadline: Instant) -> Result<(), UpstreamError> {
        let resp = self
            .wire
            .send(Method::POST, body, self.headers.clone(), &[], deadline)
            .await?;
        if resp.status().is_success() {
            return Ok(());
        }
        let status = resp.status().as_u16();
        Err(UpstreamError::Http {
            status,
            body: "the upstream refused our answer to its request".to_owned(),
        })
    }
}

impl Reply for Responder {
    fn reply(&self, message: Vec<u8>, deadline: Instant) -> ReplyFuture<'_> {
        Box::pin(self.post(message, deadline))
    }
}

/// Reads one POST's answer: a JSON body at once (bounded by `deadline`, or by
/// the caller's own timer when `None`), an SSE body as a stream.
pub(crate) async fn read_answer(
    resp: Answered,
    our_id: i64,
    responder: Option<Arc<Responder>>,
    deadline: Option<Instant>,
    max: usize,
) -> Result<Answer, UpstreamError> {
    let status = resp.status();
    let content_type = resp
        .headers()
        .get(&CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let is = |prefix: &str| {
        content_type
            .get(..prefix.len())
            .is_some_and(|p| p.eq_ignore_ascii_case(prefix))
    };
    let (sse, json) = (is("text/event-stream"), is("application/json"));
    let bad_type = (!content_type.is_empty() && !json).then(|| content_type.to_owned());
    let body = resp.into_body();
    if status.is_success() && sse {
        return Ok(Answer::Stream(Inner::Source(Box::new(SseBody {
            body,
            parser: SseParser::with_limit(max),
            queue: Default::default(),
            our_id,
            ended: false,
            responder,
        }))));
    }
    let bytes = match deadline {
        Some(deadline) => tokio::time::timeout_at(deadline, read_capped(body, max))
            .await
            .map_err(|_| UpstreamError::Timeout)??,
        None => read_capped(body, max).await?,
    };
    if status == StatusCode::OK || (status.is_success() && !bytes.is_empty()) {
        if let Some(content_type) = bad_type {
            return Err(UpstreamError::Protocol(format!(
                "unexpected content type {content_type:?}"
            )));
        }
        let text = std::str::from_utf8(&bytes)
            .map_err(|_| UpstreamError::Protocol("body is not UTF-8".to_owned()))?;
        return match envelope::classify(text).map_err(UpstreamError::Protocol)? {
            Msg::Response { id, outcome } => {
                Ok(Answer::Stream(Inner::Ready(From::from([response_item(
                    id, outcome, our_id,
                )]))))
            }
            _ => Err(UpstreamError::Protocol(
                "JSON body is not a response".to_owned(),
            )),
        };
    }
    if status == StatusCode::BAD_REQUEST || status == StatusCode::NOT_FOUND {
        if let Ok(Msg::Response {
            outcome: Err(error),
            ..
        }) = std::str::from_utf8(&bytes)
            .map_err(|_| String::new())
            .and_then(envelope::classify)
        {
            return Ok(Answer::RpcError {
                status: status.as_u16(),
                error,
            });
        }
    }
    let keep = bytes.len().min(ERROR_BODY_KEEP);
    Ok(Answer::Status {
        status: status.as_u16(),
        body: String::from_utf8_lossy(&bytes[..keep]).into_owned(),
    })
}

fn response_item(
    id: Option<Id>,
    outcome: Result<Box<serde_json::value::RawValue>, RpcError>,
    ours: i64,
) -> Item {
    match (id, outcome) {
        (Some(Id::Num(n)), outcome) if n == ours => Ok(Bridged::Event(match outcome {
            Ok(result) => UpstreamEvent::Result(result),
            Err(error) => UpstreamEvent::Error(error),
        })),
        // An error without id: the upstream could not parse our request.
        (None, Err(error)) => Ok(Bridged::Event(UpstreamEvent::Error(error))),
        (id, _) => Err(UpstreamError::Protocol(format!(
            "response id {id:?} does not match request id {ours}"
        ))),
    }
}

async fn read_capped(body: Leased, max: usize) -> Result<Bytes, UpstreamError> {
    crate::body::read_whole(body, max)
        .await
        .map_err(|e| match e {
            ReadError::TooLarge => UpstreamError::Protocol(format!(
                "response body exceeds {max} bytes (upstreams[].max_response_bytes)"
            )),
            ReadError::Broken(e) => {
                UpstreamError::Protocol(format!("body broke off: {}", chain(&e)))
            }
        })
}

/// An SSE response being read: events are handed out as they arrive.
pub(crate) struct SseBody {
    body: Leased,
    parser: SseParser,
    queue: std::collections::VecDeque<String>,
    our_id: i64,
    ended: bool,
    responder: Option<Arc<Responder>>,
}

impl EventSource for SseBody {
    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Item>> {
        loop {
            while let Some(text) = self.queue.pop_front() {
                match envelope::classify(&text) {
                    Err(e) => return Poll::Ready(Some(Err(UpstreamError::Protocol(e)))),
                    Ok(Msg::Notification { method, raw, .. }) => {
                        // A legacy server may put session-wide change notices on
                        // any stream; they belong to the upstream, not this request.
                        match &self.responder {
                            Some(r) if crate::is_change_notification(&method) => {
                                let _ = r.wire.changes.send(method);
                            }
                            _ => {
                                return Poll::Ready(Some(Ok(Bridged::Event(
                                    UpstreamEvent::Notification(raw),
                                ))))
                            }
                        }
                    }
                    Ok(Msg::Response { id, outcome }) => {
                        return Poll::Ready(Some(response_item(id, outcome, self.our_id)))
                    }
                    // Only a legacy session can take our answer (responder);
                    // `ping` needs no one but us.
                    Ok(Msg::ServerRequest { id, method, params })
                        if self.responder.is_some() && is_bridgeable(&method) =>
                    {
                        return Poll::Ready(Some(Ok(Bridged::ServerRequest(ServerRequest {
                            id,
                            method,
                            params,
                        }))))
                    }
                    Ok(Msg::ServerRequest { id, method, .. }) => self.answer(&id, &method),
                }
            }
            if self.ended {
                return Poll::Ready(None);
            }
            match std::task::ready!(Pin::new(&mut self.body).poll_frame(cx)) {
                None => self.ended = true,
                Some(Err(e)) => {
                    return Poll::Ready(Some(Err(UpstreamError::Protocol(format!(
                        "SSE stream broke off: {}",
                        chain(&e)
                    )))))
                }
                Some(Ok(frame)) => {
                    if let Some(data) = frame.data_ref() {
                        match self.parser.push(data) {
                            Ok(events) => self.queue.extend(events),
                            Err(e) => return Poll::Ready(Some(Err(UpstreamError::Protocol(e)))),
                        }
                    }
                }
            }
        }
    }

    /// After our response: a stream the upstream has already ended (the usual
    /// case) is read to that end now, so its connection goes back to the pool;
    /// one still open is drained in the background for a moment
    /// (`SETTLE_GRACE`), then dropped, which closes its connection.
    fn settle(mut self: Box<Self>) {
        let mut cx = Context::from_waker(Waker::noop());
        loop {
            match Pin::new(&mut self.body).poll_frame(&mut cx) {
                Poll::Ready(Some(Ok(_))) => {}
                Poll::Ready(None | Some(Err(_))) => return,
                Poll::Pending => break,
            }
        }
        tokio::spawn(async move {
            let drain = async { while let Some(Ok(_)) = self.body.frame().await {} };
            let _ = tokio::time::timeout(SETTLE_GRACE, drain).await;
        });
    }
}

impl SseBody {
    fn answer(&self, id: &Id, method: &str) {
        let Some(responder) = self.responder.clone() else {
            tracing::debug!(method, "ignoring a server request on a modern stream");
            return;
        };
        let body = envelope::answer_server_request(id, method);
        tokio::spawn(async move {
            let deadline = Instant::now() + Duration::from_secs(10);
            let wire = &responder.wire;
            match wire
                .send(Method::POST, body, responder.headers.clone(), &[], deadline)
                .await
            {
                Ok(resp) if resp.status().is_success() => {}
                Ok(resp) => {
                    tracing::debug!(upstream = %wire.upstream, status = %resp.status(), "answer to server request refused")
                }
                Err(e) => {
                    tracing::debug!(upstream = %wire.upstream, error = %e, "answer to server request failed")
                }
            }
        });
    }
}
