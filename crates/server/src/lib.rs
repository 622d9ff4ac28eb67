//! The gateway's front: the listener, the both-era MCP endpoint of every
//! route as one request pipeline in phases, the admin endpoints (`/healthz`,
//! `/readyz`, `/metrics`, the optional status page `status`) and the one
//! mapping from errors to HTTP + JSON-RPC (`error`).
//!
//! Start reading at `listener::route`, then `endpoint::phases` (the pipeline,
//! top-down), then `methods` (the one method table and its handlers). The
//! modules are layered (ARCHITECTURE.md, "Layers", checked by
//! `tests/layering.rs`): each imports only those below it.
//!
//! This crate must never forward a client's credentials upstream (headers go
//! through `junction_policy::forwardable_headers`) and never trust a mirrored
//! header before checking it against the body.

// 0: leaves
mod cancel;
mod conn_guard;
mod envelope;
mod error;
mod fleet;
mod inline_wake;
mod logging;
mod names;
mod record;
mod session;
mod tls;
// 1
mod response;
// 2: the runtime state and the replica's tables
mod state;
// 3: the request context
mod context;
// 4: what the phases share
mod admit;
mod audit;
mod bridge;
mod caps;
mod era;
mod forward;
mod guardrail;
mod identity;
mod notify;
mod relay;
mod resolve;
mod tasks;
mod views;
// 5: the method table and its handlers
mod methods;
// 6: the pipeline
mod endpoint;
// 7: serving
mod h1;
mod listener;
mod reload;
mod status;
mod workers;

pub use crate::error::GatewayError;
pub use crate::listener::{serve, warm_up, Shared};
pub use crate::reload::{reload, watch};
pub use crate::state::{BuildError, State};
pub use crate::views::route_catalog_for;
