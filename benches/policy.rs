//! Micro-benches of the policy phases a proxied `tools/call` passes when auth
//! and rate limits are configured: bearer-JWT authentication against a key
//! already cached from a JWKS file (RS256, ES256, EdDSA), and one local
//! rate-limit rule keyed by principal and tool. `baseline/*` entries are the
//! bare library work in the same run: `jsonwebtoken::decode` with a ready
//! `DecodingKey`, and a `DashMap` entry update under the same kind of key.
//!
//! The keys are the policy crate's test-only keys (crates/policy/tests/keys).

use std::future::Future;
use std::hint::black_box;
use std::path::PathBuf;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use criterion::{criterion_group, criterion_main, Criterion};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use junction_config::{
    AuthConfig, FailureMode, JwksSource, JwtConfig, RateKey, RateLimitBackend, RateLimitConfig,
    RateLimitRule,
};
use junction_policy::{Authenticator, RateKeyParts, RateLimiter};
use serde_json::{json, Value};

#[path = "common/mod.rs"]
mod common;

const ISSUER: &str = "https://idp.bench";
const PUBLIC_URL: &str = "http://127.0.0.1:8080";

fn keys_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("crates/policy/tests/keys")
}

fn read(name: &str) -> Vec<u8> {
    std::fs::read(keys_dir().join(name)).unwrap_or_else(|e| panic!("test key {name}: {e}"))
}

/// Policy futures here never wait (file JWKS, local buckets): poll once.
fn ready<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("a policy check waited: this bench expects cached keys"),
    }
}

/// (test key, kid, algorithm) of each algorithm benched.
const KEYS: [(&str, &str, Algorithm); 3] = [
    ("rsa1", "rs", Algorithm::RS256),
    ("ec", "es", Algorithm::ES256),
    ("ed", "ed", Algorithm::EdDSA),
];

fn token(key: &str, kid: &str, alg: Algorithm) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let claims = json!({"iss": ISSUER, "aud": PUBLIC_URL, "sub": "bench-user",
        "iat": now, "exp": now + 3600, "scope": "tools.read tools.write"});
    let pem = read(&format!("{key}.pem"));
    let enc = match alg {
        Algorithm::ES256 => EncodingKey::from_ec_pem(&pem),
        Algorithm::EdDSA => EncodingKey::from_ed_pem(&pem),
        _ => EncodingKey::from_rsa_pem(&pem),
    }
    .unwrap_or_else(|e| panic!("encoding key {key}: {e}"));
    let mut header = Header::new(alg);
    header.kid = Some(kid.to_owned());
    jsonwebtoken::encode(&header, &claims, &enc).unwrap_or_else(|e| panic!("sign: {e}"))
}

fn authenticator(dir: &std::path::Path) -> Authenticator {
    let public: Value = serde_json::from_slice(&read("public-jwk.json"))
        .unwrap_or_else(|e| panic!("public-jwk.json: {e}"));
    let jwks: Vec<Value> = KEYS
        .iter()
        .map(|(key, kid, _)| {
            let mut k = public[*key].clone();
            k["kid"] = json!(kid);
            k["use"] = json!("sig");
            k
        })
        .collect();
    let path = dir.join("jwks.json");
    std::fs::write(&path, json!({ "keys": jwks }).to_string())
        .unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    let cfg = AuthConfig {
        jwt: JwtConfig {
            issuer: ISSUER.into(),
            audiences: vec![PUBLIC_URL.into()],
            jwks: JwksSource::File(path),
            leeway: Duration::from_secs(60),
        },
        authorization_servers: vec![ISSUER.into()],
        scopes_supported: vec![],
        rules: vec![],
    };
    Authenticator::new(&cfg, PUBLIC_URL).unwrap_or_else(|e| panic!("authenticator: {e}"))
}

/// The bare library call: the key parsed once, the validation built once.
fn library_decoding_key(key: &str, alg: Algorithm) -> DecodingKey {
    let pem = read(&format!("{key}.pub.pem"));
    match alg {
        Algorithm::ES256 => DecodingKey::from_ec_pem(&pem),
        Algorithm::EdDSA => DecodingKey::from_ed_pem(&pem),
        _ => DecodingKey::from_rsa_pem(&pem),
    }
    .unwrap_or_else(|e| panic!("decoding key {key}: {e}"))
}

fn limiter() -> RateLimiter {
    let cfg = RateLimitConfig {
        backend: RateLimitBackend::Local,
        failure_mode: FailureMode::Open,
        // Generous enough never to reject during a bench run.
        rules: vec![RateLimitRule {
            name: "per-user-tool".into(),
            key: vec![RateKey::Principal, RateKey::Tool],
            rate: 1_000_000_000,
            per: Duration::from_secs(1),
            burst: 1_000_000_000,
            methods: vec!["tools/call".into()],
        }],
    };
    ready(RateLimiter::new(&cfg)).unwrap_or_else(|e| panic!("limiter: {e}"))
}

fn benches(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let auth = authenticator(dir.path());
    let mut g = c.benchmark_group("policy");

    for (key, kid, alg) in KEYS {
        let bearer = format!("Bearer {}", token(key, kid, alg));
        let name = format!("{alg:?}").to_lowercase();
        // The token must pass, or the figures would time a rejection.
        if let Err(e) = ready(auth.authenticate(Some(&bearer), None, "/mcp")) {
            panic!("{name} token rejected: {e:?}");
        }
        g.bench_function(format!("authenticate_{name}"), |b| {
            b.iter(|| ready(auth.authenticate(Some(black_box(&bearer)), None, "/mcp")))
        });
        let dk = library_decoding_key(key, alg);
        let mut v = Validation::new(alg);
        v.set_issuer(&[ISSUER]);
        v.set_audience(&[PUBLIC_URL]);
        let raw = &bearer["Bearer ".len()..];
        g.bench_function(format!("baseline/decode_{name}"), |b| {
            b.iter(|| jsonwebtoken::decode::<Value>(black_box(raw), &dk, &v).is_ok())
        });
    }

    let rl = limiter();
    let principal = "3f79bb7b435b05321651daefd374cdc681dc06faa65e374e38337b88ca046dea";
    let parts = RateKeyParts {
        method: "tools/call",
        principal,
        upstream: "fast",
        tool: "fast__tool0",
        route: "/mcp",
        client_ip: "127.0.0.1",
    };
    g.bench_function("rate_limit_one_rule", |b| {
        b.iter(|| ready(rl.check(black_box(&parts))).is_ok())
    });
    let map: dashmap::DashMap<String, u64> = dashmap::DashMap::new();
    g.bench_function("baseline/dashmap_update", |b| {
        b.iter(|| {
            let key = format!("{}:{}", black_box(principal), black_box("fast__tool0"));
            *map.entry(key).or_insert(0) += 1;
        })
    });

    // The two phases back to back, as a request with both configured pays them.
    let bearer = format!("Bearer {}", token("rsa1", "rs", Algorithm::RS256));
    g.bench_function("authenticate_rs256_and_rate_limit", |b| {
        b.iter(|| {
            let p = ready(auth.authenticate(Some(black_box(&bearer)), None, "/mcp"));
            let digest = p.as_ref().map(|p| p.digest.as_str()).unwrap_or("");
            ready(rl.check(&RateKeyParts {
                principal: digest,
                ..parts
            }))
            .is_ok()
        })
    });
    g.finish();
}

criterion_group! { name = policy; config = common::short_runs(50); targets = benches }
criterion_main!(policy);
