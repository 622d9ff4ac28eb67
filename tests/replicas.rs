//! What a handshake-era client changes on one replica reaches the others
//! through the fleet bus (`fleet.redis_url`, a real redis-server): a session
//! ended by DELETE, a session's log level, its `resources/subscribe` set
//! feeding a GET stream open on another replica; a replica started later
//! catches up, and changes made while Redis is down arrive once it is back.
//! Each test runs two or three `junction` processes sharing one sealing key.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use junction_testkit::mock::Behavior;
use junction_testkit::redis::RedisServer;
use junction_testkit::sse::GetStream;
use junction_testkit::{metric, spawn_gateway_with_env, Gateway, MockSpec, MockTool, MockUpstream};
use junction_testkit::{TestClient, TestStream};
use serde_json::{json, Value};

/// Upper bound for a change to reach another replica (a lost change fails,
/// a slow bus does not).
const WAIT: Duration = Duration::from_secs(10);
const KEY: &str = "replicas-test-key-0123456789abcdef0123456789";
const VERSION: &str = "2025-11-25";

fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_junction"))
}

struct Fleet {
    legacy: MockUpstream,
    redis: RedisServer,
    replicas: Vec<Gateway>,
}

impl Fleet {
    async fn start(n: usize) -> Fleet {
        let legacy = MockUpstream::start(
            MockSpec::legacy(
                "l",
                vec![MockTool::new(
                    "chatty",
                    json!({"type": "object"}),
                    Behavior::Logs,
                )],
            )
            .with_sse(true),
        )
        .await;
        let mut fleet = Fleet {
            legacy,
            redis: RedisServer::start(),
            replicas: Vec::new(),
        };
        for _ in 0..n {
            fleet.add().await;
        }
        fleet
    }

    /// One more replica on the same upstream, key and Redis.
    async fn add(&mut self) -> &Gateway {
        let yaml = format!(
            "server: {{listen: 127.0.0.1:0}}\n\
             upstreams:\n  - {{id: l, url: {}}}\n\
             request_state: {{secret_env: FLEET_KEY}}\n\
             fleet: {{redis_url: '{}'}}\n",
            self.legacy.url,
            self.redis.url()
        );
        let gw = spawn_gateway_with_env(bin(), &yaml, &[("FLEET_KEY", KEY)]).await;
        wait_for(|| gw.stderr().contains("fleet: subscribed to Redis"), &gw).await;
        self.replicas.push(gw);
        self.replicas.last().expect("just added")
    }

    fn url(&self, replica: usize) -> String {
        self.replicas[replica].url("/mcp")
    }

    /// A handshake-era client of `replica` that uses the session `of` holds.
    fn same_session(&self, of: &TestClient, replica: usize) -> TestClient {
        let c = TestClient::legacy(&self.url(replica), VERSION);
        c.set_session_id(of.session_id());
        c
    }
}

async fn wait_for(f: impl Fn() -> bool, gw: &Gateway) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !f() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "condition never held; gateway log:\n{}",
            gw.stderr()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Polls `probe` until it answers `want` (the bus is asynchronous).
async fn eventually_status(c: &TestClient, want: u16) -> u16 {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let status = c.request("ping", json!({})).await.status;
        if status == want || tokio::time::Instant::now() >= deadline {
            return status;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Changes waiting for Redis on `gw`, from its /metrics.
async fn pending(gw: &Gateway) -> Option<f64> {
    let scrape = TestClient::modern(&gw.url("/metrics"))
        .raw("GET", vec![], vec![])
        .await;
    metric(
        &String::from_utf8_lossy(&scrape.raw),
        "junction_table_entries{table=\"fleet_pending\"}",
    )
}

async fn levels(c: &TestClient) -> Vec<String> {
    let stream: TestStream = c
        .stream(
            "tools/call",
            json!({"name": "l__chatty", "arguments": {}}),
            vec![],
        )
        .await;
    stream
        .collect(WAIT)
        .await
        .iter()
        .filter(|m| m["method"] == "notifications/message")
        .map(|m| m["params"]["level"].as_str().unwrap_or("?").to_owned())
        .collect()
}

#[tokio::test]
async fn a_session_ended_on_one_replica_is_ended_on_every_replica() {
    let f = Fleet::start(2).await;
    let a = TestClient::legacy(&f.url(0), VERSION);
    assert_eq!(a.initialize().await.status, 200);
    let b = f.same_session(&a, 1);
    assert_eq!(
        b.request("ping", json!({})).await.status,
        200,
        "sealed: any replica"
    );

    assert_eq!(a.delete_session().await.status, 200);
    assert_eq!(
        eventually_status(&b, 404).await,
        404,
        "the other replica ends the session too: {}",
        f.replicas[1].stderr()
    );
    // A session that was not deleted still works on both.
    let other = TestClient::legacy(&f.url(1), VERSION);
    assert_eq!(other.initialize().await.status, 200);
    assert_eq!(
        f.same_session(&other, 0)
            .request("ping", json!({}))
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn a_log_level_set_on_one_replica_filters_on_another() {
    let f = Fleet::start(2).await;
    let a = TestClient::legacy(&f.url(0), VERSION);
    assert_eq!(a.initialize().await.status, 200);
    let b = f.same_session(&a, 1);
    assert_eq!(levels(&b).await, ["debug", "info", "warning", "error"]);

    let set = a
        .request("logging/setLevel", json!({"level": "error"}))
        .await;
    assert_eq!(set.status, 200, "{}", set.text());
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut seen = levels(&b).await;
    while seen != ["error"] && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        seen = levels(&b).await;
    }
    assert_eq!(seen, ["error"], "{}", f.replicas[1].stderr());
}

#[tokio::test]
async fn a_subscription_made_on_one_replica_feeds_the_get_stream_on_another() {
    let f = Fleet::start(2).await;
    let a = TestClient::legacy(&f.url(0), VERSION);
    assert_eq!(a.initialize().await.status, 200);
    let sid = a.session_id().unwrap();
    let headers = [
        ("mcp-session-id", sid.as_str()),
        ("mcp-protocol-version", VERSION),
    ];
    // The session's GET stream is on replica 1; it subscribes through replica 0.
    let mut stream = GetStream::open(&f.url(1), &headers, WAIT).await;
    assert_eq!(stream.status, 200);
    let uri = "mock://l/readme";
    let sub = a.request("resources/subscribe", json!({"uri": uri})).await;
    assert_eq!(sub.status, 200, "{}", sub.text());

    // Both replicas now watch the URI upstream; an update reaches the stream.
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut got: Option<Value> = None;
    while got.is_none() && tokio::time::Instant::now() < deadline {
        f.legacy.touch_resource(uri);
        got = stream.next(Duration::from_millis(300)).await;
    }
    assert_eq!(
        got,
        Some(json!({
            "jsonrpc": "2.0",
            "method": "notifications/resources/updated",
            "params": {"uri": uri}
        })),
        "{}",
        f.replicas[1].stderr()
    );
}

#[tokio::test]
async fn a_replica_started_later_knows_the_sessions_ended_before() {
    let mut f = Fleet::start(1).await;
    let a = TestClient::legacy(&f.url(0), VERSION);
    assert_eq!(a.initialize().await.status, 200);
    assert_eq!(a.delete_session().await.status, 200);
    f.add().await;
    let late = f.same_session(&a, 1);
    assert_eq!(
        late.request("ping", json!({})).await.status,
        404,
        "read from Redis before it said it is subscribed: {}",
        f.replicas[1].stderr()
    );
}

#[tokio::test]
async fn a_change_made_while_redis_is_down_arrives_when_it_is_back() {
    let mut f = Fleet::start(2).await;
    let a = TestClient::legacy(&f.url(0), VERSION);
    assert_eq!(a.initialize().await.status, 200);
    let b = f.same_session(&a, 1);
    let port = f.redis.port;
    f.redis.stop();

    // The replica that took the DELETE honours it at once; the other cannot
    // know yet (documented: it learns when Redis is back).
    assert_eq!(a.delete_session().await.status, 200);
    assert_eq!(a.request("ping", json!({})).await.status, 404);
    assert_eq!(b.request("ping", json!({})).await.status, 200);
    assert_eq!(
        pending(&f.replicas[0]).await,
        Some(1.0),
        "the change waits, counted"
    );

    f.redis = RedisServer::on(port);
    assert_eq!(
        eventually_status(&b, 404).await,
        404,
        "queued change published after the outage, no restart: {}\n{}",
        f.replicas[0].stderr(),
        f.replicas[1].stderr()
    );
    assert_eq!(pending(&f.replicas[0]).await, Some(0.0));
}
