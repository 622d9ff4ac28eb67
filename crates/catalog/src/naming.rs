//! Exposed names: `{upstream}{separator}{tool}`, kept within the name budget
//! by a deterministic shortening that still maps back through the catalog.

use sha2::{Digest, Sha256};

/// The spec's budget for a tool name (NOTES §5.4).
pub const MAX_TOOL_NAME: usize = 128;
/// Hex digits of the hash suffix appended to shortened names.
const HASH_HEX: usize = 8;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamingRules {
    /// Between upstream id and tool name; default `__`.
    pub separator: String,
    /// `false` = route `prefix: never`: names are passed through unchanged.
    pub prefix: bool,
    /// Shorten longer names (e.g. 64 for LLM APIs). Values above 128 act as 128.
    pub max_name_length: Option<usize>,
}

impl Default for NamingRules {
    fn default() -> Self {
        NamingRules {
            separator: "__".to_owned(),
            prefix: true,
            max_name_length: None,
        }
    }
}

impl NamingRules {
    /// The length every exposed name must fit.
    pub fn limit(&self) -> usize {
        self.max_name_length
            .map_or(MAX_TOOL_NAME, |m| m.min(MAX_TOOL_NAME))
    }

    /// The full (unshortened) exposed name.
    pub fn full_name(&self, upstream: &str, tool: &str) -> String {
        if self.prefix {
            let mut s = String::with_capacity(upstream.len() + self.separator.len() + tool.len());
            s.push_str(upstream);
            s.push_str(&self.separator);
            s.push_str(tool);
            s
        } else {
            tool.to_owned()
        }
    }

    /// `full` if it fits, else `{head}-{8 hex of sha256(full)}` cut to the limit.
    /// `full` must be ASCII (checked by the caller), so byte cuts are char cuts.
    /// None when the limit leaves no room for any name at all.
    pub fn fit(&self, full: String) -> Option<String> {
        let limit = self.limit();
        if full.len() <= limit {
            return Some(full);
        }
        if limit == 0 {
            return None;
        }
        let digest = Sha256::digest(full.as_bytes());
        let mut hex = String::with_capacity(HASH_HEX);
        for b in digest.iter().take(HASH_HEX / 2) {
            hex.push_str(&format!("{b:02x}"));
        }
        if limit <= HASH_HEX + 1 {
            // too tight for a readable head: the hash alone still differs per name
            hex.truncate(limit);
            return Some(hex);
        }
        let head = limit - HASH_HEX - 1;
        let mut out = String::with_capacity(limit);
        out.push_str(full.get(..head)?);
        out.push('-');
        out.push_str(&hex);
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_and_passthrough() {
        let r = NamingRules::default();
        assert_eq!(r.full_name("alpha", "get"), "alpha__get");
        let never = NamingRules {
            prefix: false,
            ..NamingRules::default()
        };
        assert_eq!(never.full_name("alpha", "get"), "get");
    }

    #[test]
    fn shortening_is_deterministic_and_bounded() {
        let r = NamingRules {
            max_name_length: Some(20),
            ..NamingRules::default()
        };
        let long = "alpha__a_very_long_tool_name_indeed".to_owned();
        let a = r.fit(long.clone()).unwrap();
        let b = r.fit(long).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.len(), 20);
        assert!(a.starts_with("alpha__a_ve-"), "{a}");
        assert_eq!(r.fit("alpha__short".into()).unwrap(), "alpha__short");
        let other = r
            .fit("alpha__a_very_long_tool_name_indeed2".into())
            .unwrap();
        assert_ne!(a, other);
    }

    #[test]
    fn default_limit_is_128_and_tiny_limits_still_work() {
        let r = NamingRules::default();
        let n = r.fit("x".repeat(200)).unwrap();
        assert_eq!(n.len(), 128);
        let tiny = NamingRules {
            max_name_length: Some(4),
            ..NamingRules::default()
        };
        assert_eq!(tiny.fit("abcdefgh".into()).unwrap().len(), 4);
        let zero = NamingRules {
            max_name_length: Some(0),
            ..NamingRules::default()
        };
        assert_eq!(zero.fit("a".into()), None);
    }
}
