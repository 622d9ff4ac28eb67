//! The MCP endpoint of a route: edge checks, body, JSON-RPC parse, then the split
//! into the modern (2026-07-28) and handshake-era paths. The phases run in the
//! order of DESIGN §4: limits, (authentication and authorization: policy issue),
//! headers, route, upstream.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use http::{HeaderMap, Method, Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use hyper::body::{Body as _, Frame, Incoming, SizeHint};
use junction_protocol::jsonrpc::{parse_client_message, ClientMessage, Id, RawParams};
use junction_protocol::version;

use crate::error::GatewayError;
use crate::response::{self, Body};
use crate::state::{RouteState, State};
use crate::{legacy, modern};

/// What every phase after parsing needs to know about the request.
pub struct Cx<'a> {
    pub state: &'a State,
    pub route: &'a RouteState,
    pub headers: &'a HeaderMap,
    /// Digest of the authenticated principal; "" while authentication is off.
    pub principal: String,
    /// The authenticated caller, when `auth` is configured.
    pub identity: Option<junction_policy::Principal>,
    /// The TCP peer's address (see [`Cx::client_ip`]).
    pub peer_ip: Option<std::net::IpAddr>,
    /// Whether this request's access line is written (`log.access`, and
    /// logging set up): decided once, so a request pays for what the line
    /// needs only when it is written.
    pub access_log: bool,
    /// (upstream, target) once the request is routed: the exposed tool or
    /// prompt, or the resource URI. Kept only for the access line.
    pub routed: std::sync::OnceLock<(String, String)>,
    /// The method label once the request is parsed.
    method: std::sync::OnceLock<&'static str>,
    /// When the request arrived, while it has no response yet (`handled`):
    /// a `Cx` dropped with this set belongs to a request whose client went
    /// away first (hyper dropped its future), and is counted and logged as
    /// `aborted` ([`Cx::drop`]).
    unanswered: Option<Instant>,
}

impl Cx<'_> {
    pub fn new<'a>(state: &'a State, route: &'a RouteState, headers: &'a HeaderMap) -> Cx<'a> {
        Cx {
            state,
            route,
            headers,
            principal: String::new(),
            identity: None,
            peer_ip: None,
            access_log: false,
            routed: std::sync::OnceLock::new(),
            method: std::sync::OnceLock::new(),
            unanswered: None,
        }
    }

    /// The caller's address, for the `client_ip` rate key and the access
    /// line: the peer, or, when `server.trusted_proxies` lists the peer, the
    /// caller it names (`junction_policy::client_ip`). Read only by those
    /// that need it.
    pub fn client_ip(&self) -> Option<std::net::IpAddr> {
        let trusted = &self.state.config.server.trusted_proxies;
        self.peer_ip
            .map(|peer| junction_policy::client_ip(peer, self.headers, trusted))
    }

    /// Names the upstream and target of a routed request for its access line.
    pub fn note_target(&self, upstream: &str, target: &str) {
        if self.access_log {
            let _ = self.routed.set((upstream.to_owned(), target.to_owned()));
        }
    }

    pub fn accepts_sse(&self) -> bool {
        self.headers.get_all(http::header::ACCEPT).iter().any(|v| {
            v.to_str()
                .map(|s| s.contains("text/event-stream"))
                .unwrap_or(false)
        })
    }

    /// A request header's value as text. Pass a [`names`] constant on the
    /// hot path: a `&str` is parsed and validated as a header name on every
    /// lookup.
    pub fn header(&self, name: impl http::header::AsHeaderName) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// A request dropped before its response (the client closed the connection,
/// or timed out, while Junction waited for an upstream) is still a request:
/// `junction_requests_total{outcome="aborted"}` with its duration so far,
/// and an access line with status 499 (nginx's "client closed request"), so
/// nothing the client started goes uncounted.
impl Drop for Cx<'_> {
    fn drop(&mut self) {
        let Some(started) = self.unanswered.take() else {
            return;
        };
        let method = self.method.get().copied().unwrap_or("other");
        let m = &self.state.metrics;
        m.requests_total
            .with_label_values(&[&self.route.path, method, "aborted"])
            .inc();
        m.request_duration_seconds
            .with_label_values(&[&self.route.path, method])
            .observe(started.elapsed().as_secs_f64());
        if self.access_log {
            AccessLine {
                route: self.route,
                method,
                client: self.client_ip(),
                routed: self.routed.take(),
                status: 499,
                error: None,
                principal: self.identity.take().map(|p| p.subject),
                started,
            }
            .write("aborted");
        }
    }
}

/// The MCP header names looked up on every request, parsed once.
pub mod names {
    use http::HeaderName;

    pub const MCP_PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
    pub const MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");
    pub const MCP_NAME: HeaderName = HeaderName::from_static("mcp-name");
    pub const MCP_SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
}

/// Serves one request on an MCP route. Takes the request's parts, not the
/// request, and is a function returning an `async` block, not an `async fn`:
/// an `async fn` keeps its arguments twice in its state (the captured request
/// and what it is split into), and this future is part of the one allocated
/// and copied whole per request (`listener::REQUEST_FUTURE_LIMIT`).
pub fn handle(
    state: Arc<State>,
    route: Arc<RouteState>,
    parts: http::request::Parts,
    body: Incoming,
    peer: std::net::SocketAddr,
) -> impl Future<Output = Response<Body>> + Send {
    let started = Instant::now();
    async move { handled(&state, &route, &parts, body, peer, started).await }
}

async fn handled(
    state: &Arc<State>,
    route: &Arc<RouteState>,
    parts: &http::request::Parts,
    body: Incoming,
    peer: std::net::SocketAddr,
    started: Instant,
) -> Response<Body> {
    state.hub.attach(state);
    let mut cx = Cx::new(state, route, &parts.headers);
    cx.peer_ip = Some(peer.ip());
    cx.access_log = state.config.log.access && junction_telemetry::access_log().is_some();
    cx.unanswered = Some(started);
    let outcome = match edge(&cx) {
        Err(e) => Err(e),
        Ok(()) => match authenticate(&mut cx, parts.uri.query()).await {
            Err(e) => Err(e),
            Ok(()) => edge_and_dispatch(&cx, &parts.method, body).await,
        },
    };
    // Answered: from here on the response exists (`Cx::drop`).
    cx.unanswered = None;
    let mut refusal = None;
    let (method_label, response) = match outcome {
        Ok((label, r)) if prefers_sse(&parts.headers) => (label, response::as_sse(r).await),
        Ok(ok) => ok,
        Err((label, id, err)) => {
            tracing::debug!(route = %route.path, error = %err, "request refused");
            let (response, code) = response::error(id.as_ref(), &err);
            refusal = Some(code);
            (label, response)
        }
    };
    let outcome = if response.status().is_success() {
        "ok"
    } else {
        "error"
    };
    let m = &state.metrics;
    let secs = started.elapsed().as_secs_f64();
    let series = || {
        (
            m.requests_total
                .with_label_values(&[&route.path, method_label, outcome]),
            m.request_duration_seconds
                .with_label_values(&[&route.path, method_label]),
        )
    };
    // `other` has the slot after the named methods.
    let slot = METHOD_LABELS
        .iter()
        .position(|l| *l == method_label)
        .unwrap_or(METHOD_LABELS.len());
    route.ok_series[slot].observe(outcome == "ok", secs, series);
    if !cx.access_log {
        return response;
    }
    let line = AccessLine {
        route: &**route,
        method: method_label,
        client: cx.client_ip(),
        routed: cx.routed.take(),
        status: response.status().as_u16(),
        error: refusal,
        principal: cx.identity.take().map(|p| p.subject),
        started,
    };
    if response.body().size_hint().exact().is_some() {
        line.write(outcome);
        response
    } else {
        // The stream outlives this request: its line keeps the route.
        let line = line.with_route(Arc::clone(route));
        response.map(|body| {
            LoggedStream {
                body,
                line,
                ended: false,
            }
            .boxed()
        })
    }
}

/// A request's line in the access log (`junction_telemetry::AccessLog`):
/// route, method, upstream and target once routed, HTTP status, outcome, the
/// JSON-RPC code when Junction refused the request, duration, the principal's
/// subject and the client's address (`client_ip`: behind trusted proxies, the
/// caller they name). Never arguments, results or tokens. Taken from the
/// request once its response is ready; a streamed answer's line is written
/// when the stream ends ([`LoggedStream`]), so its duration is the whole
/// exchange.
struct AccessLine<R: std::ops::Deref<Target = RouteState>> {
    route: R,
    method: &'static str,
    routed: Option<(String, String)>,
    status: u16,
    error: Option<i64>,
    principal: Option<String>,
    client: Option<std::net::IpAddr>,
    started: Instant,
}

impl<R: std::ops::Deref<Target = RouteState>> AccessLine<R> {
    fn with_route<S: std::ops::Deref<Target = RouteState>>(self, route: S) -> AccessLine<S> {
        AccessLine {
            route,
            method: self.method,
            routed: self.routed,
            status: self.status,
            error: self.error,
            principal: self.principal,
            client: self.client,
            started: self.started,
        }
    }

    fn write(&self, outcome: &str) {
        let Some(log) = junction_telemetry::access_log() else {
            return;
        };
        log.write(&junction_telemetry::AccessRecord {
            route: &self.route.path,
            method: self.method,
            upstream: self.routed.as_ref().map(|(u, _)| u.as_str()),
            target: self.routed.as_ref().map(|(_, t)| t.as_str()),
            status: self.status,
            outcome,
            error: self.error,
            duration_us: self.started.elapsed().as_micros() as u64,
            principal: self.principal.as_deref(),
            client: self.client,
        });
    }
}

/// A streamed answer (SSE) whose access line is written when the stream is
/// done: outcome `ok` once it reached its end, `aborted` when it was dropped
/// before (the client went away, or the connection was cut).
struct LoggedStream {
    body: Body,
    line: AccessLine<Arc<RouteState>>,
    ended: bool,
}

impl hyper::body::Body for LoggedStream {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        if let Poll::Ready(None) = polled {
            self.ended = true;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl Drop for LoggedStream {
    fn drop(&mut self) {
        let ended = self.ended || self.body.is_end_stream();
        self.line.write(if ended { "ok" } else { "aborted" });
    }
}

type Refusal = (&'static str, Option<Id>, GatewayError);

/// A client whose `Accept` names `text/event-stream` before `application/json`
/// gets its answers as SSE even when one JSON message is all there is (the
/// usual order, JSON first, gets JSON: no framing cost for most clients).
fn prefers_sse(headers: &HeaderMap) -> bool {
    let Some(accept) = headers
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let first = accept
        .split(',')
        .map(|m| m.split(';').next().unwrap_or("").trim())
        .find(|m| *m == "text/event-stream" || *m == "application/json");
    first == Some("text/event-stream")
}

/// Phase 1: header limits (431) and `Origin` (403), before anything is read.
fn edge(cx: &Cx<'_>) -> Result<(), Refusal> {
    let config = &cx.state.config;
    junction_policy::check_header_limits(
        cx.headers,
        config.limits.max_header_count,
        config.limits.max_header_bytes,
    )
    .map_err(|e| ("other", None, GatewayError::HeadersTooLarge(e.to_string())))?;
    // Bodies are never decompressed: no decompression bomb can reach the parser.
    if let Some(enc) = cx.header("content-encoding") {
        if !enc.eq_ignore_ascii_case("identity") {
            return Err((
                "other",
                None,
                GatewayError::UnsupportedEncoding(enc.to_owned()),
            ));
        }
    }
    junction_policy::check_origin(
        cx.headers,
        &config.server.public_url,
        &config.headers.allowed_origins,
    )
    .map_err(|e| ("other", None, GatewayError::OriginForbidden(e.to_string())))
}

/// Phase 2: the bearer token, when `auth` is configured (before the body is read,
/// so an anonymous client cannot make Junction parse anything).
async fn authenticate(cx: &mut Cx<'_>, query: Option<&str>) -> Result<(), Refusal> {
    let Some(auth) = cx.state.auth.as_ref() else {
        return Ok(());
    };
    let header = cx
        .headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    match auth
        .authenticator
        .authenticate(header, query, &cx.route.path)
        .await
    {
        Ok(p) => {
            cx.principal = p.digest.clone();
            cx.identity = Some(p);
            Ok(())
        }
        Err(e) => {
            cx.state
                .metrics
                .auth_failures_total
                .with_label_values(&[e.reason()])
                .inc();
            let challenge = auth.authenticator.challenge(&cx.route.path, &e);
            let err = if matches!(e, junction_policy::AuthError::JwksUnavailable) {
                GatewayError::AuthUnavailable { challenge }
            } else {
                GatewayError::Unauthenticated {
                    reason: e.reason(),
                    challenge,
                }
            };
            Err(("other", None, err))
        }
    }
}

async fn edge_and_dispatch(
    cx: &Cx<'_>,
    method: &Method,
    body: Incoming,
) -> Result<(&'static str, Response<Body>), Refusal> {
    let config = &cx.state.config;
    if method == Method::DELETE {
        let _ = cx.method.set("delete");
        return legacy::delete_session(cx)
            .map(|r| ("delete", r))
            .map_err(|e| ("delete", None, e));
    }
    if method == Method::GET {
        let _ = cx.method.set("get");
        return crate::listen::legacy_get(cx)
            .await
            .map(|r| ("get", r))
            .map_err(|e| ("get", None, e));
    }
    if method != Method::POST {
        return Err((
            "other",
            None,
            GatewayError::MethodNotAllowed(method.to_string()),
        ));
    }
    let bytes = tokio::time::timeout(
        config.limits.body_read_timeout,
        read_body(body, config.limits.max_body_bytes),
    )
    .await
    .map_err(|_| ("other", None, GatewayError::BodyTimeout))?
    .map_err(|e| ("other", None, e))?;
    let message = match parse_client_message(&bytes) {
        Ok(m) => m,
        // Not a request: maybe a handshake-era client answering a server request
        // Junction sent it (bridge). Only looked at here, off the request path.
        Err(e) => match crate::bridge::client_response(cx, &bytes) {
            Some(answer) => {
                return answer
                    .map(|r| ("response", r))
                    .map_err(|e| ("response", None, e))
            }
            None => return Err(("other", None, GatewayError::Malformed(e))),
        },
    };

    let (id, method, params) = match message {
        ClientMessage::Notification { method, params } => {
            // No notification needs an answer: the handshake era's `initialized`
            // is accepted, its `cancelled` ends the call it names; modern HTTP
            // defines none (closing the stream is its cancellation).
            if method == "notifications/cancelled" {
                legacy::cancelled(cx, params.as_ref());
            }
            tracing::debug!(%method, "notification accepted");
            return Ok(("notification", response::empty(StatusCode::ACCEPTED)));
        }
        ClientMessage::Request { id, method, params } => (id, method, params),
    };
    let label = method_label(&method);
    let _ = cx.method.set(label);
    if !limited_once_routed(&method) {
        crate::tools::rate_limit(cx, &method, "", "")
            .await
            .map_err(|e| (label, Some(id.clone()), e))?;
    }
    let result = if is_legacy_request(cx, &method) {
        legacy::dispatch(cx, &id, &method, params).await
    } else {
        modern::dispatch(cx, &id, &method, params).await
    };
    result.map(|r| (label, r)).map_err(|e| (label, Some(id), e))
}

/// Methods whose rate limit runs once their target is known (after
/// authorization, with its upstream and tool, prompt or URI), so a rule
/// counts them once, not twice.
fn limited_once_routed(method: &str) -> bool {
    matches!(
        method,
        "tools/call" | "prompts/get" | "resources/read" | "completion/complete"
    )
}

/// Handshake era when the client says so: `initialize`, a session id, or a
/// handshake-era `MCP-Protocol-Version`. Everything else must be a valid modern
/// request (and gets the modern errors when it is not).
fn is_legacy_request(cx: &Cx<'_>, method: &str) -> bool {
    match cx.header(names::MCP_PROTOCOL_VERSION) {
        // A modern header means a modern request, even for `initialize` (which
        // then gets the modern 404 + -32601: the method was removed).
        Some(v) if v == version::MODERN => false,
        Some(v) if version::is_legacy(v) => true,
        _ => method == "initialize" || cx.headers.contains_key(names::MCP_SESSION_ID),
    }
}

async fn read_body(body: Incoming, max: usize) -> Result<Bytes, GatewayError> {
    match Limited::new(body, max).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e)
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            Err(GatewayError::BodyTooLarge { max: max as u64 })
        }
        Err(e) => Err(GatewayError::Malformed(
            junction_protocol::jsonrpc::RpcError::new(
                junction_protocol::codes::INVALID_REQUEST,
                format!("could not read the request body: {e}"),
            ),
        )),
    }
}

/// Bounded metric label for a method name.
pub fn method_label(method: &str) -> &'static str {
    METHOD_LABELS
        .iter()
        .find(|l| **l == method)
        .copied()
        .unwrap_or("other")
}

/// The methods that are their own `method` label; any other is `other`.
pub const METHOD_LABELS: [&str; 13] = [
    "initialize",
    "ping",
    "server/discover",
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "subscriptions/listen",
    "completion/complete",
    "logging/setLevel",
];

/// A string member of params: absent is Ok(None), any other type is an error.
/// Borrowed from the params' text unless it has escapes to decode.
pub fn param_str<'a>(
    params: Option<&'a RawParams>,
    key: &str,
) -> Result<Option<Cow<'a, str>>, GatewayError> {
    let Some(raw) = params.and_then(|p| p.get(key)) else {
        return Ok(None);
    };
    junction_protocol::jsonrpc::raw_str(raw)
        .map(Some)
        .ok_or_else(|| GatewayError::InvalidParams(format!("params.{key} must be a string")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn param_str_borrows_plain_strings_and_decodes_escaped_ones() {
        let params: RawParams = serde_json::from_str(
            r#"{"plain":"get_weather","escaped":"caf\u00e9 \"x\"","num":1,"null":null}"#,
        )
        .unwrap_or_default();
        let plain = param_str(Some(&params), "plain");
        assert!(matches!(plain, Ok(Some(Cow::Borrowed("get_weather")))));
        let escaped = param_str(Some(&params), "escaped");
        assert!(matches!(escaped, Ok(Some(Cow::Owned(ref s))) if s == "café \"x\""));
        assert!(matches!(param_str(Some(&params), "absent"), Ok(None)));
        assert!(matches!(param_str(None, "plain"), Ok(None)));
        for bad in ["num", "null"] {
            assert!(
                matches!(
                    param_str(Some(&params), bad),
                    Err(GatewayError::InvalidParams(_))
                ),
                "{bad}"
            );
        }
    }
}
