//! The fault matrix (issue 6): the built gateway in front of one healthy mock
//! upstream and faulty upstreams of every kind. Every request gets the right
//! answer or the right gateway error (DESIGN §5), the healthy upstream keeps
//! working throughout, a crashing stdio server is respawned, and the gateway
//! never dies or panics.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use futures_util::future::join_all;
use junction_testkit::{
    faulty_stdio_script, spawn_gateway, Fault, FaultyUpstream, Gateway, MockSpec, MockTool,
    MockUpstream, TestClient, TestResponse,
};
use serde_json::{json, Value};

const UNAVAILABLE: i64 = -31001;
const TIMEOUT: i64 = -31002;
const PROTOCOL: i64 = -31003;

fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_junction"))
}

/// (id, fault, JSON-RPC codes a call may get). A timeout may become
/// "unavailable" once the breaker has opened on repeated timeouts.
fn http_faults() -> Vec<(&'static str, Fault, &'static [i64])> {
    vec![
        ("refused", Fault::RefuseConnections, &[UNAVAILABLE]),
        ("hang", Fault::AcceptThenHang, &[TIMEOUT, UNAVAILABLE]),
        (
            "slow",
            Fault::SlowBytes(Duration::from_millis(200)),
            &[TIMEOUT, UNAVAILABLE],
        ),
        ("midsse", Fault::CloseMidSse, &[PROTOCOL]),
        ("badjson", Fault::InvalidJson, &[PROTOCOL]),
        ("wrongid", Fault::WrongId, &[PROTOCOL]),
        ("huge", Fault::HugeBody(17 * 1024 * 1024), &[PROTOCOL]),
        ("s500", Fault::Status(500), &[UNAVAILABLE]),
        ("s502", Fault::Status(502), &[UNAVAILABLE]),
        ("s503", Fault::Status(503), &[UNAVAILABLE]),
        ("s400", Fault::Status(400), &[PROTOCOL]),
        (
            "legacy404",
            Fault::LegacyExpiredSession404,
            &[PROTOCOL, UNAVAILABLE],
        ),
    ]
}

async fn healthy() -> MockUpstream {
    MockUpstream::start(MockSpec::modern("good", vec![MockTool::echo("echo")])).await
}

fn upstream_yaml(id: &str, url: &str) -> String {
    format!("  - id: {id}\n    url: {url}\n    timeout: 2s\n")
}

fn stdio_yaml(id: &str, args: &[&str]) -> String {
    let script = faulty_stdio_script();
    let mut cmd = vec!["python3".to_string(), script.to_string_lossy().into_owned()];
    cmd.extend(args.iter().map(|a| a.to_string()));
    let cmd = serde_json::to_string(&cmd).unwrap_or_default();
    format!("  - id: {id}\n    command: {cmd}\n    timeout: 2s\n")
}

async fn gateway(upstreams: &str) -> Gateway {
    let yaml = format!(
        "server:\n  listen: 127.0.0.1:0\ncatalog:\n  list_deadline: 3s\nupstreams:\n{upstreams}"
    );
    spawn_gateway(bin(), &yaml).await
}

fn degraded(list: &TestResponse) -> Vec<String> {
    list.result()["_meta"]["dev.junction/degraded"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn tool_names(list: &TestResponse) -> Vec<String> {
    list.result()["tools"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|t| t["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// The gateway is still running and never logged a panic.
fn assert_alive(gw: &mut Gateway) {
    assert!(
        gw.try_exit_status().is_none(),
        "gateway exited\n{}",
        gw.stderr()
    );
    assert!(!gw.stderr().contains("panicked"), "{}", gw.stderr());
}

async fn good_call_works(c: &TestClient, round: usize) {
    let r = c.call_tool("good__echo", json!({"round": round})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.result()["structuredContent"]["arguments"]["round"],
        round,
        "{}",
        r.text()
    );
}

/// Check one faulty answer: HTTP 200, a gateway error with an allowed code,
/// naming the upstream. Returns a mismatch description, if any.
fn check_gateway_error(
    what: &str,
    r: &TestResponse,
    codes: &[i64],
    upstream: &str,
) -> Option<String> {
    let code = r.error_code();
    let origin = r.body.pointer("/error/data/origin").and_then(Value::as_str);
    let named = r
        .body
        .pointer("/error/data/upstream")
        .and_then(Value::as_str);
    let ok = r.status == 200
        && code.is_some_and(|c| codes.contains(&c))
        && origin == Some("gateway")
        && named == Some(upstream);
    (!ok).then(|| {
        format!(
            "{what}: want HTTP 200 + one of {codes:?} from gateway naming {upstream}, got HTTP {} {}",
            r.status,
            r.text().chars().take(300).collect::<String>()
        )
    })
}

#[tokio::test]
async fn list_faults_leave_the_healthy_upstream_listed() {
    let good = healthy().await;
    let mut faulty = Vec::new();
    let mut yaml = upstream_yaml("good", &good.url);
    for (id, fault, _) in http_faults() {
        let f = FaultyUpstream::start(fault).await;
        yaml.push_str(&upstream_yaml(id, &f.url));
        faulty.push((id, f));
    }
    let mut gw = gateway(&yaml).await;
    let c = TestClient::modern(&gw.url("/mcp"));
    for round in 0..2 {
        let list = c.request("tools/list", json!({})).await;
        assert_eq!(list.status, 200, "{}", list.text());
        assert_eq!(
            tool_names(&list),
            vec!["good__echo"],
            "only the healthy upstream's tools: {}",
            list.text()
        );
        let mut named = degraded(&list);
        named.sort();
        let mut want: Vec<String> = faulty.iter().map(|(id, _)| id.to_string()).collect();
        want.sort();
        assert_eq!(named, want, "every faulty upstream is named degraded");
        good_call_works(&c, round).await;
        // A tool of an upstream whose list never came is unavailable, not unknown.
        for (id, _) in &faulty {
            let r = c.call_tool(&format!("{id}__echo"), json!({})).await;
            if let Some(m) = check_gateway_error(id, &r, &[UNAVAILABLE], id) {
                panic!("{m}");
            }
        }
    }
    for (id, f) in &faulty {
        assert!(
            f.requests_for("tools/call").is_empty(),
            "{id}: a call was routed to an upstream with no list"
        );
    }
    assert_alive(&mut gw);
    gw.stop().await;
}

#[tokio::test]
async fn call_faults_get_the_right_gateway_error_and_spare_the_healthy_upstream() {
    let good = healthy().await;
    let mut faulty = Vec::new();
    let mut yaml = upstream_yaml("good", &good.url);
    for (id, fault, codes) in http_faults() {
        let f = FaultyUpstream::start(fault)
            .await
            .on_methods(&["tools/call"]);
        yaml.push_str(&upstream_yaml(id, &f.url));
        faulty.push((id, f, codes));
    }
    let mut gw = gateway(&yaml).await;
    let c = TestClient::modern(&gw.url("/mcp"));
    let list = c.request("tools/list", json!({})).await;
    let names = tool_names(&list);
    for (id, _, _) in &faulty {
        if *id != "refused" {
            assert!(
                names.contains(&format!("{id}__echo")),
                "{id}: list is healthy, so its tool is listed: {}",
                list.text()
            );
        }
    }

    let pid = gw.pid().expect("gateway pid");
    let mut fds_after_round = Vec::new();
    let mut mismatches = Vec::new();
    for round in 0..3 {
        // All faults in flight at once, with healthy calls alongside.
        let faulty_calls = join_all(faulty.iter().map(|(id, _, _)| {
            let c = &c;
            async move { (*id, c.call_tool(&format!("{id}__echo"), json!({})).await) }
        }));
        let good_calls = join_all((0..5).map(|i| good_call_works(&c, round * 10 + i)));
        let (results, _) = tokio::join!(faulty_calls, good_calls);
        for ((id, r), (_, _, codes)) in results.iter().zip(&faulty) {
            mismatches.extend(check_gateway_error(
                &format!("round {round} {id}"),
                r,
                codes,
                id,
            ));
        }
        let list = c.request("tools/list", json!({})).await;
        assert!(
            tool_names(&list).contains(&"good__echo".to_string()),
            "healthy tools stay listed: {}",
            list.text()
        );
        fds_after_round.push(open_fds(pid));
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
    // Pooled connections may stay open, and each of the gateway's connection
    // threads keeps its own (one per CPU, or `TOKIO_WORKER_THREADS`), so up
    // to one more per upstream and extra thread appears while the threads
    // first call each upstream; but faults must not leak a descriptor per
    // failed call (12 a round here).
    // The gateway inherits this process's environment, so this is its count.
    let threads = junction_upstream::home::threads();
    let pool_sets = (threads - 1) * (faulty.len() + 1);
    assert!(
        fds_after_round[2] <= fds_after_round[0] + 4 + pool_sets,
        "descriptors grow with faulty calls: {fds_after_round:?} ({threads} threads)"
    );
    // Only the call went out; a call that may have reached the upstream is never retried.
    for (id, f, _) in &faulty {
        if *id != "refused" && *id != "legacy404" {
            assert_eq!(
                f.requests_for("tools/call").len(),
                3,
                "{id}: one upstream call per client call"
            );
        }
    }
    assert_alive(&mut gw);
    gw.stop().await;
}

#[tokio::test]
async fn the_breaker_opens_fails_fast_and_recovers_through_a_probe() {
    let good = healthy().await;
    let flaky = FaultyUpstream::start(Fault::Status(503))
        .await
        .on_methods(&["tools/call"]);
    let yaml = upstream_yaml("good", &good.url) + &upstream_yaml("flaky", &flaky.url);
    let mut gw = gateway(&yaml).await;
    let c = TestClient::modern(&gw.url("/mcp"));
    let mut messages = Vec::new();
    for _ in 0..8 {
        let r = c.call_tool("flaky__echo", json!({})).await;
        assert_eq!(r.error_code(), Some(UNAVAILABLE), "{}", r.text());
        messages.push(
            r.error()
                .map(|e| e["message"].to_string())
                .unwrap_or_default(),
        );
    }
    assert_eq!(
        flaky.requests_for("tools/call").len(),
        5,
        "5 consecutive failures open the breaker; later calls fail fast: {messages:#?}"
    );
    assert!(messages[7].contains("circuit open"), "{messages:#?}");
    good_call_works(&c, 1).await;

    flaky.set_fault(None);
    // The cool-down is 10 s; after it one probe goes through and closes the breaker.
    let mut recovered = None;
    for _ in 0..60 {
        let r = c.call_tool("flaky__echo", json!({"after": "heal"})).await;
        if r.error().is_none() {
            recovered = Some(r);
            break;
        }
        assert_eq!(r.error_code(), Some(UNAVAILABLE), "{}", r.text());
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let r = recovered.unwrap_or_else(|| panic!("breaker never closed\n{}", gw.stderr()));
    assert_eq!(
        r.result()["structuredContent"]["arguments"]["after"],
        "heal"
    );
    let again = c.call_tool("flaky__echo", json!({})).await;
    assert!(again.error().is_none(), "closed again: {}", again.text());
    assert_alive(&mut gw);
    gw.stop().await;
}

#[tokio::test]
async fn stdio_faults_crash_respawn_garbage_and_stderr_floods() {
    let good = healthy().await;
    let yaml = upstream_yaml("good", &good.url)
        + &stdio_yaml("crash", &["crash-after", "3"])
        + &stdio_yaml("garbage", &["garbage"])
        + &stdio_yaml("flood", &["flood-stderr"]);
    let mut gw = gateway(&yaml).await;
    let c = TestClient::modern(&gw.url("/mcp"));
    let list = c.request("tools/list", json!({})).await;
    let names = tool_names(&list);
    for t in ["crash__pid", "garbage__echo", "flood__echo", "good__echo"] {
        assert!(names.contains(&t.to_string()), "{t}: {}", list.text());
    }

    let mut pids = Vec::new();
    let mut mismatches = Vec::new();
    for i in 0..8 {
        let r = c.call_tool("crash__pid", json!({})).await;
        match r.result()["structuredContent"]["pid"].as_u64() {
            Some(pid) => pids.push(pid),
            None => mismatches.extend(check_gateway_error(
                &format!("crash call {i}"),
                &r,
                &[UNAVAILABLE],
                "crash",
            )),
        }
        good_call_works(&c, i).await;
    }
    pids.dedup();
    assert!(
        pids.len() >= 2,
        "the crashed child is respawned and answers again: pids {pids:?}\n{}",
        mismatches.join("\n")
    );
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));

    for i in 0..3 {
        let r = c.call_tool("garbage__echo", json!({"i": i})).await;
        assert_eq!(
            r.result()["structuredContent"]["arguments"]["i"],
            i,
            "junk lines are skipped: {}",
            r.text()
        );
        let r = c.call_tool("flood__echo", json!({"i": i})).await;
        assert_eq!(
            r.result()["structuredContent"]["arguments"]["i"],
            i,
            "a stderr flood must not stall the child: {}",
            r.text()
        );
    }
    let r = c.call_tool("garbage__only_garbage", json!({})).await;
    if let Some(m) = check_gateway_error("only_garbage", &r, &[TIMEOUT], "garbage") {
        panic!("{m}");
    }
    good_call_works(&c, 99).await;
    assert_alive(&mut gw);
    gw.stop().await;
}

#[tokio::test]
async fn the_response_size_limit_is_per_upstream() {
    // The same 300 KB answer from two upstreams: one allows 64 KiB, one the default.
    let small = FaultyUpstream::start(Fault::HugeBody(300_000))
        .await
        .on_methods(&["tools/call"]);
    let roomy = FaultyUpstream::start(Fault::HugeBody(300_000))
        .await
        .on_methods(&["tools/call"]);
    let yaml = format!(
        "{}    max_response_bytes: 64KiB\n{}",
        upstream_yaml("small", &small.url),
        upstream_yaml("roomy", &roomy.url)
    );
    let mut gw = gateway(&yaml).await;
    let c = TestClient::modern(&gw.url("/mcp"));
    let refused = c.call_tool("small__echo", json!({})).await;
    assert_eq!(refused.error_code(), Some(PROTOCOL), "{}", refused.text());
    assert!(
        refused.text().contains("max_response_bytes"),
        "the error names the limit: {}",
        refused.text()
    );
    let fine = c.call_tool("roomy__echo", json!({})).await;
    assert!(
        fine.error_code().is_none(),
        "{}",
        &fine.text()[..200.min(fine.text().len())]
    );
    assert!(fine.text().len() > 300_000);
    assert_alive(&mut gw);
}

async fn scrape(gw: &Gateway) -> String {
    let metrics = TestClient::modern(&gw.url("/metrics"))
        .raw("GET", vec![], vec![])
        .await;
    String::from_utf8_lossy(&metrics.raw).into_owned()
}

fn page_series(method: &str, outcome: &str) -> String {
    format!(
        "junction_upstream_requests_total{{method=\"{method}\",outcome=\"{outcome}\",upstream=\"hang\"}}"
    )
}

/// A list page the list deadline cuts short is counted in the upstream's
/// series as `upstream_timeout`, and one whose client left first as
/// `cancelled`; both used to be dropped uncounted, so an upstream whose lists
/// always time out showed no failed list request at all.
#[tokio::test]
async fn list_pages_cut_short_are_counted_with_the_reason() {
    let hang = FaultyUpstream::start(Fault::AcceptThenHang)
        .await
        .on_methods(&["tools/list", "prompts/list", "resources/list"]);
    let yaml = |deadline: &str| {
        format!(
            "server:\n  listen: 127.0.0.1:0\ncatalog:\n  list_deadline: {deadline}\n\
             upstreams:\n  - id: hang\n    url: {}\n    timeout: 60s\n",
            hang.url
        )
    };

    let gw = spawn_gateway(bin(), &yaml("300ms")).await;
    let c = TestClient::modern(&gw.url("/mcp"));
    for method in ["tools/list", "prompts/list"] {
        let list = c.request(method, json!({})).await;
        assert_eq!(list.status, 200, "{}", list.text());
        assert_eq!(degraded(&list), ["hang"], "{method}: {}", list.text());
    }
    let scraped = scrape(&gw).await;
    for method in ["tools/list", "prompts/list"] {
        let timed_out =
            junction_testkit::metric(&scraped, &page_series(method, "upstream_timeout"));
        assert!(timed_out >= Some(1.0), "{method}: {timed_out:?}\n{scraped}");
        assert_eq!(
            junction_testkit::metric(&scraped, &page_series(method, "cancelled")),
            None,
            "{scraped}"
        );
    }
    gw.stop().await;

    // A deadline far off: the client gives up first, and the fan-out it
    // started (resources/list fetches in the request itself) is dropped.
    let gw = spawn_gateway(bin(), &yaml("60s")).await;
    let c = TestClient::modern(&gw.url("/mcp"));
    let list = c.request("resources/list", json!({}));
    assert!(tokio::time::timeout(Duration::from_millis(300), list)
        .await
        .is_err());
    let series = page_series("resources/list", "cancelled");
    let mut counted = None;
    for _ in 0..100 {
        counted = junction_testkit::metric(&scrape(&gw).await, &series);
        if counted.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(counted, Some(1.0), "{series}");
    assert!(!hang.requests_for("resources/list").is_empty());
    gw.stop().await;
}
