//! Server requests across protocol eras, end to end through the built binary:
//! a handshake-era upstream's `elicitation/create` answered by a modern client
//! (InputRequiredResult + retry), and a modern upstream's `input_required`
//! answered by a handshake-era client (real server requests on its SSE stream).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use junction_testkit::{
    accept_all, spawn_gateway, Behavior, Gateway, MockSpec, MockTool, MockUpstream, TestClient,
    REQUEST_STATE,
};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(10);

fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_junction"))
}

struct World {
    old: MockUpstream,
    new: MockUpstream,
    gw: Gateway,
}

/// old: handshake-era HTTP upstream whose `ask` sends `elicitation/create`
/// mid-call; new: modern upstream whose `ask` returns `input_required`.
async fn world() -> World {
    let tools = || {
        vec![
            MockTool::new("ask", json!({"type": "object"}), Behavior::InputRequired),
            MockTool::new("ask2", json!({"type": "object"}), Behavior::InputRequired),
        ]
    };
    let old = MockUpstream::start(MockSpec::legacy("old", tools())).await;
    let new = MockUpstream::start(MockSpec::modern("new", tools())).await;
    let yaml = format!(
        "server:\n  listen: 127.0.0.1:0\nupstreams:\n  - id: old\n    url: {}\n  - id: new\n    url: {}\n",
        old.url, new.url
    );
    let gw = spawn_gateway(bin(), &yaml).await;
    World { old, new, gw }
}

/// Answers the old upstream received to its own server requests.
fn answers_upstream_got(u: &MockUpstream) -> Vec<Value> {
    u.requests()
        .into_iter()
        .filter(|r| r.body.get("method").is_none() && r.body.get("id").is_some())
        .map(|r| r.body)
        .collect()
}

fn modern_form_client(w: &World) -> TestClient {
    TestClient::modern(&w.gw.url("/mcp")).with_capabilities(json!({"elicitation": {"form": {}}}))
}

#[tokio::test]
async fn modern_client_answers_a_legacy_upstreams_elicitation_by_retrying() {
    let w = world().await;
    let c = modern_form_client(&w);
    let first = c.call_tool("old__ask", json!({"q": 1})).await;
    let r = first.result();
    assert_eq!(r["resultType"], "input_required", "{}", first.text());
    let requests = r["inputRequests"].as_object().expect("inputRequests");
    assert_eq!(requests.len(), 1, "{r}");
    let (_, asked) = requests.iter().next().unwrap();
    assert_eq!(asked["method"], "elicitation/create");
    assert_eq!(asked["params"]["message"], "Confirm ask on old?");
    let state = r["requestState"].as_str().expect("requestState").to_owned();
    assert!(
        answers_upstream_got(&w.old).is_empty(),
        "nothing answered before the client did"
    );

    let retry = c
        .request(
            "tools/call",
            json!({"name": "old__ask", "arguments": {"q": 1},
                   "inputResponses": accept_all(r, json!({"ok": true})), "requestState": state}),
        )
        .await;
    let done = retry.result();
    assert_eq!(done["resultType"], "complete", "{}", retry.text());
    assert_eq!(
        done["structuredContent"]["elicitation"],
        json!({"action": "accept", "content": {"ok": true}}),
        "the upstream's tool saw the client's answer: {done}"
    );
    assert_eq!(
        w.old.calls("ask").len(),
        1,
        "the retry continued the same upstream call instead of calling again"
    );

    // The held call is gone once answered: the same state again is refused.
    let replay = c
        .request(
            "tools/call",
            json!({"name": "old__ask", "arguments": {"q": 1},
                   "inputResponses": accept_all(r, json!({"ok": true})), "requestState": state}),
        )
        .await;
    assert_eq!(replay.error_code(), Some(-32602), "{}", replay.text());
    assert!(
        replay.text().contains("expired"),
        "says to call again: {}",
        replay.text()
    );
    assert_eq!(w.old.calls("ask").len(), 1);
}

#[tokio::test]
async fn a_capability_the_client_did_not_declare_is_never_asked_for() {
    let w = world().await;
    for caps in [
        json!({}),
        json!({"elicitation": {"url": {}}}),
        json!({"sampling": {}}),
    ] {
        let c = TestClient::modern(&w.gw.url("/mcp")).with_capabilities(caps.clone());
        let resp = c.call_tool("old__ask", json!({})).await;
        let r = resp.result();
        assert_eq!(
            r["resultType"],
            "complete",
            "caps {caps}: no input request may reach this client: {}",
            resp.text()
        );
        assert!(r.get("inputRequests").is_none());
        assert_eq!(
            r["structuredContent"]["elicitation"]["code"], -32601,
            "caps {caps}: the upstream was told its client cannot answer: {r}"
        );
    }
}

#[tokio::test]
async fn forged_foreign_and_unknown_request_states_never_reach_the_upstream() {
    let w = world().await;
    let c = modern_form_client(&w);
    let first = c.call_tool("old__ask", json!({})).await;
    let r = first.result().clone();
    assert_eq!(r["resultType"], "input_required", "{}", first.text());
    let state = r["requestState"].as_str().unwrap().to_owned();
    let responses = accept_all(&r, json!({"ok": true}));

    let mut forged = state.clone();
    forged.replace_range(4..5, if &state[4..5] == "A" { "B" } else { "A" });
    let attempts = [
        ("forged", "old__ask", json!(forged)),
        ("another tool", "old__ask2", json!(state)),
        ("made up", "old__ask", json!("not-a-token")),
    ];
    for (what, name, token) in attempts {
        let resp = c
            .request(
                "tools/call",
                json!({"name": name, "arguments": {}, "inputResponses": responses, "requestState": token}),
            )
            .await;
        assert_eq!(resp.error_code(), Some(-32602), "{what}: {}", resp.text());
        assert!(
            answers_upstream_got(&w.old).is_empty(),
            "{what}: the client's answers never reach the upstream"
        );
    }
    assert!(w.old.calls("ask2").is_empty());

    // The rightful retry still completes the held call.
    let ok = c
        .request(
            "tools/call",
            json!({"name": "old__ask", "arguments": {}, "inputResponses": responses, "requestState": state}),
        )
        .await;
    assert_eq!(ok.result()["resultType"], "complete", "{}", ok.text());
    assert_eq!(answers_upstream_got(&w.old).len(), 1);
}

#[tokio::test]
async fn a_retry_without_the_answer_is_asked_again() {
    let w = world().await;
    let c = modern_form_client(&w);
    let first = c.call_tool("old__ask", json!({})).await;
    let r = first.result().clone();
    let state = r["requestState"].as_str().unwrap().to_owned();
    let again = c
        .request(
            "tools/call",
            json!({"name": "old__ask", "arguments": {}, "inputResponses": {}, "requestState": state}),
        )
        .await;
    let r2 = again.result().clone();
    assert_eq!(r2["resultType"], "input_required", "{}", again.text());
    assert_eq!(r2["inputRequests"], r["inputRequests"]);
    let state2 = r2["requestState"].as_str().unwrap();
    let done = c
        .request(
            "tools/call",
            json!({"name": "old__ask", "arguments": {},
                   "inputResponses": accept_all(&r2, json!({"ok": false})), "requestState": state2}),
        )
        .await;
    assert_eq!(
        done.result()["structuredContent"]["elicitation"]["content"]["ok"],
        false,
        "{}",
        done.text()
    );
}

#[tokio::test]
async fn legacy_client_answers_a_modern_upstreams_input_required_over_sse() {
    let w = world().await;
    let c = TestClient::legacy(&w.gw.url("/mcp"), "2025-11-25")
        .with_capabilities(json!({"elicitation": {}}));
    assert_eq!(c.initialize().await.status, 200);
    let mut stream = c
        .stream(
            "tools/call",
            json!({"name": "new__ask", "arguments": {"q": 2}}),
            vec![],
        )
        .await;
    assert_eq!(stream.status, 200);
    let asked = stream.next(WAIT).await.expect("a server request");
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    assert_eq!(asked["params"]["message"], "Confirm ask on new?");
    let id = asked["id"].clone();
    assert!(id.is_string(), "a gateway-chosen id: {id}");

    let ack = c
        .respond(id, json!({"action": "accept", "content": {"ok": true}}))
        .await;
    assert_eq!(ack.status, 202, "{}", ack.text());

    let last = stream.next(WAIT).await.expect("the final result");
    let result = &last["result"];
    assert_eq!(
        result["structuredContent"]["inputResponses"]["confirm"],
        json!({"action": "accept", "content": {"ok": true}}),
        "{last}"
    );
    let calls = w.new.calls("ask");
    assert_eq!(calls.len(), 2, "asked once, retried once");
    assert_eq!(calls[1].body["params"]["requestState"], REQUEST_STATE);
    assert_ne!(
        calls[0].body["id"], calls[1].body["id"],
        "the retry has a new id"
    );

    // An answer nobody waits for is refused.
    let stray = c
        .respond(json!("junction-nope"), json!({"action": "decline"}))
        .await;
    assert_eq!(stray.error_code(), Some(-32602), "{}", stray.text());
}

#[tokio::test]
async fn legacy_client_without_the_capability_or_sse_gets_a_clear_error() {
    let w = world().await;
    let c = TestClient::legacy(&w.gw.url("/mcp"), "2025-11-25");
    assert_eq!(c.initialize().await.status, 200);
    let resp = c.call_tool("new__ask", json!({})).await;
    assert_eq!(resp.error_code(), Some(-32600), "{}", resp.text());
    let err = resp.error().unwrap();
    assert_eq!(err["data"]["missingCapabilities"], json!(["elicitation"]));
    assert!(err["message"].as_str().unwrap().contains("elicitation"));

    let c = TestClient::legacy(&w.gw.url("/mcp"), "2025-11-25")
        .with_capabilities(json!({"elicitation": {}}));
    assert_eq!(c.initialize().await.status, 200);
    let resp = c
        .request_with_headers(
            "tools/call",
            json!({"name": "new__ask", "arguments": {}}),
            vec![("accept".into(), "application/json".into())],
        )
        .await;
    assert_eq!(resp.error_code(), Some(-32600), "{}", resp.text());
    assert!(resp.text().contains("text/event-stream"), "{}", resp.text());
}

#[tokio::test]
async fn legacy_client_answers_a_legacy_upstreams_elicitation_relayed_on_its_stream() {
    let w = world().await;
    let c = TestClient::legacy(&w.gw.url("/mcp"), "2025-06-18")
        .with_capabilities(json!({"elicitation": {}}));
    assert_eq!(c.initialize().await.status, 200);
    let mut stream = c
        .stream(
            "tools/call",
            json!({"name": "old__ask", "arguments": {}}),
            vec![],
        )
        .await;
    let asked = stream.next(WAIT).await.expect("a server request");
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    let ack = c
        .respond(asked["id"].clone(), json!({"action": "decline"}))
        .await;
    assert_eq!(ack.status, 202, "{}", ack.text());
    let last = stream.next(WAIT).await.expect("the final result");
    assert_eq!(
        last["result"]["structuredContent"]["elicitation"],
        json!({"action": "decline"}),
        "{last}"
    );
}

#[path = "bridge/dual.rs"]
mod dual;

#[path = "bridge/unrelated.rs"]
mod unrelated;

/// Runs the 2.x Python client (tests/interop/python/client.py); its JSON report.
async fn py_client(url: &str, mode: &str, call: (&str, Value), answer: &str) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/python/client.py");
    let out = tokio::process::Command::new(junction_testkit::peers::python("py-mcp2"))
        .arg(script)
        .args(["--url", url, "--mode", mode, "--call", call.0, "--args"])
        .arg(call.1.to_string())
        .arg(answer)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(120), out)
        .await
        .expect("client finished")
        .expect("client ran");
    assert!(
        out.status.success(),
        "client ({mode}) failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    serde_json::from_slice(&out.stdout).expect("client report is JSON")
}

/// Real SDK peers, both directions: a 1.x FastMCP server whose tool calls
/// `ctx.elicit` (a server->client request) answered by a 2.x client in
/// 2026-07-28 mode (InputRequiredResult + retry through Junction), and a 2.x
/// server's MRTR `py_confirm` answered by a 2.x client in handshake-era mode
/// (a real `elicitation/create` on its SSE stream).
#[tokio::test]
async fn real_python_sdk_peers_answer_elicitations_across_eras() {
    use junction_testkit::peers::python_server;
    let legacy_up = python_server("py-mcp1", "bridge_peers.py", &[]).await;
    let modern_up = python_server("py-mcp2", "server_modern.py", &["--stateless", "--json"]).await;
    let yaml = format!(
        "server: {{listen: 127.0.0.1:0}}\nupstreams:\n  - {{id: pb, url: {}}}\n  - {{id: pm, url: {}}}\n",
        legacy_up.url, modern_up.url
    );
    let gw = spawn_gateway(bin(), &yaml).await;
    let url = gw.url("/mcp");
    let cases = [
        ("2026-07-28", "pb__bridge_confirm", "disk"),
        ("legacy", "pm__py_confirm", "db"),
    ];
    for (mode, tool, item) in cases {
        for (answer, want) in [
            ("--accept-elicitation", "confirmed"),
            ("--decline-elicitation", "declined"),
        ] {
            let report = py_client(&url, mode, (tool, json!({"item": item})), answer).await;
            let call = &report["calls"][0];
            assert_eq!(
                call["result"]["content"][0]["text"],
                json!(format!("{want} {item}")),
                "{mode} {tool} {answer}: {call}\n--- gateway ---\n{}\n--- upstream ---\n{}",
                gw.stderr(),
                legacy_up.stderr()
            );
            let asked = call["elicitations"].as_array().cloned().unwrap_or_default();
            assert_eq!(asked.len(), 1, "{mode}: asked exactly once: {call}");
            assert_eq!(asked[0]["message"], json!(format!("Confirm {item}?")));
        }
    }
}

/// A handshake-era upstream asking three things at once: the client gets the
/// ones it declared in one InputRequiredResult; the upstream is told at once
/// that sampling is not available; the retry answers the rest.
#[tokio::test]
async fn requests_sent_together_reach_the_client_in_one_round() {
    use junction_testkit::mock::AskingUpstream;
    let up = AskingUpstream::start(vec![
        (
            "elicitation/create",
            json!({"message": "Name?", "requestedSchema": {"type": "object",
                   "properties": {"name": {"type": "string"}}}}),
        ),
        (
            "sampling/createMessage",
            json!({"messages": [], "maxTokens": 5}),
        ),
        ("roots/list", json!({})),
    ])
    .await;
    let yaml = format!(
        "server:\n  listen: 127.0.0.1:0\nupstreams:\n  - id: asker\n    url: {}\n    protocol: legacy\n",
        up.url
    );
    let gw = spawn_gateway(bin(), &yaml).await;
    let c = TestClient::modern(&gw.url("/mcp"))
        .with_capabilities(json!({"elicitation": {}, "roots": {}}));
    let first = c.call_tool("asker__ask_all", json!({})).await;
    let r = first.result().clone();
    assert_eq!(r["resultType"], "input_required", "{}", first.text());
    let mut methods: Vec<&str> = r["inputRequests"]
        .as_object()
        .expect("inputRequests")
        .values()
        .map(|v| v["method"].as_str().unwrap_or(""))
        .collect();
    methods.sort();
    assert_eq!(methods, ["elicitation/create", "roots/list"], "{r}");
    let refused: Vec<Value> = up.answers();
    assert_eq!(
        refused.len(),
        1,
        "only sampling answered so far: {refused:?}"
    );
    assert_eq!(refused[0]["id"], "ask-1");
    assert_eq!(refused[0]["error"]["code"], -32601);

    let responses: serde_json::Map<String, Value> = r["inputRequests"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| {
            let answer = if v["method"] == "roots/list" {
                json!({"roots": [{"uri": "file:///work", "name": "work"}]})
            } else {
                json!({"action": "accept", "content": {"name": "Ada"}})
            };
            (k.clone(), answer)
        })
        .collect();
    let done = c
        .request(
            "tools/call",
            json!({"name": "asker__ask_all", "arguments": {}, "inputResponses": responses,
                   "requestState": r["requestState"]}),
        )
        .await;
    let answers = &done.result()["structuredContent"]["answers"];
    assert_eq!(
        answers["ask-0"]["content"]["name"],
        "Ada",
        "{}",
        done.text()
    );
    assert_eq!(answers["ask-1"]["code"], -32601);
    assert_eq!(answers["ask-2"]["roots"][0]["uri"], "file:///work");
    assert_eq!(up.calls(), 1);
}

/// The same 1.x FastMCP server on stdio (Junction spawns it): its
/// `elicitation/create` on stdout belongs to the one call in flight, and the
/// answer goes back on its stdin.
#[tokio::test]
async fn a_stdio_legacy_servers_elicitation_is_answered_by_a_modern_client() {
    let python = junction_testkit::peers::python("py-mcp1");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/python/bridge_peers.py");
    let yaml = format!(
        "server:\n  listen: 127.0.0.1:0\nupstreams:\n  - id: pb\n    command: [{}, {}, \"0\", --stdio]\n    protocol: legacy\n",
        python.display(),
        script.display()
    );
    let gw = spawn_gateway(bin(), &yaml).await;
    let c = TestClient::modern(&gw.url("/mcp")).with_capabilities(json!({"elicitation": {}}));
    let first = c
        .call_tool("pb__bridge_confirm", json!({"item": "tape"}))
        .await;
    let r = first.result().clone();
    assert_eq!(
        r["resultType"],
        "input_required",
        "{}\n{}",
        first.text(),
        gw.stderr()
    );
    let done = c
        .request(
            "tools/call",
            json!({"name": "pb__bridge_confirm", "arguments": {"item": "tape"},
                   "inputResponses": accept_all(&r, json!({"ok": true})),
                   "requestState": r["requestState"]}),
        )
        .await;
    assert_eq!(
        done.result()["content"][0]["text"],
        "confirmed tape",
        "{}",
        done.text()
    );
}

mod foreign_principal {
    use super::*;

    const ISSUER: &str = "https://idp.junction.test";
    const PUBLIC: &str = "http://junction.test";

    fn keys() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/policy/tests/keys")
    }

    fn bearer(sub: &str) -> String {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let claims =
            json!({"iss": ISSUER, "sub": sub, "aud": PUBLIC, "iat": now, "exp": now + 600});
        let pem = std::fs::read(keys().join("rsa1.pem")).unwrap();
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256);
        header.kid = Some("k1".into());
        let t = jsonwebtoken::encode(
            &header,
            &claims,
            &jsonwebtoken::EncodingKey::from_rsa_pem(&pem).unwrap(),
        )
        .unwrap();
        format!("Bearer {t}")
    }

    /// A held call belongs to the caller it was held for: another
    /// authenticated caller with the same requestState is refused, and the
    /// upstream never sees that caller's answers.
    #[tokio::test]
    async fn another_principal_cannot_answer_a_held_call() {
        let old = MockUpstream::start(MockSpec::legacy(
            "old",
            vec![MockTool::new(
                "ask",
                json!({"type": "object"}),
                Behavior::InputRequired,
            )],
        ))
        .await;
        let dir = tempfile::tempdir().unwrap();
        let jwks: Value =
            serde_json::from_slice(&std::fs::read(keys().join("public-jwk.json")).unwrap())
                .unwrap();
        let mut k = jwks["rsa1"].clone();
        k["kid"] = json!("k1");
        k["alg"] = json!("RS256");
        k["use"] = json!("sig");
        let jwks_path = dir.path().join("jwks.json");
        std::fs::write(&jwks_path, json!({"keys": [k]}).to_string()).unwrap();
        let yaml = format!(
            "server: {{listen: 127.0.0.1:0, public_url: \"{PUBLIC}\"}}\nupstreams:\n  - {{id: old, url: \"{}\"}}\nauth:\n  jwt: {{issuer: \"{ISSUER}\", jwks_file: \"{}\"}}\n",
            old.url,
            jwks_path.display()
        );
        let gw = spawn_gateway(bin(), &yaml).await;
        let caps = json!({"elicitation": {}});
        let alice = TestClient::modern(&gw.url("/mcp"))
            .with_capabilities(caps.clone())
            .with_header("authorization", &bearer("alice"));
        let bob = TestClient::modern(&gw.url("/mcp"))
            .with_capabilities(caps)
            .with_header("authorization", &bearer("bob"));
        let first = alice.call_tool("old__ask", json!({})).await;
        let r = first.result().clone();
        assert_eq!(r["resultType"], "input_required", "{}", first.text());
        let retry = json!({"name": "old__ask", "arguments": {},
                           "inputResponses": accept_all(&r, json!({"ok": true})),
                           "requestState": r["requestState"]});
        let stolen = bob.request("tools/call", retry.clone()).await;
        assert_eq!(stolen.error_code(), Some(-32602), "{}", stolen.text());
        assert!(answers_upstream_got(&old).is_empty());
        let mine = alice.request("tools/call", retry).await;
        assert_eq!(
            mine.result()["structuredContent"]["elicitation"]["action"],
            "accept",
            "{}",
            mine.text()
        );
    }
}
