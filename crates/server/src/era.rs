//! The pipeline's era and session phase: which era a request speaks, and the
//! client it comes from ([`ClientSide`]).
//!
//! - Modern (2026-07-28): every request carries its version and client
//!   capabilities in `_meta`, and the mirrored `MCP-Protocol-Version`,
//!   `Mcp-Method`, `Mcp-Name` headers must agree with the body (NOTES §4.1)
//!   before anything trusts them.
//! - Handshake era (2025-03-26, 2025-06-18, 2025-11-25): `initialize` mints a
//!   sealed, self-contained `Mcp-Session-Id` (`session`); later requests carry
//!   it, and it holds what the client declared. No per-session memory exists
//!   on any replica.

use junction_protocol::header_value;
use junction_protocol::jsonrpc::RawParams;
use junction_protocol::{meta, object, version};
use serde_json::value::RawValue;

use crate::caps::supported_versions;
use crate::context::{
    forwardable_meta, param_str, request_meta, text, ClientSide, Cx, RequestMeta,
};
use crate::error::GatewayError;
use crate::logging::Level;

/// Handshake era when the client says so: `initialize`, a session id, or a
/// handshake-era `MCP-Protocol-Version`. Everything else must be a valid modern
/// request (and gets the modern errors when it is not).
pub fn is_legacy_request(cx: &Cx<'_>, method: &str) -> bool {
    match cx.protocol_version {
        // A modern header means a modern request, even for `initialize` (which
        // then gets the modern 404 + -32601: the method was removed).
        Some(v) if v == version::MODERN => false,
        Some(v) if version::is_legacy(v) => true,
        _ => method == "initialize" || cx.known.session_id.is_some(),
    }
}

/// A modern request's client: `_meta` and the mirrored headers checked;
/// `mirrored` is the param `Mcp-Name` mirrors for this method, if any.
pub fn modern(
    cx: &Cx<'_>,
    method: &str,
    mirrored: Option<&str>,
    params: Option<&RawParams<'_>>,
) -> Result<ClientSide, GatewayError> {
    let request_meta = request_meta(params)?;
    let capabilities = validate_meta_and_headers(cx, method, mirrored, params, &request_meta)?;
    let log = log_level(&request_meta)?;
    Ok(ClientSide::Modern {
        capabilities,
        log,
        forward_meta: forwardable_meta(request_meta),
    })
}

/// A handshake-era request's client: its session (which `initialize`, the
/// one request without one, is about to mint).
pub fn legacy(cx: &Cx<'_>, method: &str) -> Result<ClientSide, GatewayError> {
    if method == "initialize" {
        return Ok(ClientSide::Legacy {
            capabilities: RawValue::from_string("{}".into()).unwrap_or_default(),
            session: String::new(),
            log: None,
        });
    }
    let (session, key) = cx.require_session(|| {
        GatewayError::SessionRequired("Mcp-Session-Id header is required after initialize".into())
    })?;
    // The header SHOULD be the negotiated version; another handshake-era
    // version Junction serves is accepted as the SDKs' servers do (the session
    // keeps its own), only an unsupported one is refused.
    if let Some(v) = cx.protocol_version {
        if v != session.v && !version::is_legacy(v) {
            return Err(GatewayError::HeaderMismatch(format!(
                "MCP-Protocol-Version {v:?} differs from the session's negotiated {:?}",
                session.v
            )));
        }
    }
    Ok(ClientSide::Legacy {
        capabilities: session.caps,
        log: cx.state.replica.log_levels.get(&key),
        session: key,
    })
}

/// `_meta` logLevel: absent, or one of the spec's levels.
fn log_level(m: &RequestMeta<'_>) -> Result<Option<Level>, GatewayError> {
    match m.get(meta::LOG_LEVEL) {
        None => Ok(None),
        Some(v) => object::string(v)
            .and_then(|s| Level::parse(&s))
            .map(Some)
            .ok_or_else(|| {
                GatewayError::InvalidParams(format!(
                    "params._meta[\"{}\"] must be one of {}",
                    meta::LOG_LEVEL,
                    Level::NAMES.join(", ")
                ))
            }),
    }
}

/// Checks `_meta` and the mirrored headers; returns the client's capabilities
/// (a JSON object).
fn validate_meta_and_headers(
    cx: &Cx<'_>,
    method: &str,
    mirrored: Option<&str>,
    params: Option<&RawParams<'_>>,
    m: &RequestMeta<'_>,
) -> Result<Box<RawValue>, GatewayError> {
    let requested = m
        .get(meta::PROTOCOL_VERSION)
        .and_then(object::string)
        .ok_or_else(|| {
            GatewayError::MissingMeta(format!(
                "params._meta[\"{}\"] (a string) is required",
                meta::PROTOCOL_VERSION
            ))
        })?;
    let caps = match m.get(meta::CLIENT_CAPABILITIES) {
        // Valid JSON that opens with a brace is an object.
        Some(c) if c.starts_with('{') => RawValue::from_string(c.to_owned())
            .map_err(|_| GatewayError::MissingMeta("params._meta is not valid JSON".into()))?,
        _ => {
            return Err(GatewayError::MissingMeta(format!(
                "params._meta[\"{}\"] (an object) is required",
                meta::CLIENT_CAPABILITIES
            )))
        }
    };
    // The header is compared first: a mismatch is -32020 even when the body's
    // version is also unknown; only an agreeing, unsupported version is -32022.
    match cx.protocol_version {
        None => {
            return Err(GatewayError::HeaderMismatch(
                "MCP-Protocol-Version header is required".into(),
            ))
        }
        Some(h) if h != requested => {
            return Err(GatewayError::HeaderMismatch(format!(
                "MCP-Protocol-Version header {h:?} differs from _meta protocolVersion {requested:?}"
            )))
        }
        Some(_) => {}
    }
    if requested != version::MODERN {
        return Err(GatewayError::UnsupportedVersion {
            requested: requested.into_owned(),
            supported: supported_versions(),
        });
    }
    match text(cx.known.method) {
        None => {
            return Err(GatewayError::HeaderMismatch(
                "Mcp-Method header is required".into(),
            ))
        }
        Some(h) if h != method => {
            return Err(GatewayError::HeaderMismatch(format!(
                "Mcp-Method header {h:?} differs from method {method:?}"
            )))
        }
        Some(_) => {}
    }
    if let Some(key) = mirrored {
        let body = param_str(params, key)?;
        let header = text(cx.known.name);
        match (header, body) {
            (None, _) => {
                return Err(GatewayError::HeaderMismatch(
                    "Mcp-Name header is required".into(),
                ))
            }
            (Some(_), None) => {
                return Err(GatewayError::InvalidParams(format!(
                    "params.{key} is required"
                )))
            }
            (Some(h), Some(b)) => {
                let decoded = header_value::decode(h)
                    .map_err(|e| GatewayError::HeaderMismatch(format!("Mcp-Name header: {e}")))?;
                if decoded != b {
                    return Err(GatewayError::HeaderMismatch(format!(
                        "Mcp-Name header {decoded:?} differs from params.{key} {b:?}"
                    )));
                }
            }
        }
    }
    Ok(caps)
}
