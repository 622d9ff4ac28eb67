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
//! the `input_required` bridging for it. Modern clients, list fetches and the
//! change watcher stay modern; an upstream pinned `protocol: modern` never gets
//! a session.
//!
//! One session per upstream, initialized by the first handshake-era client and
//! shared like the session of a handshake-era upstream (it declares every
//! capability Junction can relay; each call's own client decides what is asked,
//! see the server's bridge). When `initialize` fails or gives no session,
//! handshake-era clients use the modern wire for `SIDE_RETRY` before the next try.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwapOption;
use tokio::time::Instant;

use super::{HttpTransport, Ready};
use crate::era::EraPref;
use crate::{UpstreamError, UpstreamRequest};

/// How long a failed (or sessionless) `initialize` keeps handshake-era clients
/// on the modern wire before Junction tries again.
const SIDE_RETRY: Duration = Duration::from_secs(300);

#[derive(Default)]
pub(super) struct Side {
    session: ArcSwapOption<Ready>,
    init_lock: tokio::sync::Mutex<()>,
    /// Set after a failed `initialize`: no new attempt before then.
    retry_at: Mutex<Option<Instant>>,
}

impl Side {
    /// Drop `old` if it is this session (expired upstream: initialize again).
    pub(super) fn forget(&self, old: &Arc<Ready>) {
        let _ = self.session.compare_and_swap(old, None);
    }

    pub(super) fn take(&self) -> Option<Arc<Ready>> {
        self.session.swap(None)
    }

    fn backing_off(&self) -> bool {
        let retry_at = self.retry_at.lock().unwrap_or_else(|e| e.into_inner());
        retry_at.is_some_and(|t| Instant::now() < t)
    }

    fn failed(&self) {
        let mut retry_at = self.retry_at.lock().unwrap_or_else(|e| e.into_inner());
        *retry_at = Some(Instant::now() + SIDE_RETRY);
    }
}

impl HttpTransport {
    /// The session or wire `req` goes over: the upstream's own, or for a
    /// handshake-era client of a dual-era upstream, the handshake-era side session.
    pub(super) async fn ready_for(
        &self,
        req: &UpstreamRequest,
        deadline: Instant,
    ) -> Result<Arc<Ready>, UpstreamError> {
        let ready = self.ensure_ready(deadline).await?;
        if !req.handshake_client
            || self.pref != EraPref::Auto
            || !matches!(ready.as_ref(), Ready::Modern)
        {
            return Ok(ready);
        }
        Ok(self.side_session(deadline).await.unwrap_or(ready))
    }

    async fn side_session(&self, deadline: Instant) -> Option<Arc<Ready>> {
        if let Some(s) = self.side.session.load_full() {
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
}
