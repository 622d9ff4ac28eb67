//! Signing keys: parsing a JWKS into verification keys bound to one algorithm
//! each, and keeping a JWKS URL's keys fresh without letting clients make
//! Junction hammer the identity provider.

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwapOption;
use bytes::Bytes;
use http::{header, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Empty, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use jsonwebtoken::{Algorithm, DecodingKey};
use serde_json::Value;
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::PolicyError;

/// One fetch of the JWKS URL, connect to last byte.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// A JWKS is a few KiB; anything near this is not one.
const MAX_JWKS_BYTES: usize = 1 << 20;
/// Keys older than this are refetched on the next request (old keys stay in
/// use if the refetch fails), so a key the IdP withdrew stops working.
const MAX_KEY_AGE: Duration = Duration::from_secs(600);
/// While no key was ever fetched, retry this often at most.
const RETRY_WITHOUT_KEYS: Duration = Duration::from_secs(5);
/// Default: an unknown `kid` triggers at most one refetch per this interval.
pub(crate) const DEFAULT_REFETCH_INTERVAL: Duration = Duration::from_secs(30);

/// A verification key and the only algorithm it may verify: the algorithm is
/// decided by the key, never by the token's header.
pub(crate) struct Key {
    pub(crate) kid: Option<String>,
    pub(crate) alg: Algorithm,
    pub(crate) key: DecodingKey,
}

pub(crate) struct KeySet {
    keys: Vec<Arc<Key>>,
}

impl KeySet {
    /// Parses `{"keys": [...]}`. Keys Junction cannot use (encryption keys,
    /// symmetric `oct` keys, other curves or algorithms) are skipped; a set
    /// with no usable key is an error.
    pub(crate) fn parse(bytes: &[u8]) -> Result<KeySet, String> {
        let doc: Value = serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
        let list = doc
            .get("keys")
            .and_then(Value::as_array)
            .ok_or("no \"keys\" array")?;
        let mut keys = Vec::new();
        for (i, jwk) in list.iter().enumerate() {
            match parse_key(jwk) {
                Ok(k) => keys.push(Arc::new(k)),
                Err(why) => tracing::debug!(index = i, "JWKS key skipped: {why}"),
            }
        }
        if keys.is_empty() {
            return Err("no usable signing key (RS256, ES256 on P-256, EdDSA on Ed25519)".into());
        }
        Ok(KeySet { keys })
    }

    fn has_kid(&self, kid: &str) -> bool {
        self.keys.iter().any(|k| k.kid.as_deref() == Some(kid))
    }

    /// Keys that may verify a token with this header.
    fn lookup(&self, kid: Option<&str>, alg: Algorithm) -> Lookup {
        let by_kid: Vec<Arc<Key>> = match kid {
            Some(kid) => self
                .keys
                .iter()
                .filter(|k| k.kid.as_deref() == Some(kid))
                .cloned()
                .collect(),
            None => self.keys.clone(),
        };
        if by_kid.is_empty() {
            return Lookup::UnknownKid;
        }
        let usable: Vec<Arc<Key>> = by_kid.into_iter().filter(|k| k.alg == alg).collect();
        if usable.is_empty() {
            Lookup::WrongAlg
        } else {
            Lookup::Keys(usable)
        }
    }
}

pub(crate) enum Lookup {
    Keys(Vec<Arc<Key>>),
    UnknownKid,
    /// The key exists but is not for the token's `alg` (algorithm confusion).
    WrongAlg,
    /// A JWKS URL that never answered with a usable key set.
    Unavailable,
}

fn parse_key(jwk: &Value) -> Result<Key, String> {
    let s = |name: &str| jwk.get(name).and_then(Value::as_str);
    if let Some(u) = s("use") {
        if u != "sig" {
            return Err(format!("use {u:?}"));
        }
    }
    let kty = s("kty").ok_or("no kty")?;
    let declared = s("alg");
    let bad = |e: jsonwebtoken::errors::Error| format!("{kty} key: {e}");
    let (alg, key) = match kty {
        "RSA" => {
            let (n, e) = (s("n").ok_or("no n")?, s("e").ok_or("no e")?);
            (
                Algorithm::RS256,
                DecodingKey::from_rsa_components(n, e).map_err(bad)?,
            )
        }
        "EC" => {
            if s("crv") != Some("P-256") {
                return Err(format!("curve {:?}", s("crv")));
            }
            let (x, y) = (s("x").ok_or("no x")?, s("y").ok_or("no y")?);
            (
                Algorithm::ES256,
                DecodingKey::from_ec_components(x, y).map_err(bad)?,
            )
        }
        "OKP" => {
            if s("crv") != Some("Ed25519") {
                return Err(format!("curve {:?}", s("crv")));
            }
            let x = s("x").ok_or("no x")?;
            (
                Algorithm::EdDSA,
                DecodingKey::from_ed_components(x).map_err(bad)?,
            )
        }
        // `oct` (HMAC) keys are never used: Junction has no shared secrets.
        other => return Err(format!("kty {other:?}")),
    };
    let expected = match alg {
        Algorithm::RS256 => "RS256",
        Algorithm::ES256 => "ES256",
        _ => "EdDSA",
    };
    if let Some(d) = declared {
        if d != expected {
            return Err(format!("alg {d:?} on a {kty} key"));
        }
    }
    Ok(Key {
        kid: s("kid").map(str::to_owned),
        alg,
        key,
    })
}

type HttpClient = Client<HttpsConnector<HttpConnector>, Empty<Bytes>>;

/// Where the keys come from.
pub(crate) enum Keys {
    Static(KeySet),
    Remote(Box<Remote>),
}

pub(crate) struct Remote {
    url: Uri,
    client: HttpClient,
    current: ArcSwapOption<Fetched>,
    /// Held while fetching: concurrent misses wait for the one fetch (single flight).
    gate: Mutex<Option<Instant>>,
    pub(crate) refetch_interval: Duration,
    /// Bumped by every fetched key set: what verified under older keys is
    /// verified again (a withdrawn key stops working at once).
    generation: std::sync::atomic::AtomicU64,
}

struct Fetched {
    set: KeySet,
    at: Instant,
}

impl Keys {
    pub(crate) fn from_file(path: &std::path::Path) -> Result<Keys, PolicyError> {
        let err = |reason: String| PolicyError::Jwks {
            source_name: path.display().to_string(),
            reason,
        };
        let bytes = std::fs::read(path).map_err(|e| err(e.to_string()))?;
        Ok(Keys::Static(KeySet::parse(&bytes).map_err(err)?))
    }

    pub(crate) fn from_url(url: &str) -> Result<Keys, PolicyError> {
        let err = |reason: String| PolicyError::Jwks {
            source_name: url.to_owned(),
            reason,
        };
        let uri: Uri = url.parse().map_err(|e| err(format!("{e}")))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_webpki_roots(provider)
            .map_err(|e| PolicyError::Tls(e.to_string()))?
            .https_or_http()
            .enable_http1()
            .enable_http2()
            .build();
        Ok(Keys::Remote(Box::new(Remote {
            url: uri,
            client: Client::builder(TokioExecutor::new()).build(https),
            current: ArcSwapOption::empty(),
            gate: Mutex::new(None),
            refetch_interval: DEFAULT_REFETCH_INTERVAL,
            generation: std::sync::atomic::AtomicU64::new(0),
        })))
    }

    pub(crate) async fn lookup(&self, kid: Option<&str>, alg: Algorithm) -> Lookup {
        let remote = match self {
            Keys::Static(set) => return set.lookup(kid, alg),
            Keys::Remote(r) => r,
        };
        let seen = remote.current.load_full();
        let now = match &seen {
            None => remote.refresh(None, true).await,
            Some(f) if kid.is_some_and(|kid| !f.set.has_kid(kid)) => {
                remote.refresh(seen.as_ref(), true).await
            }
            // Old but usable: refresh if nobody else is, never wait for it.
            Some(f) if f.at.elapsed() >= MAX_KEY_AGE => remote.refresh(seen.as_ref(), false).await,
            Some(_) => seen,
        };
        match now {
            Some(f) => f.set.lookup(kid, alg),
            None => Lookup::Unavailable,
        }
    }

    /// Changes whenever the key set does (a file's keys never change).
    pub(crate) fn generation(&self) -> u64 {
        match self {
            Keys::Static(_) => 0,
            Keys::Remote(r) => r.generation.load(std::sync::atomic::Ordering::Acquire),
        }
    }

    pub(crate) fn set_refetch_interval(&mut self, d: Duration) {
        if let Keys::Remote(r) = self {
            r.refetch_interval = d;
        }
    }
}

impl Remote {
    /// Refetch unless someone else did while we waited for the gate, or the
    /// last attempt is too recent. Returns the keys to use now. `wait: false`
    /// returns `seen` at once when another fetch is in flight.
    async fn refresh(&self, seen: Option<&Arc<Fetched>>, wait: bool) -> Option<Arc<Fetched>> {
        let mut last_attempt = if wait {
            self.gate.lock().await
        } else {
            match self.gate.try_lock() {
                Ok(g) => g,
                Err(_) => return seen.cloned(),
            }
        };
        let current = self.current.load_full();
        let changed = match (&current, seen) {
            (Some(c), Some(s)) => !Arc::ptr_eq(c, s),
            (Some(_), None) => true,
            _ => false,
        };
        if changed {
            return current;
        }
        let min_gap = if current.is_some() {
            self.refetch_interval
        } else {
            RETRY_WITHOUT_KEYS.min(self.refetch_interval)
        };
        if last_attempt.is_some_and(|t| t.elapsed() < min_gap) {
            return current;
        }
        *last_attempt = Some(Instant::now());
        match tokio::time::timeout(FETCH_TIMEOUT, self.fetch()).await {
            Ok(Ok(set)) => {
                let fresh = Arc::new(Fetched {
                    set,
                    at: Instant::now(),
                });
                self.current.store(Some(fresh.clone()));
                self.generation
                    .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
                Some(fresh)
            }
            Ok(Err(why)) => {
                tracing::warn!(url = %self.url, "JWKS fetch failed: {why}");
                current
            }
            Err(_) => {
                tracing::warn!(url = %self.url, "JWKS fetch timed out");
                current
            }
        }
    }

    async fn fetch(&self) -> Result<KeySet, String> {
        let req = Request::get(self.url.clone())
            .header(header::ACCEPT, "application/jwk-set+json, application/json")
            .body(Empty::new())
            .map_err(|e| e.to_string())?;
        let res = self.client.request(req).await.map_err(|e| e.to_string())?;
        if res.status() != StatusCode::OK {
            return Err(format!("HTTP {}", res.status()));
        }
        let body = Limited::new(res.into_body(), MAX_JWKS_BYTES)
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        KeySet::parse(&body)
    }
}
