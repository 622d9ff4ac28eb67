//! The status page (`status` in the config): its JSON for a healthy and a dead
//! upstream, the bearer token, 404 while off, a reload's outcome, and what a
//! person sees in a real browser (headless Chromium: the DOM text and a
//! screenshot checked to be a non-blank PNG of the requested size).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use junction_testkit::{
    spawn_gateway, spawn_gateway_with_env, Gateway, MockSpec, MockTool, MockUpstream, TestClient,
};
use serde_json::{json, Value};

const TOKEN: &str = "status-token-for-tests";

fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_junction"))
}

/// An HTTP URL nobody listens on (a port just bound and released).
fn dead_url() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("addr").port();
    drop(l);
    format!("http://127.0.0.1:{port}/mcp?api_key=hunter2")
}

async fn get(url: &str, headers: &[(&str, &str)]) -> (u16, Vec<(String, String)>, String) {
    let headers = headers
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let r = TestClient::modern(url).raw("GET", headers, vec![]).await;
    (
        r.status,
        r.headers,
        String::from_utf8_lossy(&r.raw).into_owned(),
    )
}

async fn status_json(gw: &Gateway) -> Value {
    let bearer = format!("Bearer {TOKEN}");
    let (code, _, body) = get(&gw.url("/status.json"), &[("authorization", &bearer)]).await;
    assert_eq!(code, 200, "{body}");
    serde_json::from_str(&body).expect("JSON")
}

fn upstream<'a>(report: &'a Value, id: &str) -> &'a Value {
    report["upstreams"]
        .as_array()
        .and_then(|a| a.iter().find(|u| u["id"] == id))
        .unwrap_or_else(|| panic!("no upstream {id} in {report:#}"))
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

/// Polls the report until `ok` holds (bounded: 15 s).
async fn report_until(gw: &Gateway, ok: impl Fn(&Value) -> bool) -> Value {
    let mut last = Value::Null;
    for _ in 0..150 {
        last = status_json(gw).await;
        if ok(&last) {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the report never got there:\n{last:#}")
}

fn config(alpha: &str, notes: &str, extra: &str) -> String {
    format!(
        "server: {{listen: 127.0.0.1:0}}\n\
         upstreams:\n  - {{id: alpha, url: '{alpha}'}}\n  - {{id: notes, url: '{notes}'}}\n  - {{id: ghost, url: '{}'}}\n\
         rate_limits: {{rules: [{{name: per-user-tool, key: [principal, tool], rate: 10, per: 1m, burst: 20}}]}}\n{extra}",
        dead_url()
    )
}

async fn mocks() -> (MockUpstream, MockUpstream) {
    let alpha = MockUpstream::start(MockSpec::modern(
        "alpha",
        vec![
            MockTool::echo("search_customers"),
            MockTool::echo("get_customer"),
        ],
    ))
    .await;
    let notes =
        MockUpstream::start(MockSpec::legacy("notes", vec![MockTool::echo("add_note")])).await;
    (alpha, notes)
}

#[tokio::test]
async fn the_report_shows_up_and_down_upstreams_their_tools_and_wants_the_token() {
    let (alpha, notes) = mocks().await;
    let yaml = config(
        &alpha.url,
        &notes.url,
        "status: {enabled: true, token_env: STATUS_TOKEN}\n",
    );
    let gw = spawn_gateway_with_env(bin(), &yaml, &[("STATUS_TOKEN", TOKEN)]).await;
    // One call, so a rate-limit bucket is live.
    let c = TestClient::modern(&gw.url("/mcp"));
    let call = c.call_tool("alpha__get_customer", json!({"id": 7})).await;
    assert!(call.error().is_none(), "{:?}", call.body);

    // Without the token, with a wrong one, or as a query parameter on the
    // JSON: 401 with the challenge.
    for (path, auth) in [
        ("/status.json", None),
        ("/status.json", Some("Bearer wrong")),
        ("/status", Some("Basic c3RhdHVz")),
        (&*format!("/status.json?token={TOKEN}"), None),
    ] {
        let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("authorization", *a)).collect();
        let (code, h, body) = get(&gw.url(path), &headers).await;
        assert_eq!(code, 401, "{path} {auth:?}: {body}");
        assert_eq!(
            header(&h, "www-authenticate"),
            Some(r#"Bearer realm="junction-status""#)
        );
    }

    let report = report_until(&gw, |r| upstream(r, "alpha")["health"] == "up").await;
    let a = upstream(&report, "alpha");
    assert_eq!(a["transport"], "http");
    assert_eq!(a["target"], alpha.url.as_str());
    assert_eq!(a["era"], "modern");
    assert_eq!(a["breaker"]["state"], "closed");
    assert_eq!(a["tools"], 2);
    assert!(a["latency_ms"].as_f64().is_some_and(|ms| ms > 0.0), "{a}");
    assert!(a["last_error"].is_null(), "{a}");
    let n = upstream(&report, "notes");
    assert_eq!((&n["era"], &n["health"]), (&json!("legacy"), &json!("up")));
    assert!(n["protocol_version"].is_string(), "{n}");

    let g = upstream(&report, "ghost");
    assert_eq!(g["health"], "down", "{g}");
    assert_eq!(g["tools"], 0);
    assert_eq!(g["era"], "unknown");
    let message = g["last_error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("unavailable"), "{g}");
    assert!(
        g["target"].as_str().is_some_and(|t| t.ends_with("/mcp")),
        "{g}"
    );

    let route = &report["routes"][0];
    assert_eq!(route["path"], "/mcp");
    assert_eq!(route["degraded"], json!(["ghost"]));
    let tools: Vec<(&str, &str, &str)> = route["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| {
            let s = |k: &str| t[k].as_str().unwrap_or_default();
            (s("name"), s("upstream"), s("original"))
        })
        .collect();
    assert_eq!(
        tools,
        [
            ("alpha__get_customer", "alpha", "get_customer"),
            ("alpha__search_customers", "alpha", "search_customers"),
            ("notes__add_note", "notes", "add_note"),
        ]
    );
    let rule = &report["rate_limits"]["rules"][0];
    assert_eq!(rule["name"], "per-user-tool");
    assert_eq!(rule["key"], json!(["principal", "tool"]));
    assert_eq!(
        (&rule["rate"], &rule["per"], &rule["burst"]),
        (&json!(10), &json!("1m"), &json!(20))
    );
    assert_eq!(rule["live_buckets"], 1, "{rule}");
    assert_eq!(report["rate_limits"]["backend"], "local");
    let version = report["config"]["version"].as_str().unwrap_or_default();
    assert!(
        version.len() == 12 && version.bytes().all(|b| b.is_ascii_hexdigit()),
        "{version}"
    );
    assert!(report["config"]["last_reload"].is_null());

    // The HTML page takes the token as a query parameter too; a credential in
    // an upstream URL's query never shows.
    let (code, h, html) = get(&gw.url(&format!("/status?token={TOKEN}")), &[]).await;
    assert_eq!(code, 200);
    assert_eq!(header(&h, "content-type"), Some("text/html; charset=utf-8"));
    assert_eq!(header(&h, "cache-control"), Some("no-store"));
    assert!(html.contains("alpha__search_customers") && html.contains("ghost"));
    let json_text = serde_json::to_string(&report).expect("text");
    assert!(!html.contains("hunter2") && !json_text.contains("hunter2"));

    // Read-only.
    let r = TestClient::modern(&gw.url("/status"))
        .raw(
            "POST",
            vec![("authorization".into(), format!("Bearer {TOKEN}"))],
            vec![],
        )
        .await;
    assert_eq!(r.status, 405);

    // A reload that fails is on the page, and the old config keeps serving.
    let good = std::fs::read_to_string(gw.config_path()).expect("config");
    std::fs::write(gw.config_path(), format!("{good}\nnonsense_key: 1\n")).expect("write");
    let report = report_until(&gw, |r| r["config"]["last_reload"]["ok"] == false).await;
    let error = report["config"]["last_reload"]["error"]
        .as_str()
        .unwrap_or_default();
    assert!(error.contains("nonsense_key"), "{error}");
    assert_eq!(report["config"]["version"], version);
    std::fs::write(gw.config_path(), good.replace("burst: 20", "burst: 30")).expect("write");
    let report = report_until(&gw, |r| r["config"]["last_reload"]["ok"] == true).await;
    assert_ne!(
        report["config"]["version"], version,
        "a new config, a new version"
    );
    assert_eq!(report["rate_limits"]["rules"][0]["burst"], 30);
}

#[tokio::test]
async fn without_status_the_path_is_not_served() {
    let alpha = MockUpstream::start(MockSpec::modern("alpha", vec![MockTool::echo("echo")])).await;
    let yaml = format!(
        "server: {{listen: 127.0.0.1:0}}\nupstreams: [{{id: alpha, url: '{}'}}]\n",
        alpha.url
    );
    let gw = spawn_gateway(bin(), &yaml).await;
    for path in ["/status", "/status.json"] {
        let (code, _, _) = get(&gw.url(path), &[]).await;
        assert_eq!(code, 404, "{path}");
    }
    // Enabled without a token: open (inside the cluster only), on its own path.
    let yaml = format!("{yaml}status: {{enabled: true, path: /ops/junction}}\n");
    let gw = spawn_gateway(bin(), &yaml).await;
    let (code, _, body) = get(&gw.url("/ops/junction.json"), &[]).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(get(&gw.url("/status"), &[]).await.0, 404);
}

#[path = "status/browser.rs"]
mod browser;
