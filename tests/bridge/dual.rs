//! Dual-era upstreams (both eras on one endpoint, like the Python SDK 2.x):
//! a handshake-era client's call goes over a handshake-era upstream session,
//! so the upstream's own `elicitation/create` reaches the client as a real
//! server request on its SSE stream, exactly as it would directly.

use super::*;

struct Dual {
    up: MockUpstream,
    pinned: MockUpstream,
    gw: Gateway,
}

/// `dual`: probed (auto); `pinned`: the same kind of upstream pinned `protocol: modern`.
async fn dual_world() -> Dual {
    let tools = || {
        vec![MockTool::new(
            "ask",
            json!({"type": "object"}),
            Behavior::InputRequired,
        )]
    };
    let up = MockUpstream::start(MockSpec::dual("dual", tools())).await;
    let pinned = MockUpstream::start(MockSpec::dual("pinned", tools())).await;
    let yaml = format!(
        "server:\n  listen: 127.0.0.1:0\nupstreams:\n  - id: dual\n    url: {}\n  - id: pinned\n    url: {}\n    protocol: modern\n",
        up.url, pinned.url
    );
    let gw = spawn_gateway(bin(), &yaml).await;
    Dual { up, pinned, gw }
}

async fn legacy_client(d: &Dual, caps: Value) -> TestClient {
    let c = TestClient::legacy(&d.gw.url("/mcp"), "2025-11-25").with_capabilities(caps);
    assert_eq!(c.initialize().await.status, 200);
    c
}

/// Calls `tool` as a handshake-era client over SSE, answers the one server
/// request it gets with `answer`; the request and the final message.
async fn ask_and_answer(c: &TestClient, tool: &str, answer: Value) -> (Value, Value) {
    let mut stream = c
        .stream(
            "tools/call",
            json!({"name": tool, "arguments": {"q": 3}}),
            vec![],
        )
        .await;
    assert_eq!(stream.status, 200);
    let asked = stream.next(WAIT).await.expect("a server request");
    let ack = c.respond(asked["id"].clone(), answer).await;
    assert_eq!(ack.status, 202, "{}", ack.text());
    let last = stream.next(WAIT).await.expect("the final result");
    (asked, last)
}

#[tokio::test]
async fn legacy_client_answers_a_dual_era_upstreams_own_elicitation() {
    let d = dual_world().await;
    let c = legacy_client(&d, json!({"elicitation": {}})).await;
    let accept = json!({"action": "accept", "content": {"ok": true}});
    let (asked, last) = ask_and_answer(&c, "dual__ask", accept).await;
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    assert_eq!(asked["params"]["message"], "Confirm ask on dual?");
    assert!(
        asked["id"]
            .as_str()
            .is_some_and(|id| id.starts_with("junction-")),
        "a gateway-chosen id: {asked}"
    );
    assert_eq!(
        last["result"]["structuredContent"]["elicitation"],
        json!({"action": "accept", "content": {"ok": true}}),
        "the upstream's own request got the client's answer: {last}"
    );

    // The call ran once, on a handshake-era session (no MRTR round trip).
    let calls = d.up.calls("ask");
    assert_eq!(calls.len(), 1, "one call, answered mid-call");
    assert!(
        calls[0].header("mcp-session-id").is_some(),
        "{:?}",
        calls[0]
    );
    assert!(calls[0].body["params"].get("inputResponses").is_none());
    assert_eq!(d.up.requests_for("initialize").len(), 1);
    let answered = answers_upstream_got(&d.up);
    assert_eq!(answered.len(), 1, "{answered:?}");
    assert!(
        answered[0]["id"]
            .as_str()
            .is_some_and(|id| id.starts_with("mock-elicit-")),
        "the upstream got the answer under its own id: {answered:?}"
    );

    // A second call reuses the session.
    let (_, last) = ask_and_answer(&c, "dual__ask", json!({"action": "decline"})).await;
    assert_eq!(
        last["result"]["structuredContent"]["elicitation"],
        json!({"action": "decline"})
    );
    assert_eq!(d.up.requests_for("initialize").len(), 1);
}

#[tokio::test]
async fn a_dual_era_upstream_is_refused_what_the_legacy_client_did_not_declare() {
    let d = dual_world().await;
    let c = legacy_client(&d, json!({"sampling": {}})).await;
    let resp = c.call_tool("dual__ask", json!({})).await;
    let r = resp.result();
    assert_eq!(
        r["structuredContent"]["elicitation"]["code"],
        -32601,
        "the upstream was told at once that its client cannot answer: {}",
        resp.text()
    );
    assert!(
        !resp.is_sse(),
        "nothing was asked of the client: {}",
        resp.text()
    );
}

#[tokio::test]
async fn modern_clients_and_pinned_upstreams_stay_modern() {
    let d = dual_world().await;
    // A modern client of the dual-era upstream: MRTR, no session.
    let m = TestClient::modern(&d.gw.url("/mcp"))
        .with_capabilities(json!({"elicitation": {"form": {}}}));
    let first = m.call_tool("dual__ask", json!({})).await;
    assert_eq!(
        first.result()["resultType"],
        "input_required",
        "{}",
        first.text()
    );
    assert!(d.up.requests_for("initialize").is_empty());

    // A handshake-era client of the pinned upstream: its input_required is
    // bridged as before (asked, then retried with inputResponses).
    let c = legacy_client(&d, json!({"elicitation": {}})).await;
    let accept = json!({"action": "accept", "content": {"ok": true}});
    let (_, last) = ask_and_answer(&c, "pinned__ask", accept).await;
    assert_eq!(
        last["result"]["structuredContent"]["requestState"], REQUEST_STATE,
        "{last}"
    );
    assert!(d.pinned.requests_for("initialize").is_empty());
    let calls = d.pinned.calls("ask");
    assert_eq!(calls.len(), 2, "asked once, retried once");
    assert!(calls.iter().all(|c| c.header("mcp-session-id").is_none()));
}

/// The conformance fixture itself (a real mcp 2.x `MCPServer`, stateful SSE,
/// both eras) whose `test_elicitation` calls `ctx.elicit`, and a real 2.x
/// client in handshake-era mode with an elicitation callback, through Junction.
#[tokio::test]
async fn real_python_dual_era_server_elicits_a_legacy_client() {
    use junction_testkit::peers::python_server;
    let up = python_server("py-mcp2", "../conformance/fixture.py", &[]).await;
    let yaml = format!(
        "server: {{listen: 127.0.0.1:0}}\nupstreams:\n  - {{id: pd, url: {}}}\n",
        up.url
    );
    let gw = spawn_gateway(bin(), &yaml).await;
    for (answer, want) in [
        (
            "--accept-elicitation",
            r#"User response: action=accept, content={"response": "yes"}"#,
        ),
        (
            "--decline-elicitation",
            "User response: action=decline, content={}",
        ),
    ] {
        let report = py_client(
            &gw.url("/mcp"),
            "legacy",
            ("pd__test_elicitation", json!({"message": "Your name?"})),
            answer,
        )
        .await;
        let call = &report["calls"][0];
        assert_eq!(
            call["result"]["content"][0]["text"],
            json!(want),
            "{answer}: {call}\n--- gateway ---\n{}\n--- upstream ---\n{}",
            gw.stderr(),
            up.stderr()
        );
        let asked = call["elicitations"].as_array().cloned().unwrap_or_default();
        assert_eq!(asked.len(), 1, "asked exactly once: {call}");
        assert_eq!(asked[0]["message"], "Your name?");
    }
}
