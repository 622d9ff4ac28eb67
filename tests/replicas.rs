//! Replicas behave as one gateway. What a handshake-era client changes on one
//! replica reaches the others through the fleet bus (`fleet.redis_url`, a
//! real redis-server): a session ended by DELETE, a session's log level, its
//! `resources/subscribe` set feeding a GET stream open on another replica; a
//! replica started later catches up, and changes made while Redis is down
//! arrive once it is back. What cannot move (a held upstream call) is reached
//! by relaying to the replica holding it (`fleet.advertise_url`): a modern
//! client's retry and a handshake-era client's answer landing elsewhere, a
//! core task of the TypeScript SDK's example server polled on another
//! replica, a shared rate limit counting the relayed retry once, and a clear
//! error when the holding replica is gone. Each test runs two or three `junction`
//! processes sharing one sealing key.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use junction_testkit::mock::Behavior;
use junction_testkit::peers::sdk_example_server;
use junction_testkit::redis::RedisServer;
use junction_testkit::sse::GetStream;
use junction_testkit::{accept_all, TestClient, TestStream};
use junction_testkit::{metric, spawn_gateway_with_env, Gateway, MockSpec, MockTool, MockUpstream};
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
    /// More upstreams for every replica (YAML list items).
    more: String,
}

impl Fleet {
    async fn start(n: usize) -> Fleet {
        Fleet::with(n, "").await
    }

    /// `n` replicas with `extra` config (`{redis}` is the Redis URL).
    async fn with(n: usize, extra: &str) -> Fleet {
        Fleet::build(n, "", extra).await
    }

    /// `n` replicas with `more` upstreams (YAML list items) besides `l`.
    async fn build(n: usize, more: &str, extra: &str) -> Fleet {
        let tools = vec![
            MockTool::new("chatty", json!({"type": "object"}), Behavior::Logs),
            MockTool::new("ask", json!({"type": "object"}), Behavior::InputRequired),
        ];
        let legacy = MockUpstream::start(MockSpec::legacy("l", tools).with_sse(true)).await;
        let mut fleet = Fleet {
            legacy,
            redis: RedisServer::start(),
            replicas: Vec::new(),
            more: more.to_owned(),
        };
        let extra = extra.replace("{redis}", &fleet.redis.url());
        for _ in 0..n {
            fleet.add(&extra).await;
        }
        fleet
    }

    /// One more replica on the same upstream, key and Redis, on a port known
    /// beforehand: it is the address the others relay to.
    async fn add(&mut self, extra: &str) -> &Gateway {
        let port = junction_testkit::free_port();
        let yaml = format!(
            "server: {{listen: '127.0.0.1:{port}'}}\n\
             upstreams:\n  - {{id: l, url: {}}}\n{}\
             request_state: {{secret_env: FLEET_KEY}}\n\
             fleet: {{redis_url: '{}', advertise_url: 'http://127.0.0.1:{port}'}}\n{extra}",
            self.legacy.url,
            self.more,
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

/// A series of `gw`'s /metrics.
async fn series(gw: &Gateway, name: &str) -> Option<f64> {
    let scrape = TestClient::modern(&gw.url("/metrics"))
        .raw("GET", vec![], vec![])
        .await;
    metric(&String::from_utf8_lossy(&scrape.raw), name)
}

/// Changes waiting for Redis on `gw`.
async fn pending(gw: &Gateway) -> Option<f64> {
    series(gw, "junction_table_entries{table=\"fleet_pending\"}").await
}

/// `junction_fleet_connected` of `gw` once it reads `want` (the bus notices
/// an outage when its subscription breaks).
async fn connected(gw: &Gateway, want: f64) -> Option<f64> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let now = series(gw, "junction_fleet_connected{bus=\"redis\"}").await;
        if now == Some(want) || tokio::time::Instant::now() >= deadline {
            return now;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
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
    f.add("").await;
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
    assert_eq!(connected(&f.replicas[1], 1.0).await, Some(1.0));
    let port = f.redis.port;
    f.redis.stop();
    assert_eq!(
        connected(&f.replicas[1], 0.0).await,
        Some(0.0),
        "the outage shows"
    );

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
    assert_eq!(
        connected(&f.replicas[1], 1.0).await,
        Some(1.0),
        "and its end"
    );
    assert_eq!(
        series(
            &f.replicas[0],
            "junction_fleet_dropped_total{bus=\"redis\"}"
        )
        .await,
        Some(0.0),
        "nothing was dropped"
    );
}

fn elicitation_client(url: &str) -> TestClient {
    TestClient::modern(url).with_capabilities(json!({"elicitation": {"form": {}}}))
}

/// A modern call to `l__ask` on `c`: its `input_required` result.
async fn held_call(c: &TestClient) -> Value {
    let first = c.call_tool("l__ask", json!({"q": 1})).await;
    let r = first.result().clone();
    assert_eq!(r["resultType"], "input_required", "{}", first.text());
    r
}

async fn retry(c: &TestClient, asked: &Value) -> junction_testkit::TestResponse {
    c.request(
        "tools/call",
        json!({"name": "l__ask", "arguments": {"q": 1},
               "inputResponses": accept_all(asked, json!({"ok": true})),
               "requestState": asked["requestState"]}),
    )
    .await
}

#[tokio::test]
async fn a_retry_landing_on_another_replica_reaches_the_held_call() {
    let f = Fleet::start(2).await;
    let asked = held_call(&elicitation_client(&f.url(0))).await;
    let done = retry(&elicitation_client(&f.url(1)), &asked).await;
    let r = done.result();
    assert_eq!(r["resultType"], "complete", "{}", done.text());
    assert_eq!(
        r["structuredContent"]["elicitation"],
        json!({"action": "accept", "content": {"ok": true}}),
        "the upstream's tool got the answer: {}",
        done.text()
    );
    assert_eq!(
        f.legacy.calls("ask").len(),
        1,
        "one upstream call, continued"
    );
}

#[tokio::test]
async fn an_answer_posted_to_another_replica_reaches_the_question_asked_on_the_stream() {
    let f = Fleet::start(2).await;
    let a = TestClient::legacy(&f.url(0), VERSION).with_capabilities(json!({"elicitation": {}}));
    assert_eq!(a.initialize().await.status, 200);
    let mut stream = a
        .stream(
            "tools/call",
            json!({"name": "l__ask", "arguments": {}}),
            vec![],
        )
        .await;
    let question = stream.next(WAIT).await.expect("a server request");
    assert_eq!(question["method"], "elicitation/create", "{question}");
    let b = f.same_session(&a, 1);
    let ack = b
        .respond(question["id"].clone(), json!({"action": "decline"}))
        .await;
    assert_eq!(ack.status, 202, "{}", ack.text());
    let last = stream.next(WAIT).await.expect("the final result");
    assert_eq!(
        last["result"]["structuredContent"]["elicitation"],
        json!({"action": "decline"}),
        "{last}"
    );
    // An id no replica asked is refused where it lands, not relayed.
    let stray = b.respond(json!("junction-forged"), json!({})).await;
    assert_eq!(stray.error_code(), Some(-32602), "{}", stray.text());
}

#[tokio::test]
async fn a_relayed_retry_takes_its_rate_limit_tokens_once() {
    // Two tools/call per minute across the fleet: the call and its retry.
    let limits = "rate_limits:\n  backend: redis\n  redis_url: '{redis}'\n  rules:\n    - {name: two, key: [principal], rate: 2, per: 1m, burst: 2, methods: [tools/call]}\n";
    let f = Fleet::with(2, limits).await;
    let asked = held_call(&elicitation_client(&f.url(0))).await;
    let done = retry(&elicitation_client(&f.url(1)), &asked).await;
    assert_eq!(done.result()["resultType"], "complete", "{}", done.text());
    let third = elicitation_client(&f.url(1))
        .call_tool("l__chatty", json!({}))
        .await;
    assert_eq!(third.status, 429, "the budget is spent: {}", third.text());
}

#[tokio::test]
async fn a_retry_for_a_replica_that_is_gone_says_to_call_again() {
    let mut f = Fleet::start(2).await;
    let asked = held_call(&elicitation_client(&f.url(0))).await;
    drop(f.replicas.remove(0));
    let done = retry(&elicitation_client(&f.url(0)), &asked).await;
    assert_eq!(done.error_code(), Some(-32602), "{}", done.text());
    assert!(
        done.text().contains("cannot be reached") && done.text().contains("call again"),
        "{}",
        done.text()
    );
}

#[tokio::test]
async fn a_core_task_is_reached_from_any_replica() {
    // The TypeScript SDK's example server keeps 2025-11-25 core tasks in the
    // upstream session of the replica that created them.
    let sdk = sdk_example_server("simpleStreamableHttp.js").await;
    let f = Fleet::build(2, &format!("  - {{id: sdk, url: '{}'}}\n", sdk.url), "").await;
    let a = TestClient::legacy(&f.url(0), VERSION);
    assert_eq!(a.initialize().await.status, 200);
    let created = a
        .request(
            "tools/call",
            json!({"name": "sdk__delay", "arguments": {"duration": 200}, "task": {"ttl": 60000}}),
        )
        .await;
    let task_id = created.result()["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {}", created.text()))
        .to_owned();
    let b = f.same_session(&a, 1);
    let deadline = tokio::time::Instant::now() + WAIT;
    let last = loop {
        let got = b.request("tasks/get", json!({"taskId": task_id})).await;
        let status = got.result()["status"].as_str().unwrap_or("?").to_owned();
        assert!(
            matches!(status.as_str(), "working" | "completed"),
            "tasks/get on the other replica: {}",
            got.text()
        );
        if status == "completed" || tokio::time::Instant::now() > deadline {
            break got;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(last.result()["taskId"], json!(task_id), "{}", last.text());
    let result = b.request("tasks/result", json!({"taskId": task_id})).await;
    assert!(
        result.result()["content"].is_array(),
        "the task's result on the other replica: {}",
        result.text()
    );
}
