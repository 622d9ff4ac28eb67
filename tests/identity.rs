//! The caller's identity carried to upstreams, end to end with real parts: an
//! OAuth authorization server written on Authlib (client credentials and RFC
//! 8693 token exchange; `tests/oauth/auth_server.py`) and MCP upstreams on the
//! official Python SDK that check the token they receive
//! (`tests/oauth/upstream.py`: signature, issuer, expiry, audience). Junction
//! authenticates callers with the same server's keys. Every process listens on
//! 127.0.0.1 only.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use junction_testkit::peers::{python, repo, spawn_peer, Peer};
use junction_testkit::{spawn_gateway_with_env, Gateway, TestClient};
use serde_json::{json, Value};
use tokio::process::Command;

const PUBLIC: &str = "http://junction.test";

fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_junction"))
}

fn oauth_script(name: &str) -> Command {
    let mut cmd = Command::new(python("py-oauth"));
    cmd.arg(repo().join("tests/oauth").join(name));
    cmd
}

async fn auth_server() -> Peer {
    let mut cmd = oauth_script("auth_server.py");
    cmd.args([
        "--port",
        "0",
        "--client",
        "junction:s3cret:crm.read,crm.write",
    ]);
    spawn_peer(cmd, "auth_server.py").await
}

async fn upstream(issuer: &str, audience: &str) -> Peer {
    let mut cmd = oauth_script("upstream.py");
    cmd.args(["--port", "0", "--issuer", issuer, "--audience", audience]);
    spawn_peer(cmd, "upstream.py").await
}

/// POST `body` (JSON) to the authorization server's `path`.
async fn control(issuer: &str, path: &str, body: Value) -> Value {
    let r = TestClient::modern(&format!("{issuer}{path}"))
        .raw(
            "POST",
            vec![("content-type".into(), "application/json".into())],
            body.to_string().into_bytes(),
        )
        .await;
    assert_eq!(r.status, 200, "{path}: {}", String::from_utf8_lossy(&r.raw));
    serde_json::from_slice(&r.raw).unwrap()
}

async fn stats(issuer: &str) -> Value {
    let r = TestClient::modern(&format!("{issuer}/test/stats"))
        .raw("GET", vec![], vec![])
        .await;
    serde_json::from_slice(&r.raw).unwrap()
}

/// A token the authorization server issues to a user, for Junction (and,
/// through `more_aud`, for upstreams that take it as it is).
async fn user_token(issuer: &str, sub: &str, scope: &str, extra: Value) -> String {
    let mut body = json!({"sub": sub, "scope": scope, "aud": PUBLIC, "expires_in": 600});
    if let (Some(b), Value::Object(e)) = (body.as_object_mut(), extra) {
        b.extend(e);
    }
    control(issuer, "/test/mint", body).await["access_token"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn signed_in(gw: &Gateway, token: &str) -> TestClient {
    TestClient::modern(&gw.url("/mcp")).with_header("authorization", &format!("Bearer {token}"))
}

/// What the upstream saw: the claims of the token Junction sent it.
fn whoami(r: &junction_testkit::TestResponse) -> Value {
    assert_eq!(r.status, 200, "{:?}", r.body);
    let text = r.result()["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {:?}", r.body));
    serde_json::from_str(text).unwrap()
}

fn metric(gw_scrape: &str, upstream: &str, kind: &str, outcome: &str) -> f64 {
    junction_testkit::metric(
        gw_scrape,
        &format!("junction_upstream_credentials_total{{kind=\"{kind}\",outcome=\"{outcome}\",upstream=\"{upstream}\"}}"),
    )
    .unwrap_or(0.0)
}

async fn scrape(gw: &Gateway) -> String {
    let r = TestClient::modern(&gw.url("/metrics"))
        .raw("GET", vec![], vec![])
        .await;
    String::from_utf8_lossy(&r.raw).into_owned()
}

struct World {
    idp: Peer,
    cc: Peer,
    tx: Peer,
    _pt: Peer,
    gw: Gateway,
    _dir: tempfile::TempDir,
}

async fn world() -> World {
    let idp = auth_server().await;
    let issuer = idp.url.clone();
    let (cc, tx, pt) = tokio::join!(
        upstream(&issuer, "urn:test:cc"),
        upstream(&issuer, "urn:test:tx"),
        upstream(&issuer, "urn:test:pt"),
    );
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("client-secret");
    std::fs::write(&secret, "s3cret\n").unwrap();
    // Junction's own token for the passthrough upstream's lists.
    let own = control(
        &issuer,
        "/test/mint",
        json!({"sub": "junction", "scope": "", "aud": "urn:test:pt", "expires_in": 3600}),
    )
    .await["access_token"]
        .as_str()
        .unwrap()
        .to_owned();
    let client = |aud: &str| {
        format!(
            r#"{{token_url: "{issuer}/token", client_id: junction, client_secret_file: "{}", audience: "{aud}", scopes: [crm.read], timeout: 1s}}"#,
            secret.display()
        )
    };
    let yaml = format!(
        r#"
server: {{listen: 127.0.0.1:0, public_url: "{PUBLIC}"}}
upstreams:
  - id: cc
    url: "{cc}"
    credentials: {{type: client_credentials, {cc_client}}}
  - id: tx
    url: "{tx}"
    credentials: {{type: token_exchange, {tx_client}}}
  - id: pt
    url: "{pt}"
    bearer_token_env: PT_OWN_TOKEN
    credentials: {{type: passthrough, audience: "urn:test:pt"}}
auth:
  jwt: {{issuer: "{issuer}", jwks_url: "{issuer}/jwks"}}
  rules:
    - {{scopes: [crm.read], tools: ["*"], prompts: ["*"]}}
    - {{scopes: [crm.admin], resources: ["*"]}}
"#,
        cc = cc.url,
        tx = tx.url,
        pt = pt.url,
        cc_client = client("urn:test:cc").trim_matches(|c| c == '{' || c == '}'),
        tx_client = client("urn:test:tx").trim_matches(|c| c == '{' || c == '}'),
    );
    let gw = spawn_gateway_with_env(bin(), &yaml, &[("PT_OWN_TOKEN", own.as_str())]).await;
    World {
        idp,
        cc,
        tx,
        _pt: pt,
        gw,
        _dir: dir,
    }
}

#[tokio::test]
async fn each_upstream_gets_the_identity_its_credentials_say() {
    let w = world().await;
    let issuer = &w.idp.url;
    let alice = user_token(
        issuer,
        "alice",
        "crm.read",
        json!({"aud": [PUBLIC, "urn:test:pt"]}),
    )
    .await;
    let c = signed_in(&w.gw, &alice);
    let tools = c.request("tools/list", json!({})).await;
    let names: Vec<&str> = tools.result()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    for want in ["cc__whoami", "tx__whoami", "pt__whoami"] {
        assert!(
            names.contains(&want),
            "{want} in {names:?}: {}",
            w.gw.stderr()
        );
    }

    // client_credentials: Junction's own identity, for lists and calls alike.
    let cc = whoami(&c.call_tool("cc__whoami", json!({})).await);
    assert_eq!(cc["sub"], "junction", "{cc}");
    assert_eq!(cc["aud"], "urn:test:cc");
    // token_exchange: the caller, acting through Junction's client.
    let tx = whoami(&c.call_tool("tx__whoami", json!({})).await);
    assert_eq!(tx["sub"], "alice", "{tx}");
    assert_eq!(tx["aud"], "urn:test:tx");
    assert_eq!(tx["act"], json!({"sub": "junction"}));
    assert_eq!(tx["scope"], "crm.read");
    // passthrough: the caller's own token, its audience checked first.
    let pt = whoami(&c.call_tool("pt__whoami", json!({})).await);
    assert_eq!(pt["sub"], "alice", "{pt}");
    assert!(pt["act"].is_null());

    // The exchanged token is cached per caller: a second call asks nothing.
    let before = stats(issuer).await["token_exchange"].as_u64().unwrap();
    let again = whoami(&c.call_tool("tx__whoami", json!({})).await);
    assert_eq!(again["sub"], "alice");
    assert_eq!(
        stats(issuer).await["token_exchange"].as_u64().unwrap(),
        before
    );
    let m = scrape(&w.gw).await;
    assert!(metric(&m, "tx", "token_exchange", "fresh") >= 1.0, "{m}");
    assert!(metric(&m, "tx", "token_exchange", "cached") >= 1.0, "{m}");
    assert!(
        metric(&m, "cc", "client_credentials", "cached") >= 1.0,
        "{m}"
    );

    // A caller whose scopes grant tools and prompts but not resources.
    let read = c
        .request("resources/read", json!({"uri": "crm://records/1"}))
        .await;
    assert_eq!(read.status, 403, "{:?}", read.body);
    let greet = c
        .request(
            "prompts/get",
            json!({"name": "tx__greet", "arguments": {"name": "Ada"}}),
        )
        .await;
    assert_eq!(greet.status, 200, "{:?}", greet.body);

    // No client token ever reached an upstream that did not opt in to it:
    // everything the token-checking upstreams refused is counted there.
    for up in [&w.cc, &w.tx] {
        let s = TestClient::modern(&up.url.replace("/mcp", "/test/stats"))
            .raw("GET", vec![], vec![])
            .await;
        let s: Value = serde_json::from_slice(&s.raw).unwrap();
        assert_eq!(s["rejected"], 0, "{}: {s}", up.url);
    }
}

#[tokio::test]
async fn a_refused_or_impossible_identity_is_a_clear_error_never_a_fallback() {
    let w = world().await;
    let issuer = &w.idp.url;
    // A token not issued for the passthrough upstream's audience.
    let bob = user_token(issuer, "bob", "crm.read", json!({})).await;
    let c = signed_in(&w.gw, &bob);
    let pt = c.call_tool("pt__whoami", json!({})).await;
    assert_eq!(pt.status, 403, "{:?}", pt.body);
    assert_eq!(pt.error_code(), Some(-31005));
    assert_eq!(pt.body["error"]["data"]["reason"], "audience_mismatch");
    assert!(pt.header("www-authenticate").is_some());

    // A subject the authorization server will not exchange.
    let denied = user_token(issuer, "mallory", "crm.read", json!({"exchange": "deny"})).await;
    let r = signed_in(&w.gw, &denied)
        .call_tool("tx__whoami", json!({}))
        .await;
    assert_eq!(r.status, 403, "{:?}", r.body);
    assert_eq!(r.body["error"]["data"]["reason"], "refused");
    assert!(r
        .header("www-authenticate")
        .unwrap()
        .contains("insufficient_scope"));

    // The token endpoint slower than the configured 1 s: 503, and nothing sent.
    control(issuer, "/test/mode", json!({"delay_ms": 2500})).await;
    let carol = user_token(issuer, "carol", "crm.read", json!({})).await;
    let slow = signed_in(&w.gw, &carol)
        .call_tool("tx__whoami", json!({}))
        .await;
    assert_eq!(slow.status, 503, "{:?}", slow.body);
    assert_eq!(slow.body["error"]["data"]["reason"], "unavailable");
    // Refusing every token: still no fallback to the caller's token.
    control(issuer, "/test/mode", json!({"delay_ms": 0, "refuse": true})).await;
    let dave = user_token(issuer, "dave", "crm.read", json!({})).await;
    let refused = signed_in(&w.gw, &dave)
        .call_tool("tx__whoami", json!({}))
        .await;
    assert_eq!(refused.status, 403, "{:?}", refused.body);

    let s = TestClient::modern(&w.tx.url.replace("/mcp", "/test/stats"))
        .raw("GET", vec![], vec![])
        .await;
    let s: Value = serde_json::from_slice(&s.raw).unwrap();
    assert_eq!(
        s["rejected"], 0,
        "the upstream never saw a token it refused: {s}"
    );
    let m = scrape(&w.gw).await;
    assert!(
        metric(&m, "pt", "passthrough", "audience_mismatch") >= 1.0,
        "{m}"
    );
    assert!(metric(&m, "tx", "token_exchange", "refused") >= 2.0, "{m}");
    assert!(
        metric(&m, "tx", "token_exchange", "unavailable") >= 1.0,
        "{m}"
    );

    // The token endpoint down (its process gone): 503 too. Junction still
    // authenticates the caller with the signing keys it fetched before.
    control(issuer, "/test/mode", json!({"refuse": false})).await;
    let gina = user_token(issuer, "gina", "crm.read", json!({})).await;
    let World { idp, gw, .. } = w;
    drop(idp);
    let down = signed_in(&gw, &gina)
        .call_tool("tx__whoami", json!({}))
        .await;
    assert_eq!(down.status, 503, "{:?}: {}", down.body, gw.stderr());
    assert_eq!(down.body["error"]["data"]["upstream"], "tx");
}

#[tokio::test]
async fn an_expired_token_is_never_sent_and_concurrent_callers_share_one_request() {
    let w = world().await;
    let issuer = &w.idp.url;
    // Short-lived exchanged tokens: the cache must not hand out an expired one.
    control(issuer, "/test/mode", json!({"token_ttl": 2})).await;
    let erin = user_token(issuer, "erin", "crm.read", json!({"expires_in": 600})).await;
    let c = signed_in(&w.gw, &erin);
    assert_eq!(
        whoami(&c.call_tool("tx__whoami", json!({})).await)["sub"],
        "erin"
    );
    let first = stats(issuer).await["by_sub"]["erin"].as_u64().unwrap_or(0);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(
        whoami(&c.call_tool("tx__whoami", json!({})).await)["sub"],
        "erin"
    );
    assert_eq!(
        stats(issuer).await["by_sub"]["erin"].as_u64().unwrap_or(0),
        first + 1,
        "the expired token was replaced"
    );

    // Twelve concurrent first calls of one caller while the endpoint is slow:
    // one exchange.
    control(
        issuer,
        "/test/mode",
        json!({"token_ttl": 300, "delay_ms": 300}),
    )
    .await;
    let frank = user_token(issuer, "frank", "crm.read", json!({})).await;
    let calls = (0..12).map(|_| {
        let c = signed_in(&w.gw, &frank);
        async move { c.call_tool("tx__whoami", json!({})).await }
    });
    for r in futures_util::future::join_all(calls).await {
        assert_eq!(whoami(&r)["sub"], "frank");
    }
    assert_eq!(stats(issuer).await["by_sub"]["frank"], 1, "single flight");
}
