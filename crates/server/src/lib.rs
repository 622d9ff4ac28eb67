//! The gateway's front: listener, the both-era MCP endpoint of every route, SSE
//! relaying, admin endpoints (`/healthz`, `/readyz`, `/metrics`) and the one
//! mapping from errors to HTTP + JSON-RPC (`error`).
//!
//! Start reading at `http::route`, then `mcp::handle` (phases), then `modern` /
//! `legacy` (era rules) and `tools` (catalog and call forwarding). This crate must
//! never forward a client's credentials upstream (headers go through
//! `junction_policy::forwardable_headers`) and never trust a mirrored header
//! before checking it against the body.

mod bridge;
mod cancel;
mod caps;
mod completion;
mod conn_guard;
mod envelope;
mod error;
mod forward;
mod inline_wake;
mod legacy;
mod list_cache;
mod listen;
mod listener;
mod logging;
mod mcp;
mod merged;
mod modern;
mod notify;
mod prompts;
mod reload;
mod resources;
mod response;
mod session;
mod state;
mod tls;
mod tools;

pub use crate::error::GatewayError;
pub use crate::listener::{serve, warm_up, Shared};
pub use crate::reload::{reload, watch};
pub use crate::state::{BuildError, State};
pub use crate::tools::route_catalog_for;
