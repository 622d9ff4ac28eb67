//! Handshake-era clients (2025-03-26, 2025-06-18, 2025-11-25): `initialize` mints a
//! sealed, self-contained `Mcp-Session-Id` (see `session`); later requests carry it.
//! No per-session memory exists on any replica.

use http::{HeaderValue, Response, StatusCode};
use junction_protocol::jsonrpc::{result_bytes, Id, RawParams};
use junction_protocol::version;
use serde_json::{json, Value};

use crate::error::GatewayError;
use crate::logging::Level;
use crate::mcp::{param_str, Cx};
use crate::modern::server_info;
use crate::response::{self, Body};
use crate::session::{self, Session};
use crate::tools::{self, ClientSide};
use crate::{prompts, resources};

pub async fn dispatch(
    cx: &Cx<'_>,
    id: &Id,
    method: &str,
    params: Option<RawParams>,
) -> Result<Response<Body>, GatewayError> {
    if method == "initialize" {
        return initialize(cx, id, params.as_ref());
    }
    let (session, key) = current_session(cx)?;
    if let Some(v) = cx.header(crate::mcp::names::MCP_PROTOCOL_VERSION) {
        if v != session.v {
            return Err(GatewayError::HeaderMismatch(format!(
                "MCP-Protocol-Version {v:?} differs from the session's negotiated {:?}",
                session.v
            )));
        }
    }
    let client = ClientSide::Legacy {
        capabilities: session.caps,
        log: cx.state.hub.log_levels.get(&key),
        session: key,
    };
    match method {
        "ping" => Ok(ok(id, json!({}))),
        "logging/setLevel" => set_level(cx, id, params.as_ref(), &client),
        "completion/complete" => crate::completion::complete(cx, id, params, &client).await,
        "tools/list" => tools::list(cx, id, params.as_ref(), &client).await,
        "tools/call" => tools::call(cx, id, params, &client).await,
        "prompts/list" => prompts::list(cx, id, params.as_ref(), &client).await,
        "prompts/get" => prompts::get(cx, id, params, &client).await,
        "resources/list" => resources::list(cx, id, params.as_ref(), &client).await,
        "resources/templates/list" => resources::templates(cx, id, params.as_ref(), &client).await,
        "resources/read" => resources::read(cx, id, params, &client).await,
        "resources/subscribe" | "resources/unsubscribe" => {
            crate::listen::legacy_subscription(cx, id, method, params.as_ref()).await
        }
        other => Err(GatewayError::LegacyMethodNotFound(other.to_owned())),
    }
}

/// The session and its `session::key`.
fn current_session(cx: &Cx<'_>) -> Result<(Session, String), GatewayError> {
    let token = cx
        .header(crate::mcp::names::MCP_SESSION_ID)
        .ok_or_else(|| {
            GatewayError::SessionRequired(
                "Mcp-Session-Id header is required after initialize".into(),
            )
        })?;
    let s = session::open(&cx.state.sealer, token).ok_or(GatewayError::SessionNotFound)?;
    let key = session::key(token);
    if s.p != cx.principal || cx.state.hub.revoked.is_revoked(&key) {
        return Err(GatewayError::SessionNotFound);
    }
    Ok((s, key))
}

/// `logging/setLevel`: remembered for the session (see `logging`), answered `{}`.
fn set_level(
    cx: &Cx<'_>,
    id: &Id,
    params: Option<&RawParams>,
    client: &ClientSide,
) -> Result<Response<Body>, GatewayError> {
    let ClientSide::Legacy { session, .. } = client else {
        return Err(GatewayError::LegacyMethodNotFound(
            "logging/setLevel".into(),
        ));
    };
    let level = param_str(params, "level")?
        .ok_or_else(|| GatewayError::InvalidParams("logging/setLevel needs params.level".into()))?;
    let level = Level::parse(&level).ok_or_else(|| {
        GatewayError::InvalidParams(format!(
            "params.level {level:?} is not one of {}",
            Level::NAMES.join(", ")
        ))
    })?;
    cx.state
        .hub
        .log_levels
        .set(session, level, cx.state.config.sessions.ttl)
        .map_err(|()| {
            GatewayError::Unsupported("too many sessions with a log level on this replica".into())
        })?;
    Ok(ok(id, json!({})))
}

fn initialize(
    cx: &Cx<'_>,
    id: &Id,
    params: Option<&RawParams>,
) -> Result<Response<Body>, GatewayError> {
    let requested = param_str(params, "protocolVersion")?.ok_or_else(|| {
        GatewayError::InvalidParams("initialize needs params.protocolVersion".into())
    })?;
    // Written compactly into the session token (once per session), which the
    // client sends back in a header on every request: whitespace a client put
    // in its capabilities must not count against `limits.max_header_bytes`.
    let caps = match params.and_then(|p| p.get("capabilities")) {
        None => serde_json::value::to_raw_value(&json!({})),
        Some(raw) => match serde_json::from_str::<Value>(raw.get()) {
            Ok(v @ Value::Object(_)) => serde_json::value::to_raw_value(&v),
            _ => {
                return Err(GatewayError::InvalidParams(
                    "params.capabilities must be an object".into(),
                ))
            }
        },
    }
    .map_err(|e| GatewayError::Unsupported(e.to_string()))?;
    let negotiated = version::negotiate_legacy(&requested);
    let s = Session {
        v: negotiated.to_owned(),
        caps,
        p: cx.principal.clone(),
    };
    let ttl_ms = cx.state.config.sessions.ttl.as_millis() as u64;
    let token = session::mint(&cx.state.sealer, &s, ttl_ms);
    let mut r = ok(
        id,
        json!({
            "protocolVersion": negotiated,
            "capabilities": crate::caps::advertised(cx.state),
            "serverInfo": server_info(),
            "instructions": crate::caps::INSTRUCTIONS,
        }),
    );
    if let Ok(v) = HeaderValue::from_str(&token) {
        r.headers_mut().insert(crate::mcp::names::MCP_SESSION_ID, v);
    }
    Ok(r)
}

/// DELETE of a session: it ends on this replica (404 from then on, its GET
/// streams closed, its level and subscriptions forgotten) and answers 200.
/// Sessions are sealed tokens, so other replicas accept the id until it
/// expires (see `session::Revoked`). No session is 405 (nothing to end); a
/// forged, foreign or expired one is 404.
pub fn delete_session(cx: &Cx<'_>) -> Result<Response<Body>, GatewayError> {
    if !cx.headers.contains_key(crate::mcp::names::MCP_SESSION_ID) {
        return Err(GatewayError::MethodNotAllowed("DELETE".into()));
    }
    let (_, key) = current_session(cx)?;
    let hub = &cx.state.hub;
    if !hub.revoked.revoke(&key, cx.state.config.sessions.ttl) {
        return Err(GatewayError::MethodNotAllowed("DELETE".into()));
    }
    hub.end_session(&key);
    hub.log_levels.forget(&key);
    Ok(response::empty(StatusCode::OK))
}

fn ok(id: &Id, result: Value) -> Response<Body> {
    let raw = serde_json::value::to_raw_value(&result).unwrap_or_default();
    response::json(StatusCode::OK, result_bytes(id, &raw))
}

/// A handshake-era client's `notifications/cancelled{requestId}`: wakes its
/// call if it runs here (see `cancel`). Anything else about it is ignored, as
/// a notification cannot be answered with an error.
pub fn cancelled(cx: &Cx<'_>, params: Option<&RawParams>) {
    let Ok((_, key)) = current_session(cx) else {
        return;
    };
    let Some(raw) = params.and_then(|p| p.get("requestId")) else {
        return;
    };
    let Ok(request) = serde_json::from_str::<Id>(raw.get()) else {
        return;
    };
    let found = cx.state.hub.in_flight.cancel(&key, &request);
    tracing::debug!(%request, found, "notifications/cancelled");
}
