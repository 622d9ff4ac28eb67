//! The per-upstream list cache, against scripted fake sources. Time is paused
//! (tokio test-util), so TTLs, backoff and deadlines are deterministic.

#![allow(clippy::unwrap_used)] // test helpers: a panic is the failure report

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::{join_all, BoxFuture, FutureExt};
use junction_catalog::{
    fan_out, Deadline, ListStatus, MergedCache, NamingRules, SourceError, SourcePage, ToolCache,
    ToolFilter, ToolSource,
};
use serde_json::{json, Value};

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Answer,
    Fail,
    Hang,
    /// Always says there is another page.
    Endless,
}

struct Fake {
    id: String,
    calls: AtomicUsize,
    mode: Mutex<Mode>,
    /// Pages by position; the cursor of page i+1 is `p{i+1}`.
    pages: Mutex<Vec<(Vec<&'static str>, Option<u64>)>>,
    delay: Duration,
    /// The deadline each page was asked under.
    deadlines: Mutex<Vec<Deadline>>,
}

impl Fake {
    fn new(id: &str, tools: Vec<&'static str>, ttl_ms: Option<u64>) -> Arc<Fake> {
        Arc::new(Fake {
            id: id.to_owned(),
            calls: AtomicUsize::new(0),
            mode: Mutex::new(Mode::Answer),
            pages: Mutex::new(vec![(tools, ttl_ms)]),
            delay: Duration::from_millis(50),
            deadlines: Mutex::new(Vec::new()),
        })
    }
    fn set(&self, mode: Mode) {
        *self.mode.lock().unwrap() = mode;
    }
    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

fn tool(name: &str) -> Value {
    json!({"name": name, "inputSchema": {"type": "object"}})
}

impl ToolSource for Fake {
    fn id(&self) -> &str {
        &self.id
    }
    fn list_page<'a>(
        &'a self,
        cursor: Option<String>,
        deadline: Deadline,
    ) -> BoxFuture<'a, Result<SourcePage, SourceError>> {
        async move {
            self.calls.fetch_add(1, Ordering::SeqCst);
            self.deadlines.lock().unwrap().push(deadline);
            tokio::time::sleep(self.delay).await;
            let mode = *self.mode.lock().unwrap();
            match mode {
                Mode::Fail => Err(SourceError("connection refused".into())),
                Mode::Hang => std::future::pending().await,
                Mode::Endless => Ok(SourcePage {
                    tools: Arc::new(vec![tool("t")]),
                    next_cursor: Some(String::new()),
                    ttl_ms: Some(1000),
                    public: true,
                }),
                Mode::Answer => {
                    let pages = self.pages.lock().unwrap().clone();
                    let i = match cursor.as_deref() {
                        None => 0,
                        Some(c) => c.trim_start_matches('p').parse::<usize>().unwrap(),
                    };
                    let (names, ttl_ms) = pages[i].clone();
                    Ok(SourcePage {
                        tools: Arc::new(names.into_iter().map(tool).collect()),
                        next_cursor: (i + 1 < pages.len()).then(|| format!("p{}", i + 1)),
                        ttl_ms,
                        public: i != 1,
                    })
                }
            }
        }
        .boxed()
    }
}

const TTL: Duration = Duration::from_secs(30);
const DEADLINE: Duration = Duration::from_secs(5);

fn names(u: &junction_catalog::UpstreamTools) -> Vec<&str> {
    u.tools
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_fresh_list_is_served_from_cache_until_its_ttl_passes() {
    let cache = ToolCache::new(10);
    let src = Fake::new("a", vec!["x"], Some(10_000));
    let first = cache.get(src.as_ref(), TTL, DEADLINE).await;
    assert_eq!(
        (first.status, names(&first)),
        (ListStatus::Fresh, vec!["x"])
    );
    assert_eq!(first.ttl_ms, Some(10_000));
    tokio::time::advance(Duration::from_secs(9)).await;
    let again = cache.get(src.as_ref(), TTL, DEADLINE).await;
    assert_eq!((again.status, src.calls()), (ListStatus::Fresh, 1));
    // the upstream's ttlMs (10s) governs, not the default (30s)
    tokio::time::advance(Duration::from_secs(2)).await;
    cache.get(src.as_ref(), TTL, DEADLINE).await;
    assert_eq!(src.calls(), 2);
}

#[tokio::test(start_paused = true)]
async fn legacy_lists_use_the_default_ttl() {
    let cache = ToolCache::new(10);
    let src = Fake::new("legacy", vec!["x"], None);
    let got = cache.get(src.as_ref(), TTL, DEADLINE).await;
    assert_eq!(got.ttl_ms, None);
    tokio::time::advance(Duration::from_secs(29)).await;
    cache.get(src.as_ref(), TTL, DEADLINE).await;
    assert_eq!(src.calls(), 1);
    tokio::time::advance(Duration::from_secs(2)).await;
    cache.get(src.as_ref(), TTL, DEADLINE).await;
    assert_eq!(src.calls(), 2);
}

#[tokio::test(start_paused = true)]
async fn concurrent_callers_share_one_refresh() {
    let cache = ToolCache::new(10);
    let src = Fake::new("a", vec!["x", "y"], Some(1000));
    let all = join_all((0..10).map(|_| cache.get(src.as_ref(), TTL, DEADLINE))).await;
    assert_eq!(src.calls(), 1);
    for got in &all {
        assert_eq!(
            (got.status, names(got)),
            (ListStatus::Fresh, vec!["x", "y"])
        );
    }

    // a failing refresh is shared too
    src.set(Mode::Fail);
    cache.invalidate("a");
    let all = join_all((0..10).map(|_| cache.get(src.as_ref(), TTL, DEADLINE))).await;
    assert_eq!(src.calls(), 2);
    assert!(all.iter().all(|g| g.status == ListStatus::Stale));
}

#[tokio::test(start_paused = true)]
async fn a_failed_refresh_serves_the_last_good_list_as_stale() {
    let cache = ToolCache::new(10);
    let src = Fake::new("a", vec!["x"], Some(1000));
    let good = cache.get(src.as_ref(), TTL, DEADLINE).await;
    src.set(Mode::Fail);
    tokio::time::advance(Duration::from_secs(2)).await;
    let stale = cache.get(src.as_ref(), TTL, DEADLINE).await;
    assert_eq!(
        (stale.status, names(&stale)),
        (ListStatus::Stale, vec!["x"])
    );
    assert_eq!(stale.generation, good.generation);
    assert_eq!(cache.last_error("a").as_deref(), Some("connection refused"));

    // within the backoff the upstream is not asked again
    let calls = src.calls();
    assert_eq!(
        cache.get(src.as_ref(), TTL, DEADLINE).await.status,
        ListStatus::Stale
    );
    assert_eq!(src.calls(), calls);
    // after it, it is, and recovery makes the list fresh again
    src.set(Mode::Answer);
    tokio::time::advance(Duration::from_secs(1)).await;
    let back = cache.get(src.as_ref(), TTL, DEADLINE).await;
    assert_eq!((back.status, src.calls()), (ListStatus::Fresh, calls + 1));
    assert_eq!(cache.last_error("a"), None);
}

#[tokio::test(start_paused = true)]
async fn an_upstream_that_never_answered_is_missing() {
    let cache = ToolCache::new(10);
    let src = Fake::new("a", vec!["x"], Some(1000));
    src.set(Mode::Fail);
    let got = cache.get(src.as_ref(), TTL, DEADLINE).await;
    assert_eq!(got.status, ListStatus::Missing);
    assert!(got.tools.is_empty());
    assert_eq!(cache.generation("a"), 0);
}

#[tokio::test(start_paused = true)]
async fn the_deadline_bounds_a_hanging_upstream() {
    let cache = ToolCache::new(10);
    let src = Fake::new("a", vec!["x"], Some(1000));
    src.set(Mode::Hang);
    let started = tokio::time::Instant::now();
    let got = cache.get(src.as_ref(), TTL, DEADLINE).await;
    assert_eq!(got.status, ListStatus::Missing);
    // paused clock: exactly the deadline elapsed, not the hang
    assert_eq!(started.elapsed(), DEADLINE);
    assert!(cache.last_error("a").unwrap().contains("did not finish"));
}

#[tokio::test(start_paused = true)]
async fn every_page_is_drained_and_the_bound_is_enforced() {
    let cache = ToolCache::new(10);
    let src = Fake::new("a", vec!["a1", "a2"], Some(5000));
    src.pages
        .lock()
        .unwrap()
        .extend([(vec!["b1"], Some(2000)), (vec!["c1"], Some(9000))]);
    let started = tokio::time::Instant::now();
    let got = cache.get(src.as_ref(), TTL, DEADLINE).await;
    assert_eq!(names(&got), ["a1", "a2", "b1", "c1"]);
    assert_eq!(src.calls(), 3);
    // One deadline for the whole refresh, not one per page.
    let whole = Deadline {
        at: started + DEADLINE,
        budget: DEADLINE,
    };
    assert_eq!(*src.deadlines.lock().unwrap(), [whole; 3]);
    assert_eq!(got.ttl_ms, Some(2000), "the shortest page TTL");
    assert!(!got.public, "one private page makes the list private");

    let endless = Fake::new("e", vec![], None);
    endless.set(Mode::Endless);
    let got = ToolCache::new(5).get(endless.as_ref(), TTL, DEADLINE).await;
    assert_eq!(got.status, ListStatus::Missing);
    assert_eq!(endless.calls(), 5);
}

#[tokio::test(start_paused = true)]
async fn invalidate_forces_a_refresh_and_generation_tracks_content() {
    let cache = ToolCache::new(10);
    let src = Fake::new("a", vec!["x"], Some(60_000));
    let g1 = cache.get(src.as_ref(), TTL, DEADLINE).await.generation;
    assert_eq!(cache.generation("a"), g1);

    cache.invalidate("a");
    let same = cache.get(src.as_ref(), TTL, DEADLINE).await;
    assert_eq!(src.calls(), 2);
    assert_eq!(
        same.generation, g1,
        "unchanged content keeps the generation"
    );

    src.pages.lock().unwrap()[0].0 = vec!["x", "y"];
    cache.invalidate("a");
    let changed = cache.get(src.as_ref(), TTL, DEADLINE).await;
    assert!(changed.generation > g1);
    assert_eq!(names(&changed), ["x", "y"]);
}

#[tokio::test(start_paused = true)]
async fn a_caller_dropped_mid_refresh_does_not_wedge_the_others() {
    let cache = ToolCache::new(10);
    let src = Fake::new("a", vec!["x"], Some(1000));
    let timed_out = tokio::time::timeout(
        Duration::from_millis(10),
        cache.get(src.as_ref(), TTL, DEADLINE),
    )
    .await;
    assert!(timed_out.is_err());
    let got = cache.get(src.as_ref(), TTL, DEADLINE).await;
    assert_eq!(got.status, ListStatus::Fresh);
    assert_eq!(src.calls(), 2);
}

#[tokio::test(start_paused = true)]
async fn fan_out_returns_every_upstream_in_order_even_when_one_hangs() {
    let cache = ToolCache::new(10);
    let a = Fake::new("a", vec!["x"], Some(1000));
    let b = Fake::new("b", vec!["y"], Some(1000));
    b.set(Mode::Hang);
    let c = Fake::new("c", vec!["z"], Some(1000));
    let sources: Vec<Arc<dyn ToolSource>> = vec![a, b, c];
    let got = fan_out(&cache, &sources, TTL, DEADLINE).await;
    let summary: Vec<_> = got
        .iter()
        .map(|u| (u.upstream.as_str(), u.status))
        .collect();
    assert_eq!(
        summary,
        [
            ("a", ListStatus::Fresh),
            ("b", ListStatus::Missing),
            ("c", ListStatus::Fresh)
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn the_route_memo_rebuilds_only_when_a_contributor_changed() {
    let cache = ToolCache::new(10);
    let a = Fake::new("a", vec!["x"], Some(1000));
    let sources: Vec<Arc<dyn ToolSource>> = vec![a.clone()];
    let order = vec!["a".to_string()];
    let memo = MergedCache::new();
    let (naming, filter) = (NamingRules::default(), ToolFilter::default());

    let lists = fan_out(&cache, &sources, TTL, DEADLINE).await;
    let (first, built) = memo.get_or_build("/mcp", &order, &lists, &naming, &filter);
    assert!(built);
    // a refresh with the same content: same catalog, no rebuild
    tokio::time::advance(Duration::from_secs(2)).await;
    let lists = fan_out(&cache, &sources, TTL, DEADLINE).await;
    let (again, built) = memo.get_or_build("/mcp", &order, &lists, &naming, &filter);
    assert!(!built);
    assert!(Arc::ptr_eq(&first, &again));
    // new content: rebuilt
    a.pages.lock().unwrap()[0].0 = vec!["x", "y"];
    cache.invalidate("a");
    let lists = fan_out(&cache, &sources, TTL, DEADLINE).await;
    let (next, built) = memo.get_or_build("/mcp", &order, &lists, &naming, &filter);
    assert!(built);
    assert_eq!(next.tools.len(), 2);
    assert_ne!(next.version, first.version);
    // the upstream going stale changes the status: rebuilt with it degraded
    a.set(Mode::Fail);
    cache.invalidate("a");
    let lists = fan_out(&cache, &sources, TTL, DEADLINE).await;
    let (degraded, built) = memo.get_or_build("/mcp", &order, &lists, &naming, &filter);
    assert!(built);
    assert_eq!(degraded.degraded, ["a"]);
    assert_eq!(degraded.tools.len(), 2);
}
