//! Operating Junction: hot reload (good and bad edits, in-flight requests kept),
//! TLS termination, metrics, health.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use junction_testkit::{
    metric, spawn_gateway, Behavior, Gateway, MockSpec, MockTool, MockUpstream, TestClient,
};
use serde_json::{json, Value};

fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_junction"))
}

fn names(resp: &Value) -> Vec<String> {
    resp["tools"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|t| t["name"].as_str().unwrap_or("").to_owned())
                .collect()
        })
        .unwrap_or_default()
}

async fn get(url: &str) -> (u16, String) {
    let c = TestClient::modern(url);
    let r = c.raw("GET", vec![], vec![]).await;
    (r.status, String::from_utf8_lossy(&r.raw).into_owned())
}

/// Polls `f` until it returns true (bounded: 15 s), for effects that happen in
/// the background such as a reload.
async fn eventually<F, Fut>(mut f: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..150 {
        if f().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

#[tokio::test]
async fn config_edits_take_effect_without_restart_and_bad_edits_change_nothing_but_the_metric() {
    let a = MockUpstream::start(MockSpec::modern(
        "a",
        vec![
            MockTool::echo("echo"),
            MockTool::new(
                "slow",
                json!({"type": "object"}),
                Behavior::Slow(Duration::from_millis(1500)),
            ),
        ],
    ))
    .await;
    let b = MockUpstream::start(MockSpec::legacy("b", vec![MockTool::echo("hello")])).await;
    let v1 = format!(
        "server: {{listen: 127.0.0.1:0}}\nupstreams:\n  - {{id: a, url: {}}}\n",
        a.url
    );
    let gw = spawn_gateway(bin(), &v1).await;
    let mcp = gw.url("/mcp");
    let c = TestClient::modern(&mcp);
    assert_eq!(
        names(c.request("tools/list", json!({})).await.result()),
        vec!["a__echo", "a__slow"]
    );

    // A call in flight while the config changes (a's timeout changes, so its
    // client is replaced) still completes.
    let slow = {
        let c = TestClient::modern(&mcp);
        tokio::spawn(async move { c.call_tool("a__slow", json!({})).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let v2 = format!(
        "server: {{listen: 127.0.0.1:0}}\nupstreams:\n  - {{id: a, url: {}, timeout: 20s}}\n  - {{id: b, url: {}}}\nroutes:\n  - {{path: /mcp}}\n  - {{path: /b, upstreams: [b], prefix: never}}\n",
        a.url, b.url
    );
    std::fs::write(gw.config_path(), v2).unwrap();
    let reloaded = eventually(|| async {
        names(
            TestClient::modern(&mcp)
                .request("tools/list", json!({}))
                .await
                .result(),
        ) == ["a__echo", "a__slow", "b__hello"]
    })
    .await;
    assert!(
        reloaded,
        "the new upstream appears without a restart: {}",
        gw.stderr()
    );
    let finished = slow.await.unwrap();
    assert_eq!(
        finished.result()["resultType"],
        "complete",
        "in-flight call survived the reload: {}",
        finished.text()
    );
    let b_route = TestClient::modern(&gw.url("/b"));
    assert_eq!(
        names(b_route.request("tools/list", json!({})).await.result()),
        vec!["hello"]
    );

    // A bad edit: the old config keeps serving; only the reload metric says so.
    std::fs::write(
        gw.config_path(),
        "server: {listen: 127.0.0.1:0}\nupstreams: []\nbogus: 1\n",
    )
    .unwrap();
    let failed = eventually(|| async {
        gw.metric("junction_config_last_reload_success").await == Some(0.0)
    })
    .await;
    assert!(failed, "a failed reload sets the gauge to 0");
    let failures = gw
        .metric("junction_config_reloads_total{result=\"failure\"}")
        .await;
    assert!(failures.unwrap_or(0.0) >= 1.0);
    assert_eq!(
        names(
            TestClient::modern(&mcp)
                .request("tools/list", json!({}))
                .await
                .result()
        ),
        vec!["a__echo", "a__slow", "b__hello"]
    );
    // Log lines reach stderr within the writer's flush interval.
    let logged = eventually(|| async { gw.stderr().contains("config reload failed") }).await;
    assert!(logged, "{}", gw.stderr());
}

/// The replica's bounded tables show on /metrics with their capacity, and
/// their entries follow what clients do: a handshake-era session sets its log
/// level, then ends with DELETE (remembered as ended; its level forgotten).
#[tokio::test]
async fn bounded_tables_show_their_entries_and_capacity() {
    let (_up, gw) = one_echo_upstream().await;
    let tables = || async {
        let scrape = get(&gw.url("/metrics")).await.1;
        let series = |family: &str, table: &str| {
            metric(
                &scrape,
                &format!("junction_table_{family}{{table=\"{table}\"}}"),
            )
        };
        [
            ("held_calls", 1024.0),
            ("waiting_questions", 4096.0),
            ("change_streams", 10_000.0),
            ("subscribed_sessions", 10_000.0),
            ("session_log_levels", 10_000.0),
            ("cancellable_calls", 100_000.0),
            ("ended_sessions", 100_000.0),
            ("fleet_pending", 10_000.0),
        ]
        .map(|(table, capacity)| {
            assert_eq!(
                series("capacity", table),
                Some(capacity),
                "{table}\n{scrape}"
            );
            (table, series("entries", table).unwrap_or(-1.0))
        })
    };
    let entries =
        |of: &[(&str, f64)], table: &str| of.iter().find(|(t, _)| *t == table).map(|(_, n)| *n);
    let before = tables().await;
    assert!(before.iter().all(|(_, n)| *n == 0.0), "{before:?}");

    let c = TestClient::legacy(&gw.url("/mcp"), "2025-11-25");
    assert_eq!(c.initialize().await.status, 200);
    let set = c
        .request("logging/setLevel", json!({"level": "warning"}))
        .await;
    assert_eq!(set.status, 200, "{}", set.text());
    let levelled = tables().await;
    assert_eq!(entries(&levelled, "session_log_levels"), Some(1.0));
    assert_eq!(entries(&levelled, "ended_sessions"), Some(0.0));

    assert_eq!(c.delete_session().await.status, 200);
    let ended = tables().await;
    assert_eq!(entries(&ended, "session_log_levels"), Some(0.0));
    assert_eq!(entries(&ended, "ended_sessions"), Some(1.0));
}

#[tokio::test]
async fn health_readiness_and_metrics() {
    let (up, gw) = one_echo_upstream().await;
    assert_eq!(get(&gw.url("/healthz")).await.0, 200);
    assert!(eventually(|| async { get(&gw.url("/readyz")).await.0 == 200 }).await);
    let c = TestClient::modern(&gw.url("/mcp"));
    // Twice: the second call counts through the series the first one kept.
    c.call_tool("up__echo", json!({})).await;
    c.call_tool("up__echo", json!({})).await;
    let (status, scrape) = get(&gw.url("/metrics")).await;
    assert_eq!(status, 200);
    for (series, want) in [
        (
            "junction_tool_calls_total{outcome=\"ok\",tool=\"up__echo\",upstream=\"up\"}",
            2.0,
        ),
        (
            "junction_requests_total{method=\"tools/call\",outcome=\"ok\",route=\"/mcp\"}",
            2.0,
        ),
        (
            "junction_request_duration_seconds_count{method=\"tools/call\",route=\"/mcp\"}",
            2.0,
        ),
        (
            "junction_upstream_requests_total{method=\"tools/call\",outcome=\"ok\",upstream=\"up\"}",
            2.0,
        ),
        (
            "junction_upstream_request_duration_seconds_count{method=\"tools/call\",upstream=\"up\"}",
            2.0,
        ),
        ("junction_open_streams{kind=\"call\"}", 0.0),
    ] {
        assert_eq!(metric(&scrape, series), Some(want), "{series}\n{scrape}");
    }
    let lookups = ["hit", "miss"].map(|r| {
        metric(
            &scrape,
            &format!("junction_catalog_lookups_total{{result=\"{r}\"}}"),
        )
        .unwrap_or(0.0)
    });
    assert!(lookups[0] + lookups[1] >= 2.0, "{scrape}");
    assert_eq!(
        metric(&scrape, "junction_upstream_up{upstream=\"up\"}"),
        Some(1.0)
    );
    assert_eq!(
        metric(&scrape, "junction_upstream_tools{upstream=\"up\"}"),
        Some(1.0)
    );

    up.set_down(true).await;
    let down_yaml = format!(
        "server: {{listen: 127.0.0.1:0}}\nupstreams:\n  - {{id: up, url: {}}}\n",
        up.url
    );
    let down_gw = spawn_gateway(bin(), &down_yaml).await;
    assert_eq!(
        get(&down_gw.url("/readyz")).await.0,
        503,
        "no upstream reachable → not ready"
    );

    // ready_when decides what /readyz needs.
    let other = MockUpstream::start(MockSpec::modern("other", vec![MockTool::echo("echo")])).await;
    let mixed = |when: &str| {
        format!(
            "server: {{listen: 127.0.0.1:0, ready_when: {when}}}\nupstreams:\n  - {{id: up, url: {}, timeout: 1s}}\n  - {{id: other, url: {}}}\n",
            up.url, other.url
        )
    };
    let any = spawn_gateway(bin(), &mixed("any_upstream")).await;
    assert_eq!(get(&any.url("/readyz")).await.0, 200);
    let all = spawn_gateway(bin(), &mixed("all_upstreams")).await;
    assert_eq!(get(&all.url("/readyz")).await.0, 503, "one upstream down");
    let listening = spawn_gateway(bin(), &format!("server: {{listen: 127.0.0.1:0, ready_when: listening}}\nupstreams:\n  - {{id: up, url: {}}}\n", up.url)).await;
    assert_eq!(get(&listening.url("/readyz")).await.0, 200);
}

#[tokio::test]
async fn upstream_connections_are_counted_as_opened_and_open() {
    let (up, gw) = one_echo_upstream().await;
    let c = TestClient::modern(&gw.url("/mcp"));
    let opened = "junction_upstream_connections_opened_total{upstream=\"up\"}";
    let open = "junction_upstream_connections{upstream=\"up\"}";
    let scrape = || async { get(&gw.url("/metrics")).await.1 };
    assert_eq!(c.call_tool("up__echo", json!({})).await.status, 200);
    let before = metric(&scrape().await, opened).unwrap();
    assert!(before >= 1.0);
    // Calls one after another reuse the pooled connection.
    for _ in 0..5 {
        assert_eq!(c.call_tool("up__echo", json!({})).await.status, 200);
    }
    let warm = scrape().await;
    assert_eq!(metric(&warm, opened), Some(before), "{warm}");
    assert!(metric(&warm, open).unwrap() >= 1.0, "{warm}");
    // The upstream drops every connection: none is counted open any more,
    // and the next call opens a new one.
    up.set_down(true).await;
    assert!(eventually(|| async { metric(&scrape().await, open) == Some(0.0) }).await);
    up.set_down(false).await;
    assert_eq!(c.call_tool("up__echo", json!({})).await.status, 200);
    let after = scrape().await;
    assert!(metric(&after, opened).unwrap() > before, "{after}");
    assert!(metric(&after, open).unwrap() >= 1.0, "{after}");
}

/// A modern `tools/list` POST for a hyper client.
fn tools_list_request(url: String) -> hyper::Request<http_body_util::Full<bytes::Bytes>> {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}});
    hyper::Request::post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/list")
        .body(http_body_util::Full::new(bytes::Bytes::from(
            body.to_string(),
        )))
        .unwrap()
}

#[tokio::test]
async fn tls_termination_with_a_generated_certificate() {
    let up = MockUpstream::start(MockSpec::modern("up", vec![MockTool::echo("echo")])).await;
    let cert =
        rcgen::generate_simple_self_signed(vec!["localhost".to_string(), "127.0.0.1".to_string()])
            .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cert_path = dir.path().join("cert.pem");
    let key_path = dir.path().join("key.pem");
    std::fs::write(&cert_path, cert.cert.pem()).unwrap();
    std::fs::write(&key_path, cert.signing_key.serialize_pem()).unwrap();
    let yaml = format!(
        "server:\n  listen: 127.0.0.1:0\n  tls: {{cert_file: {}, key_file: {}}}\nupstreams:\n  - {{id: up, url: {}}}\n",
        cert_path.display(),
        key_path.display(),
        up.url
    );
    let gw = spawn_gateway(bin(), &yaml).await;

    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.cert.der().clone()).unwrap();
    let tls = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_only()
        .enable_all_versions()
        .build();
    let client: hyper_util::client::legacy::Client<_, http_body_util::Full<bytes::Bytes>> =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build(https);
    let req = tools_list_request(format!("https://localhost:{}/mcp", gw.addr.port()));
    let resp = client.request(req).await.expect("TLS request");
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.version(), hyper::Version::HTTP_2, "ALPN picks h2");
    use http_body_util::BodyExt;
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let v: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(names(&v["result"]), vec!["up__echo"]);

    // Plain HTTP to the TLS port gets nothing useful.
    let plain = tokio::time::timeout(Duration::from_secs(5), async {
        let mut s = tokio::net::TcpStream::connect(gw.addr).await.unwrap();
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        s.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        let mut buf = Vec::new();
        let _ = s.read_to_end(&mut buf).await;
        buf
    })
    .await
    .unwrap_or_default();
    assert!(!String::from_utf8_lossy(&plain).contains("200 OK"));
}

/// Junction on port 0 in front of one modern mock upstream with an `echo` tool.
async fn one_echo_upstream() -> (MockUpstream, Gateway) {
    let up = MockUpstream::start(MockSpec::modern("up", vec![MockTool::echo("echo")])).await;
    let yaml = format!(
        "server: {{listen: 127.0.0.1:0}}\nupstreams:\n  - {{id: up, url: {}}}\n",
        up.url
    );
    let gw = spawn_gateway(bin(), &yaml).await;
    (up, gw)
}

#[tokio::test]
async fn http2_with_prior_knowledge_and_http1_share_the_plain_port() {
    let (_up, gw) = one_echo_upstream().await;
    for h2 in [true, false] {
        let client: hyper_util::client::legacy::Client<_, http_body_util::Full<bytes::Bytes>> =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .http2_only(h2)
                .build_http();
        let req = tools_list_request(gw.url("/mcp"));
        let resp = tokio::time::timeout(Duration::from_secs(10), client.request(req))
            .await
            .expect("answered in time")
            .expect("request");
        let want = if h2 {
            hyper::Version::HTTP_2
        } else {
            hyper::Version::HTTP_11
        };
        assert_eq!(resp.version(), want);
        assert_eq!(resp.status(), 200);
        use http_body_util::BodyExt;
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        let v: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(names(&v["result"]), vec!["up__echo"], "h2 = {h2}");
    }
}

#[tokio::test]
async fn an_h2c_preface_split_across_writes_is_still_http2_and_a_slow_http1_head_is_still_http1() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (_up, gw) = one_echo_upstream().await;

    // HTTP/2 with prior knowledge, the preface in two writes, then an empty
    // SETTINGS frame: the server answers with its own SETTINGS frame (type 4).
    let mut s = tokio::net::TcpStream::connect(gw.addr).await.unwrap();
    s.write_all(b"PRI * HTTP/2.0\r\n").await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    s.write_all(b"\r\nSM\r\n\r\n").await.unwrap();
    s.write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0]).await.unwrap();
    let mut frame = [0u8; 9];
    tokio::time::timeout(Duration::from_secs(5), s.read_exact(&mut frame))
        .await
        .expect("the server's preface in time")
        .unwrap();
    assert_eq!(frame[3], 4, "a SETTINGS frame: {frame:?}");

    // HTTP/1.1 whose first byte ("P") could start the preface.
    let mut s = tokio::net::TcpStream::connect(gw.addr).await.unwrap();
    s.write_all(b"P").await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    s.write_all(
        b"OST /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-length: 0\r\n\r\n",
    )
    .await
    .unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out))
        .await
        .expect("answered in time")
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out).starts_with("HTTP/1.1 "),
        "{}",
        String::from_utf8_lossy(&out)
    );
}
