//! Name rules: MCP tool names (NOTES §5.4) and Junction upstream ids (DESIGN §2).

/// 1..=128 characters of `[A-Za-z0-9_.-]`.
pub fn is_valid_tool_name(s: &str) -> bool {
    (1..=128).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// `^[a-z0-9][a-z0-9-]{0,31}$`: no `_` or `.`, so `{id}__{tool}` splits unambiguously.
pub fn is_valid_upstream_id(s: &str) -> bool {
    let lower_or_digit = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    match s.as_bytes().split_first() {
        Some((first, rest)) => {
            lower_or_digit(*first)
                && rest.len() <= 31
                && rest.iter().all(|b| lower_or_digit(*b) || *b == b'-')
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names() {
        assert!(is_valid_tool_name("get_weather"));
        assert!(is_valid_tool_name("crm.lookup-v2"));
        assert!(is_valid_tool_name(&"a".repeat(128)));
        assert!(!is_valid_tool_name(&"a".repeat(129)));
        assert!(!is_valid_tool_name(""));
        assert!(!is_valid_tool_name("has space"));
        assert!(!is_valid_tool_name("comma,"));
        assert!(!is_valid_tool_name("zürich"));
    }

    #[test]
    fn upstream_ids() {
        assert!(is_valid_upstream_id("alpha"));
        assert!(is_valid_upstream_id("0"));
        assert!(is_valid_upstream_id("a-b-9"));
        assert!(is_valid_upstream_id(&format!("a{}", "b".repeat(31))));
        assert!(!is_valid_upstream_id(&format!("a{}", "b".repeat(32))));
        assert!(!is_valid_upstream_id(""));
        assert!(!is_valid_upstream_id("-a"));
        assert!(!is_valid_upstream_id("Alpha"));
        assert!(!is_valid_upstream_id("a_b"));
        assert!(!is_valid_upstream_id("a.b"));
    }
}
