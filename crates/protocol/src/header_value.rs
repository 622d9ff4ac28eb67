//! Header value codec for `Mcp-Name` and `Mcp-Param-*` (NOTES §4.1).
//!
//! A value is sent plain when it is visible ASCII (0x21–0x7E) plus space/tab
//! with no leading or trailing whitespace; otherwise as `=?base64?<std base64 of
//! UTF-8>?=`. A plain value that starts like the sentinel (`=?base64?`, compared
//! case-insensitively, to be conservative) is always encoded, so decoding a
//! sentinel is never ambiguous.

use std::borrow::Cow;

use base64::alphabet;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD};
use base64::engine::DecodePaddingMode;
use base64::Engine as _;
use serde_json::Value;

const PREFIX: &str = "=?base64?";
const SUFFIX: &str = "?=";

/// Decoding accepts padded and unpadded base64 (peers differ); encoding pads.
const LENIENT: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Largest integer magnitude a header may carry (JSON-safe integers).
pub const MAX_SAFE_INTEGER: i64 = (1 << 53) - 1;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderValueError {
    #[error("header value contains an invalid character at byte {at}")]
    InvalidCharacter { at: usize },
    #[error("header value has invalid base64 in its =?base64?...?= sentinel")]
    BadBase64,
    #[error("header value's base64 payload is not UTF-8")]
    NotUtf8,
    #[error("value of JSON type {found} cannot be sent in a header")]
    NotPrimitive { found: &'static str },
}

fn allowed_byte(b: u8) -> bool {
    matches!(b, 0x21..=0x7E | b' ' | b'\t')
}

fn looks_like_sentinel(s: &str) -> bool {
    s.len() >= PREFIX.len() && s.as_bytes()[..PREFIX.len()].eq_ignore_ascii_case(PREFIX.as_bytes())
}

/// May `s` be sent as-is?
pub fn is_plain_safe(s: &str) -> bool {
    let bytes = s.as_bytes();
    let edge_ws = |b: Option<&u8>| matches!(b, Some(b' ' | b'\t'));
    bytes.iter().all(|b| allowed_byte(*b))
        && !edge_ws(bytes.first())
        && !edge_ws(bytes.last())
        && !looks_like_sentinel(s)
}

/// Encode for a header: plain when safe (borrowed: the usual tool name needs
/// no copy), else the base64 sentinel (always ASCII).
pub fn encode(s: &str) -> Cow<'_, str> {
    if is_plain_safe(s) {
        Cow::Borrowed(s)
    } else {
        Cow::Owned(format!("{PREFIX}{}{SUFFIX}", STANDARD.encode(s.as_bytes())))
    }
}

/// Decode a received header value: a sentinel is base64-decoded; a plain value
/// must consist only of visible ASCII, space and tab (and is borrowed).
pub fn decode(s: &str) -> Result<Cow<'_, str>, HeaderValueError> {
    if s.len() >= PREFIX.len() + SUFFIX.len() && s.starts_with(PREFIX) && s.ends_with(SUFFIX) {
        let inner = &s[PREFIX.len()..s.len() - SUFFIX.len()];
        let bytes = LENIENT
            .decode(inner)
            .map_err(|_| HeaderValueError::BadBase64)?;
        return String::from_utf8(bytes)
            .map(Cow::Owned)
            .map_err(|_| HeaderValueError::NotUtf8);
    }
    match s.bytes().position(|b| !allowed_byte(b)) {
        Some(at) => Err(HeaderValueError::InvalidCharacter { at }),
        None => Ok(Cow::Borrowed(s)),
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Integer value of a JSON number, accepting integral floats (`42.0`) within
/// the safe range; `None` for fractions, huge floats and non-numbers.
pub(crate) fn as_integer(v: &Value) -> Option<i128> {
    let n = match v {
        Value::Number(n) => n,
        _ => return None,
    };
    if let Some(i) = n.as_i64() {
        return Some(i128::from(i));
    }
    if let Some(u) = n.as_u64() {
        return Some(i128::from(u));
    }
    let f = n.as_f64()?;
    // Integral floats up to 2^53 convert exactly; beyond that they are not safe integers.
    if f.is_finite() && f.fract() == 0.0 && f.abs() <= MAX_SAFE_INTEGER as f64 {
        Some(f as i128)
    } else {
        None
    }
}

/// Stringify a primitive body value for a header: string as-is, integer in
/// decimal (`42.0` gives `"42"`), bool `true`/`false`; `None` for null.
/// Fractional numbers, arrays and objects are errors.
pub fn stringify(v: &Value) -> Result<Option<String>, HeaderValueError> {
    match v {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s.clone())),
        Value::Bool(b) => Ok(Some(b.to_string())),
        Value::Number(_) => {
            as_integer(v)
                .map(|i| Some(i.to_string()))
                .ok_or(HeaderValueError::NotPrimitive {
                    found: "non-integer number",
                })
        }
        Value::Array(_) | Value::Object(_) => Err(HeaderValueError::NotPrimitive {
            found: type_name(v),
        }),
    }
}

/// Parse a header's integer text. Leading zeros are accepted (`"042"` == 42) and
/// so are integral decimal/exponent forms (`"42.0"`, `"4.2e1"`): the spec asks
/// for numeric comparison, and any such text denotes the same number.
fn header_integer(s: &str) -> Option<i128> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        return s.parse::<i128>().ok();
    }
    let json_number_chars =
        |b: u8| b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E');
    if !digits.is_empty()
        && digits.as_bytes()[0].is_ascii_digit()
        && s.bytes().all(json_number_chars)
    {
        let f: f64 = s.parse().ok()?;
        if f.is_finite() && f.fract() == 0.0 && f.abs() <= MAX_SAFE_INTEGER as f64 {
            return Some(f as i128);
        }
    }
    None
}

/// Does a (decoded) header value equal the body value? Strings and booleans are
/// compared exactly; integers numerically (`"42"` matches `42` and `42.0`).
/// Null, arrays, objects and fractional numbers never match.
pub fn matches(decoded: &str, body: &Value) -> bool {
    match body {
        Value::String(s) => decoded == s,
        Value::Bool(true) => decoded == "true",
        Value::Bool(false) => decoded == "false",
        Value::Number(_) => match (as_integer(body), header_integer(decoded)) {
            (Some(b), Some(h)) => b == h,
            _ => false,
        },
        Value::Null | Value::Array(_) | Value::Object(_) => false,
    }
}

#[cfg(test)]
#[path = "header_value_tests.rs"]
mod tests;
