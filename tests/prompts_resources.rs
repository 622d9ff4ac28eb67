//! Prompts and resources through one route: a modern (alpha) and a
//! handshake-era (beta) mock upstream, both listing prompts, resources and
//! templates, seen by a modern and a handshake-era client; gamma (the demo
//! stdio server) has none of them and must simply not contribute.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use junction_testkit::{
    spawn_gateway, Gateway, MockSpec, MockTool, MockUpstream, TestClient, REQUEST_STATE,
};
use serde_json::{json, Value};

fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_junction"))
}

struct World {
    alpha: MockUpstream,
    beta: MockUpstream,
    gw: Gateway,
}

async fn world(extra: &str) -> World {
    world_with(extra, 60_000).await
}

/// `alpha_ttl_ms`: the `ttlMs` the modern upstream puts on its lists.
async fn world_with(extra: &str, alpha_ttl_ms: u64) -> World {
    let alpha = MockUpstream::start(
        MockSpec::modern("alpha", vec![MockTool::echo("echo")]).with_ttl_ms(alpha_ttl_ms),
    )
    .await;
    let beta = MockUpstream::start(MockSpec::legacy("beta", vec![MockTool::echo("echo")])).await;
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
{extra}"#,
        alpha = alpha.url,
        beta = beta.url
    );
    let gw = spawn_gateway(bin(), &yaml).await;
    World { alpha, beta, gw }
}

/// A modern client and an initialized handshake-era client of `path`.
async fn clients(gw: &Gateway, path: &str) -> Vec<TestClient> {
    let modern = TestClient::modern(&gw.url(path));
    let legacy = TestClient::legacy(&gw.url(path), "2025-11-25");
    assert_eq!(legacy.initialize().await.status, 200, "{}", gw.stderr());
    vec![modern, legacy]
}

fn strings(list: &Value, key: &str, field: &str) -> Vec<String> {
    list[key]
        .as_array()
        .unwrap_or_else(|| panic!("{key} array in {list}"))
        .iter()
        .map(|p| p[field].as_str().unwrap_or("").to_owned())
        .collect()
}

fn first_text(result: &Value, pointer: &str) -> String {
    result
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("no {pointer} in {result}"))
        .to_owned()
}

#[tokio::test]
async fn prompts_of_both_upstreams_are_listed_and_got_by_both_eras() {
    let w = world("").await;
    for (n, c) in clients(&w.gw, "/mcp").await.iter().enumerate() {
        let modern = n == 0;
        let l = c.request("prompts/list", json!({})).await;
        assert_eq!(l.status, 200, "{}", w.gw.stderr());
        assert_eq!(
            strings(l.result(), "prompts", "name"),
            ["alpha__confirm", "alpha__greet", "beta__greet"],
            "config order, then name"
        );
        assert_eq!(
            l.result()["prompts"][2]["description"],
            "greeting from beta"
        );
        assert!(
            l.result()
                .get("_meta")
                .and_then(|m| m.get("dev.junction/degraded"))
                .is_none(),
            "an upstream without prompts is not degraded: {}",
            l.result()
        );
        // Nor is its -32601 a failed request in its upstream series.
        let scrape = TestClient::modern(&w.gw.url("/metrics"))
            .raw("GET", vec![], vec![])
            .await;
        let scrape = String::from_utf8_lossy(&scrape.raw);
        let gamma = |outcome: &str| {
            junction_testkit::metric(
                &scrape,
                &format!("junction_upstream_requests_total{{method=\"prompts/list\",outcome=\"{outcome}\",upstream=\"gamma\"}}"),
            )
        };
        assert!(gamma("ok") >= Some(1.0), "{scrape}");
        assert_eq!(gamma("error"), None, "{scrape}");
        if modern {
            assert_eq!(l.result()["resultType"], "complete");
            assert!(l.result()["ttlMs"].is_u64(), "{}", l.result());
            assert_eq!(l.result()["cacheScope"], "private", "beta is handshake era");
        } else {
            assert!(l.result().get("resultType").is_none());
        }

        for (name, label) in [("alpha__greet", "alpha"), ("beta__greet", "beta")] {
            let g = c
                .request(
                    "prompts/get",
                    json!({"name": name, "arguments": {"name": "Ada", "extra": [1, 2.50]}}),
                )
                .await;
            assert_eq!(g.status, 200, "{name}: {}", w.gw.stderr());
            assert_eq!(
                first_text(g.result(), "/messages/0/content/text"),
                format!("Hello Ada, from {label}")
            );
            if modern {
                assert_eq!(
                    g.result()["resultType"],
                    "complete",
                    "added for the handshake-era upstream too"
                );
            }
        }
    }
    // Each upstream saw its own name and the arguments as sent.
    for up in [&w.alpha, &w.beta] {
        let gets = up.requests_for("prompts/get");
        assert_eq!(gets.len(), 2, "{}", up.label());
        for g in gets {
            assert_eq!(g.body["params"]["name"], "greet");
            assert_eq!(
                g.body["params"]["arguments"],
                json!({"name": "Ada", "extra": [1, 2.50]})
            );
        }
    }
    let modern_gets = w.alpha.requests_for("prompts/get");
    assert_eq!(modern_gets[0].header("mcp-name"), Some("greet"));
}

#[tokio::test]
async fn unknown_prompts_and_upstream_errors() {
    let w = world("").await;
    let c = TestClient::modern(&w.gw.url("/mcp"));
    for name in ["nope", "gamma__greet", "delta__greet", "alpha__"] {
        let r = c.request("prompts/get", json!({"name": name})).await;
        assert_eq!(r.error_code(), Some(-32602), "{name}: {:?}", r.body);
    }
    assert!(w.alpha.requests_for("prompts/get").is_empty());
    // A name under a known prefix that its upstream does not list: Junction's
    // own -32602 from the route's prompt list, the upstream not asked.
    let r = c
        .request("prompts/get", json!({"name": "alpha__missing"}))
        .await;
    assert_eq!(r.error_code(), Some(-32602));
    assert!(r.body["error"]["message"]
        .as_str()
        .unwrap_or("")
        .contains("unknown prompt: alpha__missing"));
    assert!(w.alpha.requests_for("prompts/get").is_empty());
    let r = c
        .request(
            "prompts/get",
            json!({"name": "alpha__greet", "arguments": [1]}),
        )
        .await;
    assert_eq!(r.error_code(), Some(-32602), "arguments must be an object");
}

#[tokio::test]
async fn prompt_input_required_is_sealed_and_completes_on_retry() {
    let w = world("").await;
    let c = TestClient::modern(&w.gw.url("/mcp"));
    let first = c
        .request("prompts/get", json!({"name": "alpha__confirm"}))
        .await;
    assert_eq!(
        first.result()["resultType"],
        "input_required",
        "{:?}",
        first.body
    );
    let state = first.result()["requestState"].as_str().unwrap().to_owned();
    assert_ne!(state, REQUEST_STATE, "the upstream's state is wrapped");
    assert!(first.result()["inputRequests"]["confirm"].is_object());

    let mut tampered = state.clone().into_bytes();
    let last = tampered.len() - 2;
    tampered[last] = if tampered[last] == b'A' { b'B' } else { b'A' };
    let bad = c
        .request(
            "prompts/get",
            json!({"name": "alpha__confirm", "requestState": String::from_utf8(tampered).unwrap(),
                   "inputResponses": {"confirm": {"action": "accept", "content": {"ok": true}}}}),
        )
        .await;
    assert_eq!(bad.error_code(), Some(-32602));

    let done = c
        .request(
            "prompts/get",
            json!({"name": "alpha__confirm", "requestState": state,
                   "inputResponses": {"confirm": {"action": "accept", "content": {"ok": true}}}}),
        )
        .await;
    assert_eq!(done.result()["resultType"], "complete", "{:?}", done.body);
    assert!(first_text(done.result(), "/messages/0/content/text").starts_with("confirmed on alpha"));
    let retry = w.alpha.requests_for("prompts/get");
    assert_eq!(
        retry.last().unwrap().body["params"]["requestState"],
        REQUEST_STATE,
        "the upstream gets its own state back byte for byte"
    );
}

#[tokio::test]
async fn resources_keep_their_uris_and_are_read_from_their_owner() {
    let w = world("").await;
    for (n, c) in clients(&w.gw, "/mcp").await.iter().enumerate() {
        let modern = n == 0;
        let l = c.request("resources/list", json!({})).await;
        assert_eq!(l.status, 200, "{}", w.gw.stderr());
        assert_eq!(
            strings(l.result(), "resources", "uri"),
            [
                "mock://alpha/readme",
                "mock://shared/config",
                "mock://beta/readme",
                "junction://beta/mock://shared/config",
            ],
            "config order then URI; the URI both list keeps its name for the first \
             and is namespaced for the later one"
        );
        assert_eq!(modern, l.result().get("resultType").is_some());
        let t = c.request("resources/templates/list", json!({})).await;
        assert_eq!(
            strings(t.result(), "resourceTemplates", "uriTemplate"),
            ["mock://alpha/items/{id}", "mock://beta/items/{id}"]
        );
        for (uri, text) in [
            ("mock://alpha/readme", "readme of alpha"),
            ("mock://beta/readme", "readme of beta"),
            ("mock://shared/config", "config of alpha"),
            ("junction://beta/mock://shared/config", "config of beta"),
            ("mock://beta/items/7", "item 7 of beta"),
            ("mock://alpha/items/x", "item x of alpha"),
        ] {
            let r = c.request("resources/read", json!({"uri": uri})).await;
            assert_eq!(r.status, 200, "{uri}: {}", w.gw.stderr());
            assert_eq!(first_text(r.result(), "/contents/0/text"), text, "{uri}");
            let own = uri.strip_prefix("junction://beta/").unwrap_or(uri);
            assert_eq!(first_text(r.result(), "/contents/0/uri"), own);
            if modern {
                assert_eq!(r.result()["resultType"], "complete", "{uri}");
                // Required on a modern read result; the mocks send none.
                assert_eq!(r.result()["ttlMs"], 0, "{uri}");
                assert_eq!(r.result()["cacheScope"], "private", "{uri}");
            } else {
                assert!(r.result().get("ttlMs").is_none(), "{uri}");
            }
        }
        // Unknown to every list, or under a known namespace but not listed
        // there: Junction's own -32602, the upstream not asked.
        for unknown in ["mock://nowhere/x", "junction://beta/mock://shared/absent"] {
            let r = c.request("resources/read", json!({"uri": unknown})).await;
            assert_eq!(r.error_code(), Some(-32602), "{unknown}: {:?}", r.body);
        }
    }
    for (up, label) in [(&w.alpha, "alpha"), (&w.beta, "beta")] {
        for r in up.requests_for("resources/read") {
            let uri = r.body["params"]["uri"].as_str().unwrap().to_owned();
            assert!(
                uri.contains(label) || uri == "mock://shared/config",
                "{label} was asked for {uri}"
            );
        }
    }
    let read = w.alpha.requests_for("resources/read");
    assert_eq!(read[0].header("mcp-name"), Some("mock://alpha/readme"));
    let shared_reads = |up: &MockUpstream| {
        up.requests_for("resources/read")
            .iter()
            .filter(|r| r.body["params"]["uri"] == "mock://shared/config")
            .count()
    };
    // Each client read the shared URI once as alpha's and once namespaced as beta's.
    assert_eq!((shared_reads(&w.alpha), shared_reads(&w.beta)), (2, 2));
}

#[tokio::test]
async fn a_read_needs_no_earlier_list() {
    // ttlMs 0: nothing may be remembered between requests, reads still route.
    let w = world_with("", 0).await;
    // A fresh client, no list first (as on another replica): Junction lists itself.
    let c = TestClient::modern(&w.gw.url("/mcp"));
    for (uri, text) in [
        ("mock://beta/readme", "readme of beta"),
        ("mock://alpha/readme", "readme of alpha"),
        ("mock://beta/items/3", "item 3 of beta"),
    ] {
        let r = c.request("resources/read", json!({"uri": uri})).await;
        assert_eq!(r.status, 200, "{uri}: {}", w.gw.stderr());
        assert_eq!(first_text(r.result(), "/contents/0/text"), text, "{uri}");
    }
    let l = c.request("resources/list", json!({})).await;
    assert_eq!(l.result()["ttlMs"], 0, "the minimum over contributors");
}

#[tokio::test]
async fn prefix_never_routes_keep_prompt_names() {
    let w = world("").await;
    for c in clients(&w.gw, "/solo").await {
        let l = c.request("prompts/list", json!({})).await;
        assert_eq!(strings(l.result(), "prompts", "name"), ["confirm", "greet"]);
        let g = c
            .request(
                "prompts/get",
                json!({"name": "greet", "arguments": {"name": "Bo"}}),
            )
            .await;
        assert_eq!(
            first_text(g.result(), "/messages/0/content/text"),
            "Hello Bo, from alpha"
        );
        let l = c.request("resources/list", json!({})).await;
        assert_eq!(
            strings(l.result(), "resources", "uri"),
            ["mock://alpha/readme", "mock://shared/config"]
        );
        // One upstream: it answers for every URI, with its own error when unknown.
        let r = c
            .request("resources/read", json!({"uri": "mock://nowhere/x"}))
            .await;
        assert_eq!(r.error_code(), Some(-32002), "{:?}", r.body);
    }
}

#[tokio::test]
async fn both_eras_are_told_prompts_and_resources_exist() {
    let w = world("").await;
    let modern = TestClient::modern(&w.gw.url("/mcp"));
    let d = modern.request("server/discover", json!({})).await;
    let caps = &d.result()["capabilities"];
    assert!(
        caps["prompts"].is_object() && caps["resources"].is_object(),
        "{caps}"
    );
    let legacy = TestClient::legacy(&w.gw.url("/mcp"), "2025-11-25");
    let init = legacy.initialize().await;
    let caps = &init.result()["capabilities"];
    assert!(
        caps["prompts"].is_object() && caps["resources"].is_object(),
        "{caps}"
    );
}

#[tokio::test]
async fn lists_page_with_sealed_cursors() {
    let w = world("catalog: {page_size: 1}\n").await;
    for c in clients(&w.gw, "/mcp").await {
        let mut seen = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let params = match &cursor {
                None => json!({}),
                Some(cur) => json!({"cursor": cur}),
            };
            let r = c.request("resources/list", params).await;
            assert_eq!(r.status, 200, "{:?}", r.body);
            seen.extend(strings(r.result(), "resources", "uri"));
            match r.result()["nextCursor"].as_str() {
                Some(next) => cursor = Some(next.to_owned()),
                None => break,
            }
            assert!(seen.len() < 10, "paging does not end");
        }
        assert_eq!(
            seen,
            [
                "mock://alpha/readme",
                "mock://shared/config",
                "mock://beta/readme",
                "junction://beta/mock://shared/config",
            ]
        );
        // A resources cursor does not page prompts, and a forged one is refused.
        let first = c.request("resources/list", json!({})).await;
        let cur = first.result()["nextCursor"].as_str().unwrap().to_owned();
        let r = c.request("prompts/list", json!({"cursor": cur})).await;
        assert_eq!(r.error_code(), Some(-32602));
        let r = c.request("prompts/list", json!({"cursor": "forged"})).await;
        assert_eq!(r.error_code(), Some(-32602));
    }
}

#[tokio::test]
async fn a_down_upstream_is_named_and_the_others_still_listed() {
    let w = world("").await;
    w.beta.set_down(true).await;
    let c = TestClient::modern(&w.gw.url("/mcp"));
    let l = c.request("prompts/list", json!({})).await;
    assert_eq!(
        strings(l.result(), "prompts", "name"),
        ["alpha__confirm", "alpha__greet"]
    );
    assert_eq!(
        l.result()["_meta"]["dev.junction/degraded"],
        json!(["beta"])
    );
    let r = c
        .request("resources/read", json!({"uri": "mock://alpha/readme"}))
        .await;
    assert_eq!(
        first_text(r.result(), "/contents/0/text"),
        "readme of alpha"
    );
    let r = c
        .request("prompts/get", json!({"name": "beta__greet"}))
        .await;
    assert_eq!(r.error_code(), Some(-31001), "{:?}", r.body);
}

#[tokio::test]
async fn lists_are_cached_for_their_ttl_and_the_last_good_one_is_served() {
    let w = world("").await;
    let c = TestClient::modern(&w.gw.url("/mcp"));
    for _ in 0..3 {
        let l = c.request("prompts/list", json!({})).await;
        assert_eq!(strings(l.result(), "prompts", "name").len(), 3);
    }
    assert_eq!(
        w.alpha.requests_for("prompts/list").len(),
        1,
        "fresh for alpha's ttlMs: asked once"
    );

    // ttlMs 0: asked every time, and when it fails its last good list stands in.
    let w = world_with("", 0).await;
    let c = TestClient::modern(&w.gw.url("/mcp"));
    let l = c.request("prompts/list", json!({})).await;
    assert_eq!(strings(l.result(), "prompts", "name").len(), 3);
    w.alpha.set_down(true).await;
    let l = c.request("prompts/list", json!({})).await;
    assert_eq!(
        strings(l.result(), "prompts", "name"),
        ["alpha__confirm", "alpha__greet", "beta__greet"]
    );
    assert_eq!(
        l.result()["_meta"]["dev.junction/degraded"],
        json!(["alpha"])
    );
    assert_eq!(l.result()["ttlMs"], 0);
}

#[tokio::test]
async fn completion_is_routed_by_its_prompt_or_resource() {
    let w = world("").await;
    for (n, c) in clients(&w.gw, "/mcp").await.iter().enumerate() {
        let modern = n == 0;
        let complete = |reference: Value, argument: Value| {
            c.request(
                "completion/complete",
                json!({"ref": reference, "argument": argument}),
            )
        };
        let values = |r: &junction_testkit::TestResponse| -> Vec<String> {
            serde_json::from_value(r.result()["completion"]["values"].clone()).unwrap_or_default()
        };
        // A prompt of the modern upstream: renamed back to its own name there.
        let r = complete(
            json!({"type": "ref/prompt", "name": "alpha__greet"}),
            json!({"name": "name", "value": "alpha-a"}),
        )
        .await;
        assert_eq!(r.status, 200, "{}", w.gw.stderr());
        assert_eq!(values(&r), ["alpha-alice"], "{:?}", r.body);
        if modern {
            assert_eq!(r.result()["resultType"], "complete");
        }
        // A resource template, routed to the upstream that lists it.
        let r = complete(
            json!({"type": "ref/resource", "uri": "mock://alpha/items/{id}"}),
            json!({"name": "id", "value": ""}),
        )
        .await;
        assert_eq!(values(&r), ["alpha-1", "alpha-2"], "{:?}", r.body);
        // The handshake-era upstream has no completion: no suggestions, not an error
        // (with `resultType` for a modern client: the gateway adds it).
        let r = complete(
            json!({"type": "ref/prompt", "name": "beta__greet"}),
            json!({"name": "name", "value": "b"}),
        )
        .await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        assert_eq!(r.result()["completion"]["values"], json!([]));
        assert_eq!(modern, r.result()["resultType"] == "complete");
        // Unknown references and malformed requests never reach an upstream.
        for (reference, argument) in [
            (
                json!({"type": "ref/prompt", "name": "nope__greet"}),
                json!({"name": "a", "value": ""}),
            ),
            (
                json!({"type": "ref/resource", "uri": "mock://nowhere/{x}"}),
                json!({"name": "x", "value": ""}),
            ),
            (
                json!({"type": "ref/tool", "name": "alpha__echo"}),
                json!({"name": "a", "value": ""}),
            ),
            (
                json!({"type": "ref/prompt", "name": "alpha__greet"}),
                json!("name"),
            ),
        ] {
            let r = complete(reference.clone(), argument).await;
            assert_eq!(r.error_code(), Some(-32602), "{reference}: {:?}", r.body);
        }
        // The upstream's own error passes through unchanged.
        let r = complete(
            json!({"type": "ref/prompt", "name": "alpha__greet"}),
            json!({"name": "mood", "value": ""}),
        )
        .await;
        assert_eq!(r.error_code(), Some(-32602));
        assert!(r.error().unwrap()["message"]
            .as_str()
            .unwrap()
            .contains("nothing to complete"));
    }
    let asked = w.alpha.requests_for("completion/complete");
    assert!(asked
        .iter()
        .all(|r| r.body["params"]["ref"]["name"] != "alpha__greet"));
    assert_eq!(w.beta.requests_for("completion/complete").len(), 2);
}

#[tokio::test]
async fn both_eras_are_told_completion_and_logging_exist() {
    let w = world("").await;
    let d = TestClient::modern(&w.gw.url("/mcp"))
        .request("server/discover", json!({}))
        .await;
    let legacy = TestClient::legacy(&w.gw.url("/mcp"), "2025-11-25");
    let init = legacy.initialize().await;
    for caps in [&d.result()["capabilities"], &init.result()["capabilities"]] {
        assert!(caps["completions"].is_object(), "{caps}");
        assert!(caps["logging"].is_object(), "{caps}");
    }
    let solo = TestClient::modern(&w.gw.url("/solo"));
    let r = solo
        .request(
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "name", "value": ""}}),
        )
        .await;
    assert_eq!(
        r.result()["completion"]["values"],
        json!(["alpha-alice", "alpha-bob"]),
        "prefix: never keeps the name"
    );
}

#[tokio::test]
async fn a_rate_limit_rule_counts_a_routed_request_once() {
    let w = world(
        "rate_limits:\n  rules: [{name: gets, key: [principal], rate: 2, per: 1m, burst: 2, methods: [prompts/get, completion/complete]}]\n",
    )
    .await;
    let c = TestClient::modern(&w.gw.url("/mcp"));
    for _ in 0..2 {
        let r = c
            .request(
                "prompts/get",
                json!({"name": "alpha__greet", "arguments": {"name": "x"}}),
            )
            .await;
        assert_eq!(r.status, 200, "{:?}", r.body);
    }
    let r = c
        .request(
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": "alpha__greet"}, "argument": {"name": "name", "value": ""}}),
        )
        .await;
    assert_eq!(
        (r.status, r.error_code()),
        (429, Some(-31004)),
        "{:?}",
        r.body
    );
    assert_eq!(w.alpha.requests_for("prompts/get").len(), 2);
    assert!(w.alpha.requests_for("completion/complete").is_empty());
}
