//! What Junction tells clients it can do, in one place for both eras
//! (`server/discover` and the handshake-era `initialize`). A capability is
//! advertised only when the gateway really honours it through every route.

use serde_json::{json, Value};

use crate::state::State;

/// The `capabilities` object of `server/discover` and `initialize`.
pub fn advertised(_state: &State) -> Value {
    json!({"tools": {"listChanged": false}, "prompts": {}, "resources": {}})
}

/// Instructions shown to clients of both eras.
pub const INSTRUCTIONS: &str =
    "Junction MCP gateway: tools of several MCP servers, named <server>__<tool>.";
