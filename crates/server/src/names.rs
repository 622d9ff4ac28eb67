//! The MCP header names looked up on every request, parsed once: pass these,
//! not a `&str`, on the hot path (a `&str` is parsed and validated as a header
//! name on every lookup).

use http::HeaderName;

pub const MCP_PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
pub const MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");
pub const MCP_NAME: HeaderName = HeaderName::from_static("mcp-name");
pub const MCP_SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
