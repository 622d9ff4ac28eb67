//! Local GCRA buckets: exact counts under concurrency, refill on a paused
//! clock, key dimensions, method filters, several rules.

use std::sync::Arc;
use std::time::Duration;

use junction_config::{FailureMode, RateKey, RateLimitBackend, RateLimitConfig, RateLimitRule};
use junction_policy::{RateKeyParts, RateLimited, RateLimiter};

pub fn rule(name: &str, key: &[RateKey], rate: u64, per: Duration, burst: u64) -> RateLimitRule {
    RateLimitRule {
        name: name.into(),
        key: key.to_vec(),
        rate,
        per,
        burst,
        methods: vec!["tools/call".into()],
    }
}

async fn local(rules: Vec<RateLimitRule>) -> RateLimiter {
    RateLimiter::new(&RateLimitConfig {
        backend: RateLimitBackend::Local,
        failure_mode: FailureMode::Open,
        rules,
    })
    .await
    .expect("limiter")
}

fn call<'a>(principal: &'a str, tool: &'a str) -> RateKeyParts<'a> {
    RateKeyParts {
        method: "tools/call",
        principal,
        upstream: "crm",
        tool,
        route: "/mcp",
        client_ip: "127.0.0.1",
    }
}

const HOUR: Duration = Duration::from_secs(3600);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn exact_count_under_concurrent_load() {
    let rl = Arc::new(local(vec![rule("burst50", &[RateKey::Principal], 1, HOUR, 50)]).await);
    let tasks: Vec<_> = (0..200)
        .map(|_| {
            let rl = rl.clone();
            tokio::spawn(async move { rl.check(&call("alice", "crm__get")).await })
        })
        .collect();
    let mut passed = 0;
    for t in tasks {
        match t.await.expect("join") {
            Ok(()) => passed += 1,
            Err(RateLimited { rule, retry_after }) => {
                assert_eq!(rule, "burst50");
                assert!(retry_after > Duration::ZERO);
            }
        }
    }
    assert_eq!(passed, 50);
}

#[tokio::test(start_paused = true)]
async fn refill_follows_the_rate_and_caps_at_burst() {
    let rl = local(vec![rule("r", &[], 10, Duration::from_secs(1), 5)]).await;
    for _ in 0..5 {
        rl.check(&call("a", "t")).await.expect("burst");
    }
    let err = rl.check(&call("a", "t")).await.expect_err("empty");
    assert_eq!(err.retry_after, Duration::from_millis(100));
    tokio::time::advance(Duration::from_millis(100)).await;
    rl.check(&call("a", "t")).await.expect("one token back");
    assert!(rl.check(&call("a", "t")).await.is_err());
    // A long idle period refills to the burst, not beyond.
    tokio::time::advance(Duration::from_secs(60)).await;
    for _ in 0..5 {
        rl.check(&call("a", "t")).await.expect("refilled");
    }
    assert!(rl.check(&call("a", "t")).await.is_err());
}

#[tokio::test(start_paused = true)]
async fn retry_after_is_exact_for_slow_rates() {
    // 3 per minute: one token every 20 s.
    let rl = local(vec![rule("slow", &[], 3, Duration::from_secs(60), 1)]).await;
    rl.check(&call("a", "t")).await.expect("first");
    tokio::time::advance(Duration::from_secs(5)).await;
    let err = rl.check(&call("a", "t")).await.expect_err("limited");
    assert_eq!(err.retry_after, Duration::from_secs(15));
}

#[tokio::test]
async fn buckets_are_per_key_value() {
    let rl = local(vec![rule(
        "per-user-tool",
        &[RateKey::Principal, RateKey::Tool],
        1,
        HOUR,
        2,
    )])
    .await;
    for _ in 0..2 {
        rl.check(&call("alice", "crm__get"))
            .await
            .expect("alice get");
    }
    assert!(rl.check(&call("alice", "crm__get")).await.is_err());
    rl.check(&call("alice", "crm__put"))
        .await
        .expect("other tool");
    rl.check(&call("bob", "crm__get"))
        .await
        .expect("other user");
    // Dimension values never run together: ("ab","c") is not ("a","bc").
    let rl = local(vec![rule(
        "pair",
        &[RateKey::Principal, RateKey::Tool],
        1,
        HOUR,
        1,
    )])
    .await;
    rl.check(&call("ab", "c")).await.expect("ab/c");
    rl.check(&call("a", "bc"))
        .await
        .expect("a/bc is another bucket");
}

#[tokio::test]
async fn every_dimension_splits_buckets() {
    let dims = [
        RateKey::Principal,
        RateKey::Upstream,
        RateKey::Tool,
        RateKey::Route,
        RateKey::ClientIp,
    ];
    for dim in dims {
        let rl = local(vec![rule("d", &[dim], 1, HOUR, 1)]).await;
        let base = call("alice", "crm__get");
        rl.check(&base).await.expect("first");
        assert!(
            rl.check(&base).await.is_err(),
            "{dim:?}: same value shares the bucket"
        );
        let mut other = base;
        match dim {
            RateKey::Principal => other.principal = "bob",
            RateKey::Upstream => other.upstream = "files",
            RateKey::Tool => other.tool = "crm__put",
            RateKey::Route => other.route = "/other",
            RateKey::ClientIp => other.client_ip = "10.0.0.2",
        }
        rl.check(&other)
            .await
            .unwrap_or_else(|_| panic!("{dim:?}: another value, another bucket"));
    }
}

#[tokio::test]
async fn only_configured_methods_are_limited() {
    let mut r = rule("calls", &[], 1, HOUR, 1);
    r.methods = vec!["tools/call".into(), "resources/read".into()];
    let rl = local(vec![r, {
        let mut all = rule("all", &[RateKey::Principal], 1, HOUR, 2);
        all.methods = vec!["*".into()];
        all
    }])
    .await;
    let mut list = call("alice", "");
    list.method = "tools/list";
    assert!(rl.applies_to("tools/list"), "the * rule applies");
    rl.check(&call("alice", "t")).await.expect("call 1");
    assert_eq!(
        rl.check(&call("alice", "t")).await.expect_err("calls").rule,
        "calls"
    );
    // `all` has given 1 of 2 (the rejected call stopped at `calls`, before
    // `all`); tools/list is not drained by `calls`, only by `all`.
    rl.check(&list).await.expect("list");
    assert_eq!(rl.check(&list).await.expect_err("all").rule, "all");
}

#[tokio::test]
async fn first_rejecting_rule_is_reported() {
    let rl = local(vec![
        rule("global", &[], 1, HOUR, 100),
        rule("per-user", &[RateKey::Principal], 1, HOUR, 2),
    ])
    .await;
    rl.check(&call("alice", "t")).await.expect("1");
    rl.check(&call("alice", "t")).await.expect("2");
    let err = rl.check(&call("alice", "t")).await.expect_err("3");
    assert_eq!(err.rule, "per-user");
    rl.check(&call("bob", "t")).await.expect("bob");
    assert_eq!(rl.backend_failures(), 0);
}

#[tokio::test]
async fn the_limiter_says_whether_a_rule_keys_on_the_client_address() {
    let by_principal = local(vec![rule("p", &[RateKey::Principal], 1, HOUR, 1)]).await;
    assert!(!by_principal.keys_on_client_ip());
    let mixed = local(vec![
        rule("p", &[RateKey::Principal], 1, HOUR, 1),
        rule("ip", &[RateKey::Tool, RateKey::ClientIp], 1, HOUR, 1),
    ])
    .await;
    assert!(mixed.keys_on_client_ip());
}

#[tokio::test(start_paused = true)]
async fn live_buckets_counts_each_rules_buckets_that_are_not_full() {
    let rl = local(vec![
        rule(
            "per-user",
            &[RateKey::Principal],
            1,
            Duration::from_secs(1),
            5,
        ),
        rule("all", &[], 1, Duration::from_secs(1), 100),
    ])
    .await;
    assert_eq!(rl.live_buckets(), Some(vec![0, 0]));
    for who in ["alice", "bob", "carol"] {
        rl.check(&call(who, "t")).await.expect("within burst");
    }
    assert_eq!(rl.live_buckets(), Some(vec![3, 1]));
    tokio::time::advance(Duration::from_secs(5)).await;
    assert_eq!(rl.live_buckets(), Some(vec![0, 0]), "refilled: full again");
}
