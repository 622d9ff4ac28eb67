//! `_meta` keys (NOTES §2.4). The `io.modelcontextprotocol/` prefix is
//! reserved for the spec; Junction's own keys live under `dev.junction/`.

pub const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
pub const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
pub const LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
pub const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
pub const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
pub const PROGRESS_TOKEN: &str = "progressToken";

/// The `_meta` members every hop sets for itself (version, capabilities,
/// client info): a gateway writes its own upstream, never the client's.
pub fn is_stamped(key: &str) -> bool {
    matches!(key, PROTOCOL_VERSION | CLIENT_CAPABILITIES | CLIENT_INFO)
}
/// Gateway's own key listing upstreams served from a stale cache.
pub const GATEWAY_DEGRADED: &str = "dev.junction/degraded";
