//! Rate limits (DESIGN §4.4): GCRA buckets, one per rule and key value.
//!
//! GCRA keeps one number per bucket, the theoretical arrival time (TAT): a
//! request at `now` passes when `max(TAT, now) + T - now <= T * burst`, where
//! `T = per / rate`, and then moves TAT on by `T`. A bucket whose TAT is in
//! the past behaves exactly like a missing one, which makes eviction (local)
//! and key expiry (Redis) free of any effect on decisions.

mod local;
mod redis;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use junction_config::{FailureMode, RateKey, RateLimitBackend, RateLimitConfig};
use sha2::{Digest, Sha256};

use crate::PolicyError;

/// What a request is, for building bucket keys. `principal` should be the
/// principal's digest (or a fixed value such as `anonymous` without auth).
#[derive(Clone, Copy, Debug)]
pub struct RateKeyParts<'a> {
    pub method: &'a str,
    pub principal: &'a str,
    pub upstream: &'a str,
    pub tool: &'a str,
    pub route: &'a str,
    pub client_ip: &'a str,
}

/// A rejection: HTTP 429 with `Retry-After`, JSON-RPC -31004 with `data.retryAfterMs`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RateLimited {
    /// The rule's name: the `rule` label of `junction_rate_limited_total`.
    pub rule: String,
    pub retry_after: Duration,
}

/// How long a fail-closed rejection asks the client to wait while the
/// shared backend is unreachable.
const BACKEND_DOWN_RETRY: Duration = Duration::from_secs(1);

pub(crate) struct Rule {
    pub(crate) name: String,
    dims: Vec<RateKey>,
    /// `*` matches every method.
    methods: Vec<String>,
    pub(crate) rate: u64,
    pub(crate) per: Duration,
    pub(crate) burst: u64,
}

impl Rule {
    fn applies_to(&self, method: &str) -> bool {
        self.methods.iter().any(|m| m == method || m == "*")
    }

    /// The values of this rule's key dimensions, length-prefixed so no two
    /// different tuples give the same key.
    fn key(&self, parts: &RateKeyParts<'_>) -> String {
        let value = |d: &RateKey| match d {
            RateKey::Principal => parts.principal,
            RateKey::Upstream => parts.upstream,
            RateKey::Tool => parts.tool,
            RateKey::Route => parts.route,
            RateKey::ClientIp => parts.client_ip,
        };
        // Sized once; the lengths written without a String each.
        let size = self.dims.iter().map(|d| value(d).len() + 4).sum();
        let mut key = String::with_capacity(size);
        let mut len = itoa::Buffer::new();
        for d in &self.dims {
            let v = value(d);
            key.push_str(len.format(v.len()));
            key.push(':');
            key.push_str(v);
        }
        key
    }
}

enum Backend {
    Local(local::Buckets),
    Redis(redis::Buckets),
}

pub struct RateLimiter {
    rules: Vec<Rule>,
    backend: Backend,
    failure_mode: FailureMode,
    backend_failures: AtomicU64,
}

impl RateLimiter {
    /// For `backend: redis`, an unreachable Redis is not an error here (it is
    /// logged; `failure_mode` applies per request until it answers); only a
    /// URL the client library refuses is.
    pub async fn new(cfg: &RateLimitConfig) -> Result<RateLimiter, PolicyError> {
        let rules: Vec<Rule> = cfg
            .rules
            .iter()
            .map(|r| Rule {
                name: r.name.clone(),
                dims: r.key.clone(),
                methods: r.methods.clone(),
                rate: r.rate.max(1),
                per: r.per,
                burst: r.burst.max(1),
            })
            .collect();
        let backend = match &cfg.backend {
            RateLimitBackend::Local => Backend::Local(local::Buckets::new(rules.len())),
            RateLimitBackend::Redis { url } => Backend::Redis(redis::Buckets::connect(url).await?),
        };
        Ok(RateLimiter {
            rules,
            backend,
            failure_mode: cfg.failure_mode,
            backend_failures: AtomicU64::new(0),
        })
    }

    /// Checks, in config order, every rule that applies to `parts.method`; stops
    /// at the first rejection. A pass has taken one token from each rule
    /// checked, including rules before a rejecting one.
    pub async fn check(&self, parts: &RateKeyParts<'_>) -> Result<(), RateLimited> {
        for (i, rule) in self.rules.iter().enumerate() {
            if !rule.applies_to(parts.method) {
                continue;
            }
            let key = rule.key(parts);
            let verdict = match &self.backend {
                Backend::Local(b) => Ok(b.check(i, rule, &key)),
                Backend::Redis(b) => b.check(rule, &redis_key(&rule.name, &key)).await,
            };
            match verdict {
                Ok(Ok(())) => {}
                Ok(Err(retry_after)) => {
                    return Err(RateLimited {
                        rule: rule.name.clone(),
                        retry_after,
                    })
                }
                Err(why) => {
                    self.backend_failures.fetch_add(1, Ordering::Relaxed);
                    if let Backend::Redis(b) = &self.backend {
                        b.log_failure(&why);
                    }
                    if self.failure_mode == FailureMode::Closed {
                        return Err(RateLimited {
                            rule: rule.name.clone(),
                            retry_after: BACKEND_DOWN_RETRY,
                        });
                    }
                }
            }
        }
        Ok(())
    }

    /// Rule checks the shared backend could not answer (each one was let
    /// through or rejected per `failure_mode`). For a metric or health signal.
    pub fn backend_failures(&self) -> u64 {
        self.backend_failures.load(Ordering::Relaxed)
    }

    /// Per rule, in config order: how many of its buckets are not full (see
    /// `local::Buckets::live`). `None` for Redis, where buckets live in
    /// Redis and expire there. Walks every bucket: for a status page.
    pub fn live_buckets(&self) -> Option<Vec<usize>> {
        match &self.backend {
            Backend::Local(b) => Some(
                self.rules
                    .iter()
                    .enumerate()
                    .map(|(i, rule)| b.live(i, rule))
                    .collect(),
            ),
            Backend::Redis(_) => None,
        }
    }

    /// Whether any rule applies to `method` (lets callers skip building keys).
    pub fn applies_to(&self, method: &str) -> bool {
        self.rules.iter().any(|r| r.applies_to(method))
    }

    /// Whether any rule keys on the client's address (lets callers skip
    /// formatting it).
    pub fn keys_on_client_ip(&self) -> bool {
        self.rules
            .iter()
            .any(|r| r.dims.contains(&RateKey::ClientIp))
    }
}

/// Redis key: readable prefix and rule, hashed dimensions (bounded length,
/// no user text in Redis key names).
fn redis_key(rule: &str, key: &str) -> String {
    let digest = Sha256::digest(key.as_bytes());
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("junction:rl:{rule}:{hex}")
}
