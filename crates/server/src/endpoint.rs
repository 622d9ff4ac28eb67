//! The MCP endpoint of a route: one request pipeline, in phases, read top
//! down in [`handled`] and [`phases`] (pingora's phase chart is the model):
//!
//! 1. edge: header limits (431), content encoding (415), `Origin` (403)
//! 2. authenticate: the bearer token, before any body is read (401)
//! 3. parse: one JSON-RPC message (413, 408, -32700/-32600); notifications and
//!    a client's answers to server requests end here
//! 4. era and session: modern `_meta` and mirrored headers, or the sealed
//!    handshake-era session (`era`)
//! 5. resolve target: the tool, prompt, resource or completion ref (`resolve`)
//! 6. admit: authorization and rate limits, for every method (`admit`)
//! 7. forward: the method's handler from the one table (`methods`)
//! 8. render: any error of any phase through `GatewayError::render`
//!    (`response::error`), the one mapping
//! 9. account: `junction_requests_total`, its duration, the access line
//!    (`context::AccessLine`; a streamed answer's when the stream ends)

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::{HeaderValue, Method, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Body as _;

use crate::h1::RequestBody;
use junction_protocol::jsonrpc::{parse_client_message, ClientMessage, Id};
use junction_upstream::body::ReadError;

use crate::context::{self, AccessLine, Cx, LoggedStream};
use crate::error::GatewayError;
use crate::methods::{self, Request, METHODS};
use crate::resolve::Route;
use crate::response::{self, Body};
use crate::state::METHOD_SLOTS;
use crate::state::{RouteState, State};
use crate::{admit, audit, bridge, era, fleet, relay, resolve};

/// Labels of the endpoint's ways in that are not methods of the table; each
/// has the slot after the table's (`RouteState::ok_series`).
const OTHER_LABELS: [&str; 5] = ["delete", "get", "notification", "response", "other"];
const _: () = assert!(METHODS.len() + OTHER_LABELS.len() <= METHOD_SLOTS && METHOD_SLOTS <= 256);

/// A request's method label, as its slot in `RouteState::ok_series`: the
/// method's row in the table, or after them one of `OTHER_LABELS`.
#[derive(Clone, Copy)]
struct Label(u8);

impl Label {
    fn method(row: usize) -> Label {
        Label(row as u8)
    }

    fn other(name: &'static str) -> Label {
        let at = OTHER_LABELS.iter().position(|l| *l == name).unwrap_or(4);
        Label((METHODS.len() + at) as u8)
    }

    fn slot(self) -> usize {
        usize::from(self.0)
    }

    fn name(self) -> &'static str {
        match METHODS.get(self.slot()) {
            Some(m) => m.name,
            None => OTHER_LABELS[(self.slot() - METHODS.len()).min(OTHER_LABELS.len() - 1)],
        }
    }
}

/// The client connection a request came on.
#[derive(Clone, Copy)]
pub struct Client<'a> {
    pub peer: std::net::SocketAddr,
    /// The bearer token it presented last (`junction_policy::LastToken`).
    pub last_token: &'a junction_policy::LastToken,
}

/// Serves one request on an MCP route. Takes the request's parts, not the
/// request, and is a function returning an `async` block, not an `async fn`:
/// an `async fn` keeps its arguments twice in its state (the captured request
/// and what it is split into), and this future is part of the one allocated
/// and copied whole per request (`listener::REQUEST_FUTURE_LIMIT`).
pub fn handle<'a>(
    state: &'a Arc<State>,
    route: &'a Arc<RouteState>,
    parts: http::request::Parts,
    body: RequestBody,
    client: Client<'a>,
) -> impl Future<Output = Response<Body>> + Send + 'a {
    let started = Instant::now();
    async move {
        match junction_telemetry::otel::tracer() {
            None => handled(state, route, &parts, body, client, started).await,
            // Boxed: only a traced request pays for the span and its context.
            Some(tracer) => {
                Box::pin(traced(tracer, state, route, &parts, body, client, started)).await
            }
        }
    }
}

/// `handled` inside the request's server span (`tracing` on): the client's
/// trace continued, the span current while the phases run, so the upstream
/// spans of `forward` and the list fan-outs are its children.
async fn traced(
    tracer: &'static junction_telemetry::otel::Tracer,
    state: &Arc<State>,
    route: &Arc<RouteState>,
    parts: &http::request::Parts,
    body: RequestBody,
    client: Client<'_>,
    started: Instant,
) -> Response<Body> {
    use opentelemetry::trace::{FutureExt, SpanKind, TraceContextExt, Tracer};
    let parent = junction_telemetry::otel::extract(&parts.headers);
    // Named when it is recorded (`annotate`): a dropped span costs no name.
    let span = tracer
        .span_builder("MCP")
        .with_kind(SpanKind::Server)
        .start_with_context(tracer, &parent);
    let cx = parent.with_span(span);
    let response = handled(state, route, parts, body, client, started)
        .with_context(cx.clone())
        .await;
    cx.span().end();
    response
}

async fn handled(
    state: &Arc<State>,
    route: &Arc<RouteState>,
    parts: &http::request::Parts,
    body: RequestBody,
    client: Client<'_>,
    started: Instant,
) -> Response<Body> {
    state.replica.hub.attach(state);
    let mut cx = Cx::new(state, route, &parts.headers);
    cx.peer_ip = Some(client.peer.ip());
    cx.access_log = state.config.log.access && junction_telemetry::access_log().is_some();
    cx.unanswered = Some(started);
    cx.traced = junction_telemetry::otel::tracer().is_some();
    if state.config.fleet.advertise_url.is_some() {
        cx.hop = cx
            .header(fleet::HOP_HEADER)
            .and_then(|t| fleet::open_hop(&state.sealer, t));
    }
    let outcome = match edge(&cx) {
        Err(e) => Err(e),
        Ok(()) => match authenticate(&mut cx, parts.uri.query(), client.last_token).await {
            Err(e) => Err(e),
            Ok(()) => phases(&cx, &parts.method, body).await,
        },
    };
    // Answered: from here on the response exists (`Cx::drop`).
    cx.unanswered = None;
    let mut refusal = None;
    let (label, response) = match outcome {
        Ok((label, r)) if prefers_sse(cx.known.accept) => (label, response::as_sse(r).await),
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
                .with_label_values(&[&route.path, label.name(), outcome]),
            m.request_duration_seconds
                .with_label_values(&[&route.path, label.name()]),
        )
    };
    if let Some(ok) = route.ok_series.get(label.slot()) {
        ok.observe(outcome == "ok", secs, series);
    }
    if cx.traced {
        annotate(&cx, label, response.status().as_u16(), refusal, outcome);
    }
    if !cx.access_log {
        return response;
    }
    let line = AccessLine {
        route: &**route,
        method: label.name(),
        client: cx.client_ip(),
        routed: cx.routed.take(),
        status: response.status().as_u16(),
        error: refusal,
        principal: cx.identity.take(),
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

type Refusal = (Label, Option<Id>, GatewayError);

/// A client whose `Accept` names `text/event-stream` before `application/json`
/// gets its answers as SSE even when one JSON message is all there is (the
/// usual order, JSON first, gets JSON: no framing cost for most clients).
fn prefers_sse(accept: Option<&HeaderValue>) -> bool {
    let Some(accept) = context::text(accept) else {
        return false;
    };
    // Bytes, not `str::split(char)`: its searcher costs more than this
    // header is long (a header value as text is visible ASCII).
    let first = accept
        .as_bytes()
        .split(|&b| b == b',')
        .map(|m| {
            m.split(|&b| b == b';')
                .next()
                .unwrap_or_default()
                .trim_ascii()
        })
        .find(|m| *m == b"text/event-stream" || *m == b"application/json");
    first == Some(b"text/event-stream")
}

/// The request's server span gets what its access line says.
fn annotate(cx: &Cx<'_>, label: Label, status: u16, refusal: Option<i64>, outcome: &'static str) {
    use opentelemetry::trace::{Status, TraceContextExt};
    use opentelemetry::KeyValue;
    let otel = opentelemetry::Context::current();
    let span = otel.span();
    if !span.is_recording() {
        return;
    }
    span.update_name(format!("MCP {}", cx.route.path));
    let mut attributes = vec![
        KeyValue::new("mcp.route", cx.route.path.clone()),
        KeyValue::new("mcp.method.name", label.name()),
        KeyValue::new("http.response.status_code", i64::from(status)),
        KeyValue::new("junction.outcome", outcome),
    ];
    if let Some((upstream, target)) = cx.routed.get().map(context::Routed::names) {
        attributes.push(KeyValue::new("junction.upstream", upstream.to_owned()));
        attributes.push(KeyValue::new("junction.target", target.to_owned()));
    }
    if let Some(sub) = cx.identity.as_ref().map(|p| p.subject.clone()) {
        attributes.push(KeyValue::new("enduser.id", sub));
    }
    if let Some(code) = refusal {
        attributes.push(KeyValue::new("junction.error_code", code));
        span.set_status(Status::error(format!("refused with {code}")));
    }
    span.set_attributes(attributes);
}

/// A refusal before the request's method is known.
fn refused(e: GatewayError) -> Refusal {
    (Label::other("other"), None, e)
}

/// Phase 1: header limits (431) and `Origin` (403), before anything is read.
fn edge(cx: &Cx<'_>) -> Result<(), Refusal> {
    let config = &cx.state.config;
    junction_policy::check_header_limits(
        cx.headers,
        config.limits.max_header_count,
        config.limits.max_header_bytes,
    )
    .map_err(|e| refused(GatewayError::HeadersTooLarge(e.to_string())))?;
    // Bodies are never decompressed: no decompression bomb can reach the parser.
    if let Some(enc) = context::text(cx.known.content_encoding) {
        if !enc.eq_ignore_ascii_case("identity") {
            return Err(refused(GatewayError::UnsupportedEncoding(enc.to_owned())));
        }
    }
    junction_policy::check_origin(
        cx.known.origin,
        &config.server.public_url,
        &config.headers.allowed_origins,
    )
    .map_err(|e| refused(GatewayError::OriginForbidden(e.to_string())))
}

/// Phase 2: the bearer token, when `auth` is configured (before the body is read,
/// so an anonymous client cannot make Junction parse anything).
async fn authenticate(
    cx: &mut Cx<'_>,
    query: Option<&str>,
    last: &junction_policy::LastToken,
) -> Result<(), Refusal> {
    let Some(auth) = cx.state.auth.as_ref() else {
        return Ok(());
    };
    match auth
        .authenticator
        .authenticate_field(Some(last), cx.known.authorization, query, &cx.route.path)
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
            Err(refused(err))
        }
    }
}

/// Phases 3 to 7, once the caller is known.
async fn phases(
    cx: &Cx<'_>,
    method: &Method,
    body: RequestBody,
) -> Result<(Label, Response<Body>), Refusal> {
    // DELETE ends a handshake-era session; GET opens its stream.
    if method == Method::DELETE {
        let label = Label::other("delete");
        let _ = cx.method.set(label.name());
        return methods::delete_session(cx)
            .map(|r| (label, r))
            .map_err(|e| (label, None, e));
    }
    if method == Method::GET {
        let label = Label::other("get");
        let _ = cx.method.set(label.name());
        return methods::legacy_get(cx)
            .await
            .map(|r| (label, r))
            .map_err(|e| (label, None, e));
    }
    if method != Method::POST {
        return Err(refused(GatewayError::MethodNotAllowed(method.to_string())));
    }

    // 3. parse
    let config = &cx.state.config;
    let bytes = tokio::time::timeout(
        config.limits.body_read_timeout,
        read_body(body, config.limits.max_body_bytes),
    )
    .await
    .map_err(|_| refused(GatewayError::BodyTimeout))?
    .map_err(refused)?;
    if config.fleet.advertise_url.is_some() {
        let _ = cx.body.set(bytes.clone());
    }
    let (id, method, params) = match parse_client_message(&bytes) {
        Ok(ClientMessage::Request { id, method, params }) => (id, method, params),
        Ok(ClientMessage::Notification { method, params }) => {
            // No notification needs an answer: the handshake era's `initialized`
            // is accepted, its `cancelled` ends the call it names; modern HTTP
            // defines none (closing the stream is its cancellation).
            if method == "notifications/cancelled" {
                methods::cancelled(cx, params.as_ref());
            }
            tracing::debug!(%method, "notification accepted");
            let label = Label::other("notification");
            return Ok((label, response::empty(StatusCode::ACCEPTED)));
        }
        // Not a message of the client's own: maybe a handshake-era client
        // answering a server request Junction sent it (bridge). Only looked
        // at here, off the request path.
        Err(e) => {
            let label = Label::other("response");
            let answer = match bridge::client_response(cx, &bytes) {
                None => return Err(refused(GatewayError::Malformed(e))),
                Some(bridge::Reply::Done(answer)) => answer,
                // Asked by another replica: the answer goes there (rare).
                Some(bridge::Reply::Relay(owner)) => Box::pin(relay::to_owner(cx, &owner)).await,
            };
            return answer.map(|r| (label, r)).map_err(|e| (label, None, e));
        }
    };
    let row = methods::find(&method);
    let label = row.map_or_else(|| Label::other("other"), |(slot, _)| Label::method(slot));
    let _ = cx.method.set(label.name());
    let fail = |e| (label, Some(id.clone()), e);

    // 4. era and session
    let modern = !era::is_legacy_request(cx, &method);
    let client = if modern {
        era::modern(
            cx,
            &method,
            row.and_then(|(_, m)| m.mirrored),
            params.as_ref(),
        )
    } else {
        era::legacy(cx, &method)
    }
    .map_err(fail)?;
    let row = row.map(|(_, m)| m).filter(|m| m.serves(modern));

    // 5. resolve target
    let route = row.map_or(Route::None, |m| m.route);
    let target = resolve::target(cx, route, &method, params.as_ref(), &client)
        .await
        .map_err(fail)?;
    cx.note_target(&target);

    // 6. admit
    admit::admit(cx, &method, &target)
        .await
        .map_err(|e| audit::refused(cx, &id, &target, params.as_ref(), e))
        .map_err(fail)?;

    // 7. forward: the method's handler
    let Some(row) = row else {
        return Err(fail(if modern {
            GatewayError::MethodNotFound(method.into_owned())
        } else {
            GatewayError::LegacyMethodNotFound(method.into_owned())
        }));
    };
    let request = Request {
        params,
        client,
        target,
    };
    // Gated: polled only when what it waits on woke it, not each time the
    // connection's task is (`inline_wake::gated`).
    match crate::inline_wake::gated((row.handler)(cx, &id, request)).await {
        Ok(r) => Ok((label, r)),
        Err(e) => Err((label, Some(id), e)),
    }
}

async fn read_body(body: RequestBody, max: usize) -> Result<Bytes, GatewayError> {
    junction_upstream::body::read_whole(body, max)
        .await
        .map_err(|e| match e {
            ReadError::TooLarge => GatewayError::BodyTooLarge { max: max as u64 },
            ReadError::Broken(e) => {
                GatewayError::Malformed(junction_protocol::jsonrpc::RpcError::new(
                    junction_protocol::codes::INVALID_REQUEST,
                    format!("could not read the request body: {e}"),
                ))
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_is_preferred_only_when_named_before_json() {
        let prefers = |v: &'static str| prefers_sse(Some(&HeaderValue::from_static(v)));
        assert!(prefers("text/event-stream, application/json"));
        assert!(prefers(" text/event-stream ;q=0.9 ,application/json"));
        assert!(prefers("text/html,text/event-stream"));
        assert!(!prefers("application/json, text/event-stream"));
        assert!(!prefers("application/json;q=1,text/event-stream"));
        assert!(!prefers("text/event-streams, application/json"));
        assert!(!prefers("*/*"));
        assert!(!prefers_sse(None));
    }
}
