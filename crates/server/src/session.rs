//! Downstream handshake-era session ids: self-contained sealed tokens (DESIGN §1).
//! Any replica holding the same key accepts them; nothing is stored. A forged,
//! foreign or expired token is "session not found" (HTTP 404), and so is one
//! the client ended with DELETE on this replica (`Revoked`).

use junction_protocol::seal::{now_ms, Sealer};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

const PURPOSE: &str = "junction/session/v1";

#[derive(Debug, Serialize, Deserialize)]
pub struct Session {
    /// Negotiated protocol version.
    pub v: String,
    /// The client's declared capabilities from `initialize` (an object), as
    /// it sent them.
    pub caps: Box<RawValue>,
    /// Digest of the principal the session was opened for ("" = anonymous).
    pub p: String,
}

pub fn mint(sealer: &Sealer, session: &Session, ttl_ms: u64) -> String {
    // A struct of strings and JSON values always serializes.
    let payload = serde_json::to_vec(session).unwrap_or_default();
    sealer.seal(PURPOSE, &payload, now_ms().saturating_add(ttl_ms))
}

/// A short stable key for per-session state a replica keeps (subscriptions,
/// log level, in-flight calls): never the token itself.
pub fn key(token: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(token.as_bytes());
    digest.iter().take(16).map(|b| format!("{b:02x}")).collect()
}

/// Sessions ended by DELETE, by `key`, until they would have expired anyway.
/// Per replica: a sealed token cannot be recalled from other replicas, which
/// keep accepting it until it expires; nothing is stored for a session, so a
/// DELETE there frees nothing either.
#[derive(Default)]
pub struct Revoked {
    ended: std::sync::Mutex<std::collections::HashMap<String, tokio::time::Instant>>,
}

/// Ended sessions one replica remembers at once.
pub(crate) const MAX_REVOKED: usize = 100_000;

impl Revoked {
    /// Ends the session for `ttl` (its longest possible remaining life); false
    /// when the table is full of live entries.
    pub fn revoke(&self, key: &str, ttl: std::time::Duration) -> bool {
        let mut ended = self.lock();
        let now = tokio::time::Instant::now();
        if ended.len() >= MAX_REVOKED {
            ended.retain(|_, until| *until > now);
            if ended.len() >= MAX_REVOKED {
                return false;
            }
        }
        ended.insert(key.to_owned(), now + ttl);
        true
    }

    /// Sessions still ended (those past their life are dropped here).
    pub fn live(&self) -> usize {
        let mut ended = self.lock();
        let now = tokio::time::Instant::now();
        ended.retain(|_, until| *until > now);
        ended.len()
    }

    pub fn is_revoked(&self, key: &str) -> bool {
        let ended = self.lock();
        !ended.is_empty()
            && ended
                .get(key)
                .is_some_and(|until| *until > tokio::time::Instant::now())
    }

    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, tokio::time::Instant>> {
        self.ended
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

pub fn open(sealer: &Sealer, token: &str) -> Option<Session> {
    let bytes = sealer.open(PURPOSE, token, now_ms()).ok()?;
    serde_json::from_slice(&bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_foreign_key() {
        let a = Sealer::new(b"key-a-key-a-key-a-key-a-key-a-key-a");
        let b = Sealer::new(b"key-b-key-b-key-b-key-b-key-b-key-b");
        let s = Session {
            v: "2025-06-18".into(),
            caps: RawValue::from_string(r#"{"roots": {}}"#.into()).unwrap(),
            p: String::new(),
        };
        let t = mint(&a, &s, 60_000);
        let opened = open(&a, &t).expect("opens with its key");
        assert_eq!(
            (opened.v, opened.caps.get(), opened.p),
            (s.v, r#"{"roots": {}}"#, s.p)
        );
        assert!(open(&b, &t).is_none());
        assert!(open(&a, "not-a-token").is_none());
        let expired = mint(
            &a,
            &Session {
                v: "2025-06-18".into(),
                caps: RawValue::NULL.to_owned(),
                p: String::new(),
            },
            0,
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert!(open(&a, &expired).is_none());
    }
}
