//! Edge policy: what a client request must pass before Junction trusts any of it,
//! and which of its headers may travel on to an upstream (DESIGN §4).
//!
//! - [`Authenticator`]: OAuth 2.1 resource server. Verifies bearer JWTs against a
//!   JWKS (file, or URL fetched lazily, cached, refetched on an unknown `kid`),
//!   remembers tokens that verified (process-wide, and each connection's
//!   last one: [`LastToken`]), and renders `WWW-Authenticate` challenges and
//!   RFC 9728 metadata. The caller it finds is a [`Principal`].
//! - [`Authorizer`]: scope rules mapping scopes to exposed-name globs.
//! - [`RateLimiter`]: GCRA buckets, local (dashmap) or shared through Redis.
//! - header rules that keep a client's credentials away from upstreams (§4.5)
//!   and the header limits (§4.1).
//! - [`client_ip`]: the caller's address behind trusted proxies.
//! - [`UpstreamCredentials`]: what an upstream is sent as `Authorization`
//!   (a static token, OAuth client credentials, RFC 8693 token exchange, or
//!   the caller's own token for an upstream it was issued for).
//!
//! Its only I/O is fetching a JWKS URL, asking token endpoints for upstream
//! tokens, and talking to Redis. It must never accept a token that was not
//! issued for Junction, never trust an `alg` the key does not have, and never
//! let `Authorization`, `Cookie`, `Proxy-*` or a hop-by-hop header through,
//! whatever the configured allow-list says.

mod auth;
mod authz;
mod client_ip;
mod credentials;
mod headers;
mod rate;

pub use auth::{bearer_token, AuthError, Authenticator, Identity, LastToken, Principal};
pub use authz::{Authorizer, Kind};
pub use client_ip::client_ip;
pub use credentials::{Caller, CredentialError, Token, UpstreamCredentials};
pub use headers::{
    check_header_limits, check_origin, forwardable_headers, is_never_forwarded, EdgeError,
    ForwardList,
};
pub use rate::{RateKeyParts, RateLimited, RateLimiter};

/// A policy component could not be built from its (already validated) config.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("JWKS {source_name}: {reason}")]
    Jwks { source_name: String, reason: String },
    #[error("glob {pattern:?}: {reason}")]
    Glob { pattern: String, reason: String },
    #[error("redis: {0}")]
    Redis(String),
    #[error("TLS setup: {0}")]
    Tls(String),
    /// An upstream's `credentials`: a secret not set or unreadable, a bad CA file.
    #[error("upstream {upstream} credentials: {reason}")]
    Credentials { upstream: String, reason: String },
}

// The server shares these across tasks: keep that a compile error to break.
const _: fn() = || {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Authenticator>();
    send_sync::<Authorizer>();
    send_sync::<RateLimiter>();
    send_sync::<UpstreamCredentials>();
};
