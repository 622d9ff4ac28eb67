//! What one replica remembers of prompt and resource lists, as owned values
//! (no process statics: two gateways in one process share nothing).
//!
//! [`ListCache`]: per upstream, its lists fresh for their own `ttlMs`
//! (handshake-era upstreams: their configured list TTL), and the last good
//! list kept to serve, marked degraded, while the upstream fails. Keyed by the
//! upstream's config fingerprint, so a reload that changes an upstream never
//! serves the old one's lists ([`ListCache::retain`] drops them).
//!
//! [`ResourceIndex`]: per route, which upstream serves each URI and template
//! of its last merged lists, kept for the lists' `ttlMs`. A miss lists again,
//! so the memo is an optimisation, never state a client relies on.
//!
//! Times are `tokio::time::Instant` (the real clock outside paused tests).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

use super::{match_template, Contribution};

/// A poisoned table is still a table: nothing panics while holding one.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn until(ttl_ms: u64) -> Option<Instant> {
    Instant::now().checked_add(Duration::from_millis(ttl_ms))
}

/// One upstream's answer to a list method.
#[derive(Clone, Debug, PartialEq)]
pub enum Listed {
    Items(Contribution),
    /// The upstream answered -32601: it has no such list.
    Unsupported,
}

struct Cached {
    listed: Listed,
    fresh_until: Instant,
}

/// (upstream id, upstream config fingerprint, method).
type Key = (String, String, String);

/// Per-upstream prompt and resource lists; see the module comment.
#[derive(Default)]
pub struct ListCache {
    lists: Mutex<HashMap<Key, Cached>>,
}

impl ListCache {
    pub fn new() -> ListCache {
        ListCache::default()
    }

    /// The cached list and whether it is still fresh. A fresh one's `ttl_ms`
    /// is what is left of its lifetime; a stale one's is 0 (it is already out
    /// of date, but still the last good list).
    pub fn get(&self, upstream: &str, fingerprint: &str, method: &str) -> Option<(Listed, bool)> {
        let key = (
            upstream.to_owned(),
            fingerprint.to_owned(),
            method.to_owned(),
        );
        let all = lock(&self.lists);
        let c = all.get(&key)?;
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

    /// Keeps `listed` fresh for its own `ttl_ms`; `Unsupported` for
    /// `default_ttl` (the upstream's configured list TTL).
    pub fn put(
        &self,
        upstream: &str,
        fingerprint: &str,
        method: &str,
        listed: &Listed,
        default_ttl: Duration,
    ) {
        let ttl_ms = match listed {
            Listed::Items(c) => c.ttl_ms,
            Listed::Unsupported => default_ttl.as_millis() as u64,
        };
        let Some(fresh_until) = until(ttl_ms) else {
            return;
        };
        lock(&self.lists).insert(
            (
                upstream.to_owned(),
                fingerprint.to_owned(),
                method.to_owned(),
            ),
            Cached {
                listed: listed.clone(),
                fresh_until,
            },
        );
    }

    /// Marks the upstream's cached `methods` lists out of date (its list
    /// changed); they stay as the last good lists in case the next fetch fails.
    pub fn invalidate(&self, upstream: &str, methods: &[&str]) {
        let now = Instant::now();
        for ((id, _, method), c) in lock(&self.lists).iter_mut() {
            if id == upstream && methods.contains(&method.as_str()) {
                c.fresh_until = now;
            }
        }
    }

    /// Keeps only the lists for which `keep(upstream, fingerprint)` holds: a
    /// reload drops those of upstreams that are gone or changed.
    pub fn retain(&self, keep: impl Fn(&str, &str) -> bool) {
        lock(&self.lists).retain(|(id, fp, _), _| keep(id, fp));
    }

    /// Cached lists, fresh or not.
    pub fn len(&self) -> usize {
        lock(&self.lists).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What the memo says about a URI.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lookup {
    Found(String),
    /// The memo is current and does not know the URI.
    Unknown,
    /// The memo is missing or expired: list again.
    Stale,
}

/// Where the URIs and templates of one route's last lists came from.
#[derive(Default)]
struct Index {
    /// The route's upstreams when this was built: a reload that changes them
    /// makes the memo useless.
    upstreams: Vec<String>,
    uris: HashMap<String, String>,
    uris_until: Option<Instant>,
    /// (literal prefix before the first `{`, upstream), in merged order.
    templates: Vec<(String, String)>,
    templates_until: Option<Instant>,
}

/// Per route (by path): which upstream serves which listed URI and template.
/// One entry per route path it is given, so it is bounded by the config.
#[derive(Default)]
pub struct ResourceIndex {
    routes: Mutex<HashMap<String, Index>>,
}

impl ResourceIndex {
    pub fn new() -> ResourceIndex {
        ResourceIndex::default()
    }

    /// Runs `f` on the route's index, reset when its upstreams differ.
    fn with_index<T>(
        &self,
        route: &str,
        route_upstreams: &[String],
        f: impl FnOnce(&mut Index) -> T,
    ) -> T {
        let mut all = lock(&self.routes);
        let index = all.entry(route.to_owned()).or_default();
        if index.upstreams != route_upstreams {
            *index = Index {
                upstreams: route_upstreams.to_vec(),
                ..Index::default()
            };
        }
        f(index)
    }

    /// URI → upstream of the route's last merged resource list, for `ttl_ms`.
    pub fn set_uris(
        &self,
        route: &str,
        route_upstreams: &[String],
        owners: HashMap<String, String>,
        ttl_ms: u64,
    ) {
        self.with_index(route, route_upstreams, |ix| {
            ix.uris = owners;
            ix.uris_until = until(ttl_ms);
        });
    }

    /// (literal prefix, upstream) of the route's last merged template list,
    /// in merged order, for `ttl_ms`.
    pub fn set_templates(
        &self,
        route: &str,
        route_upstreams: &[String],
        prefixes: Vec<(String, String)>,
        ttl_ms: u64,
    ) {
        self.with_index(route, route_upstreams, |ix| {
            ix.templates = prefixes;
            ix.templates_until = until(ttl_ms);
        });
    }

    /// The upstream that listed `uri`, as the memo knows it.
    pub fn lookup_uri(&self, route: &str, route_upstreams: &[String], uri: &str) -> Lookup {
        let now = Instant::now();
        self.with_index(route, route_upstreams, |ix| match ix.uris_until {
            Some(t) if t > now => match ix.uris.get(uri) {
                Some(u) => Lookup::Found(u.clone()),
                None => Lookup::Unknown,
            },
            _ => Lookup::Stale,
        })
    }

    /// The upstream of the most specific template matching `uri`, as the memo
    /// knows them.
    pub fn lookup_template(&self, route: &str, route_upstreams: &[String], uri: &str) -> Lookup {
        let now = Instant::now();
        self.with_index(route, route_upstreams, |ix| match ix.templates_until {
            Some(t) if t > now => {
                match_template(&ix.templates, uri).map_or(Lookup::Unknown, Lookup::Found)
            }
            _ => Lookup::Stale,
        })
    }

    /// Keeps only the routes for which `keep(route path)` holds.
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        lock(&self.routes).retain(|route, _| keep(route));
    }

    /// Routes with a memo.
    pub fn len(&self) -> usize {
        lock(&self.routes).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
