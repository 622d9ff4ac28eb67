//! Handshake-era cancellation (NOTES §12.3, "Cancellation"): a legacy client
//! cancels with a `notifications/cancelled{requestId}` POST on its session,
//! not by hanging up. Junction keeps the in-flight calls of handshake-era
//! sessions here, keyed by (session, request id); the notification wakes the
//! call, which drops its upstream stream (the upstream's own cancellation:
//! stream closed for HTTP, `notifications/cancelled` for handshake-era
//! sessions and stdio) and ends the client's response without a result, as
//! the spec asks ("SHOULD NOT send a response for a cancelled request").
//!
//! Per replica: a cancellation that lands on another replica finds nothing
//! and is ignored (the call runs to its end), which the spec allows.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use junction_protocol::jsonrpc::Id;
use tokio::sync::Notify;

/// Calls one replica can have registered at once; later ones still run, they
/// just cannot be cancelled by notification (the client can still hang up).
pub(crate) const MAX_CALLS: usize = 100_000;

type Key = (String, Id);

#[derive(Default)]
pub struct InFlight {
    calls: Arc<Mutex<HashMap<Key, Arc<Notify>>>>,
}

/// One registered call: wakes when cancelled, unregisters when dropped.
pub struct Cancel {
    key: Key,
    notify: Arc<Notify>,
    calls: Arc<Mutex<HashMap<Key, Arc<Notify>>>>,
}

impl InFlight {
    /// Registers the call `id` of `session`; `None` when the table is full.
    /// A client that reuses an id while the first call runs makes the newer
    /// call the one a cancellation reaches.
    pub fn register(&self, session: &str, id: &Id) -> Option<Cancel> {
        let mut calls = lock(&self.calls);
        if calls.len() >= MAX_CALLS {
            tracing::warn!("too many in-flight handshake-era calls to track for cancellation");
            return None;
        }
        let key = (session.to_owned(), id.clone());
        let notify = Arc::new(Notify::new());
        calls.insert(key.clone(), notify.clone());
        Some(Cancel {
            key,
            notify,
            calls: self.calls.clone(),
        })
    }

    /// Cancels the call; false when no such call runs on this replica.
    pub fn cancel(&self, session: &str, id: &Id) -> bool {
        let calls = lock(&self.calls);
        match calls.get(&(session.to_owned(), id.clone())) {
            Some(n) => {
                // A stored permit: a call between two awaits still sees it.
                n.notify_one();
                true
            }
            None => false,
        }
    }

    pub fn len(&self) -> usize {
        lock(&self.calls).len()
    }
}

impl Cancel {
    /// Resolves once the client cancelled this call.
    pub async fn cancelled(&self) {
        self.notify.notified().await;
    }
}

impl Drop for Cancel {
    fn drop(&mut self) {
        let mut calls = lock(&self.calls);
        if calls
            .get(&self.key)
            .is_some_and(|n| Arc::ptr_eq(n, &self.notify))
        {
            calls.remove(&self.key);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_cancellation_reaches_only_its_call_and_calls_unregister() {
        let t = InFlight::default();
        let a = t.register("s1", &Id::Num(1)).unwrap();
        let other_session = t.register("s2", &Id::Num(1)).unwrap();
        assert!(t.cancel("s1", &Id::Num(1)));
        assert!(!t.cancel("s1", &Id::Num(2)));
        // The permit was stored before anyone waited.
        tokio::time::timeout(Duration::from_secs(1), a.cancelled())
            .await
            .expect("cancelled");
        assert!(
            tokio::time::timeout(Duration::from_millis(20), other_session.cancelled())
                .await
                .is_err(),
            "another session's call with the same id runs on"
        );
        drop(a);
        assert!(!t.cancel("s1", &Id::Num(1)));
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn a_reused_id_belongs_to_the_newer_call() {
        let t = InFlight::default();
        let old = t.register("s", &Id::Str("x".into())).unwrap();
        let new = t.register("s", &Id::Str("x".into())).unwrap();
        drop(old);
        assert!(
            t.cancel("s", &Id::Str("x".into())),
            "old did not remove new"
        );
        drop(new);
        assert_eq!(t.len(), 0);
    }
}
