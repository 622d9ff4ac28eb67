//! Server requests across protocol eras (NOTES §6, §12.3).
//!
//! - A handshake-era upstream asks (`elicitation/create`, `sampling/createMessage`,
//!   `roots/list`) in the middle of a modern client's call: the upstream stream is
//!   held here (`held`), the client gets an `InputRequiredResult` whose
//!   `requestState` names the held call, and its retry answers the upstream on
//!   the same stream.
//! - A modern upstream answers a handshake-era client with `input_required`:
//!   Junction asks the client with real JSON-RPC requests on the call's SSE
//!   stream, waits for its answers (POSTed responses, `client_response`), and
//!   retries the upstream with `inputResponses` and the upstream's `requestState`.
//!   A handshake-era upstream asking a handshake-era client is relayed the same way.
//!
//! Nothing is asked that the client did not declare: the upstream gets an error
//! instead. Both tables are per process, bounded, expiring, and bound to the
//! caller's principal; a retry that reaches another replica gets "expired".

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use http::{Response, StatusCode};
use junction_protocol::codes;
use junction_protocol::jsonrpc::{self, error_bytes, result_bytes, Id, RawParams, RpcError};
use junction_upstream::{
    Bridged, ResponseStream, ServerRequest, Upstream, UpstreamEvent, UpstreamRequest,
};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::envelope;
use crate::error::GatewayError;
use crate::mcp::Cx;
use crate::response::{self, Body};
use crate::tools::Finisher;

mod held;

pub(crate) use held::client_response;

/// How long Junction waits for further server requests once one arrived, so
/// that requests sent together reach the client in one `InputRequiredResult`.
const COLLECT_GRACE: std::time::Duration = std::time::Duration::from_millis(50);
/// Input rounds of one handshake-era client's call before Junction gives up.
const MAX_ROUNDS: usize = 16;

/// The upstream request again, for the retry after a handshake-era client answered.
pub(crate) struct Retry {
    pub(crate) client: Arc<Upstream>,
    pub(crate) request: UpstreamRequest,
}

/// Reads one upstream call to the message its client gets, bridging server
/// requests on the way. Shared by `tools/call`, `prompts/get`, `resources/read`.
pub(crate) struct Driver {
    pub(crate) stream: Option<ResponseStream>,
    /// The client's JSON-RPC id for this request.
    pub(crate) id: Id,
    pub(crate) finish: Finisher,
    pub(crate) method: String,
    /// The client's capabilities: this request's (modern) or the session's.
    pub(crate) caps: Value,
    pub(crate) sse_ok: bool,
    /// Progress and log notifications go to the client (tools/call).
    pub(crate) relay_notifications: bool,
    /// Applied to a finished result (cache hints of resources/read).
    pub(crate) on_result: Option<fn(Box<RawValue>) -> Box<RawValue>>,
    /// An upstream `-32601` means this unknown-name error (prompts, resources).
    pub(crate) unknown_name: Option<String>,
    /// Set for handshake-era clients (input_required bridging).
    pub(crate) retry: Option<Retry>,
    pub(crate) stash: Option<Stash>,
    pub(crate) rounds: usize,
}

/// What must be asked of a handshake-era client once its SSE stream is open.
pub(crate) enum Stash {
    /// A modern upstream's `input_required` result: keys and requests, and its state.
    InputRequired {
        asks: Vec<(String, String, Option<Box<RawValue>>)>,
        state: Option<Box<RawValue>>,
    },
    /// A handshake-era upstream's own server request.
    Relay(ServerRequest),
}

pub(crate) enum Next {
    Notify(Box<RawValue>),
    /// Open the SSE response, then step again with its sender.
    Switch,
    /// The final JSON-RPC message for the client and the outcome label.
    Done(Result<(Vec<u8>, &'static str), GatewayError>),
}

impl Driver {
    fn upstream(&self) -> &str {
        &self.finish.upstream
    }

    fn broken(&self, detail: &str) -> GatewayError {
        GatewayError::UpstreamProtocol {
            upstream: self.upstream().to_owned(),
            detail: detail.to_owned(),
        }
    }

    pub(crate) async fn step(&mut self, sink: Option<&mpsc::Sender<Bytes>>) -> Next {
        loop {
            if let Some(stash) = self.stash.take() {
                let Some(tx) = sink else {
                    self.stash = Some(stash);
                    return Next::Switch;
                };
                if let Err(done) = self.ask_client(stash, tx).await {
                    return Next::Done(done);
                }
            }
            let Some(stream) = self.stream.as_mut() else {
                return Next::Done(Err(self.broken("call ended without a result")));
            };
            let item = stream.next_bridged().await;
            match item {
                None => return Next::Done(Err(self.broken("response ended without a result"))),
                Some(Err(e)) => {
                    return Next::Done(Err(GatewayError::from_upstream(self.upstream(), e)))
                }
                Some(Ok(Bridged::Event(UpstreamEvent::Notification(n)))) => {
                    if self.relay_notifications && (self.sse_ok || sink.is_some()) {
                        return Next::Notify(n);
                    }
                }
                Some(Ok(Bridged::Event(UpstreamEvent::Error(err)))) => {
                    return Next::Done(self.upstream_error(err))
                }
                Some(Ok(Bridged::Event(UpstreamEvent::Result(raw)))) => {
                    if !self.finish.modern && is_input_required(&raw) {
                        match self.legacy_ask(&raw) {
                            Ok(stash) => self.stash = Some(stash),
                            Err(e) => return Next::Done(Err(e)),
                        }
                        continue;
                    }
                    return Next::Done(self.complete(raw));
                }
                Some(Ok(Bridged::ServerRequest(r))) if self.finish.modern => {
                    if let Some(next) = self.hold_for_modern(r).await {
                        return next;
                    }
                }
                Some(Ok(Bridged::ServerRequest(r))) => {
                    if declared(&self.caps, &r.method, r.params.as_deref()) && self.sse_ok {
                        self.stash = Some(Stash::Relay(r));
                    } else {
                        self.refuse(&r).await;
                    }
                }
            }
        }
    }

    fn complete(&self, raw: Box<RawValue>) -> Result<(Vec<u8>, &'static str), GatewayError> {
        let raw = self.finish.result(raw)?;
        let raw = match self.on_result {
            Some(f) => f(raw),
            None => raw,
        };
        Ok((result_bytes(&self.id, &raw), "ok"))
    }

    fn upstream_error(&self, err: RpcError) -> Result<(Vec<u8>, &'static str), GatewayError> {
        match &self.unknown_name {
            Some(msg) if err.code == codes::METHOD_NOT_FOUND => {
                return Err(GatewayError::InvalidParams(msg.clone()))
            }
            _ => {}
        }
        // A modern upstream checked the capabilities Junction stamped from the
        // session; a handshake-era client does not know the modern code.
        if !self.finish.modern && err.code == codes::MISSING_CLIENT_CAPABILITY {
            let mut missing: Vec<String> = err
                .data
                .as_ref()
                .and_then(|d| d.get("requiredCapabilities"))
                .and_then(Value::as_object)
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default();
            missing.sort();
            return Err(GatewayError::MissingClientCapability {
                detail: format!(
                    "upstream {} needs client capabilities this session did not declare at initialize: {}",
                    self.upstream(),
                    if missing.is_empty() { err.message.clone() } else { missing.join(", ") }
                ),
                missing,
            });
        }
        Ok((error_bytes(Some(&self.id), &err), "upstream_error"))
    }

    /// Tell the upstream its client cannot answer this.
    async fn refuse(&mut self, r: &ServerRequest) {
        let err = RpcError::new(
            codes::METHOD_NOT_FOUND,
            format!(
                "the client of this call did not declare the capability for {}",
                r.method
            ),
        );
        if let Some(stream) = self.stream.as_mut() {
            if let Err(e) = stream.reply(&r.id, Err(err)).await {
                tracing::debug!(upstream = %self.finish.upstream, error = %e, "refusing a server request failed");
            }
        }
    }

    /// Modern client: collect the server requests sent together, refuse what
    /// the client did not declare, hold the call and answer `input_required`.
    /// `None`: nothing to ask, keep reading.
    async fn hold_for_modern(&mut self, first: ServerRequest) -> Option<Next> {
        let mut batch = vec![first];
        let mut after = None;
        while let Some(stream) = self.stream.as_mut() {
            match tokio::time::timeout(COLLECT_GRACE, stream.next_bridged()).await {
                Err(_) => break,
                Ok(Some(Ok(Bridged::ServerRequest(r)))) => batch.push(r),
                Ok(other) => {
                    after = other;
                    break;
                }
            }
        }
        let mut asks = Vec::new();
        for r in batch {
            if declared(&self.caps, &r.method, r.params.as_deref()) {
                asks.push(r);
            } else {
                self.refuse(&r).await;
            }
        }
        match after {
            // Progress sent while asking: it cannot reach a client that is not
            // streaming; the call stays held regardless.
            Some(Ok(Bridged::Event(UpstreamEvent::Notification(_)))) | None => {}
            // The upstream finished without waiting for answers: nothing to ask.
            Some(other) => {
                for r in &asks {
                    self.refuse(r).await;
                }
                return Some(self.finish_with(other));
            }
        }
        if asks.is_empty() {
            return None;
        }
        let stream = self.stream.take()?;
        Some(Next::Done(held::hold(self, stream, held::number(asks))))
    }

    fn finish_with(&mut self, item: Result<Bridged, junction_upstream::UpstreamError>) -> Next {
        self.stream = None;
        Next::Done(match item {
            Err(e) => Err(GatewayError::from_upstream(self.upstream(), e)),
            Ok(Bridged::Event(UpstreamEvent::Error(err))) => self.upstream_error(err),
            Ok(Bridged::Event(UpstreamEvent::Result(raw))) => self.complete(raw),
            Ok(_) => Err(self.broken("stream ended while asking for input")),
        })
    }

    /// Handshake-era client, modern upstream asking: check what the client can
    /// answer before anything is sent.
    fn legacy_ask(&self, raw: &RawValue) -> Result<Stash, GatewayError> {
        let ir: InputRequired = serde_json::from_str(raw.get())
            .map_err(|_| self.broken("bad input_required result"))?;
        let requests = ir.input_requests.unwrap_or_default();
        let mut missing = Vec::new();
        let mut asks = Vec::with_capacity(requests.len());
        for (key, req) in requests {
            if !declared(&self.caps, &req.method, req.params.as_deref()) {
                missing.push(capability_of(&req.method).to_owned());
            }
            asks.push((key, req.method, req.params));
        }
        if !missing.is_empty() {
            missing.sort();
            missing.dedup();
            return Err(GatewayError::MissingClientCapability {
                detail: format!(
                    "upstream {} needs client input this session did not declare at initialize: {}",
                    self.upstream(),
                    missing.join(", ")
                ),
                missing,
            });
        }
        if !self.sse_ok {
            return Err(GatewayError::MissingClientCapability {
                missing: vec!["text/event-stream".into()],
                detail: format!(
                    "upstream {} asks the client for input, which travels on an SSE response: send Accept: text/event-stream",
                    self.upstream()
                ),
            });
        }
        if self.rounds >= MAX_ROUNDS {
            return Err(self.broken("upstream kept asking for input"));
        }
        Ok(Stash::InputRequired {
            asks,
            state: ir.request_state,
        })
    }

    /// Ask a handshake-era client on its SSE stream; then answer the upstream
    /// (relay) or retry it with the answers (`input_required`).
    async fn ask_client(
        &mut self,
        stash: Stash,
        tx: &mpsc::Sender<Bytes>,
    ) -> Result<(), Result<(Vec<u8>, &'static str), GatewayError>> {
        let principal = self.finish.principal.clone();
        match stash {
            Stash::Relay(r) => {
                let answers = held::ask(&principal, tx, vec![(r.method.clone(), r.params)])
                    .await
                    .map_err(Err)?;
                let outcome = answers
                    .into_iter()
                    .next()
                    .unwrap_or_else(|| Err(RpcError::new(codes::INTERNAL_ERROR, "no answer")));
                if let Some(stream) = self.stream.as_mut() {
                    stream
                        .reply(&r.id, outcome)
                        .await
                        .map_err(|e| Err(GatewayError::from_upstream(&self.finish.upstream, e)))?;
                }
                Ok(())
            }
            Stash::InputRequired { asks, state } => {
                self.rounds += 1;
                let questions = asks
                    .iter()
                    .map(|(_, m, p)| (m.clone(), p.clone()))
                    .collect();
                let answers = held::ask(&principal, tx, questions).await.map_err(Err)?;
                let mut responses: Vec<(String, Box<RawValue>)> = Vec::new();
                for ((key, _, _), answer) in asks.into_iter().zip(answers) {
                    match answer {
                        Ok(raw) => responses.push((key, raw)),
                        // The client refused: its error is the call's answer.
                        Err(err) => {
                            return Err(Ok((error_bytes(Some(&self.id), &err), "client_error")))
                        }
                    }
                }
                self.retry_upstream(responses, state).await.map_err(Err)
            }
        }
    }

    async fn retry_upstream(
        &mut self,
        responses: Vec<(String, Box<RawValue>)>,
        state: Option<Box<RawValue>>,
    ) -> Result<(), GatewayError> {
        let Some(retry) = self.retry.as_ref() else {
            return Err(self.broken("cannot retry this call"));
        };
        let mut params = retry.request.params.clone();
        params.remove("requestState");
        let members = responses.iter().map(|(k, v)| (k.as_str(), v.as_ref()));
        params.insert("inputResponses".into(), jsonrpc::raw_object(members));
        if let Some(s) = state {
            params.insert("requestState".into(), s);
        }
        let request = UpstreamRequest {
            method: retry.request.method.clone(),
            params,
            meta: retry.request.meta.clone(),
            client_capabilities: retry.request.client_capabilities.clone(),
            param_headers: retry.request.param_headers.clone(),
            forward_headers: retry.request.forward_headers.clone(),
            timeout: retry.request.timeout,
        };
        self.stream = None;
        let stream = retry
            .client
            .request(request)
            .await
            .map_err(|e| GatewayError::from_upstream(&self.finish.upstream, e))?;
        self.stream = Some(stream);
        Ok(())
    }
}

/// A copy of a request, for retrying it later.
pub(crate) fn copy_request(r: &UpstreamRequest) -> UpstreamRequest {
    UpstreamRequest {
        method: r.method.clone(),
        params: r.params.clone(),
        meta: r.meta.clone(),
        client_capabilities: r.client_capabilities.clone(),
        param_headers: r.param_headers.clone(),
        forward_headers: r.forward_headers.clone(),
        timeout: r.timeout,
    }
}

#[derive(Deserialize)]
struct InputRequired {
    #[serde(rename = "inputRequests", default)]
    input_requests: Option<BTreeMap<String, InputRequest>>,
    #[serde(rename = "requestState", default)]
    request_state: Option<Box<RawValue>>,
}

#[derive(Deserialize)]
struct InputRequest {
    method: String,
    #[serde(default)]
    params: Option<Box<RawValue>>,
}

#[derive(Deserialize)]
struct Head<'a> {
    #[serde(rename = "resultType", borrow, default)]
    result_type: Option<std::borrow::Cow<'a, str>>,
}

fn is_input_required(raw: &RawValue) -> bool {
    serde_json::from_str::<Head<'_>>(raw.get())
        .is_ok_and(|h| h.result_type.as_deref() == Some("input_required"))
}

fn capability_of(method: &str) -> &'static str {
    match method {
        "elicitation/create" => "elicitation",
        "sampling/createMessage" => "sampling",
        "roots/list" => "roots",
        _ => "unknown",
    }
}

/// Whether `caps` (a client's capabilities) covers this request. Elicitation
/// modes: an empty `elicitation` object means form only (NOTES §6).
pub(crate) fn declared(caps: &Value, method: &str, params: Option<&RawValue>) -> bool {
    let present = |key: &str| caps.get(key).is_some_and(|v| !v.is_null());
    match method {
        "sampling/createMessage" => present("sampling"),
        "roots/list" => present("roots"),
        "elicitation/create" => {
            let Some(e) = caps.get("elicitation").filter(|v| v.is_object()) else {
                return false;
            };
            let mode = params
                .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
                .and_then(|p| p.get("mode").and_then(Value::as_str).map(str::to_owned))
                .unwrap_or_else(|| "form".to_owned());
            if e.get("form").is_none() && e.get("url").is_none() {
                mode == "form"
            } else {
                e.get(&mode).is_some()
            }
        }
        _ => false,
    }
}

/// A modern client's retry that answers a held call: `Some` with the driver
/// that continues the upstream call (or the next `input_required`).
pub(crate) enum Resumed {
    NotHeld(Box<Driver>),
    Continue(Box<Driver>),
    Answer(Result<(Vec<u8>, &'static str), GatewayError>),
}

/// If `params.requestState` names a call held here, answer its upstream with
/// the client's `inputResponses` and hand back the driver to read on.
pub(crate) async fn resume(
    cx: &Cx<'_>,
    params: &RawParams,
    template: Driver,
) -> Result<Resumed, GatewayError> {
    let Some(raw) = params.get("requestState") else {
        return Ok(Resumed::NotHeld(Box::new(template)));
    };
    let Ok(token) = serde_json::from_str::<String>(raw.get()) else {
        return Ok(Resumed::NotHeld(Box::new(template)));
    };
    let f = &template.finish;
    let entry = envelope::open_pending(
        &cx.state.sealer,
        &token,
        &cx.principal,
        &f.upstream,
        &f.target,
    )
    .map_err(|e| GatewayError::InvalidParams(e.into()))?;
    let Some(entry) = entry else {
        return Ok(Resumed::NotHeld(Box::new(template)));
    };
    let responses: BTreeMap<String, Box<RawValue>> = match params.get("inputResponses") {
        None => BTreeMap::new(),
        Some(raw) => serde_json::from_str(raw.get())
            .map_err(|_| GatewayError::InvalidParams("inputResponses must be an object".into()))?,
    };
    held::resume(entry, &cx.principal, template, responses).await
}

/// Streams or returns what the driver produces. Output starts as plain JSON;
/// the first relayed notification (or a question for a handshake-era client)
/// switches it to SSE. `record` gets the outcome label once.
pub(crate) async fn respond(
    mut d: Driver,
    open: prometheus::IntGauge,
    record: Box<dyn FnOnce(&str) + Send>,
) -> Result<Response<Body>, GatewayError> {
    let first = loop {
        match d.step(None).await {
            Next::Done(Ok((bytes, outcome))) => {
                record(outcome);
                return Ok(response::json(StatusCode::OK, bytes));
            }
            Next::Done(Err(e)) => {
                record(e.outcome());
                return Err(e);
            }
            Next::Notify(n) if !d.sse_ok => drop(n),
            other => break other,
        }
    };
    let (tx, rx) = mpsc::channel::<Bytes>(32);
    if let Next::Notify(n) = first {
        let _ = tx.send(response::sse_event(n.get().as_bytes())).await;
    }
    open.inc();
    tokio::spawn(async move {
        struct Open(prometheus::IntGauge);
        impl Drop for Open {
            fn drop(&mut self) {
                self.0.dec();
            }
        }
        let _open = Open(open);
        loop {
            let bytes = match d.step(Some(&tx)).await {
                Next::Notify(n) => {
                    if tx
                        .send(response::sse_event(n.get().as_bytes()))
                        .await
                        .is_err()
                    {
                        return; // client went away: dropping the driver cancels upstream
                    }
                    continue;
                }
                Next::Switch => {
                    let e = GatewayError::Unsupported("bridge asked to switch twice".into());
                    error_bytes(Some(&d.id), &e.render().1)
                }
                Next::Done(Ok((bytes, outcome))) => {
                    record(outcome);
                    bytes
                }
                Next::Done(Err(e)) => {
                    record(e.outcome());
                    error_bytes(Some(&d.id), &e.render().1)
                }
            };
            let _ = tx.send(response::sse_event(&bytes)).await;
            return;
        }
    });
    Ok(response::sse(rx))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_owned()).unwrap()
    }

    #[test]
    fn capabilities_cover_only_what_was_declared() {
        let form_only = json!({"elicitation": {}});
        assert!(declared(&form_only, "elicitation/create", None));
        assert!(declared(
            &form_only,
            "elicitation/create",
            Some(&raw(r#"{"mode":"form"}"#))
        ));
        assert!(!declared(
            &form_only,
            "elicitation/create",
            Some(&raw(r#"{"mode":"url"}"#))
        ));
        let url_only = json!({"elicitation": {"url": {}}});
        assert!(!declared(&url_only, "elicitation/create", None));
        assert!(declared(
            &url_only,
            "elicitation/create",
            Some(&raw(r#"{"mode":"url"}"#))
        ));
        assert!(!declared(&json!({}), "elicitation/create", None));
        assert!(!declared(
            &json!({"elicitation": null}),
            "elicitation/create",
            None
        ));
        assert!(declared(
            &json!({"sampling": {}}),
            "sampling/createMessage",
            None
        ));
        assert!(!declared(&json!({"sampling": {}}), "roots/list", None));
        assert!(declared(
            &json!({"roots": {"listChanged": true}}),
            "roots/list",
            None
        ));
        assert!(!declared(&json!({"roots": {}}), "tools/call", None));
    }

    #[test]
    fn input_required_is_recognised() {
        assert!(is_input_required(&raw(
            r#"{"resultType":"input_required","requestState":"x"}"#
        )));
        assert!(!is_input_required(&raw(r#"{"resultType":"complete"}"#)));
        assert!(!is_input_required(&raw(r#"{"content":[]}"#)));
    }
}
