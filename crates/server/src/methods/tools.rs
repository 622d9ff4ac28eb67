//! `tools/list` and `tools/call` for both client eras: a page of the route's
//! catalog as the caller may see it, and a call forwarded to its upstream with
//! the original name, the raw arguments and the `Mcp-Param-*` headers its
//! schema declares (checked against a modern client's own first).

use std::borrow::Cow;
use std::sync::Arc;

use http::Response;
use junction_catalog::cursor;
use junction_catalog::overrides::with_pinned;
use junction_catalog::ExposedTool;
use junction_protocol::jsonrpc::{Id, RawParams};
use junction_protocol::xmcp;
use serde_json::value::RawValue;
use serde_json::Value;

use super::Request;
use crate::admit;
use crate::audit;
use crate::context::{param_str, ClientSide, Cx, Target};
use crate::error::GatewayError;
use crate::forward::{self, Outbound};
use crate::guardrail::{self, Verdict};
use crate::resolve::object_or_absent;
use crate::response::Body;
use crate::state::UpstreamEntry;
use crate::tasks;
use crate::views::{self, ListShape};

pub async fn list(cx: &Cx<'_>, id: &Id, r: Request<'_>) -> Result<Response<Body>, GatewayError> {
    let cursor = param_str(r.params.as_ref(), "cursor")?;
    let (catalog, per_caller) = admit::visible(cx, views::route_catalog(cx).await);
    let start = match cursor {
        None => 0,
        Some(c) => cursor::decode(&cx.state.sealer, &c, catalog.version).map_err(|_| {
            GatewayError::InvalidParams(
                "cursor is invalid or from an older catalog; list again without a cursor".into(),
            )
        })?,
    };
    let (tools, next) = catalog.page(start, cx.state.config.catalog.page_size);
    let mut out = Vec::with_capacity(tools.len() + 256);
    out.extend_from_slice(b"{\"tools\":");
    out.extend_from_slice(&tools);
    let shape = ListShape {
        next_cursor: next.map(|n| cursor::encode(&cx.state.sealer, catalog.version, n)),
        degraded: &catalog.degraded,
        modern: r.client.is_modern(),
        ttl_ms: catalog.ttl_ms,
        public: catalog.public && !per_caller,
    };
    Ok(views::finish_list(id, out, shape))
}

pub async fn call(cx: &Cx<'_>, id: &Id, r: Request<'_>) -> Result<Response<Body>, GatewayError> {
    let Request {
        params,
        client,
        target,
    } = r;
    let Target::Tool { catalog, index } = target else {
        return Err(GatewayError::InvalidParams(
            "tools/call needs params.name".into(),
        ));
    };
    let Some(tool) = catalog.tools.get(index) else {
        return Err(GatewayError::InvalidParams(
            "tools/call needs params.name".into(),
        ));
    };
    let mut params = params.unwrap_or_default();
    let upstream =
        cx.state.upstreams.get(&tool.upstream).ok_or_else(|| {
            GatewayError::InvalidParams(format!("unknown tool: {}", tool.exposed))
        })?;
    object_or_absent(Some(&params), "arguments")?;
    let task_shape = task_shape(&client, &mut params, tool, upstream)?;
    let received: Vec<(String, String)> = if cx.known.param_headers {
        cx.headers
            .iter()
            .filter(|(k, _)| k.as_str().starts_with("mcp-param-"))
            .map(|(k, v)| {
                (
                    k.as_str().to_owned(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect()
    } else {
        Vec::new()
    };
    let arguments: Option<Value> = if tool.header_params.is_empty() && received.is_empty() {
        None
    } else {
        match params.get("arguments") {
            None => None,
            Some(raw) => Some(serde_json::from_str(raw.get()).map_err(|_| {
                GatewayError::InvalidParams("params.arguments must be an object".into())
            })?),
        }
    };
    if client.is_modern() {
        xmcp::check(&tool.header_params, arguments.as_ref(), &received)
            .map_err(GatewayError::HeaderMismatch)?;
    }
    // A route's pinned arguments win over the client's (after the client's
    // own headers were checked against what it sent).
    let arguments = if tool.pinned.is_empty() {
        arguments
    } else {
        let merged =
            with_pinned(params.get("arguments").map(|a| &**a), &tool.pinned).ok_or_else(|| {
                GatewayError::InvalidParams("params.arguments must be an object".into())
            })?;
        let value = serde_json::from_str(merged.get()).ok();
        params.insert("arguments".into(), Cow::Owned(merged));
        value
    };
    // The route's guardrail sees the arguments as they would go upstream, and
    // may refuse them or hand back others. Boxed: most routes have none.
    let guarded = cx.route.guardrail.as_ref().map(|g| {
        let call = guardrail::Call {
            route: &cx.route.path,
            principal: cx.identity.as_ref().map(|p| p.subject.as_str()),
            tool: &tool.exposed,
            upstream: &tool.upstream,
            upstream_tool: &tool.original,
            metrics: &cx.state.metrics,
        };
        (g, call)
    });
    let arguments = match &guarded {
        None => arguments,
        Some((g, call)) => {
            let asked = Box::pin(g.request(call, params.get("arguments").map(|a| &**a))).await;
            match asked {
                Ok(Verdict::Allow) => arguments,
                Ok(Verdict::Rewrite(new)) => {
                    let value = serde_json::from_str(new.get()).ok();
                    params.insert("arguments".into(), Cow::Owned(new));
                    value
                }
                Err(e) => {
                    // A refusal is an audit event like an authorization one.
                    let now = std::time::Instant::now();
                    if let Some(call) = audit::start(cx, id, tool, &params, now) {
                        call.failed(&e);
                    }
                    return Err(e);
                }
            }
        }
    };
    // The result phase, for the driver (a streamed answer) and for a whole
    // JSON answer below.
    let check = guarded
        .as_ref()
        .filter(|(g, _)| g.checks_results())
        .map(|(g, call)| Arc::new(guardrail::ResultCheck::new(g, call)));
    let param_headers = if upstream.is_http {
        xmcp::extract(&tool.header_params, arguments.as_ref())
            .map_err(|e| GatewayError::InvalidParams(e.to_string()))?
    } else {
        Vec::new()
    };
    let started = std::time::Instant::now();
    // With the audit log on, the call's line (arguments as they go upstream).
    let audit = audit::start(cx, id, tool, &params, started);
    // The recorder keeps the catalog, not copies of the tool's names.
    let record = {
        let (m, ok, tools_ok, catalog) = (
            cx.state.metrics.clone(),
            upstream.call_ok.clone(),
            upstream.tools_ok.clone(),
            Arc::clone(&catalog),
        );
        let count = move |o: &str| {
            if let Some(t) = catalog.tools.get(index) {
                record_call(&m, (&ok, &tools_ok), &t.upstream, &t.exposed, o, started);
            }
        };
        audit::recorder(count, audit.clone())
    };
    // The upstream knows the tool by its original name: `name` is there (the
    // target was resolved from it), replaced in place, its key kept.
    if let Some(name) = params.get_mut("name") {
        *name = Cow::Borrowed(&tool.original_json);
    }
    let out = Outbound {
        method: "tools/call",
        params,
        param_headers,
        record,
        // A result the guardrail checks arrives whole, not as a stream,
        // unless the client must be asked something on one: then the driver
        // checks it before writing it there.
        relay_notifications: check.is_none(),
        on_result: None,
        check: check.clone(),
        unknown_name: None,
        tasks: task_shape,
    };
    let answered = forward::forward(cx, id, &client, upstream, &tool.exposed, out).await;
    let answered = match (&check, answered) {
        (Some(check), Ok(response)) => Box::pin(forward::check_whole(id, check, response)).await,
        (_, answered) => answered,
    };
    if let (Some(call), Err(e)) = (&audit, &answered) {
        // Refused on its way upstream (requestState, the caller's upstream
        // credentials) before its recorder had anything to count.
        call.failed(e);
    }
    answered
}

/// Whether this call may be answered with a task, and in which shape. For a
/// modern client calling a handshake-era upstream's tool that runs as a task
/// (2025-11-25 `execution.taskSupport`): with the extension, Junction asks for
/// a task (`task: {}`, translated back by the Finisher); without it, a tool
/// that only runs as a task (`"required"`) is refused with -32021, as the
/// extension says. A modern upstream decides both itself. Most tools say
/// nothing of tasks: for them this is one substring search.
fn task_shape(
    client: &ClientSide,
    params: &mut RawParams<'_>,
    tool: &ExposedTool,
    upstream: &UpstreamEntry,
) -> Result<tasks::Shape, GatewayError> {
    let shape = tasks::shape(client.is_modern(), client.capabilities(), params);
    if !client.is_modern()
        || !tasks::mentions_task_support(&tool.definition)
        || upstream_is_modern(upstream)
    {
        return Ok(shape);
    }
    let support = tasks::task_support(&tool.definition);
    match shape {
        tasks::Shape::None if support == "required" => {
            Err(tasks::needs_extension(&format!("tool {}", tool.exposed)))
        }
        tasks::Shape::Modern if matches!(support.as_str(), "optional" | "required") => {
            let ask = RawValue::from_string("{}".into())
                .map_err(|e| GatewayError::Unsupported(e.to_string()))?;
            params.insert("task".into(), Cow::Owned(ask));
            Ok(shape)
        }
        _ => Ok(shape),
    }
}

fn upstream_is_modern(upstream: &UpstreamEntry) -> bool {
    matches!(
        upstream.client.known_era(),
        Some(junction_upstream::Era::Modern)
    )
}

/// `upstream_ok`, `tools_ok`: the upstream's `tools/call` series and its
/// tools' with outcome `ok`, kept on its
/// [`UpstreamEntry`](crate::state::UpstreamEntry).
fn record_call(
    m: &junction_telemetry::Metrics,
    (upstream_ok, tools_ok): (
        &junction_telemetry::OkSeries,
        &junction_telemetry::ToolOkSeries,
    ),
    upstream: &str,
    tool: &str,
    outcome: &str,
    started: std::time::Instant,
) {
    let secs = started.elapsed().as_secs_f64();
    let tool_series = || {
        let label = m.tool_labels.label(tool);
        (
            m.tool_calls_total
                .with_label_values(&[upstream, label, outcome]),
            m.tool_call_duration_seconds
                .with_label_values(&[upstream, label]),
        )
    };
    tools_ok.observe(tool, outcome == "ok", secs, tool_series);
    let upstream_series = || {
        (
            m.upstream_requests_total
                .with_label_values(&[upstream, "tools/call", outcome]),
            m.upstream_request_duration_seconds
                .with_label_values(&[upstream, "tools/call"]),
        )
    };
    upstream_ok.observe(outcome == "ok", secs, upstream_series);
}
