//! Junction between the Node MCP ecosystem and mixed upstreams (PEERS.md): the
//! reference `server-everything` (TypeScript SDK, handshake era, stateful sessions,
//! over Streamable HTTP) and a Python 2.x modern server on one route, driven by the
//! inspector CLI in both eras and by a TypeScript SDK client. The peers come from
//! `tests/interop/setup.sh` (pinned npm folder and venvs; run here when missing).
//!
//! When `JUNCTION_INTEROP_RESULTS` names a directory, every check that passed is
//! appended there as one JSON line (`node_sdk.jsonl`) for tests/interop/run.sh's
//! results table.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use junction_testkit::peers::{self, node_cmd, node_dir, npm_version as package_version, Peer};
use junction_testkit::{spawn_gateway, Gateway};
use serde_json::{json, Value};
use tokio::process::Command;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Appends one passed check to the results file the runner turns into RESULTS.md.
fn record(peer: &str, version: &str, tested: &str) {
    peers::record(
        "node_sdk.jsonl",
        &json!({"suite": "node_sdk", "peer": peer, "version": version,
                "tested": tested, "result": "pass"}),
    );
}

async fn server_everything() -> Peer {
    peers::server_everything().await
}

async fn python_modern() -> Peer {
    peers::python_server("py-mcp2", "server_modern.py", &["--stateless", "--json"]).await
}

async fn gateway(everything: &Peer, python: &Peer) -> Gateway {
    let yaml = format!(
        "server: {{listen: 127.0.0.1:0}}\nupstreams:\n  - {{id: ev, url: {}}}\n  - {{id: py, url: {}}}\n",
        everything.url, python.url
    );
    spawn_gateway(Path::new(env!("CARGO_BIN_EXE_junction")), &yaml).await
}

async fn run_json(mut cmd: Command, what: &str) -> Value {
    let out = tokio::time::timeout(Duration::from_secs(120), cmd.output())
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish within 120 s"))
        .expect("run node");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{what} failed ({}): {}\n{stdout}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{what}: output is not one JSON value ({e}): {stdout:?}"))
}

/// The inspector CLI with `--format json -q`: prints `{"result": …}` or `{"error": …}`.
async fn inspector(url: &str, era: &str, args: &[&str]) -> Value {
    // Its catalog and client config default to ~/.mcp-inspector: keep them in a
    // scratch HOME so a test never writes the user's.
    let home = tempfile::tempdir().expect("tempdir");
    let mut cmd = node_cmd();
    cmd.arg(
        node_dir()
            .join("node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js"),
    )
    .args([
        "--cli",
        url,
        "--protocol-era",
        era,
        "--format",
        "json",
        "-q",
    ])
    .args(args)
    .env("HOME", home.path())
    .env("MCP_CATALOG_PATH", home.path().join("mcp.json"))
    .env("MCP_CLIENT_CONFIG_PATH", home.path().join("client.json"));
    let v = run_json(cmd, &format!("inspector ({era}) {args:?}")).await;
    assert!(v.get("error").is_none(), "inspector ({era}) {args:?}: {v}");
    v["result"].clone()
}

fn tool_names(list: &Value) -> Vec<String> {
    list.as_array()
        .expect("tools array")
        .iter()
        .map(|t| {
            t.as_str()
                .or_else(|| t["name"].as_str())
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

fn text(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// What every client must see through the route: tools of both upstreams, each
/// upstream's block ordered by name.
fn assert_merged_catalog(names: &[String], who: &str, gw: &Gateway) {
    for expected in [
        "ev__echo",
        "ev__get-sum",
        "ev__trigger-long-running-operation",
        "py__py_add",
        "py__py_echo",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "{who}: {expected} missing from {names:?}; {}",
            gw.stderr()
        );
    }
    assert!(
        names
            .iter()
            .all(|n| n.starts_with("ev__") || n.starts_with("py__")),
        "{who}: every name carries its upstream prefix: {names:?}"
    );
    let ev: Vec<&String> = names.iter().filter(|n| n.starts_with("ev__")).collect();
    let mut sorted = ev.clone();
    sorted.sort();
    assert_eq!(ev, sorted, "{who}: ordered by name");
    let first_py = names.iter().position(|n| n.starts_with("py__"));
    let last_ev = names.iter().rposition(|n| n.starts_with("ev__"));
    assert!(
        last_ev < first_py,
        "{who}: upstreams in config order: {names:?}"
    );
}

#[tokio::test]
async fn inspector_cli_in_both_eras_lists_and_calls_server_everything_and_python_through_one_route()
{
    let everything = server_everything().await;
    let python = python_modern().await;
    let gw = gateway(&everything, &python).await;
    let url = gw.url("/mcp");
    let version = package_version("@modelcontextprotocol/inspector");
    let everything_version = package_version("@modelcontextprotocol/server-everything");
    for era in ["legacy", "modern"] {
        let list = inspector(&url, era, &["--method", "tools/list"]).await;
        let names = tool_names(&list["tools"]);
        assert_merged_catalog(&names, &format!("inspector {era}"), &gw);

        let sum = inspector(
            &url,
            era,
            &[
                "--method",
                "tools/call",
                "--tool-name",
                "ev__get-sum",
                "--tool-args-json",
                r#"{"a":2,"b":3}"#,
            ],
        )
        .await;
        assert_eq!(text(&sum), "The sum of 2 and 3 is 5.", "{era}: {sum}");

        let echo = inspector(
            &url,
            era,
            &[
                "--method",
                "tools/call",
                "--tool-name",
                "ev__echo",
                "--tool-args-json",
                r#"{"message":"über junction"}"#,
            ],
        )
        .await;
        assert_eq!(text(&echo), "Echo: über junction", "{era}: {echo}");

        let add = inspector(
            &url,
            era,
            &[
                "--method",
                "tools/call",
                "--tool-name",
                "py__py_add",
                "--tool-args-json",
                r#"{"a":20,"b":22}"#,
            ],
        )
        .await;
        assert_eq!(text(&add), "42", "{era}: {add}");
        assert_eq!(
            add["structuredContent"]["result"],
            json!(42),
            "{era}: {add}"
        );

        record(
            "inspector CLI",
            &version,
            &format!(
                "{era} era: merged tools/list, calls to server-everything {everything_version} (handshake era) and Python mcp 2.x (modern)"
            ),
        );
    }
}

#[tokio::test]
async fn typescript_sdk_client_lists_and_calls_both_upstreams_and_gets_progress_in_order() {
    let everything = server_everything().await;
    let python = python_modern().await;
    let gw = gateway(&everything, &python).await;
    let mut cmd = node_cmd();
    cmd.arg(repo().join("tests/interop/node/client.mjs"))
        .args(["--url", &gw.url("/mcp")])
        .args(["--call", "ev__echo", "--args", r#"{"message":"hi"}"#])
        .args(["--call", "py__py_echo", "--args", r#"{"text":"from ts"}"#])
        .args([
            "--call",
            "ev__trigger-long-running-operation",
            "--args",
            r#"{"duration":1,"steps":3}"#,
        ])
        .env("JUNCTION_NODE_PEERS", node_dir());
    let report = run_json(cmd, "client.mjs").await;
    let sdk = report["sdk"].as_str().unwrap_or("?").to_owned();
    assert_eq!(
        sdk,
        package_version("@modelcontextprotocol/sdk"),
        "the pinned SDK ran"
    );
    assert_eq!(report["protocolVersion"], json!("2025-11-25"), "{report}");
    assert_merged_catalog(&tool_names(&report["tools"]), "ts client", &gw);

    let calls = report["calls"].as_array().expect("calls");
    assert_eq!(text(&calls[0]["result"]), "Echo: hi", "{report}");
    assert_eq!(text(&calls[1]["result"]), "from ts", "{report}");
    let long = &calls[2];
    assert!(
        text(&long["result"]).starts_with("Long running operation completed"),
        "{long}"
    );
    let progress: Vec<f64> = long["progress"]
        .as_array()
        .expect("progress")
        .iter()
        .filter_map(|p| p[0].as_f64())
        .collect();
    assert_eq!(
        progress,
        vec![1.0, 2.0, 3.0],
        "server-everything's progress relayed in order before the result: {long}"
    );
    record(
        "TypeScript SDK client",
        &sdk,
        "handshake era: merged tools/list, calls to server-everything and Python mcp 2.x, progress relayed in order",
    );
}
