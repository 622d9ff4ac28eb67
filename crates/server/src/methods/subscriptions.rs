//! Change streams of both client eras, served from the hub (`notify`):
//! modern `subscriptions/listen` (acknowledged with the subset Junction
//! honours, every message tagged with the listen id), the handshake-era GET
//! stream of a session, and that era's `resources/subscribe` /
//! `resources/unsubscribe`.
//!
//! Session ids are sealed and stateless, so a session's subscribed URIs are
//! kept in this process only, bounded, and expire with the session TTL.

use std::collections::BTreeMap;

use http::{Response, StatusCode};
use junction_protocol::jsonrpc::{result_bytes, Id, RawParams};
use junction_protocol::{meta, version};
use serde_json::{json, Map, Value};

use crate::error::GatewayError;
use crate::mcp::{param_str, Cx};
use crate::notify::{SessionUris, Tag, Wants};
use crate::response::{self, sse_event, Body};
use crate::session;

/// URIs one stream or session may watch.
const MAX_URIS: usize = 256;
/// Handshake-era sessions with subscribed URIs per process.
pub(crate) const MAX_SESSIONS: usize = 10_000;

fn too_many() -> GatewayError {
    GatewayError::Unsupported("too many open change streams on this gateway".into())
}

fn bool_field(filter: &Map<String, Value>, key: &str) -> Result<bool, GatewayError> {
    match filter.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(GatewayError::InvalidParams(format!(
            "params.notifications.{key} must be a boolean"
        ))),
    }
}

/// Modern `subscriptions/listen`.
pub async fn listen(
    cx: &Cx<'_>,
    id: &Id,
    params: Option<&RawParams>,
) -> Result<Response<Body>, GatewayError> {
    let filter = match params.and_then(|p| p.get("notifications")) {
        None => {
            return Err(GatewayError::InvalidParams(
                "params.notifications is required".into(),
            ))
        }
        Some(raw) => match serde_json::from_str::<Value>(raw.get()) {
            Ok(Value::Object(m)) => m,
            _ => {
                return Err(GatewayError::InvalidParams(
                    "params.notifications must be an object".into(),
                ))
            }
        },
    };
    let mut wants = Wants {
        tools: bool_field(&filter, "toolsListChanged")?,
        prompts: bool_field(&filter, "promptsListChanged")?,
        resources: bool_field(&filter, "resourcesListChanged")?,
        uris: BTreeMap::new(),
    };
    let requested: Vec<String> = match filter.get("resourceSubscriptions") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| {
                GatewayError::InvalidParams(
                    "params.notifications.resourceSubscriptions must be an array of strings".into(),
                )
            })?,
        Some(_) => {
            return Err(GatewayError::InvalidParams(
                "params.notifications.resourceSubscriptions must be an array of strings".into(),
            ))
        }
    };
    if requested.len() > MAX_URIS {
        return Err(GatewayError::InvalidParams(format!(
            "at most {MAX_URIS} resourceSubscriptions per stream"
        )));
    }
    for uri in &requested {
        if let Some(up) = owner(cx, uri).await {
            wants.uris.insert(uri.clone(), up);
        }
    }
    let mut granted = Map::new();
    for (on, key) in [
        (wants.tools, "toolsListChanged"),
        (wants.prompts, "promptsListChanged"),
        (wants.resources, "resourcesListChanged"),
    ] {
        if on {
            granted.insert(key.into(), Value::Bool(true));
        }
    }
    if !wants.uris.is_empty() {
        granted.insert(
            "resourceSubscriptions".into(),
            json!(wants.uris.keys().collect::<Vec<_>>()),
        );
    }
    let ack = json!({"notifications": granted, "_meta": {(meta::SUBSCRIPTION_ID): id}});
    let ack = serde_json::value::to_raw_value(&ack).unwrap_or_default();
    let ack = sse_event(&junction_protocol::jsonrpc::notification_bytes(
        "notifications/subscriptions/acknowledged",
        &ack,
    ));
    let (_, rx) = cx
        .state
        .hub
        .subscribe(cx, wants, Tag::Modern(id.clone()), Some(ack))
        .await
        .ok_or_else(too_many)?;
    Ok(response::sse(rx))
}

/// The upstream that would deliver updates for `uri`: the route's only
/// upstream, else the first (config order) whose resource list has it.
/// Upstreams that cannot deliver resource updates (stdio) own nothing here.
async fn owner(cx: &Cx<'_>, uri: &str) -> Option<String> {
    let can = |id: &str| {
        cx.state
            .upstreams
            .get(id)
            .is_some_and(|u| u.client.can_watch_resources())
    };
    // A namespaced URI names its upstream (see `resources`).
    if let Some((upstream, _)) = crate::resources::split_namespaced(cx, uri) {
        return can(upstream).then(|| upstream.to_owned());
    }
    if let [only] = cx.route.upstreams.as_slice() {
        return can(only).then(|| only.clone());
    }
    let fanned = crate::forward::fan_out(cx, "resources/list", "resources").await;
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

/// The handshake-era session of this request; GET without one on a modern
/// endpoint stays 405.
fn session_of(cx: &Cx<'_>) -> Result<(session::Session, String), GatewayError> {
    let Some(token) = cx.header(crate::mcp::names::MCP_SESSION_ID) else {
        return Err(match cx.header(crate::mcp::names::MCP_PROTOCOL_VERSION) {
            Some(v) if version::is_legacy(v) => GatewayError::SessionRequired(
                "Mcp-Session-Id header is required for the GET stream".into(),
            ),
            _ => GatewayError::MethodNotAllowed("GET".into()),
        });
    };
    let s = session::open(&cx.state.sealer, token).ok_or(GatewayError::SessionNotFound)?;
    let key = session::key(token);
    if s.p != cx.principal || cx.state.hub.revoked.is_revoked(&key) {
        return Err(GatewayError::SessionNotFound);
    }
    Ok((s, key))
}

/// GET on the route: the standalone SSE stream of a handshake-era session.
pub async fn legacy_get(cx: &Cx<'_>) -> Result<Response<Body>, GatewayError> {
    let (_, session) = session_of(cx)?;
    let wants = Wants {
        tools: true,
        prompts: true,
        resources: true,
        uris: BTreeMap::new(),
    };
    let (_, rx) = cx
        .state
        .hub
        .subscribe(cx, wants, Tag::Legacy { session }, None)
        .await
        .ok_or_else(too_many)?;
    Ok(response::sse(rx))
}

/// Handshake-era `resources/subscribe` and `resources/unsubscribe`.
pub async fn legacy_subscription(
    cx: &Cx<'_>,
    id: &Id,
    method: &str,
    params: Option<&RawParams>,
) -> Result<Response<Body>, GatewayError> {
    let (_, session) = session_of(cx)?;
    let uri = param_str(params, "uri")?
        .map(|s| s.into_owned())
        .ok_or_else(|| GatewayError::InvalidParams("params.uri is required".into()))?;
    let key = (cx.route.path.clone(), session);
    let hub = &cx.state.hub;
    if method == "resources/subscribe" {
        let up = owner(cx, &uri).await.ok_or_else(|| {
            GatewayError::InvalidParams(format!("no upstream delivers updates for {uri:?}"))
        })?;
        let expires = tokio::time::Instant::now() + cx.state.config.sessions.ttl;
        let mut sessions = hub.sessions.lock().map_err(|_| too_many())?;
        let now = tokio::time::Instant::now();
        if !sessions.contains_key(&key) && sessions.len() >= MAX_SESSIONS {
            sessions.retain(|_, s| s.expires > now);
            if sessions.len() >= MAX_SESSIONS {
                return Err(too_many());
            }
        }
        let entry = sessions.entry(key).or_insert_with(|| SessionUris {
            uris: BTreeMap::new(),
            expires,
        });
        entry.expires = expires;
        if entry.uris.len() >= MAX_URIS && !entry.uris.contains_key(&uri) {
            return Err(GatewayError::InvalidParams(format!(
                "at most {MAX_URIS} subscribed resources per session"
            )));
        }
        entry.uris.insert(uri, up);
    } else if let Ok(mut sessions) = hub.sessions.lock() {
        if let Some(entry) = sessions.get_mut(&key) {
            entry.uris.remove(&uri);
            if entry.uris.is_empty() {
                sessions.remove(&key);
            }
        }
    }
    hub.refresh_resource_watch(cx.state);
    let raw = serde_json::value::to_raw_value(&json!({})).unwrap_or_default();
    Ok(response::json(StatusCode::OK, result_bytes(id, &raw)))
}
