//! Passive health and a circuit breaker for one upstream.
//!
//! Consecutive failures that say "this upstream cannot be reached" (connect
//! failures, closed connections, timeouts, 502/503/504) open the breaker once
//! they reach the threshold. While open, requests fail fast instead of each
//! waiting out its own deadline. After a cool-down one probe request is let
//! through (half-open): success closes the breaker, failure opens it again
//! with the cool-down doubled, up to a cap. JSON-RPC errors and protocol
//! faults prove the upstream is alive, so they count as successes here.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

use crate::UpstreamError;

/// Breaker tuning; `Default` is 5 failures, 10 s cool-down doubling to 60 s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BreakerConfig {
    /// Consecutive failures that open the breaker (0 or 1 both mean "the first").
    pub failure_threshold: u32,
    /// Cool-down after the breaker first opens.
    pub cool_down: Duration,
    /// Cap for the doubled cool-down after failed probes.
    pub max_cool_down: Duration,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        BreakerConfig {
            failure_threshold: 5,
            cool_down: Duration::from_secs(10),
            max_cool_down: Duration::from_secs(60),
        }
    }
}

/// What one request told us about the upstream's health.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// It answered (a result, a JSON-RPC error, even a malformed answer).
    Alive,
    /// It could not be reached or did not answer in time.
    Failed,
}

impl Outcome {
    pub(crate) fn of<T>(result: &Result<T, UpstreamError>) -> Outcome {
        match result {
            Ok(_) => Outcome::Alive,
            Err(e) if counts_as_failure(e) => Outcome::Failed,
            Err(_) => Outcome::Alive,
        }
    }
}

/// Connection-level trouble only: an upstream that answers badly is still up.
pub(crate) fn counts_as_failure(e: &UpstreamError) -> bool {
    match e {
        UpstreamError::Unavailable(_) | UpstreamError::Timeout | UpstreamError::Closed => true,
        UpstreamError::Http { status, .. } => matches!(status, 502..=504),
        UpstreamError::Protocol(_) | UpstreamError::Rpc(_) => false,
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Closed {
        failures: u32,
    },
    Open {
        until: Instant,
    },
    /// One probe is in flight; everyone else fails fast until it reports.
    HalfOpen,
}

#[derive(Debug)]
struct State {
    phase: Phase,
    /// The cool-down the next opening will use.
    cool_down: Duration,
}

#[derive(Debug)]
pub(crate) struct Breaker {
    cfg: BreakerConfig,
    state: Mutex<State>,
    /// Closed with no failure counted: what nearly every call finds, and the
    /// one state a call neither changes by being admitted nor by succeeding.
    /// Read without the lock, so a healthy upstream's calls take no lock:
    /// the lock is a write that every connection thread would make to the
    /// same cache line, twice a call. Kept by [`Locked`]'s drop.
    healthy: AtomicBool,
}

/// The state, locked; `healthy` is brought up to date when it is let go.
struct Locked<'a> {
    state: MutexGuard<'a, State>,
    healthy: &'a AtomicBool,
}

impl std::ops::Deref for Locked<'_> {
    type Target = State;

    fn deref(&self) -> &State {
        &self.state
    }
}

impl std::ops::DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut State {
        &mut self.state
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        let healthy = self.state.phase == (Phase::Closed { failures: 0 });
        if self.healthy.load(Ordering::Relaxed) != healthy {
            self.healthy.store(healthy, Ordering::Relaxed);
        }
    }
}

/// Leave to send one request; report how it went with `record`. A permit
/// dropped unreported (the caller gave up) frees a half-open probe slot, so a
/// cancelled probe cannot wedge the breaker.
#[derive(Debug)]
pub(crate) struct Permit<'a> {
    breaker: &'a Breaker,
    probe: bool,
    reported: bool,
}

impl Permit<'_> {
    pub(crate) fn record(mut self, outcome: Outcome) {
        self.reported = true;
        self.breaker.record(self.probe, outcome);
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        if self.probe && !self.reported {
            let mut s = self.breaker.lock();
            if s.phase == Phase::HalfOpen {
                // Let the next request probe right away.
                s.phase = Phase::Open {
                    until: Instant::now(),
                };
            }
        }
    }
}

impl Breaker {
    pub(crate) fn new(cfg: BreakerConfig) -> Breaker {
        Breaker {
            cfg,
            state: Mutex::new(State {
                phase: Phase::Closed { failures: 0 },
                cool_down: cfg.cool_down,
            }),
            healthy: AtomicBool::new(true),
        }
    }

    fn lock(&self) -> Locked<'_> {
        Locked {
            state: crate::lock(&self.state),
            healthy: &self.healthy,
        }
    }

    /// `None` while open (or while another request is probing).
    pub(crate) fn admit(&self) -> Option<Permit<'_>> {
        if self.healthy.load(Ordering::Relaxed) {
            return Some(Permit {
                breaker: self,
                probe: false,
                reported: false,
            });
        }
        let mut s = self.lock();
        let probe = match s.phase {
            Phase::Closed { .. } => false,
            Phase::Open { until } if Instant::now() >= until => {
                s.phase = Phase::HalfOpen;
                true
            }
            Phase::Open { .. } | Phase::HalfOpen => return None,
        };
        Some(Permit {
            breaker: self,
            probe,
            reported: false,
        })
    }

    fn record(&self, probe: bool, outcome: Outcome) {
        // A success of a call admitted while closed leaves a healthy breaker
        // as it is (a probe is only ever admitted under the lock).
        if outcome == Outcome::Alive && !probe && self.healthy.load(Ordering::Relaxed) {
            return;
        }
        let mut s = self.lock();
        match (s.phase, outcome, probe) {
            (Phase::HalfOpen, Outcome::Alive, true) => {
                s.phase = Phase::Closed { failures: 0 };
                s.cool_down = self.cfg.cool_down;
            }
            (Phase::HalfOpen, Outcome::Failed, true) => {
                let next = s.cool_down.saturating_mul(2).min(self.cfg.max_cool_down);
                s.cool_down = next.max(self.cfg.cool_down);
                s.phase = Phase::Open {
                    until: Instant::now() + s.cool_down,
                };
            }
            (Phase::Closed { .. }, Outcome::Alive, _) => s.phase = Phase::Closed { failures: 0 },
            (Phase::Closed { failures }, Outcome::Failed, _) => {
                let failures = failures.saturating_add(1);
                s.phase = if failures >= self.cfg.failure_threshold.max(1) {
                    Phase::Open {
                        until: Instant::now() + s.cool_down,
                    }
                } else {
                    Phase::Closed { failures }
                };
            }
            // Late reports of requests admitted before the breaker opened say
            // nothing about now: only the probe decides.
            (Phase::Open { .. } | Phase::HalfOpen, _, _) => {}
        }
    }

    /// False while open or half-open.
    pub(crate) fn is_healthy(&self) -> bool {
        matches!(self.lock().phase, Phase::Closed { .. })
    }

    /// The phase as the status page shows it.
    pub(crate) fn state(&self) -> BreakerState {
        match self.lock().phase {
            Phase::Closed { failures } => BreakerState::Closed { failures },
            Phase::Open { until } => BreakerState::Open {
                retry_in: until.saturating_duration_since(Instant::now()),
            },
            Phase::HalfOpen => BreakerState::HalfOpen,
        }
    }
}

/// Where an upstream's circuit breaker stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BreakerState {
    /// Requests pass; `failures` consecutive ones failed so far.
    Closed { failures: u32 },
    /// Requests fail fast; the next probe may go in `retry_in`.
    Open { retry_in: Duration },
    /// One probe is in flight.
    HalfOpen,
}

impl BreakerState {
    /// `closed`, `open` or `half_open`.
    pub fn as_str(&self) -> &'static str {
        match self {
            BreakerState::Closed { .. } => "closed",
            BreakerState::Open { .. } => "open",
            BreakerState::HalfOpen => "half_open",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> BreakerConfig {
        BreakerConfig::default()
    }

    fn fail(b: &Breaker) {
        if let Some(p) = b.admit() {
            p.record(Outcome::Failed);
        }
    }

    fn succeed(b: &Breaker) {
        if let Some(p) = b.admit() {
            p.record(Outcome::Alive);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn opens_after_threshold_consecutive_failures() {
        let b = Breaker::new(cfg());
        for _ in 0..4 {
            fail(&b);
        }
        assert!(b.is_healthy(), "4 of 5 failures keep it closed");
        fail(&b);
        assert!(!b.is_healthy());
        assert!(b.admit().is_none(), "open: fail fast");
        assert_eq!(
            b.state(),
            BreakerState::Open {
                retry_in: Duration::from_secs(10)
            }
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_state_names_the_phase() {
        let b = Breaker::new(cfg());
        fail(&b);
        assert_eq!(b.state(), BreakerState::Closed { failures: 1 });
        for _ in 0..4 {
            fail(&b);
        }
        tokio::time::advance(Duration::from_secs(10)).await;
        let _probe = b.admit();
        assert_eq!(b.state(), BreakerState::HalfOpen);
        assert_eq!(b.state().as_str(), "half_open");
    }

    #[tokio::test(start_paused = true)]
    async fn a_success_resets_the_count() {
        let b = Breaker::new(cfg());
        for _ in 0..4 {
            fail(&b);
        }
        succeed(&b);
        for _ in 0..4 {
            fail(&b);
        }
        assert!(b.is_healthy(), "failures must be consecutive");
    }

    #[tokio::test(start_paused = true)]
    async fn half_open_lets_one_probe_through_and_success_closes() {
        let b = Breaker::new(cfg());
        for _ in 0..5 {
            fail(&b);
        }
        tokio::time::advance(Duration::from_millis(9_999)).await;
        assert!(b.admit().is_none(), "still cooling down");
        tokio::time::advance(Duration::from_millis(1)).await;
        let probe = b.admit();
        assert!(probe.is_some(), "cool-down over: one probe");
        assert!(b.admit().is_none(), "only one probe at a time");
        assert!(!b.is_healthy(), "half-open is not healthy yet");
        if let Some(p) = probe {
            p.record(Outcome::Alive);
        }
        assert!(b.is_healthy());
        assert!(b.admit().is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn failed_probes_double_the_cool_down_up_to_the_cap() {
        let b = Breaker::new(cfg());
        for _ in 0..5 {
            fail(&b);
        }
        let mut waits = Vec::new();
        for _ in 0..5 {
            let start = Instant::now();
            // Step a second at a time until the next probe is admitted.
            let probe = loop {
                if let Some(p) = b.admit() {
                    break p;
                }
                tokio::time::advance(Duration::from_secs(1)).await;
            };
            waits.push(start.elapsed().as_secs());
            probe.record(Outcome::Failed);
        }
        assert_eq!(waits, vec![10, 20, 40, 60, 60]);
        // A successful probe resets the cool-down to the base value.
        tokio::time::advance(Duration::from_secs(60)).await;
        succeed(&b);
        for _ in 0..5 {
            fail(&b);
        }
        tokio::time::advance(Duration::from_secs(10)).await;
        assert!(b.admit().is_some(), "back to the 10 s cool-down");
    }

    #[tokio::test(start_paused = true)]
    async fn an_abandoned_probe_frees_the_slot() {
        let b = Breaker::new(cfg());
        for _ in 0..5 {
            fail(&b);
        }
        tokio::time::advance(Duration::from_secs(10)).await;
        drop(b.admit());
        assert!(b.admit().is_some(), "the next request may probe");
    }

    #[tokio::test(start_paused = true)]
    async fn late_reports_do_not_close_an_open_breaker() {
        let b = Breaker::new(cfg());
        let early = b.admit();
        for _ in 0..5 {
            fail(&b);
        }
        if let Some(p) = early {
            p.record(Outcome::Alive);
        }
        assert!(!b.is_healthy(), "only the probe closes it");
    }

    #[test]
    fn only_connection_trouble_counts() {
        use junction_protocol::jsonrpc::RpcError;
        assert!(counts_as_failure(&UpstreamError::Timeout));
        assert!(counts_as_failure(&UpstreamError::Closed));
        assert!(counts_as_failure(&UpstreamError::Unavailable("x".into())));
        assert!(counts_as_failure(&UpstreamError::Http {
            status: 503,
            body: String::new()
        }));
        assert!(!counts_as_failure(&UpstreamError::Http {
            status: 500,
            body: String::new()
        }));
        assert!(!counts_as_failure(&UpstreamError::Protocol("x".into())));
        assert!(!counts_as_failure(&UpstreamError::Rpc(RpcError::new(
            -32601, "no"
        ))));
    }
}
