//! Downstream handshake-era session ids: self-contained sealed tokens (DESIGN §1).
//! Any replica holding the same key accepts them; nothing is stored. A forged,
//! foreign or expired token is "session not found" (HTTP 404).

use junction_protocol::seal::{now_ms, Sealer};
use serde::{Deserialize, Serialize};
use serde_json::Value;

const PURPOSE: &str = "junction/session/v1";

#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub struct Session {
    /// Negotiated protocol version.
    pub v: String,
    /// The client's declared capabilities from `initialize`.
    pub caps: Value,
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
            caps: serde_json::json!({"roots": {}}),
            p: String::new(),
        };
        let t = mint(&a, &s, 60_000);
        assert_eq!(open(&a, &t), Some(s));
        assert_eq!(open(&b, &t), None);
        assert_eq!(open(&a, "not-a-token"), None);
        let expired = mint(
            &a,
            &Session {
                v: "2025-06-18".into(),
                caps: Value::Null,
                p: String::new(),
            },
            0,
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert_eq!(open(&a, &expired), None);
    }
}
