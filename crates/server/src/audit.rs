//! The audit log's hooks into a `tools/call`, `prompts/get` or
//! `resources/read` (ARCHITECTURE.md, "Audit log"; the line and its writer
//! are `junction_telemetry::audit`). What a line needs is gathered when the
//! call is about to be forwarded ([`start`], [`start_for`]: route, caller,
//! what it named, the redacted arguments when switched on), and the
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
use junction_telemetry::audit::{self as lines, AuditLine, AuditLog, JsonRpcId, Method};
use serde_json::value::RawValue;
use serde_json::Value;

use crate::context::{Cx, Target};
use crate::error::GatewayError;
use crate::record::{Answer, Record};

/// One audited call, from the moment it is forwarded to its line.
pub struct Call {
    log: &'static AuditLog,
    /// The config the call started under (its redaction list).
    config: Arc<Config>,
    jsonrpc_id: Id,
    route: String,
    principal: Option<String>,
    client: Option<IpAddr>,
    method: Method,
    /// What the client named (tool, prompt, URI) and the upstream's name of it.
    name: String,
    upstream: String,
    upstream_name: String,
    /// Redacted, when the line carries them (`null` when the call had none).
    arguments: Option<Value>,
    /// Whether the line carries the result.
    results: bool,
    started: Instant,
    written: AtomicBool,
}

/// What an audited call named: its method, the name the client used (the
/// exposed tool or prompt, the URI), its upstream and the upstream's name.
struct Named<'a> {
    method: Method,
    name: &'a str,
    upstream: &'a str,
    upstream_name: &'a str,
}

impl<'a> Named<'a> {
    fn tool(tool: &'a ExposedTool) -> Named<'a> {
        Named {
            method: Method::ToolsCall,
            name: &tool.exposed,
            upstream: &tool.upstream,
            upstream_name: &tool.original,
        }
    }

    /// What `target` names, when its method is audited.
    fn of(target: &'a Target) -> Option<Named<'a>> {
        match target {
            Target::Tool { .. } => target.tool().map(Named::tool),
            Target::Prompt {
                upstream,
                exposed,
                original,
            } => Some(Named {
                method: Method::PromptsGet,
                name: exposed,
                upstream,
                upstream_name: original,
            }),
            Target::Resource { upstream, uri, own } => Some(Named {
                method: Method::ResourcesRead,
                name: uri,
                upstream,
                upstream_name: own,
            }),
            _ => None,
        }
    }
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
    let arguments = params.get("arguments").map(|a| &**a);
    begin(log, cx, id, Named::tool(tool), arguments, started)
}

/// The audit of the `prompts/get` or `resources/read` of `target` about to
/// be forwarded with `params` (as the client sent them), or `None` while
/// auditing is off.
#[inline]
pub fn start_for(
    cx: &Cx<'_>,
    id: &Id,
    target: &Target,
    params: &RawParams<'_>,
) -> Option<Arc<Call>> {
    let log = lines::audit_log()?;
    let arguments = params.get("arguments").map(|a| &**a);
    begin(log, cx, id, Named::of(target)?, arguments, Instant::now())
}

/// The recorder of an upstream call: `count` its metrics, and, when it is
/// audited, the line written with the answer.
pub fn recorder(count: impl FnOnce(&str) + Send + 'static, call: Option<Arc<Call>>) -> Record {
    match call {
        None => Record::new(count),
        Some(call) => Record::answered(move |outcome: &str, answer: Answer<'_>| {
            count(outcome);
            call.end(outcome, answer);
        }),
    }
}

/// `e`, after writing the line of a `tools/call`, `prompts/get` or
/// `resources/read` it refused (authorization, rate limit), while auditing
/// is on. Its duration runs from the request's arrival.
pub fn refused(
    cx: &Cx<'_>,
    id: &Id,
    target: &Target,
    params: Option<&RawParams<'_>>,
    e: GatewayError,
) -> GatewayError {
    if let (Some(log), Some(named)) = (lines::audit_log(), Named::of(target)) {
        let arguments = params.and_then(|p| p.get("arguments")).map(|a| &**a);
        let started = cx.unanswered.unwrap_or_else(Instant::now);
        if let Some(call) = begin(log, cx, id, named, arguments, started) {
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
    named: Named<'_>,
    arguments: Option<&RawValue>,
    started: Instant,
) -> Option<Arc<Call>> {
    let config = &cx.state.config;
    if !config.audit.enabled {
        return None;
    }
    let includes = match named.method {
        Method::ToolsCall => config.audit.includes(&cx.route.path, named.name),
        Method::PromptsGet | Method::ResourcesRead => config.audit.route_includes(&cx.route.path),
    };
    // A resource read has no arguments to carry (whatever its params hold).
    let carries_arguments = includes.arguments && named.method != Method::ResourcesRead;
    let arguments = carries_arguments.then(|| {
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
        method: named.method,
        name: named.name.to_owned(),
        upstream: named.upstream.to_owned(),
        upstream_name: named.upstream_name.to_owned(),
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
            method: self.method,
            name: &self.name,
            upstream_name: &self.upstream_name,
            upstream: &self.upstream,
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
