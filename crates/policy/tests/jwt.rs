//! The JWT matrix against a JWKS file: every way a token can be wrong maps to
//! its own AuthError and the challenge a client reads.

mod common;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use common::*;
use junction_config::JwksSource;
use junction_policy::{AuthError, Authenticator};
use serde_json::{json, Value};

struct Fixture {
    auth: Authenticator,
    _dir: tempfile::TempDir,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("jwks.json");
    let keys = jwks(&[jwk("rsa1", "rsa1"), jwk("ec", "ec1"), jwk("ed", "ed1")]);
    std::fs::write(&path, keys).expect("write jwks");
    let cfg = auth_config(
        JwksSource::File(path),
        &["crm.read", "crm.write", "offline_access"],
    );
    Fixture {
        auth: Authenticator::new(&cfg, &format!("{PUBLIC_URL}/")).expect("authenticator"),
        _dir: dir,
    }
}

async fn check(f: &Fixture, token: &str) -> Result<junction_policy::Principal, AuthError> {
    f.auth
        .authenticate(Some(&format!("Bearer {token}")), None, "/mcp")
        .await
}

fn with(mut c: Value, key: &str, v: Value) -> Value {
    c[key] = v;
    c
}

#[tokio::test]
async fn good_tokens_of_each_algorithm() {
    let f = fixture();
    for (key, kid) in [("rsa1", "rsa1"), ("ec", "ec1"), ("ed", "ed1")] {
        let p = check(&f, &sign(key, Some(kid), &claims("alice")))
            .await
            .unwrap_or_else(|e| panic!("{key}: {e:?}"));
        assert_eq!(p.subject, "alice");
        assert_eq!(*p.scopes, ["crm.read", "crm.write"]);
        assert_eq!(p.claims["iss"], ISSUER);
    }
}

#[tokio::test]
async fn digest_is_stable_per_subject() {
    let f = fixture();
    let a1 = check(&f, &sign("rsa1", Some("rsa1"), &claims("alice")))
        .await
        .expect("a1");
    let a2 = check(&f, &sign("ec", Some("ec1"), &claims("alice")))
        .await
        .expect("a2");
    let b = check(&f, &sign("rsa1", Some("rsa1"), &claims("bob")))
        .await
        .expect("b");
    assert_eq!(a1.digest, a2.digest);
    assert_ne!(a1.digest, b.digest);
    assert_eq!(a1.digest.len(), 64);
    assert!(a1
        .digest
        .chars()
        .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
}

#[tokio::test]
async fn scopes_from_scope_and_scp() {
    let f = fixture();
    let mut c = claims("alice");
    c.as_object_mut().expect("obj").remove("scope");
    c["scp"] = json!(["b.write", "a.read"]);
    let p = check(&f, &sign("ed", Some("ed1"), &c)).await.expect("ok");
    assert_eq!(*p.scopes, ["a.read", "b.write"]);
    c["scp"] = json!("b.write  c.x");
    c["scope"] = json!("a.read b.write");
    let p = check(&f, &sign("ed", Some("ed1"), &c)).await.expect("ok");
    assert_eq!(
        *p.scopes,
        ["a.read", "b.write", "c.x"],
        "both claims, either shape"
    );
    let no_scopes = {
        let mut c = claims("alice");
        c.as_object_mut().expect("obj").remove("scope");
        c
    };
    let p = check(&f, &sign("ed", Some("ed1"), &no_scopes))
        .await
        .expect("ok");
    assert!(p.scopes.is_empty());
}

#[tokio::test]
async fn token_without_kid_is_tried_against_keys_of_its_algorithm() {
    let f = fixture();
    assert!(check(&f, &sign("ec", None, &claims("alice"))).await.is_ok());
    assert_eq!(
        check(&f, &sign("rsa2", None, &claims("alice"))).await,
        Err(AuthError::BadSignature)
    );
}

#[tokio::test]
async fn audience_is_the_public_url_or_the_route_url() {
    let f = fixture();
    let route_aud = with(claims("alice"), "aud", json!(format!("{PUBLIC_URL}/mcp")));
    assert!(check(&f, &sign("rsa1", Some("rsa1"), &route_aud))
        .await
        .is_ok());
    // The same token is not valid for another route.
    let other = f
        .auth
        .authenticate(
            Some(&format!(
                "Bearer {}",
                sign("rsa1", Some("rsa1"), &route_aud)
            )),
            None,
            "/other",
        )
        .await;
    assert_eq!(other.err(), Some(AuthError::WrongAudience));
    let list = with(
        claims("alice"),
        "aud",
        json!(["https://else.example", PUBLIC_URL]),
    );
    assert!(check(&f, &sign("rsa1", Some("rsa1"), &list)).await.is_ok());
}

#[tokio::test]
async fn wrong_audience() {
    let f = fixture();
    let c = with(
        claims("alice"),
        "aud",
        json!("https://other-server.example/mcp"),
    );
    assert_eq!(
        check(&f, &sign("rsa1", Some("rsa1"), &c)).await.err(),
        Some(AuthError::WrongAudience)
    );
    let mut c = claims("alice");
    c.as_object_mut().expect("obj").remove("aud");
    assert_eq!(
        check(&f, &sign("rsa1", Some("rsa1"), &c)).await.err(),
        Some(AuthError::WrongAudience)
    );
}

#[tokio::test]
async fn wrong_issuer() {
    let f = fixture();
    // Exact comparison: a trailing slash is another issuer.
    for iss in [json!("https://evil.example"), json!(format!("{ISSUER}/"))] {
        let c = with(claims("alice"), "iss", iss);
        assert_eq!(
            check(&f, &sign("ec", Some("ec1"), &c)).await.err(),
            Some(AuthError::WrongIssuer)
        );
    }
    let mut c = claims("alice");
    c.as_object_mut().expect("obj").remove("iss");
    assert_eq!(
        check(&f, &sign("ec", Some("ec1"), &c)).await.err(),
        Some(AuthError::WrongIssuer)
    );
}

#[tokio::test]
async fn expiry_and_not_before_with_leeway() {
    let f = fixture();
    let expired = with(claims("alice"), "exp", json!(now() - 120));
    assert_eq!(
        check(&f, &sign("rsa1", Some("rsa1"), &expired)).await.err(),
        Some(AuthError::Expired)
    );
    let in_leeway = with(claims("alice"), "exp", json!(now() - 30));
    assert!(check(&f, &sign("rsa1", Some("rsa1"), &in_leeway))
        .await
        .is_ok());
    let early = with(claims("alice"), "nbf", json!(now() + 300));
    assert_eq!(
        check(&f, &sign("rsa1", Some("rsa1"), &early)).await.err(),
        Some(AuthError::NotYetValid)
    );
    let mut no_exp = claims("alice");
    no_exp.as_object_mut().expect("obj").remove("exp");
    assert_eq!(
        check(&f, &sign("rsa1", Some("rsa1"), &no_exp)).await.err(),
        Some(AuthError::Malformed)
    );
}

#[tokio::test]
async fn bad_signatures() {
    let f = fixture();
    // Signed by another RSA key under rsa1's kid.
    assert_eq!(
        check(&f, &sign("rsa2", Some("rsa1"), &claims("alice")))
            .await
            .err(),
        Some(AuthError::BadSignature)
    );
    // Payload swapped after signing.
    let good = sign("ed", Some("ed1"), &claims("alice"));
    let forged = sign("ed", Some("ed1"), &claims("mallory"));
    let parts: Vec<&str> = good.split('.').collect();
    let forged_payload = forged.split('.').nth(1).expect("payload");
    let spliced = format!("{}.{}.{}", parts[0], forged_payload, parts[2]);
    assert_eq!(
        check(&f, &spliced).await.err(),
        Some(AuthError::BadSignature)
    );
}

#[tokio::test]
async fn alg_none_is_refused() {
    let f = fixture();
    for header in [
        json!({"alg": "none", "kid": "rsa1"}),
        json!({"alg": "none"}),
        json!({"alg": "None", "typ": "JWT"}),
    ] {
        let t = unsigned(&header, &claims("alice"));
        assert_eq!(
            check(&f, &t).await.err(),
            Some(AuthError::Algorithm),
            "{header}"
        );
    }
}

#[tokio::test]
async fn hs256_signed_with_the_rsa_public_key_is_refused() {
    let f = fixture();
    // The classic confusion attack: the public key (as PEM and as the JWK
    // modulus) used as an HMAC secret.
    let public_pem = key_bytes("rsa1.pub.pem");
    let header = json!({"alg": "HS256", "kid": "rsa1", "typ": "JWT"});
    let t = sign_hs256_raw(&header, &claims("alice"), &public_pem);
    assert_eq!(check(&f, &t).await.err(), Some(AuthError::Algorithm));
    let n = jwk("rsa1", "rsa1")["n"].as_str().expect("n").to_owned();
    let t = sign_hs256_raw(&json!({"alg": "HS256"}), &claims("alice"), n.as_bytes());
    assert_eq!(check(&f, &t).await.err(), Some(AuthError::Algorithm));
}

#[tokio::test]
async fn header_cannot_bring_its_own_key_or_extensions() {
    let f = fixture();
    // A key embedded in the header is never trusted: the kid still decides.
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256);
    header.kid = Some("attacker".into());
    header.jku = Some("http://127.0.0.1:1/evil.json".into());
    let pem = key_bytes("rsa2.pem");
    let key = jsonwebtoken::EncodingKey::from_rsa_pem(&pem).expect("key");
    let t = jsonwebtoken::encode(&header, &claims("alice"), &key).expect("sign");
    assert_eq!(check(&f, &t).await.err(), Some(AuthError::UnknownKey));
    // `crit` names an extension Junction does not implement.
    let good = sign("rsa1", Some("rsa1"), &claims("alice"));
    let crit =
        URL_SAFE_NO_PAD.encode(json!({"alg": "RS256", "kid": "rsa1", "crit": ["exp"]}).to_string());
    let rest = good.split_once('.').expect("dot").1;
    assert_eq!(
        check(&f, &format!("{crit}.{rest}")).await.err(),
        Some(AuthError::Malformed)
    );
}

#[tokio::test]
async fn algorithm_must_match_the_key() {
    let f = fixture();
    // A valid ES256 signature presented under the RSA key's kid.
    assert_eq!(
        check(&f, &sign("ec", Some("rsa1"), &claims("alice")))
            .await
            .err(),
        Some(AuthError::Algorithm)
    );
}

#[tokio::test]
async fn unknown_kid_from_a_file() {
    let f = fixture();
    assert_eq!(
        check(&f, &sign("rsa2", Some("rsa2"), &claims("alice")))
            .await
            .err(),
        Some(AuthError::UnknownKey)
    );
}

#[tokio::test]
async fn token_in_query_is_refused_even_with_a_good_header() {
    let f = fixture();
    let t = sign("rsa1", Some("rsa1"), &claims("alice"));
    let header = format!("Bearer {t}");
    for q in [
        format!("access_token={t}"),
        "x=1&%61ccess_token=abc".into(),
        "access_token".into(),
    ] {
        let r = f.auth.authenticate(Some(&header), Some(&q), "/mcp").await;
        assert_eq!(r.err(), Some(AuthError::TokenInQuery), "{q}");
    }
    assert!(f
        .auth
        .authenticate(Some(&header), Some("x=access_token"), "/mcp")
        .await
        .is_ok());
}

#[tokio::test]
async fn missing_and_malformed_headers() {
    let f = fixture();
    let a = &f.auth;
    assert_eq!(
        a.authenticate(None, None, "/mcp").await.err(),
        Some(AuthError::Missing)
    );
    assert_eq!(
        a.authenticate(Some("Basic dXNlcjpwdw=="), None, "/mcp")
            .await
            .err(),
        Some(AuthError::Missing)
    );
    for bad in [
        "Bearer",
        "Bearer ",
        "Bearer abc",
        "Bearer a.b",
        "Bearer !!.@@.##",
        "Bearer a b c",
    ] {
        assert_eq!(
            a.authenticate(Some(bad), None, "/mcp").await.err(),
            Some(AuthError::Malformed),
            "{bad}"
        );
    }
    // Scheme is case-insensitive (RFC 7235).
    let t = sign("rsa1", Some("rsa1"), &claims("alice"));
    assert!(a
        .authenticate(Some(&format!("bearer {t}")), None, "/mcp")
        .await
        .is_ok());
}

#[tokio::test]
async fn challenges_name_the_metadata_scopes_and_error() {
    let f = fixture();
    let meta = format!("{PUBLIC_URL}/.well-known/oauth-protected-resource/mcp");
    assert_eq!(
        f.auth.challenge("/mcp", &AuthError::Missing),
        format!(r#"Bearer resource_metadata="{meta}", scope="crm.read crm.write""#)
    );
    assert_eq!(
        f.auth.challenge("/mcp", &AuthError::Expired),
        format!(
            r#"Bearer resource_metadata="{meta}", scope="crm.read crm.write", error="invalid_token", error_description="the token has expired""#
        )
    );
    assert!(f
        .auth
        .challenge("/mcp", &AuthError::TokenInQuery)
        .contains(r#"error="invalid_request""#));
    for e in [
        AuthError::Malformed,
        AuthError::BadSignature,
        AuthError::NotYetValid,
        AuthError::WrongIssuer,
        AuthError::WrongAudience,
        AuthError::UnknownKey,
        AuthError::Algorithm,
    ] {
        let c = f.auth.challenge("/mcp", &e);
        assert!(c.contains(r#"error="invalid_token""#), "{c}");
        assert!(!c.contains("offline_access"), "{c}");
    }
    assert_eq!(
        f.auth
            .insufficient_scope_challenge("/mcp", &["crm.write".into(), "admin".into()]),
        format!(
            r#"Bearer error="insufficient_scope", scope="crm.write admin", resource_metadata="{meta}""#
        )
    );
}

#[tokio::test]
async fn reasons_are_distinct_metric_labels() {
    let all = [
        AuthError::Missing,
        AuthError::TokenInQuery,
        AuthError::Malformed,
        AuthError::BadSignature,
        AuthError::Expired,
        AuthError::NotYetValid,
        AuthError::WrongIssuer,
        AuthError::WrongAudience,
        AuthError::UnknownKey,
        AuthError::Algorithm,
        AuthError::JwksUnavailable,
    ];
    let mut reasons: Vec<&str> = all.iter().map(AuthError::reason).collect();
    reasons.sort();
    reasons.dedup();
    assert_eq!(reasons.len(), all.len());
}

#[test]
fn resource_metadata_document() {
    let f = fixture();
    assert_eq!(
        f.auth.resource_metadata(Some("/mcp")),
        json!({
            "resource": format!("{PUBLIC_URL}/mcp"),
            "authorization_servers": [ISSUER],
            "scopes_supported": ["crm.read", "crm.write"],
            "bearer_methods_supported": ["header"],
        })
    );
    assert_eq!(f.auth.resource_metadata(None)["resource"], PUBLIC_URL);
}

#[test]
fn unusable_jwks_file_is_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("jwks.json");
    // Only a symmetric key: Junction never verifies with shared secrets.
    std::fs::write(
        &path,
        jwks(&[json!({"kty": "oct", "k": "c2VjcmV0", "kid": "h"})]),
    )
    .expect("write");
    let cfg = auth_config(JwksSource::File(path.clone()), &[]);
    assert!(Authenticator::new(&cfg, PUBLIC_URL).is_err());
    std::fs::write(&path, "not json").expect("write");
    assert!(Authenticator::new(&cfg, PUBLIC_URL).is_err());
    let cfg = auth_config(JwksSource::File(dir.path().join("missing.json")), &[]);
    assert!(Authenticator::new(&cfg, PUBLIC_URL).is_err());
}

/// The field as it arrived gets the outcome its text gets, before and after
/// the token is remembered: a verified token is found from the bytes, and a
/// field whose text is not visible ASCII is still no token at all.
#[tokio::test]
async fn a_field_is_judged_as_its_text_is_whether_remembered_or_not() {
    let f = fixture();
    let t = sign("rsa1", Some("rsa1"), &claims("alice"));
    let fields: Vec<Vec<u8>> = vec![
        format!("Bearer {t}").into_bytes(),
        format!(" \tbearer  {t}\t ").into_bytes(),
        // Bytes a field may hold but its text may not (obs-text).
        [b"\xa0", format!("Bearer {t}").as_bytes()].concat(),
        [b"Bearer \xa0", t.as_bytes()].concat(),
        [format!("Bearer {t}").as_bytes(), b"\xa0"].concat(),
        format!("Basic {t}").into_bytes(),
        format!("Bearer {t} x").into_bytes(),
        b"Bearer".to_vec(),
    ];
    // Twice each: the first good one is verified and remembered, the rest
    // of the round meets it in the cache.
    let last = junction_policy::LastToken::default();
    for round in 0..2 {
        for field in &fields {
            let value = http::HeaderValue::from_bytes(field).expect("a field value");
            let text = value.to_str().ok();
            let by_text = f.auth.authenticate(text, None, "/mcp").await;
            let by_field = f
                .auth
                .authenticate_field(None, Some(&value), None, "/mcp")
                .await;
            assert_eq!(by_field, by_text, "round {round}: {value:?}");
            // And with the connection's last token, which the first good
            // field sets and every other one must not match.
            let on_conn = f
                .auth
                .authenticate_field(Some(&last), Some(&value), None, "/mcp")
                .await;
            assert_eq!(
                on_conn, by_text,
                "round {round}, on a connection: {value:?}"
            );
        }
    }
    assert_eq!(
        f.auth
            .authenticate_field(None, None, None, "/mcp")
            .await
            .err(),
        Some(AuthError::Missing)
    );
}
