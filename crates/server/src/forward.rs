//! What prompts and resources share: a list method fanned out to every upstream
//! of the route (every page drained; merged and paged in `merged`), and one
//! request forwarded to its owning upstream with MRTR passthrough (the
//! `Finisher` of `tools`).
//!
//! Lists are cached per upstream (`list_cache`); a failing upstream's last good
//! list is served and the upstream named as degraded.

use http::Response;
use junction_protocol::codes;
use junction_protocol::jsonrpc::{Id, RawParams, RpcError};
use junction_upstream::{UpstreamError, UpstreamEvent, UpstreamRequest};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::bridge;
use crate::envelope;
use crate::error::GatewayError;
use crate::list_cache::{self, Listed};
use crate::mcp::Cx;
use crate::response::Body;
use crate::state::UpstreamEntry;
use crate::tools::{ClientSide, Finisher};

/// One upstream's whole list for a method.
#[derive(Clone)]
pub(crate) struct Contribution {
    pub upstream: String,
    pub items: Vec<Value>,
    pub ttl_ms: u64,
    pub public: bool,
}

/// Every upstream that answered, in config order, and those that failed.
pub(crate) struct Fanned {
    pub contributions: Vec<Contribution>,
    pub degraded: Vec<String>,
}

enum Fetch {
    Listed(Contribution),
    /// The upstream does not serve this method (-32601): it has none to list.
    Unsupported,
    Failed(GatewayError),
}

#[derive(Deserialize)]
struct PageHead {
    #[serde(rename = "nextCursor", default)]
    next_cursor: Option<String>,
    #[serde(rename = "ttlMs", default)]
    ttl_ms: Option<Value>,
    #[serde(rename = "cacheScope", default)]
    cache_scope: Option<String>,
}

/// `method` on every upstream of the route at once, each within the list deadline.
pub(crate) async fn fan_out(cx: &Cx<'_>, method: &str, key: &str) -> Fanned {
    let deadline = cx.state.config.catalog.list_deadline;
    let entries: Vec<&UpstreamEntry> = cx
        .route
        .upstreams
        .iter()
        .filter_map(|id| cx.state.upstreams.get(id))
        .collect();
    let fetches = futures_util::future::join_all(entries.iter().map(|u| async move {
        let cached = list_cache::get(u, method);
        if let Some((listed, true)) = cached {
            return Ok(listed);
        }
        // Every page stops at the deadline itself (`counted_page`).
        let until = tokio::time::Instant::now() + deadline;
        let fetched = match fetch_all(cx, u, method, key, until).await {
            Fetch::Listed(c) => Listed::Items(c),
            Fetch::Unsupported => Listed::Unsupported,
            Fetch::Failed(e) => return Err((e, cached.map(|(l, _)| l))),
        };
        list_cache::put(u, method, &fetched);
        Ok(fetched)
    }))
    .await;
    let mut out = Fanned {
        contributions: Vec::new(),
        degraded: Vec::new(),
    };
    for (u, f) in entries.iter().zip(fetches) {
        match f {
            Ok(Listed::Items(c)) => out.contributions.push(c),
            Ok(Listed::Unsupported) => {}
            Err((e, last_good)) => {
                tracing::warn!(upstream = %u.id, route = %cx.route.path, method, error = %e, "upstream degraded: serving its last good list or none");
                out.degraded.push(u.id.clone());
                // The last good list, with ttlMs 0 (it is already out of date).
                if let Some(Listed::Items(c)) = last_good {
                    out.contributions.push(c);
                }
            }
        }
    }
    out
}

async fn fetch_all(
    cx: &Cx<'_>,
    u: &UpstreamEntry,
    method: &str,
    key: &str,
    deadline: tokio::time::Instant,
) -> Fetch {
    let max_pages = cx.state.config.catalog.max_pages.max(1);
    let mut c = Contribution {
        upstream: u.id.clone(),
        items: Vec::new(),
        ttl_ms: u.list_ttl.as_millis() as u64,
        public: true,
    };
    let mut cursor: Option<String> = None;
    for _ in 0..max_pages {
        let mut params = RawParams::new();
        if let Some(cur) = &cursor {
            if let Ok(raw) = serde_json::value::to_raw_value(cur) {
                params.insert("cursor".into(), raw);
            }
        }
        let page = fetch_page(u, method, params);
        let page = counted_page(&cx.state.metrics, &u.id, method, deadline, page).await;
        let raw = match page {
            Some(Ok(Some(raw))) => raw,
            Some(Ok(None)) => return Fetch::Unsupported,
            Some(Err(e)) => return Fetch::Failed(e),
            None => {
                return Fetch::Failed(GatewayError::UpstreamTimeout {
                    upstream: u.id.clone(),
                })
            }
        };
        let bad = |detail: String| {
            Fetch::Failed(GatewayError::UpstreamProtocol {
                upstream: u.id.clone(),
                detail,
            })
        };
        let head: PageHead = match serde_json::from_str(raw.get()) {
            Ok(h) => h,
            Err(e) => return bad(format!("bad {method} result: {e}")),
        };
        let mut body: Map<String, Value> = match serde_json::from_str(raw.get()) {
            Ok(b) => b,
            Err(e) => return bad(format!("bad {method} result: {e}")),
        };
        match body.remove(key) {
            Some(Value::Array(items)) => c.items.extend(items),
            _ => return bad(format!("{method} result has no {key} array")),
        }
        // Handshake-era pages carry no hints: the configured list_ttl stands in
        // and the list counts as private (it may vary per session).
        match head.ttl_ms.as_ref().and_then(Value::as_f64) {
            Some(t) => c.ttl_ms = c.ttl_ms.min(t.max(0.0) as u64),
            None => c.public = false,
        }
        if head.cache_scope.as_deref() != Some("public") {
            c.public = false;
        }
        match head.next_cursor {
            Some(next) if !next.is_empty() => cursor = Some(next),
            _ => return Fetch::Listed(c),
        }
    }
    tracing::warn!(upstream = %u.id, method, max_pages, "list truncated at catalog.max_pages");
    Fetch::Listed(c)
}

/// One list page request to an upstream, stopped at the list's `deadline`
/// (`None`), and counted in the upstream's series however it ends: `ok` (a
/// page, or -32601 from an upstream that has no such list: Junction reads
/// that as an empty list, not a failure), `error`, `upstream_timeout` (the
/// deadline passed), or `cancelled` when it is dropped unfinished (the client
/// that asked for the list left before it was in).
pub(crate) async fn counted_page<T, E>(
    metrics: &junction_telemetry::Metrics,
    upstream: &str,
    method: &str,
    deadline: tokio::time::Instant,
    page: impl std::future::Future<Output = Result<T, E>>,
) -> Option<Result<T, E>> {
    let mut record = bridge::Record::upstream(metrics, upstream, method);
    record.arm();
    let page = tokio::time::timeout_at(deadline, page).await.ok();
    record.record(match &page {
        Some(Ok(_)) => "ok",
        Some(Err(_)) => "error",
        None => "upstream_timeout",
    });
    page
}

/// One page's raw result; `None` when the upstream has no such method.
async fn fetch_page(
    u: &UpstreamEntry,
    method: &str,
    params: RawParams,
) -> Result<Option<Box<RawValue>>, GatewayError> {
    let req = UpstreamRequest {
        method: method.to_owned(),
        params,
        ..UpstreamRequest::default()
    };
    match answer_of(u, req).await? {
        Ok(raw) => Ok(Some(raw)),
        Err(e) if e.code == codes::METHOD_NOT_FOUND => Ok(None),
        Err(e) => Err(GatewayError::from_upstream(&u.id, UpstreamError::Rpc(e))),
    }
}

/// The final answer of one request whose notifications nobody needs: the raw
/// result, or the upstream's JSON-RPC error as it sent it.
pub(crate) async fn answer_of(
    u: &UpstreamEntry,
    req: UpstreamRequest,
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

/// Forwards `method` to `upstream` with `params` (already renamed for it, still
/// holding `_meta` and Junction's sealed `requestState`), and relays the final
/// answer: results through the `Finisher`, upstream errors unchanged.
/// `target` is what a requestState envelope is bound to (exposed name or URI).
pub(crate) async fn forward(
    cx: &Cx<'_>,
    id: &Id,
    upstream_id: &str,
    method: &'static str,
    target: &str,
    params: RawParams,
    client: &ClientSide,
) -> Result<Response<Body>, GatewayError> {
    let upstream = cx.state.upstreams.get(upstream_id).ok_or_else(|| {
        GatewayError::InvalidParams(format!("{target:?} belongs to no upstream of this route"))
    })?;
    let metrics = cx.state.metrics.clone();
    let record = bridge::Record::upstream(&metrics, upstream_id, method);
    let modern = matches!(client, ClientSide::Modern { .. });
    let kind = if method == "prompts/get" {
        "prompt"
    } else {
        "resource"
    };
    let driver = bridge::Driver {
        stream: None,
        id: id.clone(),
        finish: Finisher {
            modern,
            sealer: cx.state.sealer.clone(),
            principal: cx.principal.clone(),
            upstream: upstream_id.to_owned(),
            target: target.to_owned(),
            ttl_ms: cx.state.config.request_state.ttl.as_millis() as u64,
        },
        method,
        caps: client.capabilities().to_owned(),
        sse_ok: cx.accepts_sse(),
        // Progress and log notifications are not relayed on these methods (yet):
        // the client gets the final answer.
        relay_notifications: false,
        log: client.log_filter(),
        cancel: client.cancellable(cx, id),
        on_result: (modern && method == "resources/read").then_some(with_cache_hints as fn(_) -> _),
        // Junction serves the method; an upstream that does not has no such
        // prompt or resource, which is the client's unknown-name error.
        unknown_name: Some(format!(
            "unknown {kind}: {target} (upstream {upstream_id} serves no {method})"
        )),
        retry: None,
        stash: None,
        rounds: 0,
    };
    let open = metrics.open_call_streams().clone();
    let (mut driver, mut record) = match bridge::start(cx, &params, driver, &open, record).await {
        Ok(fresh) => fresh,
        Err(done) => return done,
    };
    let meta = client.upstream_meta(&params);
    let params = upstream_params(cx, params, upstream_id, target)?;
    let request = client.upstream_request(cx, method, params, meta);
    if !modern {
        driver.retry = Some(bridge::Retry {
            client: upstream.client.clone(),
            request: bridge::copy_request(&request),
        });
    }
    record.arm();
    match upstream.client.request(request).await {
        Ok(s) => driver.stream = Some(s),
        Err(e) => {
            let e = GatewayError::from_upstream(upstream_id, e);
            record.record(e.outcome());
            return Err(e);
        }
    }
    bridge::respond(driver, open, record).await
}

/// `value` as raw JSON for a param Junction rewrites before forwarding (the
/// upstream's own name of a tool or prompt, a completion `ref`).
pub(crate) fn raw_param(value: &impl serde::Serialize) -> Result<Box<RawValue>, GatewayError> {
    serde_json::value::to_raw_value(value).map_err(|e| GatewayError::Unsupported(e.to_string()))
}

/// Params for the upstream, changed in place (no member is copied): `_meta`
/// left out (the upstream client re-states it) and the client's own
/// `requestState` unwrapped from Junction's envelope, which must be bound to
/// `upstream_id` and `target`; everything else byte for byte.
pub(crate) fn upstream_params(
    cx: &Cx<'_>,
    mut params: RawParams,
    upstream_id: &str,
    target: &str,
) -> Result<RawParams, GatewayError> {
    params.remove("_meta");
    if let Some(v) = params.get_mut("requestState") {
        let token: String = serde_json::from_str(v.get())
            .map_err(|_| GatewayError::InvalidParams("requestState must be a string".into()))?;
        let inner = envelope::unwrap(&cx.state.sealer, &token, &cx.principal, upstream_id, target)
            .map_err(|e| GatewayError::InvalidParams(e.into()))?;
        *v = RawValue::from_string(inner)
            .map_err(|_| GatewayError::InvalidParams("requestState is invalid".into()))?;
    }
    Ok(params)
}

#[derive(Deserialize)]
struct HintsHead<'a> {
    #[serde(rename = "resultType", borrow, default)]
    result_type: Option<std::borrow::Cow<'a, str>>,
    #[serde(rename = "ttlMs", default)]
    ttl_ms: Option<serde::de::IgnoredAny>,
    #[serde(rename = "cacheScope", default)]
    cache_scope: Option<serde::de::IgnoredAny>,
}

/// A complete `resources/read` result for a modern client must carry `ttlMs`
/// and `cacheScope` (NOTES §9); a handshake-era upstream sends neither, so
/// Junction says "do not cache" (`0`, `private`). Other members stay raw.
fn with_cache_hints(raw: Box<RawValue>) -> Box<RawValue> {
    let Ok(head) = serde_json::from_str::<HintsHead<'_>>(raw.get()) else {
        return raw;
    };
    if head.result_type.as_deref() != Some("complete") {
        return raw;
    }
    let mut add = String::new();
    if head.ttl_ms.is_none() {
        add.push_str("\"ttlMs\":0,");
    }
    if head.cache_scope.is_none() {
        add.push_str("\"cacheScope\":\"private\",");
    }
    if add.is_empty() {
        return raw;
    }
    let text = raw.get().trim_start();
    let Some(rest) = text.strip_prefix('{') else {
        return raw;
    };
    let rest = rest.trim_start();
    let out = if rest.starts_with('}') {
        format!("{{{}}}", add.trim_end_matches(','))
    } else {
        format!("{{{add}{rest}")
    };
    RawValue::from_string(out).unwrap_or(raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_owned()).unwrap()
    }

    #[test]
    fn read_results_get_cache_hints_only_when_missing() {
        assert_eq!(
            with_cache_hints(raw(r#"{"resultType":"complete","contents":[]}"#)).get(),
            r#"{"ttlMs":0,"cacheScope":"private","resultType":"complete","contents":[]}"#
        );
        let given = r#"{"resultType":"complete","ttlMs":5,"cacheScope":"public","contents":[]}"#;
        assert_eq!(with_cache_hints(raw(given)).get(), given);
        let asking = r#"{"resultType":"input_required","requestState":"x"}"#;
        assert_eq!(with_cache_hints(raw(asking)).get(), asking);
    }
}
