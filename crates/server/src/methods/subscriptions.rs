//! Change streams of both client eras, served from the hub (`notify`):
//! modern `subscriptions/listen` (acknowledged with the subset Junction
//! honours, every message tagged with the listen id), the handshake-era GET
//! stream of a session, and that era's `resources/subscribe` /
//! `resources/unsubscribe`.
//!
//! Session ids are sealed and stateless, so a session's subscribed URIs are
//! kept in the replica's hub (`state::Hub`), bounded, and expire with the
//! session TTL; with `fleet.redis_url` each change of the set goes to every
//! replica (`fleet`), since the session's GET stream may be open on another.

use std::collections::BTreeMap;

use http::{Response, StatusCode};
use junction_policy::Kind;
use junction_protocol::jsonrpc::{result_bytes, Id};
use junction_protocol::{meta, version};
use serde_json::{json, Map, Value};

use super::Request;
use crate::admit;
use crate::context::{param_str, ClientSide, Cx};
use crate::error::GatewayError;
use crate::fleet;
use crate::response::{self, sse_event, Body};
use crate::state::{SessionUris, Tag, Wants, MAX_SUBSCRIBED_SESSIONS};
use crate::views;

/// URIs one stream or session may watch.
const MAX_URIS: usize = 256;

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
pub async fn listen(cx: &Cx<'_>, id: &Id, r: Request<'_>) -> Result<Response<Body>, GatewayError> {
    let filter = match r.params.as_ref().and_then(|p| p.get("notifications")) {
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
    // A URI the caller may not read is left out, as one nobody serves is.
    for uri in requested
        .iter()
        .filter(|u| admit::allowed(cx, Kind::Resource, u))
    {
        if let Some(up) = views::update_source(cx, uri).await {
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
        .replica
        .hub
        .subscribe(cx, wants, Tag::Modern(id.clone()), Some(ack))
        .await
        .ok_or_else(too_many)?;
    Ok(response::sse(rx))
}

/// The handshake-era session of this request; GET without one on a modern
/// endpoint stays 405.
fn session_of(cx: &Cx<'_>) -> Result<String, GatewayError> {
    let missing = || match cx.protocol_version {
        Some(v) if version::is_legacy(v) => GatewayError::SessionRequired(
            "Mcp-Session-Id header is required for the GET stream".into(),
        ),
        _ => GatewayError::MethodNotAllowed("GET".into()),
    };
    cx.require_session(missing).map(|(_, key)| key)
}

/// GET on the route: the standalone SSE stream of a handshake-era session.
pub async fn legacy_get(cx: &Cx<'_>) -> Result<Response<Body>, GatewayError> {
    let session = session_of(cx)?;
    let wants = Wants {
        tools: true,
        prompts: true,
        resources: true,
        uris: BTreeMap::new(),
    };
    let (_, rx) = cx
        .state
        .replica
        .hub
        .subscribe(cx, wants, Tag::Legacy { session }, None)
        .await
        .ok_or_else(too_many)?;
    Ok(response::sse(rx))
}

/// Handshake-era `resources/subscribe`.
pub async fn subscribe(
    cx: &Cx<'_>,
    id: &Id,
    r: Request<'_>,
) -> Result<Response<Body>, GatewayError> {
    subscription(cx, id, true, r).await
}

/// Handshake-era `resources/unsubscribe`.
pub async fn unsubscribe(
    cx: &Cx<'_>,
    id: &Id,
    r: Request<'_>,
) -> Result<Response<Body>, GatewayError> {
    subscription(cx, id, false, r).await
}

async fn subscription(
    cx: &Cx<'_>,
    id: &Id,
    subscribe: bool,
    r: Request<'_>,
) -> Result<Response<Body>, GatewayError> {
    // The era phase opened and checked the session already.
    let ClientSide::Legacy { session, .. } = r.client else {
        let method = if subscribe {
            "resources/subscribe"
        } else {
            "resources/unsubscribe"
        };
        return Err(GatewayError::LegacyMethodNotFound(method.into()));
    };
    let params = r.params.as_ref();
    let uri = param_str(params, "uri")?
        .map(|s| s.into_owned())
        .ok_or_else(|| GatewayError::InvalidParams("params.uri is required".into()))?;
    let key = (cx.route.path.clone(), session);
    let hub = &cx.state.replica.hub;
    let mut shared = None;
    if subscribe {
        // A URI the caller may not read gets the answer of one nobody serves.
        let source = match admit::allowed(cx, Kind::Resource, &uri) {
            true => views::update_source(cx, &uri).await,
            false => None,
        };
        let up = source.ok_or_else(|| {
            GatewayError::InvalidParams(format!("no upstream delivers updates for {uri:?}"))
        })?;
        let expires = tokio::time::Instant::now() + cx.state.config.sessions.ttl;
        let mut sessions = hub.sessions.lock().map_err(|_| too_many())?;
        let now = tokio::time::Instant::now();
        if !sessions.contains_key(&key) && sessions.len() >= MAX_SUBSCRIBED_SESSIONS {
            sessions.retain(|_, s| s.expires > now);
            if sessions.len() >= MAX_SUBSCRIBED_SESSIONS {
                return Err(too_many());
            }
        }
        let entry = sessions.entry(key.clone()).or_insert_with(|| SessionUris {
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
        shared = Some((key, entry.uris.clone()));
    } else if let Ok(mut sessions) = hub.sessions.lock() {
        if let Some(entry) = sessions.get_mut(&key) {
            entry.uris.remove(&uri);
            let uris = entry.uris.clone();
            if entry.uris.is_empty() {
                sessions.remove(&key);
            }
            shared = Some((key, uris));
        }
    }
    hub.refresh_resource_watch(cx.state);
    // The session's GET stream may be open on another replica.
    if let Some(((route, session), uris)) = shared {
        cx.state.replica.share(
            fleet::Event::Uris {
                route,
                session,
                uris,
            },
            cx.state.config.sessions.ttl,
        );
    }
    let raw = serde_json::value::to_raw_value(&json!({})).unwrap_or_default();
    Ok(response::json(StatusCode::OK, result_bytes(id, &raw)))
}
