//! The one error type of this crate; the server renders it (DESIGN §5).

use junction_protocol::jsonrpc::RpcError;

#[derive(thiserror::Error, Debug)]
pub enum UpstreamError {
    /// Nothing was sent: connect refused, DNS/TLS failure, spawn failed, the
    /// process died before the request was written, bad upstream spec.
    #[error("upstream unavailable: {0}")]
    Unavailable(String),
    /// The request's deadline (connect + whole response) passed.
    #[error("upstream timed out")]
    Timeout,
    /// The upstream broke the protocol: invalid JSON, wrong id, truncated SSE,
    /// unexpected status or content type, oversized message.
    #[error("upstream broke the protocol: {0}")]
    Protocol(String),
    /// A non-success HTTP status without a usable JSON-RPC body.
    #[error("upstream answered HTTP {status}")]
    Http { status: u16, body: String },
    /// The connection or process went away after the request was sent.
    #[error("upstream closed the connection")]
    Closed,
    /// The upstream answered a request Junction made on its own behalf
    /// (`tools/list`, `initialize`, …) with a JSON-RPC error.
    #[error("upstream answered with JSON-RPC error {}: {}", .0.code, .0.message)]
    Rpc(RpcError),
}

impl UpstreamError {
    /// Whether the upstream may have seen (and acted on) the request, i.e.
    /// whether retrying a non-idempotent call could run it twice.
    pub fn request_may_have_reached_upstream(&self) -> bool {
        match self {
            UpstreamError::Unavailable(_) => false,
            UpstreamError::Timeout
            | UpstreamError::Protocol(_)
            | UpstreamError::Http { .. }
            | UpstreamError::Closed
            | UpstreamError::Rpc(_) => true,
        }
    }
}
