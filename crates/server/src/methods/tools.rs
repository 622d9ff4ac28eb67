//! `tools/list` and `tools/call` for both client eras: a page of the route's
//! catalog as the caller may see it, and a call forwarded to its upstream with
//! the original name, the raw arguments and the `Mcp-Param-*` headers its
//! schema declares (checked against a modern client's own first).

use std::sync::Arc;

use http::Response;
use junction_catalog::cursor;
use junction_catalog::overrides::with_pinned;
use junction_protocol::jsonrpc::Id;
use junction_protocol::xmcp;
use serde_json::Value;

use super::Request;
use crate::admit;
use crate::context::{param_str, Cx, Target};
use crate::error::GatewayError;
use crate::forward::{self, Outbound};
use crate::record::Record;
use crate::resolve::object_or_absent;
use crate::response::Body;
use crate::views::{self, ListShape};

pub async fn list(cx: &Cx<'_>, id: &Id, r: Request) -> Result<Response<Body>, GatewayError> {
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

pub async fn call(cx: &Cx<'_>, id: &Id, r: Request) -> Result<Response<Body>, GatewayError> {
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
    let received: Vec<(String, String)> = cx
        .headers
        .iter()
        .filter(|(k, _)| k.as_str().starts_with("mcp-param-"))
        .map(|(k, v)| {
            (
                k.as_str().to_owned(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
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
        params.insert("arguments".into(), merged);
        value
    };
    let param_headers = if upstream.is_http {
        xmcp::extract(&tool.header_params, arguments.as_ref())
            .map_err(|e| GatewayError::InvalidParams(e.to_string()))?
    } else {
        Vec::new()
    };
    let started = std::time::Instant::now();
    // The recorder keeps the catalog, not copies of the tool's names.
    let record = {
        let (m, ok, catalog) = (
            cx.state.metrics.clone(),
            upstream.call_ok.clone(),
            Arc::clone(&catalog),
        );
        Record::new(move |o: &str| {
            if let Some(t) = catalog.tools.get(index) {
                record_call(&m, &ok, &t.upstream, &t.exposed, o, started);
            }
        })
    };
    // The upstream knows the tool by its original name: `name` is there (the
    // target was resolved from it), replaced in place, its key kept.
    if let Some(name) = params.get_mut("name") {
        *name = tool.original_json.clone();
    }
    let out = Outbound {
        method: "tools/call",
        params,
        param_headers,
        record,
        relay_notifications: true,
        on_result: None,
        unknown_name: None,
    };
    forward::forward(cx, id, &client, upstream, &tool.exposed, out).await
}

/// `upstream_ok`: the upstream's `tools/call` series with outcome `ok`, kept
/// on its [`UpstreamEntry`](crate::state::UpstreamEntry).
fn record_call(
    m: &junction_telemetry::Metrics,
    upstream_ok: &junction_telemetry::OkSeries,
    upstream: &str,
    tool: &str,
    outcome: &str,
    started: std::time::Instant,
) {
    let secs = started.elapsed().as_secs_f64();
    let tool = m.tool_labels.label(tool);
    m.tool_calls_total
        .with_label_values(&[upstream, tool, outcome])
        .inc();
    m.tool_call_duration_seconds
        .with_label_values(&[upstream, tool])
        .observe(secs);
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
