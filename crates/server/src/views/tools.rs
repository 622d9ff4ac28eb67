//! The route's tool catalog: every upstream's cached list (`State::cache`,
//! fanned out within the list deadline), merged by `junction_catalog::merge`
//! only when a contributor changed (`RouteState::merged`), and served from a
//! warm memo while nothing it came from can have changed (`RouteState::warm`).

use std::sync::Arc;

use junction_catalog::{merge, Catalog, ListStatus};

use crate::context::Cx;

/// The merged catalog of the route: every upstream's (cached) list, merged only
/// when some contributor changed since the last merge.
pub async fn route_catalog(cx: &Cx<'_>) -> Arc<Catalog> {
    let state = cx.state;
    let changes = state.cache.changes();
    if let Some(catalog) = warm_catalog(cx, changes) {
        return catalog;
    }
    let deadline = state.config.catalog.list_deadline;
    let entries: Vec<_> = cx
        .route
        .upstreams
        .iter()
        .filter_map(|id| state.upstreams.get(id))
        .collect();
    let started = std::time::Instant::now();
    let mut lists = futures_util::future::join_all(
        entries
            .iter()
            .map(|u| state.cache.get(u.source.as_ref(), u.list_ttl, deadline)),
    )
    .await;
    let fanout = started.elapsed().as_secs_f64();
    state
        .metrics
        .fanout_duration_seconds
        .with_label_values(&[&cx.route.path])
        .observe(fanout);
    // A handshake-era list has no ttlMs of its own: it is cached for the
    // upstream's configured list_ttl, so that is its contribution to ttlMs.
    for (u, l) in entries.iter().zip(lists.iter_mut()) {
        if l.ttl_ms.is_none() {
            l.ttl_ms = Some(u.list_ttl.as_millis() as u64);
        }
    }
    let fingerprint: Vec<(u64, u8)> = entries
        .iter()
        .zip(&lists)
        .map(|(u, l)| {
            let status = match l.status {
                ListStatus::Fresh => 0,
                ListStatus::Stale => 1,
                ListStatus::Missing => 2,
            };
            (state.cache.generation(&u.id), status)
        })
        .collect();
    if let Ok(memo) = cx.route.merged.lock() {
        if let Some((fp, catalog)) = memo.as_ref() {
            if *fp == fingerprint {
                count_lookup(cx, true);
                let catalog = catalog.clone();
                remember_warm(cx, changes, &entries, &catalog);
                return catalog;
            }
        }
    }
    count_lookup(cx, false);
    for l in &lists {
        let healthy = state
            .upstreams
            .get(&l.upstream)
            .is_none_or(|u| u.client.is_healthy());
        let up = if matches!(l.status, ListStatus::Missing) || !healthy {
            0
        } else {
            1
        };
        state
            .metrics
            .upstream_up
            .with_label_values(&[&l.upstream])
            .set(up);
    }
    let catalog = Arc::new(merge(
        &cx.route.upstreams,
        &lists,
        &cx.route.naming,
        &cx.route.filter,
    ));
    // Two requests may merge the same lists at once (the warm-up and a first
    // client, on different threads): the first to store its catalog has it
    // counted and logged; the other serves that one and counts nothing.
    if let Ok(mut memo) = cx.route.merged.lock() {
        if let Some((fp, kept)) = memo.as_ref() {
            if *fp == fingerprint {
                let kept = kept.clone();
                drop(memo);
                remember_warm(cx, changes, &entries, &kept);
                return kept;
            }
        }
        *memo = Some((fingerprint, catalog.clone()));
    }
    for d in &catalog.dropped {
        tracing::warn!(upstream = %d.upstream, tool = %d.tool, reason = %d.reason, "upstream tool left out of the catalog");
        state
            .metrics
            .tools_dropped_total
            .with_label_values(&[&d.upstream, d.kind.as_str()])
            .inc();
    }
    for origin in &catalog.unmatched {
        tracing::warn!(route = %cx.route.path, %origin, "override names no tool this route lists");
    }
    for id in &catalog.degraded {
        tracing::warn!(upstream = %id, route = %cx.route.path, "upstream degraded: serving its last good list or none");
    }
    for u in &entries {
        let n = catalog.tools.iter().filter(|t| t.upstream == u.id).count();
        state
            .metrics
            .upstream_tools
            .with_label_values(&[&u.id])
            .set(n as i64);
        if cx.route.filter.pins(&u.id).is_some() {
            let held = catalog
                .dropped
                .iter()
                .filter(|d| d.upstream == u.id && d.kind == junction_catalog::DropKind::Quarantined)
                .count();
            state
                .metrics
                .tools_quarantined
                .with_label_values(&[&u.id])
                .set(held as i64);
        }
    }
    remember_warm(cx, changes, &entries, &catalog);
    catalog
}

/// The route's last catalog if nothing it was built from can have changed.
fn warm_catalog(cx: &Cx<'_>, changes: u64) -> Option<Arc<Catalog>> {
    let warm = cx.route.warm.lock().ok()?;
    let (seen, until, catalog) = warm.as_ref()?;
    if *seen != changes || tokio::time::Instant::now() >= *until {
        return None;
    }
    let catalog = catalog.clone();
    drop(warm);
    count_lookup(cx, true);
    Some(catalog)
}

/// `catalog_lookups_total{result}`: `hit` when a memo served the catalog,
/// `miss` when it was merged.
fn count_lookup(cx: &Cx<'_>, hit: bool) {
    cx.state.metrics.catalog_lookup(hit).inc();
}

/// Keeps `catalog` as the warm answer when every list it came from is fresh:
/// until the first of them ages out, or the cache changes after `changes` (a
/// list refreshed meanwhile moved the count, so the memo is never served).
fn remember_warm(
    cx: &Cx<'_>,
    changes: u64,
    entries: &[&crate::state::UpstreamEntry],
    catalog: &Arc<Catalog>,
) {
    let mut until: Option<tokio::time::Instant> = None;
    for u in entries {
        // A stale or missing list: no warm path until it is fresh again.
        let Some(t) = cx.state.cache.fresh_until(&u.id, u.list_ttl) else {
            return;
        };
        until = Some(until.map_or(t, |m| m.min(t)));
    }
    if let (Some(until), Ok(mut warm)) = (until, cx.route.warm.lock()) {
        *warm = Some((changes, until, catalog.clone()));
    }
}

/// The merged catalog of one route, for `junction catalog` and admin use.
pub async fn route_catalog_for(state: &crate::state::State, path: &str) -> Option<Arc<Catalog>> {
    let route = state.routes.get(path)?;
    let headers = http::HeaderMap::new();
    let cx = Cx::new(state, route, &headers);
    Some(route_catalog(&cx).await)
}
