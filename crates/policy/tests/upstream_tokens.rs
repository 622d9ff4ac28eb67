//! Token exchange (RFC 8693) per caller, passthrough's audience check and
//! static tokens, against the in-test token endpoint.

mod token_endpoint;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use junction_config::{Credentials, SecretSource};
use junction_policy::{CredentialError, PolicyError, UpstreamCredentials};
use serde_json::json;
use token_endpoint::*;

#[tokio::test]
async fn token_exchange_sends_the_callers_token_and_caches_per_caller() {
    let idp = TokenEndpoint::start(tokens(3600)).await;
    let c = exchange(&idp.url, 100);
    let alice = json!({"sub": "alice", "exp": in_secs(3600)});
    assert_eq!(
        as_caller(&c, "alice-token", &alice).await,
        Ok(("tok-0".into(), true))
    );
    assert_eq!(
        as_caller(&c, "alice-token", &alice).await,
        Ok(("tok-0".into(), false))
    );
    assert_eq!(
        as_caller(&c, "bob-token", &alice).await,
        Ok(("tok-1".into(), true))
    );
    // Junction's own requests: a client credentials token of the same client.
    assert_eq!(own(&c).await, Ok(("tok-2".into(), true)));
    let seen = idp.seen();
    let form = |i: usize, k: &str| seen[i].form.get(k).cloned();
    assert_eq!(
        form(0, "grant_type").as_deref(),
        Some("urn:ietf:params:oauth:grant-type:token-exchange")
    );
    assert_eq!(form(0, "subject_token").as_deref(), Some("alice-token"));
    assert_eq!(
        form(0, "subject_token_type").as_deref(),
        Some("urn:ietf:params:oauth:token-type:access_token")
    );
    assert_eq!(form(0, "audience").as_deref(), Some("https://crm/mcp"));
    assert_eq!(form(1, "subject_token").as_deref(), Some("bob-token"));
    assert_eq!(form(2, "grant_type").as_deref(), Some("client_credentials"));
    assert_eq!(form(2, "subject_token"), None);
}

#[tokio::test]
async fn exchange_cache_is_bounded_and_single_flight_per_caller() {
    let idp = TokenEndpoint::start(|_, n| {
        (
            200,
            json!({"access_token": format!("tok-{n}"), "expires_in": 3600}),
            Duration::from_millis(100),
        )
    })
    .await;
    let c = Arc::new(exchange(&idp.url, 1));
    let claims = json!({"exp": in_secs(3600)});
    let tasks: Vec<_> = (0..16)
        .map(|i| {
            let (c, claims) = (c.clone(), claims.clone());
            let token = if i % 2 == 0 { "alice" } else { "bob" };
            tokio::spawn(async move { as_caller(&c, token, &claims).await })
        })
        .collect();
    for t in tasks {
        t.await.expect("join").expect("token");
    }
    assert_eq!(idp.hits(), 2, "one exchange per caller token");
    // Room for one: whichever of the two is not cached is exchanged again.
    let (_, a) = as_caller(&c, "alice", &claims).await.expect("alice");
    let (_, b) = as_caller(&c, "bob", &claims).await.expect("bob");
    assert!(a || b, "one of them was evicted");
    assert_eq!(as_caller(&c, "bob", &claims).await.map(|t| t.1), Ok(false));
}

#[tokio::test]
async fn exchanged_tokens_never_outlive_the_callers_token() {
    let idp = TokenEndpoint::start(tokens(3600)).await;
    let c = exchange(&idp.url, 10);
    let short = json!({"exp": in_secs(1)});
    assert!(as_caller(&c, "t", &short).await.expect("token").1);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert!(
        as_caller(&c, "t", &short).await.expect("token").1,
        "exchanged again"
    );
    assert_eq!(idp.hits(), 2);
}

#[tokio::test]
async fn a_refused_exchange_is_refused() {
    let idp =
        TokenEndpoint::start(|_, _| (400, json!({"error": "invalid_grant"}), Duration::ZERO)).await;
    let e = as_caller(&exchange(&idp.url, 10), "t", &json!({}))
        .await
        .expect_err("refused");
    assert!(
        matches!(&e, CredentialError::Refused { error: Some(c), .. } if c == "invalid_grant"),
        "{e:?}"
    );
}

#[tokio::test]
async fn passthrough_checks_the_audience() {
    let c = build(&Credentials::Passthrough {
        audience: "https://legacy/mcp".into(),
    });
    assert!(!c.covers_own_requests());
    assert_eq!(c.for_caller(None).await, Ok(None));
    let listed = json!({"aud": ["https://junction", "https://legacy/mcp"]});
    assert_eq!(
        as_caller(&c, "caller-token", &listed).await,
        Ok(("caller-token".into(), false))
    );
    let other = json!({"aud": "https://junction"});
    let e = as_caller(&c, "caller-token", &other)
        .await
        .expect_err("mismatch");
    assert_eq!(e.reason(), "audience_mismatch");
}

#[tokio::test]
async fn static_tokens_from_env_or_file() {
    let c = build(&Credentials::Static(SecretSource::Env("SECRET".into())));
    assert_eq!(own(&c).await, Ok(("s3cret".into(), false)));
    assert_eq!(
        as_caller(&c, "caller", &json!({})).await,
        Ok(("s3cret".into(), false))
    );
    let file = tempfile::NamedTempFile::new().expect("tmp");
    std::fs::write(file.path(), "from-file\n").expect("write");
    let c = build(&Credentials::Static(SecretSource::File(file.path().into())));
    assert_eq!(own(&c).await, Ok(("from-file".into(), false)));
    let missing = UpstreamCredentials::new(
        "crm",
        &Credentials::Static(SecretSource::Env("NOPE".into())),
        &HashMap::new(),
    );
    assert!(
        matches!(missing, Err(PolicyError::Credentials { reason, .. }) if reason.contains("NOPE"))
    );
    let no_secret = UpstreamCredentials::new(
        "crm",
        &Credentials::ClientCredentials(client("http://127.0.0.1:1/t")),
        &HashMap::new(),
    );
    assert!(no_secret.is_err());
}
