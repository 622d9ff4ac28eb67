//! Issued tokens kept until shortly before they expire: Junction's own
//! token (one, refreshed single-flight) and exchanged tokens (one per caller
//! token, keyed by its SHA-256, bounded). Times are tokio's, so tests can
//! pause the clock.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use arc_swap::ArcSwapOption;
use tokio::time::Instant;

use super::endpoint::Issued;
use super::{CredentialError, Token};

/// The lifetime assumed when the endpoint sends no `expires_in`.
pub(crate) const DEFAULT_LIFETIME: Duration = Duration::from_secs(300);
/// A token is refreshed once less than min(this, a tenth of its lifetime) is left.
const MAX_REFRESH_MARGIN: Duration = Duration::from_secs(60);
/// After a failed request for Junction's own token, requests within this get
/// the same error instead of asking the endpoint again.
pub(crate) const FAILURE_HOLD: Duration = Duration::from_secs(1);

/// A token and the instant to stop handing it out.
struct Held {
    value: String,
    until: Instant,
}

/// Until when a token issued at `asked` (the request's start) is used:
/// its lifetime less the refresh margin, and never past `cap`.
fn usable_until(issued: &Issued, asked: Instant, cap: Option<Instant>) -> Instant {
    let lifetime = issued.expires_in.unwrap_or(DEFAULT_LIFETIME);
    let margin = MAX_REFRESH_MARGIN.min(lifetime / 10);
    let until = asked + (lifetime - margin);
    cap.map_or(until, |cap| until.min(cap))
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Junction's own token of one client.
#[derive(Default)]
pub(crate) struct OwnToken {
    current: ArcSwapOption<Held>,
    /// Held while asking the endpoint: concurrent requests wait for that one
    /// answer. Keeps the last failure and when it came.
    gate: tokio::sync::Mutex<Option<(Instant, CredentialError)>>,
}

impl OwnToken {
    fn cached(&self, now: Instant) -> Option<Token> {
        let held = self.current.load();
        let held = held.as_ref().filter(|h| now < h.until)?;
        Some(Token {
            value: held.value.clone(),
            fresh: false,
        })
    }

    /// The cached token, or a new one from `fetch`. One fetch at a time: the
    /// requests that waited for it share its token or its error, and so do
    /// requests within [`FAILURE_HOLD`] of a failure. A failure is never
    /// answered with an older token.
    pub(crate) async fn get<F, Fut>(&self, fetch: F) -> Result<Token, CredentialError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Issued, CredentialError>>,
    {
        let asked = Instant::now();
        if let Some(t) = self.cached(asked) {
            return Ok(t);
        }
        let mut failure = self.gate.lock().await;
        let now = Instant::now();
        if let Some(t) = self.cached(now) {
            return Ok(t);
        }
        if let Some((at, e)) = failure.as_ref() {
            if *at >= asked || now < *at + FAILURE_HOLD {
                return Err(e.clone());
            }
        }
        match fetch().await {
            Ok(issued) => {
                *failure = None;
                let until = usable_until(&issued, now, None);
                self.current.store(Some(Arc::new(Held {
                    value: issued.access_token.clone(),
                    until,
                })));
                Ok(Token {
                    value: issued.access_token,
                    fresh: true,
                })
            }
            Err(e) => {
                *failure = Some((Instant::now(), e.clone()));
                Err(e)
            }
        }
    }
}

pub(crate) type Key = [u8; 32];
type Outcome = Result<Token, CredentialError>;
/// One exchange in progress; its answer is left in the slot for those who waited.
type Flight = Arc<tokio::sync::Mutex<Option<Outcome>>>;

/// Exchanged tokens by caller-token digest, at most `capacity`.
pub(crate) struct Exchanged {
    capacity: usize,
    entries: Mutex<HashMap<Key, Held>>,
    flights: Mutex<HashMap<Key, Flight>>,
}

impl Exchanged {
    pub(crate) fn new(capacity: usize) -> Exchanged {
        Exchanged {
            capacity: capacity.max(1),
            entries: Mutex::new(HashMap::new()),
            flights: Mutex::new(HashMap::new()),
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        lock(&self.entries).len()
    }

    fn cached(&self, key: &Key, now: Instant) -> Option<Token> {
        let mut entries = lock(&self.entries);
        match entries.get(key) {
            Some(h) if now < h.until => Some(Token {
                value: h.value.clone(),
                fresh: false,
            }),
            Some(_) => {
                entries.remove(key);
                None
            }
            None => None,
        }
    }

    fn store(&self, key: Key, value: String, until: Instant, now: Instant) {
        if until <= now {
            return;
        }
        let mut entries = lock(&self.entries);
        if entries.len() >= self.capacity && !entries.contains_key(&key) {
            entries.retain(|_, h| now < h.until);
            if entries.len() >= self.capacity {
                let soonest = entries.iter().min_by_key(|(_, h)| h.until).map(|(k, _)| *k);
                if let Some(k) = soonest {
                    entries.remove(&k);
                }
            }
        }
        entries.insert(key, Held { value, until });
    }

    /// The token cached for `key`, or one from `fetch`, kept until shortly
    /// before it expires and never past `cap` (the subject token's expiry).
    /// Concurrent requests for one key share one fetch and its outcome.
    pub(crate) async fn get<F, Fut>(
        &self,
        key: Key,
        cap: Option<Instant>,
        fetch: F,
    ) -> Result<Token, CredentialError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Issued, CredentialError>>,
    {
        if let Some(t) = self.cached(&key, Instant::now()) {
            return Ok(t);
        }
        let flight = lock(&self.flights).entry(key).or_default().clone();
        let mut slot = flight.lock().await;
        if let Some(outcome) = slot.as_ref() {
            return outcome.clone().map(|t| Token { fresh: false, ..t });
        }
        // This request leads the flight (its first, or the next after one
        // that was dropped unfinished) and takes it off the table when done.
        let _leave = Leave {
            flights: &self.flights,
            key,
            flight: &flight,
        };
        let now = Instant::now();
        // Another flight may have finished between the lookup and this one.
        if let Some(t) = self.cached(&key, now) {
            return Ok(t);
        }
        let outcome = match fetch().await {
            Ok(issued) => {
                let until = usable_until(&issued, now, cap);
                self.store(key, issued.access_token.clone(), until, Instant::now());
                Ok(Token {
                    value: issued.access_token,
                    fresh: true,
                })
            }
            Err(e) => Err(e),
        };
        *slot = Some(outcome.clone());
        outcome
    }
}

/// Takes a flight off the table when its leader is done (or dropped): those
/// already waiting on it keep their handle and read its outcome (or lead it
/// anew if there is none), later requests start a flight of their own.
struct Leave<'a> {
    flights: &'a Mutex<HashMap<Key, Flight>>,
    key: Key,
    flight: &'a Flight,
}

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        let mut flights = lock(self.flights);
        if flights
            .get(&self.key)
            .is_some_and(|f| Arc::ptr_eq(f, self.flight))
        {
            flights.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn issued(value: &str, secs: Option<u64>) -> Issued {
        Issued {
            access_token: value.into(),
            expires_in: secs.map(Duration::from_secs),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn own_token_is_refreshed_shortly_before_expiry() {
        let own = OwnToken::default();
        let calls = AtomicUsize::new(0);
        let fetch = || async {
            let n = calls.fetch_add(1, Ordering::SeqCst);
            Ok(issued(&format!("t{n}"), Some(100)))
        };
        let first = own.get(fetch).await.expect("token");
        assert_eq!((first.value.as_str(), first.fresh), ("t0", true));
        // Lifetime 100 s, margin 10 s: cached until 90 s.
        tokio::time::advance(Duration::from_secs(89)).await;
        let again = own.get(fetch).await.expect("token");
        assert_eq!((again.value.as_str(), again.fresh), ("t0", false));
        tokio::time::advance(Duration::from_secs(1)).await;
        let renewed = own.get(fetch).await.expect("token");
        assert_eq!((renewed.value.as_str(), renewed.fresh), ("t1", true));
        // Long lifetimes refresh 60 s early; no expires_in means 5 min.
        let own = OwnToken::default();
        let _ = own.get(|| async { Ok(issued("long", Some(3600))) }).await;
        tokio::time::advance(Duration::from_secs(3539)).await;
        assert!(!own.get(fetch).await.expect("token").fresh);
        let own = OwnToken::default();
        let _ = own.get(|| async { Ok(issued("default", None)) }).await;
        tokio::time::advance(Duration::from_secs(269)).await;
        assert!(!own.get(fetch).await.expect("token").fresh);
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(own.get(fetch).await.expect("token").fresh);
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_refresh_is_an_error_held_briefly() {
        let own = OwnToken::default();
        let _ = own.get(|| async { Ok(issued("old", Some(10))) }).await;
        tokio::time::advance(Duration::from_secs(9)).await;
        let calls = AtomicUsize::new(0);
        let failing = || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(CredentialError::Unavailable("down".into()))
        };
        // The old token is still valid for a second, but not handed out.
        assert!(own.get(failing).await.is_err());
        assert!(own.get(failing).await.is_err());
        assert_eq!(calls.load(Ordering::SeqCst), 1, "held for FAILURE_HOLD");
        tokio::time::advance(FAILURE_HOLD).await;
        let back = own
            .get(|| async { Ok(issued("new", Some(10))) })
            .await
            .expect("recovered");
        assert_eq!(back.value, "new");
    }

    #[tokio::test(start_paused = true)]
    async fn one_exchange_per_key_even_when_a_waiter_gives_up() {
        let cache = Arc::new(Exchanged::new(10));
        let calls = Arc::new(AtomicUsize::new(0));
        let ask = |key: u8| {
            let (cache, calls) = (cache.clone(), calls.clone());
            tokio::spawn(async move {
                let fetch = || async {
                    calls.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    Ok(issued("x", Some(100)))
                };
                cache.get([key; 32], None, fetch).await
            })
        };
        let leader = ask(1);
        tokio::task::yield_now().await;
        let quitter = ask(1);
        tokio::task::yield_now().await;
        quitter.abort();
        let waiters: Vec<_> = (0..8).map(|_| ask(1)).collect();
        let other = ask(2);
        let mut fresh = usize::from(leader.await.expect("join").expect("token").fresh);
        for w in waiters {
            fresh += usize::from(w.await.expect("join").expect("token").fresh);
        }
        assert!(other.await.expect("join").expect("token").fresh);
        assert_eq!((calls.load(Ordering::SeqCst), fresh), (2, 1));
        assert!(
            lock(&cache.flights).is_empty(),
            "flights are taken off the table"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn exchanged_tokens_are_bounded_and_capped_by_the_subject() {
        let cache = Exchanged::new(2);
        let ok = |v: &'static str, secs| move || async move { Ok(issued(v, Some(secs))) };
        let a = cache.get([1; 32], None, ok("a", 100)).await.expect("a");
        assert!(a.fresh);
        let _ = cache.get([2; 32], None, ok("b", 50)).await;
        // Full: the soonest-expiring (b) goes.
        let _ = cache.get([3; 32], None, ok("c", 100)).await;
        assert_eq!(cache.len(), 2);
        assert!(!cache.get([1; 32], None, ok("x", 1)).await.expect("a").fresh);
        assert!(
            cache
                .get([2; 32], None, ok("b2", 50))
                .await
                .expect("b")
                .fresh
        );
        // Expired entries go first, whatever their order.
        tokio::time::advance(Duration::from_secs(95)).await;
        let _ = cache.get([4; 32], None, ok("d", 1000)).await;
        let _ = cache.get([5; 32], None, ok("e", 1000)).await;
        assert!(!cache.get([4; 32], None, ok("x", 1)).await.expect("d").fresh);
        // The subject's expiry caps the entry.
        let cap = Some(Instant::now() + Duration::from_secs(5));
        let _ = cache.get([6; 32], cap, ok("f", 1000)).await;
        tokio::time::advance(Duration::from_secs(5)).await;
        assert!(
            cache
                .get([6; 32], cap, ok("f2", 1000))
                .await
                .expect("f")
                .fresh
        );
    }
}
