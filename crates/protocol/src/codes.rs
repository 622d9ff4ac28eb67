//! JSON-RPC error codes: the standard ones, the MCP-defined ones (NOTES §2.3)
//! and Junction's own, which sit outside the reserved `-32768..-32000` range.

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;

pub const HEADER_MISMATCH: i64 = -32020;
pub const MISSING_CLIENT_CAPABILITY: i64 = -32021;
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

pub const UPSTREAM_UNAVAILABLE: i64 = -31001;
pub const UPSTREAM_TIMEOUT: i64 = -31002;
pub const UPSTREAM_PROTOCOL: i64 = -31003;
pub const RATE_LIMITED: i64 = -31004;
pub const FORBIDDEN: i64 = -31005;
