//! Protocol version strings of both eras (NOTES §1).

/// The modern (stateless, per-request `_meta`) protocol version.
pub const MODERN: &str = "2026-07-28";

/// Handshake-era versions Junction speaks, newest first.
pub const LEGACY: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26"];

/// True for a handshake-era version Junction supports.
pub fn is_legacy(v: &str) -> bool {
    LEGACY.contains(&v)
}

/// True for any version Junction supports (modern or legacy).
pub fn is_supported(v: &str) -> bool {
    v == MODERN || is_legacy(v)
}

/// Every supported version, modern first (for `-32022` `data.supported`).
pub fn supported() -> Vec<&'static str> {
    std::iter::once(MODERN)
        .chain(LEGACY.iter().copied())
        .collect()
}

/// Legacy `initialize` negotiation: echo `requested` if we speak it, else offer
/// our newest legacy version (the client then decides whether to continue).
pub fn negotiate_legacy(requested: &str) -> &'static str {
    LEGACY
        .iter()
        .copied()
        .find(|v| *v == requested)
        .unwrap_or(LEGACY[0])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_negotiation_echoes_known_and_falls_back_to_newest() {
        assert_eq!(negotiate_legacy("2025-06-18"), "2025-06-18");
        assert_eq!(negotiate_legacy("2025-03-26"), "2025-03-26");
        assert_eq!(negotiate_legacy("2024-11-05"), "2025-11-25");
        assert_eq!(negotiate_legacy(MODERN), "2025-11-25");
        assert!(is_legacy("2025-11-25"));
        assert!(!is_legacy(MODERN));
        assert!(is_supported(MODERN));
        assert!(!is_supported("2024-11-05"));
        assert_eq!(supported()[0], MODERN);
    }
}
