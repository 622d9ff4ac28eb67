//! Per-upstream cache of prompt and resource lists: fresh for the list's own
//! `ttlMs` (handshake-era upstreams: their `list_ttl`), and the last good list
//! kept to serve, marked degraded, while the upstream fails. Keyed by the
//! upstream's config fingerprint, so a reload that changes an upstream never
//! serves the old one's lists. Per process: a replica that has nothing cached
//! simply asks the upstreams.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::forward::Contribution;
use crate::state::UpstreamEntry;

#[derive(Clone)]
pub(crate) enum Listed {
    Items(Contribution),
    /// The upstream answered -32601: it has no such list.
    Unsupported,
}

struct Cached {
    listed: Listed,
    fresh_until: Instant,
}

type Key = (String, String, String);

fn cache() -> &'static Mutex<HashMap<Key, Cached>> {
    static CACHE: OnceLock<Mutex<HashMap<Key, Cached>>> = OnceLock::new();
    CACHE.get_or_init(Mutex::default)
}

fn key(u: &UpstreamEntry, method: &str) -> Key {
    (u.id.clone(), u.fingerprint.clone(), method.to_owned())
}

/// The cached list and whether it is still fresh. A fresh one's `ttl_ms` is
/// what is left of its lifetime.
pub(crate) fn get(u: &UpstreamEntry, method: &str) -> Option<(Listed, bool)> {
    let all = cache().lock().ok()?;
    let c = all.get(&key(u, method))?;
    let now = Instant::now();
    let fresh = c.fresh_until > now;
    let mut listed = c.listed.clone();
    if let Listed::Items(items) = &mut listed {
        items.ttl_ms = if fresh {
            c.fresh_until.duration_since(now).as_millis() as u64
        } else {
            0
        };
    }
    Some((listed, fresh))
}

pub(crate) fn put(u: &UpstreamEntry, method: &str, listed: &Listed) {
    let ttl_ms = match listed {
        Listed::Items(c) => c.ttl_ms,
        Listed::Unsupported => u.list_ttl.as_millis() as u64,
    };
    let Some(fresh_until) = Instant::now().checked_add(Duration::from_millis(ttl_ms)) else {
        return;
    };
    if let Ok(mut all) = cache().lock() {
        all.insert(
            key(u, method),
            Cached {
                listed: listed.clone(),
                fresh_until,
            },
        );
    }
}

/// Marks the upstream's cached `methods` lists out of date (its list changed);
/// they stay as the last good lists in case the next fetch fails.
pub(crate) fn invalidate(upstream: &str, methods: &[&str]) {
    let Ok(mut all) = cache().lock() else {
        return;
    };
    let now = Instant::now();
    for ((id, _, method), c) in all.iter_mut() {
        if id == upstream && methods.contains(&method.as_str()) {
            c.fresh_until = now;
        }
    }
}
