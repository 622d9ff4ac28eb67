//! Everything one replica remembers between requests, in one place owned by
//! `State` and carried across reloads: open change streams, handshake-era
//! session extras (subscribed URIs, log levels, cancellable calls, ended
//! sessions), calls held for client input, questions waiting for a client's
//! answer, and the prompt/resource list caches. Every table is bounded and
//! expiring; none is a process static, so two gateways in one process share
//! nothing.
//!
//! Only the data lives here; what is done with it lives with the phase that
//! does it (`notify` for the change hub, `bridge` for held calls). Nothing here
//! survives a restart. With `fleet.redis_url`, ended sessions, session log
//! levels and subscribed URIs reach the other replicas through the fleet bus
//! (`fleet`, applied by `notify`); the rest stays here: DESIGN §10 and the
//! ARCHITECTURE section "What binds to one replica" say what that costs.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use arc_swap::ArcSwapOption;
use bytes::Bytes;
use junction_catalog::{ListCache, ResourceIndex};
use junction_protocol::jsonrpc::{Id, RpcError};
use junction_upstream::ResponseStream;
use serde_json::value::RawValue;
use tokio::sync::{mpsc, oneshot, Notify};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::State;

/// Open change streams per replica.
pub const MAX_SUBSCRIBERS: usize = 10_000;
/// Handshake-era sessions with subscribed URIs per replica.
pub const MAX_SUBSCRIBED_SESSIONS: usize = 10_000;
/// Calls held at once per replica; more are refused (and cancelled upstream).
pub const MAX_HELD: usize = 1024;
/// Questions to handshake-era clients in flight at once per replica.
pub const MAX_WAITING: usize = 4096;

/// The per-replica tables.
#[derive(Default)]
pub struct Replica {
    /// Open change streams, what each saw last, and handshake-era
    /// subscriptions.
    pub hub: Arc<Hub>,
    /// `logging/setLevel` of handshake-era sessions (sealed tokens carry none).
    pub log_levels: crate::logging::SessionLevels,
    /// Handshake-era calls a `notifications/cancelled` can reach.
    pub in_flight: crate::cancel::InFlight,
    /// Handshake-era sessions their clients ended with DELETE.
    pub revoked: crate::session::Revoked,
    /// Upstream calls held for a modern client's retry.
    pub held: Mutex<HashMap<String, HeldCall>>,
    /// (principal digest, gateway request id) → the call waiting for that
    /// answer of a handshake-era client.
    pub waiting: Mutex<HashMap<(String, String), oneshot::Sender<Answer>>>,
    /// Per-upstream prompt and resource lists (tools have `State::cache`).
    pub lists: ListCache,
    /// Per route: which upstream serves which listed URI and template.
    pub resources: ResourceIndex,
    /// The Redis bus to the other replicas (`fleet.redis_url`), once set up.
    pub fleet: std::sync::OnceLock<Arc<crate::fleet::Bus>>,
    /// This replica as the others reach it (`fleet.advertise_url`): named in
    /// what it hands out for the calls it holds, so requests for them are
    /// relayed here.
    pub advertise: ArcSwapOption<String>,
    /// The HTTP client that relays requests to the replica holding their call.
    pub relay: std::sync::OnceLock<RelayClient>,
}

/// Plain HTTP between replicas (`fleet.advertise_url` is `http://`).
pub type RelayClient = hyper_util::client::legacy::Client<
    hyper_util::client::legacy::connect::HttpConnector,
    http_body_util::Full<Bytes>,
>;

impl Replica {
    /// Tells the other replicas about a change this one just applied (no-op
    /// without `fleet.redis_url`).
    pub fn share(&self, event: crate::fleet::Event, ttl: std::time::Duration) {
        if let Some(bus) = self.fleet.get() {
            bus.publish(event, ttl);
        }
    }
}

impl Replica {
    /// This replica's bounded tables: (name, live entries, capacity), for
    /// `junction_table_entries` / `junction_table_capacity`.
    pub fn tables(&self) -> [(&'static str, usize, usize); 8] {
        let now = Instant::now();
        let subscribed = {
            let mut sessions = lock(&self.hub.sessions);
            sessions.retain(|_, s| s.expires > now);
            sessions.len()
        };
        [
            (
                "change_streams",
                lock(&self.hub.subs).len(),
                MAX_SUBSCRIBERS,
            ),
            ("subscribed_sessions", subscribed, MAX_SUBSCRIBED_SESSIONS),
            (
                "session_log_levels",
                self.log_levels.live(),
                crate::logging::MAX_SESSIONS,
            ),
            (
                "cancellable_calls",
                self.in_flight.len(),
                crate::cancel::MAX_CALLS,
            ),
            (
                "ended_sessions",
                self.revoked.live(),
                crate::session::MAX_REVOKED,
            ),
            ("held_calls", lock(&self.held).len(), MAX_HELD),
            ("waiting_questions", lock(&self.waiting).len(), MAX_WAITING),
            (
                "fleet_pending",
                self.fleet.get().map_or(0, |b| b.pending()),
                crate::fleet::MAX_PENDING,
            ),
        ]
    }
}

/// A poisoned table is still a table: nothing panics while holding one.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The change hub's data: every open change stream (modern
/// `subscriptions/listen`, handshake-era GET) with a digest of the lists its
/// client saw last. `notify` drives it.
#[derive(Default)]
pub struct Hub {
    pub subs: Mutex<HashMap<u64, Arc<Subscriber>>>,
    pub next_id: AtomicU64,
    /// The state diffs run against (the latest one a request saw).
    pub current: ArcSwapOption<Weak<State>>,
    pub wake: Notify,
    pub started: AtomicBool,
    /// Upstream clients (by address) whose changes are being listened to.
    pub watched: Mutex<HashSet<usize>>,
    /// Handshake-era `resources/subscribe` sets, per (route, session key).
    pub sessions: Mutex<HashMap<(String, String), SessionUris>>,
}

/// What a stream asked for (modern) or always gets (handshake era).
#[derive(Clone, Debug, Default)]
pub struct Wants {
    pub tools: bool,
    pub prompts: bool,
    pub resources: bool,
    /// Downstream URI → owning upstream (modern `resourceSubscriptions`).
    pub uris: BTreeMap<String, String>,
}

#[derive(Clone, Debug)]
pub enum Tag {
    /// The listen request's id: the subscriptionId of every message.
    Modern(Id),
    /// Handshake era: the session key whose `resources/subscribe` set applies.
    Legacy { session: String },
}

pub struct Subscriber {
    pub id: u64,
    pub route: String,
    pub identity: Option<junction_policy::Principal>,
    pub principal: String,
    pub wants: Wants,
    pub tag: Tag,
    pub tx: mpsc::Sender<Bytes>,
    pub cancel: CancellationToken,
    pub last: Mutex<Digests>,
}

/// What one subscriber sees, reduced to a digest per list: two equal digests
/// mean nothing it could list changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Digests {
    pub tools: Option<u64>,
    pub prompts: Option<u64>,
    pub resources: Option<u64>,
}

/// Handshake-era `resources/subscribe` sets, per (route, session key).
pub struct SessionUris {
    pub uris: BTreeMap<String, String>,
    pub expires: Instant,
}

/// An upstream call held until its modern client retries with answers.
pub struct HeldCall {
    pub principal: String,
    pub upstream: String,
    pub target: String,
    pub method: &'static str,
    pub stream: ResponseStream,
    pub asks: Vec<Ask>,
    pub expires: Instant,
}

/// One question of a held call: the key the client sees, the upstream's id.
pub struct Ask {
    pub key: String,
    pub id: Id,
    pub method: String,
    pub params: Option<Box<RawValue>>,
}

/// A handshake-era client's answer to a server request.
pub type Answer = Result<Box<RawValue>, RpcError>;
