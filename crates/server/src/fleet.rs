//! The fleet bus: what a client changes on one replica that every replica
//! must know, carried through Redis (`fleet.redis_url`), the one engine the
//! replicas share. Three things travel: a handshake-era session ended by
//! DELETE, a session's `logging/setLevel`, a session's
//! `resources/subscribe` set (each replica holding the session's GET stream
//! watches the upstream itself), and a `notifications/cancelled` for a call
//! running on another replica.
//!
//! Each change is applied on the replica that took it at once, then written
//! to Redis twice in one pipeline: a key that lives as long as the change
//! (`SET … PX`), which a replica reads when it (re)subscribes, and a message
//! on one channel (`PUBLISH`), which the others apply within milliseconds.
//! So a replica that starts later, or lost its subscription for a while,
//! catches up when it is back, and the delay any replica can lag is bounded
//! by its reconnect.
//!
//! Redis down: changes wait in a bounded queue ([`MAX_PENDING`]) and go out
//! when it is back (nothing is lost unless the queue overflows, which is
//! logged and counted); the replica that took a change honours it meanwhile.
//! Nothing on the request path waits for Redis.
//!
//! What cannot travel (a held upstream stream) stays where it is, and a
//! request for it is relayed there (`relay`): the sealed names of the owning
//! replica (question ids here, requestState in `envelope`) and the hop token
//! a relayed request carries are made here too. They need only the shared
//! sealing key, not Redis.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use std::net::IpAddr;

use futures_util::StreamExt;
use junction_protocol::seal::{now_ms, Sealer};
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, Notify};

/// Changes kept while Redis cannot be reached; older ones are dropped first.
pub const MAX_PENDING: usize = 10_000;
/// Every key and the channel start with this.
const PREFIX: &str = "junction:fleet:";
const CHANNEL: &str = "junction:fleet:events";
/// A dead Redis never holds a change longer than this before a retry.
const RETRY: Duration = Duration::from_secs(1);
const OP_TIMEOUT: Duration = Duration::from_secs(2);

/// One change a client made, as every replica applies it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Event {
    /// A session ended by DELETE (`session::key`).
    Ended { session: String },
    /// A session's `logging/setLevel` (the level's name).
    Level { session: String, level: String },
    /// A session's whole `resources/subscribe` set on one route (listed URI
    /// → owning upstream); empty when it unsubscribed from the last one.
    Uris {
        route: String,
        session: String,
        uris: BTreeMap<String, String>,
    },
    /// A handshake-era `notifications/cancelled` for a call this replica
    /// does not run (the request id as the client wrote it, JSON): the
    /// replica running it ends it. Only published, never kept.
    Cancel { session: String, request: String },
}

impl Event {
    /// The Redis key that keeps this change for replicas that were not
    /// listening when it was published.
    fn key(&self) -> Option<String> {
        Some(match self {
            Event::Ended { session } => format!("{PREFIX}ended:{session}"),
            Event::Level { session, .. } => format!("{PREFIX}level:{session}"),
            Event::Uris { route, session, .. } => format!("{PREFIX}uris:{session}:{route}"),
            // A call a late replica never ran has nothing to cancel.
            Event::Cancel { .. } => return None,
        })
    }
}

/// What travels: the change, how long it holds (ms), and the replica it came
/// from (a replica skips its own).
#[derive(Debug, Serialize, Deserialize)]
struct Wire {
    from: u64,
    ttl_ms: u64,
    event: Event,
}

/// A received change and how long it still holds.
pub type Received = (Event, Duration);

pub struct Bus {
    client: redis::Client,
    id: u64,
    pending: Mutex<VecDeque<(Event, tokio::time::Instant)>>,
    wake: Notify,
    /// Subscribed and caught up.
    up: AtomicBool,
    dropped: AtomicU64,
    received: Mutex<Option<mpsc::UnboundedReceiver<Received>>>,
    deliver: mpsc::UnboundedSender<Received>,
    started: AtomicBool,
}

impl Bus {
    /// A bus on `url`; nothing connects until [`Bus::start`].
    pub fn new(url: &str) -> Result<Arc<Bus>, String> {
        let client = redis::Client::open(url).map_err(|e| format!("fleet.redis_url: {e}"))?;
        let (deliver, received) = mpsc::unbounded_channel();
        Ok(Arc::new(Bus {
            client,
            id: rand::random(),
            pending: Mutex::new(VecDeque::new()),
            wake: Notify::new(),
            up: AtomicBool::new(false),
            dropped: AtomicU64::new(0),
            received: Mutex::new(Some(received)),
            deliver,
            started: AtomicBool::new(false),
        }))
    }

    /// Starts the publisher and the subscriber (once; later calls do nothing).
    pub fn start(self: &Arc<Self>) {
        if self.started.swap(true, Ordering::AcqRel) {
            return;
        }
        tokio::spawn(Arc::clone(self).publish_loop());
        tokio::spawn(Arc::clone(self).subscribe_loop());
    }

    /// What other replicas changed, once: the one consumer applies them.
    pub fn take_received(&self) -> Option<mpsc::UnboundedReceiver<Received>> {
        lock(&self.received).take()
    }

    /// Whether this replica is subscribed and has read what Redis keeps.
    pub fn is_up(&self) -> bool {
        self.up.load(Ordering::Acquire)
    }

    /// Changes waiting for Redis.
    pub fn pending(&self) -> usize {
        lock(&self.pending).len()
    }

    /// Changes dropped because the queue was full while Redis was down.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Queues `event` (already applied here) for every other replica; it
    /// holds for `ttl`. Never waits.
    pub fn publish(&self, event: Event, ttl: Duration) {
        let until = tokio::time::Instant::now() + ttl;
        {
            let mut pending = lock(&self.pending);
            if pending.len() >= MAX_PENDING {
                pending.pop_front();
                let n = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
                if n.is_power_of_two() {
                    tracing::warn!(
                        dropped = n,
                        "fleet: Redis unreachable and {MAX_PENDING} changes waiting; the oldest are dropped"
                    );
                }
            }
            pending.push_back((event, until));
        }
        self.wake.notify_one();
    }

    async fn publish_loop(self: Arc<Self>) {
        let mut conn: Option<redis::aio::MultiplexedConnection> = None;
        let mut warned = false;
        loop {
            let batch: Vec<(Event, tokio::time::Instant)> = lock(&self.pending).drain(..).collect();
            if batch.is_empty() {
                self.wake.notified().await;
                continue;
            }
            let sent = match self.send(&mut conn, &batch).await {
                Ok(()) => {
                    if warned {
                        tracing::info!("fleet: Redis reachable again; queued changes sent");
                        warned = false;
                    }
                    true
                }
                Err(e) => {
                    conn = None;
                    if !warned {
                        tracing::warn!(error = %e, "fleet: cannot publish to Redis; changes wait and are retried");
                        warned = true;
                    }
                    false
                }
            };
            if !sent {
                self.requeue(batch);
                tokio::time::sleep(RETRY).await;
            }
        }
    }

    /// A batch Redis did not take goes back to the front, in order.
    fn requeue(&self, batch: Vec<(Event, tokio::time::Instant)>) {
        let mut pending = lock(&self.pending);
        for item in batch.into_iter().rev() {
            if pending.len() >= MAX_PENDING {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            pending.push_front(item);
        }
    }

    async fn send(
        &self,
        conn: &mut Option<redis::aio::MultiplexedConnection>,
        batch: &[(Event, tokio::time::Instant)],
    ) -> Result<(), String> {
        if conn.is_none() {
            *conn = Some(bounded(self.client.get_multiplexed_async_connection()).await?);
        }
        let Some(c) = conn.as_mut() else {
            return Err("no connection".into());
        };
        let now = tokio::time::Instant::now();
        let mut pipe = redis::pipe();
        for (event, until) in batch {
            let ttl = until.saturating_duration_since(now);
            if ttl.is_zero() {
                continue;
            }
            let ttl_ms = (ttl.as_millis() as u64).max(1);
            let wire = Wire {
                from: self.id,
                ttl_ms,
                event: event.clone(),
            };
            let text = serde_json::to_string(&wire).map_err(|e| e.to_string())?;
            if let Some(key) = event.key() {
                pipe.cmd("SET")
                    .arg(key)
                    .arg(&text)
                    .arg("PX")
                    .arg(ttl_ms)
                    .ignore();
            }
            pipe.cmd("PUBLISH").arg(CHANNEL).arg(&text).ignore();
        }
        bounded(pipe.query_async::<()>(c)).await
    }

    async fn subscribe_loop(self: Arc<Self>) {
        let mut warned = false;
        loop {
            match self.listen().await {
                Ok(()) => {}
                Err(e) if !warned => {
                    tracing::warn!(error = %e, "fleet: not subscribed to Redis; retrying");
                    warned = true;
                }
                Err(_) => {}
            }
            self.up.store(false, Ordering::Release);
            tokio::time::sleep(RETRY).await;
            if self.deliver.is_closed() {
                return;
            }
        }
    }

    /// Subscribes, reads what Redis keeps, then applies messages until the
    /// connection ends.
    async fn listen(&self) -> Result<(), String> {
        let mut pubsub = bounded(self.client.get_async_pubsub()).await?;
        bounded(pubsub.subscribe(CHANNEL)).await?;
        // Subscribed first, then the stored changes: nothing falls between.
        self.catch_up().await?;
        self.up.store(true, Ordering::Release);
        tracing::info!("fleet: subscribed to Redis");
        let mut messages = pubsub.into_on_message();
        while let Some(msg) = messages.next().await {
            let Ok(text) = msg.get_payload::<String>() else {
                continue;
            };
            self.deliver_text(&text);
        }
        Err("subscription ended".into())
    }

    async fn catch_up(&self) -> Result<(), String> {
        let mut conn = bounded(self.client.get_multiplexed_async_connection()).await?;
        let mut cursor: u64 = 0;
        loop {
            let (next, keys): (u64, Vec<String>) = bounded(
                redis::cmd("SCAN")
                    .arg(cursor)
                    .arg("MATCH")
                    .arg(format!("{PREFIX}*"))
                    .arg("COUNT")
                    .arg(500)
                    .query_async(&mut conn),
            )
            .await?;
            for key in keys {
                let (text, pttl): (Option<String>, i64) = bounded(
                    redis::pipe()
                        .cmd("GET")
                        .arg(&key)
                        .cmd("PTTL")
                        .arg(&key)
                        .query_async(&mut conn),
                )
                .await?;
                if let (Some(text), Ok(ms @ 1..)) = (text, u64::try_from(pttl)) {
                    if let Ok(wire) = serde_json::from_str::<Wire>(&text) {
                        let _ = self.deliver.send((wire.event, Duration::from_millis(ms)));
                    }
                }
            }
            if next == 0 {
                return Ok(());
            }
            cursor = next;
        }
    }

    fn deliver_text(&self, text: &str) {
        match serde_json::from_str::<Wire>(text) {
            Ok(wire) if wire.from != self.id => {
                let _ = self
                    .deliver
                    .send((wire.event, Duration::from_millis(wire.ttl_ms)));
            }
            Ok(_) => {}
            Err(e) => tracing::debug!(error = %e, "fleet: unreadable message ignored"),
        }
    }
}

/// Marks a request one replica relays to the replica that holds its call
/// (`relay`): a sealed token with the caller's address, so the owner neither
/// relays it again nor counts it against rate limits twice, and logs the
/// real caller. Only a replica holding the shared key can make one.
pub const HOP_HEADER: http::HeaderName = http::HeaderName::from_static("junction-fleet-hop");
const HOP_PURPOSE: &str = "junction/fleet-hop/v1";
/// A relayed request reaches its owner at once; a token older than this is
/// not a relay in progress.
const HOP_TTL_MS: u64 = 30_000;
const QUESTION_PURPOSE: &str = "junction/question/v1";

/// What a relayed request says of itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hop {
    /// The caller's address as the first replica saw it.
    pub client: Option<IpAddr>,
}

pub fn seal_hop(sealer: &Sealer, client: Option<IpAddr>) -> String {
    let payload = client.map(|ip| ip.to_string()).unwrap_or_default();
    sealer.seal(
        HOP_PURPOSE,
        payload.as_bytes(),
        now_ms().saturating_add(HOP_TTL_MS),
    )
}

/// The hop a request's header names, if it is a genuine one.
pub fn open_hop(sealer: &Sealer, token: &str) -> Option<Hop> {
    let payload = sealer.open(HOP_PURPOSE, token, now_ms()).ok()?;
    let text = std::str::from_utf8(&payload).ok()?;
    Some(Hop {
        client: text.parse().ok(),
    })
}

/// The id of a server request Junction asks a handshake-era client: with an
/// owner (`fleet.advertise_url`), a sealed token naming it, so the client's
/// answer reaches this replica from any other; without, a random one.
pub fn question_id(sealer: &Sealer, owner: Option<&str>, ttl_ms: u64) -> String {
    let nonce = format!("{:032x}", rand::random::<u128>());
    match owner {
        None => format!("junction-{nonce}"),
        Some(owner) => {
            let payload = format!("{nonce} {owner}");
            let token = sealer.seal(
                QUESTION_PURPOSE,
                payload.as_bytes(),
                now_ms().saturating_add(ttl_ms),
            );
            format!("junction-{token}")
        }
    }
}

/// The replica that asked the question `id` names, if its id is sealed.
pub fn question_owner(sealer: &Sealer, id: &str) -> Option<String> {
    let token = id.strip_prefix("junction-")?;
    let payload = sealer.open(QUESTION_PURPOSE, token, now_ms()).ok()?;
    let text = String::from_utf8(payload).ok()?;
    text.split_once(' ').map(|(_, owner)| owner.to_owned())
}

/// One Redis operation, given up after `OP_TIMEOUT`; its error as text.
async fn bounded<T>(
    op: impl std::future::Future<Output = redis::RedisResult<T>>,
) -> Result<T, String> {
    tokio::time::timeout(OP_TIMEOUT, op)
        .await
        .map_err(|_| format!("no answer from Redis within {OP_TIMEOUT:?}"))?
        .map_err(|e| e.to_string())
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_round_trip_and_keys_name_what_they_hold() {
        let uris = BTreeMap::from([("file:///a".to_owned(), "files".to_owned())]);
        for event in [
            Event::Ended {
                session: "s1".into(),
            },
            Event::Level {
                session: "s1".into(),
                level: "error".into(),
            },
            Event::Uris {
                route: "/mcp".into(),
                session: "s1".into(),
                uris,
            },
        ] {
            let wire = Wire {
                from: 7,
                ttl_ms: 1000,
                event: event.clone(),
            };
            let text = serde_json::to_string(&wire).unwrap_or_default();
            let back: Wire = serde_json::from_str(&text).expect("round trip");
            assert_eq!(back.event, event);
            let key = event.key().unwrap_or_default();
            assert!(key.starts_with(PREFIX) && key.contains("s1"), "{key}");
        }
    }

    #[tokio::test]
    async fn a_full_queue_drops_the_oldest_change_and_counts_it() {
        let bus = Bus::new("redis://127.0.0.1:1").expect("a valid URL");
        for i in 0..MAX_PENDING + 3 {
            bus.publish(
                Event::Ended {
                    session: format!("s{i}"),
                },
                Duration::from_secs(60),
            );
        }
        assert_eq!(bus.pending(), MAX_PENDING);
        assert_eq!(bus.dropped(), 3);
        let first = lock(&bus.pending).front().map(|(e, _)| e.clone());
        assert_eq!(
            first,
            Some(Event::Ended {
                session: "s3".into()
            })
        );
    }

    #[test]
    fn hops_and_question_owners_open_only_with_the_shared_key() {
        let a = Sealer::new(b"key-a-key-a-key-a-key-a-key-a-key-a");
        let b = Sealer::new(b"key-b-key-b-key-b-key-b-key-b-key-b");
        let ip: IpAddr = "10.1.2.3".parse().unwrap_or(IpAddr::from([0, 0, 0, 0]));
        let hop = seal_hop(&a, Some(ip));
        assert_eq!(open_hop(&a, &hop), Some(Hop { client: Some(ip) }));
        assert_eq!(open_hop(&b, &hop), None, "another gateway's key");
        assert_eq!(open_hop(&a, "forged"), None);
        assert_eq!(
            open_hop(&a, &seal_hop(&a, None)),
            Some(Hop { client: None })
        );

        let id = question_id(&a, Some("http://10.1.2.3:8080"), 60_000);
        assert!(id.starts_with("junction-"), "{id}");
        assert_eq!(
            question_owner(&a, &id).as_deref(),
            Some("http://10.1.2.3:8080")
        );
        assert_eq!(question_owner(&b, &id), None);
        assert_eq!(question_owner(&a, &question_id(&a, None, 60_000)), None);
        assert_ne!(
            question_id(&a, Some("http://x:1"), 60_000),
            question_id(&a, Some("http://x:1"), 60_000),
            "each question its own id"
        );
    }

    #[test]
    fn own_messages_are_skipped_and_foreign_ones_delivered() {
        let bus = Bus::new("redis://127.0.0.1:1").expect("a valid URL");
        let mut rx = bus.take_received().expect("first take");
        assert!(bus.take_received().is_none(), "one consumer");
        let own = Wire {
            from: bus.id,
            ttl_ms: 5,
            event: Event::Ended {
                session: "mine".into(),
            },
        };
        let foreign = Wire {
            from: bus.id.wrapping_add(1),
            ttl_ms: 5,
            event: Event::Ended {
                session: "theirs".into(),
            },
        };
        for w in [&own, &foreign] {
            bus.deliver_text(&serde_json::to_string(w).unwrap_or_default());
        }
        bus.deliver_text("not json");
        let (event, ttl) = rx.try_recv().expect("the foreign change");
        assert_eq!(
            (event, ttl),
            (
                Event::Ended {
                    session: "theirs".into()
                },
                Duration::from_millis(5)
            )
        );
        assert!(rx.try_recv().is_err(), "nothing else");
    }
}
