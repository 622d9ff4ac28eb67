//! `tools/list` and `tools/call` for both client eras: the catalog of a route
//! (fan-out, merge, memo), paging with sealed cursors, and forwarding a call to
//! its upstream with the original name and the raw arguments.

use std::borrow::Cow;
use std::sync::Arc;

use http::Response;
use junction_catalog::{cursor, merge, Catalog, ListStatus};
use junction_protocol::jsonrpc::{Id, RawParams};
use junction_protocol::{meta, object, xmcp};
use junction_upstream::UpstreamRequest;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::bridge;
use crate::cancel::Cancel;
use crate::envelope;
use crate::error::GatewayError;
use crate::logging::{Level, LogFilter};
use crate::mcp::{param_str, Cx};
use crate::response::Body;

/// Which era the client speaks, with the capabilities it declared (per request
/// for modern clients, once per session for handshake-era ones).
pub enum ClientSide {
    Modern {
        /// As the client sent them (a JSON object), read only when an upstream
        /// asks the client something (`bridge::declared`).
        capabilities: Box<RawValue>,
        /// `_meta` logLevel of this request.
        log: Option<Level>,
        /// The request's other `_meta` members, forwarded upstream.
        forward_meta: Vec<(String, Box<RawValue>)>,
    },
    Legacy {
        /// From `initialize`, as the session token keeps them.
        capabilities: Box<RawValue>,
        /// `session::key` of the client's session.
        session: String,
        /// What the session set with `logging/setLevel`.
        log: Option<Level>,
    },
}

impl ClientSide {
    fn is_modern(&self) -> bool {
        matches!(self, ClientSide::Modern { .. })
    }
    pub(crate) fn capabilities(&self) -> &RawValue {
        match self {
            ClientSide::Modern { capabilities, .. } | ClientSide::Legacy { capabilities, .. } => {
                capabilities
            }
        }
    }

    /// Which of the upstream's log messages reach this client.
    pub(crate) fn log_filter(&self) -> LogFilter {
        match self {
            ClientSide::Modern { log, .. } => LogFilter::modern(*log),
            ClientSide::Legacy { log, .. } => LogFilter::legacy(*log),
        }
    }

    /// The `_meta` entries an upstream request carries for this client: a
    /// modern client's own, and for a handshake-era session the log level it
    /// set (sessions have no `_meta` of their own for it).
    pub(crate) fn upstream_meta(&self, params: &RawParams) -> Vec<(String, Box<RawValue>)> {
        let (mut meta, level) = match self {
            ClientSide::Modern { forward_meta, .. } => return forward_meta.clone(),
            ClientSide::Legacy { log, .. } => (forwarded_meta(params), log),
        };
        if let Some(level) = level {
            meta.retain(|(k, _)| k != meta::LOG_LEVEL);
            if let Ok(raw) = serde_json::value::to_raw_value(level.name()) {
                meta.push((meta::LOG_LEVEL.to_owned(), raw));
            }
        }
        meta
    }

    /// The upstream request of `method` for this client: its capabilities,
    /// era, and the allow-listed headers of this request.
    pub(crate) fn upstream_request(
        &self,
        cx: &Cx<'_>,
        method: &str,
        params: RawParams,
        meta: Vec<(String, Box<RawValue>)>,
    ) -> UpstreamRequest {
        UpstreamRequest {
            method: method.to_owned(),
            params,
            meta,
            client_capabilities: Some(self.capabilities().to_owned()),
            param_headers: Vec::new(),
            forward_headers: junction_policy::forwardable_headers(cx.headers, &cx.state.forward),
            timeout: None,
            handshake_client: !self.is_modern(),
        }
    }

    /// A handshake-era call that `notifications/cancelled` can reach.
    pub(crate) fn cancellable(&self, cx: &Cx<'_>, id: &Id) -> Option<Cancel> {
        match self {
            ClientSide::Legacy { session, .. } => cx.state.hub.in_flight.register(session, id),
            ClientSide::Modern { .. } => None,
        }
    }
}

/// The merged catalog of the route: every upstream's (cached) list, merged only
/// when some contributor changed since the last merge.
pub async fn route_catalog(cx: &Cx<'_>) -> Arc<Catalog> {
    let state = cx.state;
    let changes = state.cache.changes();
    if let Some(catalog) = warm_catalog(cx, changes) {
        return catalog;
    }
    let deadline = state.config.catalog.list_deadline;
    let entries: Vec<_> = cx
        .route
        .upstreams
        .iter()
        .filter_map(|id| state.upstreams.get(id))
        .collect();
    let started = std::time::Instant::now();
    let mut lists = futures_util::future::join_all(
        entries
            .iter()
            .map(|u| state.cache.get(u.source.as_ref(), u.list_ttl, deadline)),
    )
    .await;
    let fanout = started.elapsed().as_secs_f64();
    state
        .metrics
        .fanout_duration_seconds
        .with_label_values(&[&cx.route.path])
        .observe(fanout);
    // A handshake-era list has no ttlMs of its own: it is cached for the
    // upstream's configured list_ttl, so that is its contribution to ttlMs.
    for (u, l) in entries.iter().zip(lists.iter_mut()) {
        if l.ttl_ms.is_none() {
            l.ttl_ms = Some(u.list_ttl.as_millis() as u64);
        }
    }
    let fingerprint: Vec<(u64, u8)> = entries
        .iter()
        .zip(&lists)
        .map(|(u, l)| {
            let status = match l.status {
                ListStatus::Fresh => 0,
                ListStatus::Stale => 1,
                ListStatus::Missing => 2,
            };
            (state.cache.generation(&u.id), status)
        })
        .collect();
    if let Ok(memo) = cx.route.merged.lock() {
        if let Some((fp, catalog)) = memo.as_ref() {
            if *fp == fingerprint {
                count_lookup(cx, true);
                let catalog = catalog.clone();
                remember_warm(cx, changes, &entries, &catalog);
                return catalog;
            }
        }
    }
    count_lookup(cx, false);
    for l in &lists {
        let healthy = state
            .upstreams
            .get(&l.upstream)
            .is_none_or(|u| u.client.is_healthy());
        let up = if matches!(l.status, ListStatus::Missing) || !healthy {
            0
        } else {
            1
        };
        state
            .metrics
            .upstream_up
            .with_label_values(&[&l.upstream])
            .set(up);
    }
    let catalog = Arc::new(merge(
        &cx.route.upstreams,
        &lists,
        &cx.route.naming,
        &cx.route.filter,
    ));
    for d in &catalog.dropped {
        tracing::warn!(upstream = %d.upstream, tool = %d.tool, reason = %d.reason, "upstream tool left out of the catalog");
        state
            .metrics
            .tools_dropped_total
            .with_label_values(&[&d.upstream, d.kind.as_str()])
            .inc();
    }
    for id in &catalog.degraded {
        tracing::warn!(upstream = %id, route = %cx.route.path, "upstream degraded: serving its last good list or none");
    }
    for u in &entries {
        let n = catalog.tools.iter().filter(|t| t.upstream == u.id).count();
        state
            .metrics
            .upstream_tools
            .with_label_values(&[&u.id])
            .set(n as i64);
    }
    if let Ok(mut memo) = cx.route.merged.lock() {
        *memo = Some((fingerprint, catalog.clone()));
    }
    remember_warm(cx, changes, &entries, &catalog);
    catalog
}

/// The route's last catalog if nothing it was built from can have changed.
fn warm_catalog(cx: &Cx<'_>, changes: u64) -> Option<Arc<Catalog>> {
    let warm = cx.route.warm.lock().ok()?;
    let (seen, until, catalog) = warm.as_ref()?;
    if *seen != changes || tokio::time::Instant::now() >= *until {
        return None;
    }
    let catalog = catalog.clone();
    drop(warm);
    count_lookup(cx, true);
    Some(catalog)
}

/// `catalog_lookups_total{result}`: `hit` when a memo served the catalog,
/// `miss` when it was merged.
fn count_lookup(cx: &Cx<'_>, hit: bool) {
    cx.state.metrics.catalog_lookup(hit).inc();
}

/// Keeps `catalog` as the warm answer when every list it came from is fresh:
/// until the first of them ages out, or the cache changes after `changes` (a
/// list refreshed meanwhile moved the count, so the memo is never served).
fn remember_warm(
    cx: &Cx<'_>,
    changes: u64,
    entries: &[&crate::state::UpstreamEntry],
    catalog: &Arc<Catalog>,
) {
    let mut until: Option<tokio::time::Instant> = None;
    for u in entries {
        // A stale or missing list: no warm path until it is fresh again.
        let Some(t) = cx.state.cache.fresh_until(&u.id, u.list_ttl) else {
            return;
        };
        until = Some(until.map_or(t, |m| m.min(t)));
    }
    if let (Some(until), Ok(mut warm)) = (until, cx.route.warm.lock()) {
        *warm = Some((changes, until, catalog.clone()));
    }
}

pub async fn list(
    cx: &Cx<'_>,
    id: &Id,
    params: Option<&RawParams>,
    client: &ClientSide,
) -> Result<Response<Body>, GatewayError> {
    let cursor = param_str(params, "cursor")?;
    let (catalog, per_caller) = visible_catalog(cx, route_catalog(cx).await);
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
    let shape = crate::merged::ListShape {
        next_cursor: next.map(|n| cursor::encode(&cx.state.sealer, catalog.version, n)),
        degraded: &catalog.degraded,
        modern: client.is_modern(),
        ttl_ms: catalog.ttl_ms,
        public: catalog.public && !per_caller,
    };
    Ok(crate::merged::finish_list(id, out, shape))
}

/// The part of the catalog this caller may see: everything without `auth`,
/// else the tools its scopes grant (then the list is `private`). A tool the
/// caller cannot see looks exactly like one that does not exist.
/// Returns the catalog and whether the answer depends on who asked.
fn visible_catalog(cx: &Cx<'_>, catalog: Arc<Catalog>) -> (Arc<Catalog>, bool) {
    match (&cx.state.auth, &cx.identity) {
        (Some(auth), Some(p)) if !auth.authorizer.grants_everything() => (
            Arc::new(catalog.filtered(|t| auth.authorizer.allows(p, &t.exposed))),
            true,
        ),
        (Some(_), _) => (catalog, true),
        (None, _) => (catalog, false),
    }
}

/// Phase 3: a call outside the caller's grant is 403 with a step-up challenge
/// naming every scope that would grant it.
fn authorize(cx: &Cx<'_>, exposed: &str) -> Result<(), GatewayError> {
    let (Some(auth), Some(p)) = (&cx.state.auth, &cx.identity) else {
        return Ok(());
    };
    if auth.authorizer.allows(p, exposed) {
        return Ok(());
    }
    let scopes = auth.authorizer.scopes_granting(exposed);
    let challenge = auth
        .authenticator
        .insufficient_scope_challenge(&cx.route.path, &scopes);
    cx.state
        .metrics
        .auth_failures_total
        .with_label_values(&["insufficient_scope"])
        .inc();
    Err(GatewayError::Forbidden {
        tool: exposed.to_owned(),
        scopes,
        challenge,
    })
}

/// Phase 4: rate limits, after authorization so protocol chatter never drains a
/// caller's tool budget (the rules say which methods they cover).
pub async fn rate_limit(
    cx: &Cx<'_>,
    method: &str,
    upstream: &str,
    tool: &str,
) -> Result<(), GatewayError> {
    let Some(limiter) = &cx.state.rate_limiter else {
        return Ok(());
    };
    if !limiter.applies_to(method) {
        return Ok(());
    }
    let principal = if cx.principal.is_empty() {
        "anonymous"
    } else {
        cx.principal.as_str()
    };
    // Read (behind trusted proxies) only when a rule keys on it.
    let client_ip = if limiter.keys_on_client_ip() {
        cx.client_ip().map(|ip| ip.to_string()).unwrap_or_default()
    } else {
        String::new()
    };
    let key = junction_policy::RateKeyParts {
        method,
        principal,
        upstream,
        tool,
        route: &cx.route.path,
        client_ip: &client_ip,
    };
    limiter.check(&key).await.map_err(|r| {
        cx.state
            .metrics
            .rate_limited_total
            .with_label_values(&[&r.rule])
            .inc();
        GatewayError::RateLimited {
            rule: r.rule,
            retry_after_ms: r.retry_after.as_millis() as u64,
        }
    })
}

/// A handshake-era request's `_meta` members to forward (none when `_meta` is
/// absent or not an object).
fn forwarded_meta(params: &RawParams) -> Vec<(String, Box<RawValue>)> {
    crate::modern::request_meta(Some(params))
        .map(forwardable_meta)
        .unwrap_or_default()
}

/// The `_meta` members a request carries upstream: all but the stamped ones
/// (version, capabilities, client info), which the upstream client re-states.
pub(crate) fn forwardable_meta(m: crate::modern::RequestMeta<'_>) -> Vec<(String, Box<RawValue>)> {
    // Each key once, with its last value (the one `RequestMeta::get` reads).
    let mut last = std::collections::BTreeMap::new();
    for (k, v) in m.iter().filter(|(k, _)| !meta::is_stamped(k)) {
        last.insert(k, v);
    }
    last.into_iter()
        .filter_map(|(k, v)| Some((k.to_owned(), RawValue::from_string(v.to_owned()).ok()?)))
        .collect()
}

fn unknown_tool(cx: &Cx<'_>, catalog: &Catalog, name: &str) -> GatewayError {
    // A prefixed name of an upstream that is down is an availability problem,
    // not a typo: say so.
    let sep = &cx.route.naming.separator;
    if let Some((upstream, _)) = name.split_once(sep.as_str()) {
        if catalog.degraded.iter().any(|d| d == upstream) {
            return GatewayError::UpstreamUnavailable {
                upstream: upstream.to_owned(),
                detail: format!("its tool list could not be fetched, so {name:?} cannot be routed"),
            };
        }
    }
    GatewayError::InvalidParams(format!("unknown tool: {name}"))
}

pub async fn call(
    cx: &Cx<'_>,
    id: &Id,
    params: Option<RawParams>,
    client: &ClientSide,
) -> Result<Response<Body>, GatewayError> {
    let params = params.unwrap_or_default();
    let name = param_str(Some(&params), "name")?
        .ok_or_else(|| GatewayError::InvalidParams("tools/call needs params.name".into()))?;
    let catalog = route_catalog(cx).await;
    let tool = catalog
        .resolve(&name)
        .ok_or_else(|| unknown_tool(cx, &catalog, &name))?;
    cx.note_target(&tool.upstream, &tool.exposed);
    authorize(cx, &tool.exposed)?;
    rate_limit(cx, "tools/call", &tool.upstream, &tool.exposed).await?;
    let upstream = cx
        .state
        .upstreams
        .get(&tool.upstream)
        .ok_or_else(|| GatewayError::InvalidParams(format!("unknown tool: {name}")))?;

    if let Some(raw) = params.get("arguments") {
        if !raw.get().trim_start().starts_with('{') {
            return Err(GatewayError::InvalidParams(
                "params.arguments must be an object".into(),
            ));
        }
    }
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
    let param_headers = if upstream.is_http {
        xmcp::extract(&tool.header_params, arguments.as_ref())
            .map_err(|e| GatewayError::InvalidParams(e.to_string()))?
    } else {
        Vec::new()
    };

    let upstream_id = &tool.upstream;
    let started = std::time::Instant::now();
    let record = {
        let (m, ok, u, t) = (
            cx.state.metrics.clone(),
            upstream.call_ok.clone(),
            tool.upstream.clone(),
            tool.exposed.clone(),
        );
        bridge::Record::new(move |o: &str| record_call(&m, &ok, &u, &t, o, started))
    };
    let driver = bridge::Driver {
        stream: None,
        id: id.clone(),
        finish: Finisher {
            modern: client.is_modern(),
            sealer: cx.state.sealer.clone(),
            principal: cx.principal.clone(),
            upstream: upstream_id.clone(),
            target: tool.exposed.clone(),
            ttl_ms: cx.state.config.request_state.ttl.as_millis() as u64,
        },
        method: "tools/call",
        caps: client.capabilities().to_owned(),
        sse_ok: cx.accepts_sse(),
        relay_notifications: true,
        log: client.log_filter(),
        cancel: client.cancellable(cx, id),
        on_result: None,
        unknown_name: None,
        retry: None,
        stash: None,
        rounds: 0,
    };
    let open = cx.state.metrics.open_call_streams().clone();
    let (mut driver, mut record) = match bridge::start(cx, &params, driver, &open, record).await {
        Ok(fresh) => fresh,
        Err(done) => return done,
    };

    // The upstream knows the tool by its original name.
    let meta = client.upstream_meta(&params);
    let mut params = params;
    // `name` is there (it was read above): replaced in place, its key kept.
    if let Some(name) = params.get_mut("name") {
        *name = tool.original_json.clone();
    }
    let params = crate::forward::upstream_params(cx, params, &tool.upstream, &tool.exposed)?;
    let request = UpstreamRequest {
        param_headers,
        ..client.upstream_request(cx, "tools/call", params, meta)
    };
    if !client.is_modern() {
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
            let up = i64::from(upstream.client.is_healthy());
            cx.state
                .metrics
                .upstream_up
                .with_label_values(&[upstream_id])
                .set(up);
            return Err(e);
        }
    };
    bridge::respond(driver, open, record).await
}

/// Turns an upstream result into the client's: `resultType` added where a
/// handshake-era upstream left it out, an `input_required` state sealed in
/// Junction's envelope, and results the client cannot read refused.
/// Shared with prompts and resources (`forward`), where `target` is the
/// exposed prompt name or the resource URI.
#[derive(Clone)]
pub(crate) struct Finisher {
    pub(crate) modern: bool,
    pub(crate) sealer: junction_protocol::seal::Sealer,
    pub(crate) principal: String,
    pub(crate) upstream: String,
    pub(crate) target: String,
    pub(crate) ttl_ms: u64,
}

impl Finisher {
    pub(crate) fn result(&self, raw: Box<RawValue>) -> Result<Box<RawValue>, GatewayError> {
        let protocol = |detail: String| GatewayError::UpstreamProtocol {
            upstream: self.upstream.clone(),
            detail,
        };
        let result_type = result_type(&raw).map_err(|e| protocol(e.into()))?;
        match result_type.as_deref() {
            None => {
                if self.modern {
                    add_complete(&raw)
                        .ok_or_else(|| protocol("result is not a JSON object".into()))
                } else {
                    Ok(raw)
                }
            }
            Some("complete") => Ok(raw),
            Some("input_required") if self.modern => self.seal_state(&raw),
            Some("input_required") => Err(GatewayError::Unsupported(format!(
                "upstream {} asks for client input (InputRequiredResult), which cannot be relayed to a handshake-era client yet",
                self.upstream
            ))),
            Some(other) => Err(protocol(format!(
                "resultType {other:?} belongs to an extension this client did not negotiate"
            ))),
        }
    }

    fn seal_state(&self, raw: &RawValue) -> Result<Box<RawValue>, GatewayError> {
        let mut members: std::collections::BTreeMap<String, Box<RawValue>> =
            serde_json::from_str(raw.get()).map_err(|_| GatewayError::UpstreamProtocol {
                upstream: self.upstream.clone(),
                detail: "input_required result is not a JSON object".into(),
            })?;
        if let Some(state) = members.get("requestState") {
            let token = envelope::wrap(
                &self.sealer,
                &self.principal,
                &self.upstream,
                &self.target,
                state.get(),
                self.ttl_ms,
            );
            let raw = serde_json::value::to_raw_value(&token)
                .map_err(|e| GatewayError::Unsupported(e.to_string()))?;
            members.insert("requestState".into(), raw);
        }
        serde_json::value::to_raw_value(&members)
            .map_err(|e| GatewayError::Unsupported(e.to_string()))
    }
}

/// A result's `resultType`, if it names one. The answer was validated as a
/// whole when it arrived: its members are found without parsing it again
/// (`object::members`). Two `resultType` keys are refused (a JavaScript
/// client would read the last, serde_json neither).
pub(crate) fn result_type(raw: &RawValue) -> Result<Option<Cow<'_, str>>, &'static str> {
    let members = object::members(raw.get()).ok_or("result is not a JSON object")?;
    let mut result_type = None;
    for (key, value) in members {
        if key == "resultType" {
            if result_type.is_some() {
                return Err("result names resultType twice");
            }
            result_type = Some(object::string(value).ok_or("resultType is not a string")?);
        }
    }
    Ok(result_type)
}

/// `{"resultType":"complete", ...rest}` without re-serializing the rest.
fn add_complete(raw: &RawValue) -> Option<Box<RawValue>> {
    let text = raw.get().trim_start();
    let rest = text.strip_prefix('{')?.trim_start();
    let out = if rest.starts_with('}') {
        "{\"resultType\":\"complete\"}".to_owned()
    } else {
        format!("{{\"resultType\":\"complete\",{rest}")
    };
    RawValue::from_string(out).ok()
}

/// The merged catalog of one route, for `junction catalog` and admin use.
pub async fn route_catalog_for(state: &crate::state::State, path: &str) -> Option<Arc<Catalog>> {
    let route = state.routes.get(path)?;
    let headers = http::HeaderMap::new();
    let cx = Cx::new(state, route, &headers);
    Some(route_catalog(&cx).await)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn finisher(modern: bool) -> Finisher {
        Finisher {
            modern,
            sealer: junction_protocol::seal::Sealer::random(),
            principal: "alice".into(),
            upstream: "up".into(),
            target: "tool".into(),
            ttl_ms: 60_000,
        }
    }

    fn finish(modern: bool, result: &str) -> Result<String, GatewayError> {
        let raw = RawValue::from_string(result.to_owned()).unwrap();
        finisher(modern).result(raw).map(|r| r.get().to_owned())
    }

    #[test]
    fn results_get_their_result_type_however_the_key_is_spelled() {
        // No resultType: a modern client is told the call is complete.
        assert_eq!(
            finish(true, r#"{"content":[]}"#).unwrap(),
            r#"{"resultType":"complete","content":[]}"#
        );
        assert_eq!(
            finish(false, r#"{"content":[]}"#).unwrap(),
            r#"{"content":[]}"#
        );
        // Present, plainly or through escapes: read, not added twice.
        let plain = r#"{"resultType":"complete","content":[]}"#;
        assert_eq!(finish(true, plain).unwrap(), plain);
        let escaped = r#"{"result\u0054ype":"complete","content":[]}"#;
        assert_eq!(finish(true, escaped).unwrap(), escaped);
        let unknown = r#"{"result\u0054ype":"task","content":[]}"#;
        assert!(matches!(
            finish(true, unknown),
            Err(GatewayError::UpstreamProtocol { .. })
        ));
        // Escapes elsewhere do not make a result without the key fail.
        assert_eq!(
            finish(true, r#"{"text":"caf\u00e9"}"#).unwrap(),
            r#"{"resultType":"complete","text":"caf\u00e9"}"#
        );
        for bad in ["[1]", "\"x\"", "null"] {
            assert!(
                matches!(
                    finish(true, bad),
                    Err(GatewayError::UpstreamProtocol { .. })
                ),
                "{bad}"
            );
            assert!(
                matches!(
                    finish(false, bad),
                    Err(GatewayError::UpstreamProtocol { .. })
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_result_type_read_twice_or_not_a_string_is_refused() {
        // A JavaScript client reads the last duplicate, serde_json refuses
        // them: neither reading is forwarded.
        for bad in [
            r#"{"resultType":"complete","content":[],"resultType":"task"}"#,
            r#"{"resultType":"task","result\u0054ype":"complete"}"#,
            r#"{"resultType":1,"content":[]}"#,
            r#"{"resultType":null}"#,
        ] {
            let err = finish(true, bad).expect_err(bad);
            assert!(
                matches!(err, GatewayError::UpstreamProtocol { .. }),
                "{bad}: {err:?}"
            );
        }
        // A resultType nested in the content is not the result's own.
        let nested = r#"{"content":[{"type":"text","resultType":"task"}],"resultType":"complete"}"#;
        assert_eq!(finish(true, nested).unwrap(), nested);
        let inner_only = r#"{"structuredContent":{"resultType":"input_required"}}"#;
        assert_eq!(
            finish(true, inner_only).unwrap(),
            r#"{"resultType":"complete","structuredContent":{"resultType":"input_required"}}"#
        );
    }

    #[test]
    fn add_complete_keeps_members_byte_for_byte() {
        let raw =
            RawValue::from_string(r#"{"content":[{"type":"text","text":"x  y"}]}"#.into()).unwrap();
        assert_eq!(
            add_complete(&raw).unwrap().get(),
            r#"{"resultType":"complete","content":[{"type":"text","text":"x  y"}]}"#
        );
        let empty = RawValue::from_string("{ }".into()).unwrap();
        assert_eq!(
            add_complete(&empty).unwrap().get(),
            r#"{"resultType":"complete"}"#
        );
        let not_obj = RawValue::from_string("[1]".into()).unwrap();
        assert!(add_complete(&not_obj).is_none());
    }
}
