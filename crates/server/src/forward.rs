//! The pipeline's forward phase: one request sent to the upstream that owns
//! its target, and its answer relayed. `tools/call`, `prompts/get` and
//! `resources/read` all go through [`forward`]: params renamed for the
//! upstream by their handler, `_meta` re-stated by the upstream client, the
//! client's `requestState` unwrapped from Junction's envelope, MRTR and server
//! requests bridged (`bridge`), the outcome counted once (`record`).

use std::borrow::Cow;
use std::sync::Arc;

use http::Response;
use junction_protocol::jsonrpc::{Id, RawParams, RpcError};
use junction_upstream::{UpstreamEvent, UpstreamRequest};
use serde_json::value::RawValue;

use crate::audit;
use crate::bridge::{self, Finisher};
use crate::context::{ClientSide, Cx, Target};
use crate::envelope;
use crate::error::GatewayError;
use crate::guardrail::{ResultCheck, Verdict};
use crate::identity;
use crate::record::{Answer, Record, UpstreamSpan};
use crate::response::Body;
use crate::state::UpstreamEntry;
use crate::tasks::Shape;

/// One request on its way upstream, as its method's handler prepared it.
pub struct Outbound<'a> {
    pub method: &'static str,
    /// Params for the upstream: renamed (tool, prompt, URI) but still with
    /// `_meta` and Junction's sealed `requestState`.
    pub params: RawParams<'a>,
    /// `Mcp-Param-*` headers of a tool call to an HTTP upstream.
    pub param_headers: Vec<(String, String)>,
    /// Counts the outcome once (the tool-call series, or the upstream's).
    pub record: Record,
    /// Progress and log notifications go to the client (`tools/call`).
    pub relay_notifications: bool,
    /// Applied to a finished result (cache hints of `resources/read`).
    pub on_result: Option<fn(Box<RawValue>) -> Box<RawValue>>,
    /// The route's guardrail result phase, for an answer that streams
    /// (`tools/call` and `tasks/result` on a route that checks results; a
    /// whole answer is checked with [`check_whole`]).
    pub check: Option<Arc<ResultCheck>>,
    /// An upstream `-32601` means this unknown-name error (prompts,
    /// resources: Junction serves the method, so an upstream that does not
    /// has no such prompt or resource).
    pub unknown_name: Option<String>,
    /// Whether the client may be handed a task (`tools/call` only).
    pub tasks: Shape,
}

/// Forwards `out` to `upstream` and relays the final answer: results through
/// the `Finisher`, upstream errors unchanged. `target` is what a requestState
/// envelope is bound to (the exposed name or the URI the client named).
pub async fn forward(
    cx: &Cx<'_>,
    id: &Id,
    client: &ClientSide,
    upstream: &UpstreamEntry,
    target: &str,
    out: Outbound<'_>,
) -> Result<Response<Body>, GatewayError> {
    let Outbound {
        method,
        params,
        param_headers,
        record,
        relay_notifications,
        on_result,
        check,
        unknown_name,
        tasks,
    } = out;
    let modern = client.is_modern();
    let driver = bridge::Driver {
        stream: None,
        id: id.clone(),
        finish: Finisher {
            modern,
            sealer: cx.state.sealer.clone(),
            principal: cx.principal.clone(),
            upstream: upstream.id.clone(),
            target: target.to_owned(),
            ttl_ms: cx.state.config.request_state.ttl.as_millis() as u64,
            tasks,
            owner: match tasks {
                Shape::None => None,
                _ => cx.state.replica.advertise.load_full(),
            },
        },
        method,
        caps: client.capabilities().to_owned(),
        sse_ok: cx.accepts_sse(),
        relay_notifications,
        log: client.log_filter(),
        cancel: client.cancellable(cx, id).map(Box::new),
        on_result,
        check,
        unknown_name,
        retry: None,
        stash: None,
        rounds: 0,
        replica: cx.state.replica.clone(),
    };
    let open = cx.state.metrics.open_call_streams().clone();
    let (mut driver, mut record) = match bridge::start(cx, &params, driver, &open, record) {
        Ok(fresh) => fresh,
        Err(held) => match held.await {
            Ok(fresh) => fresh,
            Err(done) => return done,
        },
    };
    let meta = client.upstream_meta(&params);
    let params = upstream_params(cx, params, &upstream.id, target)?;
    // Only upstreams that take the caller's identity make this wait.
    let authorization = match &upstream.credentials {
        None => None,
        Some(_) => Box::pin(identity::authorization(cx, upstream)).await?,
    };
    let mut request = UpstreamRequest {
        param_headers,
        authorization,
        ..client.upstream_request(cx, method, params, meta)
    };
    if tasks == Shape::Legacy {
        // A handshake-era client asked for a task: a modern upstream creates
        // one only for a client that declares the extension, and only on the
        // modern wire (not a dual-era upstream's handshake-era side session).
        if let Some(caps) = &request.client_capabilities {
            request.client_capabilities = Some(Cow::Owned(crate::tasks::declaring(caps)));
        }
        if matches!(
            upstream.client.known_era(),
            Some(junction_upstream::Era::Modern)
        ) {
            request.handshake_client = false;
        }
    }
    let span = UpstreamSpan::start(&upstream.id, method);
    if let Some(span) = &span {
        carry_trace(&mut request, span);
    }
    if !modern {
        driver.retry = Some(Box::new(bridge::Retry {
            client: upstream.client.clone(),
            request: bridge::copy_request(&request),
        }));
    }
    record.arm();
    match upstream.client.request(request).await {
        Ok(s) => driver.stream = Some(s),
        Err(e) => {
            let e = GatewayError::from_upstream(&upstream.id, e);
            record.record_answer(e.outcome(), Answer::Failed(&e));
            if method == "tools/call" {
                let up = i64::from(upstream.client.is_healthy());
                cx.state
                    .metrics
                    .upstream_up
                    .with_label_values(&[&upstream.id])
                    .set(up);
            }
            if let Some(span) = span {
                span.end(e.outcome());
            }
            return Err(e);
        }
    }
    let answered = bridge::respond(driver, open, record).await;
    if let Some(span) = span {
        // A streamed answer's span ends when its stream starts.
        span.end(
            answered
                .as_ref()
                .map_or_else(GatewayError::outcome, |_| "ok"),
        );
    }
    answered
}

/// The route's guardrail result phase on a whole JSON answer of
/// [`forward`]: allowed as it is, rewritten, or refused. A streamed answer
/// was checked by the driver before its result was written
/// ([`Outbound::check`]); an upstream's JSON-RPC error passes unchecked, and
/// a created task is checked when its result is read.
pub async fn check_whole(
    id: &Id,
    check: &ResultCheck,
    response: Response<Body>,
) -> Result<Response<Body>, GatewayError> {
    use http_body_util::BodyExt;
    #[derive(serde::Deserialize)]
    struct Answered {
        result: Option<Box<RawValue>>,
    }
    let is_json = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes() == b"application/json");
    if !is_json {
        return Ok(response);
    }
    let (parts, body) = response.into_parts();
    // A JSON answer is always whole (`Full`): collecting it cannot wait.
    let bytes = match body.collect().await {
        Ok(c) => c.to_bytes(),
        Err(never) => match never {},
    };
    let result = serde_json::from_slice::<Answered>(&bytes)
        .ok()
        .and_then(|a| a.result);
    // A call answered with a task: its result is checked when the client
    // reads it (`methods::tasks`).
    let Some(result) = result.filter(|r| !crate::tasks::is_created(r)) else {
        return Ok(Response::from_parts(parts, crate::response::full(bytes)));
    };
    match check.result(&result).await? {
        Verdict::Allow => Ok(Response::from_parts(parts, crate::response::full(bytes))),
        Verdict::Rewrite(new) => Ok(crate::response::json(
            http::StatusCode::OK,
            junction_protocol::jsonrpc::result_bytes(id, &new),
        )),
    }
}

/// The upstream request continues the trace of `span`: `traceparent` (and
/// `tracestate`) as headers and in `_meta`, replacing the client's own.
pub fn carry_trace(request: &mut UpstreamRequest<'_>, span: &UpstreamSpan) {
    let Some((parent, state)) = span.context() else {
        return;
    };
    let trace_key =
        |k: &str| k.eq_ignore_ascii_case("traceparent") || k.eq_ignore_ascii_case("tracestate");
    request.forward_headers.retain(|(k, _)| !trace_key(k));
    request.meta.retain(|(k, _)| !trace_key(k));
    for (key, value) in [("traceparent", Some(parent)), ("tracestate", state)] {
        let Some(value) = value else { continue };
        if let Ok(raw) = serde_json::value::to_raw_value(&value) {
            request.meta.push((key.to_owned(), raw));
        }
        request.forward_headers.push((key.to_owned(), value));
    }
}

/// `prompts/get` and `resources/read`: `params` (renamed for the upstream)
/// forwarded to the upstream of `target` (the prompt or resource the resolve
/// phase found), counted in its request series and, while auditing is on,
/// written to the audit log. Progress and log notifications are not relayed
/// on these methods (yet): the client gets the final answer. Junction serves
/// both methods, so an upstream that answers -32601 has no such prompt or
/// resource: the client's unknown-name error.
pub async fn forward_named(
    cx: &Cx<'_>,
    id: &Id,
    client: &ClientSide,
    (method, kind): (&'static str, &str),
    target: &Target,
    params: RawParams<'_>,
    on_result: Option<fn(Box<RawValue>) -> Box<RawValue>>,
) -> Result<Response<Body>, GatewayError> {
    let Some((upstream, name)) = target.routed() else {
        return Err(GatewayError::InvalidParams(format!(
            "{method} names no {kind}"
        )));
    };
    let entry = cx.state.upstreams.get(upstream).ok_or_else(|| {
        GatewayError::InvalidParams(format!("{name:?} belongs to no upstream of this route"))
    })?;
    let audit = audit::start_for(cx, id, target, &params);
    let count = crate::record::upstream_count(&cx.state.metrics, upstream, method);
    let record = audit::recorder(count, audit.clone());
    let out = Outbound {
        method,
        params,
        param_headers: Vec::new(),
        record,
        relay_notifications: false,
        on_result,
        check: None,
        unknown_name: Some(format!(
            "unknown {kind}: {name} (upstream {upstream} serves no {method})"
        )),
        tasks: Shape::None,
    };
    let answered = forward(cx, id, client, entry, name, out).await;
    if let (Some(call), Err(e)) = (&audit, &answered) {
        // Refused on its way upstream before its recorder counted anything.
        call.failed(e);
    }
    answered
}

/// The final answer of one request whose notifications nobody needs: the raw
/// result, or the upstream's JSON-RPC error as it sent it.
pub async fn answer_of(
    u: &UpstreamEntry,
    req: UpstreamRequest<'_>,
) -> Result<Result<Box<RawValue>, RpcError>, GatewayError> {
    let method = req.method.clone();
    let mut stream = u
        .client
        .request(req)
        .await
        .map_err(|e| GatewayError::from_upstream(&u.id, e))?;
    while let Some(event) = stream.next().await {
        match event.map_err(|e| GatewayError::from_upstream(&u.id, e))? {
            UpstreamEvent::Notification(_) => continue,
            UpstreamEvent::Result(raw) => return Ok(Ok(raw)),
            UpstreamEvent::Error(e) => return Ok(Err(e)),
        }
    }
    Err(GatewayError::UpstreamProtocol {
        upstream: u.id.clone(),
        detail: format!("{method} ended without a result"),
    })
}

/// `value` as raw JSON for a param Junction rewrites before forwarding (the
/// upstream's own name of a prompt, a URI, a completion `ref`).
pub fn raw_param(value: &impl serde::Serialize) -> Result<Cow<'static, RawValue>, GatewayError> {
    serde_json::value::to_raw_value(value)
        .map(Cow::Owned)
        .map_err(|e| GatewayError::Unsupported(e.to_string()))
}

/// Params for the upstream, changed in place (no member is copied): `_meta`
/// left out (the upstream client re-states it) and the client's own
/// `requestState` unwrapped from Junction's envelope, which must be bound to
/// `upstream_id` and `target`; everything else byte for byte.
fn upstream_params<'p>(
    cx: &Cx<'_>,
    mut params: RawParams<'p>,
    upstream_id: &str,
    target: &str,
) -> Result<RawParams<'p>, GatewayError> {
    params.remove("_meta");
    if let Some(v) = params.get_mut("requestState") {
        let token: String = serde_json::from_str(v.get())
            .map_err(|_| GatewayError::InvalidParams("requestState must be a string".into()))?;
        let inner = envelope::unwrap(&cx.state.sealer, &token, &cx.principal, upstream_id, target)
            .map_err(|e| GatewayError::InvalidParams(e.into()))?;
        *v = Cow::Owned(
            RawValue::from_string(inner)
                .map_err(|_| GatewayError::InvalidParams("requestState is invalid".into()))?,
        );
    }
    Ok(params)
}
