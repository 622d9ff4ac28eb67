//! Client credentials against the in-test token endpoint: fetched once and
//! cached, single flight, refresh before expiry, refused vs unavailable vs slow.

mod token_endpoint;

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use junction_config::{ClientAuthMethod, Credentials};
use junction_policy::CredentialError;
use serde_json::json;
use token_endpoint::*;

#[tokio::test]
async fn client_credentials_are_fetched_once_and_cached() {
    let idp = TokenEndpoint::start(tokens(3600)).await;
    let c = build(&Credentials::ClientCredentials(client(&idp.url)));
    assert_eq!(c.kind(), "client_credentials");
    assert_eq!(idp.hits(), 0, "nothing fetched before the first request");
    assert_eq!(own(&c).await, Ok(("tok-0".into(), true)));
    let claims = json!({"aud": "x"});
    assert_eq!(
        as_caller(&c, "caller", &claims).await,
        Ok(("tok-0".into(), false))
    );
    assert_eq!(own(&c).await, Ok(("tok-0".into(), false)));
    assert_eq!(idp.hits(), 1);
    let seen = &idp.seen()[0];
    let form = |k: &str| seen.form.get(k).map(String::as_str);
    assert_eq!(form("grant_type"), Some("client_credentials"));
    assert_eq!(form("scope"), Some("crm.read"));
    assert_eq!(
        (form("audience"), form("resource")),
        (Some("https://crm/mcp"), Some("https://crm/mcp"))
    );
    assert_eq!(
        form("client_secret"),
        None,
        "basic: the secret is not in the body"
    );
    let basic = base64::engine::general_purpose::STANDARD.encode("junction:s3cret");
    assert_eq!(seen.authorization, Some(format!("Basic {basic}")));
    let shown = format!("{c:?}");
    assert!(
        !shown.contains("s3cret") && !shown.contains("tok-0"),
        "{shown}"
    );
}

#[tokio::test]
async fn client_secret_post_sends_the_secret_in_the_body() {
    let idp = TokenEndpoint::start(tokens(3600)).await;
    let mut cfg = client(&idp.url);
    cfg.auth_method = ClientAuthMethod::ClientSecretPost;
    cfg.scopes.clear();
    let c = build(&Credentials::ClientCredentials(cfg));
    own(&c).await.expect("token");
    let seen = &idp.seen()[0];
    assert_eq!(seen.authorization, None);
    assert_eq!(
        seen.form.get("client_id").map(String::as_str),
        Some("junction")
    );
    assert_eq!(
        seen.form.get("client_secret").map(String::as_str),
        Some("s3cret")
    );
    assert!(!seen.form.contains_key("scope"));
}

#[tokio::test]
async fn concurrent_requests_share_one_token_request() {
    let idp = TokenEndpoint::start(|_, n| {
        (
            200,
            json!({"access_token": format!("tok-{n}"), "expires_in": 3600}),
            Duration::from_millis(200),
        )
    })
    .await;
    let c = Arc::new(build(&Credentials::ClientCredentials(client(&idp.url))));
    let tasks: Vec<_> = (0..32)
        .map(|_| {
            let c = c.clone();
            tokio::spawn(async move { own(&c).await })
        })
        .collect();
    let mut fresh = 0;
    for t in tasks {
        let (value, is_fresh) = t.await.expect("join").expect("token");
        assert_eq!(value, "tok-0");
        fresh += usize::from(is_fresh);
    }
    assert_eq!((idp.hits(), fresh), (1, 1));
}

#[tokio::test]
async fn tokens_are_refreshed_before_they_expire() {
    // 1 s lifetime: used until 0.9 s, then a new one.
    let idp = TokenEndpoint::start(tokens(1)).await;
    let c = build(&Credentials::ClientCredentials(client(&idp.url)));
    assert_eq!(own(&c).await, Ok(("tok-0".into(), true)));
    assert_eq!(own(&c).await, Ok(("tok-0".into(), false)));
    tokio::time::sleep(Duration::from_millis(950)).await;
    assert_eq!(own(&c).await, Ok(("tok-1".into(), true)));
    assert_eq!(idp.hits(), 2);
}

#[tokio::test]
async fn refused_unavailable_and_slow_endpoints() {
    let idp = TokenEndpoint::start(|_, _| {
        (
            401,
            json!({"error": "invalid_client", "error_description": "bad secret"}),
            Duration::ZERO,
        )
    })
    .await;
    let e = own(&build(&Credentials::ClientCredentials(client(&idp.url))))
        .await
        .expect_err("refused");
    assert_eq!(e.reason(), "refused");
    assert!(
        matches!(&e, CredentialError::Refused { status: 401, error: Some(code), .. } if code == "invalid_client"),
        "{e:?}"
    );

    let idp = TokenEndpoint::start(|_, _| (503, json!({}), Duration::ZERO)).await;
    let e = own(&build(&Credentials::ClientCredentials(client(&idp.url))))
        .await
        .expect_err("5xx");
    assert_eq!(e.reason(), "unavailable");

    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        format!("http://{}/token", l.local_addr().expect("addr"))
    };
    let e = own(&build(&Credentials::ClientCredentials(client(&closed))))
        .await
        .expect_err("refused connection");
    assert!(
        matches!(&e, CredentialError::Unavailable(m) if !m.contains("s3cret")),
        "{e:?}"
    );

    let idp =
        TokenEndpoint::start(|_, _| (200, json!({"access_token": "late"}), Duration::from_secs(5)))
            .await;
    let mut slow = client(&idp.url);
    slow.timeout = Duration::from_millis(200);
    let started = std::time::Instant::now();
    let e = own(&build(&Credentials::ClientCredentials(slow)))
        .await
        .expect_err("slow");
    assert!(
        matches!(&e, CredentialError::Unavailable(m) if m.contains("200ms")),
        "{e:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(2));
}
