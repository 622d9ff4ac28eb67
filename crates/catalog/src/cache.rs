//! Per-upstream tool lists, cached for their TTL (the upstream's `ttlMs`, or a
//! configured default for legacy upstreams), refreshed single-flight, served
//! stale when a refresh fails (DESIGN §2, NOTES §9).
//!
//! Every upstream page is drained up to a page bound under one deadline. After
//! a failed refresh the next attempt waits a short, growing backoff, so an
//! upstream that is down costs one deadline per backoff period instead of one
//! per `tools/list`. `invalidate` (on `list_changed`) forces the next refresh.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use dashmap::DashMap;
use futures_util::future::{join_all, BoxFuture};
use serde_json::Value;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::merge::{ListStatus, UpstreamTools};

/// How the cache reaches one upstream; `junction-upstream` implements it.
pub trait ToolSource: Send + Sync {
    fn id(&self) -> &str;
    /// One `tools/list` page (`cursor` None = first page). Every page of a
    /// refresh shares one `deadline`; a source that stops at it (and says so
    /// with [`Deadline::error`]) can count the page as timed out, where the
    /// cache's own deadline would just drop it.
    fn list_page<'a>(
        &'a self,
        cursor: Option<String>,
        deadline: Deadline,
    ) -> BoxFuture<'a, Result<SourcePage, SourceError>>;
}

/// When a refresh must be done by, and the budget it was given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deadline {
    pub at: Instant,
    pub budget: Duration,
}

impl Deadline {
    pub fn after(budget: Duration) -> Deadline {
        Deadline {
            at: Instant::now() + budget,
            budget,
        }
    }

    /// The refresh's error once the deadline has passed.
    pub fn error(&self) -> SourceError {
        SourceError(format!(
            "tools/list did not finish within {:?}",
            self.budget
        ))
    }
}

#[derive(Clone, Debug, Default)]
pub struct SourcePage {
    /// An `Arc` so a source can hand back the list it gave last time (an
    /// unchanged page), which the cache then keeps without comparing it.
    pub tools: Arc<Vec<Value>>,
    pub next_cursor: Option<String>,
    /// None for legacy upstreams or a missing `ttlMs`.
    pub ttl_ms: Option<u64>,
    pub public: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SourceError(pub String);

const BACKOFF_MIN: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(10);

struct Good {
    tools: Arc<Vec<Value>>,
    ttl_ms: Option<u64>,
    public: bool,
    fetched_at: Instant,
    /// Invalidation epoch at which the refresh that produced it started.
    epoch: u64,
}

#[derive(Default)]
struct Slot {
    good: Option<Good>,
    generation: u64,
    epoch: u64,
    failures: u32,
    retry_at: Option<Instant>,
    last_error: Option<String>,
    attempts: u64,
    inflight: Option<(u64, watch::Receiver<Option<UpstreamTools>>)>,
}

impl Slot {
    fn is_fresh(&self, now: Instant, default_ttl: Duration) -> bool {
        self.good.as_ref().is_some_and(|g| {
            let ttl = g.ttl_ms.map_or(default_ttl, Duration::from_millis);
            g.epoch == self.epoch && now < g.fetched_at + ttl
        })
    }

    /// What callers get: the good list (Fresh or Stale) or nothing (Missing).
    fn snapshot(&self, upstream: &str, fresh: bool) -> UpstreamTools {
        match &self.good {
            Some(g) => UpstreamTools {
                upstream: upstream.to_owned(),
                tools: g.tools.clone(),
                ttl_ms: g.ttl_ms,
                public: g.public,
                status: if fresh {
                    ListStatus::Fresh
                } else {
                    ListStatus::Stale
                },
                generation: self.generation,
            },
            None => UpstreamTools {
                generation: self.generation,
                ..UpstreamTools::missing(upstream)
            },
        }
    }
}

fn lock(slot: &Mutex<Slot>) -> MutexGuard<'_, Slot> {
    // nothing panics while holding it; recover rather than propagate poison
    slot.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Clears the in-flight marker if the leading caller is dropped mid-refresh,
/// so waiting callers wake (their channel closes) and one of them takes over.
struct LeadGuard<'a> {
    slot: &'a Mutex<Slot>,
    attempt: u64,
}

impl Drop for LeadGuard<'_> {
    fn drop(&mut self) {
        let mut s = lock(self.slot);
        if s.inflight.as_ref().is_some_and(|(a, _)| *a == self.attempt) {
            s.inflight = None;
        }
    }
}

enum Step {
    Wait(watch::Receiver<Option<UpstreamTools>>),
    Lead(watch::Sender<Option<UpstreamTools>>, u64, u64),
}

type Drained = (Arc<Vec<Value>>, Option<u64>, bool);

pub struct ToolCache {
    max_pages: usize,
    backoff_min: Duration,
    backoff_max: Duration,
    slots: DashMap<String, Arc<Mutex<Slot>>>,
    /// Bumped by every store (refresh or failure) and invalidation: what a
    /// caller saw is still what it would see while this has not moved and its
    /// lists have not aged past their TTL (`changes`, `fresh_until`).
    changes: std::sync::atomic::AtomicU64,
}

impl ToolCache {
    /// `max_pages`: pages drained per refresh before giving up (at least 1).
    pub fn new(max_pages: usize) -> Self {
        ToolCache {
            max_pages: max_pages.max(1),
            backoff_min: BACKOFF_MIN,
            backoff_max: BACKOFF_MAX,
            slots: DashMap::new(),
            changes: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// A counter that moves whenever any slot stores a refresh or a failure,
    /// or is invalidated. Read it before `get`s and compare later.
    pub fn changes(&self) -> u64 {
        self.changes.load(std::sync::atomic::Ordering::Acquire)
    }

    fn changed(&self) {
        self.changes
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    }

    /// Until when `upstream`'s list stays fresh (its TTL, or `default_ttl` for
    /// a list without one), absent any invalidation; `None` when it is not
    /// fresh now (never fetched, stale, or invalidated).
    pub fn fresh_until(&self, upstream: &str, default_ttl: Duration) -> Option<Instant> {
        let slot = self.slots.get(upstream)?;
        let s = lock(&slot);
        let g = s.good.as_ref().filter(|g| g.epoch == s.epoch)?;
        let until = g.fetched_at + g.ttl_ms.map_or(default_ttl, Duration::from_millis);
        (Instant::now() < until).then_some(until)
    }

    /// Wait after a failed refresh: `min` doubling per failure, capped at `max`.
    pub fn with_failure_backoff(mut self, min: Duration, max: Duration) -> Self {
        self.backoff_min = min;
        self.backoff_max = max.max(min);
        self
    }

    fn slot(&self, upstream: &str) -> Arc<Mutex<Slot>> {
        if let Some(slot) = self.slots.get(upstream) {
            return slot.clone();
        }
        self.slots.entry(upstream.to_owned()).or_default().clone()
    }

    fn backoff(&self, failures: u32) -> Duration {
        let factor = 1u32 << failures.saturating_sub(1).min(16);
        self.backoff_min
            .saturating_mul(factor)
            .min(self.backoff_max)
    }

    /// This upstream's list: from cache while within TTL (the upstream's
    /// `ttlMs`, else `default_ttl`), otherwise refreshed under `deadline`.
    /// Concurrent callers share one refresh. A failed refresh gives the last
    /// good list as Stale, or Missing if there never was one.
    pub async fn get(
        &self,
        source: &dyn ToolSource,
        default_ttl: Duration,
        deadline: Duration,
    ) -> UpstreamTools {
        let id = source.id();
        let slot = self.slot(id);
        loop {
            let step = {
                let mut s = lock(&slot);
                let now = Instant::now();
                if s.is_fresh(now, default_ttl) {
                    return s.snapshot(id, true);
                }
                if let Some((_, rx)) = &s.inflight {
                    Step::Wait(rx.clone())
                } else if s.retry_at.is_some_and(|at| now < at) {
                    return s.snapshot(id, false);
                } else {
                    s.attempts += 1;
                    let (tx, rx) = watch::channel(None);
                    s.inflight = Some((s.attempts, rx));
                    Step::Lead(tx, s.attempts, s.epoch)
                }
            };
            match step {
                Step::Wait(mut rx) => {
                    if let Ok(done) = rx.wait_for(Option::is_some).await {
                        if let Some(out) = done.clone() {
                            return out;
                        }
                    }
                    // the leader was dropped mid-refresh: try again
                }
                Step::Lead(tx, attempt, epoch) => {
                    let _guard = LeadGuard {
                        slot: &slot,
                        attempt,
                    };
                    let deadline = Deadline::after(deadline);
                    let drain = self.drain(source, deadline);
                    let result = match tokio::time::timeout_at(deadline.at, drain).await {
                        Ok(r) => r,
                        Err(_) => Err(deadline.error()),
                    };
                    let out = self.store(&slot, id, attempt, epoch, result);
                    // receivers may all be gone; that is fine
                    let _ = tx.send(Some(out.clone()));
                    return out;
                }
            }
        }
    }

    fn store(
        &self,
        slot: &Mutex<Slot>,
        id: &str,
        attempt: u64,
        epoch: u64,
        result: Result<Drained, SourceError>,
    ) -> UpstreamTools {
        let mut s = lock(slot);
        if s.inflight.as_ref().is_some_and(|(a, _)| *a == attempt) {
            s.inflight = None;
        }
        self.changed();
        match result {
            Ok((tools, ttl_ms, public)) => {
                let changed = s.good.as_ref().is_none_or(|g| {
                    g.ttl_ms != ttl_ms
                        || g.public != public
                        || !(Arc::ptr_eq(&g.tools, &tools) || *g.tools == *tools)
                });
                // An equal list keeps the old Arc (snapshots share it).
                let tools = match &s.good {
                    Some(g) if !changed => g.tools.clone(),
                    _ => tools,
                };
                if changed {
                    s.generation += 1;
                }
                s.good = Some(Good {
                    tools,
                    ttl_ms,
                    public,
                    fetched_at: Instant::now(),
                    epoch,
                });
                s.failures = 0;
                s.retry_at = None;
                s.last_error = None;
                // Fresh for this caller even if invalidated meanwhile: the
                // next caller refreshes again because the epoch moved on.
                s.snapshot(id, true)
            }
            Err(e) => {
                tracing::warn!(upstream = id, error = %e.0, "tools/list refresh failed");
                s.failures = s.failures.saturating_add(1);
                s.retry_at = Some(Instant::now() + self.backoff(s.failures));
                s.last_error = Some(e.0);
                s.snapshot(id, false)
            }
        }
    }

    async fn drain(
        &self,
        source: &dyn ToolSource,
        deadline: Deadline,
    ) -> Result<Drained, SourceError> {
        // One page (the usual case) passes its Arc through untouched.
        let mut tools: Option<Arc<Vec<Value>>> = None;
        let mut cursor = None;
        let mut ttl: Option<u64> = None;
        let mut legacy = false;
        let mut public = true;
        for _ in 0..self.max_pages {
            let page = source.list_page(cursor.take(), deadline).await?;
            tools = Some(match tools {
                None => page.tools,
                Some(mut all) => {
                    let more = Arc::try_unwrap(page.tools).unwrap_or_else(|a| (*a).clone());
                    Arc::make_mut(&mut all).extend(more);
                    all
                }
            });
            match page.ttl_ms {
                Some(t) => ttl = Some(ttl.map_or(t, |old| old.min(t))),
                None => legacy = true,
            }
            public &= page.public;
            match page.next_cursor {
                None => {
                    let tools = tools.unwrap_or_default();
                    return Ok((tools, if legacy { None } else { ttl }, public));
                }
                Some(next) => cursor = Some(next),
            }
        }
        Err(SourceError(format!(
            "tools/list has more than {} pages",
            self.max_pages
        )))
    }

    /// Forget freshness (e.g. on `notifications/tools/list_changed`); the last
    /// good list is kept for serving stale if the next refresh fails.
    pub fn invalidate(&self, upstream: &str) {
        if let Some(slot) = self.slots.get(upstream) {
            let mut s = lock(&slot);
            s.epoch += 1;
            s.retry_at = None;
            self.changed();
        }
    }

    /// Bumps whenever the stored list (tools, ttl or scope) changes; 0 before
    /// the first good list.
    pub fn generation(&self, upstream: &str) -> u64 {
        self.slots
            .get(upstream)
            .map_or(0, |slot| lock(&slot).generation)
    }

    /// The last refresh error, if the latest refresh failed (for /readyz, logs).
    pub fn last_error(&self, upstream: &str) -> Option<String> {
        self.slots
            .get(upstream)
            .and_then(|slot| lock(&slot).last_error.clone())
    }
}

/// Every source's list, concurrently, in `sources` order.
pub async fn fan_out(
    cache: &ToolCache,
    sources: &[Arc<dyn ToolSource>],
    default_ttl: Duration,
    deadline: Duration,
) -> Vec<UpstreamTools> {
    join_all(
        sources
            .iter()
            .map(|s| cache.get(s.as_ref(), default_ttl, deadline)),
    )
    .await
}
