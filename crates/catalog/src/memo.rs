//! Route → merged catalog memo: a route's catalog is rebuilt only when some
//! contributor's generation, status, TTL or scope changed, so a warm
//! `tools/list` is a fingerprint of a few integers plus a map lookup.
//!
//! Naming rules and filters are not part of the fingerprint: a config reload
//! builds a new `MergedCache` with the new state snapshot.

use std::collections::HashMap;
use std::sync::Arc;

use dashmap::DashMap;
use sha2::{Digest, Sha256};

use crate::catalog::Catalog;
use crate::filter::ToolFilter;
use crate::merge::{merge, ListStatus, UpstreamTools};
use crate::naming::NamingRules;

#[derive(Default)]
pub struct MergedCache {
    routes: DashMap<String, (u64, Arc<Catalog>)>,
}

/// Relies on `generation` changing with content (as `ToolCache` guarantees);
/// the tool count is folded in too as a guard for hand-built inputs.
fn fingerprint(order: &[String], lists: &[UpstreamTools]) -> u64 {
    let mut by_id: HashMap<&str, &UpstreamTools> = HashMap::with_capacity(lists.len());
    for list in lists {
        by_id.entry(list.upstream.as_str()).or_insert(list);
    }
    let mut h = Sha256::new();
    for id in order {
        h.update((id.len() as u64).to_be_bytes());
        h.update(id.as_bytes());
        match by_id.get(id.as_str()) {
            None => h.update([0u8]),
            Some(l) => {
                h.update([match l.status {
                    ListStatus::Fresh => 1u8,
                    ListStatus::Stale => 2,
                    ListStatus::Missing => 3,
                }]);
                h.update(l.generation.to_be_bytes());
                h.update((l.tools.len() as u64).to_be_bytes());
                h.update(l.ttl_ms.map_or([0xff; 9], |t| {
                    let mut b = [0u8; 9];
                    b[1..].copy_from_slice(&t.to_be_bytes());
                    b
                }));
                h.update([u8::from(l.public)]);
            }
        }
    }
    let digest = h.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first)
}

impl MergedCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// The route's catalog for these inputs, and whether it had to be rebuilt.
    pub fn get_or_build(
        &self,
        route: &str,
        order: &[String],
        lists: &[UpstreamTools],
        naming: &NamingRules,
        filter: &ToolFilter,
    ) -> (Arc<Catalog>, bool) {
        let fp = fingerprint(order, lists);
        if let Some(entry) = self.routes.get(route) {
            if entry.0 == fp {
                return (entry.1.clone(), false);
            }
        }
        // two concurrent rebuilds of the same inputs give the same catalog
        let built = Arc::new(merge(order, lists, naming, filter));
        self.routes.insert(route.to_owned(), (fp, built.clone()));
        (built, true)
    }

    /// The last catalog built for a route, whatever its inputs were.
    pub fn current(&self, route: &str) -> Option<Arc<Catalog>> {
        self.routes.get(route).map(|e| e.1.clone())
    }
}
