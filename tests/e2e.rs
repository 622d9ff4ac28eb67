//! End-to-end: the built `junction` binary on port 0 in front of testkit mock
//! upstreams (one modern HTTP, one handshake-era HTTP) and the demo stdio server,
//! driven by a modern and a handshake-era client.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use junction_testkit::{
    spawn_gateway, Behavior, Gateway, MockSpec, MockTool, MockUpstream, TestClient, REQUEST_STATE,
};
use serde_json::{json, Value};

fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_junction"))
}

fn forecast_tool() -> MockTool {
    MockTool::new(
        "forecast",
        json!({"type": "object", "properties": {
            "city": {"type": "string", "x-mcp-header": "City"},
            "days": {"type": "integer"}}, "required": ["city"]}),
        Behavior::Echo,
    )
}

fn obj() -> Value {
    json!({"type": "object"})
}

struct World {
    alpha: MockUpstream,
    beta: MockUpstream,
    gw: Gateway,
}

/// alpha: modern HTTP; beta: handshake-era HTTP; gamma: the demo `notes` stdio
/// server (handshake era) spawned from the same binary.
async fn world() -> World {
    let alpha = MockUpstream::start(MockSpec::modern(
        "alpha",
        vec![
            MockTool::echo("echo"),
            forecast_tool(),
            MockTool::new("mrtr", obj(), Behavior::InputRequired),
            MockTool::new("progress", obj(), Behavior::Progress { steps: 3 }),
            MockTool::new(
                "fails",
                obj(),
                Behavior::Error {
                    code: -32050,
                    message: "upstream says no".into(),
                },
            ),
        ],
    ))
    .await;
    let beta = MockUpstream::start(MockSpec::legacy(
        "beta",
        vec![
            MockTool::echo("echo"),
            MockTool::echo("zeta"),
            // Annotation inside `items`: invalid, must be dropped from the catalog.
            MockTool::new(
                "broken",
                json!({"type": "object", "properties": {"xs": {"type": "array",
                    "items": {"type": "string", "x-mcp-header": "X"}}}}),
                Behavior::Echo,
            ),
        ],
    ))
    .await;
    let yaml = format!(
        r#"
server:
  listen: 127.0.0.1:0
upstreams:
  - id: alpha
    url: {alpha}
  - id: beta
    url: {beta}
  - id: gamma
    command: [junction, demo, notes]
routes:
  - path: /mcp
  - path: /solo
    upstreams: [alpha]
    prefix: never
  - path: /some
    upstreams: ["*"]
    exclude: ["*__zeta", "gamma__*"]
limits:
  max_body_bytes: 64KiB
"#,
        alpha = alpha.url,
        beta = beta.url
    );
    let gw = spawn_gateway(bin(), &yaml).await;
    World { alpha, beta, gw }
}

fn names(resp: &Value) -> Vec<String> {
    resp["tools"]
        .as_array()
        .expect("tools array")
        .iter()
        .map(|t| t["name"].as_str().unwrap_or("").to_owned())
        .collect()
}

const EXPECTED: &[&str] = &[
    "alpha__echo",
    "alpha__fails",
    "alpha__forecast",
    "alpha__mrtr",
    "alpha__progress",
    "beta__echo",
    "beta__zeta",
    "gamma__add_note",
    "gamma__countdown",
    "gamma__list_notes",
];

#[tokio::test]
async fn modern_and_legacy_clients_see_the_same_merged_catalog() {
    let w = world().await;
    let modern = TestClient::modern(&w.gw.url("/mcp"));
    let m = modern.request("tools/list", json!({})).await;
    assert_eq!(m.status, 200, "{}", w.gw.stderr());
    assert_eq!(
        names(m.result()),
        EXPECTED,
        "config order, then tools by name; the invalid tool is dropped"
    );
    assert_eq!(m.result()["resultType"], "complete");
    assert!(m.result()["ttlMs"].is_u64());
    assert!(m.result()["cacheScope"].is_string());
    assert!(m.result()["_meta"].get("dev.junction/degraded").is_none());

    for version in ["2025-11-25", "2025-06-18", "2025-03-26"] {
        let legacy = TestClient::legacy(&w.gw.url("/mcp"), version);
        let init = legacy.initialize().await;
        assert_eq!(init.status, 200);
        assert_eq!(init.result()["protocolVersion"], version);
        assert!(legacy.session_id().is_some(), "Junction mints a session id");
        let l = legacy.request("tools/list", json!({})).await;
        assert_eq!(names(l.result()), EXPECTED, "legacy client {version}");
        // Same tool definitions, byte for byte in content.
        assert_eq!(l.result()["tools"], m.result()["tools"]);
    }

    // The same bytes twice: the order is deterministic.
    let again = modern.request("tools/list", json!({})).await;
    assert_eq!(again.result()["tools"], m.result()["tools"]);
}

#[tokio::test]
async fn calls_reach_the_right_upstream_with_the_original_name() {
    let w = world().await;
    let c = TestClient::modern(&w.gw.url("/mcp"))
        .with_header("authorization", "Bearer client-secret-token")
        .with_header("cookie", "session=abc")
        .with_header(
            "traceparent",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        );
    let a = c.call_tool("alpha__echo", json!({"x": 1})).await;
    assert_eq!(a.status, 200);
    assert_eq!(a.result()["structuredContent"]["upstream"], "alpha");
    assert_eq!(a.result()["structuredContent"]["tool"], "echo");
    assert_eq!(
        a.result()["structuredContent"]["arguments"],
        json!({"x": 1})
    );
    let b = c.call_tool("beta__echo", json!({"y": "two"})).await;
    assert_eq!(b.result()["structuredContent"]["upstream"], "beta");
    assert_eq!(
        b.result()["resultType"],
        "complete",
        "added for a handshake-era upstream"
    );
    let g = c
        .call_tool("gamma__add_note", json!({"text": "hello"}))
        .await;
    assert_eq!(
        g.result()["structuredContent"]["text"],
        "hello",
        "{}",
        g.text()
    );

    let seen = w.alpha.calls("echo");
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].body["params"]["name"], "echo");
    assert_eq!(seen[0].header("mcp-name"), Some("echo"));
    for r in w.alpha.requests().iter().chain(w.beta.requests().iter()) {
        assert!(
            r.header("authorization").is_none(),
            "client token must never reach an upstream"
        );
        assert!(r.header("cookie").is_none());
    }
    assert_eq!(
        seen[0].header("traceparent"),
        Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
        "trace context is on the default forward list"
    );
    let beta_calls = w.beta.calls("echo");
    assert_eq!(beta_calls[0].body["params"]["name"], "echo");
}

#[tokio::test]
async fn upstream_json_rpc_errors_pass_through_unchanged() {
    let w = world().await;
    let c = TestClient::modern(&w.gw.url("/mcp"));
    let r = c.call_tool("alpha__fails", json!({})).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.error_code(), Some(-32050));
    assert_eq!(r.error().unwrap()["message"], "upstream says no");
}

#[tokio::test]
async fn mcp_param_headers_checked_downstream_and_regenerated_upstream() {
    let w = world().await;
    let c = TestClient::modern(&w.gw.url("/mcp"));
    let args = json!({"city": "Zürich", "days": 2});
    let ok = c
        .request_with_headers(
            "tools/call",
            json!({"name": "alpha__forecast", "arguments": args}),
            vec![("mcp-param-city".into(), "=?base64?WsO8cmljaA==?=".into())],
        )
        .await;
    assert_eq!(ok.status, 200, "{}", ok.text());
    assert_eq!(
        ok.result()["structuredContent"]["arguments"]["city"],
        "Zürich"
    );
    let up = w.alpha.calls("forecast");
    assert_eq!(
        up[0].header("mcp-param-city"),
        Some("=?base64?WsO8cmljaA==?=")
    );
    assert_eq!(up[0].header("mcp-name"), Some("forecast"));

    let missing = c
        .call_tool("alpha__forecast", json!({"city": "Oslo"}))
        .await;
    assert_eq!(missing.status, 400);
    assert_eq!(missing.error_code(), Some(-32020));
    let wrong = c
        .request_with_headers(
            "tools/call",
            json!({"name": "alpha__forecast", "arguments": {"city": "Oslo"}}),
            vec![("mcp-param-city".into(), "Bergen".into())],
        )
        .await;
    assert_eq!(wrong.error_code(), Some(-32020));
    assert_eq!(
        w.alpha.calls("forecast").len(),
        1,
        "rejected calls never reach the upstream"
    );
}

#[tokio::test]
async fn input_required_round_trips_the_upstream_request_state_byte_for_byte() {
    let w = world().await;
    let c = TestClient::modern(&w.gw.url("/mcp"))
        .with_capabilities(json!({"elicitation": {"form": {}}}));
    let first = c.call_tool("alpha__mrtr", json!({"q": 1})).await;
    assert_eq!(
        first.result()["resultType"],
        "input_required",
        "{}",
        first.text()
    );
    let state = first.result()["requestState"]
        .as_str()
        .expect("requestState")
        .to_owned();
    assert_ne!(
        state, REQUEST_STATE,
        "the upstream's state travels inside Junction's sealed envelope"
    );
    let keys: Vec<&String> = first.result()["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    let responses: serde_json::Map<String, Value> = keys
        .iter()
        .map(|k| {
            (
                (*k).clone(),
                json!({"action": "accept", "content": {"ok": true}}),
            )
        })
        .collect();

    let retry = c
        .request(
            "tools/call",
            json!({"name": "alpha__mrtr", "arguments": {"q": 1}, "inputResponses": responses, "requestState": state}),
        )
        .await;
    assert_eq!(retry.result()["resultType"], "complete", "{}", retry.text());
    let calls = w.alpha.calls("mrtr");
    assert_eq!(calls.len(), 2);
    assert_eq!(
        calls[1].body["params"]["requestState"], REQUEST_STATE,
        "same bytes arrive upstream"
    );
    assert_eq!(
        calls[1].body["params"]["inputResponses"],
        Value::Object(responses.clone())
    );

    // A tampered envelope, or one used for another tool, is refused before the upstream.
    let mut tampered = state.clone();
    tampered.replace_range(5..6, if &state[5..6] == "A" { "B" } else { "A" });
    let bad = c
        .request("tools/call", json!({"name": "alpha__mrtr", "arguments": {}, "inputResponses": responses, "requestState": tampered}))
        .await;
    assert_eq!(bad.error_code(), Some(-32602));
    let foreign = c
        .request(
            "tools/call",
            json!({"name": "alpha__echo", "arguments": {}, "requestState": state}),
        )
        .await;
    assert_eq!(foreign.error_code(), Some(-32602));
    assert_eq!(w.alpha.calls("mrtr").len(), 2);
    assert!(w.alpha.calls("echo").is_empty());
}

#[tokio::test]
async fn progress_notifications_arrive_before_the_result() {
    let w = world().await;
    let c = TestClient::modern(&w.gw.url("/mcp"));
    for (tool, args, steps) in [
        ("alpha__progress", json!({}), 3),
        ("gamma__countdown", json!({"n": 4}), 4),
    ] {
        let r = c
            .request(
                "tools/call",
                json!({"name": tool, "arguments": args, "_meta": {"progressToken": "tok-7"}}),
            )
            .await;
        assert!(r.is_sse(), "{tool}: progress streams as SSE");
        let methods: Vec<&str> = r
            .events
            .iter()
            .map(|e| e["method"].as_str().unwrap_or("result"))
            .collect();
        let mut expected = vec!["notifications/progress"; steps];
        expected.push("result");
        assert_eq!(methods, expected, "{tool}");
        for e in &r.events[..steps] {
            assert_eq!(
                e["params"]["progressToken"], "tok-7",
                "{tool}: the client's own token comes back"
            );
        }
        assert!(r.events[steps]["result"].is_object());
    }
}

#[tokio::test]
async fn an_unreachable_upstream_is_named_and_the_others_stay_listed() {
    let up = MockUpstream::start(MockSpec::modern("up", vec![MockTool::echo("echo")])).await;
    let down = MockUpstream::start(MockSpec::legacy("down", vec![MockTool::echo("echo")])).await;
    down.set_down(true).await;
    let yaml = format!(
        "server: {{listen: 127.0.0.1:0}}\nupstreams:\n  - {{id: up, url: {}}}\n  - {{id: down, url: {}, timeout: 2s}}\n",
        up.url, down.url
    );
    let gw = spawn_gateway(bin(), &yaml).await;
    let c = TestClient::modern(&gw.url("/mcp"));
    let r = c.request("tools/list", json!({})).await;
    assert_eq!(names(r.result()), vec!["up__echo"]);
    assert_eq!(
        r.result()["_meta"]["dev.junction/degraded"],
        json!(["down"])
    );
    let call = c.call_tool("down__echo", json!({})).await;
    assert_eq!(call.error_code(), Some(-31001), "{}", call.text());
    assert_eq!(call.error().unwrap()["data"]["origin"], "gateway");
    let ok = c.call_tool("up__echo", json!({})).await;
    assert_eq!(ok.result()["structuredContent"]["upstream"], "up");
}

#[tokio::test]
async fn routes_with_prefix_never_and_exclude_globs() {
    let w = world().await;
    let solo = TestClient::modern(&w.gw.url("/solo"));
    let r = solo.request("tools/list", json!({})).await;
    assert_eq!(
        names(r.result()),
        vec!["echo", "fails", "forecast", "mrtr", "progress"]
    );
    let call = solo.call_tool("echo", json!({"z": true})).await;
    assert_eq!(call.result()["structuredContent"]["tool"], "echo");
    let some = TestClient::modern(&w.gw.url("/some"));
    let r = some.request("tools/list", json!({})).await;
    assert_eq!(
        names(r.result()),
        vec![
            "alpha__echo",
            "alpha__fails",
            "alpha__forecast",
            "alpha__mrtr",
            "alpha__progress",
            "beta__echo"
        ]
    );
    let hidden = some.call_tool("beta__zeta", json!({})).await;
    assert_eq!(
        hidden.error_code(),
        Some(-32602),
        "an excluded tool cannot be called on that route"
    );
}

#[tokio::test]
async fn modern_requests_are_validated_before_anything_trusts_them() {
    let w = world().await;
    let url = w.gw.url("/mcp");
    let c = TestClient::modern(&url);

    let no_meta = c
        .raw(
            "POST",
            vec![
                ("content-type".into(), "application/json".into()),
                ("mcp-protocol-version".into(), "2026-07-28".into()),
                ("mcp-method".into(), "tools/list".into()),
            ],
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#.to_vec(),
        )
        .await;
    assert_eq!((no_meta.status, no_meta.error_code()), (400, Some(-32602)));

    let wrong_method = c
        .request_with_headers(
            "tools/list",
            json!({}),
            vec![("mcp-method".into(), "tools/call".into())],
        )
        .await;
    assert_eq!(
        (wrong_method.status, wrong_method.error_code()),
        (400, Some(-32020))
    );
    let wrong_version = c
        .request_with_headers(
            "tools/list",
            json!({}),
            vec![("mcp-protocol-version".into(), "2026-01-01".into())],
        )
        .await;
    assert_eq!(
        (wrong_version.status, wrong_version.error_code()),
        (400, Some(-32020))
    );
    let wrong_name = c
        .request_with_headers(
            "tools/call",
            json!({"name": "alpha__echo"}),
            vec![("mcp-name".into(), "beta__echo".into())],
        )
        .await;
    assert_eq!(
        (wrong_name.status, wrong_name.error_code()),
        (400, Some(-32020))
    );
    let bad_sentinel = c
        .request_with_headers(
            "tools/call",
            json!({"name": "alpha__echo"}),
            vec![("mcp-name".into(), "=?base64?!!!?=".into())],
        )
        .await;
    assert_eq!(
        (bad_sentinel.status, bad_sentinel.error_code()),
        (400, Some(-32020))
    );

    let unsupported = c
        .request(
            "tools/list",
            json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2099-01-01"}}),
        )
        .await;
    assert_eq!(
        (unsupported.status, unsupported.error_code()),
        (400, Some(-32022))
    );
    let data = &unsupported.error().unwrap()["data"];
    assert!(data["supported"]
        .as_array()
        .unwrap()
        .contains(&json!("2026-07-28")));
    assert_eq!(data["requested"], "2099-01-01");

    let unknown = c.request("frobnicate/now", json!({})).await;
    assert_eq!((unknown.status, unknown.error_code()), (404, Some(-32601)));
    let unknown_tool = c.call_tool("alpha__nope", json!({})).await;
    assert_eq!(
        (unknown_tool.status, unknown_tool.error_code()),
        (200, Some(-32602))
    );
    let forged_cursor = c
        .request("tools/list", json!({"cursor": "bm90LWEtY3Vyc29y"}))
        .await;
    assert_eq!(forged_cursor.error_code(), Some(-32602));

    let batch = c
        .raw(
            "POST",
            vec![("content-type".into(), "application/json".into())],
            b"[{}]".to_vec(),
        )
        .await;
    assert_eq!((batch.status, batch.error_code()), (400, Some(-32600)));
    let not_json = c
        .raw(
            "POST",
            vec![("content-type".into(), "application/json".into())],
            b"{nope".to_vec(),
        )
        .await;
    assert_eq!(
        (not_json.status, not_json.error_code()),
        (400, Some(-32700))
    );
    let big = vec![b' '; 100 * 1024];
    let too_big = c
        .raw(
            "POST",
            vec![("content-type".into(), "application/json".into())],
            big,
        )
        .await;
    assert_eq!(too_big.status, 413);
    let evil = c
        .request_with_headers(
            "tools/list",
            json!({}),
            vec![("origin".into(), "http://evil.example".into())],
        )
        .await;
    assert_eq!(evil.status, 403);

    assert_eq!(c.raw("GET", vec![], vec![]).await.status, 405);
    assert_eq!(c.raw("DELETE", vec![], vec![]).await.status, 405);

    let discover = c.request("server/discover", json!({})).await;
    let d = discover.result();
    assert_eq!(d["resultType"], "complete");
    assert!(d["supportedVersions"]
        .as_array()
        .unwrap()
        .contains(&json!("2026-07-28")));
    assert!(d["supportedVersions"]
        .as_array()
        .unwrap()
        .contains(&json!("2025-11-25")));
    assert!(d["ttlMs"].is_u64() && d["cacheScope"] == "public");
    assert!(d["capabilities"]["tools"].is_object());
    assert!(w.alpha.requests_for("frobnicate/now").is_empty());
}

#[tokio::test]
async fn legacy_sessions_are_sealed_tokens() {
    let w = world().await;
    let url = w.gw.url("/mcp");
    let c = TestClient::legacy(&url, "2025-11-25");
    // Unknown versions negotiate down to the newest handshake-era version.
    let odd = TestClient::legacy(&url, "2024-01-01");
    assert_eq!(
        odd.initialize().await.result()["protocolVersion"],
        "2025-11-25"
    );

    c.initialize().await;
    assert_eq!(c.request("ping", json!({})).await.result(), &json!({}));
    let sid = c.session_id().unwrap();

    let forged = TestClient::legacy(&url, "2025-11-25");
    forged.set_session_id(Some(format!("{sid}x")));
    assert_eq!(forged.request("tools/list", json!({})).await.status, 404);
    forged.set_session_id(Some("made-up".into()));
    assert_eq!(forged.request("tools/list", json!({})).await.status, 404);
    forged.set_session_id(None);
    assert_eq!(forged.request("tools/list", json!({})).await.status, 400);

    // A second gateway with the same key accepts the first one's session id.
    let unknown = c.request("example/unknown", json!({})).await;
    assert_eq!(
        (unknown.status, unknown.error_code()),
        (200, Some(-32601)),
        "legacy 404 would mean 'session expired'"
    );
    // DELETE ends the session (on this replica): from then on it is unknown.
    assert_eq!(c.delete_session().await.status, 200);
    assert_eq!(c.request("tools/list", json!({})).await.status, 404);
    assert_eq!(c.delete_session().await.status, 404);
    let forged_delete = TestClient::legacy(&url, "2025-11-25");
    forged_delete.set_session_id(Some("made-up".into()));
    assert_eq!(forged_delete.delete_session().await.status, 404);
}

#[tokio::test]
async fn sessions_and_request_state_work_across_replicas_with_a_shared_key() {
    let up = MockUpstream::start(MockSpec::modern(
        "up",
        vec![MockTool::new("mrtr", obj(), Behavior::InputRequired)],
    ))
    .await;
    let yaml = format!(
        "server: {{listen: 127.0.0.1:0}}\nupstreams:\n  - {{id: up, url: {}}}\nrequest_state: {{secret_env: JUNCTION_TEST_KEY}}\n",
        up.url
    );
    let key = [(
        "JUNCTION_TEST_KEY",
        "k3y-k3y-k3y-k3y-k3y-k3y-k3y-k3y-k3y-k3y",
    )];
    let a = junction_testkit::spawn_gateway_with_env(bin(), &yaml, &key).await;
    let b = junction_testkit::spawn_gateway_with_env(bin(), &yaml, &key).await;
    let la = TestClient::legacy(&a.url("/mcp"), "2025-06-18");
    la.initialize().await;
    let lb = TestClient::legacy(&b.url("/mcp"), "2025-06-18");
    lb.set_session_id(la.session_id());
    assert_eq!(
        lb.request("tools/list", json!({})).await.status,
        200,
        "replica b opens replica a's session id"
    );

    let ma = TestClient::modern(&a.url("/mcp")).with_capabilities(json!({"elicitation": {}}));
    let mb = TestClient::modern(&b.url("/mcp")).with_capabilities(json!({"elicitation": {}}));
    let first = ma.call_tool("up__mrtr", json!({})).await;
    let state = first.result()["requestState"].clone();
    let responses = junction_testkit::accept_all(first.result(), json!({}));
    let retry = mb
        .request("tools/call", json!({"name": "up__mrtr", "arguments": {}, "inputResponses": responses, "requestState": state}))
        .await;
    assert_eq!(retry.result()["resultType"], "complete", "{}", retry.text());
}

#[tokio::test]
async fn a_legacy_upstream_session_that_expired_is_reopened() {
    let w = world().await;
    let c = TestClient::modern(&w.gw.url("/mcp"));
    assert!(c
        .call_tool("beta__echo", json!({}))
        .await
        .result()
        .is_object());
    w.beta.expire_sessions();
    let again = c.call_tool("beta__echo", json!({"n": 2})).await;
    assert_eq!(
        again.result()["structuredContent"]["arguments"],
        json!({"n": 2}),
        "{}",
        again.text()
    );
    assert_eq!(w.beta.requests_for("initialize").len(), 2);
}

#[tokio::test]
async fn closing_the_stream_cancels_the_upstream_call() {
    let up = MockUpstream::start(
        MockSpec::modern(
            "up",
            vec![MockTool::new(
                "slow",
                obj(),
                Behavior::Slow(Duration::from_secs(20)),
            )],
        )
        .with_sse(true),
    )
    .await;
    let yaml = format!(
        "server: {{listen: 127.0.0.1:0}}\nupstreams:\n  - {{id: up, url: {}}}\n",
        up.url
    );
    let gw = spawn_gateway(bin(), &yaml).await;
    let c = TestClient::modern(&gw.url("/mcp"));
    // Hang up while the call is in flight upstream (before any response byte):
    // the request future is dropped, which closes the connection.
    let hung_up = tokio::time::timeout(
        Duration::from_secs(2),
        c.stream(
            "tools/call",
            json!({"name": "up__slow", "arguments": {}}),
            vec![],
        ),
    )
    .await;
    assert!(hung_up.is_err(), "the slow call cannot have answered yet");
    assert_eq!(up.calls("slow").len(), 1);
    let cancelled = up.saw_cancellation(Duration::from_secs(5)).await;
    assert!(
        cancelled,
        "the upstream saw its stream closed: {}",
        gw.stderr()
    );
}

#[tokio::test]
async fn an_upstream_missing_capability_error_reaches_a_modern_client_as_http_400() {
    let up = MockUpstream::start(MockSpec::modern(
        "up",
        vec![MockTool::new(
            "needs_sampling",
            obj(),
            Behavior::Error {
                code: -32021,
                message: "this tool needs sampling".into(),
            },
        )],
    ))
    .await;
    let yaml = format!(
        "server: {{listen: 127.0.0.1:0}}\nupstreams:\n  - {{id: up, url: {}}}\n",
        up.url
    );
    let gw = spawn_gateway(bin(), &yaml).await;
    let c = TestClient::modern(&gw.url("/mcp"));
    let r = c.call_tool("up__needs_sampling", json!({})).await;
    assert_eq!(
        r.status,
        400,
        "-32021 is an HTTP 400 like -32020/-32022: {}",
        r.text()
    );
    assert_eq!(r.error_code(), Some(-32021));
    assert_eq!(r.body["error"]["message"], "this tool needs sampling");
}

#[tokio::test]
async fn a_client_that_lists_sse_first_gets_sse_and_errors_keep_their_status() {
    let up = MockUpstream::start(MockSpec::modern("up", vec![MockTool::echo("echo")])).await;
    let yaml = format!(
        "server: {{listen: 127.0.0.1:0}}\nupstreams:\n  - {{id: up, url: {}}}\n",
        up.url
    );
    let gw = spawn_gateway(bin(), &yaml).await;
    let c = TestClient::modern(&gw.url("/mcp"));
    let sse_first = vec![(
        "accept".to_string(),
        "text/event-stream, application/json".to_string(),
    )];
    for (method, params) in [
        ("tools/list", json!({})),
        (
            "tools/call",
            json!({"name": "up__echo", "arguments": {"a": 1}}),
        ),
    ] {
        let mut s = c.stream(method, params, sse_first.clone()).await;
        assert_eq!(s.status, 200);
        assert!(
            s.header("content-type")
                .is_some_and(|v| v.starts_with("text/event-stream")),
            "{method}: {:?}",
            s.headers
        );
        let m = s.next(Duration::from_secs(10)).await.expect("one message");
        assert!(m.get("result").is_some(), "{method}: {m}");
        assert!(s.next(Duration::from_secs(10)).await.is_none() && s.ended());
    }
    // The usual order gets plain JSON; an HTTP error stays JSON with its status.
    let plain = c.request("tools/list", json!({})).await;
    assert_eq!(plain.header("content-type"), Some("application/json"));
    let mismatch = c
        .request_with_headers(
            "tools/list",
            json!({}),
            [
                sse_first.clone(),
                vec![("mcp-method".into(), "tools/call".into())],
            ]
            .concat(),
        )
        .await;
    assert_eq!(mismatch.status, 400);
    assert_eq!(mismatch.header("content-type"), Some("application/json"));
}

#[tokio::test]
async fn a_warm_catalog_still_follows_the_upstream_list_ttl() {
    // The upstream changes its list without a change notice: only the list's
    // own ttlMs can make Junction ask again, and the warm path must honour it.
    let up =
        MockUpstream::start(MockSpec::modern("up", vec![MockTool::echo("echo")]).with_ttl_ms(300))
            .await;
    let gw = spawn_gateway(
        bin(),
        &format!(
            "upstreams:\n  - {{id: up, url: {}}}\nserver: {{listen: 127.0.0.1:0}}\n",
            up.url
        ),
    )
    .await;
    let client = TestClient::modern(&gw.url("/mcp"));
    for _ in 0..3 {
        let r = client.request("tools/list", json!({})).await;
        assert_eq!(names(r.result()), ["up__echo"], "{}", gw.stderr());
    }
    up.set_tools_silently(vec![MockTool::echo("echo"), MockTool::echo("added")]);
    let mut seen = Vec::new();
    for _ in 0..100 {
        seen = names(client.request("tools/list", json!({})).await.result());
        if seen.len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        seen,
        ["up__added", "up__echo"],
        "the new tool shows once the list's ttl ran out"
    );
    let call = client.call_tool("up__added", json!({"text": "hi"})).await;
    assert_eq!(call.status, 200);
    assert!(call.body.get("result").is_some(), "{}", call.body);
}
