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
//!   A handshake-era upstream asking a handshake-era client is relayed the same way;
//!   so is a dual-era upstream, which such a client reaches over a handshake-era
//!   session (`junction_upstream`'s `http/dual.rs`).
//!
//! Nothing is asked that the client did not declare: the upstream gets an error
//! instead. Both tables (`state::Replica`'s `held` and `waiting`) are per
//! replica, bounded, expiring, and bound to the caller's principal; a retry
//! that reaches another replica gets "expired".

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::future::BoxFuture;
use junction_protocol::jsonrpc::{error_bytes, result_bytes, Id, RawParams, RpcError};
use junction_protocol::{codes, object};
use junction_upstream::{
    Bridged, ResponseStream, ServerRequest, Upstream, UpstreamEvent, UpstreamRequest,
};
use serde_json::value::RawValue;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::context::Cx;
use crate::envelope;
use crate::error::GatewayError;
use crate::guardrail::{ResultCheck, Verdict};
use crate::record::{Answer, Record};
use crate::state::Replica;

mod finish;
mod held;
mod legacy;
mod respond;

pub use finish::Finisher;
pub use held::{client_response, Reply};
pub use legacy::copy_request;
pub use respond::respond;

/// How long Junction waits for further server requests once one arrived, so
/// that requests sent together reach the client in one `InputRequiredResult`.
const COLLECT_GRACE: std::time::Duration = std::time::Duration::from_millis(50);
/// Input rounds of one handshake-era client's call before Junction gives up.
const MAX_ROUNDS: usize = 16;

/// The upstream request again, for the retry after a handshake-era client answered.
pub struct Retry {
    pub(crate) client: Arc<Upstream>,
    pub(crate) request: UpstreamRequest<'static>,
}

/// Reads one upstream call to the message its client gets, bridging server
/// requests on the way. Shared by `tools/call`, `prompts/get`, `resources/read`.
pub struct Driver {
    pub(crate) stream: Option<ResponseStream>,
    /// The client's JSON-RPC id for this request.
    pub(crate) id: Id,
    pub(crate) finish: Finisher,
    pub(crate) method: &'static str,
    /// The client's capabilities: this request's (modern) or the session's.
    pub(crate) caps: Box<RawValue>,
    pub(crate) sse_ok: bool,
    /// Progress and log notifications go to the client (tools/call).
    pub(crate) relay_notifications: bool,
    /// Which log messages among them the client asked for.
    pub(crate) log: crate::logging::LogFilter,
    /// Set for a handshake-era client's call: its `notifications/cancelled`
    /// (boxed, like `retry`).
    pub(crate) cancel: Option<Box<crate::cancel::Cancel>>,
    /// Applied to a finished result (cache hints of resources/read).
    pub(crate) on_result: Option<fn(Box<RawValue>) -> Box<RawValue>>,
    /// The route's guardrail, for a result written to a stream (a whole
    /// JSON answer is checked once the driver is done: `forward::check_whole`).
    pub(crate) check: Option<Arc<ResultCheck>>,
    /// An upstream `-32601` means this unknown-name error (prompts, resources).
    pub(crate) unknown_name: Option<String>,
    /// Set for handshake-era clients (input_required bridging). Boxed, as
    /// is `stash`: the driver is moved into and out of the call's futures,
    /// and what only handshake-era calls or rare branches use should not
    /// make every call copy it.
    pub(crate) retry: Option<Box<Retry>>,
    pub(crate) stash: Option<Box<Stash>>,
    pub(crate) rounds: usize,
    /// Where held calls and waiting questions are kept.
    pub(crate) replica: Arc<Replica>,
}

/// What must be asked of a handshake-era client once its SSE stream is open.
pub enum Stash {
    /// A modern upstream's `input_required` result: keys and requests, and its state.
    InputRequired {
        asks: Vec<(String, String, Option<Box<RawValue>>)>,
        state: Option<Box<RawValue>>,
    },
    /// A handshake-era upstream's own server request.
    Relay(ServerRequest),
}

pub enum Next {
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

    /// The rare branches (a question for the client, a held or refused server
    /// request) are boxed: inline, they made every call's future ~4.7 KiB
    /// larger, which each request pays for in copying and touching memory.
    pub(crate) async fn step(&mut self, sink: Option<&mpsc::Sender<Bytes>>) -> Next {
        loop {
            if let Some(stash) = self.stash.take() {
                let Some(tx) = sink else {
                    self.stash = Some(stash);
                    return Next::Switch;
                };
                if let Err(done) = Box::pin(self.ask_client(*stash, tx)).await {
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
                    if self.relay_notifications
                        && (self.sse_ok || sink.is_some())
                        && self.log.passes(&n)
                    {
                        if let Some(n) = self.finish.relayed(n) {
                            return Next::Notify(n);
                        }
                    }
                }
                Some(Ok(Bridged::Event(UpstreamEvent::Error(err)))) => {
                    return Next::Done(self.upstream_error(err))
                }
                Some(Ok(Bridged::Event(UpstreamEvent::Result(raw)))) => {
                    if !self.finish.modern && is_input_required(&raw) {
                        match self.legacy_ask(&raw) {
                            Ok(stash) => self.stash = Some(Box::new(stash)),
                            Err(e) => return Next::Done(Err(e)),
                        }
                        continue;
                    }
                    if let (Some(_), Some(check)) = (sink, self.check.take()) {
                        let finished = self.finished(raw);
                        return Next::Done(Box::pin(checked(check, &self.id, finished)).await);
                    }
                    return Next::Done(self.complete(raw));
                }
                Some(Ok(Bridged::ServerRequest(r))) if self.finish.modern => {
                    if let Some(next) = Box::pin(self.hold_for_modern(r, sink)).await {
                        return next;
                    }
                }
                Some(Ok(Bridged::ServerRequest(r))) => {
                    if declared(&self.caps, &r.method, r.params.as_deref()) && self.sse_ok {
                        self.stash = Some(Box::new(Stash::Relay(r)));
                    } else {
                        Box::pin(self.refuse(&r)).await;
                    }
                }
            }
        }
    }

    fn complete(&self, raw: Box<RawValue>) -> Result<(Vec<u8>, &'static str), GatewayError> {
        let raw = self.finished(raw)?;
        Ok((result_bytes(&self.id, &raw), "ok"))
    }

    /// The result as the client gets it.
    fn finished(&self, raw: Box<RawValue>) -> Result<Box<RawValue>, GatewayError> {
        let raw = self.finish.result(raw)?;
        Ok(match self.on_result {
            Some(f) => f(raw),
            None => raw,
        })
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
        if err.code == codes::MISSING_CLIENT_CAPABILITY {
            return Err(GatewayError::UpstreamNeedsCapability(err));
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
    async fn hold_for_modern(
        &mut self,
        first: ServerRequest,
        sink: Option<&mpsc::Sender<Bytes>>,
    ) -> Option<Next> {
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
            // Progress sent while asking goes out first on a stream already
            // open; a client that is not streaming gets the result only.
            Some(Ok(Bridged::Event(UpstreamEvent::Notification(n)))) => {
                let relayed = (self.relay_notifications && self.log.passes(&n))
                    .then(|| self.finish.relayed(n))
                    .flatten();
                if let (Some(tx), Some(n)) = (sink, relayed) {
                    let _ = tx
                        .send(crate::response::sse_event(n.get().as_bytes()))
                        .await;
                }
            }
            None => {}
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
}

/// [`Driver::complete`] for a result about to be written to the client's
/// stream, once the route's guardrail allowed, rewrote or refused it (a
/// refusal is the stream's last message).
async fn checked(
    check: Arc<ResultCheck>,
    id: &Id,
    finished: Result<Box<RawValue>, GatewayError>,
) -> Result<(Vec<u8>, &'static str), GatewayError> {
    let raw = finished?;
    if crate::tasks::is_created(&raw) {
        return Ok((result_bytes(id, &raw), "ok"));
    }
    let raw = match check.result(&raw).await? {
        Verdict::Allow => raw,
        Verdict::Rewrite(new) => new,
    };
    Ok((result_bytes(id, &raw), "ok"))
}

fn is_input_required(raw: &RawValue) -> bool {
    finish::result_type(raw).is_ok_and(|t| t.as_deref() == Some("input_required"))
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
pub fn declared(caps: &RawValue, method: &str, params: Option<&RawValue>) -> bool {
    // The capabilities are kept as the client sent them (valid JSON): read in
    // place, the last of a duplicate key winning as in a parsed object.
    fn member<'a>(object: &'a str, key: &str) -> Option<&'a str> {
        object::members(object)?
            .filter(|(k, _)| k == key)
            .last()
            .map(|(_, v)| v)
    }
    let present = |key: &str| member(caps.get(), key).is_some_and(|v| v != "null");
    match method {
        "sampling/createMessage" => present("sampling"),
        "roots/list" => present("roots"),
        "elicitation/create" => {
            let Some(e) = member(caps.get(), "elicitation").filter(|v| v.starts_with('{')) else {
                return false;
            };
            let mode = params
                .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
                .and_then(|p| p.get("mode").and_then(Value::as_str).map(str::to_owned))
                .unwrap_or_else(|| "form".to_owned());
            if member(e, "form").is_none() && member(e, "url").is_none() {
                mode == "form"
            } else {
                member(e, &mode).is_some()
            }
        }
        _ => false,
    }
}

/// A modern client's retry that answers a held call: `Some` with the driver
/// that continues the upstream call (or the next `input_required`).
// `NotHeld` is what nearly every call gets back, moved straight into the
// call's state; boxing it cost an allocation per call.
#[allow(clippy::large_enum_variant)]
enum Resumed {
    NotHeld(Driver),
    Continue(Box<Driver>),
    Answer(Result<(Vec<u8>, &'static str), GatewayError>),
    /// Held by another replica (its `fleet.advertise_url`): relayed there.
    Elsewhere(String),
}

/// How a call starts: `Ok` with the driver (and its recorder) to go upstream
/// with, or `Err` with the response of a held call the request continued.
pub type Started =
    Result<(Driver, Record), Result<http::Response<crate::response::Body>, GatewayError>>;

/// Starts a call: a retry whose `requestState` may name a call Junction
/// holds gets the continuation to await (`Err`), which continues that call
/// or hands the driver back; any other request gets `driver` back at once
/// (`Ok`) and goes upstream with it. Not an `async fn`: nearly every call
/// takes the first way, and the driver is not copied into and out of a
/// future for it. The continuation is boxed: it is rare, and inline it would
/// grow every call's future (`listener::REQUEST_FUTURE_LIMIT`).
pub fn start<'a>(
    cx: &'a Cx<'_>,
    params: &'a RawParams,
    driver: Driver,
    open: &prometheus::IntGauge,
    record: Record,
) -> Result<(Driver, Record), BoxFuture<'a, Started>> {
    if !may_resume(params) {
        return Ok((driver, record));
    }
    Err(Box::pin(continue_held(
        cx,
        params,
        driver,
        open.clone(),
        record,
    )))
}

async fn continue_held(
    cx: &Cx<'_>,
    params: &RawParams<'_>,
    driver: Driver,
    open: prometheus::IntGauge,
    record: Record,
) -> Started {
    match resume(cx, params, driver).await {
        Ok(Resumed::NotHeld(d)) => Ok((d, record)),
        // The owner records the call's outcome; here it is a relayed request.
        Ok(Resumed::Elsewhere(owner)) => Err(crate::relay::to_owner(cx, &owner).await),
        Ok(Resumed::Continue(d)) => {
            let mut record = record;
            record.arm();
            Err(respond(*d, open, record).await)
        }
        Ok(Resumed::Answer(Ok((bytes, o)))) => {
            record.record_answer(o, Answer::Message(&bytes));
            Err(Ok(crate::response::json(http::StatusCode::OK, bytes)))
        }
        Ok(Resumed::Answer(Err(e))) => {
            record.record_answer(e.outcome(), Answer::Failed(&e));
            Err(Err(e))
        }
        // A requestState that does not open is refused before any upstream
        // is asked, like an unknown tool: no call outcome is recorded.
        Err(e) => Err(Err(e)),
    }
}

/// Whether the request carries a `requestState` that may continue a held call;
/// without one, [`resume`] has nothing to look at and [`start`] skips it (the
/// `Driver` is then not moved into and out of its state machine).
fn may_resume(params: &RawParams<'_>) -> bool {
    params.contains_key("requestState")
}

/// If `params.requestState` names a call held here, answer its upstream with
/// the client's `inputResponses` and hand back the driver to read on.
async fn resume(
    cx: &Cx<'_>,
    params: &RawParams<'_>,
    template: Driver,
) -> Result<Resumed, GatewayError> {
    let Some(raw) = params.get("requestState") else {
        return Ok(Resumed::NotHeld(template));
    };
    let Ok(token) = serde_json::from_str::<String>(raw.get()) else {
        return Ok(Resumed::NotHeld(template));
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
    let Some(held) = entry else {
        return Ok(Resumed::NotHeld(template));
    };
    if let Some(owner) = held.owner.filter(|o| crate::relay::elsewhere(cx, o)) {
        if !crate::state::lock(&template.replica.held).contains_key(&held.entry) {
            return Ok(Resumed::Elsewhere(owner));
        }
    }
    let entry = held.entry;
    let responses: BTreeMap<String, Box<RawValue>> = match params.get("inputResponses") {
        None => BTreeMap::new(),
        Some(raw) => serde_json::from_str(raw.get())
            .map_err(|_| GatewayError::InvalidParams("inputResponses must be an object".into()))?,
    };
    // Boxed: rare, and inline it would grow every call's future.
    Box::pin(held::resume(entry, &cx.principal, template, responses)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_owned()).unwrap()
    }

    #[test]
    fn capabilities_cover_only_what_was_declared() {
        let form_only = raw(r#"{"elicitation": {}}"#);
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
        let url_only = raw(r#"{"elicitation": {"url": {}}}"#);
        assert!(!declared(&url_only, "elicitation/create", None));
        assert!(declared(
            &url_only,
            "elicitation/create",
            Some(&raw(r#"{"mode":"url"}"#))
        ));
        assert!(!declared(&raw(r#"{}"#), "elicitation/create", None));
        assert!(!declared(
            &raw(r#"{"elicitation": null}"#),
            "elicitation/create",
            None
        ));
        assert!(declared(
            &raw(r#"{"sampling": {}}"#),
            "sampling/createMessage",
            None
        ));
        assert!(!declared(&raw(r#"{"sampling": {}}"#), "roots/list", None));
        assert!(declared(
            &raw(r#"{"roots": {"listChanged": true}}"#),
            "roots/list",
            None
        ));
        assert!(!declared(&raw(r#"{"roots": {}}"#), "tools/call", None));
        // Read in place: nested keys are not the object's own, the last of a
        // duplicate wins (as in a parsed object), and whitespace is no matter.
        assert!(!declared(
            &raw(r#"{"x": {"sampling": {}}}"#),
            "sampling/createMessage",
            None
        ));
        assert!(!declared(
            &raw(r#"{"sampling": {}, "sampling": null}"#),
            "sampling/createMessage",
            None
        ));
        assert!(declared(
            &raw("{ \"elicitation\" : { \"url\" : {} , \"form\":{} } }"),
            "elicitation/create",
            Some(&raw(r#"{"mode":"url"}"#))
        ));
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
