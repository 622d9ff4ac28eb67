//! The one place where a failure becomes an HTTP status and a JSON-RPC error
//! (DESIGN §5). Every gateway-made error says `data.origin: "gateway"`; upstream
//! JSON-RPC errors never pass through here: they are forwarded unchanged.

use http::StatusCode;
use junction_protocol::codes;
use junction_protocol::jsonrpc::RpcError;
use junction_upstream::UpstreamError;
use serde_json::{json, Value};

/// Everything that can go wrong between a client's bytes and an upstream's answer.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// The body is not JSON (-32700) or not an acceptable JSON-RPC message (-32600).
    #[error("{}", .0.message)]
    Malformed(RpcError),
    /// A required `_meta` key is missing or has the wrong type (modern requests).
    #[error("{0}")]
    MissingMeta(String),
    /// An `Mcp-*` / `MCP-Protocol-Version` header is missing or disagrees with the body.
    #[error("header mismatch: {0}")]
    HeaderMismatch(String),
    #[error("unsupported protocol version {requested:?}")]
    UnsupportedVersion {
        requested: String,
        supported: Vec<&'static str>,
    },
    #[error("method not found: {0}")]
    MethodNotFound(String),
    /// Handshake-era method not found: legacy clients read HTTP 404 as "session
    /// expired", so this one travels as HTTP 200.
    #[error("method not found: {0}")]
    LegacyMethodNotFound(String),
    /// Unknown tool, bad cursor, bad or foreign requestState, bad params.
    #[error("{0}")]
    InvalidParams(String),
    /// Legacy request without `Mcp-Session-Id`.
    #[error("{0}")]
    SessionRequired(String),
    /// Legacy session id that is forged, expired or from another key (HTTP 404 tells
    /// the client to initialize again).
    #[error("session not found or expired")]
    SessionNotFound,
    #[error("method {0} not allowed on an MCP endpoint of this gateway")]
    MethodNotAllowed(String),
    #[error("request body not received in time")]
    BodyTimeout,
    #[error("content-encoding {0:?} is not accepted; send the JSON body uncompressed")]
    UnsupportedEncoding(String),
    #[error("request body larger than {max} bytes")]
    BodyTooLarge { max: u64 },
    #[error("{0}")]
    HeadersTooLarge(String),
    #[error("{0}")]
    OriginForbidden(String),
    #[error("upstream {upstream} unavailable: {detail}")]
    UpstreamUnavailable { upstream: String, detail: String },
    #[error("upstream {upstream} timed out")]
    UpstreamTimeout { upstream: String },
    #[error("upstream {upstream} broke the protocol: {detail}")]
    UpstreamProtocol { upstream: String, detail: String },
    /// No, or an invalid, bearer token (HTTP 401 with a challenge).
    #[error("authentication required: {reason}")]
    Unauthenticated {
        reason: &'static str,
        challenge: String,
    },
    /// The key set needed to check tokens cannot be fetched (HTTP 503).
    #[error("token keys are unavailable; try again later")]
    AuthUnavailable { challenge: String },
    /// Authenticated, but the grant does not cover this tool, prompt or
    /// resource (HTTP 403 step-up).
    #[error("insufficient scope for {kind} {target}: needs one of the grants {scopes:?}")]
    Forbidden {
        kind: &'static str,
        target: String,
        scopes: Vec<String>,
        challenge: String,
    },
    /// No credentials for the caller's request to an upstream (`identity`):
    /// refused (403) or unavailable (503). Never a fallback to another token.
    #[error("{}", .0.detail)]
    Credentials(Box<CredentialFailure>),
    /// The route's guardrail webhook denied the call (HTTP 403).
    #[error("denied by the route's guardrail: {reason}")]
    GuardrailDenied { reason: String },
    /// The route's guardrail webhook failed and the route fails closed (HTTP 503).
    #[error(
        "the route's guardrail did not decide ({detail}); the route refuses calls until it does"
    )]
    GuardrailUnavailable { detail: String },
    /// A tool held back by its pin (`upstreams[].pins`): its definition
    /// changed since it was reviewed, or it has none.
    #[error("tool {tool} is quarantined: {reason}")]
    Quarantined { tool: String, reason: String },
    #[error("rate limited by rule {rule}")]
    RateLimited { rule: String, retry_after_ms: u64 },
    /// A handshake-era client did not declare (at `initialize`) what the upstream
    /// asks for mid-call, or cannot take the SSE stream the request must travel on.
    /// Modern spec semantics of -32021, told in a code legacy clients know.
    #[error("{detail}")]
    MissingClientCapability {
        missing: Vec<String>,
        detail: String,
    },
    /// A modern upstream's own -32021 to a modern client: passed through as sent
    /// (code, message, `requiredCapabilities`), with the HTTP 400 the spec gives it.
    #[error("{}", .0.message)]
    UpstreamNeedsCapability(RpcError),
    /// Something the gateway cannot do for this client (yet), e.g. bridging an
    /// `InputRequiredResult` to a handshake-era client.
    #[error("{0}")]
    Unsupported(String),
}

/// Why a caller's request to an upstream has no credentials.
#[derive(Debug)]
pub struct CredentialFailure {
    pub upstream: String,
    /// `refused`, `audience_mismatch` or `unavailable`.
    pub reason: &'static str,
    /// The token endpoint refused, or the caller's token is not for this
    /// upstream (403); otherwise it is unavailable (503).
    pub refused: bool,
    pub detail: String,
    /// `WWW-Authenticate` of a refusal.
    pub challenge: Option<String>,
}

impl GatewayError {
    pub fn from_upstream(upstream: &str, err: UpstreamError) -> GatewayError {
        let upstream = upstream.to_owned();
        match err {
            UpstreamError::Unavailable(detail) => {
                GatewayError::UpstreamUnavailable { upstream, detail }
            }
            UpstreamError::Closed => GatewayError::UpstreamUnavailable {
                upstream,
                detail: "connection closed".into(),
            },
            UpstreamError::Timeout => GatewayError::UpstreamTimeout { upstream },
            // A JSON-RPC error to a request Junction made itself (initialize, list):
            // the upstream cannot serve this request.
            UpstreamError::Rpc(e) => GatewayError::UpstreamUnavailable {
                upstream,
                detail: format!("answered JSON-RPC error {}: {}", e.code, e.message),
            },
            UpstreamError::Protocol(detail) => GatewayError::UpstreamProtocol { upstream, detail },
            UpstreamError::Http { status, body } => {
                let mut detail = format!("HTTP {status}");
                if !body.is_empty() {
                    detail.push_str(": ");
                    detail.extend(body.chars().take(200));
                }
                if status >= 500 {
                    GatewayError::UpstreamUnavailable { upstream, detail }
                } else {
                    GatewayError::UpstreamProtocol { upstream, detail }
                }
            }
        }
    }

    /// HTTP status and JSON-RPC error for this failure. No wildcard arm: a new
    /// variant must be placed here on purpose.
    pub fn render(&self) -> (StatusCode, RpcError) {
        let msg = self.to_string();
        let gw = |extra: Value| {
            let mut data = json!({"origin": "gateway"});
            if let (Some(d), Value::Object(e)) = (data.as_object_mut(), extra) {
                d.extend(e);
            }
            Some(data)
        };
        let (status, code, data) = match self {
            GatewayError::Malformed(e) => (StatusCode::BAD_REQUEST, e.code, gw(json!({}))),
            GatewayError::MissingMeta(_) => (
                StatusCode::BAD_REQUEST,
                codes::INVALID_PARAMS,
                gw(json!({})),
            ),
            GatewayError::HeaderMismatch(_) => (
                StatusCode::BAD_REQUEST,
                codes::HEADER_MISMATCH,
                gw(json!({})),
            ),
            GatewayError::UnsupportedVersion {
                requested,
                supported,
            } => (
                StatusCode::BAD_REQUEST,
                codes::UNSUPPORTED_PROTOCOL_VERSION,
                gw(json!({"supported": supported, "requested": requested})),
            ),
            GatewayError::MethodNotFound(_) => (
                StatusCode::NOT_FOUND,
                codes::METHOD_NOT_FOUND,
                gw(json!({})),
            ),
            GatewayError::LegacyMethodNotFound(_) => {
                (StatusCode::OK, codes::METHOD_NOT_FOUND, gw(json!({})))
            }
            GatewayError::InvalidParams(_) => {
                (StatusCode::OK, codes::INVALID_PARAMS, gw(json!({})))
            }
            GatewayError::SessionRequired(_) => (
                StatusCode::BAD_REQUEST,
                codes::INVALID_REQUEST,
                gw(json!({})),
            ),
            GatewayError::SessionNotFound => {
                (StatusCode::NOT_FOUND, codes::INVALID_REQUEST, gw(json!({})))
            }
            GatewayError::MethodNotAllowed(_) => (
                StatusCode::METHOD_NOT_ALLOWED,
                codes::INVALID_REQUEST,
                gw(json!({})),
            ),
            GatewayError::UnsupportedEncoding(_) => (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                codes::INVALID_REQUEST,
                gw(json!({})),
            ),
            GatewayError::BodyTimeout => (
                StatusCode::REQUEST_TIMEOUT,
                codes::INVALID_REQUEST,
                gw(json!({})),
            ),
            GatewayError::BodyTooLarge { .. } => (
                StatusCode::PAYLOAD_TOO_LARGE,
                codes::INVALID_REQUEST,
                gw(json!({})),
            ),
            GatewayError::HeadersTooLarge(_) => (
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                codes::INVALID_REQUEST,
                gw(json!({})),
            ),
            GatewayError::OriginForbidden(_) => {
                (StatusCode::FORBIDDEN, codes::FORBIDDEN, gw(json!({})))
            }
            GatewayError::UpstreamUnavailable { upstream, .. } => (
                StatusCode::OK,
                codes::UPSTREAM_UNAVAILABLE,
                gw(json!({"upstream": upstream})),
            ),
            GatewayError::UpstreamTimeout { upstream } => (
                StatusCode::OK,
                codes::UPSTREAM_TIMEOUT,
                gw(json!({"upstream": upstream})),
            ),
            GatewayError::UpstreamProtocol { upstream, .. } => (
                StatusCode::OK,
                codes::UPSTREAM_PROTOCOL,
                gw(json!({"upstream": upstream})),
            ),
            GatewayError::Unsupported(_) => (StatusCode::OK, codes::INTERNAL_ERROR, gw(json!({}))),
            GatewayError::UpstreamNeedsCapability(e) => {
                (StatusCode::BAD_REQUEST, e.code, e.data.clone())
            }
            GatewayError::MissingClientCapability { missing, .. } => (
                StatusCode::OK,
                codes::INVALID_REQUEST,
                gw(json!({"missingCapabilities": missing})),
            ),
            GatewayError::Unauthenticated { reason, .. } => (
                StatusCode::UNAUTHORIZED,
                codes::FORBIDDEN,
                gw(json!({"reason": reason})),
            ),
            GatewayError::AuthUnavailable { .. } => (
                StatusCode::SERVICE_UNAVAILABLE,
                codes::FORBIDDEN,
                gw(json!({})),
            ),
            GatewayError::Forbidden { scopes, .. } => (
                StatusCode::FORBIDDEN,
                codes::FORBIDDEN,
                gw(json!({"requiredScopes": scopes})),
            ),
            GatewayError::Credentials(f) if f.refused => (
                StatusCode::FORBIDDEN,
                codes::FORBIDDEN,
                gw(json!({"upstream": f.upstream, "reason": f.reason})),
            ),
            GatewayError::Credentials(f) => (
                StatusCode::SERVICE_UNAVAILABLE,
                codes::UPSTREAM_UNAVAILABLE,
                gw(json!({"upstream": f.upstream, "reason": f.reason})),
            ),
            GatewayError::GuardrailDenied { .. } => (
                StatusCode::FORBIDDEN,
                codes::FORBIDDEN,
                gw(json!({"reason": "guardrail"})),
            ),
            GatewayError::GuardrailUnavailable { .. } => (
                StatusCode::SERVICE_UNAVAILABLE,
                codes::UPSTREAM_UNAVAILABLE,
                gw(json!({"reason": "guardrail_unavailable"})),
            ),
            GatewayError::Quarantined { tool, .. } => (
                StatusCode::FORBIDDEN,
                codes::FORBIDDEN,
                gw(json!({"tool": tool, "reason": "quarantined"})),
            ),
            GatewayError::RateLimited {
                rule,
                retry_after_ms,
            } => (
                StatusCode::TOO_MANY_REQUESTS,
                codes::RATE_LIMITED,
                gw(json!({"rule": rule, "retryAfterMs": retry_after_ms})),
            ),
        };
        (
            status,
            RpcError {
                code,
                message: msg,
                data,
            },
        )
    }

    /// Response headers that go with the error (challenges, retry hints).
    pub fn headers(&self) -> Vec<(&'static str, String)> {
        match self {
            GatewayError::Unauthenticated { challenge, .. }
            | GatewayError::AuthUnavailable { challenge }
            | GatewayError::Forbidden { challenge, .. } => {
                vec![("www-authenticate", challenge.clone())]
            }
            GatewayError::RateLimited { retry_after_ms, .. } => {
                vec![(
                    "retry-after",
                    retry_after_ms.div_ceil(1000).max(1).to_string(),
                )]
            }
            GatewayError::Credentials(f) => f
                .challenge
                .iter()
                .map(|c| ("www-authenticate", c.clone()))
                .collect(),
            GatewayError::MethodNotAllowed(_) => vec![("allow", "POST".into())],
            _ => Vec::new(),
        }
    }

    /// Short, bounded label for metrics.
    pub fn outcome(&self) -> &'static str {
        match self {
            GatewayError::Malformed(_)
            | GatewayError::MissingMeta(_)
            | GatewayError::HeaderMismatch(_)
            | GatewayError::UnsupportedVersion { .. }
            | GatewayError::MethodNotFound(_)
            | GatewayError::LegacyMethodNotFound(_)
            | GatewayError::InvalidParams(_)
            | GatewayError::SessionRequired(_)
            | GatewayError::SessionNotFound
            | GatewayError::MethodNotAllowed(_)
            | GatewayError::BodyTimeout
            | GatewayError::UnsupportedEncoding(_)
            | GatewayError::BodyTooLarge { .. }
            | GatewayError::HeadersTooLarge(_)
            | GatewayError::OriginForbidden(_)
            | GatewayError::UpstreamNeedsCapability(_) => "client_error",
            GatewayError::UpstreamUnavailable { .. } => "upstream_unavailable",
            GatewayError::UpstreamTimeout { .. } => "upstream_timeout",
            GatewayError::UpstreamProtocol { .. } => "upstream_protocol",
            GatewayError::Unsupported(_) => "unsupported",
            GatewayError::MissingClientCapability { .. } => "missing_capability",
            GatewayError::Unauthenticated { .. } | GatewayError::AuthUnavailable { .. } => {
                "unauthenticated"
            }
            GatewayError::Forbidden { .. }
            | GatewayError::Quarantined { .. }
            | GatewayError::GuardrailDenied { .. } => "forbidden",
            GatewayError::GuardrailUnavailable { .. } => "upstream_unavailable",
            GatewayError::Credentials(f) if f.refused => "forbidden",
            GatewayError::Credentials(_) => "upstream_unavailable",
            GatewayError::RateLimited { .. } => "rate_limited",
        }
    }
}
