//! Dual-era HTTP upstreams: a handshake-era session beside the modern wire.
//!
//! An upstream that answers `server/discover` is used as modern. Requests of
//! handshake-era clients (`UpstreamRequest::handshake_client`) still go over a
//! handshake-era session when the upstream also serves that era: a modern
//! request has no back-channel, so the upstream's `elicitation/create` /
//! `sampling/createMessage` / `roots/list` fail there (the Python SDK 2.x
//! raises "no back-channel for server-initiated requests"), while on a session
//! they reach Junction (`next_bridged`) and are relayed to the client as they
//! would be directly.
//!
//! Whether it serves both is found out by trying: the Python SDK 2.x lists only
//! the modern version in `supportedVersions` yet accepts `initialize`. Only a
//! *stateful* session counts (one with an `Mcp-Session-Id`): a stateless
//! handshake-era server has no back-channel either, and the modern wire keeps
//! the `input_required` bridging for it. Modern clients, list fetches, the
//! change watcher and a handshake-era client's task requests (tasks are the
//! modern wire's extension; the server marks them not `handshake_client`)
//! stay modern; an upstream pinned `protocol: modern` never gets a session.
//!
//! One session per upstream, initialized by the first handshake-era client and
//! shared like the session of a handshake-era upstream (it declares every
//! capability Junction can relay; each call's own client decides what is asked,
//! see the server's bridge). When `initialize` fails or gives no session,
//! handshake-era clients use the modern wire for `SIDE_RETRY` before the next try.
//!
//! A server request that names no call (the Python SDK's
//! `ctx.session.create_message(...)` without `related_request_id`) goes to the
//! session's GET stream, and is dropped if none is open. So Junction holds that
//! stream open and hands such a request to the one call in flight on the
//! session; with none or several in flight it cannot tell whose it is and the
//! upstream gets -32601 at once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwapOption;
use http::Method;
use junction_protocol::codes;
use junction_protocol::jsonrpc::{self, RpcError};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::wire::{self, Answer, Responder};
use super::{HttpTransport, Ready};
use crate::era::EraPref;
use crate::lock;
use crate::stream::{Bridged, Inner, Roster, ServerRequest, Strays};
use crate::{UpstreamError, UpstreamRequest};

/// How long a failed (or sessionless) `initialize` keeps handshake-era clients
/// on the modern wire before Junction tries again.
const SIDE_RETRY: Duration = Duration::from_secs(300);

/// Server requests from the GET stream waiting per call before more are refused.
const STRAYS_PER_CALL: usize = 4;

#[derive(Default)]
pub(super) struct Side {
    session: ArcSwapOption<Ready>,
    init_lock: tokio::sync::Mutex<()>,
    /// Set after a failed `initialize`: no new attempt before then.
    retry_at: Mutex<Option<Instant>>,
    calls: Arc<Calls>,
}

/// The calls in flight on a handshake-era session (the side session here, or
/// a handshake-era upstream's own), for requests from its GET stream.
#[derive(Default)]
pub(super) struct Calls {
    open: Mutex<HashMap<u64, mpsc::Sender<ServerRequest>>>,
    next: AtomicU64,
    /// A reader holds the GET stream.
    reading: AtomicBool,
    /// The upstream answered the GET with 405: it has no such stream.
    no_get: AtomicBool,
}

/// A call's `Strays` leaves when its stream goes.
impl Roster for Calls {
    fn leave(&self, key: u64) {
        lock(&self.open).remove(&key);
    }

    /// To the one call in flight; with none or several, back.
    fn hand(&self, r: ServerRequest) -> Result<(), ServerRequest> {
        let only = {
            let open = lock(&self.open);
            (open.len() == 1)
                .then(|| open.values().next().cloned())
                .flatten()
        };
        match only {
            Some(tx) => tx.try_send(r).map_err(|e| e.into_inner()),
            None => Err(r),
        }
    }
}

impl Calls {
    /// Registers a call about to be sent (before the POST: the upstream may
    /// ask at once); its `Strays` takes what `hand` gives it.
    pub(super) fn enlist(self: &Arc<Self>) -> Strays {
        let (tx, rx) = mpsc::channel(STRAYS_PER_CALL);
        let key = self.next.fetch_add(1, Ordering::Relaxed);
        lock(&self.open).insert(key, tx);
        Strays::new(rx, key, self.clone())
    }

    /// Hand `r` to the one call in flight, or refuse it.
    async fn route(&self, r: ServerRequest, responder: &Responder) {
        let Err(r) = self.hand(r) else { return };
        let err = RpcError::new(
            codes::METHOD_NOT_FOUND,
            format!(
                "junction cannot tell which call {} belongs to: send it related to its request",
                r.method
            ),
        );
        let bytes = jsonrpc::error_bytes(Some(&r.id), &err);
        if let Err(e) = responder.post(bytes, Instant::now() + STRAY_ANSWER).await {
            tracing::debug!(error = %e, "refusing a server request failed");
        }
    }
}

/// Deadline of the POST that refuses an unattributable server request.
const STRAY_ANSWER: Duration = Duration::from_secs(10);

impl Side {
    /// Drop `old` if it is this session (expired upstream: initialize again).
    pub(super) fn forget(&self, old: &Arc<Ready>) {
        let _ = self.session.compare_and_swap(old, None);
    }

    pub(super) fn take(&self) -> Option<Arc<Ready>> {
        self.session.swap(None)
    }

    /// Registers a call about to be sent on `ready`, if that is the side
    /// session (before the POST: the upstream may ask at once).
    pub(super) fn enlist(&self, ready: &Arc<Ready>) -> Option<Strays> {
        let current = self.session.load();
        if !current.as_ref().is_some_and(|s| Arc::ptr_eq(s, ready)) {
            return None;
        }
        Some(self.calls.enlist())
    }

    fn backing_off(&self) -> bool {
        let retry_at = lock(&self.retry_at);
        retry_at.is_some_and(|t| Instant::now() < t)
    }

    fn failed(&self) {
        let mut retry_at = lock(&self.retry_at);
        *retry_at = Some(Instant::now() + SIDE_RETRY);
    }
}

impl HttpTransport {
    /// The session or wire `req` goes over: the upstream's own, or for a
    /// handshake-era client of a dual-era upstream, the handshake-era side session.
    pub(super) async fn ready_for(
        &self,
        req: &UpstreamRequest<'_>,
        deadline: Instant,
    ) -> Result<Arc<Ready>, UpstreamError> {
        let ready = self.ensure_ready(deadline).await?;
        if !req.handshake_client
            || self.pref != EraPref::Auto
            || !matches!(ready.as_ref(), Ready::Modern)
        {
            return Ok(ready);
        }
        // Boxed for the same reason as `ensure_ready`'s slow path.
        Ok(Box::pin(self.side_session(deadline)).await.unwrap_or(ready))
    }

    async fn side_session(&self, deadline: Instant) -> Option<Arc<Ready>> {
        let calls = &self.side.calls;
        if let Some(s) = self.side.session.load_full() {
            if !calls.reading.load(Ordering::Relaxed) && !calls.no_get.load(Ordering::Relaxed) {
                let _flight = self.side.init_lock.lock().await;
                if !calls.reading.load(Ordering::Relaxed) {
                    self.hold_get_stream(&s, deadline).await;
                }
            }
            return Some(s);
        }
        if self.side.backing_off() {
            return None;
        }
        let _flight = self.side.init_lock.lock().await;
        if let Some(s) = self.side.session.load_full() {
            return Some(s);
        }
        match self.initialize(deadline).await {
            Ok(
                ready @ Ready::Legacy {
                    session: Some(_), ..
                },
            ) => {
                tracing::debug!(upstream = %self.wire.upstream, "handshake-era session for handshake-era clients");
                let ready = Arc::new(ready);
                self.side.session.store(Some(ready.clone()));
                self.hold_get_stream(&ready, deadline).await;
                Some(ready)
            }
            Ok(_) => {
                tracing::debug!(upstream = %self.wire.upstream, "modern upstream has no handshake-era session; handshake-era clients use the modern wire");
                self.side.failed();
                None
            }
            Err(e) => {
                tracing::debug!(upstream = %self.wire.upstream, error = %e, "modern upstream refused initialize; handshake-era clients use the modern wire");
                self.side.failed();
                None
            }
        }
    }

    /// Opens the side session's GET stream and reads it in the background:
    /// its server requests go to `Calls::route`, its change notices to the
    /// upstream's change channel (`SseBody`). Returns once the stream is open,
    /// so a call sent next finds it there.
    async fn hold_get_stream(&self, ready: &Ready, deadline: Instant) {
        let calls = self.side.calls.clone();
        let headers = ready.legacy_headers();
        let resp = match self
            .wire
            .send(Method::GET, Vec::new(), headers.clone(), &[], deadline)
            .await
        {
            Ok(resp) => resp,
            Err(e) => {
                tracing::debug!(upstream = %self.wire.upstream, error = %e, "GET stream of the handshake-era session failed");
                return;
            }
        };
        if resp.status() == http::StatusCode::METHOD_NOT_ALLOWED {
            calls.no_get.store(true, Ordering::Relaxed);
            return;
        }
        let responder = Arc::new(Responder {
            wire: self.wire.clone(),
            headers,
        });
        let max = self.wire.max_message;
        let Ok(Answer::Stream(Inner::Source(mut body))) =
            wire::read_answer(resp, 0, Some(responder.clone()), Some(deadline), max).await
        else {
            tracing::debug!(upstream = %self.wire.upstream, "the GET of the handshake-era session is not an SSE stream");
            return;
        };
        calls.reading.store(true, Ordering::Relaxed);
        tokio::spawn(async move {
            while let Some(item) = std::future::poll_fn(|cx| body.poll_next(cx)).await {
                match item {
                    Ok(Bridged::ServerRequest(r)) => calls.route(r, &responder).await,
                    Ok(Bridged::Event(_)) => {}
                    Err(_) => break,
                }
            }
            calls.reading.store(false, Ordering::Relaxed);
        });
    }
}
