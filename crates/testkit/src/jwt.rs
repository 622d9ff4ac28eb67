//! Bearer tokens for the end-to-end tests of authentication: JWTs signed
//! with the policy crate's test RSA key (`kid` `k1`, RS256), and the JWKS
//! file that verifies them, for a gateway configured with [`ISSUER`] and
//! audience [`PUBLIC`].

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

pub const ISSUER: &str = "https://idp.junction.test";
/// The gateway's `server.public_url`, so the tokens' audience.
pub const PUBLIC: &str = "http://junction.test";

fn keys() -> PathBuf {
    crate::peers::repo().join("crates/policy/tests/keys")
}

/// Seconds since the epoch.
pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

/// Writes `jwks.json` (the key tokens are signed with) into `dir`.
pub fn jwks_file(dir: &Path) -> PathBuf {
    let read = std::fs::read(keys().join("public-jwk.json"))
        .unwrap_or_else(|e| panic!("the policy crate's test key: {e}"));
    let jwks: Value = serde_json::from_slice(&read).unwrap_or_default();
    let mut k = jwks["rsa1"].clone();
    k["kid"] = json!("k1");
    k["alg"] = json!("RS256");
    k["use"] = json!("sig");
    let path = dir.join("jwks.json");
    std::fs::write(&path, json!({"keys": [k]}).to_string())
        .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    path
}

/// A token with exactly these claims.
pub fn token_with(claims: Value) -> String {
    let pem = std::fs::read(keys().join("rsa1.pem"))
        .unwrap_or_else(|e| panic!("the policy crate's test key: {e}"));
    let key = jsonwebtoken::EncodingKey::from_rsa_pem(&pem)
        .unwrap_or_else(|e| panic!("the policy crate's test key: {e}"));
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256);
    header.kid = Some("k1".into());
    jsonwebtoken::encode(&header, &claims, &key).unwrap_or_else(|e| panic!("signing: {e}"))
}

/// A token for `sub` with `scope`, valid for `lifetime_s` seconds.
pub fn token_for(sub: &str, scope: &str, lifetime_s: u64) -> String {
    token_with(
        json!({"iss": ISSUER, "sub": sub, "aud": PUBLIC, "iat": now(),
        "exp": now() + lifetime_s, "scope": scope}),
    )
}

/// A token for `sub` with `scope`, valid for ten minutes.
pub fn token(sub: &str, scope: &str) -> String {
    token_for(sub, scope, 600)
}

/// The `Authorization` value of `token`.
pub fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}
