//! Edge policy end to end: JWT authentication (RFC 9728 challenges), scope
//! filtering and step-up, rate limits (local and shared through a real Redis),
//! and caller-bound sessions and requestState. The testkit upstream records
//! every header it sees, so these tests also prove no client credential leaks.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use junction_testkit::jwt::{bearer, jwks_file, now, token, token_with, ISSUER, PUBLIC};
use junction_testkit::{
    spawn_gateway, Behavior, Gateway, MockSpec, MockTool, MockUpstream, TestClient,
};
use serde_json::{json, Value};

fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_junction"))
}

/// A modern client at `url` with a fresh token for `sub` and `scope`.
fn signed_in(url: &str, sub: &str, scope: &str) -> TestClient {
    TestClient::modern(url).with_header("authorization", &bearer(&token(sub, scope)))
}

struct World {
    up: MockUpstream,
    gw: Gateway,
    _dir: tempfile::TempDir,
}

async fn world(extra: &str) -> World {
    world_with("", extra).await
}

/// `world` with more `server` keys (`server_keys` starts with a comma).
/// The world of `world_with`, its rules replaced by `rules` (YAML list items).
async fn world_with_rules(rules: &str) -> World {
    world_with_all("", "", Some(rules)).await
}

async fn world_with(server_keys: &str, extra: &str) -> World {
    world_with_all(server_keys, extra, None).await
}

async fn world_with_all(server_keys: &str, extra: &str, rules: Option<&str>) -> World {
    let up = MockUpstream::start(MockSpec::modern(
        "up",
        vec![
            MockTool::echo("echo"),
            MockTool::echo("admin"),
            MockTool::new("mrtr", json!({"type": "object"}), Behavior::InputRequired),
            // 50 progress steps, 10 ms apart: an answer streamed for 0.5 s.
            MockTool::new(
                "progress",
                json!({"type": "object"}),
                Behavior::Progress { steps: 50 },
            ),
        ],
    ))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let yaml = format!(
        r#"
server: {{listen: 127.0.0.1:0, public_url: "{PUBLIC}"{server_keys}}}
upstreams:
  - {{id: up, url: "{url}"}}
auth:
  jwt: {{issuer: "{ISSUER}", jwks_file: "{jwks}"}}
  scopes_supported: [tools.read, tools.admin]
  rules:{rules}
{extra}
"#,
        url = up.url,
        jwks = jwks_file(dir.path()).display(),
        rules = rules.unwrap_or(
            r#"
    - {scopes: [tools.read], tools: ["up__echo", "up__mrtr", "up__progress"]}
    - {scopes: [tools.admin], tools: ["up__*"]}"#
        )
    );
    let gw = spawn_gateway(bin(), &yaml).await;
    World { up, gw, _dir: dir }
}

fn names(r: &Value) -> Vec<String> {
    r["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn tokens_are_checked_and_challenges_point_at_the_resource_metadata() {
    let w = world("").await;
    let url = w.gw.url("/mcp");
    let anon = TestClient::modern(&url)
        .request("tools/list", json!({}))
        .await;
    assert_eq!(anon.status, 401);
    assert_eq!(anon.error_code(), Some(-31005));
    let challenge = anon
        .header("www-authenticate")
        .expect("challenge")
        .to_owned();
    assert!(challenge.starts_with("Bearer "), "{challenge}");
    assert!(
        challenge.contains(&format!(
            "resource_metadata=\"{PUBLIC}/.well-known/oauth-protected-resource/mcp\""
        )),
        "{challenge}"
    );
    assert!(
        challenge.contains("scope=\"tools.read tools.admin\""),
        "{challenge}"
    );

    let claims = |f: &dyn Fn(&mut Value)| {
        let mut c = json!({"iss": ISSUER, "sub": "alice", "aud": PUBLIC, "iat": now(), "exp": now() + 600, "scope": "tools.read"});
        f(&mut c);
        token_with(c)
    };
    let cases: Vec<(&str, String)> = vec![
        ("expired", claims(&|c| c["exp"] = json!(now() - 3600))),
        ("not yet valid", claims(&|c| c["nbf"] = json!(now() + 3600))),
        (
            "wrong issuer",
            claims(&|c| c["iss"] = json!("https://evil.test")),
        ),
        (
            "wrong audience",
            claims(&|c| c["aud"] = json!("https://other.test")),
        ),
        ("garbage", "not.a.jwt".into()),
    ];
    for (what, t) in cases {
        let r = TestClient::modern(&url)
            .with_header("authorization", &bearer(&t))
            .request("tools/list", json!({}))
            .await;
        assert_eq!(r.status, 401, "{what}");
        assert!(
            r.header("www-authenticate")
                .unwrap()
                .contains("error=\"invalid_token\""),
            "{what}"
        );
    }
    let good = token("alice", "tools.read");
    let in_query = TestClient::modern(&format!("{url}?access_token={good}"))
        .request("tools/list", json!({}))
        .await;
    assert_eq!(
        in_query.status, 401,
        "a token in the query string is refused"
    );

    let ok = TestClient::modern(&url)
        .with_header("authorization", &bearer(&good))
        .request("tools/list", json!({}))
        .await;
    assert_eq!(ok.status, 200, "{}", ok.text());

    let meta = TestClient::modern(&w.gw.url("/.well-known/oauth-protected-resource/mcp"))
        .raw("GET", vec![], vec![])
        .await;
    assert_eq!(meta.status, 200);
    assert_eq!(meta.body["resource"], format!("{PUBLIC}/mcp"));
    assert_eq!(meta.body["authorization_servers"], json!([ISSUER]));
    assert_eq!(
        TestClient::modern(&w.gw.url("/.well-known/oauth-protected-resource"))
            .raw("GET", vec![], vec![])
            .await
            .status,
        200
    );
    assert!(w.up.calls("echo").is_empty());
}

#[tokio::test]
async fn scopes_filter_the_catalog_and_calls_outside_the_grant_get_a_step_up_challenge() {
    let w = world("").await;
    let url = w.gw.url("/mcp");
    let reader = signed_in(&url, "alice", "tools.read").with_header("cookie", "sid=secret-cookie");
    let list = reader.request("tools/list", json!({})).await;
    assert_eq!(
        names(list.result()),
        vec!["up__echo", "up__mrtr", "up__progress"]
    );
    assert_eq!(list.result()["cacheScope"], "private");
    let admin = signed_in(&url, "root", "tools.admin");
    assert_eq!(
        names(admin.request("tools/list", json!({})).await.result()),
        vec!["up__admin", "up__echo", "up__mrtr", "up__progress"]
    );

    assert_eq!(
        reader.call_tool("up__echo", json!({})).await.result()["structuredContent"]["tool"],
        "echo"
    );
    let denied = reader.call_tool("up__admin", json!({})).await;
    assert_eq!(denied.status, 403);
    assert_eq!(denied.error_code(), Some(-31005));
    let challenge = denied.header("www-authenticate").unwrap();
    assert!(
        challenge.contains("error=\"insufficient_scope\""),
        "{challenge}"
    );
    assert!(challenge.contains("scope=\"tools.admin\""), "{challenge}");
    assert!(
        w.up.calls("admin").is_empty(),
        "a denied call never reaches the upstream"
    );
    assert_eq!(
        admin.call_tool("up__admin", json!({})).await.result()["structuredContent"]["tool"],
        "admin"
    );

    for r in w.up.requests() {
        assert!(
            r.header("authorization").is_none(),
            "client token reached the upstream: {:?}",
            r.headers
        );
        assert!(r.header("cookie").is_none());
    }
}

/// One keep-alive connection whose client changes its token between
/// requests (a connection pool shared by an agent's users does): each request
/// is judged by the token it carries, not by the one the connection sent
/// before (Junction remembers a connection's last token, `LastToken`).
#[tokio::test]
async fn on_one_connection_each_request_is_judged_by_its_own_token() {
    let w = world("").await;
    let url = w.gw.url("/mcp");
    let mut conn = tokio::net::TcpStream::connect(w.gw.addr).await.unwrap();
    let reader = bearer(&token("alice", "tools.read"));
    let admin = bearer(&token("root", "tools.admin"));
    let expired = bearer(&token_with(
        json!({"iss": ISSUER, "sub": "alice", "aud": PUBLIC,
        "iat": now() - 1200, "exp": now() - 600, "scope": "tools.read"}),
    ));
    // (whose token, the token, tool, the status expected), in order, on
    // `conn`. A 401 is answered before the body is read; the connection
    // drops the body and stays open for the client's next request.
    let steps: [(&str, &str, &str, u16); 7] = [
        ("reader", &reader, "up__echo", 200),
        ("reader", &reader, "up__admin", 403),
        ("admin", &admin, "up__admin", 200),
        ("reader", &reader, "up__admin", 403),
        ("admin", &admin, "up__admin", 200),
        ("expired", &expired, "up__echo", 401),
        ("reader", &reader, "up__echo", 200),
    ];
    for (i, (who, authorization, tool, want)) in steps.iter().enumerate() {
        let client = TestClient::modern(&url).with_header("authorization", authorization);
        let call = client.envelope("tools/call", json!({"name": tool, "arguments": {}}));
        let answer = client.exchange_on(&mut conn, &call).await;
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {want} ")),
            "step {i}: {who} calling {tool}: {answer:?}"
        );
    }
    assert_eq!(
        w.up.calls("admin").len(),
        2,
        "only the admin token's calls arrived"
    );
    assert_eq!(w.up.calls("echo").len(), 2);
}

/// Rules over prompts and resource URIs, and a rule that matches a group
/// claim instead of a scope.
const ALL_KINDS: &str = r#"
    - {scopes: [crm.read], tools: ["up__echo"], prompts: ["up__greet"], resources: ["mock://up/*"]}
    - {claims: {groups: [admins, ops]}, tools: ["up__*"], prompts: ["up__*"], resources: ["*"]}
"#;

fn uris(r: &Value, key: &str, field: &str) -> Vec<String> {
    r[key]
        .as_array()
        .unwrap_or_else(|| panic!("{key} in {r}"))
        .iter()
        .map(|t| t[field].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn rules_cover_prompts_resources_and_completion_and_match_claims() {
    let w = world_with_rules(ALL_KINDS).await;
    let url = w.gw.url("/mcp");
    let reader = signed_in(&url, "alice", "crm.read");
    let admin = TestClient::modern(&url).with_header(
        "authorization",
        &bearer(&token_with(
            json!({"iss": ISSUER, "sub": "root", "aud": PUBLIC,
            "iat": now(), "exp": now() + 600, "groups": ["eng", "admins"]}),
        )),
    );
    let nobody = signed_in(&url, "eve", "");

    // Lists show what the caller may use, and are private to it.
    let p = reader.request("prompts/list", json!({})).await;
    assert_eq!(uris(p.result(), "prompts", "name"), ["up__greet"]);
    assert_eq!(p.result()["cacheScope"], "private");
    assert_eq!(
        uris(
            admin.request("prompts/list", json!({})).await.result(),
            "prompts",
            "name"
        ),
        ["up__confirm", "up__greet"]
    );
    assert!(uris(
        nobody.request("prompts/list", json!({})).await.result(),
        "prompts",
        "name"
    )
    .is_empty());
    let resources = reader.request("resources/list", json!({})).await;
    assert_eq!(
        uris(resources.result(), "resources", "uri"),
        ["mock://up/readme"]
    );
    let templates = reader.request("resources/templates/list", json!({})).await;
    assert_eq!(
        uris(templates.result(), "resourceTemplates", "uriTemplate"),
        ["mock://up/items/{id}"]
    );
    let all = admin.request("resources/list", json!({})).await;
    assert_eq!(
        uris(all.result(), "resources", "uri"),
        ["mock://shared/config", "mock://up/readme"]
    );
    assert!(uris(
        nobody.request("resources/list", json!({})).await.result(),
        "resources",
        "uri"
    )
    .is_empty());

    // Using something outside the grant is a step-up 403, never forwarded.
    let denied = [
        reader
            .request("prompts/get", json!({"name": "up__confirm"}))
            .await,
        reader
            .request("resources/read", json!({"uri": "mock://shared/config"}))
            .await,
        reader
            .request(
                "completion/complete",
                json!({"ref": {"type": "ref/prompt", "name": "up__confirm"},
                       "argument": {"name": "x", "value": ""}}),
            )
            .await,
        nobody
            .request("resources/read", json!({"uri": "mock://up/readme"}))
            .await,
    ];
    for d in &denied {
        assert_eq!(d.status, 403, "{:?}", d.body);
        assert_eq!(d.error_code(), Some(-31005));
        let challenge = d.header("www-authenticate").unwrap();
        assert!(challenge.contains("insufficient_scope"), "{challenge}");
    }
    assert!(
        denied[3]
            .header("www-authenticate")
            .unwrap()
            .contains("scope=\"crm.read\""),
        "the challenge names the scope that would grant it"
    );
    assert!(w.up.requests_for("prompts/get").is_empty());
    assert!(w.up.requests_for("resources/read").is_empty());
    assert!(w.up.requests_for("completion/complete").is_empty());

    // What the grant covers goes through, for the scope and for the claim.
    let ok = [
        reader
            .request(
                "prompts/get",
                json!({"name": "up__greet", "arguments": {"name": "Ada"}}),
            )
            .await,
        reader
            .request("resources/read", json!({"uri": "mock://up/readme"}))
            .await,
        reader
            .request(
                "completion/complete",
                json!({"ref": {"type": "ref/prompt", "name": "up__greet"},
                       "argument": {"name": "name", "value": "up"}}),
            )
            .await,
        admin
            .request("resources/read", json!({"uri": "mock://shared/config"}))
            .await,
        admin
            .request("prompts/get", json!({"name": "up__confirm"}))
            .await,
    ];
    for r in &ok {
        assert_eq!(r.status, 200, "{:?}: {}", r.body, w.gw.stderr());
        assert!(r.body.get("error").is_none(), "{:?}", r.body);
    }

    // A subscription to a URI the caller may not read is left out.
    let mut listen = reader
        .stream(
            "subscriptions/listen",
            json!({"notifications": {"resourceSubscriptions":
                ["mock://shared/config", "mock://up/readme"]}}),
            vec![],
        )
        .await;
    let ack = listen
        .next(Duration::from_secs(10))
        .await
        .expect("acknowledged");
    assert_eq!(
        ack["params"]["notifications"]["resourceSubscriptions"],
        json!(["mock://up/readme"]),
        "{ack}"
    );
}

#[tokio::test]
async fn sessions_and_request_state_are_bound_to_the_caller() {
    let w = world("").await;
    let url = w.gw.url("/mcp");
    let (alice, bob) = (
        bearer(&token("alice", "tools.read")),
        bearer(&token("bob", "tools.read")),
    );
    let la = TestClient::legacy(&url, "2025-11-25").with_header("authorization", &alice);
    la.initialize().await;
    assert_eq!(la.request("tools/list", json!({})).await.status, 200);
    let lb = TestClient::legacy(&url, "2025-11-25").with_header("authorization", &bob);
    lb.set_session_id(la.session_id());
    assert_eq!(
        lb.request("tools/list", json!({})).await.status,
        404,
        "alice's session id is not bob's"
    );

    let ma = TestClient::modern(&url)
        .with_header("authorization", &alice)
        .with_capabilities(json!({"elicitation": {}}));
    let mb = TestClient::modern(&url)
        .with_header("authorization", &bob)
        .with_capabilities(json!({"elicitation": {}}));
    let first = ma.call_tool("up__mrtr", json!({})).await;
    let state = first.result()["requestState"].clone();
    let responses = junction_testkit::accept_all(first.result(), json!({}));
    let params = json!({"name": "up__mrtr", "arguments": {}, "inputResponses": responses, "requestState": state});
    let replay = mb.request("tools/call", params.clone()).await;
    assert_eq!(
        replay.error_code(),
        Some(-32602),
        "bob cannot replay alice's state"
    );
    assert_eq!(w.up.calls("mrtr").len(), 1);
    assert_eq!(
        ma.request("tools/call", params).await.result()["resultType"],
        "complete"
    );
}

#[tokio::test]
async fn local_rate_limits_count_tool_calls_per_caller_and_tool() {
    let w = world("rate_limits:\n  rules:\n    - {name: per-user-tool, key: [principal, tool], rate: 3, per: 1m, burst: 3}\n").await;
    let url = w.gw.url("/mcp");
    let alice = signed_in(&url, "alice", "tools.read");
    let bob = signed_in(&url, "bob", "tools.read");
    for _ in 0..5 {
        assert_eq!(
            alice.request("tools/list", json!({})).await.status,
            200,
            "lists are not counted"
        );
    }
    for i in 0..3 {
        assert_eq!(
            alice.call_tool("up__echo", json!({"i": i})).await.status,
            200
        );
    }
    let limited = alice.call_tool("up__echo", json!({})).await;
    assert_eq!(limited.status, 429);
    assert_eq!(limited.error_code(), Some(-31004));
    assert!(
        limited.error().unwrap()["data"]["retryAfterMs"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert!(
        limited
            .header("retry-after")
            .unwrap()
            .parse::<u64>()
            .unwrap()
            >= 1
    );
    assert_eq!(
        bob.call_tool("up__echo", json!({})).await.status,
        200,
        "bob has his own bucket"
    );
    assert_eq!(w.up.calls("echo").len(), 4);
}

#[tokio::test]
async fn a_client_ip_rate_key_counts_every_caller_from_one_address_together() {
    // The key is the TCP peer's address (here 127.0.0.1 for every client):
    // callers are not told apart by their tokens, and a client's own
    // X-Forwarded-For does not buy it a fresh bucket.
    let w = world("rate_limits:\n  rules:\n    - {name: per-ip, key: [client_ip], rate: 3, per: 1m, burst: 3}\n").await;
    let url = w.gw.url("/mcp");
    let alice = signed_in(&url, "alice", "tools.read");
    let bob = signed_in(&url, "bob", "tools.read");
    let spoofing =
        signed_in(&url, "carol", "tools.read").with_header("x-forwarded-for", "203.0.113.9");
    for client in [&alice, &bob, &alice] {
        assert_eq!(client.call_tool("up__echo", json!({})).await.status, 200);
    }
    for client in [&bob, &alice, &spoofing] {
        let limited = client.call_tool("up__echo", json!({})).await;
        assert_eq!(limited.status, 429);
        assert_eq!(limited.error_code(), Some(-31004));
        assert_eq!(limited.error().unwrap()["data"]["rule"], "per-ip");
    }
    assert_eq!(w.up.calls("echo").len(), 3);
}

#[tokio::test]
async fn behind_a_trusted_proxy_the_client_ip_key_is_the_address_it_forwards() {
    // The test's own connections come from 127.0.0.1: here that is the
    // ingress, and X-Forwarded-For carries the callers' addresses.
    let w = world_with(
        ", trusted_proxies: [127.0.0.1]",
        "rate_limits:\n  rules:\n    - {name: per-ip, key: [client_ip], rate: 2, per: 1m, burst: 2}\n",
    )
    .await;
    let url = w.gw.url("/mcp");
    let via =
        |xff: &str| signed_in(&url, "alice", "tools.read").with_header("x-forwarded-for", xff);
    let (first, second) = (via("198.51.100.1"), via("198.51.100.2"));
    // Two callers, one token: a bucket each.
    for client in [&first, &second, &first, &second] {
        assert_eq!(client.call_tool("up__echo", json!({})).await.status, 200);
    }
    // The first caller again: through a second trusted hop, or with an
    // address of its own choosing written in front (the proxy appended the
    // real one); without the header it is the proxy itself, a third bucket.
    for client in [
        &first,
        &via("198.51.100.1, 127.0.0.1"),
        &via("203.0.113.9, 198.51.100.1"),
    ] {
        let limited = client.call_tool("up__echo", json!({})).await;
        assert_eq!(limited.status, 429);
        assert_eq!(limited.error().unwrap()["data"]["rule"], "per-ip");
    }
    let proxy = signed_in(&url, "alice", "tools.read");
    assert_eq!(proxy.call_tool("up__echo", json!({})).await.status, 200);
    assert_eq!(w.up.calls("echo").len(), 5);
}

#[tokio::test]
async fn trusting_every_address_is_warned_about() {
    let w = world_with(", trusted_proxies: ['0.0.0.0/0', 10.0.0.0/8]", "").await;
    let mut warned = String::new();
    for _ in 0..100 {
        warned =
            w.gw.stderr()
                .lines()
                .filter(|l| l.contains("WARN") && l.contains("trusts every address"))
                .collect();
        if !warned.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(warned.contains("0.0.0.0/0"), "{}", w.gw.stderr());
    assert!(!warned.contains("10.0.0.0/8"), "{warned}");
}

/// The `junction::access` lines of the gateway's JSON log so far, once at
/// least `n` are there (a thread of its own writes the log).
async fn access_lines(gw: &Gateway, n: usize) -> Vec<Value> {
    let read = || -> Vec<Value> {
        gw.stderr()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|l| l["target"] == "junction::access")
            .map(|l| l["fields"].clone())
            .collect()
    };
    for _ in 0..100 {
        if read().len() >= n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    read()
}

#[tokio::test]
async fn every_request_gets_one_access_line_without_arguments_or_tokens() {
    let w = world_with(", trusted_proxies: [127.0.0.1]", "log: {format: json}\n").await;
    let url = w.gw.url("/mcp");
    let alice_token = token("alice", "tools.read");
    let alice = TestClient::modern(&url)
        .with_header("authorization", &bearer(&alice_token))
        .with_header("x-forwarded-for", "198.51.100.7");
    let ok = alice
        .call_tool("up__echo", json!({"note": "s3cr3t-argument"}))
        .await;
    assert_eq!(ok.status, 200);
    assert_eq!(alice.call_tool("up__admin", json!({})).await.status, 403);
    let anonymous = TestClient::modern(&url);
    assert_eq!(anonymous.call_tool("up__echo", json!({})).await.status, 401);

    let lines = access_lines(&w.gw, 3).await;
    assert_eq!(lines.len(), 3, "{}", w.gw.stderr());
    let (called, forbidden, unauthenticated) = (&lines[0], &lines[1], &lines[2]);
    for (field, want) in [
        ("route", json!("/mcp")),
        ("method", json!("tools/call")),
        ("upstream", json!("up")),
        ("target", json!("up__echo")),
        ("status", json!(200)),
        ("outcome", json!("ok")),
        ("principal", json!("alice")),
        // Behind the trusted proxy: the address it forwarded.
        ("client", json!("198.51.100.7")),
    ] {
        assert_eq!(called[field], want, "{field} in {called}");
    }
    assert!(
        called["duration_us"].as_u64().is_some_and(|d| d > 0),
        "{called}"
    );
    assert!(called.get("error").is_none(), "{called}");
    // Refused by authorization: the tool is named, with Junction's code.
    assert_eq!(forbidden["target"], "up__admin", "{forbidden}");
    assert_eq!(
        (forbidden["status"].clone(), forbidden["error"].clone()),
        (json!(403), json!(-31005))
    );
    assert_eq!(forbidden["principal"], "alice");
    // Refused before the body was read: nothing is routed, nobody is known.
    assert_eq!(unauthenticated["status"], 401, "{unauthenticated}");
    assert!(unauthenticated.get("principal").is_none());
    assert!(unauthenticated.get("target").is_none());
    assert_eq!(unauthenticated["client"], "127.0.0.1");

    let log = w.gw.stderr();
    assert!(!log.contains("s3cr3t-argument"), "arguments logged:\n{log}");
    assert!(!log.contains(&alice_token), "token logged:\n{log}");
}

#[tokio::test]
async fn a_streamed_answer_is_logged_when_it_ends_with_its_whole_duration() {
    let w = world("log: {format: json}\n").await;
    let alice = signed_in(&w.gw.url("/mcp"), "alice", "tools.read");
    let params = json!({"name": "up__progress", "arguments": {}, "_meta": {"progressToken": "p"}});
    let started = std::time::Instant::now();
    let streamed = alice.request("tools/call", params.clone()).await;
    let seen = started.elapsed();
    assert!(streamed.is_sse(), "progress streams as SSE");
    assert_eq!(
        streamed.events.len(),
        51,
        "50 progress notifications and the result"
    );
    // The same call, closed by the client after its first message.
    let mut cut = alice.stream("tools/call", params, vec![]).await;
    assert!(cut.next(Duration::from_secs(5)).await.is_some());
    drop(cut);
    assert!(w.up.saw_cancellation(Duration::from_secs(5)).await);

    let lines = access_lines(&w.gw, 2).await;
    assert_eq!(lines.len(), 2, "{}", w.gw.stderr());
    let (whole, aborted) = (&lines[0], &lines[1]);
    for line in [whole, aborted] {
        assert_eq!(line["target"], "up__progress", "{line}");
        assert_eq!(line["status"], 200, "{line}");
        assert_eq!(line["principal"], "alice", "{line}");
    }
    assert_eq!(whole["outcome"], "ok", "{whole}");
    // Written when the stream ended, not when its first message went out:
    // the upstream spent at least 50 x 10 ms on it, and the client saw it
    // end after `seen`.
    let took = whole["duration_us"].as_u64().unwrap();
    assert!(
        (500_000..=seen.as_micros() as u64).contains(&took),
        "duration_us {took}, client saw {seen:?}: {whole}"
    );
    assert_eq!(aborted["outcome"], "aborted", "{aborted}");
}

#[tokio::test]
async fn a_call_the_client_gives_up_on_is_counted_and_logged_as_aborted() {
    let w = world("log: {format: json}\n").await;
    let url = w.gw.url("/mcp");
    let alice = signed_in(&url, "alice", "tools.read");
    // Without a progressToken there is nothing to relay: the answer would be
    // one JSON message after 0.5 s. The client gives up long before.
    let call = alice.call_tool("up__progress", json!({}));
    assert!(tokio::time::timeout(Duration::from_millis(100), call)
        .await
        .is_err());
    assert!(
        w.up.saw_cancellation(Duration::from_secs(5)).await,
        "the upstream call is cancelled"
    );

    let lines = access_lines(&w.gw, 1).await;
    assert_eq!(lines.len(), 1, "{}", w.gw.stderr());
    let line = &lines[0];
    for (field, want) in [
        ("method", json!("tools/call")),
        ("target", json!("up__progress")),
        ("status", json!(499)),
        ("outcome", json!("aborted")),
        ("principal", json!("alice")),
    ] {
        assert_eq!(line[field], want, "{field} in {line}");
    }
    let metrics = TestClient::modern(&w.gw.url("/metrics"))
        .raw("GET", vec![], vec![])
        .await;
    let scrape = String::from_utf8_lossy(&metrics.raw);
    for series in [
        "junction_requests_total{method=\"tools/call\",outcome=\"aborted\",route=\"/mcp\"}",
        "junction_request_duration_seconds_count{method=\"tools/call\",route=\"/mcp\"}",
        "junction_tool_calls_total{outcome=\"cancelled\",tool=\"up__progress\",upstream=\"up\"}",
    ] {
        assert_eq!(
            junction_testkit::metric(&scrape, series),
            Some(1.0),
            "{series}\n{scrape}"
        );
    }
}

#[tokio::test]
async fn log_access_false_writes_no_access_lines() {
    let w = world("log: {format: json, level: debug, access: false}\n").await;
    let alice = signed_in(&w.gw.url("/mcp"), "alice", "tools.read");
    assert_eq!(alice.call_tool("up__echo", json!({})).await.status, 200);
    // A refused call logs "request refused" (debug) after the call above
    // would have logged its access line: once it is in the log, so would be
    // any access line of either request.
    let unknown = alice.call_tool("up__no_such_tool", json!({})).await;
    assert_eq!(unknown.error_code(), Some(-32602));
    let mut refused = false;
    for _ in 0..100 {
        refused = w.gw.stderr().contains("request refused");
        if refused {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(refused, "{}", w.gw.stderr());
    assert!(access_lines(&w.gw, 0).await.is_empty(), "{}", w.gw.stderr());
}

/// The Redis has a password, as the Helm chart's own has by default: the
/// URL carries it, and it never reaches the logs.
#[tokio::test]
async fn two_gateways_sharing_redis_enforce_one_combined_limit() {
    let password = "chart-made-0123456789abcdefABCDEF";
    let redis = junction_testkit::redis::RedisServer::with_password(password);
    let rules = format!(
        "rate_limits:\n  backend: redis\n  redis_url: {}\n  failure_mode: closed\n  rules:\n    - {{name: shared, key: [principal], rate: 5, per: 1m, burst: 5}}\n",
        redis.url()
    );
    let a = world(&rules).await;
    let b = world(&rules).await;
    let t = bearer(&token("carol", "tools.read"));
    let ca = TestClient::modern(&a.gw.url("/mcp")).with_header("authorization", &t);
    let cb = TestClient::modern(&b.gw.url("/mcp")).with_header("authorization", &t);
    let mut passed = 0;
    for i in 0..8 {
        let c = if i % 2 == 0 { &ca } else { &cb };
        if c.call_tool("up__echo", json!({})).await.status == 200 {
            passed += 1;
        }
    }
    assert_eq!(passed, 5, "one combined budget across both replicas");
    for gw in [&a.gw, &b.gw] {
        assert!(!gw.stderr().contains(password), "{}", gw.stderr());
    }
    drop(redis);
    let closed = ca.call_tool("up__echo", json!({})).await;
    assert_eq!(
        closed.status,
        429,
        "fail-closed while Redis is down: {}",
        closed.text()
    );
}

/// A JWKS URL over plain http to another host is warned about at startup
/// (anyone on the path could swap the signing keys); one on loopback is not.
/// The keys are fetched on the first token, so neither gateway sends a byte
/// to the URL here.
#[tokio::test]
async fn signing_keys_over_plain_http_to_another_host_are_warned_about() {
    let up = MockUpstream::start(MockSpec::modern("up", vec![MockTool::echo("echo")])).await;
    let started = |jwks_url: &'static str| {
        let yaml = format!(
            "server: {{listen: 127.0.0.1:0}}\n\
             upstreams:\n  - {{id: up, url: {}}}\n\
             auth: {{jwt: {{issuer: 'https://issuer.test', audiences: [junction], jwks_url: '{jwks_url}'}}}}\n",
            up.url
        );
        async move {
            let gw = spawn_gateway(bin(), &yaml).await;
            // Logged after the config is built, and so after any warning about it.
            for _ in 0..100 {
                if gw.stderr().contains("junction listening") {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let stderr = gw.stderr();
            assert!(stderr.contains("junction listening"), "{stderr}");
            stderr
        }
    };
    let warning = "jwks_url is plain http to another host";
    let remote = started("http://192.0.2.7/jwks").await;
    assert!(remote.contains(warning), "{remote}");
    assert!(remote.contains("http://192.0.2.7/jwks"), "{remote}");
    for local in ["http://127.0.0.1:9/jwks", "https://192.0.2.7/jwks"] {
        let stderr = started(local).await;
        assert!(!stderr.contains(warning), "{local}: {stderr}");
    }
}
