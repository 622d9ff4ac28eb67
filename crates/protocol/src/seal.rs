//! Sealed tokens: HMAC-SHA256 signed, URL-safe, expiring (cursors, legacy
//! session ids, wrapped `requestState`).
//!
//! Format: `B64(body) "." B64(mac)` where B64 is base64url without padding,
//! `body = 0x01 (format version) | expires_at_ms (u64 big-endian) | payload`, and
//! `mac = HMAC-SHA256(key, len(purpose) (u32 big-endian) | purpose | body)`.
//! The purpose is bound into the MAC but not carried in the token, so a token
//! minted for one purpose never opens for another. Payloads are signed, not
//! encrypted: never seal secrets. A token is valid while `now_ms < expires_at_ms`.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hmac::digest::KeyInit;
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::{Digest, Sha256};

type HmacSha256 = Hmac<Sha256>;

const FORMAT_VERSION: u8 = 1;
const HEADER_LEN: usize = 1 + 8;
/// SHA-256 block size: HMAC keys are zero-padded (or hashed, if longer) to this.
const BLOCK: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    #[error("token is malformed")]
    Malformed,
    #[error("token signature does not verify (tampered, foreign key or wrong purpose)")]
    BadMac,
    #[error("token has expired")]
    Expired,
}

/// Seals and opens tokens with one key. Cloning is cheap-ish (a keyed HMAC state).
#[derive(Clone)]
pub struct Sealer {
    mac: HmacSha256,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sealer { .. }")
    }
}

impl Sealer {
    /// Any key length works (standard HMAC key handling). An empty or short key
    /// is accepted but weak; configuration should insist on ≥32 random bytes.
    pub fn new(key: &[u8]) -> Sealer {
        // Exactly HMAC's own key preparation, done here so construction is infallible.
        let mut block = [0u8; BLOCK];
        if key.len() > BLOCK {
            block[..32].copy_from_slice(&Sha256::digest(key));
        } else {
            block[..key.len()].copy_from_slice(key);
        }
        Sealer {
            mac: <HmacSha256 as KeyInit>::new(&block.into()),
        }
    }

    /// A fresh 32-byte key from the OS: tokens only open in this process.
    pub fn random() -> Sealer {
        let mut key = [0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut key);
        Sealer::new(&key)
    }

    fn keyed(&self, purpose: &str, body: &[u8]) -> HmacSha256 {
        let mut mac = self.mac.clone();
        let len = u32::try_from(purpose.len()).unwrap_or(u32::MAX);
        mac.update(&len.to_be_bytes());
        mac.update(purpose.as_bytes());
        mac.update(body);
        mac
    }

    pub fn seal(&self, purpose: &str, payload: &[u8], expires_at_ms: u64) -> String {
        let mut body = Vec::with_capacity(HEADER_LEN + payload.len());
        body.push(FORMAT_VERSION);
        body.extend_from_slice(&expires_at_ms.to_be_bytes());
        body.extend_from_slice(payload);
        let tag = self.keyed(purpose, &body).finalize().into_bytes();
        let mut token = URL_SAFE_NO_PAD.encode(&body);
        token.push('.');
        URL_SAFE_NO_PAD.encode_string(tag, &mut token);
        token
    }

    /// Verify and unwrap a token: `Malformed` for anything not shaped like a
    /// token, `BadMac` for a wrong key, purpose or any altered byte (checked in
    /// constant time), `Expired` once `now_ms >= expires_at_ms`.
    pub fn open(&self, purpose: &str, token: &str, now_ms: u64) -> Result<Vec<u8>, SealError> {
        let (body_b64, mac_b64) = token.split_once('.').ok_or(SealError::Malformed)?;
        let body = URL_SAFE_NO_PAD
            .decode(body_b64)
            .map_err(|_| SealError::Malformed)?;
        let tag = URL_SAFE_NO_PAD
            .decode(mac_b64)
            .map_err(|_| SealError::Malformed)?;
        if body.len() < HEADER_LEN {
            return Err(SealError::Malformed);
        }
        self.keyed(purpose, &body)
            .verify_slice(&tag)
            .map_err(|_| SealError::BadMac)?;
        if body[0] != FORMAT_VERSION {
            return Err(SealError::Malformed);
        }
        let mut expiry = [0u8; 8];
        expiry.copy_from_slice(&body[1..HEADER_LEN]);
        if now_ms >= u64::from_be_bytes(expiry) {
            return Err(SealError::Expired);
        }
        Ok(body[HEADER_LEN..].to_vec())
    }
}

/// Milliseconds since the Unix epoch (0 if the clock is before 1970).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
#[path = "seal_tests.rs"]
mod tests;
