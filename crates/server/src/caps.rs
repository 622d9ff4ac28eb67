//! What Junction tells clients it can do, in one place for both eras
//! (`server/discover` and the handshake-era `initialize`). A capability is
//! advertised only when the gateway really honours it through every route.

use serde_json::{json, Value};

use crate::state::State;

/// The `capabilities` object of `server/discover` and `initialize`.
///
/// List changes of every kind reach clients through the change hub (modern
/// `subscriptions/listen`, handshake-era GET stream), from upstream notices and
/// from reloads. Resource updates need an upstream that can deliver them
/// outside a request (HTTP; stdio upstreams only send list changes there), so
/// `subscribe` is advertised only when some upstream is one.
///
/// `completions` and `logging` are Junction's own: completion is routed to the
/// upstream of the prompt or resource (one without completion answers "no
/// suggestions"), and log messages are relayed at the level each client asked
/// for (`logging`).
pub fn advertised(state: &State) -> Value {
    let subscribe = state
        .upstreams
        .values()
        .any(|u| u.client.can_watch_resources());
    json!({
        "tools": {"listChanged": true},
        "prompts": {"listChanged": true},
        "resources": {"listChanged": true, "subscribe": subscribe},
        "completions": {},
        "logging": {},
    })
}

/// Instructions shown to clients of both eras.
pub const INSTRUCTIONS: &str =
    "Junction MCP gateway: tools of several MCP servers, named <server>__<tool>.";
