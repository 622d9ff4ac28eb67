//! Bounded soak (issue 6): mixed load against several upstreams for a fixed
//! time while one upstream restarts and the config is reloaded, then the checks
//! a user would make after a night of traffic: every request got its answer,
//! the only errors are the injected ones, and memory and descriptors are flat
//! after warm-up.
//!
//! CI runs it briefly (`JUNCTION_SOAK_SECS`, default 20). By hand:
//! `scripts/soak.sh 600` (release build, prints the figures).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use junction_testkit::{
    accept_all, spawn_gateway_with_env, Behavior, Gateway, MockSpec, MockTool, MockUpstream,
    TestClient,
};
use serde_json::{json, Value};

const UNAVAILABLE: i64 = -31001;
/// Workers sending requests concurrently.
const WORKERS: usize = 8;
/// A request that takes longer than this counts as lost.
const ANSWER_WITHIN: Duration = Duration::from_secs(10);

fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_junction"))
}

fn obj() -> Value {
    json!({"type": "object"})
}

fn soak_secs() -> u64 {
    std::env::var("JUNCTION_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20)
        .max(8)
}

/// What one operation ended with.
enum Outcome {
    Ok,
    /// An error the soak caused on purpose (the restarting upstream was down).
    Injected,
    Unexpected(String),
}

#[derive(Default)]
struct Tally {
    started: AtomicU64,
    ok: AtomicU64,
    injected: AtomicU64,
    unexpected: Mutex<Vec<String>>,
    per_op: Mutex<BTreeMap<&'static str, u64>>,
    ok_per_op: Mutex<BTreeMap<&'static str, u64>>,
}

impl Tally {
    fn record(&self, op: &'static str, outcome: Outcome) {
        *self.per_op.lock().unwrap().entry(op).or_default() += 1;
        match outcome {
            Outcome::Ok => {
                *self.ok_per_op.lock().unwrap().entry(op).or_default() += 1;
                self.ok.fetch_add(1, Ordering::Relaxed)
            }
            Outcome::Injected => self.injected.fetch_add(1, Ordering::Relaxed),
            Outcome::Unexpected(why) => {
                let mut u = self.unexpected.lock().unwrap();
                if u.len() < 20 {
                    u.push(format!("{op}: {why}"));
                }
                u.len() as u64
            }
        };
    }

    fn finished(&self) -> u64 {
        self.per_op.lock().unwrap().values().sum()
    }
}

struct World {
    gw: Gateway,
    alpha: MockUpstream,
    flappy: MockUpstream,
    _beta: MockUpstream,
}

fn config(alpha: &str, beta: &str, flappy: &str, ttl: &str) -> String {
    format!(
        "server: {{listen: 127.0.0.1:0}}\n\
         catalog: {{list_deadline: 2s}}\n\
         upstreams:\n\
         \x20 - {{id: alpha, url: {alpha}, list_ttl: {ttl}}}\n\
         \x20 - {{id: beta, url: {beta}}}\n\
         \x20 - {{id: flappy, url: {flappy}, timeout: 2s}}\n\
         \x20 - {{id: weather, command: [junction, demo, weather], list_ttl: 2s}}\n\
         request_state: {{secret_env: SOAK_KEY}}\n"
    )
}

async fn world() -> World {
    let alpha = MockUpstream::start(MockSpec::modern(
        "alpha",
        vec![
            MockTool::echo("echo"),
            MockTool::new("mrtr", obj(), Behavior::InputRequired),
            MockTool::new("progress", obj(), Behavior::Progress { steps: 3 }),
            MockTool::new("slow", obj(), Behavior::Slow(Duration::from_millis(300))),
        ],
    ))
    .await;
    let beta = MockUpstream::start(MockSpec::legacy("beta", vec![MockTool::echo("echo")])).await;
    let flappy =
        MockUpstream::start(MockSpec::modern("flappy", vec![MockTool::echo("echo")])).await;
    let key = [("SOAK_KEY", "soak-soak-soak-soak-soak-soak-soak-soak")];
    let gw = spawn_gateway_with_env(
        bin(),
        &config(&alpha.url, &beta.url, &flappy.url, "30s"),
        &key,
    )
    .await;
    World {
        gw,
        alpha,
        flappy,
        _beta: beta,
    }
}

fn echo_ok(r: &Value, upstream: &str) -> Outcome {
    if r["result"]["structuredContent"]["upstream"] == upstream {
        Outcome::Ok
    } else {
        Outcome::Unexpected(format!("wrong echo from {upstream}: {r}"))
    }
}

/// One operation of the mix, chosen by `n`.
async fn op(n: u64, url: &str, legacy: &TestClient) -> (&'static str, Outcome) {
    let modern = TestClient::modern(url).with_capabilities(json!({"elicitation": {}}));
    match n % 8 {
        0 => {
            let r = modern.request("tools/list", json!({})).await;
            let names: Vec<&str> = r.result()["tools"]
                .as_array()
                .map(|a| a.iter().filter_map(|t| t["name"].as_str()).collect())
                .unwrap_or_default();
            // flappy may be missing (it restarts); the others never are.
            let steady = ["alpha__echo", "beta__echo", "weather__add"];
            let outcome = if steady.iter().all(|s| names.contains(s)) {
                Outcome::Ok
            } else {
                Outcome::Unexpected(format!("catalog lost a steady upstream: {names:?}"))
            };
            ("tools/list", outcome)
        }
        1 => {
            let r = modern.call_tool("alpha__echo", json!({"n": n})).await;
            ("call alpha", echo_ok(&r.body, "alpha"))
        }
        2 => {
            let first = modern.call_tool("alpha__mrtr", json!({})).await;
            let state = first.result()["requestState"].clone();
            let responses = accept_all(first.result(), json!({"ok": true}));
            let retry = modern
                .request(
                    "tools/call",
                    json!({"name": "alpha__mrtr", "arguments": {}, "inputResponses": responses, "requestState": state}),
                )
                .await;
            let outcome = if retry.result()["resultType"] == "complete" {
                Outcome::Ok
            } else {
                Outcome::Unexpected(format!("MRTR retry: {}", retry.text()))
            };
            ("mrtr", outcome)
        }
        3 => {
            let params =
                json!({"name": "alpha__progress", "arguments": {}, "_meta": {"progressToken": n}});
            let events = modern
                .stream("tools/call", params, vec![])
                .await
                .collect(ANSWER_WITHIN)
                .await;
            let progress = events
                .iter()
                .filter(|e| e["method"] == "notifications/progress")
                .count();
            let outcome = match events.last() {
                Some(last) if progress == 3 && last["result"].is_object() => Outcome::Ok,
                _ => Outcome::Unexpected(format!("progress stream: {events:?}")),
            };
            ("stream", outcome)
        }
        4 => {
            // Opened, then dropped before the answer: the client's cancellation.
            let mut s = modern
                .stream(
                    "tools/call",
                    json!({"name": "alpha__slow", "arguments": {}}),
                    vec![],
                )
                .await;
            let _ = s.next(Duration::from_millis(20)).await;
            drop(s);
            ("stream dropped", Outcome::Ok)
        }
        5 => {
            let r = legacy.call_tool("beta__echo", json!({"n": n})).await;
            ("call beta (legacy)", echo_ok(&r.body, "beta"))
        }
        6 => {
            let r = modern
                .call_tool("weather__add", json!({"a": 2, "b": n as i64}))
                .await;
            let want = (2 + n).to_string();
            let outcome = if r.text().contains(&want) && r.error_code().is_none() {
                Outcome::Ok
            } else {
                Outcome::Unexpected(format!("stdio add: {}", r.text()))
            };
            ("call weather (stdio)", outcome)
        }
        _ => {
            let r = modern.call_tool("flappy__echo", json!({})).await;
            let outcome = match r.error_code() {
                None => echo_ok(&r.body, "flappy"),
                // The restart: unreachable, or its tool missing from a catalog
                // refreshed while it was down.
                Some(UNAVAILABLE) | Some(-32602) => Outcome::Injected,
                Some(c) => Outcome::Unexpected(format!("flappy code {c}: {}", r.text())),
            };
            ("call flappy (restarts)", outcome)
        }
    }
}

fn proc_figure(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next().and_then(|n| n.parse().ok()))
        .unwrap_or(0)
}

fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mixed_load_with_restarts_and_reloads_loses_nothing_and_stays_flat() {
    let secs = soak_secs();
    let w = world().await;
    let pid = w.gw.pid().expect("gateway pid");
    let url = w.gw.url("/mcp");
    let tally = Arc::new(Tally::default());
    let stop = Arc::new(AtomicBool::new(false));
    let counter = Arc::new(AtomicU64::new(0));

    let mut workers = Vec::new();
    for _ in 0..WORKERS {
        let (tally, stop, counter, url) =
            (tally.clone(), stop.clone(), counter.clone(), url.clone());
        workers.push(tokio::spawn(async move {
            let legacy = TestClient::legacy(&url, "2025-11-25");
            legacy.initialize().await;
            while !stop.load(Ordering::Relaxed) {
                let n = counter.fetch_add(1, Ordering::Relaxed);
                tally.started.fetch_add(1, Ordering::Relaxed);
                let (url2, legacy2) = (url.clone(), &legacy);
                let answered =
                    tokio::time::timeout(ANSWER_WITHIN, async move { op(n, &url2, legacy2).await })
                        .await;
                match answered {
                    Ok((name, outcome)) => tally.record(name, outcome),
                    Err(_) => {
                        tally.record("lost", Outcome::Unexpected(format!("op {n}: no answer")))
                    }
                }
            }
        }));
    }

    // Chaos: the flappy upstream restarts, the config is reloaded, while RSS and
    // descriptors are sampled once a second.
    let started = Instant::now();
    let warm_up = Duration::from_secs(secs / 4);
    let mut samples: Vec<(Duration, u64, usize)> = Vec::new();
    let mut tick = 0u64;
    let mut reloads = 0u64;
    let mut restarts = 0u64;
    while started.elapsed() < Duration::from_secs(secs) {
        tokio::time::sleep(Duration::from_secs(1)).await;
        tick += 1;
        if tick.is_multiple_of(3) {
            let down = (tick / 3) % 2 == 1;
            w.flappy.set_down(down).await;
            restarts += u64::from(!down);
        }
        if tick.is_multiple_of(5) {
            let ttl = if (tick / 5).is_multiple_of(2) {
                "30s"
            } else {
                "31s"
            };
            let yaml = config(&w.alpha.url, &w._beta.url, &w.flappy.url, ttl);
            // Written aside and renamed, as an editor or a ConfigMap swap does:
            // a half-written file is not what this soak is about.
            let aside = w.gw.dir().join("gateway.yaml.new");
            std::fs::write(&aside, yaml).unwrap();
            std::fs::rename(&aside, w.gw.config_path()).unwrap();
            reloads += 1;
        }
        samples.push((started.elapsed(), proc_figure(pid, "VmRSS:"), fd_count(pid)));
    }
    stop.store(true, Ordering::Relaxed);
    for h in workers {
        h.await
            .expect("a worker panicked (a request got no usable answer)");
    }
    w.flappy.set_down(false).await;
    // Let closed streams and pooled connections settle before the last look.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (end_rss, end_fds) = (proc_figure(pid, "VmRSS:"), fd_count(pid));

    let after: Vec<&(Duration, u64, usize)> = samples.iter().filter(|s| s.0 >= warm_up).collect();
    let warm = after
        .first()
        .copied()
        .copied()
        .unwrap_or((warm_up, end_rss, end_fds));
    let peak_rss = after.iter().map(|s| s.1).max().unwrap_or(end_rss);
    let started_n = tally.started.load(Ordering::Relaxed);
    let finished = tally.finished();
    let per_op = tally.per_op.lock().unwrap().clone();
    let unexpected = tally.unexpected.lock().unwrap().clone();
    println!(
        "soak: {secs}s, {finished} requests ({} ok, {} injected, {} unexpected), {restarts} upstream restarts, {reloads} reloads\n\
         soak: RSS after warm-up {} KiB, peak {} KiB, end {} KiB; fds after warm-up {}, end {}\n\
         soak: per operation {per_op:?}",
        tally.ok.load(Ordering::Relaxed),
        tally.injected.load(Ordering::Relaxed),
        unexpected.len(),
        warm.1,
        peak_rss,
        end_rss,
        warm.2,
        end_fds,
    );

    // The gateway's own account: warnings and errors may only be about the
    // upstream that was restarted on purpose.
    let log = w.gw.stderr();
    let unexplained: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("WARN") || l.contains("ERROR"))
        .filter(|l| !l.contains("flappy"))
        .collect();
    println!(
        "soak: {} unexplained warnings in the gateway log",
        unexplained.len()
    );
    for l in unexplained.iter().take(5) {
        println!("soak:   {l}");
    }
    assert_eq!(started_n, finished, "every request is accounted for");
    assert!(
        unexplained.is_empty(),
        "the gateway logged warnings about healthy upstreams"
    );
    assert!(unexpected.is_empty(), "unexpected errors: {unexpected:#?}");
    let ok_per_op = tally.ok_per_op.lock().unwrap().clone();
    for (name, n) in &per_op {
        assert!(
            ok_per_op.get(name).copied().unwrap_or(0) > 0 || *name == "lost",
            "{name}: {n} requests and not one succeeded (an upstream that restarts must come back)"
        );
    }
    assert!(restarts > 0 && reloads > 0, "the chaos ran");
    assert!(
        w.gw.stderr().contains("reload") || reloads == 0,
        "the gateway saw the reloads"
    );
    // Flat: after warm-up, memory may wobble with allocator noise but not grow
    // with the number of requests served.
    let rss_budget = warm.1 + (warm.1 / 4).max(4 * 1024);
    assert!(
        peak_rss <= rss_budget && end_rss <= rss_budget,
        "RSS grew after warm-up: {} KiB → peak {peak_rss} KiB, end {end_rss} KiB",
        warm.1
    );
    assert!(
        end_fds <= warm.2 + 8,
        "descriptors leaked: {} after warm-up, {end_fds} at the end",
        warm.2
    );
}
