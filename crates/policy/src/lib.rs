//! Edge policy: what a client request must pass before Junction trusts any of it,
//! and which of its headers may travel on to an upstream.
//!
//! This crate decides; it never performs I/O. Authentication, scope rules and rate
//! limits join it in the policy issue; today it holds the header rules that keep a
//! client's credentials away from upstreams (DESIGN §4.5) and the header limits (§4.1).
//! It must never let `Authorization`, `Cookie`, `Proxy-*` or a hop-by-hop header
//! through, whatever the configured allow-list says.

mod headers;

pub use headers::{
    check_header_limits, check_origin, forwardable_headers, is_never_forwarded, EdgeError,
};
