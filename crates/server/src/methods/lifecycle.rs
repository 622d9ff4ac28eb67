//! The methods about the conversation itself rather than an upstream:
//! handshake-era `initialize` (mints the sealed session), `ping`,
//! `logging/setLevel`, DELETE of a session and `notifications/cancelled`;
//! modern `server/discover`. Junction answers them all itself.

use http::{HeaderValue, Response, StatusCode};
use junction_protocol::jsonrpc::{result_bytes, Id, RawParams};
use junction_protocol::{meta, version};
use serde_json::{json, Value};

use super::Request;
use crate::caps::{self, server_info, supported_versions};
use crate::context::{param_str, ClientSide, Cx};
use crate::error::GatewayError;
use crate::fleet;
use crate::logging::Level;
use crate::names;
use crate::response::{self, Body};
use crate::session::{self, Session};

pub async fn ping(_cx: &Cx<'_>, id: &Id, _r: Request<'_>) -> Result<Response<Body>, GatewayError> {
    Ok(ok(id, json!({})))
}

/// Junction answers `server/discover` itself: its own capabilities, not any one
/// upstream's.
pub async fn discover(
    cx: &Cx<'_>,
    id: &Id,
    _r: Request<'_>,
) -> Result<Response<Body>, GatewayError> {
    let result = json!({
        "resultType": "complete",
        "supportedVersions": supported_versions(),
        "capabilities": caps::advertised(cx.state, true),
        "instructions": caps::INSTRUCTIONS,
        "ttlMs": 300_000,
        "cacheScope": "public",
        "_meta": {(meta::SERVER_INFO): server_info()},
    });
    Ok(ok(id, result))
}

pub async fn initialize(
    cx: &Cx<'_>,
    id: &Id,
    r: Request<'_>,
) -> Result<Response<Body>, GatewayError> {
    let params = r.params.as_ref();
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
            "capabilities": caps::advertised(cx.state, false),
            "serverInfo": server_info(),
            "instructions": caps::INSTRUCTIONS,
        }),
    );
    if let Ok(v) = HeaderValue::from_str(&token) {
        r.headers_mut().insert(names::MCP_SESSION_ID, v);
    }
    Ok(r)
}

/// `logging/setLevel`: remembered for the session (see `logging`), answered `{}`.
pub async fn set_level(
    cx: &Cx<'_>,
    id: &Id,
    r: Request<'_>,
) -> Result<Response<Body>, GatewayError> {
    let params = r.params.as_ref();
    let ClientSide::Legacy { session, .. } = &r.client else {
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
        .replica
        .log_levels
        .set(session, level, cx.state.config.sessions.ttl)
        .map_err(|()| {
            GatewayError::Unsupported("too many sessions with a log level on this replica".into())
        })?;
    cx.state.replica.share(
        fleet::Event::Level {
            session: session.clone(),
            level: level.name().to_owned(),
        },
        cx.state.config.sessions.ttl,
    );
    Ok(ok(id, json!({})))
}

/// DELETE of a session: it ends on this replica (404 from then on, its GET
/// streams closed, its level and subscriptions forgotten) and answers 200.
/// Sessions are sealed tokens: with `fleet.redis_url` the other replicas end
/// it too within the bus's delay (`fleet`); without, they accept the id until
/// it expires (see `session::Revoked`). No session is 405 (nothing to end); a
/// forged, foreign or expired one is 404.
pub fn delete_session(cx: &Cx<'_>) -> Result<Response<Body>, GatewayError> {
    let (_, key) = cx.require_session(|| GatewayError::MethodNotAllowed("DELETE".into()))?;
    let replica = &cx.state.replica;
    if !replica.revoked.revoke(&key, cx.state.config.sessions.ttl) {
        return Err(GatewayError::MethodNotAllowed("DELETE".into()));
    }
    replica.hub.end_session(&key);
    replica.log_levels.forget(&key);
    replica.share(
        fleet::Event::Ended { session: key },
        cx.state.config.sessions.ttl,
    );
    Ok(response::empty(StatusCode::OK))
}

/// A handshake-era client's `notifications/cancelled{requestId}`: wakes its
/// call if it runs here (see `cancel`), else tells the other replicas
/// (`fleet`), one of which may run it. Anything else about it is ignored, as
/// a notification cannot be answered with an error.
pub fn cancelled(cx: &Cx<'_>, params: Option<&RawParams<'_>>) {
    let Ok((_, key)) = cx.require_session(|| GatewayError::SessionNotFound) else {
        return;
    };
    let Some(raw) = params.and_then(|p| p.get("requestId")) else {
        return;
    };
    let Ok(request) = serde_json::from_str::<Id>(raw.get()) else {
        return;
    };
    let found = cx.state.replica.in_flight.cancel(&key, &request);
    tracing::debug!(%request, found, "notifications/cancelled");
    if !found {
        // The call may run on another replica: the one running it ends it.
        cx.state.replica.share(
            fleet::Event::Cancel {
                session: key,
                request: raw.get().to_owned(),
            },
            CANCEL_TTL,
        );
    }
}

/// A cancellation travels at once or not at all: a call still running after
/// this long started after the client cancelled it.
const CANCEL_TTL: std::time::Duration = std::time::Duration::from_secs(30);

fn ok(id: &Id, result: Value) -> Response<Body> {
    let raw = serde_json::value::to_raw_value(&result).unwrap_or_default();
    response::json(StatusCode::OK, result_bytes(id, &raw))
}
