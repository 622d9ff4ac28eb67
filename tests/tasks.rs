//! Tasks through Junction, against real servers: the TypeScript SDK's own
//! example server (`simpleStreamableHttp.js`, handshake era, 2025-11-25 core
//! tasks: its `delay` tool runs only as a task) reached by a handshake-era
//! client on the same wire and by a modern client through the 2026-07-28
//! tasks extension (translated by Junction); and the conformance fixture
//! (Python SDK 2.x with the tasks extension, `conformance/fixture_tasks.py`)
//! reached by a handshake-era client through core tasks (translated the
//! other way). The same-wire modern path is the conformance suite's own
//! `tasks-*` scenarios through Junction (`tests/interop/conformance`). Checked as a user would: the
//! task is created, polled, its result read, cancelled; its id is Junction's
//! own and works only for the caller who created it; a modern client that
//! did not declare the extension gets -32021.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use junction_testkit::jwt::{bearer, jwks_file, token, ISSUER, PUBLIC};
use junction_testkit::peers::{interop, python, sdk_example_server, spawn_peer, Peer};
use junction_testkit::{spawn_gateway, Gateway, TestClient};
use serde_json::{json, Value};

const EXT: &str = "io.modelcontextprotocol/tasks";

fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_junction"))
}

struct World {
    _sdk: Peer,
    _fixture: Peer,
    gw: Gateway,
    _dir: tempfile::TempDir,
}

/// Junction with JWT auth in front of the SDK example server (tools `sdk__*`)
/// and the conformance fixture (tools `fx__*`).
async fn world() -> World {
    let sdk = sdk_example_server("simpleStreamableHttp.js").await;
    let mut cmd = tokio::process::Command::new(python("py-mcp2"));
    cmd.arg(interop().join("conformance/fixture.py")).arg("0");
    let fixture = spawn_peer(cmd, "conformance fixture.py").await;
    let dir = tempfile::tempdir().unwrap();
    let jwks = jwks_file(dir.path());
    let yaml = format!(
        r#"
server: {{listen: 127.0.0.1:0, public_url: "{PUBLIC}"}}
upstreams:
  - {{id: sdk, url: "{url}"}}
  - {{id: fx, url: "{fixture}"}}
routes:
  - {{path: /mcp, upstreams: [sdk, fx]}}
auth:
  jwt: {{issuer: "{ISSUER}", jwks_file: "{jwks}"}}
  rules:
    - {{scopes: [tools], tools: ["sdk__*", "fx__*"]}}
"#,
        url = sdk.url,
        fixture = fixture.url,
        jwks = jwks.display()
    );
    let gw = spawn_gateway(bin(), &yaml).await;
    World {
        _sdk: sdk,
        _fixture: fixture,
        gw,
        _dir: dir,
    }
}

fn as_user(c: TestClient, sub: &str) -> TestClient {
    c.with_header("authorization", &bearer(&token(sub, "tools")))
}

async fn legacy(w: &World, sub: &str) -> TestClient {
    let c = as_user(TestClient::legacy(&w.gw.url("/mcp"), "2025-11-25"), sub);
    let init = c.initialize().await;
    assert_eq!(init.status, 200, "{}", init.text());
    let tasks = &init.result()["capabilities"]["tasks"];
    assert!(
        tasks["requests"]["tools"]["call"].is_object() && tasks["cancel"].is_object(),
        "a handshake-era client is told it may create tasks: {}",
        init.text()
    );
    assert!(tasks.get("list").is_none(), "no tasks/list: {tasks}");
    c
}

fn modern(w: &World, sub: &str, with_extension: bool) -> TestClient {
    let caps = if with_extension {
        json!({"extensions": {EXT: {}}})
    } else {
        json!({})
    };
    as_user(TestClient::modern(&w.gw.url("/mcp")), sub).with_capabilities(caps)
}

/// `tasks/get` until the task is finished (10 s at most).
async fn settled(c: &TestClient, task_id: &str) -> Value {
    for _ in 0..100 {
        let got = c.request("tasks/get", json!({"taskId": task_id})).await;
        assert_eq!(got.status, 200, "{}", got.text());
        let status = got.result()["status"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if matches!(status.as_str(), "completed" | "failed" | "cancelled") {
            return got.result().clone();
        }
        assert!(
            matches!(status.as_str(), "working" | "input_required"),
            "{}",
            got.text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("task {task_id} did not finish in 10 s");
}

#[tokio::test]
async fn a_handshake_era_client_runs_a_core_task_through_junction() {
    let w = world().await;
    let alice = legacy(&w, "alice").await;
    let listed = alice.request("tools/list", json!({})).await;
    let delay = listed.result()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "sdk__delay")
        .cloned()
        .unwrap_or_else(|| panic!("no sdk__delay: {}", listed.text()));
    assert_eq!(delay["execution"]["taskSupport"], "required");

    let created = alice
        .request(
            "tools/call",
            json!({"name": "sdk__delay", "arguments": {"duration": 300}, "task": {"ttl": 60000}}),
        )
        .await;
    assert_eq!(created.status, 200, "{}", created.text());
    let task = &created.result()["task"];
    let id = task["taskId"].as_str().unwrap().to_owned();
    assert_eq!(task["status"], "working", "{}", created.text());
    // Junction's sealed id, not the SDK's (a UUID-like short id).
    assert!(id.len() > 60, "a sealed id: {id}");

    let done = settled(&alice, &id).await;
    assert_eq!(done["status"], "completed");
    assert_eq!(
        done["taskId"],
        id.as_str(),
        "the client's own id comes back"
    );
    let result = alice.request("tasks/result", json!({"taskId": id})).await;
    assert_eq!(result.status, 200, "{}", result.text());
    assert_eq!(
        result.result()["content"][0]["text"],
        "Completed 300ms delay",
        "{}",
        result.text()
    );
    // The result names its task (related-task `_meta`) by an id of
    // Junction's that reaches the same task, never by the SDK's own.
    let related = result.result()["_meta"]["io.modelcontextprotocol/related-task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("no related-task id: {}", result.text()))
        .to_owned();
    assert!(related.len() > 60, "a sealed id: {related}");
    let again = alice.request("tasks/get", json!({"taskId": related})).await;
    assert_eq!(again.result()["status"], "completed", "{}", again.text());

    // Only alice reaches her task; a made-up id is unknown.
    let bob = legacy(&w, "bob").await;
    let stolen = bob.request("tasks/get", json!({"taskId": id})).await;
    assert_eq!(stolen.error_code(), Some(-32602), "{}", stolen.text());
    let forged = alice
        .request("tasks/get", json!({"taskId": "not-a-task"}))
        .await;
    assert_eq!(forged.error_code(), Some(-32602), "{}", forged.text());

    // A long task cancelled comes back as the cancelled Task.
    let long = alice
        .request(
            "tools/call",
            json!({"name": "sdk__delay", "arguments": {"duration": 60000}, "task": {}}),
        )
        .await;
    let long_id = long.result()["task"]["taskId"].as_str().unwrap().to_owned();
    let cancelled = alice
        .request("tasks/cancel", json!({"taskId": long_id}))
        .await;
    assert_eq!(cancelled.status, 200, "{}", cancelled.text());
    assert_eq!(
        cancelled.result()["status"],
        "cancelled",
        "{}",
        cancelled.text()
    );
    assert_eq!(cancelled.result()["taskId"], long_id.as_str());
}

#[tokio::test]
async fn a_modern_client_with_the_extension_runs_a_core_task_translated() {
    let w = world().await;
    let c = modern(&w, "alice", true);
    let discovered = c.request("server/discover", json!({})).await;
    assert!(
        discovered.result()["capabilities"]["extensions"][EXT].is_object(),
        "{}",
        discovered.text()
    );
    assert!(discovered.result()["capabilities"].get("tasks").is_none());

    let created = c.call_tool("sdk__delay", json!({"duration": 300})).await;
    assert_eq!(created.status, 200, "{}", created.text());
    let r = created.result();
    assert_eq!(r["resultType"], "task", "{}", created.text());
    assert!(r.get("task").is_none(), "flat, no v1 wrapper: {r}");
    assert!(r.get("ttl").is_none() && r.get("ttlMs").is_some(), "{r}");
    let id = r["taskId"].as_str().unwrap().to_owned();

    let done = settled(&c, &id).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["resultType"], "complete");
    assert_eq!(
        done["result"]["content"][0]["text"],
        "Completed 300ms delay"
    );
    assert!(
        done["result"]
            .pointer("/_meta/io.modelcontextprotocol~1related-task")
            .is_none(),
        "{done}"
    );
    // The extension's cancel is an idempotent ack, also on a finished task.
    let ack = c.request("tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(
        ack.result(),
        &json!({"resultType": "complete"}),
        "{}",
        ack.text()
    );

    // tasks/update has nothing to map to on a core-tasks upstream: a clear error.
    let update = c
        .request("tasks/update", json!({"taskId": id, "inputResponses": {}}))
        .await;
    assert!(update.error_code().is_some(), "{}", update.text());

    // Without the extension: -32021 naming it, for the required-task tool and tasks/*.
    let plain = modern(&w, "alice", false);
    let refused = plain.call_tool("sdk__delay", json!({"duration": 10})).await;
    assert_eq!(refused.status, 400, "{}", refused.text());
    assert_eq!(refused.error_code(), Some(-32021), "{}", refused.text());
    assert!(
        refused.error().unwrap()["data"]["requiredCapabilities"]["extensions"][EXT].is_object()
    );
    let gated = plain.request("tasks/get", json!({"taskId": id})).await;
    assert_eq!(gated.error_code(), Some(-32021), "{}", gated.text());
    // A handshake-era-only method is not one of this era.
    let v1 = c.request("tasks/result", json!({"taskId": id})).await;
    assert_eq!(v1.error_code(), Some(-32601), "{}", v1.text());
}

#[tokio::test]
async fn a_handshake_era_client_runs_an_extension_task_translated() {
    let w = world().await;
    let c = legacy(&w, "alice").await;
    // Without `task`, the modern upstream is not told of the extension: a plain answer.
    let plain = c
        .call_tool("fx__slow_compute", json!({"seconds": 0, "label": "now"}))
        .await;
    assert_eq!(
        plain.result()["content"][0]["text"],
        "slow_compute done: label='now' after 0 s",
        "{}",
        plain.text()
    );

    let created = c
        .request(
            "tools/call",
            json!({"name": "fx__slow_compute", "arguments": {"seconds": 1, "label": "a"},
                   "task": {"ttl": 60000}}),
        )
        .await;
    assert_eq!(created.status, 200, "{}", created.text());
    let task = &created.result()["task"];
    assert!(
        task.get("ttl").is_some() && task.get("ttlMs").is_none(),
        "{}",
        created.text()
    );
    assert!(
        created.result().get("resultType").is_none(),
        "{}",
        created.text()
    );
    let id = task["taskId"].as_str().unwrap().to_owned();
    let got = c.request("tasks/get", json!({"taskId": id})).await;
    assert_eq!(got.result()["taskId"], id.as_str(), "{}", got.text());
    assert!(
        got.result().get("result").is_none(),
        "a Task, no outcome: {}",
        got.text()
    );
    // tasks/result waits for the outcome.
    let result = c.request("tasks/result", json!({"taskId": id})).await;
    assert_eq!(
        result.result()["content"][0]["text"],
        "slow_compute done: label='a' after 1 s",
        "{}",
        result.text()
    );
    assert_eq!(settled(&c, &id).await["status"], "completed");

    let long = c
        .request(
            "tools/call",
            json!({"name": "fx__slow_compute", "arguments": {"seconds": 60, "label": "b"},
                   "task": {}}),
        )
        .await;
    let long_id = long.result()["task"]["taskId"].as_str().unwrap().to_owned();
    let cancelled = c.request("tasks/cancel", json!({"taskId": long_id})).await;
    assert_eq!(
        cancelled.result()["status"],
        "cancelled",
        "{}",
        cancelled.text()
    );
    assert_eq!(cancelled.result()["taskId"], long_id.as_str());
    // A task of this route's other upstream is not reachable by another caller.
    let bob = legacy(&w, "bob").await;
    let stolen = bob.request("tasks/result", json!({"taskId": id})).await;
    assert_eq!(stolen.error_code(), Some(-32602), "{}", stolen.text());
}
