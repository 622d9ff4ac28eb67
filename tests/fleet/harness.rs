//! The fleet for tests/fleet.rs: a real redis-server, three `junction`
//! replicas sharing one request-state key and that Redis (a rate-limit rule
//! with `backend: redis`, and the fleet bus, `fleet.redis_url`), and Debian's
//! HAProxy in front of them in plain round-robin HTTP mode (no stickiness),
//! all on 127.0.0.1 with free ports.
//! Upstreams: a modern testkit mock (`alpha`, paginating its own list), a
//! handshake-era one (`beta`) and the demo stdio server (`weather`, one child
//! per replica).
//!
//! HAProxy stamps every response a replica served with `x-fleet-replica: rN`
//! (its own errors carry none), so a test sees where each request went.
//! Fleets take turns (one at a time per test binary): three debug replicas
//! per test on a small CI machine are enough.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use junction_testkit::redis::RedisServer;
use junction_testkit::{
    free_port, spawn_gateway_with_env, Behavior, Gateway, MockSpec, MockTool, MockUpstream,
    TestClient,
};
use serde_json::json;
use tokio::sync::{Mutex, MutexGuard};

/// Replicas behind the load balancer.
pub const REPLICAS: usize = 3;
/// The response header HAProxy sets to the name of the replica that answered.
pub const MARKER: &str = "x-fleet-replica";
/// Upper bound for anything to happen (a hung fleet fails, a slow one does not).
pub const WAIT: Duration = Duration::from_secs(30);
/// How long a change made on one replica may take to reach the others (the
/// issue's "within a bounded time"; the bus takes milliseconds): generous,
/// for debug builds on shared CI.
pub const SPREAD: Duration = Duration::from_secs(5);
/// A rule that never refuses: every `tools/call` still goes through Redis.
pub const UNLIMITED: &str = "{name: fleet, key: [tool], rate: 1000000, per: 1s}";

const STATE_KEY: &str = "fleet-test-state-key-0123456789abcdef-0123";
static TURN: Mutex<()> = Mutex::const_new(());

pub struct Fleet {
    pub alpha: MockUpstream,
    pub beta: MockUpstream,
    /// `None` while a replica is killed.
    replicas: Vec<Option<Gateway>>,
    ports: Vec<u16>,
    /// Config of replica `i` is this with `{listen}` replaced.
    yaml: String,
    _haproxy: Proc,
    lb_port: u16,
    dir: tempfile::TempDir,
    _redis: RedisServer,
    _turn: MutexGuard<'static, ()>,
}

/// A child process killed and reaped on drop.
struct Proc(Child);
impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_junction"))
}

/// `program` spawned, or a panic naming the script that installs it.
fn spawn(program: &str, args: &[&str], install: &str, stderr: Stdio) -> Proc {
    match Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
    {
        Ok(child) => Proc(child),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            panic!("{program} is not installed: run {install}")
        }
        Err(e) => panic!("cannot start {program}: {e}"),
    }
}

async fn wait_for_port(port: u16, what: &str, child: &mut Proc, log: &Path) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        let exited = child.0.try_wait().ok().flatten();
        if exited.is_some() || tokio::time::Instant::now() > deadline {
            let log = std::fs::read_to_string(log).unwrap_or_default();
            panic!("{what} did not start on 127.0.0.1:{port} ({exited:?})\n{log}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The tools both mocks serve: an echo, a tool asking for input (modern:
/// `input_required`; handshake era: `elicitation/create` mid-call), one
/// sending log messages at every level, and one that answers only after
/// 30 s (unless its call is cancelled first).
pub fn mock_tools(ask: &str) -> Vec<MockTool> {
    vec![
        MockTool::echo("echo"),
        MockTool::new(ask, json!({"type": "object"}), Behavior::InputRequired),
        MockTool::new("chatty", json!({"type": "object"}), Behavior::Logs),
        MockTool::new(
            "slow",
            json!({"type": "object"}),
            Behavior::Slow(Duration::from_secs(30)),
        ),
    ]
}

/// The merged catalog every replica serves, in order (config order, then name).
pub const CATALOG: &[&str] = &[
    "alpha__chatty",
    "alpha__echo",
    "alpha__mrtr",
    "alpha__slow",
    "beta__ask",
    "beta__chatty",
    "beta__echo",
    "beta__slow",
    "weather__add",
    "weather__confirm_reset",
    "weather__forecast",
];
/// `catalog.page_size`: CATALOG comes in three pages.
pub const PAGE: usize = 4;

impl Fleet {
    /// Redis, the mocks, three replicas with `rule` as their one rate-limit
    /// rule, then HAProxy; returns once every replica has answered through it.
    pub async fn start(rule: &str) -> Fleet {
        let turn = TURN.lock().await;
        let dir = tempfile::tempdir().expect("a temp dir");
        let redis = RedisServer::start();
        let redis_port = redis.port;

        // Both answer as SSE streams, as most SDK servers do (and so `slow`
        // is slow, and its call sees its stream close when it is cancelled).
        let alpha = MockSpec::modern("alpha", mock_tools("mrtr"))
            .with_page_size(2)
            .with_sse(true);
        let alpha = MockUpstream::start(alpha).await;
        let beta = MockSpec::legacy("beta", mock_tools("ask")).with_sse(true);
        let beta = MockUpstream::start(beta).await;
        let yaml = format!(
            "server:\n  listen: \"{{listen}}\"\n\
             upstreams:\n  - {{id: alpha, url: {alpha}}}\n  - {{id: beta, url: {beta}}}\n  \
             - {{id: weather, command: [junction, demo, weather]}}\n\
             catalog: {{page_size: {PAGE}}}\n\
             request_state: {{secret_env: JUNCTION_STATE_KEY}}\n\
             rate_limits:\n  backend: redis\n  redis_url: redis://127.0.0.1:{redis_port}\n  \
             failure_mode: closed\n  rules:\n    - {rule}\n\
             fleet: {{redis_url: redis://127.0.0.1:{redis_port}, advertise_url: \"http://{{listen}}\"}}\n\
             log: {{format: json}}\n",
            alpha = alpha.url,
            beta = beta.url,
        );
        let mut replicas = Vec::new();
        let mut ports = Vec::new();
        for _ in 0..REPLICAS {
            // Known beforehand: each replica advertises its own address.
            let gw = start_replica(&yaml, &format!("127.0.0.1:{}", free_port())).await;
            ports.push(gw.addr.port());
            replicas.push(Some(gw));
        }
        for gw in replicas.iter().flatten() {
            wait_ready(gw).await;
        }

        let lb_port = free_port();
        let cfg = dir.path().join("haproxy.cfg");
        std::fs::write(&cfg, haproxy_config(lb_port, &ports)).expect("write haproxy.cfg");
        let log = dir.path().join("haproxy.log");
        let log_file = std::fs::File::create(&log).expect("create haproxy.log");
        let cfg_arg = cfg.to_string_lossy().into_owned();
        let mut haproxy = spawn(
            "haproxy",
            &["-db", "-f", &cfg_arg],
            "scripts/haproxy.sh",
            Stdio::from(log_file),
        );
        wait_for_port(lb_port, "haproxy", &mut haproxy, &log).await;
        let fleet = Fleet {
            alpha,
            beta,
            replicas,
            ports,
            yaml,
            _haproxy: haproxy,
            lb_port,
            dir,
            _redis: redis,
            _turn: turn,
        };
        for i in 0..REPLICAS {
            fleet.wait_serving(i).await;
        }
        fleet
    }

    /// `http://127.0.0.1:<haproxy>{path}`.
    pub fn lb(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.lb_port)
    }

    /// A 2026-07-28 client of `/mcp` through the load balancer.
    pub fn modern(&self) -> TestClient {
        TestClient::modern(&self.lb("/mcp"))
    }

    /// A handshake-era (2025-11-25) client of `/mcp` through the load balancer.
    pub fn legacy(&self) -> TestClient {
        TestClient::legacy(&self.lb("/mcp"), "2025-11-25")
    }

    pub fn replica(&self, i: usize) -> &Gateway {
        self.replicas[i].as_ref().expect("a running replica")
    }

    /// `rN` for each replica, as in the marker header.
    pub fn names() -> Vec<String> {
        (0..REPLICAS).map(|i| format!("r{i}")).collect()
    }

    /// SIGKILL replica `i` (no drain, no goodbye: in-flight requests die).
    pub async fn kill(&mut self, i: usize) {
        if let Some(gw) = self.replicas[i].take() {
            gw.stop().await;
        }
    }

    /// Start replica `i` again on its old port (HAProxy's config names it).
    pub async fn restart(&mut self, i: usize) {
        assert!(self.replicas[i].is_none(), "replica r{i} is running");
        let gw = start_replica(&self.yaml, &format!("127.0.0.1:{}", self.ports[i])).await;
        wait_ready(&gw).await;
        self.replicas[i] = Some(gw);
    }

    /// Returns once a request through HAProxy was answered by replica `i`
    /// (its health check passed and round robin reached it).
    pub async fn wait_serving(&self, i: usize) {
        let want = format!("r{i}");
        let probe = TestClient::modern(&self.lb("/readyz"));
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let r = probe.raw("GET", vec![], vec![]).await;
            if r.status == 200 && r.header(MARKER) == Some(want.as_str()) {
                return;
            }
            if tokio::time::Instant::now() > deadline {
                panic!(
                    "HAProxy never sent a request to {want}: last {} {:?}\n{}",
                    r.status,
                    r.header(MARKER),
                    self.logs()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Number of MCP requests replica `i` logged (its `junction::access` lines).
    pub fn access_lines(&self, i: usize) -> usize {
        self.replica(i)
            .stderr()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|l| l["target"] == "junction::access")
            .count()
    }

    /// Every process's log, for failure messages.
    pub fn logs(&self) -> String {
        let mut out = format!(
            "--- haproxy ---\n{}",
            std::fs::read_to_string(self.dir.path().join("haproxy.log")).unwrap_or_default()
        );
        for (i, gw) in self.replicas.iter().enumerate() {
            if let Some(gw) = gw {
                let err = gw.stderr();
                let tail: Vec<&str> = err.lines().rev().take(20).collect();
                out.push_str(&format!("--- r{i} (last lines) ---\n"));
                for l in tail.into_iter().rev() {
                    out.push_str(l);
                    out.push('\n');
                }
            }
        }
        out
    }
}

async fn start_replica(yaml: &str, listen: &str) -> Gateway {
    spawn_gateway_with_env(
        bin(),
        &yaml.replace("{listen}", listen),
        &[("JUNCTION_STATE_KEY", STATE_KEY)],
    )
    .await
}

async fn wait_ready(gw: &Gateway) {
    let probe = TestClient::modern(&gw.url("/readyz"));
    let deadline = tokio::time::Instant::now() + WAIT;
    while probe.raw("GET", vec![], vec![]).await.status != 200 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "replica on {} never became ready\n{}",
            gw.addr,
            gw.stderr()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Round robin over the replicas, each request balanced on its own (no
/// cookie, no source hash, no prefer-last-server). A replica is taken out
/// after two failed readiness checks (`/readyz`, every 200 ms) and back in
/// after one that passes; a request that could not connect is retried on
/// another replica (it was never sent, so this is safe for any method); a
/// request in flight on a replica that dies gets HAProxy's 502, or its
/// connection closed without an answer.
fn haproxy_config(port: u16, replicas: &[u16]) -> String {
    let mut cfg = format!(
        "global\n    maxconn 1024\n\
         defaults\n    mode http\n    timeout connect 2s\n    timeout client 60s\n    \
         timeout server 60s\n    timeout check 2s\n    retries 3\n    option redispatch\n\
         frontend fleet\n    bind 127.0.0.1:{port}\n    default_backend replicas\n\
         backend replicas\n    balance roundrobin\n    option httpchk GET /readyz\n    \
         default-server check inter 200ms fall 2 rise 1\n    \
         http-response set-header {MARKER} %[srv_name]\n"
    );
    for (i, p) in replicas.iter().enumerate() {
        cfg.push_str(&format!("    server r{i} 127.0.0.1:{p}\n"));
    }
    cfg
}
