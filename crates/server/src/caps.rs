//! What Junction tells clients about itself, in one place for both eras
//! (`server/discover`, the handshake-era `initialize`, list results): the
//! versions it serves, its capabilities and its server info. A capability is
//! advertised only when the gateway really honours it through every route.

use junction_protocol::version;
use serde_json::{json, Value};

use crate::state::State;
use crate::tasks;

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
///
/// Tasks are relayed on both wires (`tasks`): a modern client sees the
/// 2026-07-28 extension, a handshake-era one the 2025-11-25 `tasks`
/// capability (cancel and task-augmented `tools/call`; no `tasks/list`, which
/// would show one caller the tasks of others sharing an upstream session).
/// Whether a call becomes a task stays the upstream's decision.
pub fn advertised(state: &State, modern: bool) -> Value {
    let subscribe = state
        .upstreams
        .values()
        .any(|u| u.client.can_watch_resources());
    let mut caps = json!({
        "tools": {"listChanged": true},
        "prompts": {"listChanged": true},
        "resources": {"listChanged": true, "subscribe": subscribe},
        "completions": {},
        "logging": {},
    });
    if modern {
        caps["extensions"] = json!({(tasks::EXTENSION): {}});
    } else {
        caps["tasks"] = json!({"cancel": {}, "requests": {"tools": {"call": {}}}});
    }
    caps
}

/// Instructions shown to clients of both eras.
pub const INSTRUCTIONS: &str =
    "Junction MCP gateway: tools of several MCP servers, named <server>__<tool>.";

/// Every version this gateway serves: modern through `_meta`, the handshake era
/// through `initialize`.
pub fn supported_versions() -> Vec<&'static str> {
    let mut v = vec![version::MODERN];
    v.extend_from_slice(version::LEGACY);
    v
}

pub fn server_info() -> Value {
    json!({"name": "junction", "version": env!("CARGO_PKG_VERSION")})
}
