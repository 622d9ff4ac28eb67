//! Junction between the official Python MCP SDK's clients and servers (PEERS.md):
//! a 2.x client in `auto`, `legacy` and `2026-07-28` modes lists and calls tools of
//! a 2.x (modern) server and a 1.x FastMCP (handshake-era) server through one
//! route. The peers come from `tests/interop/setup.sh` (pinned venvs; run here
//! when missing).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use junction_testkit::peers::{self, python, Peer};
use junction_testkit::{spawn_gateway, Gateway};
use serde_json::{json, Value};
use tokio::process::Command;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

async fn peer(venv: &str, script: &str, args: &[&str]) -> Peer {
    peers::python_server(venv, script, args).await
}

/// Runs the 2.x client; returns its JSON report.
async fn client(url: &str, mode: &str, calls: &[(&str, Value)], extra: &[&str]) -> Value {
    let mut cmd = Command::new(python("py-mcp2"));
    cmd.arg(repo().join("tests/interop/python/client.py"))
        .args(["--url", url, "--mode", mode]);
    for (name, args) in calls {
        cmd.args(["--call", name, "--args", &args.to_string()]);
    }
    cmd.args(extra);
    let out = tokio::time::timeout(Duration::from_secs(120), cmd.output())
        .await
        .expect("client finished")
        .expect("client ran");
    assert!(
        out.status.success(),
        "client ({mode}) failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("client output is not JSON ({e}): {:?}", out.stdout))
}

fn text(call: &Value) -> String {
    call["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn tool_names(report: &Value) -> Vec<String> {
    report["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| {
            t.as_str()
                .or_else(|| t["name"].as_str())
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

async fn gateway(first: &Peer, second: &Peer, id1: &str, id2: &str) -> Gateway {
    let yaml = format!(
        "server: {{listen: 127.0.0.1:0}}\nupstreams:\n  - {{id: {id1}, url: {}}}\n  - {{id: {id2}, url: {}}}\n",
        first.url, second.url
    );
    spawn_gateway(Path::new(env!("CARGO_BIN_EXE_junction")), &yaml).await
}

#[tokio::test]
async fn python_clients_in_every_mode_see_and_call_both_eras_through_one_route() {
    let modern = peer("py-mcp2", "server_modern.py", &["--stateless", "--json"]).await;
    let legacy = peer("py-mcp1", "server_legacy.py", &["--stateful", "--sse"]).await;
    let gw = gateway(&modern, &legacy, "pm", "pl").await;
    let url = gw.url("/mcp");
    for mode in ["auto", "legacy", "2026-07-28"] {
        let report = client(
            &url,
            mode,
            &[
                ("pm__py_add", json!({"a": 2, "b": 3})),
                ("pl__legacy_greet", json!({"name": "Ada"})),
                ("pm__py_lookup", json!({"region": "eu-1", "q": "x"})),
            ],
            &[],
        )
        .await;
        let names = tool_names(&report);
        for expected in [
            "pm__py_add",
            "pm__py_echo",
            "pm__py_lookup",
            "pl__legacy_greet",
            "pl__legacy_count",
        ] {
            assert!(
                names.contains(&expected.to_owned()),
                "{mode}: {expected} missing from {names:?}; {}",
                gw.stderr()
            );
        }
        let mut sorted_pm: Vec<&String> = names.iter().filter(|n| n.starts_with("pm__")).collect();
        sorted_pm.sort();
        assert_eq!(
            names
                .iter()
                .filter(|n| n.starts_with("pm__"))
                .collect::<Vec<_>>(),
            sorted_pm,
            "ordered by name"
        );
        let calls = report["calls"].as_array().expect("calls");
        assert_eq!(text(&calls[0]), "5", "{mode}: {calls:?}");
        assert_eq!(text(&calls[1]), "Hello, Ada!", "{mode}: {calls:?}");
        assert!(
            text(&calls[2]).contains("eu-1"),
            "{mode}: x-mcp-header tool through Junction: {calls:?}"
        );
    }
}

/// MRTR with real peers: the 2.x server's `py_confirm` answers a 2026-07-28
/// call with an `InputRequiredResult` (elicitation + requestState); the 2.x
/// client's elicitation callback answers and retries, through Junction, which
/// wraps and unwraps the requestState. Both modern upstream transports, accept
/// and decline.
#[tokio::test]
async fn python_modern_client_completes_an_elicitation_through_junction() {
    let json_up = peer("py-mcp2", "server_modern.py", &["--stateless", "--json"]).await;
    let sse_up = peer("py-mcp2", "server_modern.py", &["--stateful", "--sse"]).await;
    let gw = gateway(&json_up, &sse_up, "pm", "ps").await;
    for mode in ["2026-07-28", "auto"] {
        for (answer, want) in [
            ("--accept-elicitation", "confirmed"),
            ("--decline-elicitation", "declined"),
        ] {
            let report = client(
                &gw.url("/mcp"),
                mode,
                &[
                    ("pm__py_confirm", json!({"item": "db"})),
                    ("ps__py_confirm", json!({"item": "disk"})),
                ],
                &[answer],
            )
            .await;
            assert_eq!(report["protocolVersion"], json!("2026-07-28"), "{report}");
            for (call, item) in report["calls"]
                .as_array()
                .expect("calls")
                .iter()
                .zip(["db", "disk"])
            {
                assert_eq!(
                    text(call),
                    format!("{want} {item}"),
                    "{mode} {answer}: {call}; {}",
                    gw.stderr()
                );
                let asked = call["elicitations"].as_array().cloned().unwrap_or_default();
                assert_eq!(asked.len(), 1, "{mode}: asked exactly once: {call}");
                assert_eq!(
                    asked[0]["message"],
                    json!(format!("Confirm {item}?")),
                    "{call}"
                );
            }
        }
    }
}

/// Progress from a modern (2.x, SSE) upstream reaches modern and handshake-era
/// clients in order, before the result.
#[tokio::test]
async fn progress_from_a_modern_python_sse_server_reaches_python_clients_in_order() {
    let sse_up = peer("py-mcp2", "server_modern.py", &["--stateful", "--sse"]).await;
    let legacy = peer("py-mcp1", "server_legacy.py", &[]).await;
    let gw = gateway(&sse_up, &legacy, "pm", "pl").await;
    for mode in ["2026-07-28", "legacy"] {
        let report = client(
            &gw.url("/mcp"),
            mode,
            &[("pm__py_slow", json!({"steps": 4}))],
            &[],
        )
        .await;
        let call = &report["calls"][0];
        assert_eq!(text(call), "done 4", "{mode}: {call}");
        let progress: Vec<(f64, String)> = call["progress"]
            .as_array()
            .expect("progress")
            .iter()
            .map(|p| {
                (
                    p[0].as_f64().unwrap_or(-1.0),
                    p[2].as_str().unwrap_or("").to_owned(),
                )
            })
            .collect();
        let want: Vec<(f64, String)> = (1..=4)
            .map(|i| (f64::from(i), format!("step {i}")))
            .collect();
        assert_eq!(
            progress,
            want,
            "{mode}: in order, none lost: {call}; {}",
            gw.stderr()
        );
    }
}

#[tokio::test]
async fn progress_from_a_handshake_era_python_server_reaches_a_modern_python_client() {
    let modern = peer("py-mcp2", "server_modern.py", &[]).await;
    let legacy = peer("py-mcp1", "server_legacy.py", &["--stateful", "--sse"]).await;
    let gw = gateway(&modern, &legacy, "pm", "pl").await;
    let report = client(
        &gw.url("/mcp"),
        "2026-07-28",
        &[("pl__legacy_count", json!({"n": 3}))],
        &[],
    )
    .await;
    let call = &report["calls"][0];
    assert_eq!(text(call), "counted 3", "{call}");
    let progress: Vec<f64> = call["progress"]
        .as_array()
        .expect("progress")
        .iter()
        .filter_map(|p| p[0].as_f64())
        .collect();
    assert_eq!(progress, vec![1.0, 2.0, 3.0], "{call}");
}

#[tokio::test]
async fn python_client_with_a_token_sees_only_granted_tools_and_gets_the_step_up_error() {
    let modern = peer("py-mcp2", "server_modern.py", &["--stateless", "--json"]).await;
    let keys = repo().join("crates/policy/tests/keys");
    let dir = tempfile::tempdir().unwrap();
    let jwks: Value =
        serde_json::from_slice(&std::fs::read(keys.join("public-jwk.json")).unwrap()).unwrap();
    let mut k = jwks["rsa1"].clone();
    k["kid"] = json!("k1");
    k["alg"] = json!("RS256");
    let jwks_path = dir.path().join("jwks.json");
    std::fs::write(&jwks_path, json!({"keys": [k]}).to_string()).unwrap();
    let yaml = format!(
        "server: {{listen: 127.0.0.1:0, public_url: 'http://junction.test'}}\nupstreams:\n  - {{id: pm, url: {}}}\nauth:\n  jwt: {{issuer: 'https://idp.test', jwks_file: '{}'}}\n  rules:\n    - {{scopes: [math], tools: ['pm__py_add']}}\n    - {{scopes: [admin], tools: ['pm__*']}}\n",
        modern.url,
        jwks_path.display()
    );
    let gw = spawn_gateway(Path::new(env!("CARGO_BIN_EXE_junction")), &yaml).await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let claims = json!({"iss": "https://idp.test", "sub": "py", "aud": "http://junction.test", "exp": now + 600, "scope": "math"});
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256);
    header.kid = Some("k1".into());
    let key =
        jsonwebtoken::EncodingKey::from_rsa_pem(&std::fs::read(keys.join("rsa1.pem")).unwrap())
            .unwrap();
    let token = jsonwebtoken::encode(&header, &claims, &key).unwrap();
    let auth = format!("Authorization: Bearer {token}");
    let report = client(
        &gw.url("/mcp"),
        "2026-07-28",
        &[
            ("pm__py_add", json!({"a": 1, "b": 1})),
            ("pm__py_echo", json!({"text": "x"})),
        ],
        &["--header", &auth, "--allow-errors"],
    )
    .await;
    assert_eq!(
        tool_names(&report),
        vec!["pm__py_add"],
        "only the granted tool is listed"
    );
    assert_eq!(text(&report["calls"][0]), "2");
    let denied = &report["calls"][1];
    assert!(
        denied.get("error").is_some(),
        "the ungranted call fails: {denied}"
    );
    assert!(
        denied.to_string().contains("insufficient scope") || denied.to_string().contains("403"),
        "{denied}"
    );
}

#[tokio::test]
async fn an_unknown_prompt_under_a_known_prefix_is_junctions_invalid_params() {
    use junction_testkit::TestClient;
    let modern = peer("py-mcp2", "server_modern.py", &["--stateless", "--json"]).await;
    let legacy = peer("py-mcp1", "server_legacy.py", &["--stateful", "--sse"]).await;
    // Directly, FastMCP answers an unknown prompt with its own error.
    let direct = TestClient::legacy(&legacy.url, "2025-11-25");
    assert_eq!(direct.initialize().await.status, 200);
    let own = direct
        .request("prompts/get", json!({"name": "nope", "arguments": {}}))
        .await;
    assert!(own.error_code().is_some(), "{}", own.text());
    let gw = gateway(&modern, &legacy, "py2", "py1").await;
    let legacy_client = TestClient::legacy(&gw.url("/mcp"), "2025-11-25");
    assert_eq!(legacy_client.initialize().await.status, 200);
    for c in [TestClient::modern(&gw.url("/mcp")), legacy_client] {
        let known = c
            .request(
                "prompts/get",
                json!({"name": "py1__legacy_hello", "arguments": {"name": "Ada"}}),
            )
            .await;
        assert_eq!(
            known.result()["messages"][0]["content"]["text"],
            "Say hello to Ada.",
            "{}",
            known.text()
        );
        let unknown = c
            .request("prompts/get", json!({"name": "py1__nope", "arguments": {}}))
            .await;
        assert_eq!(unknown.error_code(), Some(-32602), "{}", unknown.text());
        assert!(
            unknown.text().contains("unknown prompt"),
            "{}",
            unknown.text()
        );
    }
}
