//! The `Mcp-Name` / `Mcp-Param-*` value encoding (NOTES §4.1), written here from
//! the spec on purpose: the mocks must not share the gateway's codec, or a bug in
//! it would be invisible to the tests.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde_json::Value;

const PREFIX: &str = "=?base64?";
const SUFFIX: &str = "?=";

/// Why a header value could not be decoded.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CodecError {
    #[error("header value has characters outside visible ASCII, space and tab")]
    InvalidChars,
    #[error("header value has leading or trailing whitespace")]
    EdgeWhitespace,
    #[error("base64 sentinel payload is not valid base64")]
    BadBase64,
    #[error("base64 sentinel payload is not UTF-8")]
    NotUtf8,
}

fn is_sentinel(s: &str) -> bool {
    s.len() >= PREFIX.len() + SUFFIX.len() && s.starts_with(PREFIX) && s.ends_with(SUFFIX)
}

/// Visible ASCII plus space/tab, no edge whitespace, and not sentinel-shaped.
pub fn is_plain_safe(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| (0x21..=0x7e).contains(&b) || b == b' ' || b == b'\t')
        && !s.starts_with([' ', '\t'])
        && !s.ends_with([' ', '\t'])
        && !is_sentinel(s)
}

/// Encode a value for a header: plain when safe, otherwise the base64 sentinel.
/// The empty string has no plain form that survives HTTP, so it is encoded too.
pub fn encode(s: &str) -> String {
    if is_plain_safe(s) {
        s.to_string()
    } else {
        format!("{PREFIX}{}{SUFFIX}", STANDARD.encode(s.as_bytes()))
    }
}

/// Decode a received header value.
pub fn decode(s: &str) -> Result<String, CodecError> {
    if is_sentinel(s) {
        let inner = &s[PREFIX.len()..s.len() - SUFFIX.len()];
        let bytes = STANDARD.decode(inner).map_err(|_| CodecError::BadBase64)?;
        return String::from_utf8(bytes).map_err(|_| CodecError::NotUtf8);
    }
    if !s
        .bytes()
        .all(|b| (0x21..=0x7e).contains(&b) || b == b' ' || b == b'\t')
    {
        return Err(CodecError::InvalidChars);
    }
    if s.starts_with([' ', '\t']) || s.ends_with([' ', '\t']) {
        return Err(CodecError::EdgeWhitespace);
    }
    Ok(s.to_string())
}

/// Header text for a primitive body value; None for null and non-primitives.
pub fn stringify(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A decoded header against the body value: strings and booleans exactly,
/// numbers numerically (`"42"` matches `42.0`).
pub fn matches(decoded: &str, body: &Value) -> bool {
    match body {
        Value::String(s) => s == decoded,
        Value::Bool(b) => decoded == if *b { "true" } else { "false" },
        Value::Number(n) => match (decoded.parse::<f64>(), n.as_f64()) {
            (Ok(h), Some(b)) => h == b,
            _ => false,
        },
        _ => false,
    }
}

/// Every `x-mcp-header` annotation reachable through `properties` only:
/// (annotation value, property path). Misplaced annotations are ignored here;
/// the mock serves broken schemas on purpose to test that the gateway drops them.
pub fn annotated_paths(schema: &Value) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    walk(schema, &mut Vec::new(), &mut out);
    out
}

fn walk(schema: &Value, path: &mut Vec<String>, out: &mut Vec<(String, Vec<String>)>) {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (key, sub) in props {
        path.push(key.clone());
        if let Some(name) = sub.get("x-mcp-header").and_then(Value::as_str) {
            out.push((name.to_string(), path.clone()));
        }
        walk(sub, path, out);
        path.pop();
    }
}

/// The value at a `properties` path inside `arguments`.
pub fn value_at<'a>(arguments: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(arguments, |v, key| v.get(key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trips_and_sentinels() {
        assert_eq!(encode("eu-1"), "eu-1");
        assert_eq!(encode("Zürich"), "=?base64?WsO8cmljaA==?=");
        assert_eq!(encode(" lead"), "=?base64?IGxlYWQ=?=");
        let tricky = "=?base64?abc?=";
        assert_ne!(encode(tricky), tricky);
        for s in ["eu-1", "Zürich", " x ", tricky, "a\nb", ""] {
            assert_eq!(decode(&encode(s)).unwrap(), s);
        }
        assert_eq!(decode("=?base64?***?="), Err(CodecError::BadBase64));
        assert_eq!(decode("caf\u{e9}"), Err(CodecError::InvalidChars));
    }

    #[test]
    fn numeric_comparison() {
        assert!(matches("42", &json!(42.0)));
        assert!(!matches("42", &json!("042")));
        assert!(matches("false", &json!(false)));
    }

    #[test]
    fn finds_nested_annotations() {
        let s = json!({"type":"object","properties":{
            "target":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}},
            "dry":{"type":"boolean","x-mcp-header":"Dry-Run"}}});
        let mut got = annotated_paths(&s);
        got.sort();
        assert_eq!(
            got,
            vec![
                ("Dry-Run".to_string(), vec!["dry".to_string()]),
                (
                    "Region".to_string(),
                    vec!["target".to_string(), "region".to_string()]
                ),
            ]
        );
    }
}
