//! Which protocol era an upstream speaks, and the probe verdicts of NOTES §3.2
//! that both transports share.

use junction_protocol::{codes, jsonrpc::RpcError, version};

use crate::UpstreamError;

/// Configured era preference; `Auto` probes with `server/discover`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EraPref {
    Auto,
    Modern,
    Legacy,
}

/// The era an upstream was found (or pinned) to speak.
#[derive(Clone, Debug, PartialEq)]
pub enum Era {
    Modern,
    /// Handshake era; `version` is what `initialize` negotiated.
    Legacy {
        version: String,
    },
}

/// A JSON-RPC error that only a modern server sends (-32020/-32021/-32022).
pub(crate) fn is_modern_code(code: i64) -> bool {
    matches!(
        code,
        codes::HEADER_MISMATCH
            | codes::MISSING_CLIENT_CAPABILITY
            | codes::UNSUPPORTED_PROTOCOL_VERSION
    )
}

/// The probe got a modern error: the server is modern, unless it says it does
/// not serve our version, in which case there is nothing to fall back to.
pub(crate) fn modern_error_verdict(err: &RpcError) -> Result<Era, UpstreamError> {
    if err.code != codes::UNSUPPORTED_PROTOCOL_VERSION {
        return Ok(Era::Modern);
    }
    let supported: Vec<String> = err
        .data
        .as_ref()
        .and_then(|d| d.get("supported"))
        .and_then(|s| serde_json::from_value(s.clone()).ok())
        .unwrap_or_default();
    if supported.iter().any(|v| v == version::MODERN) {
        Ok(Era::Modern)
    } else {
        Err(UpstreamError::Unavailable(format!(
            "upstream is modern but does not serve {} (it supports {supported:?})",
            version::MODERN
        )))
    }
}

/// `MCP-Protocol-Version` exists from 2025-06-18 on (dates compare as strings).
pub(crate) fn sends_version_header(negotiated: &str) -> bool {
    negotiated >= "2025-06-18"
}

#[derive(serde::Deserialize)]
struct InitializeResult {
    #[serde(rename = "protocolVersion")]
    protocol_version: String,
}

pub(crate) fn negotiated_version(
    result: &serde_json::value::RawValue,
) -> Result<String, UpstreamError> {
    serde_json::from_str::<InitializeResult>(result.get())
        .map(|r| r.protocol_version)
        .map_err(|e| {
            UpstreamError::Protocol(format!("initialize result without protocolVersion: {e}"))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsupported_version_without_ours_is_unavailable() {
        let err = RpcError::new(codes::UNSUPPORTED_PROTOCOL_VERSION, "no")
            .with_data(serde_json::json!({"supported": ["2027-01-01"], "requested": "2026-07-28"}));
        assert!(matches!(
            modern_error_verdict(&err),
            Err(UpstreamError::Unavailable(_))
        ));
        let ok = RpcError::new(codes::UNSUPPORTED_PROTOCOL_VERSION, "no")
            .with_data(serde_json::json!({"supported": ["2026-07-28"]}));
        assert_eq!(modern_error_verdict(&ok).ok(), Some(Era::Modern));
    }

    #[test]
    fn version_header_from_2025_06_18() {
        assert!(!sends_version_header("2025-03-26"));
        assert!(sends_version_header("2025-06-18"));
        assert!(sends_version_header("2025-11-25"));
    }
}
