//! A route's guardrail webhook end to end: a real webhook process
//! (`tests/guardrail/hook.py`) that allows, denies, rewrites a request or a
//! result, answers too late, and crashes, in front of the official Python SDK
//! server; fail-closed and fail-open routes; and a result that reaches its
//! handshake-era client on an SSE stream (a modern upstream's question
//! bridged to it), checked before it is written there; and a task's result,
//! checked when its client reads it (both eras, both task wires). Everything
//! on 127.0.0.1.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use junction_testkit::peers::{
    interop, python, python_server, repo, sdk_example_server, spawn_peer, Peer,
};
use junction_testkit::{
    spawn_gateway, Behavior, MockSpec, MockTool, MockUpstream, TestClient, TestResponse,
};
use serde_json::{json, Value};
use tokio::process::Command;

fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_junction"))
}

fn text(r: &TestResponse) -> String {
    r.result()["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {:?}", r.body))
        .to_owned()
}

fn log(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The test hook (`tests/guardrail/hook.py`) and the file it logs what it
/// is asked into (removed with it).
struct Hook {
    peer: Peer,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

async fn hook() -> Hook {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("hook.jsonl");
    let mut cmd = Command::new(python("py-oauth"));
    cmd.arg(repo().join("tests/guardrail/hook.py"))
        .arg("--log")
        .arg(&log);
    Hook {
        peer: spawn_peer(cmd, "guardrail hook").await,
        log,
        _dir: dir,
    }
}

/// What the hook was asked in the result phase, in order.
fn result_phases(hook_log: &Path) -> Vec<Value> {
    log(hook_log)
        .into_iter()
        .map(|l| l["body"].clone())
        .filter(|b| b["phase"] == "result")
        .collect()
}

#[tokio::test]
async fn a_guardrail_allows_denies_rewrites_and_fails_as_configured() {
    let hook = hook().await;
    let sdk = python_server("py-mcp2", "server_modern.py", &["--stateless", "--json"]).await;
    let yaml = format!(
        r#"
server: {{listen: 127.0.0.1:0}}
upstreams: [{{id: py, url: "{sdk}"}}]
routes:
  - path: /strict
    guardrail: {{url: "{hook}", timeout: 1s, on_error: deny, results: true}}
  - path: /lenient
    guardrail: {{url: "{hook}", timeout: 1s, on_error: allow}}
"#,
        sdk = sdk.url,
        hook = hook.peer.url,
    );
    let gw = spawn_gateway(bin(), &yaml).await;
    let strict = TestClient::modern(&gw.url("/strict"))
        .with_header("authorization", "Bearer never-for-the-hook");
    let lenient = TestClient::modern(&gw.url("/lenient"));
    let echo = |c: &TestClient, t: &str| {
        let (c, t) = (c.url().to_owned(), t.to_owned());
        async move {
            TestClient::modern(&c)
                .call_tool("py__py_echo", json!({"text": t}))
                .await
        }
    };

    // Allowed: both phases asked, with who, what and the arguments.
    let ok = strict
        .call_tool("py__py_echo", json!({"text": "hello"}))
        .await;
    assert_eq!(text(&ok), "hello", "{}", gw.stderr());
    let seen = log(&hook.log);
    assert_eq!(seen.len(), 2, "{seen:#?}");
    let req = &seen[0]["body"];
    assert_eq!(req["phase"], "request");
    assert_eq!(req["route"], "/strict");
    assert_eq!(req["tool"], "py__py_echo");
    assert_eq!(req["upstream"], "py");
    assert_eq!(req["upstream_tool"], "py_echo");
    assert_eq!(req["arguments"], json!({"text": "hello"}));
    assert_eq!(seen[1]["body"]["phase"], "result");
    assert_eq!(seen[1]["body"]["result"]["content"][0]["text"], "hello");
    let headers = seen[0]["headers"].to_string().to_lowercase();
    assert!(!headers.contains("never-for-the-hook"), "{headers}");

    // Denied: a clear error, never forwarded.
    let denied = echo(&strict, "deny-me").await;
    assert_eq!(denied.status, 403, "{:?}", denied.body);
    assert_eq!(denied.error_code(), Some(-31005));
    assert!(
        denied.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no denials today"),
        "{:?}",
        denied.body
    );
    // Rewritten request, rewritten result.
    assert_eq!(text(&echo(&strict, "rewrite-me").await), "rewritten");
    assert_eq!(text(&echo(&strict, "a leak here").await), "[filtered]");
    // Too slow: fail closed on one route, open on the other.
    let slow = echo(&strict, "slow").await;
    assert_eq!(slow.status, 503, "{:?}", slow.body);
    assert_eq!(text(&echo(&lenient, "slow").await), "slow");

    // The hook crashes mid-request: the lenient route lets the call through,
    // and with the hook gone the strict route refuses.
    assert_eq!(text(&echo(&lenient, "crash").await), "crash");
    let gone = echo(&strict, "after").await;
    assert_eq!(gone.status, 503, "{:?}", gone.body);

    let scrape = TestClient::modern(&gw.url("/metrics"))
        .raw("GET", vec![], vec![])
        .await;
    let scrape = String::from_utf8_lossy(&scrape.raw);
    let count = |route: &str, phase: &str, decision: &str| {
        junction_testkit::metric(
            &scrape,
            &format!("junction_guardrail_decisions_total{{decision=\"{decision}\",phase=\"{phase}\",route=\"{route}\"}}"),
        )
        .unwrap_or(0.0)
    };
    assert_eq!(count("/strict", "request", "deny"), 1.0, "{scrape}");
    assert_eq!(count("/strict", "request", "rewrite"), 1.0, "{scrape}");
    assert_eq!(count("/strict", "result", "rewrite"), 1.0, "{scrape}");
    assert_eq!(count("/strict", "request", "error_denied"), 2.0, "{scrape}");
    assert_eq!(
        count("/lenient", "request", "error_allowed"),
        2.0,
        "{scrape}"
    );
}

/// A handshake-era client's call whose upstream asks it something: the
/// answer streams (the question, then the result, on one SSE response), and
/// the route's result phase still sees the result before the client does.
#[tokio::test]
async fn a_streamed_result_is_checked_before_it_is_written() {
    const WAIT: Duration = Duration::from_secs(10);
    let hook = hook().await;
    // A modern upstream whose `ask` answers `input_required`, then echoes
    // the client's answers in its result.
    let tool = MockTool::new("ask", json!({"type": "object"}), Behavior::InputRequired);
    let up = MockUpstream::start(MockSpec::modern("new", vec![tool])).await;
    let yaml = format!(
        r#"
server: {{listen: 127.0.0.1:0}}
upstreams: [{{id: new, url: "{up}"}}]
routes:
  - path: /strict
    guardrail: {{url: "{hook}", timeout: 2s, on_error: deny, results: true}}
"#,
        up = up.url,
        hook = hook.peer.url,
    );
    let gw = spawn_gateway(bin(), &yaml).await;
    let c = TestClient::legacy(&gw.url("/strict"), "2025-11-25")
        .with_capabilities(json!({"elicitation": {}}));
    assert_eq!(c.initialize().await.status, 200);

    // The client's answer ends up in the result: the hook sees it there.
    let answered = |said: &'static str| {
        let c = &c;
        async move {
            let mut stream = c
                .stream(
                    "tools/call",
                    json!({"name": "new__ask", "arguments": {}}),
                    vec![],
                )
                .await;
            assert_eq!(stream.status, 200);
            let asked = stream.next(WAIT).await.expect("a server request");
            assert_eq!(asked["method"], "elicitation/create", "{asked}");
            let answer = json!({"action": "accept", "content": {"note": said}});
            let ack = c.respond(asked["id"].clone(), answer).await;
            assert_eq!(ack.status, 202, "{}", ack.text());
            stream.next(WAIT).await.expect("the stream's last message")
        }
    };

    let allowed = answered("fine").await;
    assert_eq!(
        allowed["result"]["structuredContent"]["inputResponses"]["confirm"]["content"]["note"],
        "fine",
        "{allowed}"
    );
    let rewritten = answered("a leak").await;
    assert_eq!(
        rewritten["result"],
        json!({"content": [{"type": "text", "text": "[filtered]"}]}),
        "{rewritten}"
    );
    let refused = answered("a secret").await;
    assert!(refused.get("result").is_none(), "{refused}");
    assert_eq!(refused["error"]["code"], -31005, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no secrets in results"),
        "{refused}"
    );

    // The hook was asked about each final result, as the client would get it.
    let results = result_phases(&hook.log);
    assert_eq!(results.len(), 3, "{results:#?}");
    assert!(results
        .iter()
        .all(|b| b["tool"] == "new__ask" && b["upstream_tool"] == "ask"));
    assert_eq!(
        results[1]["result"]["structuredContent"]["inputResponses"]["confirm"]["content"]["note"],
        "a leak"
    );
}

/// `tasks/get` until the task is finished (10 s at most).
async fn settled(c: &TestClient, task_id: &str) -> Value {
    for _ in 0..100 {
        let got = c.request("tasks/get", json!({"taskId": task_id})).await;
        assert_eq!(got.status, 200, "{}", got.text());
        if matches!(
            got.result()["status"].as_str(),
            Some("completed" | "failed" | "cancelled")
        ) {
            return got.result().clone();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("task {task_id} did not finish in 10 s");
}

/// A call that becomes a task is answered with the task, which the result
/// phase leaves alone; its result is checked when the client reads it: a
/// handshake-era client's `tasks/result`, a modern client's `tasks/get`, on
/// a 2025-11-25 core-tasks upstream (the TypeScript SDK's example server)
/// and on a 2026-07-28 extension upstream (the conformance fixture).
#[tokio::test]
async fn a_tasks_result_is_checked_when_its_client_reads_it() {
    const EXT: &str = "io.modelcontextprotocol/tasks";
    let hook = hook().await;
    let sdk = sdk_example_server("simpleStreamableHttp.js").await;
    let mut cmd = Command::new(python("py-mcp2"));
    cmd.arg(interop().join("conformance/fixture.py")).arg("0");
    let fixture = spawn_peer(cmd, "conformance fixture.py").await;
    let yaml = format!(
        r#"
server: {{listen: 127.0.0.1:0}}
upstreams: [{{id: sdk, url: "{sdk}"}}, {{id: fx, url: "{fixture}"}}]
routes:
  - path: /strict
    guardrail: {{url: "{hook}", timeout: 2s, on_error: deny, results: true}}
"#,
        sdk = sdk.url,
        fixture = fixture.url,
        hook = hook.peer.url,
    );
    let gw = spawn_gateway(bin(), &yaml).await;
    let filtered = json!([{"type": "text", "text": "[filtered]"}]);

    // A handshake-era client: the task, then tasks/result.
    let legacy = TestClient::legacy(&gw.url("/strict"), "2025-11-25");
    assert_eq!(legacy.initialize().await.status, 200);
    for (tool, arguments) in [
        ("sdk__delay", json!({"duration": 100})),
        ("fx__slow_compute", json!({"seconds": 0, "label": "a"})),
    ] {
        let created = legacy
            .request(
                "tools/call",
                json!({"name": tool, "arguments": arguments, "task": {"ttl": 60000}}),
            )
            .await;
        let id = created.result()["task"]["taskId"]
            .as_str()
            .unwrap_or_else(|| panic!("{tool}: no task: {}", created.text()))
            .to_owned();
        let result = legacy.request("tasks/result", json!({"taskId": id})).await;
        assert_eq!(result.status, 200, "{}", result.text());
        assert_eq!(
            result.result()["content"],
            filtered,
            "{tool}: {}",
            result.text()
        );
    }

    // A modern client with the extension: the result inside tasks/get.
    let modern =
        TestClient::modern(&gw.url("/strict")).with_capabilities(json!({"extensions": {EXT: {}}}));
    for (tool, arguments) in [
        ("sdk__delay", json!({"duration": 100})),
        ("fx__slow_compute", json!({"seconds": 0, "label": "b"})),
    ] {
        let created = modern.call_tool(tool, arguments).await;
        assert_eq!(
            created.result()["resultType"],
            "task",
            "{tool}: {}",
            created.text()
        );
        let id = created.result()["taskId"].as_str().unwrap().to_owned();
        let done = settled(&modern, &id).await;
        assert_eq!(done["status"], "completed", "{tool}: {done}");
        assert_eq!(done["result"]["content"], filtered, "{tool}: {done}");
    }

    // The hook saw results only, named as upstream knows them; never a task.
    let results = result_phases(&hook.log);
    assert!(results.len() >= 4, "{results:#?}");
    for b in &results {
        assert!(
            matches!(b["upstream_tool"].as_str(), Some("delay" | "slow_compute")),
            "{b}"
        );
        assert!(
            b["result"].get("task").is_none(),
            "a task went to the hook: {b}"
        );
        assert_ne!(b["result"]["resultType"], "task", "{b}");
    }
}
