//! Recently verified tokens. A bearer JWT's signature check is most of the
//! cost of authentication (RSA-2048: ~45 µs here, EdDSA/ES256 more), and an
//! agent sends the same token on every call. A token that verified for a route
//! is remembered under a 128-bit keyed hash of (route, token) until the
//! earlier of its own expiry (with the configured leeway, as the check itself
//! allows) and `MAX_AGE`; failures are never remembered.
//!
//! The hash is SipHash-1-3 with a 128-bit output (`siphasher`'s `sip128`)
//! under a random per-process key: a PRF, so without the key no one can make
//! another token land on a remembered one, and no token is kept in memory. It
//! replaced a SHA-256 of the same input, which cost ~45 instructions per byte
//! of token (~35k for an RS256 token) where the CPU has no SHA extensions, or
//! where a profiler hides them; SipHash costs a few per byte everywhere. One
//! 128-bit run, not two of std's 64-bit one: the token is read once. The
//! table itself hashes no further: the key is a PRF output already
//! (`KeyHasher` takes its first word).
//!
//! Entries carry the generation of the key set they verified under: once the
//! JWKS is fetched again (an unknown `kid`, or its age), every token is
//! verified again, so a withdrawn key stops working as soon as Junction knows.

use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use dashmap::DashMap;
use siphasher::sip128::{Hasher128, SipHasher13};

use super::Principal;

/// The longest a verified token is trusted without verifying it again.
const MAX_AGE: Duration = Duration::from_secs(60);
/// Tokens remembered per process; past it, expired entries are dropped, and
/// if none are, the new token is simply not remembered.
const MAX_ENTRIES: usize = 10_000;

/// A remembered token's name: the 128-bit keyed hash of (route, token).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Key(u64, u64);

impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.0);
    }
}

/// The table's hasher: a key's first word as it is (it is a PRF output).
#[derive(Default)]
pub(super) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn write_u64(&mut self, word: u64) {
        self.0 = word;
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `Key` is hashed here, through `write_u64`; fold anything else.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

pub(super) struct Verified {
    tokens: DashMap<Key, (Principal, Instant, u64), BuildHasherDefault<KeyHasher>>,
    /// The hash key, random per process.
    secret: (u64, u64),
}

impl Default for Verified {
    fn default() -> Self {
        Verified {
            tokens: DashMap::default(),
            secret: (rand::random(), rand::random()),
        }
    }
}

impl Verified {
    pub(super) fn key(&self, token: &[u8], route_path: &str) -> Key {
        let mut h = SipHasher13::new_with_keys(self.secret.0, self.secret.1);
        // Each part ends with a byte no route or token has (as `str`'s Hash
        // does), so (route, token) pairs cannot run into each other.
        h.write(route_path.as_bytes());
        h.write_u8(0xff);
        h.write(token);
        h.write_u8(0xff);
        let out = h.finish128();
        Key(out.h1, out.h2)
    }

    /// The remembered principal, if it verified under key set `generation`.
    pub(super) fn get(&self, key: &Key, generation: u64) -> Option<Principal> {
        let hit = self.tokens.get(key)?;
        if hit.1 > Instant::now() && hit.2 == generation {
            return Some(hit.0.clone());
        }
        drop(hit);
        self.tokens.remove(key);
        None
    }

    /// Remembers a principal that just verified, leeway in seconds.
    pub(super) fn put(&self, key: Key, principal: &Principal, leeway: u64, generation: u64) {
        let Some(exp) = principal
            .claims
            .get("exp")
            .and_then(serde_json::Value::as_u64)
        else {
            return;
        };
        let now_unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let left = Duration::from_secs(exp.saturating_add(leeway).saturating_sub(now_unix));
        if left.is_zero() {
            return;
        }
        if self.tokens.len() >= MAX_ENTRIES {
            let now = Instant::now();
            self.tokens.retain(|_, (_, until, _)| *until > now);
            if self.tokens.len() >= MAX_ENTRIES {
                return;
            }
        }
        let until = Instant::now() + left.min(MAX_AGE);
        self.tokens
            .insert(key, (principal.clone(), until, generation));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Identity;
    use serde_json::json;

    fn principal(exp: u64) -> Principal {
        Identity {
            subject: "alice".into(),
            scopes: Vec::new(),
            digest: "d".into(),
            claims: json!({"sub": "alice", "exp": exp}),
        }
        .into()
    }

    fn now() -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs()
    }

    #[test]
    fn a_token_is_remembered_per_route_and_never_past_its_expiry() {
        let v = Verified::default();
        let k = v.key(b"tok", "/mcp");
        assert_ne!(
            k,
            v.key(b"tok", "/other"),
            "the audience depends on the route"
        );
        assert_ne!(k, v.key(b"tok2", "/mcp"));
        assert_ne!(
            v.key(b"c", "/ab"),
            v.key(b"bc", "/a"),
            "route and token do not run into each other"
        );
        assert_eq!(k, v.key(b"tok", "/mcp"), "the same token, the same key");
        assert_ne!(
            Verified::default().key(b"tok", "/mcp"),
            k,
            "keyed per process"
        );
        v.put(k, &principal(now() + 3600), 0, 1);
        assert_eq!(
            v.get(&k, 1).map(|p| p.subject.clone()),
            Some("alice".into())
        );
        assert!(v.get(&k, 2).is_none(), "keys fetched again: verify again");

        let expired = v.key(b"old", "/mcp");
        v.put(expired, &principal(now().saturating_sub(10)), 0, 0);
        assert!(
            v.get(&expired, 0).is_none(),
            "an expired token is not remembered"
        );
        let in_leeway = v.key(b"leeway", "/mcp");
        v.put(in_leeway, &principal(now().saturating_sub(10)), 60, 0);
        assert!(
            v.get(&in_leeway, 0).is_some(),
            "as the verifier's leeway allows"
        );

        let no_exp = v.key(b"noexp", "/mcp");
        let p = Identity {
            claims: json!({"sub": "alice"}),
            ..(*principal(0)).clone()
        }
        .into();
        v.put(no_exp, &p, 0, 0);
        assert!(v.get(&no_exp, 0).is_none());
    }

    #[test]
    fn the_table_is_bounded() {
        let v = Verified::default();
        for i in 0..MAX_ENTRIES + 10 {
            let k = v.key(format!("t{i}").as_bytes(), "/mcp");
            v.put(k, &principal(now() + 3600), 0, 0);
        }
        assert_eq!(v.tokens.len(), MAX_ENTRIES);
    }
}
