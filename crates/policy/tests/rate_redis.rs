//! Redis-backed buckets against a real redis-server (scripts/redis.sh installs
//! it; these tests fail, never skip, without it): one combined limit across
//! limiter instances, Redis-clock refill, and both failure modes when Redis
//! dies mid-test.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::RedisServer;
use junction_config::{FailureMode, RateKey, RateLimitBackend, RateLimitConfig, RateLimitRule};
use junction_policy::{RateKeyParts, RateLimiter};

fn rule(name: &str, rate: u64, per: Duration, burst: u64) -> RateLimitRule {
    RateLimitRule {
        name: name.into(),
        key: vec![RateKey::Principal, RateKey::Tool],
        rate,
        per,
        burst,
        methods: vec!["tools/call".into()],
    }
}

async fn redis_limiter(url: &str, mode: FailureMode, rules: Vec<RateLimitRule>) -> RateLimiter {
    RateLimiter::new(&RateLimitConfig {
        backend: RateLimitBackend::Redis { url: url.into() },
        failure_mode: mode,
        rules,
    })
    .await
    .expect("limiter")
}

fn call(principal: &str) -> RateKeyParts<'_> {
    RateKeyParts {
        method: "tools/call",
        principal,
        upstream: "crm",
        tool: "crm__get",
        route: "/mcp",
        client_ip: "127.0.0.1",
    }
}

const HOUR: Duration = Duration::from_secs(3600);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_instances_share_one_limit() {
    let redis = RedisServer::start();
    let rules = || vec![rule("shared", 1, HOUR, 30)];
    let a = Arc::new(redis_limiter(&redis.url(), FailureMode::Closed, rules()).await);
    let b = Arc::new(redis_limiter(&redis.url(), FailureMode::Closed, rules()).await);
    let tasks: Vec<_> = (0..100)
        .map(|i| {
            let rl = if i % 2 == 0 { a.clone() } else { b.clone() };
            tokio::spawn(async move { rl.check(&call("alice")).await })
        })
        .collect();
    let mut passed = 0;
    for t in tasks {
        match t.await.expect("join") {
            Ok(()) => passed += 1,
            Err(e) => {
                assert_eq!(e.rule, "shared");
                assert!(e.retry_after > Duration::from_secs(60), "{e:?}");
            }
        }
    }
    assert_eq!(passed, 30, "one combined bucket across both instances");
    assert_eq!(a.backend_failures() + b.backend_failures(), 0);
    a.check(&call("bob"))
        .await
        .expect("another principal has its own bucket");
}

#[tokio::test]
async fn refill_on_redis_time() {
    let redis = RedisServer::start();
    let rl = redis_limiter(
        &redis.url(),
        FailureMode::Closed,
        vec![rule("tenps", 10, Duration::from_secs(1), 1)],
    )
    .await;
    rl.check(&call("alice")).await.expect("first");
    let err = rl
        .check(&call("alice"))
        .await
        .expect_err("second is too soon");
    assert!(
        err.retry_after > Duration::ZERO && err.retry_after <= Duration::from_millis(100),
        "{err:?}"
    );
    tokio::time::sleep(err.retry_after + Duration::from_millis(50)).await;
    rl.check(&call("alice"))
        .await
        .expect("refilled after retry_after");
}

#[tokio::test]
async fn bucket_keys_expire_once_full() {
    let redis = RedisServer::start();
    let rl = redis_limiter(
        &redis.url(),
        FailureMode::Closed,
        vec![rule("exp", 1, HOUR, 5)],
    )
    .await;
    rl.check(&call("alice")).await.expect("ok");
    let client = redis::Client::open(redis.url()).expect("client");
    let mut c = client
        .get_multiplexed_async_connection()
        .await
        .expect("conn");
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("junction:rl:exp:*")
        .query_async(&mut c)
        .await
        .expect("keys");
    assert_eq!(keys.len(), 1, "{keys:?}");
    let ttl_ms: i64 = redis::cmd("PTTL")
        .arg(&keys[0])
        .query_async(&mut c)
        .await
        .expect("pttl");
    // One token of a 1/hour rule is an hour of state, plus a second of margin.
    assert!(ttl_ms > 3_500_000 && ttl_ms <= 3_601_000, "{ttl_ms}");
}

#[tokio::test]
async fn redis_killed_mid_test_follows_the_failure_mode() {
    let mut redis = RedisServer::start();
    let rules = || vec![rule("r", 1, HOUR, 100)];
    let open = redis_limiter(&redis.url(), FailureMode::Open, rules()).await;
    let closed = redis_limiter(&redis.url(), FailureMode::Closed, rules()).await;
    open.check(&call("alice")).await.expect("open, redis up");
    closed
        .check(&call("alice"))
        .await
        .expect("closed, redis up");
    assert_eq!(open.backend_failures(), 0);

    redis.kill();
    for _ in 0..3 {
        open.check(&call("alice"))
            .await
            .expect("fail-open lets requests through");
        let err = closed
            .check(&call("alice"))
            .await
            .expect_err("fail-closed rejects");
        assert_eq!(err.rule, "r");
        assert_eq!(err.retry_after, Duration::from_secs(1));
    }
    assert!(open.backend_failures() >= 3);
    assert!(closed.backend_failures() >= 3);

    // Redis comes back on the same port: checks reach it again.
    let redis = RedisServer::start_on(redis.port);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let before = closed.backend_failures();
        if closed.check(&call("alice")).await.is_ok() && closed.backend_failures() == before {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never reconnected to Redis"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    drop(redis);
}

#[tokio::test]
async fn redis_down_at_startup_is_not_fatal() {
    let port = common::free_port();
    let rl = redis_limiter(
        &format!("redis://127.0.0.1:{port}/"),
        FailureMode::Open,
        vec![rule("r", 1, HOUR, 1)],
    )
    .await;
    rl.check(&call("alice")).await.expect("fail-open");
    rl.check(&call("alice"))
        .await
        .expect("fail-open again, no limit without Redis");
    assert!(rl.backend_failures() >= 2);
}
