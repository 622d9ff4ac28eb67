//! Buckets shared by every replica through Redis: one Lua script per rule
//! check, so read-decide-write is atomic, on Redis's clock (`TIME`), so
//! replicas with skewed clocks still agree.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio::time::Instant;

use super::Rule;
use crate::PolicyError;

/// A dead Redis must never hang a request: every check is bounded by this.
const OP_TIMEOUT: Duration = Duration::from_millis(500);
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);
/// After a failure, checks skip Redis (and apply the failure mode) this long.
const BACKOFF: Duration = Duration::from_secs(1);
/// Backend warnings are logged at most this often.
const LOG_EVERY: Duration = Duration::from_secs(10);

/// GCRA in microseconds. ARGV[1] = T (µs, may be fractional), ARGV[2] = burst.
/// Returns {1, 0} on pass, {0, retry_after_µs} on rejection. The key expires
/// once the bucket is full again, when it no longer carries information.
const GCRA: &str = r#"
if redis.replicate_commands then pcall(redis.replicate_commands) end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local limit = interval * tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then tat = now end
local new_tat = tat + interval
if new_tat - now > limit then
  return {0, math.ceil(new_tat - now - limit)}
end
redis.call('SET', KEYS[1], string.format('%.3f', new_tat), 'PX',
  math.ceil((new_tat - now) / 1000) + 1000)
return {1, 0}
"#;

pub(crate) struct Buckets {
    conn: ConnectionManager,
    script: redis::Script,
    base: Instant,
    /// Micros since `base` until which Redis is considered down.
    down_until: AtomicU64,
    last_log: AtomicU64,
}

impl Buckets {
    pub(crate) async fn connect(url: &str) -> Result<Buckets, PolicyError> {
        let client = redis::Client::open(url).map_err(|e| PolicyError::Redis(e.to_string()))?;
        let cfg = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(OP_TIMEOUT))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(200));
        let conn = ConnectionManager::new_lazy_with_config(client, cfg)
            .map_err(|e| PolicyError::Redis(e.to_string()))?;
        let buckets = Buckets {
            conn,
            script: redis::Script::new(GCRA),
            base: Instant::now(),
            down_until: AtomicU64::new(0),
            last_log: AtomicU64::new(0),
        };
        // Early warning only: requests decide by `failure_mode` until it answers.
        let mut c = buckets.conn.clone();
        let ping = redis::cmd("PING");
        match tokio::time::timeout(OP_TIMEOUT, ping.query_async::<String>(&mut c)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::warn!("rate limit Redis not reachable yet: {e}"),
            Err(_) => tracing::warn!("rate limit Redis not reachable yet: timed out"),
        }
        Ok(buckets)
    }

    fn now_micros(&self) -> u64 {
        u64::try_from(self.base.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    /// Outer `Err` = Redis could not decide (the failure mode applies).
    pub(crate) async fn check(
        &self,
        rule: &Rule,
        key: &str,
    ) -> Result<Result<(), Duration>, String> {
        if self.now_micros() < self.down_until.load(Ordering::Relaxed) {
            return Err("Redis marked down after a recent failure".into());
        }
        let interval_us = rule.per.as_secs_f64() * 1e6 / rule.rate as f64;
        let mut conn = self.conn.clone();
        let mut call = self.script.key(key);
        call.arg(format!("{interval_us:.3}")).arg(rule.burst);
        let answer = tokio::time::timeout(OP_TIMEOUT, call.invoke_async::<(i64, i64)>(&mut conn));
        let result = match answer.await {
            Ok(Ok((1, _))) => Ok(Ok(())),
            Ok(Ok((_, retry_us))) => Ok(Err(Duration::from_micros(
                u64::try_from(retry_us).unwrap_or(0).max(1),
            ))),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!("no answer within {OP_TIMEOUT:?}")),
        };
        if result.is_err() {
            let until = self.now_micros() + BACKOFF.as_micros() as u64;
            self.down_until.store(until, Ordering::Relaxed);
        }
        result
    }

    pub(crate) fn log_failure(&self, why: &str) {
        let now = self.now_micros();
        let last = self.last_log.load(Ordering::Relaxed);
        let due = last == 0 || now.saturating_sub(last) >= LOG_EVERY.as_micros() as u64;
        if due
            && self
                .last_log
                .compare_exchange(last, now.max(1), Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            tracing::warn!("rate limit backend failed, applying failure_mode: {why}");
        }
    }
}
