//! The route's prompt and resource lists: a list method fanned out to every
//! upstream of the route (every page drained, within the list deadline),
//! cached per upstream in the replica's `ListCache`, and merged by the pure
//! functions of `junction_catalog::lists` (the same crate, and the same
//! rules of order and naming, as the tool catalog). A failing upstream's last
//! good list is served and the upstream named as degraded.
//!
//! Resources also answer "who serves this URI": the upstream that listed it
//! or, failing that, the one with the most specific matching template, from
//! the replica's `ResourceIndex` memo of the last merged lists (kept for the
//! lists' `ttlMs`). A lookup that misses it lists again, so any replica can
//! serve any read: the memo is an optimisation, never state a client relies on.

use std::borrow::Cow;
use std::collections::HashMap;

use junction_catalog::lists::{
    curate_resources, literal_prefix, match_template, merge_keyed, merge_prompts, split_namespaced,
    Contribution, Fanned, Listed, Lookup, MergedList,
};
use junction_protocol::codes;
use junction_protocol::jsonrpc::RawParams;
use junction_upstream::{UpstreamError, UpstreamRequest};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::context::Cx;
use crate::error::GatewayError;
use crate::forward::answer_of;
use crate::record::counted_page;
use crate::state::UpstreamEntry;

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

/// Whether `upstream` lists the prompt the client knows as `exposed`, or
/// cannot say (its list is unavailable).
pub async fn prompt_listed(cx: &Cx<'_>, upstream: &str, exposed: &str) -> bool {
    #[derive(Deserialize)]
    struct Named<'a> {
        #[serde(borrow)]
        name: Option<std::borrow::Cow<'a, str>>,
    }
    let merged = prompts(cx).await;
    merged.degraded.iter().any(|d| d == upstream)
        || merged.items.iter().any(|item| {
            serde_json::from_str::<Named<'_>>(item.get())
                .is_ok_and(|n| n.name.as_deref() == Some(exposed))
        })
}

/// The route's merged prompts.
pub async fn prompts(cx: &Cx<'_>) -> MergedList {
    let fanned = fan_out(cx, "prompts/list", "prompts").await;
    merge_prompts(fanned, &cx.route.naming, cx.route.filter.overrides())
}

/// The route's merged resources and who serves each URI (also kept in the memo).
pub async fn resources(cx: &Cx<'_>) -> (MergedList, HashMap<String, String>) {
    let fanned = fan_out(cx, "resources/list", "resources").await;
    let (mut items, owners) = merge_keyed(&fanned, "uri", "resource");
    curate_resources(&mut items, "uri", cx.route.filter.overrides());
    let merged = MergedList::new("resources", items, &fanned.contributions, fanned.degraded);
    let owners: HashMap<String, String> = owners.into_iter().collect();
    let route = cx.route;
    cx.state.replica.resources.set_uris(
        &route.path,
        &route.upstreams,
        owners.clone(),
        merged.ttl_ms,
    );
    (merged, owners)
}

/// The route's merged resource templates and (literal prefix, upstream) per template.
pub async fn templates(cx: &Cx<'_>) -> (MergedList, Vec<(String, String)>) {
    let fanned = fan_out(cx, "resources/templates/list", "resourceTemplates").await;
    let (mut items, owners) = merge_keyed(&fanned, "uriTemplate", "resource template");
    curate_resources(&mut items, "uriTemplate", cx.route.filter.overrides());
    let merged = MergedList::new(
        "resourceTemplates",
        items,
        &fanned.contributions,
        fanned.degraded,
    );
    let prefixes: Vec<(String, String)> = owners
        .into_iter()
        .map(|(t, u)| (literal_prefix(&t).to_owned(), u))
        .filter(|(p, _)| !p.is_empty())
        .collect();
    let route = cx.route;
    cx.state.replica.resources.set_templates(
        &route.path,
        &route.upstreams,
        prefixes.clone(),
        merged.ttl_ms,
    );
    (merged, prefixes)
}

/// The upstream serving `uri` and the URI to ask it for (its own, when `uri`
/// was namespaced), listing resources (then templates) again when the memo
/// cannot say. A route of one upstream needs no lookup: that upstream answers
/// for every URI (an unknown one gets its own error).
pub async fn resource_owner(cx: &Cx<'_>, uri: &str) -> Option<(String, String)> {
    let route = cx.route;
    // A namespaced URI names its upstream, and must be one Junction listed
    // (or of a listed template): an unknown one is the client's error, not
    // whatever the upstream answers. An upstream whose list is unavailable
    // decides for itself.
    if let Some((upstream, own)) = split_namespaced(uri, &route.upstreams) {
        let (merged, owners) = resources(cx).await;
        let known = owners.get(uri).is_some_and(|u| u == upstream)
            || merged.degraded.iter().any(|d| d == upstream)
            || match_template(&templates(cx).await.1, uri).as_deref() == Some(upstream);
        return known.then(|| (upstream.to_owned(), own.to_owned()));
    }
    let found = |u: String| Some((u, uri.to_owned()));
    if let [only] = route.upstreams.as_slice() {
        return found(only.clone());
    }
    let index = &cx.state.replica.resources;
    match index.lookup_uri(&route.path, &route.upstreams, uri) {
        Lookup::Found(u) => return found(u),
        Lookup::Stale => {
            if let Some(u) = resources(cx).await.1.get(uri) {
                return found(u.clone());
            }
        }
        Lookup::Unknown => {}
    }
    match index.lookup_template(&route.path, &route.upstreams, uri) {
        Lookup::Found(u) => found(u),
        Lookup::Unknown => None,
        Lookup::Stale => match_template(&templates(cx).await.1, uri).and_then(found),
    }
}

/// The upstream that would deliver updates for `uri`: the route's only
/// upstream, else the first (config order) whose resource list has it.
/// Upstreams that cannot deliver resource updates (stdio) own nothing here.
pub async fn update_source(cx: &Cx<'_>, uri: &str) -> Option<String> {
    let can = |id: &str| {
        cx.state
            .upstreams
            .get(id)
            .is_some_and(|u| u.client.can_watch_resources())
    };
    // A namespaced URI names its upstream.
    if let Some((upstream, _)) = split_namespaced(uri, &cx.route.upstreams) {
        return can(upstream).then(|| upstream.to_owned());
    }
    if let [only] = cx.route.upstreams.as_slice() {
        return can(only).then(|| only.clone());
    }
    let fanned = fan_out(cx, "resources/list", "resources").await;
    fanned
        .contributions
        .iter()
        .find(|c| {
            c.items
                .iter()
                .any(|r| r.get("uri").and_then(Value::as_str) == Some(uri))
        })
        .map(|c| c.upstream.clone())
        .filter(|u| can(u))
}

/// `method` on every upstream of the route at once, each within the list deadline.
async fn fan_out(cx: &Cx<'_>, method: &'static str, key: &str) -> Fanned {
    let deadline = cx.state.config.catalog.list_deadline;
    let cache = &cx.state.replica.lists;
    let entries: Vec<&UpstreamEntry> = cx
        .route
        .upstreams
        .iter()
        .filter_map(|id| cx.state.upstreams.get(id))
        .collect();
    let fetches = futures_util::future::join_all(entries.iter().map(|u| async move {
        let cached = cache.get(&u.id, &u.fingerprint, method);
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
        cache.put(&u.id, &u.fingerprint, method, &fetched, u.list_ttl);
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
    method: &'static str,
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
                params.insert("cursor".into(), Cow::Owned(raw));
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

/// One page's raw result; `None` when the upstream has no such method.
async fn fetch_page(
    u: &UpstreamEntry,
    method: &'static str,
    params: RawParams<'_>,
) -> Result<Option<Box<RawValue>>, GatewayError> {
    let req = UpstreamRequest {
        method: method.into(),
        params,
        ..UpstreamRequest::default()
    };
    match answer_of(u, req).await? {
        Ok(raw) => Ok(Some(raw)),
        Err(e) if e.code == codes::METHOD_NOT_FOUND => Ok(None),
        Err(e) => Err(GatewayError::from_upstream(&u.id, UpstreamError::Rpc(e))),
    }
}
