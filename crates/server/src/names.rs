//! The MCP header names Junction sets, parsed once. The ones it reads on
//! every request are found in one pass over the request's headers
//! (`context::Known`), not looked up by name.

use http::HeaderName;

pub const MCP_SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
