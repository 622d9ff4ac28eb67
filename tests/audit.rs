//! The audit log end to end: one JSON line per `tools/call` in a file of its
//! own, with arguments and results only where switched on (redacted at any
//! depth), calls refused by authorization and rate limits included with
//! Junction's code, never a token, and no file at all while it is off.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use junction_testkit::jwt::{bearer, jwks_file, token, ISSUER, PUBLIC};
use junction_testkit::{
    spawn_gateway, Behavior, Gateway, MockSpec, MockTool, MockUpstream, TestClient,
};
use serde_json::{json, Value};

fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_junction"))
}

/// A modern client on `path` with a fresh token for `sub` and `scope`.
fn signed_in(gw: &Gateway, path: &str, sub: &str, scope: &str) -> TestClient {
    TestClient::modern(&gw.url(path)).with_header("authorization", &bearer(&token(sub, scope)))
}

struct World {
    up: MockUpstream,
    gw: Gateway,
    /// Where the config says the audit file is.
    audit: PathBuf,
    _dir: tempfile::TempDir,
}

/// An upstream `up` behind two routes (`/mcp`, `/ops`), JWT auth where
/// `tools.read` grants all but `up__admin` (and the mock's prompts and
/// resources), and `audit` (YAML mapping
/// members, `{file}` replaced by the audit file's path) plus `extra`.
async fn world(audit: &str, extra: &str) -> World {
    let up = MockUpstream::start(MockSpec::modern(
        "up",
        vec![
            MockTool::echo("echo"),
            MockTool::echo("admin"),
            MockTool::new(
                "progress",
                json!({"type": "object"}),
                // 20 steps 10 ms apart, streamed when asked for progress.
                Behavior::Progress { steps: 20 },
            ),
        ],
    ))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("audit.jsonl");
    let jwks = jwks_file(dir.path());
    let yaml = format!(
        r#"
server: {{listen: 127.0.0.1:0, public_url: "{PUBLIC}"}}
upstreams:
  - {{id: up, url: "{url}"}}
routes:
  - {{path: /mcp, upstreams: ["*"]}}
  - {{path: /ops, upstreams: ["*"]}}
auth:
  jwt: {{issuer: "{ISSUER}", jwks_file: "{jwks}"}}
  rules:
    - {{scopes: [tools.read], tools: ["up__echo", "up__progress"], prompts: ["up__*"], resources: ["mock://*"]}}
    - {{scopes: [tools.admin], tools: ["up__*"]}}
audit: {{{audit}}}
{extra}
"#,
        url = up.url,
        jwks = jwks.display(),
        audit = audit.replace("{file}", &file.display().to_string()),
    );
    let gw = spawn_gateway(bin(), &yaml).await;
    World {
        up,
        gw,
        audit: file,
        _dir: dir,
    }
}

/// The audit file's lines, once at least `n` are there (a thread of its own
/// writes them, up to 100 ms late).
async fn audit_lines(path: &Path, n: usize) -> Vec<Value> {
    lines_in(|| std::fs::read_to_string(path).unwrap_or_default(), n).await
}

/// The audit lines (`"event": "tools/call"`) of `text()`, once `n` are there.
async fn lines_in(text: impl Fn() -> String, n: usize) -> Vec<Value> {
    lines_where(text, n, |l| l["event"] == "tools/call").await
}

/// Every audit line of the file (any `event`), once at least `n` are there.
async fn all_lines(path: &Path, n: usize) -> Vec<Value> {
    let text = || std::fs::read_to_string(path).unwrap_or_default();
    lines_where(text, n, |_| true).await
}

/// The JSON lines of `text()` that `keep` keeps, once `n` are there (or
/// after 3 s).
async fn lines_where(
    text: impl Fn() -> String,
    n: usize,
    keep: impl Fn(&Value) -> bool,
) -> Vec<Value> {
    let read = || -> Vec<Value> {
        text()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|l| keep(l))
            .collect()
    };
    for _ in 0..150 {
        if read().len() >= n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    read()
}

/// `tools/call` of `tool` with `arguments`; returns the JSON-RPC id sent.
async fn call(client: &TestClient, tool: &str, arguments: Value) -> (Value, u16) {
    let body = client.envelope("tools/call", json!({"name": tool, "arguments": arguments}));
    let r = client.send(&body, Vec::new()).await;
    (body["id"].clone(), r.status)
}

#[tokio::test]
async fn a_call_writes_one_line_with_who_called_what_and_how_it_ended() {
    let w = world("enabled: true, file: '{file}'", "").await;
    let alice = signed_in(&w.gw, "/mcp", "alice", "tools.read");
    let (first_id, status) = call(&alice, "up__echo", json!({"city": "Oslo"})).await;
    assert_eq!(status, 200);
    let (second_id, _) = call(&alice, "up__echo", json!({})).await;

    let lines = audit_lines(&w.audit, 2).await;
    assert_eq!(lines.len(), 2, "{lines:?}\n{}", w.gw.stderr());
    let line = &lines[0];
    for (field, want) in [
        ("event", json!("tools/call")),
        ("jsonrpc_id", first_id),
        ("route", json!("/mcp")),
        ("principal", json!("alice")),
        ("client", json!("127.0.0.1")),
        ("tool", json!("up__echo")),
        ("upstream", json!("up")),
        ("upstream_tool", json!("echo")),
        ("outcome", json!("ok")),
    ] {
        assert_eq!(line[field], want, "{field} in {line}");
    }
    // RFC 3339 in UTC, to the microsecond: 2026-12-04T14:44:12.774895Z.
    let time = line["time"].as_str().unwrap().as_bytes();
    let shape = time
        .iter()
        .map(|b| if b.is_ascii_digit() { b'0' } else { *b });
    assert_eq!(
        shape.collect::<Vec<u8>>(),
        b"0000-00-00T00:00:00.000000Z",
        "{line}"
    );
    let request_id = line["request_id"].as_str().unwrap();
    assert!(
        request_id.len() == 32 && request_id.bytes().all(|b| b.is_ascii_hexdigit()),
        "{line}"
    );
    assert!(
        line["duration_ms"].as_f64().is_some_and(|d| d > 0.0),
        "{line}"
    );
    // Off by default: no arguments, no result; no code for a call that went well.
    for absent in ["arguments", "result", "upstream_error", "error_code"] {
        assert!(line.get(absent).is_none(), "{absent} in {line}");
    }
    assert_eq!(lines[1]["jsonrpc_id"], second_id);
    assert_ne!(lines[1]["request_id"], line["request_id"], "fresh per call");
    assert_eq!(
        w.gw.metric("junction_audit_lines_dropped_total").await,
        Some(0.0)
    );
}

#[tokio::test]
async fn arguments_and_results_appear_only_where_switched_on_and_redacted_at_any_depth() {
    let w = world(
        "enabled: true, file: '{file}', redact: [password, api_key],
         routes: {/ops: {include_arguments: true}},
         tools: {'up__prog*': {include_results: true}}",
        "",
    )
    .await;
    let arguments = json!({
        "city": "Oslo",
        "Password": "hunter2",
        "nested": {"list": [{"API_KEY": "k-123", "keep": 1}]},
    });
    let (mcp, ops) = (
        signed_in(&w.gw, "/mcp", "alice", "tools.read"),
        signed_in(&w.gw, "/ops", "alice", "tools.read"),
    );
    assert_eq!(call(&mcp, "up__echo", arguments.clone()).await.1, 200);
    assert_eq!(call(&ops, "up__echo", arguments.clone()).await.1, 200);
    // Streamed (progress relayed as SSE): the line is written when it ends.
    let streamed = mcp
        .request(
            "tools/call",
            json!({"name": "up__progress", "arguments": arguments, "_meta": {"progressToken": "p"}}),
        )
        .await;
    assert!(streamed.is_sse());

    let lines = audit_lines(&w.audit, 3).await;
    assert_eq!(lines.len(), 3, "{lines:?}");
    let (plain, with_arguments, with_result) = (&lines[0], &lines[1], &lines[2]);
    assert!(
        plain.get("arguments").is_none() && plain.get("result").is_none(),
        "{plain}"
    );
    assert_eq!(
        with_arguments["arguments"],
        json!({
            "city": "Oslo",
            "Password": "[redacted]",
            "nested": {"list": [{"API_KEY": "[redacted]", "keep": 1}]},
        }),
        "{with_arguments}"
    );
    assert!(with_arguments.get("result").is_none(), "{with_arguments}");
    // The tool's switch: its result, redacted too (the echo repeats the
    // arguments in structuredContent), and no arguments on /mcp.
    assert_eq!(with_result["tool"], "up__progress");
    assert_eq!(with_result["outcome"], "ok");
    assert!(with_result.get("arguments").is_none(), "{with_result}");
    let echoed = &with_result["result"]["structuredContent"]["arguments"];
    assert_eq!(echoed["Password"], "[redacted]", "{with_result}");
    assert_eq!(echoed["nested"]["list"][0]["API_KEY"], "[redacted]");
    assert_eq!(echoed["city"], "Oslo");
    // Nothing redacted was ever written, by these lines or the others.
    let text = std::fs::read_to_string(&w.audit).unwrap();
    for hidden in ["hunter2", "k-123"] {
        assert!(!text.contains(hidden), "{hidden} in {text}");
    }
}

#[tokio::test]
async fn calls_cut_short_or_failed_upstream_are_audited_as_they_ended() {
    let w = world("enabled: true, file: '{file}'", "").await;
    let alice = signed_in(&w.gw, "/mcp", "alice", "tools.read");
    // A streamed call the client closes after its first message: its line
    // is written when the call ends, cancelled.
    let params = json!({"name": "up__progress", "arguments": {}, "_meta": {"progressToken": "p"}});
    let mut cut = alice.stream("tools/call", params, vec![]).await;
    assert!(cut.next(Duration::from_secs(5)).await.is_some());
    drop(cut);
    assert!(w.up.saw_cancellation(Duration::from_secs(5)).await);
    // The upstream goes away (its tool list stays cached): Junction's -31001.
    w.up.set_down(true).await;
    let down = alice.call_tool("up__echo", json!({})).await;
    assert_eq!(down.error_code(), Some(-31001));

    let lines = audit_lines(&w.audit, 2).await;
    let ended: Vec<Value> = lines
        .iter()
        .map(|l| json!([l["tool"], l["outcome"], l["error_code"]]))
        .collect();
    let want = [
        json!(["up__progress", "cancelled", null]),
        json!(["up__echo", "upstream_unavailable", -31001]),
    ];
    assert_eq!(ended, want, "{lines:?}");
}

#[tokio::test]
async fn calls_refused_by_authorization_or_a_rate_limit_are_audited_with_their_code() {
    let w = world(
        "enabled: true, file: '{file}', include_arguments: true",
        "rate_limits:\n  rules:\n    - {name: per-user, key: [principal], rate: 2, per: 1m, burst: 2}\n",
    )
    .await;
    let alice = signed_in(&w.gw, "/mcp", "alice", "tools.read");
    let (denied_id, status) = call(&alice, "up__admin", json!({"drop": "tables"})).await;
    assert_eq!(status, 403);
    assert!(w.up.calls("admin").is_empty(), "never reached the upstream");
    assert_eq!(call(&alice, "up__echo", json!({})).await.1, 200);
    assert_eq!(call(&alice, "up__echo", json!({})).await.1, 200);
    assert_eq!(call(&alice, "up__echo", json!({})).await.1, 429);
    // Unknown tools and anonymous callers name no tool: not audited.
    assert_eq!(
        alice.call_tool("up__nope", json!({})).await.error_code(),
        Some(-32602)
    );
    let anonymous = TestClient::modern(&w.gw.url("/mcp"));
    assert_eq!(anonymous.call_tool("up__echo", json!({})).await.status, 401);

    let lines = audit_lines(&w.audit, 4).await;
    let outcomes: Vec<Value> = lines
        .iter()
        .map(|l| json!([l["outcome"], l["error_code"]]))
        .collect();
    let want = [
        json!(["forbidden", -31005]),
        json!(["ok", null]),
        json!(["ok", null]),
        json!(["rate_limited", -31004]),
    ];
    assert_eq!(outcomes, want, "{lines:?}");
    let denied = &lines[0];
    assert_eq!(denied["tool"], "up__admin");
    assert_eq!(denied["upstream_tool"], "admin");
    assert_eq!(denied["principal"], "alice");
    assert_eq!(denied["jsonrpc_id"], denied_id);
    assert_eq!(denied["arguments"], json!({"drop": "tables"}));
    // That is all: the 401 and the -32602 wrote none (polled for a fifth).
    assert_eq!(audit_lines(&w.audit, 5).await.len(), 4);
}

#[tokio::test]
async fn no_token_or_authorization_value_ever_reaches_the_audit_file() {
    let w = world(
        "enabled: true, file: '{file}', include_arguments: true, include_results: true",
        "",
    )
    .await;
    let secret = token("alice", "tools.read");
    let alice = TestClient::modern(&w.gw.url("/mcp"))
        .with_header("authorization", &format!("Bearer {secret}"))
        .with_header("cookie", "sid=cookie-value");
    // The default list redacts credentials the client put in its arguments.
    let args = json!({"token": "arg-token", "authorization": "Bearer arg-bearer"});
    assert_eq!(call(&alice, "up__admin", args).await.1, 403);
    let args = json!({"deep": [{"Authorization": "x-auth"}]});
    assert_eq!(call(&alice, "up__echo", args).await.1, 200);

    let lines = audit_lines(&w.audit, 2).await;
    assert_eq!(lines.len(), 2, "{lines:?}");
    let text = std::fs::read_to_string(&w.audit).unwrap();
    let leaks = [
        "Bearer",
        "arg-token",
        "arg-bearer",
        "x-auth",
        "cookie-value",
    ];
    for leaked in leaks.into_iter().chain([secret.as_str()]) {
        assert!(!text.contains(leaked), "{leaked} written:\n{text}");
    }
    assert_eq!(lines[0]["arguments"]["token"], "[redacted]");
}

#[tokio::test]
async fn with_audit_off_no_file_is_written() {
    let w = world(
        "enabled: false, file: '{file}', include_arguments: true",
        "",
    )
    .await;
    let alice = signed_in(&w.gw, "/mcp", "alice", "tools.read");
    assert_eq!(call(&alice, "up__echo", json!({})).await.1, 200);
    assert_eq!(call(&alice, "up__admin", json!({})).await.1, 403);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!w.audit.exists(), "{} exists", w.audit.display());
}

#[tokio::test]
async fn with_file_stderr_the_lines_go_out_whole_among_the_log_lines() {
    let w = world("enabled: true, file: stderr", "log: {format: json}\n").await;
    let alice = signed_in(&w.gw, "/mcp", "alice", "tools.read");
    assert_eq!(call(&alice, "up__echo", json!({})).await.1, 200);
    let lines = lines_in(|| w.gw.stderr(), 1).await;
    assert_eq!(lines.len(), 1, "{}", w.gw.stderr());
    assert_eq!(lines[0]["tool"], "up__echo");
    assert!(!w.audit.exists());
}

#[tokio::test]
async fn sighup_reopens_the_file_after_rotation_and_an_unwritable_file_fails_the_start() {
    let w = world("enabled: true, file: '{file}'", "").await;
    let alice = signed_in(&w.gw, "/mcp", "alice", "tools.read");
    assert_eq!(call(&alice, "up__echo", json!({})).await.1, 200);
    assert_eq!(audit_lines(&w.audit, 1).await.len(), 1);
    let rotated = w.audit.with_extension("jsonl.1");
    std::fs::rename(&w.audit, &rotated).unwrap();
    let pid = w.gw.pid().unwrap().to_string();
    let hup = std::process::Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .unwrap();
    assert!(hup.success());
    // The signal is handled on the runtime: call until a line lands in the
    // new file (each earlier one went to the rotated file).
    let mut calls = 1;
    while audit_lines(&w.audit, 0).await.is_empty() && calls < 50 {
        assert_eq!(call(&alice, "up__echo", json!({})).await.1, 200);
        calls += 1;
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    let old = audit_lines(&rotated, 1).await.len();
    let new = audit_lines(&w.audit, calls - old).await.len();
    assert!(new > 0, "never reopened\n{}", w.gw.stderr());
    assert_eq!(old + new, calls, "every call written once");

    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gateway.yaml");
    std::fs::write(
        &config,
        "server: {listen: 127.0.0.1:0}\nupstreams: [{id: up, url: 'http://127.0.0.1:9/mcp'}]\n\
         audit: {enabled: true, file: /nonexistent-junction-dir/audit.jsonl}\n",
    )
    .unwrap();
    let out = std::process::Command::new(bin())
        .args(["run", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("opening the audit file /nonexistent-junction-dir/audit.jsonl"),
        "{stderr}"
    );
}

/// A prompt fetched and a resource read are audited like a tool call, each
/// named as its method names it; the route's switches decide what the line
/// carries (the `tools` entries name tools only).
#[tokio::test]
async fn prompts_and_resources_read_are_audited_with_their_names() {
    let w = world(
        "enabled: true, file: '{file}', tools: {'*': {include_arguments: false}}, \
         routes: {/ops: {include_arguments: true, include_results: true}}",
        "",
    )
    .await;
    let alice = signed_in(&w.gw, "/ops", "alice", "tools.read");
    let prompt = alice
        .request(
            "prompts/get",
            json!({"name": "up__greet", "arguments": {"name": "Ada", "password": "p"}}),
        )
        .await;
    assert_eq!(prompt.status, 200, "{}", prompt.text());
    let read = alice
        .request("resources/read", json!({"uri": "mock://up/readme"}))
        .await;
    assert_eq!(read.status, 200, "{}", read.text());

    let lines = all_lines(&w.audit, 2).await;
    assert_eq!(lines.len(), 2, "{lines:?}\n{}", w.gw.stderr());
    let (p, r) = (&lines[0], &lines[1]);
    for (field, want) in [
        ("event", json!("prompts/get")),
        ("route", json!("/ops")),
        ("principal", json!("alice")),
        ("prompt", json!("up__greet")),
        ("upstream", json!("up")),
        ("upstream_prompt", json!("greet")),
        ("outcome", json!("ok")),
        (
            "arguments",
            json!({"name": "Ada", "password": "[redacted]"}),
        ),
    ] {
        assert_eq!(p[field], want, "{field} in {p}");
    }
    // The result as the client got it, redacted the same way (the mock
    // echoes the arguments back in its `_meta`).
    assert_eq!(p["result"]["messages"], prompt.result()["messages"], "{p}");
    assert_eq!(
        p["result"]["_meta"]["mock/arguments"]["password"], "[redacted]",
        "{p}"
    );
    assert!(p.get("tool").is_none(), "{p}");
    for (field, want) in [
        ("event", json!("resources/read")),
        ("uri", json!("mock://up/readme")),
        ("upstream", json!("up")),
        ("upstream_uri", json!("mock://up/readme")),
        ("outcome", json!("ok")),
    ] {
        assert_eq!(r[field], want, "{field} in {r}");
    }
    assert!(r.get("arguments").is_none(), "{r}");
    assert_eq!(r["result"]["contents"], read.result()["contents"], "{r}");

    // Refused by authorization (this scope grants tools only): audited with its code.
    let bob = signed_in(&w.gw, "/ops", "bob", "tools.admin");
    let refused = bob
        .request(
            "prompts/get",
            json!({"name": "up__greet", "arguments": {"name": "B"}}),
        )
        .await;
    assert_eq!(refused.status, 403, "{}", refused.text());
    let lines = all_lines(&w.audit, 3).await;
    let line = lines.get(2).unwrap_or_else(|| panic!("{lines:?}"));
    assert_eq!(
        (
            &line["event"],
            &line["principal"],
            &line["prompt"],
            &line["error_code"]
        ),
        (
            &json!("prompts/get"),
            &json!("bob"),
            &json!("up__greet"),
            &json!(-31005)
        ),
        "{line}"
    );
}
