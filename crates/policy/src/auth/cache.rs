//! Recently verified tokens. A bearer JWT's signature check is most of the
//! cost of authentication (RSA-2048: ~45 µs here, EdDSA/ES256 more), and an
//! agent sends the same token on every call. A token that verified for a route
//! is remembered under a 128-bit keyed hash of (route, token) until the
//! earlier of its own expiry (with the configured leeway, as the check itself
//! allows) and `MAX_AGE`; failures are never remembered.
//!
//! The hash is SipHash-1-3 with a 128-bit output (`siphasher`'s `sip128`)
//! under a random per-process key: a PRF, so without the key no one can make
//! another token land on a remembered one, and the table keeps no token. It
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
//!
//! In front of the table, each client connection remembers the token it
//! presented last ([`LastToken`]): the same token again is found by comparing
//! bytes, with no hash and no lock shared with other connections. That copy
//! of the token lives and dies with its connection.

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

    /// The remembered principal, if it verified under key set `generation`,
    /// and until when it may be trusted.
    pub(super) fn get(
        &self,
        key: &Key,
        generation: u64,
        now: Instant,
    ) -> Option<(Principal, Instant)> {
        let hit = self.tokens.get(key)?;
        if hit.1 > now && hit.2 == generation {
            return Some((hit.0.clone(), hit.1));
        }
        drop(hit);
        self.tokens.remove(key);
        None
    }

    /// Remembers a principal that just verified, leeway in seconds; returns
    /// until when it may be trusted, unless it was not remembered.
    pub(super) fn put(
        &self,
        key: Key,
        principal: &Principal,
        leeway: u64,
        generation: u64,
    ) -> Option<Instant> {
        let exp = principal
            .claims
            .get("exp")
            .and_then(serde_json::Value::as_u64)?;
        let now_unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let left = Duration::from_secs(exp.saturating_add(leeway).saturating_sub(now_unix));
        if left.is_zero() {
            return None;
        }
        if self.tokens.len() >= MAX_ENTRIES {
            let now = Instant::now();
            self.tokens.retain(|_, (_, until, _)| *until > now);
            if self.tokens.len() >= MAX_ENTRIES {
                return None;
            }
        }
        let until = Instant::now() + left.min(MAX_AGE);
        self.tokens
            .insert(key, (principal.clone(), until, generation));
        Some(until)
    }
}

/// The longest token a connection remembers; a longer one is looked up in
/// the process's table on every request.
const MAX_LAST_TOKEN: usize = 4096;

/// The bearer token one client connection presented last, and who it
/// verified as. A client sends the same token on every request of a
/// connection: comparing its bytes with the last one's is a `memcmp`, where
/// finding it in the process's table costs the keyed hash of every byte (a
/// few per byte, ~1.6k instructions for an RS256 token) and a shard lock the
/// connection threads share. It holds exactly what a hit in that table would
/// give (the principal, until when, under which key set), so a request's
/// outcome is the same; only the process-wide table keeps no token. This
/// copy lives as long as its connection, which held the token's bytes in
/// its read buffer anyway.
#[derive(Default)]
pub struct LastToken(std::sync::Mutex<Option<Last>>);

struct Last {
    token: Box<[u8]>,
    route: Box<str>,
    /// A copy of its own, so the connection's requests count references on
    /// a line no other connection writes.
    principal: Principal,
    until: Instant,
    generation: u64,
}

impl LastToken {
    pub(super) fn get(
        &self,
        token: &[u8],
        route: &str,
        generation: u64,
        now: Instant,
    ) -> Option<Principal> {
        let last = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let l = last.as_ref()?;
        (l.generation == generation && l.until > now && *l.route == *route && *l.token == *token)
            .then(|| l.principal.clone())
    }

    /// Remembers `token`, unless the one remembered can still be found: a
    /// connection that carries several callers' requests (an HTTP/2
    /// connection from a proxy) then keeps its first caller, and the others
    /// are found in the process's table as before, not copied in turn.
    pub(super) fn put(
        &self,
        token: &[u8],
        route: &str,
        principal: &Principal,
        until: Instant,
        generation: u64,
    ) {
        if token.len() > MAX_LAST_TOKEN {
            return;
        }
        let mut last = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if last
            .as_ref()
            .is_some_and(|l| l.generation == generation && l.until > Instant::now())
        {
            return;
        }
        *last = Some(Last {
            token: token.into(),
            route: route.into(),
            principal: Principal::from((**principal).clone()),
            until,
            generation,
        });
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
            v.get(&k, 1, Instant::now()).map(|p| p.0.subject.clone()),
            Some("alice".into())
        );
        assert!(
            v.get(&k, 2, Instant::now()).is_none(),
            "keys fetched again: verify again"
        );

        let expired = v.key(b"old", "/mcp");
        assert!(v
            .put(expired, &principal(now().saturating_sub(10)), 0, 0)
            .is_none());
        assert!(
            v.get(&expired, 0, Instant::now()).is_none(),
            "an expired token is not remembered"
        );
        let in_leeway = v.key(b"leeway", "/mcp");
        v.put(in_leeway, &principal(now().saturating_sub(10)), 60, 0);
        assert!(
            v.get(&in_leeway, 0, Instant::now()).is_some(),
            "as the verifier's leeway allows"
        );

        let no_exp = v.key(b"noexp", "/mcp");
        let p = Identity {
            claims: json!({"sub": "alice"}),
            ..(*principal(0)).clone()
        }
        .into();
        v.put(no_exp, &p, 0, 0);
        assert!(v.get(&no_exp, 0, Instant::now()).is_none());
    }

    #[test]
    fn a_connection_finds_only_the_token_route_and_key_set_it_remembered() {
        let last = LastToken::default();
        let p = principal(now() + 3600);
        let at = Instant::now();
        let until = at + Duration::from_secs(30);
        assert!(last.get(b"tok", "/mcp", 1, at).is_none(), "nothing yet");
        last.put(b"tok", "/mcp", &p, until, 1);
        let hit = last.get(b"tok", "/mcp", 1, at).expect("the same token");
        assert_eq!(hit, p);
        assert!(
            !std::sync::Arc::ptr_eq(&hit.0, &p.0),
            "a copy of the connection's own"
        );
        assert!(last.get(b"tok2", "/mcp", 1, at).is_none(), "another token");
        assert!(last.get(b"to", "/mcp", 1, at).is_none(), "a prefix of it");
        assert!(last.get(b"tok", "/other", 1, at).is_none(), "another route");
        assert!(
            last.get(b"tok", "/mcp", 2, at).is_none(),
            "keys fetched again"
        );
        assert!(
            last.get(b"tok", "/mcp", 1, until).is_none(),
            "past its time"
        );

        let long = vec![b'x'; MAX_LAST_TOKEN + 1];
        last.put(&long, "/mcp", &p, until, 1);
        assert!(last.get(&long, "/mcp", 1, at).is_none(), "too long to keep");
        assert!(
            last.get(b"tok", "/mcp", 1, at).is_some(),
            "the last one kept"
        );
        last.put(b"tok2", "/mcp", &p, until, 1);
        assert!(
            last.get(b"tok2", "/mcp", 1, at).is_none(),
            "one token per connection: the first, while it can be found"
        );
        assert!(last.get(b"tok", "/mcp", 1, at).is_some());
        last.put(b"tok2", "/mcp", &p, until, 2);
        assert!(
            last.get(b"tok2", "/mcp", 2, at).is_some(),
            "one remembered under older keys gives way"
        );
        let other = LastToken::default();
        other.put(b"old", "/mcp", &p, at, 1);
        other.put(b"new", "/mcp", &p, until, 1);
        assert!(
            other.get(b"new", "/mcp", 1, at).is_some(),
            "one past its time gives way"
        );
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
