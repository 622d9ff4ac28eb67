//! Change notifications through the gateway, end to end: a modern client's
//! `subscriptions/listen` stream and a handshake-era client's GET stream get
//! `list_changed` when an upstream changes its tools (modern upstream via its
//! listen stream, handshake-era upstream via its GET stream) and after a config
//! reload, only when what they see changed; resource updates reach the
//! subscribers of that URI.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use junction_testkit::sse::GetStream;
use junction_testkit::{
    spawn_gateway, Gateway, MockSpec, MockTool, MockUpstream, TestClient, TestStream,
};
use serde_json::{json, Value};

const SUB: &str = "io.modelcontextprotocol/subscriptionId";
/// Upper bound for anything to arrive (a hung gateway fails, a slow one does not).
const WAIT: Duration = Duration::from_secs(10);

fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_junction"))
}

fn config(alpha: &str, beta: &str, extra_route: &str) -> String {
    format!(
        r#"
server:
  listen: 127.0.0.1:0
upstreams:
  - id: alpha
    url: {alpha}
  - id: beta
    url: {beta}
routes:
  - path: /mcp
{extra_route}
  - path: /solo
    upstreams: [alpha]
    prefix: never
  - path: /legacy-solo
    upstreams: [beta]
    prefix: never
"#
    )
}

struct World {
    alpha: MockUpstream,
    beta: MockUpstream,
    gw: Gateway,
}

async fn world() -> World {
    let alpha = MockUpstream::start(MockSpec::modern("alpha", vec![MockTool::echo("echo")])).await;
    let beta = MockUpstream::start(MockSpec::legacy("beta", vec![MockTool::echo("echo")])).await;
    let gw = spawn_gateway(bin(), &config(&alpha.url, &beta.url, "")).await;
    World { alpha, beta, gw }
}

async fn listen(client: &TestClient, filter: Value) -> TestStream {
    client
        .stream(
            "subscriptions/listen",
            json!({"notifications": filter}),
            vec![],
        )
        .await
}

/// The next message that is not a keep-alive (those are SSE comments, never messages).
async fn next(s: &mut TestStream) -> Value {
    s.next(WAIT).await.expect("a message on the change stream")
}

fn tool_names(r: &Value) -> Vec<String> {
    r["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn modern_listen_gets_ack_then_list_changed_from_both_upstream_eras_and_reloads() {
    let w = world().await;
    let client = TestClient::modern(&w.gw.url("/mcp"));
    assert!(
        tool_names(client.request("tools/list", json!({})).await.result())
            .contains(&"alpha__echo".to_owned())
    );
    let mut s = listen(&client, json!({"toolsListChanged": true})).await;
    assert_eq!(s.status, 200);
    assert!(s
        .header("content-type")
        .unwrap()
        .starts_with("text/event-stream"));
    assert_eq!(s.header("x-accel-buffering"), Some("no"));
    let ack = next(&mut s).await;
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"]["notifications"],
        json!({"toolsListChanged": true})
    );
    let sub = ack["params"]["_meta"][SUB].clone();
    assert!(
        sub.is_i64(),
        "subscriptionId is the listen request's id: {ack}"
    );

    // Modern upstream: its own listen stream carries the change.
    w.alpha
        .set_tools(vec![MockTool::echo("echo"), MockTool::echo("added")]);
    let m = next(&mut s).await;
    assert_eq!(m["method"], "notifications/tools/list_changed", "{m}");
    assert_eq!(m["params"]["_meta"][SUB], sub);
    let names = tool_names(client.request("tools/list", json!({})).await.result());
    assert!(names.contains(&"alpha__added".to_owned()), "{names:?}");

    // Handshake-era upstream: its session's GET stream carries the change.
    w.beta
        .set_tools(vec![MockTool::echo("echo"), MockTool::echo("fresh")]);
    let m = next(&mut s).await;
    assert_eq!(m["method"], "notifications/tools/list_changed", "{m}");
    let names = tool_names(client.request("tools/list", json!({})).await.result());
    assert!(names.contains(&"beta__fresh".to_owned()), "{names:?}");

    // A reload that hides a tool is a change of what this client sees.
    std::fs::write(
        w.gw.config_path(),
        config(&w.alpha.url, &w.beta.url, "    exclude: [\"alpha__added\"]"),
    )
    .unwrap();
    let m = next(&mut s).await;
    assert_eq!(m["method"], "notifications/tools/list_changed", "{m}");
    let names = tool_names(client.request("tools/list", json!({})).await.result());
    assert!(!names.contains(&"alpha__added".to_owned()), "{names:?}");
}

#[tokio::test]
async fn only_requested_types_and_only_real_changes_are_sent() {
    let w = world().await;
    let client = TestClient::modern(&w.gw.url("/mcp"));
    let mut prompts_only = listen(&client, json!({"promptsListChanged": true})).await;
    let ack = next(&mut prompts_only).await;
    assert_eq!(
        ack["params"]["notifications"],
        json!({"promptsListChanged": true})
    );
    let mut tools = listen(&client, json!({"toolsListChanged": true})).await;
    next(&mut tools).await;

    // The upstream announces a change that changes nothing: no one hears of it.
    w.alpha.announce_list_changed("tools");
    // A real change: the tools stream hears of it, the prompts stream never does.
    w.alpha
        .set_tools(vec![MockTool::echo("echo"), MockTool::echo("added")]);
    let m = next(&mut tools).await;
    assert_eq!(m["method"], "notifications/tools/list_changed");
    assert_eq!(
        tools.next(Duration::from_millis(500)).await,
        None,
        "one change, one notice"
    );
    assert_eq!(prompts_only.next(Duration::from_millis(500)).await, None);
}

#[tokio::test]
async fn route_removed_by_reload_ends_listen_with_its_response() {
    let w = world().await;
    let client = TestClient::modern(&w.gw.url("/solo"));
    let mut s = listen(&client, json!({"toolsListChanged": true})).await;
    let sub = next(&mut s).await["params"]["_meta"][SUB].clone();
    let yaml = config(&w.alpha.url, &w.beta.url, "").replace(
        "  - path: /solo\n    upstreams: [alpha]\n    prefix: never\n",
        "",
    );
    std::fs::write(w.gw.config_path(), yaml).unwrap();
    let end = next(&mut s).await;
    assert_eq!(end["id"], sub, "{end}");
    assert_eq!(end["result"]["resultType"], "complete");
    assert_eq!(end["result"]["_meta"][SUB], sub);
    assert_eq!(
        s.next(WAIT).await,
        None,
        "the stream closes after the response"
    );
}

#[tokio::test]
async fn bad_listen_params_are_invalid_params() {
    let w = world().await;
    let client = TestClient::modern(&w.gw.url("/mcp"));
    for params in [
        json!({}),
        json!({"notifications": true}),
        json!({"notifications": {"toolsListChanged": "yes"}}),
        json!({"notifications": {"resourceSubscriptions": [1]}}),
        json!({"notifications": {"resourceSubscriptions": "mock://alpha/readme"}}),
    ] {
        let r = client.request("subscriptions/listen", params.clone()).await;
        assert_eq!(r.error_code(), Some(-32602), "{params}: {}", r.text());
    }
}

#[tokio::test]
async fn resource_subscriptions_deliver_resources_updated() {
    let w = world().await;
    let client = TestClient::modern(&w.gw.url("/solo"));
    let uri = "mock://alpha/readme";
    let mut s = listen(
        &client,
        json!({"resourceSubscriptions": [uri, "mock://nowhere/x"]}),
    )
    .await;
    let ack = next(&mut s).await;
    // A one-upstream route sends every URI to that upstream.
    assert_eq!(
        ack["params"]["notifications"]["resourceSubscriptions"],
        json!(["mock://alpha/readme", "mock://nowhere/x"])
    );
    let sub = ack["params"]["_meta"][SUB].clone();
    wait_until(|| w.alpha.subscribed_uris().contains(uri)).await;
    w.alpha.touch_resource(uri);
    let m = next(&mut s).await;
    assert_eq!(m["method"], "notifications/resources/updated", "{m}");
    assert_eq!(m["params"]["uri"], uri);
    assert_eq!(m["params"]["_meta"][SUB], sub);
}

#[tokio::test]
async fn resource_subscriptions_on_a_shared_route_go_to_the_lister() {
    let w = world().await;
    let client = TestClient::modern(&w.gw.url("/mcp"));
    let mut s = listen(
        &client,
        json!({"resourceSubscriptions": ["mock://beta/readme", "mock://nowhere/x"]}),
    )
    .await;
    let ack = next(&mut s).await;
    assert_eq!(
        ack["params"]["notifications"],
        json!({"resourceSubscriptions": ["mock://beta/readme"]}),
        "only URIs some upstream lists are granted"
    );
    wait_until(|| w.beta.subscribed_uris().contains("mock://beta/readme")).await;
    assert!(w.alpha.subscribed_uris().is_empty());
    w.beta.touch_resource("mock://beta/readme");
    let m = next(&mut s).await;
    assert_eq!(m["method"], "notifications/resources/updated", "{m}");
    assert_eq!(m["params"]["uri"], "mock://beta/readme");
}

#[tokio::test]
async fn a_namespaced_uri_is_watched_as_its_upstream_own_and_announced_as_listed() {
    let w = world().await;
    let client = TestClient::modern(&w.gw.url("/mcp"));
    // Both mocks list mock://shared/config: alpha keeps it, beta's is namespaced.
    let ns = "junction://beta/mock://shared/config";
    let mut s = listen(&client, json!({"resourceSubscriptions": [ns]})).await;
    let ack = next(&mut s).await;
    assert_eq!(
        ack["params"]["notifications"],
        json!({"resourceSubscriptions": [ns]})
    );
    wait_until(|| w.beta.subscribed_uris().contains("mock://shared/config")).await;
    assert!(w.alpha.subscribed_uris().is_empty());
    // alpha's update of its own URI of the same name is not this subscription.
    w.alpha.touch_resource("mock://shared/config");
    w.beta.touch_resource("mock://shared/config");
    let m = next(&mut s).await;
    assert_eq!(m["method"], "notifications/resources/updated", "{m}");
    assert_eq!(m["params"]["uri"], ns);
    assert!(
        s.next(Duration::from_millis(300)).await.is_none(),
        "one update only"
    );
}

async fn wait_until(f: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !f() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "condition never held"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A GET stream of a handshake-era session (testkit's, within `WAIT`).
async fn get(url: &str, headers: &[(&str, &str)]) -> GetStream {
    GetStream::open(url, headers, WAIT).await
}

#[tokio::test]
async fn deleting_a_session_ends_its_get_stream_and_its_subscriptions() {
    let w = world().await;
    let url = w.gw.url("/mcp");
    let c = TestClient::legacy(&url, "2025-11-25");
    c.initialize().await;
    let sid = c.session_id().unwrap();
    let headers = [
        ("mcp-session-id", sid.as_str()),
        ("mcp-protocol-version", "2025-11-25"),
    ];
    let mut stream = get(&url, &headers).await;
    assert_eq!(stream.status, 200);
    let sub = c
        .request("resources/subscribe", json!({"uri": "mock://beta/readme"}))
        .await;
    assert_eq!(sub.status, 200, "{:?}", sub.body);
    wait_until(|| w.beta.subscribed_uris().contains("mock://beta/readme")).await;

    assert_eq!(c.delete_session().await.status, 200);
    // The stream ends (next gives up only at WAIT otherwise) and nothing is watched.
    assert!(stream.next(WAIT).await.is_none());
    assert!(stream.body.is_none(), "the GET stream ended");
    wait_until(|| w.beta.subscribed_uris().is_empty()).await;
    assert_eq!(get(&url, &headers).await.status, 404);
}

#[tokio::test]
async fn legacy_get_stream_gets_list_changed_and_resource_updates() {
    let w = world().await;
    let url = w.gw.url("/mcp");
    assert_eq!(
        get(&url, &[]).await.status,
        405,
        "GET without a session is a modern request"
    );
    assert_eq!(
        get(&url, &[("mcp-protocol-version", "2025-11-25")])
            .await
            .status,
        400
    );
    assert_eq!(
        get(
            &url,
            &[
                ("mcp-session-id", "forged"),
                ("mcp-protocol-version", "2025-11-25")
            ]
        )
        .await
        .status,
        404
    );
    let client = TestClient::legacy(&url, "2025-11-25");
    let init = client.initialize().await;
    assert_eq!(
        init.result()["capabilities"]["tools"]["listChanged"],
        json!(true)
    );
    let sid = client.session_id().unwrap();
    let mut s = get(
        &url,
        &[
            ("mcp-session-id", &sid),
            ("mcp-protocol-version", "2025-11-25"),
        ],
    )
    .await;
    assert_eq!(s.status, 200);
    w.alpha
        .set_tools(vec![MockTool::echo("echo"), MockTool::echo("added")]);
    let m = s.next(WAIT).await.expect("list_changed on the GET stream");
    assert_eq!(
        m,
        json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
    );

    // resources/subscribe on a route whose only upstream is handshake-era.
    let solo = TestClient::legacy(&w.gw.url("/legacy-solo"), "2025-11-25");
    solo.initialize().await;
    let uri = "mock://beta/readme";
    let r = solo
        .request("resources/subscribe", json!({"uri": uri}))
        .await;
    assert_eq!(r.result(), &json!({}), "{}", r.text());
    let sid = solo.session_id().unwrap();
    let mut s = get(
        &w.gw.url("/legacy-solo"),
        &[
            ("mcp-session-id", &sid),
            ("mcp-protocol-version", "2025-11-25"),
        ],
    )
    .await;
    assert_eq!(s.status, 200);
    wait_until(|| w.beta.subscribed_uris().contains(uri)).await;
    w.beta.touch_resource(uri);
    let m = s
        .next(WAIT)
        .await
        .expect("resources/updated on the GET stream");
    assert_eq!(
        m,
        json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri}})
    );
    let r = solo
        .request("resources/unsubscribe", json!({"uri": uri}))
        .await;
    assert_eq!(r.result(), &json!({}));
    wait_until(|| !w.beta.subscribed_uris().contains(uri)).await;
}

mod scoped {
    use super::*;
    use junction_testkit::Behavior;

    use junction_testkit::jwt::{bearer, jwks_file, token, token_for, ISSUER, PUBLIC};

    fn bearer_for(sub: &str, scope: &str, lifetime_s: u64) -> String {
        bearer(&token_for(sub, scope, lifetime_s))
    }

    async fn gateway(up: &MockUpstream, dir: &Path) -> Gateway {
        let yaml = format!(
            r#"
server: {{listen: 127.0.0.1:0, public_url: "{PUBLIC}"}}
upstreams:
  - {{id: up, url: "{url}"}}
auth:
  jwt: {{issuer: "{ISSUER}", jwks_file: "{jwks}"}}
  rules:
    - {{scopes: [tools.read], tools: ["up__echo"]}}
    - {{scopes: [tools.admin], tools: ["up__*"]}}
"#,
            url = up.url,
            jwks = jwks_file(dir).display()
        );
        spawn_gateway(bin(), &yaml).await
    }

    #[tokio::test]
    async fn a_stream_ends_with_its_token() {
        let up = MockUpstream::start(MockSpec::modern("up", vec![MockTool::echo("echo")])).await;
        let dir = tempfile::tempdir().unwrap();
        let gw = gateway(&up, dir.path()).await;
        let c = TestClient::modern(&gw.url("/mcp"))
            .with_header("authorization", &bearer_for("alice", "tools.read", 2));
        let mut s = listen(&c, json!({"toolsListChanged": true})).await;
        assert_eq!(s.status, 200);
        let sub = next(&mut s).await["params"]["_meta"][SUB].clone();
        let end = next(&mut s).await;
        assert_eq!(end["id"], sub, "{end}");
        assert_eq!(end["result"]["resultType"], "complete");
    }

    #[tokio::test]
    async fn a_change_hidden_by_the_callers_scopes_is_not_announced_to_it() {
        let up = MockUpstream::start(MockSpec::modern(
            "up",
            vec![MockTool::echo("echo"), MockTool::echo("admin")],
        ))
        .await;
        let dir = tempfile::tempdir().unwrap();
        let gw = gateway(&up, dir.path()).await;
        let reader = TestClient::modern(&gw.url("/mcp"))
            .with_header("authorization", &bearer(&token("alice", "tools.read")));
        let admin = TestClient::modern(&gw.url("/mcp"))
            .with_header("authorization", &bearer(&token("root", "tools.admin")));
        let mut r = listen(&reader, json!({"toolsListChanged": true})).await;
        assert_eq!(r.status, 200);
        next(&mut r).await;
        let mut a = listen(&admin, json!({"toolsListChanged": true})).await;
        next(&mut a).await;

        // A tool only the admin may see appears: only the admin hears of it.
        up.set_tools(vec![
            MockTool::echo("echo"),
            MockTool::echo("admin"),
            MockTool::echo("admin2"),
        ]);
        assert_eq!(
            next(&mut a).await["method"],
            "notifications/tools/list_changed"
        );
        // Then the reader's own tool changes: that is the reader's first notice.
        let schema = json!({"type": "object", "properties": {"q": {"type": "string"}}});
        up.set_tools(vec![
            MockTool::new("echo", schema, Behavior::Echo),
            MockTool::echo("admin"),
            MockTool::echo("admin2"),
        ]);
        assert_eq!(
            next(&mut a).await["method"],
            "notifications/tools/list_changed"
        );
        assert_eq!(
            next(&mut r).await["method"],
            "notifications/tools/list_changed"
        );
        assert_eq!(
            r.next(Duration::from_millis(500)).await,
            None,
            "the hidden change was not announced to the reader"
        );
    }
}

#[cfg(unix)]
#[tokio::test]
async fn shutdown_ends_listen_streams_with_their_response() {
    let mut w = world().await;
    let client = TestClient::modern(&w.gw.url("/mcp"));
    let mut s = listen(&client, json!({"toolsListChanged": true})).await;
    let sub = next(&mut s).await["params"]["_meta"][SUB].clone();
    let pid = w.gw.pid().unwrap().to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    let end = next(&mut s).await;
    assert_eq!(end["id"], sub, "{end}");
    assert_eq!(end["result"]["resultType"], "complete");
    assert_eq!(
        s.next(WAIT).await,
        None,
        "the stream closes after the response"
    );
    let deadline = tokio::time::Instant::now() + WAIT;
    while w.gw.try_exit_status().is_none() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the gateway did not exit"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The official Python SDK's 2.x client (`Client.listen`) hears of a tool
/// change through Junction and sees the new tool when it lists again.
/// A real SDK client script of tests/interop/python, run from `venv` against
/// `url`: its stdout lines, read one at a time.
struct Peer {
    child: tokio::process::Child,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
}

impl Peer {
    fn spawn(venv: &str, script: &str, url: &str, extra: &[&str]) -> Peer {
        use tokio::io::AsyncBufReadExt;
        let script = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/interop/python")
            .join(script);
        let mut child = tokio::process::Command::new(junction_testkit::peers::python(venv))
            .arg(script)
            .args(["--url", url, "--timeout", "30"])
            .args(extra)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("python client starts");
        let lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        Peer { child, lines }
    }

    async fn line(&mut self) -> String {
        let line = tokio::time::timeout(Duration::from_secs(60), self.lines.next_line())
            .await
            .expect("the client printed a line in time")
            .unwrap();
        match line {
            Some(l) => l,
            None => panic!("python client ended early: {}", self.stderr().await),
        }
    }

    async fn stderr(&mut self) -> String {
        use tokio::io::AsyncReadExt;
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut err).await;
        }
        err
    }

    async fn succeeded(mut self) {
        let status = tokio::time::timeout(Duration::from_secs(60), self.child.wait())
            .await
            .unwrap()
            .unwrap();
        assert!(
            status.success(),
            "python client failed: {}",
            self.stderr().await
        );
    }
}

/// Waits (bounded by `WAIT`) until Junction counts `n` open streams of `kind`.
async fn wait_for_open_streams(gw: &Gateway, kind: &str, n: u32) {
    let gauge = format!("junction_open_streams{{kind=\"{kind}\"}} ");
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if gw.metric(&gauge).await == Some(f64::from(n)) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "Junction never counted {n} open {kind} stream(s)"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn report_lists(report: &Value, name: &str) -> (bool, bool) {
    let has = |k: &str| report[k].as_array().unwrap().contains(&json!(name));
    (has("before"), has("after"))
}

#[tokio::test]
async fn python_sdk_client_receives_list_changed_through_junction() {
    let w = world().await;
    let mut peer = Peer::spawn("py-mcp2", "listen_client.py", &w.gw.url("/mcp"), &[]);
    let ready = peer.line().await;
    let honored: Value =
        serde_json::from_str(ready.strip_prefix("READY ").unwrap_or("null")).unwrap_or_default();
    assert_eq!(honored, json!({"toolsListChanged": true}), "{ready}");
    w.alpha
        .set_tools(vec![MockTool::echo("echo"), MockTool::echo("added")]);
    let report: Value = serde_json::from_str(&peer.line().await).unwrap();
    peer.succeeded().await;
    assert_eq!(report["event"], "ToolsListChanged", "{report}");
    assert_eq!(
        report_lists(&report, "alpha__added"),
        (false, true),
        "{report}"
    );
}

#[tokio::test]
async fn python_1x_legacy_client_receives_list_changed_on_its_get_stream() {
    let w = world().await;
    let mut peer = Peer::spawn(
        "py-mcp1",
        "listen_client_v1.py",
        &w.gw.url("/mcp"),
        &["--changes", "2"],
    );
    assert_eq!(peer.line().await, "READY");
    // The SDK opens its GET stream in the background after `initialize`, so
    // READY can come before Junction has it; a change made before then is not
    // news to a stream that opens after it.
    wait_for_open_streams(&w.gw, "get", 1).await;
    // An upstream's change (the handshake-era one, through its own GET stream).
    w.beta
        .set_tools(vec![MockTool::echo("echo"), MockTool::echo("fresh")]);
    let first: Value = serde_json::from_str(&peer.line().await).unwrap();
    assert_eq!(first["event"], "ToolListChangedNotification", "{first}");
    assert_eq!(
        report_lists(&first, "beta__fresh"),
        (false, true),
        "{first}"
    );
    // A reload that hides a tool this client sees.
    std::fs::write(
        w.gw.config_path(),
        config(&w.alpha.url, &w.beta.url, "    exclude: [\"beta__fresh\"]"),
    )
    .unwrap();
    let second: Value = serde_json::from_str(&peer.line().await).unwrap();
    assert_eq!(
        report_lists(&second, "beta__fresh"),
        (true, false),
        "{second}"
    );
    peer.succeeded().await;
}
