//! The audit log's hooks into a `tools/call` (ARCHITECTURE.md, "Audit log";
//! the line and its writer are `junction_telemetry::audit`). What a line
//! needs is gathered when the call is about to be forwarded ([`start`]:
//! route, caller, tool, the redacted arguments when switched on), and the
//! line is written once: when the call ends (its recorder calls
//! [`Call::end`] with the answer, whose result is read only when results
//! are switched on), or when it fails before it was forwarded
//! ([`Call::failed`]). A call refused by authorization or a rate limit gets
//! its line from [`refused`]. While auditing is off each costs one atomic
//! load and a branch.

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use junction_catalog::ExposedTool;
use junction_config::Config;
use junction_protocol::jsonrpc::{Id, RawParams};
use junction_telemetry::audit::{self as lines, AuditLine, AuditLog, JsonRpcId};
use serde_json::value::RawValue;
use serde_json::Value;

use crate::context::{Cx, Target};
use crate::error::GatewayError;
use crate::record::Answer;

/// One audited call, from the moment it is forwarded to its line.
pub struct Call {
    log: &'static AuditLog,
    /// The config the call started under (its redaction list).
    config: Arc<Config>,
    jsonrpc_id: Id,
    route: String,
    principal: Option<String>,
    client: Option<IpAddr>,
    tool: String,
    upstream: String,
    upstream_tool: String,
    /// Redacted, when the line carries them (`null` when the call had none).
    arguments: Option<Value>,
    /// Whether the line carries the result.
    results: bool,
    started: Instant,
    written: AtomicBool,
}

/// The audit of a call of `tool` that is about to be forwarded with
/// `params` (what goes upstream, before the tool is renamed), or `None`
/// while auditing is off. `started` is the call's start, as its metrics see it.
#[inline]
pub fn start(
    cx: &Cx<'_>,
    id: &Id,
    tool: &ExposedTool,
    params: &RawParams<'_>,
    started: Instant,
) -> Option<Arc<Call>> {
    let log = lines::audit_log()?;
    begin(
        log,
        cx,
        id,
        tool,
        params.get("arguments").map(|a| &**a),
        started,
    )
}

/// `e`, after writing the line of a `tools/call` it refused (authorization,
/// rate limit), while auditing is on. Its duration runs from the request's
/// arrival.
pub fn refused(
    cx: &Cx<'_>,
    id: &Id,
    target: &Target,
    params: Option<&RawParams<'_>>,
    e: GatewayError,
) -> GatewayError {
    if let (Some(log), Some(tool)) = (lines::audit_log(), target.tool()) {
        let arguments = params.and_then(|p| p.get("arguments")).map(|a| &**a);
        let started = cx.unanswered.unwrap_or_else(Instant::now);
        if let Some(call) = begin(log, cx, id, tool, arguments, started) {
            call.failed(&e);
        }
    }
    e
}

#[cold]
#[inline(never)]
fn begin(
    log: &'static AuditLog,
    cx: &Cx<'_>,
    id: &Id,
    tool: &ExposedTool,
    arguments: Option<&RawValue>,
    started: Instant,
) -> Option<Arc<Call>> {
    let config = &cx.state.config;
    if !config.audit.enabled {
        return None;
    }
    let includes = config.audit.includes(&cx.route.path, &tool.exposed);
    let arguments = includes.arguments.then(|| {
        let mut v = arguments
            .and_then(|a| serde_json::from_str(a.get()).ok())
            .unwrap_or(Value::Null);
        lines::redact(&mut v, &config.audit.redact);
        v
    });
    Some(Arc::new(Call {
        log,
        config: Arc::clone(config),
        jsonrpc_id: id.clone(),
        route: cx.route.path.clone(),
        principal: cx.identity.as_ref().map(|p| p.subject.clone()),
        client: cx.client_ip(),
        tool: tool.exposed.clone(),
        upstream: tool.upstream.clone(),
        upstream_tool: tool.original.clone(),
        arguments,
        results: includes.results,
        started,
        written: AtomicBool::new(false),
    }))
}

impl Call {
    /// Writes the line of the call that ended with `outcome` (the
    /// `junction_tool_calls_total` label) and `answer`; only the first
    /// `end` or [`Call::failed`] of a call writes.
    pub fn end(&self, outcome: &str, answer: Answer<'_>) {
        if self.written.swap(true, Ordering::Relaxed) {
            return;
        }
        let mut error_code = None;
        let mut message = Message::default();
        match answer {
            Answer::Failed(e) => error_code = Some(e.render().1.code),
            Answer::Message(bytes) if self.results => {
                message = serde_json::from_slice(bytes).unwrap_or_default();
            }
            Answer::Message(_) | Answer::Unknown => {}
        }
        let redact = &self.config.audit.redact;
        if let Some(result) = &mut message.result {
            lines::redact_result(result, redact);
        }
        if let Some(error) = &mut message.error {
            lines::redact(error, redact);
        }
        self.log.write(&AuditLine {
            request_id: &format!("{:032x}", rand::random::<u128>()),
            jsonrpc_id: match &self.jsonrpc_id {
                Id::Num(n) => JsonRpcId::Num(*n),
                Id::Str(s) => JsonRpcId::Str(s),
            },
            route: &self.route,
            principal: self.principal.as_deref(),
            client: self.client,
            tool: &self.tool,
            upstream: &self.upstream,
            upstream_tool: &self.upstream_tool,
            outcome,
            error_code,
            duration: self.started.elapsed(),
            arguments: self.arguments.as_ref(),
            result: message.result.as_ref(),
            upstream_error: message.error.as_ref(),
        });
    }

    /// Writes the line of a call Junction refused or failed with `e`,
    /// unless the call's line was written already.
    pub fn failed(&self, e: &GatewayError) {
        self.end(e.outcome(), Answer::Failed(e));
    }
}

/// The parts of the client's JSON-RPC message a line may carry.
#[derive(Default, serde::Deserialize)]
struct Message {
    result: Option<Value>,
    error: Option<Value>,
}
