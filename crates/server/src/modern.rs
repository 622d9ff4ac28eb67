//! Modern (2026-07-28) requests: every request carries its version and client
//! capabilities in `_meta`, and the mirrored `MCP-Protocol-Version`, `Mcp-Method`,
//! `Mcp-Name` headers must agree with the body (NOTES §4.1) before anything trusts
//! them.

use http::{Response, StatusCode};
use junction_protocol::header_value;
use junction_protocol::jsonrpc::{raw_str, result_bytes, Id, RawParams};
use junction_protocol::{meta, version};
use std::collections::BTreeMap;

use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::error::GatewayError;
use crate::logging::Level;
use crate::mcp::{names, param_str, Cx};
use crate::response::{self, Body};
use crate::tools::{self, ClientSide};
use crate::{prompts, resources};

/// Every version this gateway serves: modern through `_meta`, the handshake era
/// through `initialize`.
pub fn supported_versions() -> Vec<&'static str> {
    let mut v = vec![version::MODERN];
    v.extend_from_slice(version::LEGACY);
    v
}

pub async fn dispatch(
    cx: &Cx<'_>,
    id: &Id,
    method: &str,
    params: Option<RawParams>,
) -> Result<Response<Body>, GatewayError> {
    let request_meta = request_meta(params.as_ref())?;
    let raw_caps = validate_meta_and_headers(cx, method, params.as_ref(), &request_meta)?;
    let log = log_level(&request_meta)?;
    let capabilities = serde_json::from_str(raw_caps.get()).unwrap_or_default();
    let client = ClientSide::Modern {
        capabilities,
        raw_capabilities: raw_caps,
        log,
        forward_meta: tools::forwardable_meta(request_meta),
    };
    match method {
        "server/discover" => Ok(discover(cx, id)),
        "tools/list" => tools::list(cx, id, params.as_ref(), &client).await,
        "tools/call" => tools::call(cx, id, params, &client).await,
        "prompts/list" => prompts::list(cx, id, params.as_ref(), &client).await,
        "prompts/get" => prompts::get(cx, id, params, &client).await,
        "resources/list" => resources::list(cx, id, params.as_ref(), &client).await,
        "resources/templates/list" => resources::templates(cx, id, params.as_ref(), &client).await,
        "resources/read" => resources::read(cx, id, params, &client).await,
        "completion/complete" => crate::completion::complete(cx, id, params, &client).await,
        "subscriptions/listen" => crate::listen::listen(cx, id, params.as_ref()).await,
        other => Err(GatewayError::MethodNotFound(other.to_owned())),
    }
}

/// `params._meta`, parsed once: its members as raw JSON (validated here,
/// forwarded as they are).
pub type RequestMeta = BTreeMap<String, Box<RawValue>>;

pub fn request_meta(params: Option<&RawParams>) -> Result<RequestMeta, GatewayError> {
    let raw = params
        .and_then(|p| p.get("_meta"))
        .ok_or_else(|| GatewayError::MissingMeta("params._meta is required".into()))?;
    serde_json::from_str::<RequestMeta>(raw.get())
        .map_err(|_| GatewayError::MissingMeta("params._meta must be an object".into()))
}

/// `_meta` logLevel: absent, or one of the spec's levels.
fn log_level(m: &RequestMeta) -> Result<Option<Level>, GatewayError> {
    match m.get(meta::LOG_LEVEL) {
        None => Ok(None),
        Some(v) => raw_str(v)
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
    params: Option<&RawParams>,
    m: &RequestMeta,
) -> Result<Box<RawValue>, GatewayError> {
    let requested = m
        .get(meta::PROTOCOL_VERSION)
        .and_then(|v| raw_str(v))
        .ok_or_else(|| {
            GatewayError::MissingMeta(format!(
                "params._meta[\"{}\"] (a string) is required",
                meta::PROTOCOL_VERSION
            ))
        })?;
    let caps = match m.get(meta::CLIENT_CAPABILITIES) {
        // Valid JSON that opens with a brace is an object.
        Some(c) if c.get().starts_with('{') => c.clone(),
        _ => {
            return Err(GatewayError::MissingMeta(format!(
                "params._meta[\"{}\"] (an object) is required",
                meta::CLIENT_CAPABILITIES
            )))
        }
    };
    // The header is compared first: a mismatch is -32020 even when the body's
    // version is also unknown; only an agreeing, unsupported version is -32022.
    match cx.header(names::MCP_PROTOCOL_VERSION) {
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
    match cx.header(names::MCP_METHOD) {
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
    let name_key = match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        _ => None,
    };
    if let Some(key) = name_key {
        let body = param_str(params, key)?;
        let header = cx.header(names::MCP_NAME);
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

pub fn server_info() -> Value {
    json!({"name": "junction", "version": env!("CARGO_PKG_VERSION")})
}

/// Junction answers `server/discover` itself: its own capabilities, not any one
/// upstream's.
fn discover(cx: &Cx<'_>, id: &Id) -> Response<Body> {
    let result = json!({
        "resultType": "complete",
        "supportedVersions": supported_versions(),
        "capabilities": crate::caps::advertised(cx.state),
        "instructions": crate::caps::INSTRUCTIONS,
        "ttlMs": 300_000,
        "cacheScope": "public",
        "_meta": {(meta::SERVER_INFO): server_info()},
    });
    let raw = serde_json::value::to_raw_value(&result).unwrap_or_default();
    response::json(StatusCode::OK, result_bytes(id, &raw))
}
