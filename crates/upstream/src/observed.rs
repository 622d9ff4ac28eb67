//! What the last requests to one upstream showed, for the status page: the
//! latest failure (text and time) and how long the latest answer took.
//!
//! The request path pays one relaxed atomic store per answered request and
//! nothing else; a failure takes a lock and formats its message (failures are
//! not the hot path). Requests the circuit breaker refused are not recorded,
//! so the cause that opened it stays visible.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use crate::UpstreamError;

/// Longest error text kept (an HTTP error's body can be anything).
const MAX_MESSAGE: usize = 300;

/// The latest request to an upstream that failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LastError {
    pub message: String,
    pub at: SystemTime,
}

#[derive(Debug, Default)]
pub(crate) struct Observed {
    last_error: Mutex<Option<LastError>>,
    /// Microseconds until the latest answer began; 0 = none yet.
    latency_us: AtomicU64,
}

impl Observed {
    /// Records how a request that started at `started` ended. A JSON-RPC
    /// error is an answer: the upstream is alive and took that long.
    pub(crate) fn record<T>(&self, started: Instant, result: &Result<T, UpstreamError>) {
        match result {
            Ok(_) | Err(UpstreamError::Rpc(_)) => {
                let us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
                self.latency_us.store(us.max(1), Ordering::Relaxed);
            }
            Err(e) => {
                let mut message = e.to_string();
                if let UpstreamError::Http { body, .. } = e {
                    if !body.trim().is_empty() {
                        message = format!("{message}: {}", body.trim());
                    }
                }
                truncate(&mut message, MAX_MESSAGE);
                *crate::lock(&self.last_error) = Some(LastError {
                    message,
                    at: SystemTime::now(),
                });
            }
        }
    }

    pub(crate) fn last_error(&self) -> Option<LastError> {
        crate::lock(&self.last_error).clone()
    }

    pub(crate) fn latency(&self) -> Option<Duration> {
        match self.latency_us.load(Ordering::Relaxed) {
            0 => None,
            us => Some(Duration::from_micros(us)),
        }
    }
}

/// Cuts `s` to at most `max` bytes at a character boundary, marking the cut.
fn truncate(s: &mut String, max: usize) {
    if s.len() <= max {
        return;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.truncate(end);
    s.push('…');
}

#[cfg(test)]
mod tests {
    use super::*;
    use junction_protocol::jsonrpc::RpcError;

    #[tokio::test(start_paused = true)]
    async fn answers_set_the_latency_and_failures_the_last_error() {
        let o = Observed::default();
        assert_eq!((o.latency(), o.last_error()), (None, None));
        let started = Instant::now();
        tokio::time::advance(Duration::from_millis(12)).await;
        o.record(started, &Ok::<(), UpstreamError>(()));
        assert_eq!(o.latency(), Some(Duration::from_millis(12)));
        o.record::<()>(
            started,
            &Err(UpstreamError::Rpc(RpcError::new(-32601, "no"))),
        );
        assert_eq!(o.last_error(), None, "a JSON-RPC error is an answer");
        o.record::<()>(
            started,
            &Err(UpstreamError::Http {
                status: 503,
                body: "x".repeat(1000),
            }),
        );
        let e = o.last_error().expect("recorded");
        assert!(
            e.message.starts_with("upstream answered HTTP 503: xxx"),
            "{e:?}"
        );
        assert!(e.message.len() <= MAX_MESSAGE + '…'.len_utf8());
        assert_eq!(o.latency(), Some(Duration::from_millis(12)), "kept");
    }

    #[test]
    fn truncation_keeps_whole_characters() {
        let mut s = "ééé".to_owned();
        truncate(&mut s, 3);
        assert_eq!(s, "é…");
    }
}
