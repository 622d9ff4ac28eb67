//! Downstream `tools/list` cursors: sealed (version, offset), so any replica
//! with the key can continue a listing and nobody can forge or reuse one
//! against a changed catalog. They do not expire by time: the version binding
//! already makes an outdated cursor fail.

use junction_protocol::seal::{self, Sealer};

const PURPOSE: &str = "junction/tools-list-cursor/v1";
const NEVER: u64 = u64::MAX;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CursorError {
    /// Not a cursor this gateway made (garbled, forged, other key).
    #[error("invalid cursor")]
    Invalid,
    /// Made for an earlier version of the catalog: start the listing again.
    #[error("cursor is for a catalog that has since changed")]
    Stale,
}

pub fn encode(sealer: &Sealer, version: u64, offset: usize) -> String {
    let mut payload = [0u8; 16];
    payload[..8].copy_from_slice(&version.to_be_bytes());
    payload[8..].copy_from_slice(&(offset as u64).to_be_bytes());
    sealer.seal(PURPOSE, &payload, NEVER)
}

pub fn decode(sealer: &Sealer, token: &str, version: u64) -> Result<usize, CursorError> {
    let payload = sealer
        .open(PURPOSE, token, seal::now_ms())
        .map_err(|_| CursorError::Invalid)?;
    let (v, o) = match (payload.get(..8), payload.get(8..16)) {
        (Some(v), Some(o)) if payload.len() == 16 => (v, o),
        _ => return Err(CursorError::Invalid),
    };
    let mut buf = [0u8; 8];
    buf.copy_from_slice(v);
    if u64::from_be_bytes(buf) != version {
        return Err(CursorError::Stale);
    }
    buf.copy_from_slice(o);
    usize::try_from(u64::from_be_bytes(buf)).map_err(|_| CursorError::Invalid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let s = Sealer::new(b"k");
        let c = encode(&s, 42, 100);
        assert_eq!(decode(&s, &c, 42), Ok(100));
        // deterministic: the same page always gets the same cursor
        assert_eq!(c, encode(&s, 42, 100));
    }

    #[test]
    fn other_version_is_stale() {
        let s = Sealer::new(b"k");
        let c = encode(&s, 42, 100);
        assert_eq!(decode(&s, &c, 43), Err(CursorError::Stale));
    }

    #[test]
    fn forged_or_foreign_is_invalid() {
        let s = Sealer::new(b"k");
        let c = encode(&s, 42, 100);
        assert_eq!(
            decode(&Sealer::new(b"other"), &c, 42),
            Err(CursorError::Invalid)
        );
        assert_eq!(decode(&s, "", 42), Err(CursorError::Invalid));
        assert_eq!(decode(&s, "garbage", 42), Err(CursorError::Invalid));
        let mut bytes = c.into_bytes();
        bytes[3] = if bytes[3] == b'A' { b'B' } else { b'A' };
        let tampered = String::from_utf8(bytes).unwrap();
        assert_eq!(decode(&s, &tampered, 42), Err(CursorError::Invalid));
        // a token sealed for another purpose is not a cursor
        let other = s.seal("junction/request-state", &[0u8; 16], u64::MAX);
        assert_eq!(decode(&s, &other, 0), Err(CursorError::Invalid));
    }
}
