//! junction-testkit: dev-only helpers for Junction's end-to-end tests.
//!
//! - `mock`: HTTP MCP upstreams (modern, legacy, dual) that validate requests
//!   like strict servers and record everything they receive, plus
//!   `FaultyUpstream` (one scripted fault each) and a stdio fault fixture.
//! - `client`: a JSON-RPC test client for both eras (hyper-util, no reqwest).
//! - `gateway`: `spawn_gateway()`, which runs the built `junction` binary.
//! - `peers`: the real third-party peers of tests/interop (pinned venvs and npm
//!   folder from setup.sh), spawned and waited for by their `READY <port>` line.
//! - `redis`: a real `redis-server` on a free loopback port (scripts/redis.sh).
//!
//! It implements the protocol from the spec, never from Junction's own crates
//! (it depends on none of them), so a shared misunderstanding cannot hide a bug.
//! It binds only 127.0.0.1 and never sends traffic off loopback.

pub mod client;
pub mod codec;
pub mod fast;
pub mod gateway;
pub mod jwt;
pub mod mock;
pub mod peers;
pub mod redis;
mod response;
pub mod sse;

pub use client::{TestClient, TestResponse, TestStream};
pub use gateway::{metric, spawn_gateway, spawn_gateway_with_env, spawn_with_command, Gateway};
pub use mock::{
    faulty_stdio_script, Behavior, Fault, FaultyUpstream, MockEra, MockSpec, MockTool,
    MockUpstream, Recorded, REQUEST_STATE,
};
pub use response::accept_all;

/// A port free on 127.0.0.1 right now, for a process that must be told its
/// address before it starts (a replica's advertised URL, a redis-server).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port on 127.0.0.1")
}

/// The modern protocol version the client and mocks speak.
pub const MODERN: &str = "2026-07-28";
