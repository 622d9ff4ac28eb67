//! Modern (2026-07-28) requests: every request carries its version and client
//! capabilities in `_meta`, and the mirrored `MCP-Protocol-Version`, `Mcp-Method`,
//! `Mcp-Name` headers must agree with the body (NOTES §4.1) before anything trusts
//! them.

use http::{Response, StatusCode};
use junction_protocol::header_value;
use junction_protocol::jsonrpc::{result_bytes, Id, RawParams};
use junction_protocol::{meta, object, version};
use std::borrow::Cow;

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
    let capabilities = validate_meta_and_headers(cx, method, params.as_ref(), &request_meta)?;
    let log = log_level(&request_meta)?;
    let client = ClientSide::Modern {
        capabilities,
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

/// `params._meta`'s members, read from the request's text without parsing it
/// again (the envelope's pass validated it): each key with its value's raw
/// JSON, forwarded as it is. A key given twice reads as its last value.
pub struct RequestMeta<'a>(Vec<(Cow<'a, str>, &'a str)>);

impl<'a> RequestMeta<'a> {
    pub fn get(&self, key: &str) -> Option<&'a str> {
        self.0.iter().rev().find(|(k, _)| k == key).map(|(_, v)| *v)
    }

    /// Every member in order, duplicates included.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &'a str)> + '_ {
        self.0.iter().map(|(k, v)| (k.as_ref(), *v))
    }
}

pub fn request_meta(params: Option<&RawParams>) -> Result<RequestMeta<'_>, GatewayError> {
    let raw = params
        .and_then(|p| p.get("_meta"))
        .ok_or_else(|| GatewayError::MissingMeta("params._meta is required".into()))?;
    object::members(raw.get())
        .map(|m| RequestMeta(m.collect()))
        .ok_or_else(|| GatewayError::MissingMeta("params._meta must be an object".into()))
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
    params: Option<&RawParams>,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn params(meta: &str) -> RawParams {
        let mut p = RawParams::new();
        p.insert(
            "_meta".into(),
            RawValue::from_string(meta.to_owned()).unwrap(),
        );
        p
    }

    #[test]
    fn meta_reads_the_last_of_a_duplicate_and_forwards_each_key_once() {
        let p = params(
            r#"{"traceparent":"a","io.modelcontextprotocol/protocolVersion":"2025-01-01",
                "x":{"deep":[1]},"traceparent":"b","io.modelcontextprotocol/protocolVersion":"2026-07-28"}"#,
        );
        let m = request_meta(Some(&p)).unwrap();
        assert_eq!(m.get(meta::PROTOCOL_VERSION), Some(r#""2026-07-28""#));
        assert_eq!(m.get("traceparent"), Some(r#""b""#));
        let forwarded: Vec<(String, String)> = tools::forwardable_meta(m)
            .into_iter()
            .map(|(k, v)| (k, v.get().to_owned()))
            .collect();
        assert_eq!(
            forwarded,
            [("traceparent", r#""b""#), ("x", r#"{"deep":[1]}"#)]
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
        );
    }

    #[test]
    fn meta_that_is_not_an_object_is_refused() {
        for bad in ["[1]", "null", "\"{}\"", "3"] {
            assert!(
                matches!(
                    request_meta(Some(&params(bad))),
                    Err(GatewayError::MissingMeta(_))
                ),
                "{bad}"
            );
        }
        assert!(matches!(
            request_meta(None),
            Err(GatewayError::MissingMeta(_))
        ));
    }
}
