//! junction-protocol: the wire vocabulary every other Junction crate shares.
//!
//! JSON-RPC envelopes (parsed only as far as routing needs, params kept raw),
//! MCP version strings, `_meta` keys and error codes, the header value codec of
//! NOTES §4.1, tool-name and `x-mcp-header` rules (NOTES §5.4–5.6) and sealed
//! (HMAC-signed) tokens.
//!
//! This crate never does I/O, never panics on untrusted input and never
//! re-serializes payloads it only forwards (`arguments`, results).

pub mod codes;
pub mod header_value;
pub mod jsonrpc;
pub mod meta;
pub mod names;
pub mod object;
pub mod seal;
pub mod sse;
pub mod version;
pub mod xmcp;

pub use header_value::HeaderValueError;
pub use jsonrpc::{ClientMessage, Id, RawParams, RpcError, ServerMessage};
pub use seal::{SealError, Sealer};
pub use xmcp::{HeaderParam, PrimitiveKind, XMcpError};
