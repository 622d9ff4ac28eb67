//! The `junction` command line: validate, catalog, the default config, SIGTERM.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use junction_testkit::{spawn_gateway, Behavior, MockSpec, MockTool, MockUpstream, TestClient};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};

fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_junction"))
}

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn validate_accepts_the_default_config_and_reports_every_error_with_its_path() {
    let ok = std::process::Command::new(bin())
        .args(["validate", "--config"])
        .arg(repo().join("gateway.yaml"))
        .output()
        .unwrap();
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );

    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "server: {listen: nowhere}\nupstreams:\n  - {id: Bad_Id, url: http://127.0.0.1:1/mcp}\n  - {id: ok, url: 'ftp://x'}\nroutes:\n  - {path: /mcp, upstreams: [missing]}\nsurprise: true\n",
    )
    .unwrap();
    let out = std::process::Command::new(bin())
        .args(["validate", "--config"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    for path in [
        "server.listen",
        "upstreams[0].id",
        "upstreams[1].url",
        "routes[0].upstreams[0]",
        "surprise",
    ] {
        assert!(err.contains(path), "{path} missing from:\n{err}");
    }
    // `run` refuses the same file before binding anything.
    let run = std::process::Command::new(bin())
        .args(["run", "--config"])
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!run.status.success());
    assert!(
        String::from_utf8_lossy(&run.stdout).is_empty(),
        "nothing was bound"
    );
}

#[test]
fn catalog_prints_exposed_name_upstream_and_original_name() {
    let out = std::process::Command::new(bin())
        .args(["catalog", "--json", "--config"])
        .arg(repo().join("gateway.yaml"))
        .current_dir(repo())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = rows.as_array().unwrap();
    let row = |route: &str, exposed: &str, upstream: &str, original: &str| json!({"route": route, "exposed": exposed, "upstream": upstream, "original": original, "flags": []});
    assert!(
        rows.contains(&row("/mcp", "weather__forecast", "weather", "forecast")),
        "{rows:?}"
    );
    assert!(rows.contains(&row("/mcp", "notes__add_note", "notes", "add_note")));
    assert!(rows.contains(&row("/weather", "forecast", "weather", "forecast")));
    let table = std::process::Command::new(bin())
        .args(["catalog", "--config"])
        .arg(repo().join("gateway.yaml"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.lines().any(|l| l.contains("notes__countdown")
        && l.contains("notes")
        && l.trim_end().ends_with("countdown")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_looking_header_parameters_are_flagged_and_dropped_when_configured() {
    let schema = json!({"type": "object", "properties": {"token": {"type": "string", "x-mcp-header": "Api-Token"}}});
    let up = MockUpstream::start(MockSpec::modern(
        "up",
        vec![
            MockTool::echo("plain"),
            MockTool::new("leaky", schema, Behavior::Echo),
        ],
    ))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("gateway.yaml");
    let base = format!(
        "server: {{listen: 127.0.0.1:0}}\nupstreams:\n  - {{id: up, url: {}}}\n",
        up.url
    );
    std::fs::write(&cfg, &base).unwrap();
    let out = std::process::Command::new(bin())
        .args(["catalog", "--json", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let leaky = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["exposed"] == "up__leaky")
        .unwrap_or_else(|| {
            panic!(
                "listed by default: {rows:?} {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    assert_eq!(
        leaky["flags"],
        json!(["secret-like header Mcp-Param-Api-Token"])
    );

    let gw = spawn_gateway(
        bin(),
        &format!("{base}tools: {{drop_secret_headers: true}}\n"),
    )
    .await;
    let list = TestClient::modern(&gw.url("/mcp"))
        .request("tools/list", json!({}))
        .await;
    let names: Vec<&str> = list.result()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["up__plain"]);
}

#[tokio::test]
async fn the_default_config_serves_both_demo_upstreams() {
    let yaml = std::fs::read_to_string(repo().join("gateway.yaml"))
        .unwrap()
        .replace("127.0.0.1:8080", "127.0.0.1:0");
    let gw = spawn_gateway(bin(), &yaml).await;
    let c = TestClient::modern(&gw.url("/mcp"));
    let list = c.request("tools/list", json!({})).await;
    let names: Vec<&str> = list.result()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "weather__add",
            "weather__confirm_reset",
            "weather__forecast",
            "notes__add_note",
            "notes__countdown",
            "notes__list_notes"
        ]
    );
    let sum = c.call_tool("weather__add", json!({"a": 2, "b": 40})).await;
    assert_eq!(sum.result()["structuredContent"]["sum"], 42);
    let legacy = TestClient::legacy(&gw.url("/mcp"), "2025-06-18");
    legacy.initialize().await;
    let note = legacy
        .call_tool("notes__add_note", json!({"text": "hi"}))
        .await;
    assert!(
        note.result()["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("Saved"),
        "{}",
        note.text()
    );
    let forecast = c
        .request_with_headers(
            "tools/call",
            json!({"name": "weather__forecast", "arguments": {"city": "Oslo"}}),
            vec![("mcp-param-city".into(), "Oslo".into())],
        )
        .await;
    assert_eq!(
        forecast.result()["resultType"],
        "complete",
        "{}",
        forecast.text()
    );
}

#[tokio::test]
async fn sigterm_drains_in_flight_requests_then_exits() {
    let up = MockUpstream::start(
        MockSpec::modern(
            "up",
            vec![MockTool::new(
                "slow",
                json!({"type": "object"}),
                Behavior::Slow(Duration::from_millis(1500)),
            )],
        )
        // The mock delays a slow tool only on an SSE answer.
        .with_sse(true),
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("gateway.yaml");
    std::fs::write(
        &cfg,
        format!(
            // A long head limit: a silent connection must not hold shutdown for it.
            "server: {{listen: 127.0.0.1:0}}\nlimits: {{header_read_timeout: 60s}}\nupstreams:\n  - {{id: up, url: {}}}\n",
            up.url
        ),
    )
    .unwrap();
    let mut child = tokio::process::Command::new(bin())
        .args(["run", "--config"])
        .arg(&cfg)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let addr = line
        .strip_prefix("junction listening on ")
        .unwrap()
        .to_owned();
    let url = format!("http://{addr}/mcp");
    let in_flight = {
        let c = TestClient::modern(&url);
        tokio::spawn(async move { c.call_tool("up__slow", json!({})).await })
    };
    for _ in 0..100 {
        if !up.calls("slow").is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Connected, never sent a byte (a pool's spare connection, a port check).
    let _silent = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let pid = child.id().unwrap().to_string();
    assert!(std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let done = in_flight.await.unwrap();
    assert_eq!(
        done.result()["resultType"],
        "complete",
        "the in-flight call finished: {}",
        done.text()
    );
    // Well before the 10 s shutdown grace: nothing but the call was in flight.
    let status = tokio::time::timeout(Duration::from_secs(8), child.wait())
        .await
        .expect("exited before the grace period ran out")
        .unwrap();
    assert!(status.success(), "{status}");
    // After shutdown nothing listens any more.
    assert!(tokio::net::TcpStream::connect(&addr).await.is_err());
}
