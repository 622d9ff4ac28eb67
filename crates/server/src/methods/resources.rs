//! `resources/list`, `resources/templates/list` and `resources/read` for both
//! client eras. A URI (or template) that one upstream of the route lists is
//! kept as it is. When a later upstream (config order) lists a URI an earlier
//! one already lists, the later one's is namespaced reversibly as
//! `junction://{upstream}/{uri}` (`namespaced`), so both stay listed and
//! readable; the first keeps its URI, so adding an upstream never renames the
//! resources clients already know. Any request naming a namespaced URI goes to
//! that upstream with its own URI, without a lookup.
//!
//! Other URIs are read from the upstream that listed them or, failing that,
//! from the upstream with the most specific matching template. The URI →
//! upstream map is a per-route memo of the last merged lists, kept for the
//! lists' `ttlMs`. A read that misses it lists again, so any replica can serve
//! any read: the memo is an optimisation, never state a client relies on.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use http::Response;
use junction_protocol::jsonrpc::{Id, RawParams};
use serde_json::Value;

use crate::error::GatewayError;
use crate::forward::{self, Fanned};
use crate::mcp::{param_str, Cx};
use crate::merged::{self, Merged};
use crate::response::Body;
use crate::tools::{rate_limit, ClientSide};

/// Where the URIs and templates of one route's last lists came from.
#[derive(Default)]
struct Index {
    /// The route's upstreams when this was built: a reload that changes them
    /// makes the memo useless.
    upstreams: Vec<String>,
    uris: HashMap<String, String>,
    uris_until: Option<Instant>,
    /// (literal prefix before the first `{`, upstream), in merged order.
    templates: Vec<(String, String)>,
    templates_until: Option<Instant>,
}

fn memo() -> &'static Mutex<HashMap<String, Index>> {
    static MEMO: OnceLock<Mutex<HashMap<String, Index>>> = OnceLock::new();
    MEMO.get_or_init(Mutex::default)
}

/// Runs `f` on the route's index, fresh for the current upstream set.
fn with_index<T>(cx: &Cx<'_>, f: impl FnOnce(&mut Index) -> T) -> Option<T> {
    let mut all = memo().lock().ok()?;
    let index = all.entry(cx.route.path.clone()).or_default();
    if index.upstreams != cx.route.upstreams {
        *index = Index {
            upstreams: cx.route.upstreams.clone(),
            ..Index::default()
        };
    }
    Some(f(index))
}

fn until(ttl_ms: u64) -> Option<Instant> {
    Instant::now().checked_add(Duration::from_millis(ttl_ms))
}

pub async fn list(
    cx: &Cx<'_>,
    id: &Id,
    params: Option<&RawParams>,
    client: &ClientSide,
) -> Result<Response<Body>, GatewayError> {
    let (merged, _) = list_resources(cx).await;
    merged::list_page(cx, id, params, client, "resources", &merged)
}

pub async fn templates(
    cx: &Cx<'_>,
    id: &Id,
    params: Option<&RawParams>,
    client: &ClientSide,
) -> Result<Response<Body>, GatewayError> {
    let (merged, _) = list_templates(cx).await;
    merged::list_page(cx, id, params, client, "resourceTemplates", &merged)
}

/// The scheme of URIs Junction namespaced because two upstreams list them.
const NAMESPACE: &str = "junction://";

/// The URI clients see for `uri` of `upstream` when an earlier upstream of the
/// route lists the same one.
pub(crate) fn namespaced(upstream: &str, uri: &str) -> String {
    format!("{NAMESPACE}{upstream}/{uri}")
}

/// (upstream, its own URI) of a namespaced URI naming one of the route's upstreams.
pub(crate) fn split_namespaced<'a>(cx: &Cx<'_>, uri: &'a str) -> Option<(&'a str, &'a str)> {
    let (upstream, own) = uri.strip_prefix(NAMESPACE)?.split_once('/')?;
    cx.route
        .upstreams
        .iter()
        .any(|u| u == upstream)
        .then_some((upstream, own))
}

/// Items of every contributor by `key`, config order then key bytewise; a
/// key already listed by an earlier upstream is namespaced for the later one
/// (`namespaced`). Returns the items and who owns each key as listed.
fn merge_by(fanned: &Fanned, key: &str, what: &str) -> (Vec<Value>, Vec<(String, String)>) {
    let mut seen: HashMap<String, String> = HashMap::new();
    let mut items = Vec::new();
    let mut owners = Vec::new();
    for c in &fanned.contributions {
        let mut keyed: Vec<(&str, &Value)> = c
            .items
            .iter()
            .filter_map(|r| match r.get(key).and_then(Value::as_str) {
                Some(k) => Some((k, r)),
                None => {
                    tracing::warn!(upstream = %c.upstream, "{what} without a {key} left out");
                    None
                }
            })
            .collect();
        keyed.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        keyed.dedup_by(|a, b| a.0 == b.0);
        for (k, r) in keyed {
            let mut item = r.clone();
            let listed = match seen.get(k) {
                None => k.to_owned(),
                Some(first) => {
                    let ns = namespaced(&c.upstream, k);
                    tracing::debug!(upstream = %c.upstream, owner = %first, "{what} {k} is also listed by an earlier upstream: exposed as {ns}");
                    if let Some(obj) = item.as_object_mut() {
                        obj.insert(key.to_owned(), Value::String(ns.clone()));
                    }
                    ns
                }
            };
            seen.entry(k.to_owned())
                .or_insert_with(|| c.upstream.clone());
            owners.push((listed, c.upstream.clone()));
            items.push(item);
        }
    }
    (items, owners)
}

/// The merged list and who serves each URI (also kept in the memo).
async fn list_resources(cx: &Cx<'_>) -> (Merged, HashMap<String, String>) {
    let fanned = forward::fan_out(cx, "resources/list", "resources").await;
    let (items, owners) = merge_by(&fanned, "uri", "resource");
    let merged = Merged::new("resources", items, &fanned.contributions, fanned.degraded);
    let owners: HashMap<String, String> = owners.into_iter().collect();
    let ttl = merged.ttl_ms;
    with_index(cx, |ix| {
        ix.uris = owners.clone();
        ix.uris_until = until(ttl);
    });
    (merged, owners)
}

/// The merged list and (literal prefix, upstream) per template.
async fn list_templates(cx: &Cx<'_>) -> (Merged, Vec<(String, String)>) {
    let fanned = forward::fan_out(cx, "resources/templates/list", "resourceTemplates").await;
    let (items, owners) = merge_by(&fanned, "uriTemplate", "resource template");
    let merged = Merged::new(
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
    let ttl = merged.ttl_ms;
    with_index(cx, |ix| {
        ix.templates = prefixes.clone();
        ix.templates_until = until(ttl);
    });
    (merged, prefixes)
}

/// The upstream of the most specific template (longest literal prefix) for `uri`.
fn match_template(prefixes: &[(String, String)], uri: &str) -> Option<String> {
    prefixes
        .iter()
        .filter(|(p, _)| uri.starts_with(p.as_str()))
        .max_by_key(|(p, _)| p.len())
        .map(|(_, u)| u.clone())
}

/// The part of a URI template before its first expression.
fn literal_prefix(template: &str) -> &str {
    template.split('{').next().unwrap_or_default()
}

enum Lookup {
    Found(String),
    /// The memo is current and does not know the URI.
    Unknown,
    /// The memo is missing or expired: list again.
    Stale,
}

fn lookup_uri(cx: &Cx<'_>, uri: &str) -> Lookup {
    let now = Instant::now();
    with_index(cx, |ix| match ix.uris_until {
        Some(t) if t > now => match ix.uris.get(uri) {
            Some(u) => Lookup::Found(u.clone()),
            None => Lookup::Unknown,
        },
        _ => Lookup::Stale,
    })
    .unwrap_or(Lookup::Stale)
}

fn lookup_template(cx: &Cx<'_>, uri: &str) -> Lookup {
    let now = Instant::now();
    with_index(cx, |ix| match ix.templates_until {
        Some(t) if t > now => {
            match_template(&ix.templates, uri).map_or(Lookup::Unknown, Lookup::Found)
        }
        _ => Lookup::Stale,
    })
    .unwrap_or(Lookup::Stale)
}

/// The upstream serving `uri` and the URI to ask it for (its own, when `uri`
/// was namespaced), listing resources (then templates) again when the memo
/// cannot say. A route of one upstream needs no lookup: that upstream answers
/// for every URI (an unknown one gets its own error).
pub(crate) async fn owner(cx: &Cx<'_>, uri: &str) -> Option<(String, String)> {
    if let Some((upstream, own)) = split_namespaced(cx, uri) {
        return Some((upstream.to_owned(), own.to_owned()));
    }
    let found = |u: String| Some((u, uri.to_owned()));
    if let [only] = cx.route.upstreams.as_slice() {
        return found(only.clone());
    }
    match lookup_uri(cx, uri) {
        Lookup::Found(u) => return found(u),
        Lookup::Stale => {
            if let Some(u) = list_resources(cx).await.1.get(uri) {
                return found(u.clone());
            }
        }
        Lookup::Unknown => {}
    }
    match lookup_template(cx, uri) {
        Lookup::Found(u) => found(u),
        Lookup::Unknown => None,
        Lookup::Stale => match_template(&list_templates(cx).await.1, uri).and_then(found),
    }
}

pub async fn read(
    cx: &Cx<'_>,
    id: &Id,
    params: Option<RawParams>,
    client: &ClientSide,
) -> Result<Response<Body>, GatewayError> {
    let params = params.unwrap_or_default();
    let uri = param_str(Some(&params), "uri")?
        .map(|s| s.into_owned())
        .ok_or_else(|| GatewayError::InvalidParams("resources/read needs params.uri".into()))?;
    let (upstream, own) = owner(cx, &uri).await.ok_or_else(|| {
        GatewayError::InvalidParams(format!(
            "unknown resource: {uri} (no upstream of this route lists it or a matching template)"
        ))
    })?;
    cx.note_target(&upstream, &uri);
    rate_limit(cx, "resources/read", &upstream, &uri).await?;
    let mut params = params;
    if own != uri {
        let raw = serde_json::value::to_raw_value(&own)
            .map_err(|e| GatewayError::Unsupported(e.to_string()))?;
        params.insert("uri".into(), raw);
    }
    // A requestState envelope stays bound to the URI the client named.
    forward::forward(cx, id, &upstream, "resources/read", &uri, params, client).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_prefix_stops_at_the_first_expression() {
        assert_eq!(literal_prefix("mock://a/items/{id}"), "mock://a/items/");
        assert_eq!(literal_prefix("{+path}"), "");
        assert_eq!(literal_prefix("file:///etc"), "file:///etc");
    }
}
