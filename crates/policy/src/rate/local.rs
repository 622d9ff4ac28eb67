//! In-process buckets: one dashmap per rule, so a check locks one shard. Its
//! keys carry what a client sends (tool names, addresses), so they are
//! hashed with a per-process random seed, foldhash's rather than std's
//! SipHash: one lookup per rule on every request.
//!
//! Time is kept in units of `1 / rate` nanoseconds, which makes `T = per` an
//! exact integer whatever the rate: counts stay exact under any load.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use dashmap::DashMap;
use tokio::time::Instant;

use super::Rule;

/// Every this many checks of a rule, its idle buckets are dropped if the map
/// has grown past `SWEEP_MIN_LEN`.
const SWEEP_EVERY: u64 = 1024;
const SWEEP_MIN_LEN: usize = 4096;

pub(crate) struct Buckets {
    /// Per rule: key -> TAT in rule units since `base`.
    maps: Vec<DashMap<String, u128, foldhash::fast::RandomState>>,
    checks: Vec<AtomicU64>,
    base: Instant,
}

impl Buckets {
    pub(crate) fn new(rules: usize) -> Buckets {
        Buckets {
            maps: (0..rules)
                .map(|_| DashMap::with_hasher(foldhash::fast::RandomState::default()))
                .collect(),
            checks: (0..rules).map(|_| AtomicU64::new(0)).collect(),
            base: Instant::now(),
        }
    }

    /// `Err(retry_after)` when the bucket is empty.
    pub(crate) fn check(&self, index: usize, rule: &Rule, key: &str) -> Result<(), Duration> {
        let (Some(map), Some(checks)) = (self.maps.get(index), self.checks.get(index)) else {
            return Ok(());
        };
        let rate = u128::from(rule.rate);
        let now = self.base.elapsed().as_nanos() * rate;
        let t = rule.per.as_nanos();
        let limit = t * u128::from(rule.burst);
        let verdict = {
            // A known key is looked up borrowed; only a new one is copied.
            let mut tat = match map.get_mut(key) {
                Some(tat) => tat,
                None => map.entry(key.to_owned()).or_insert(0),
            };
            let new_tat = (*tat).max(now) + t;
            if new_tat - now > limit {
                let wait_units = new_tat - now - limit;
                Err(Duration::from_nanos(
                    u64::try_from(wait_units.div_ceil(rate)).unwrap_or(u64::MAX),
                ))
            } else {
                *tat = new_tat;
                Ok(())
            }
        };
        if checks.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1
            && map.len() > SWEEP_MIN_LEN
        {
            // A TAT in the past is a full bucket: removing it changes nothing.
            map.retain(|_, tat| *tat > now);
        }
        verdict
    }

    /// Buckets of rule `index` that hold fewer tokens than a full one (a
    /// full bucket behaves like a missing one, so only these carry state).
    /// Reads every shard of the rule's map: for the status page, not per request.
    pub(crate) fn live(&self, index: usize, rule: &Rule) -> usize {
        let Some(map) = self.maps.get(index) else {
            return 0;
        };
        let now = self.base.elapsed().as_nanos() * u128::from(rule.rate);
        map.iter().filter(|e| *e.value() > now).count()
    }

    #[cfg(test)]
    fn len(&self, index: usize) -> usize {
        self.maps.get(index).map_or(0, DashMap::len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(rate: u64, per: Duration, burst: u64) -> Rule {
        Rule {
            name: "r".into(),
            dims: vec![],
            methods: vec!["tools/call".into()],
            rate,
            per,
            burst,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn idle_buckets_are_swept_without_changing_decisions() {
        let b = Buckets::new(1);
        let r = rule(1, Duration::from_secs(1), 1);
        for i in 0..(SWEEP_MIN_LEN + 10) {
            assert!(b.check(0, &r, &format!("k{i}")).is_ok());
        }
        // k0 is empty now: one more call is refused.
        assert!(b.check(0, &r, "k0").is_err());
        tokio::time::advance(Duration::from_secs(2)).await;
        for _ in 0..SWEEP_EVERY {
            assert!(b.check(0, &r, "hot").is_ok());
            tokio::time::advance(Duration::from_secs(1)).await;
        }
        assert!(b.len(0) < SWEEP_MIN_LEN, "idle buckets were dropped");
        assert!(b.check(0, &r, "k0").is_ok(), "a swept bucket is full");
    }

    #[tokio::test(start_paused = true)]
    async fn live_counts_buckets_that_are_not_full() {
        let b = Buckets::new(1);
        let r = rule(1, Duration::from_secs(1), 2);
        assert_eq!(b.live(0, &r), 0);
        assert!(b.check(0, &r, "a").is_ok());
        assert!(b.check(0, &r, "b").is_ok());
        assert_eq!(b.live(0, &r), 2);
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(b.live(0, &r), 0, "refilled buckets are full again");
        assert_eq!(b.live(5, &r), 0, "no such rule");
    }
}
