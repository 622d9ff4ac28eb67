//! A JWKS URL served by an in-test HTTP server: lazy first fetch, rotation
//! picked up on an unknown `kid`, single flight, bounded refetch, outages.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use junction_config::JwksSource;
use junction_policy::{AuthError, Authenticator};

fn authenticator(url: &str) -> Authenticator {
    Authenticator::new(&auth_config(JwksSource::Url(url.into()), &[]), PUBLIC_URL)
        .expect("authenticator")
}

async fn check(a: &Authenticator, token: &str) -> Result<(), AuthError> {
    a.authenticate(Some(&format!("Bearer {token}")), None, "/mcp")
        .await
        .map(|_| ())
}

#[tokio::test]
async fn keys_are_fetched_lazily_and_cached() {
    let server = JwksServer::start(jwks(&[jwk("rsa1", "k1")])).await;
    let a = authenticator(&server.url);
    assert_eq!(server.hits(), 0, "nothing fetched before the first request");
    for _ in 0..3 {
        check(&a, &sign("rsa1", Some("k1"), &claims("alice")))
            .await
            .expect("ok");
    }
    assert_eq!(server.hits(), 1);
}

#[tokio::test]
async fn rotated_key_is_picked_up_on_unknown_kid() {
    let server = JwksServer::start(jwks(&[jwk("rsa1", "k1")])).await;
    let a = authenticator(&server.url).with_refetch_interval(Duration::ZERO);
    check(&a, &sign("rsa1", Some("k1"), &claims("alice")))
        .await
        .expect("old key");
    server.serve(200, jwks(&[jwk("rsa2", "k2"), jwk("ed", "k3")]));
    check(&a, &sign("rsa2", Some("k2"), &claims("alice")))
        .await
        .expect("rotated key");
    assert_eq!(server.hits(), 2);
    // k1 was withdrawn: after one more refetch it is unknown.
    assert_eq!(
        check(&a, &sign("rsa1", Some("k1"), &claims("alice"))).await,
        Err(AuthError::UnknownKey)
    );
    assert_eq!(server.hits(), 3);
}

#[tokio::test]
async fn unknown_kids_refetch_at_most_once_per_interval() {
    let server = JwksServer::start(jwks(&[jwk("rsa1", "k1")])).await;
    // Default interval (30 s): the first fetch was just now.
    let a = authenticator(&server.url);
    check(&a, &sign("rsa1", Some("k1"), &claims("alice")))
        .await
        .expect("ok");
    server.serve(200, jwks(&[jwk("rsa2", "k2")]));
    for kid in ["k2", "nope", "other"] {
        assert_eq!(
            check(&a, &sign("rsa2", Some(kid), &claims("alice"))).await,
            Err(AuthError::UnknownKey)
        );
    }
    assert_eq!(
        server.hits(),
        1,
        "clients cannot make Junction hammer the IdP"
    );
    // Cached keys keep working meanwhile.
    check(&a, &sign("rsa1", Some("k1"), &claims("alice")))
        .await
        .expect("still ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_misses_share_one_fetch() {
    let server = JwksServer::start(jwks(&[jwk("ec", "e1")])).await;
    let a = Arc::new(authenticator(&server.url).with_refetch_interval(Duration::ZERO));
    let run = |name: &'static str, kid: &'static str| {
        let token = sign(name, Some(kid), &claims("alice"));
        let tasks: Vec<_> = (0..20)
            .map(|_| {
                let (a, t) = (a.clone(), token.clone());
                tokio::spawn(async move { check(&a, &t).await })
            })
            .collect();
        async move {
            for t in tasks {
                t.await.expect("join").expect("authenticated");
            }
        }
    };
    run("ec", "e1").await;
    assert_eq!(server.hits(), 1, "first fetch is single-flight");
    server.serve(200, jwks(&[jwk("ed", "d1")]));
    run("ed", "d1").await;
    assert_eq!(server.hits(), 2, "refetch on unknown kid is single-flight");
}

#[tokio::test]
async fn unreachable_or_broken_jwks_is_unavailable() {
    let port = free_port();
    let a = authenticator(&format!("http://127.0.0.1:{port}/jwks.json"));
    assert_eq!(
        check(&a, &sign("rsa1", Some("k1"), &claims("alice"))).await,
        Err(AuthError::JwksUnavailable)
    );

    let server = JwksServer::start("oops".into()).await;
    server.serve(500, jwks(&[jwk("rsa1", "k1")]));
    let a = authenticator(&server.url).with_refetch_interval(Duration::ZERO);
    let t = sign("rsa1", Some("k1"), &claims("alice"));
    assert_eq!(check(&a, &t).await, Err(AuthError::JwksUnavailable));
    server.serve(200, "{not json".into());
    assert_eq!(check(&a, &t).await, Err(AuthError::JwksUnavailable));
    // The IdP recovers: the next request fetches again and passes.
    server.serve(200, jwks(&[jwk("rsa1", "k1")]));
    check(&a, &t).await.expect("recovered");
}

#[tokio::test]
async fn failed_refetch_keeps_the_last_good_keys() {
    let server = JwksServer::start(jwks(&[jwk("rsa1", "k1")])).await;
    let a = authenticator(&server.url).with_refetch_interval(Duration::ZERO);
    let good = sign("rsa1", Some("k1"), &claims("alice"));
    check(&a, &good).await.expect("ok");
    server.serve(503, String::new());
    assert_eq!(
        check(&a, &sign("rsa2", Some("k2"), &claims("alice"))).await,
        Err(AuthError::UnknownKey)
    );
    check(&a, &good).await.expect("last good keys still used");
}
