//! Junction as a fleet: three replicas of the built binary sharing one
//! request-state key and one Redis (rate limits and the fleet bus), behind a
//! real HAProxy in plain round-robin HTTP mode (nothing sticky), with
//! upstreams of both eras; everything on 127.0.0.1. Each request may land on
//! any replica, and HAProxy's marker header says which one did, so every
//! scenario asserts that the replicas it needed really took part.
//!
//! Here: merged lists and their cursors, calls of both eras, a modern MRTR
//! retry on another replica, handshake-era sessions, one Redis rate limit
//! across replicas, `list_changed` to listeners on every replica, a replica
//! SIGKILLed and restarted under load. `fleet/shared.rs`: what the fleet bus
//! carries (DELETE, log levels, subscriptions). `fleet/relayed.rs`: a held
//! call's retry, an elicitation answer and a cancellation that land on a
//! replica other than the one running the call.
//!
//! Needs redis-server (scripts/redis.sh) and haproxy (scripts/haproxy.sh).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use junction_testkit::{accept_all, TestClient, TestResponse, REQUEST_STATE};
use serde_json::{json, Value};

#[path = "fleet/harness.rs"]
mod harness;
#[path = "fleet/load.rs"]
mod load;
#[path = "fleet/relayed.rs"]
mod relayed;
#[path = "fleet/shared.rs"]
mod shared;

use harness::{Fleet, CATALOG, MARKER, PAGE, REPLICAS, UNLIMITED, WAIT};

/// The replica that answered (HAProxy's marker); panics when HAProxy answered itself.
fn served_by(r: &TestResponse) -> String {
    r.header(MARKER)
        .unwrap_or_else(|| panic!("no replica answered: {} {}", r.status, r.text()))
        .to_owned()
}

fn all_replicas() -> BTreeSet<String> {
    Fleet::names().into_iter().collect()
}

fn tool_names(result: &Value) -> Vec<String> {
    result["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {result}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap_or("?").to_owned())
        .collect()
}

/// Walks `tools/list` page by page; the names and the replica of each page.
async fn walk(c: &TestClient) -> (Vec<String>, Vec<String>) {
    let (mut names, mut replicas) = (Vec::new(), Vec::new());
    let mut cursor: Option<String> = None;
    loop {
        let params = match &cursor {
            None => json!({}),
            Some(c) => json!({"cursor": c}),
        };
        let r = c.request("tools/list", params).await;
        assert_eq!(r.status, 200, "{}", r.text());
        replicas.push(served_by(&r));
        names.extend(tool_names(r.result()));
        match r.result()["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return (names, replicas),
        }
        assert!(replicas.len() <= CATALOG.len(), "paging does not end");
    }
}

#[tokio::test]
async fn lists_are_identical_and_cursors_open_on_any_replica() {
    let fleet = Fleet::start(UNLIMITED).await;
    let modern = fleet.modern();
    // The first page from each replica: the same tools in the same order.
    let mut pages = Vec::new();
    let mut seen = BTreeSet::new();
    for _ in 0..REPLICAS {
        let r = modern.request("tools/list", json!({})).await;
        assert_eq!(r.status, 200, "{}", r.text());
        seen.insert(served_by(&r));
        let mut result = r.result().clone();
        // Sealed with a fresh nonce each time: never the same bytes twice.
        assert!(result["nextCursor"].is_string(), "{result}");
        result.as_object_mut().unwrap().remove("nextCursor");
        pages.push(result);
    }
    assert_eq!(seen, all_replicas());
    assert_eq!(tool_names(&pages[0]), CATALOG[..PAGE]);
    assert!(
        pages.iter().all(|p| *p == pages[0]),
        "every replica serves the same first page: {pages:#?}"
    );

    // A cursor minted by one replica opens on the next one, in both eras.
    let legacy = fleet.legacy();
    assert_eq!(legacy.initialize().await.status, 200);
    for c in [&modern, &legacy] {
        let (names, replicas) = walk(c).await;
        assert_eq!(names, CATALOG, "pages of {replicas:?}");
        assert_eq!(replicas.len(), CATALOG.len().div_ceil(PAGE));
        assert!(
            replicas.windows(2).all(|w| w[0] != w[1]),
            "each page came from another replica than the one before: {replicas:?}"
        );
    }
    // The replicas' own access logs agree with HAProxy's marker (lines are
    // written off the request path, so they may trail the answers).
    for i in 0..REPLICAS {
        until(&format!("r{i} logs a request"), &fleet, || {
            fleet.access_lines(i) > 0
        })
        .await;
    }
}

#[tokio::test]
async fn calls_of_both_eras_and_an_mrtr_retry_on_another_replica() {
    let fleet = Fleet::start(UNLIMITED).await;
    let c = fleet
        .modern()
        .with_capabilities(json!({"elicitation": {"form": {}}}));
    let mut seen = BTreeSet::new();
    for n in 0..2 * REPLICAS as u64 {
        for upstream in ["alpha", "beta"] {
            let r = c
                .call_tool(&format!("{upstream}__echo"), json!({"n": n}))
                .await;
            seen.insert(served_by(&r));
            assert_eq!(
                r.result()["structuredContent"],
                json!({"upstream": upstream, "tool": "echo", "arguments": {"n": n}}),
                "{}",
                r.text()
            );
        }
        let r = c.call_tool("weather__add", json!({"a": n, "b": 40})).await;
        seen.insert(served_by(&r));
        assert_eq!(
            r.result()["structuredContent"]["sum"],
            n + 40,
            "{}",
            r.text()
        );
    }
    assert_eq!(seen, all_replicas());

    // A modern upstream's input_required: the sealed requestState opens on
    // whichever replica the retry lands on.
    let first = c.call_tool("alpha__mrtr", json!({"q": 1})).await;
    assert_eq!(
        first.result()["resultType"],
        "input_required",
        "{}",
        first.text()
    );
    let asked_on = served_by(&first);
    let retry_params = json!({"name": "alpha__mrtr", "arguments": {"q": 1},
        "inputResponses": accept_all(first.result(), json!({"ok": true})),
        "requestState": first.result()["requestState"]});
    let retry = c.request("tools/call", retry_params).await;
    assert_ne!(served_by(&retry), asked_on, "round robin moved the retry");
    assert_eq!(retry.result()["resultType"], "complete", "{}", retry.text());
    let calls = fleet.alpha.calls("mrtr");
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[1].body["params"]["requestState"], REQUEST_STATE);
}

#[tokio::test]
async fn handshake_era_sessions_are_served_by_every_replica() {
    let fleet = Fleet::start(UNLIMITED).await;
    let c = fleet.legacy();
    let init = c.initialize().await;
    assert_eq!(init.status, 200, "{}", init.text());
    let sid = c.session_id().expect("a session id");
    let mut seen = BTreeSet::from([served_by(&init)]);
    for n in 0..2 * REPLICAS as u64 {
        let r = c.request("ping", json!({})).await;
        seen.insert(served_by(&r));
        assert_eq!(r.result(), &json!({}), "{}", r.text());
        for upstream in ["alpha", "beta"] {
            let r = c
                .call_tool(&format!("{upstream}__echo"), json!({"n": n}))
                .await;
            seen.insert(served_by(&r));
            assert_eq!(
                r.result()["structuredContent"]["arguments"],
                json!({"n": n}),
                "{}",
                r.text()
            );
        }
        let r = c.call_tool("weather__add", json!({"a": n, "b": 1})).await;
        seen.insert(served_by(&r));
        assert_eq!(
            r.result()["structuredContent"]["sum"],
            n + 1,
            "{}",
            r.text()
        );
    }
    assert_eq!(seen, all_replicas(), "one session, every replica");
    assert_eq!(c.session_id(), Some(sid), "no replica minted a new session");
}

#[tokio::test]
async fn a_shared_rate_limit_holds_across_replicas() {
    const LIMIT: u64 = 100;
    // One bucket per tool, refilled once an hour: over this burst the
    // budget is the burst itself, whichever replica takes each call.
    let fleet = Fleet::start(&format!(
        "{{name: fleet, key: [tool], rate: {LIMIT}, per: 1h}}"
    ))
    .await;
    let tasks = 4;
    let per_task = LIMIT / 2;
    let handles: Vec<_> = (0..tasks)
        .map(|t| {
            let c = fleet.modern();
            tokio::spawn(async move {
                let mut out = Vec::new();
                for n in 0..per_task {
                    let r = c.call_tool("alpha__echo", json!({"t": t, "n": n})).await;
                    out.push((r.status, served_by(&r), r.text()));
                }
                out
            })
        })
        .collect();
    let mut accepted: Vec<String> = Vec::new();
    let mut refused: Vec<String> = Vec::new();
    for h in handles {
        for (status, replica, text) in h.await.unwrap() {
            match status {
                200 => accepted.push(replica),
                429 => refused.push(replica),
                _ => panic!("neither served nor rate limited: {status} {text}"),
            }
        }
    }
    let n = accepted.len() as u64;
    eprintln!(
        "rate limit {LIMIT}: {n} accepted, {} refused of {}",
        refused.len(),
        tasks * per_task
    );
    assert!(
        (LIMIT * 95 / 100..=LIMIT * 105 / 100).contains(&n),
        "{n} accepted across the fleet, want {LIMIT} ± 5%"
    );
    for name in Fleet::names() {
        assert!(accepted.contains(&name), "{name} accepted none");
        assert!(refused.contains(&name), "{name} refused none");
    }
    let mut counted = 0.0;
    for i in 0..REPLICAS {
        counted += fleet
            .replica(i)
            .metric("junction_rate_limited_total{rule=\"fleet\"}")
            .await
            .unwrap_or(0.0);
    }
    assert_eq!(
        counted as usize,
        refused.len(),
        "every refusal counted once"
    );
    assert_eq!(fleet.alpha.calls("echo").len(), accepted.len());
}

/// Waits (bounded by WAIT) until `f` holds.
async fn until(what: &str, fleet: &Fleet, f: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !f() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}\n{}",
            fleet.logs()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Two modern clients and one handshake-era session call without pause
/// while r1 is SIGKILLed, the others carry the load, and r1 starts again on
/// its port and rejoins. An answer is right, or HAProxy's own failure (its
/// 5xx, or the connection closed without an answer) that a client retries;
/// a wrong result or an error from a replica fails the test. The counts are
/// printed (`--nocapture`).
#[tokio::test]
async fn a_replica_killed_mid_load_gives_no_wrong_answer_and_rejoins() {
    let mut fleet = Fleet::start(UNLIMITED).await;
    let tally = Arc::new(load::Tally::default());
    let stop = Arc::new(AtomicBool::new(false));
    let url = fleet.lb("/mcp");
    let callers = vec![
        load::Caller::new(&url),
        load::Caller::new(&url),
        load::Caller::with_session(&url).await,
    ];
    let tasks = load::run(callers, tally.clone(), stop.clone());

    until("load before the kill", &fleet, || tally.answers() >= 60).await;
    fleet.kill(1).await;
    let at_kill = tally.answers();
    until("load while r1 is dead", &fleet, || {
        tally.answers() >= at_kill + 60
    })
    .await;
    let r1_before = tally.served_by("r1");
    fleet.restart(1).await;
    until("r1 serving load again", &fleet, || {
        tally.served_by("r1") > r1_before
    })
    .await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
    let wrong = tally.wrong.lock().unwrap().clone();
    let broken = tally.broken.lock().unwrap().clone();
    eprintln!(
        "kill and restart: {} correct (by replica {:?}), retryable from HAProxy {:?}, \
         {} broken connections {:?}, {} wrong",
        tally.correct.load(Ordering::Relaxed),
        tally.by_replica.lock().unwrap(),
        tally.retryable.lock().unwrap(),
        broken.len(),
        broken.iter().take(3).collect::<Vec<_>>(),
        wrong.len(),
    );
    assert!(wrong.is_empty(), "wrong answers: {wrong:#?}");

    // After the restart every answer is right, from every replica.
    let caller = load::Caller::new(&fleet.lb("/mcp"));
    let mut seen = BTreeSet::new();
    for n in 0..4 * REPLICAS as u64 {
        match caller.call(9, n).await {
            load::Answer::Correct(r) => {
                seen.insert(r);
            }
            other => panic!("after the restart: {other:?}\n{}", fleet.logs()),
        }
    }
    assert_eq!(seen, all_replicas());
}

#[tokio::test]
async fn list_changed_reaches_listeners_on_every_replica_and_every_list_is_fresh() {
    let fleet = Fleet::start(UNLIMITED).await;
    let c = fleet.modern();
    // Every replica caches the list (the mock's ttlMs is a minute).
    for _ in 0..REPLICAS {
        assert_eq!(c.request("tools/list", json!({})).await.status, 200);
    }
    let mut streams = Vec::new();
    for _ in 0..REPLICAS {
        let mut s = c
            .stream(
                "subscriptions/listen",
                json!({"notifications": {"toolsListChanged": true}}),
                vec![],
            )
            .await;
        assert_eq!(s.status, 200);
        let replica = s.header(MARKER).expect("a replica").to_owned();
        let ack = s.next(WAIT).await.expect("the acknowledgement");
        assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
        streams.push((replica, s));
    }
    let on: BTreeSet<String> = streams.iter().map(|(r, _)| r.clone()).collect();
    assert_eq!(on, all_replicas(), "one listener on each replica");

    let mut tools = harness::mock_tools("mrtr");
    tools.push(junction_testkit::MockTool::echo("added"));
    fleet.alpha.set_tools(tools);
    for (replica, s) in &mut streams {
        let m = s.next(WAIT).await;
        assert_eq!(
            m.as_ref().map(|m| m["method"].clone()),
            Some(json!("notifications/tools/list_changed")),
            "listener on {replica}: {m:?}"
        );
    }
    let mut fresh = BTreeSet::new();
    for _ in 0..REPLICAS {
        let (names, replicas) = walk(&c).await;
        assert!(
            names.contains(&"alpha__added".to_owned()),
            "walk over {replicas:?} lists the new tool: {names:?}"
        );
        fresh.extend(replicas);
    }
    assert_eq!(fresh, all_replicas());
}
