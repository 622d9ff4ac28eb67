//! The top-level members of a JSON object that has been validated already
//! (the text of a `RawValue`), read without parsing it a second time.
//!
//! An upstream's answer is parsed once, as a whole, when it arrives: that pass
//! checks every byte and keeps `result` raw. Reading one member of it
//! afterwards (`resultType`) with serde_json would check every byte again and
//! allocate for what it keeps; this scanner only finds where each member
//! starts and ends, skipping strings with `memchr`, so a large result costs
//! little more than a small one.
//!
//! Given text that is not valid JSON it never panics or loops: it stops
//! early, and what it yielded until then may be wrong. Callers pass the text
//! of a `RawValue` (or of a member this scanner returned).

use std::borrow::Cow;

/// The members of `text` in order, each key decoded (borrowed unless it has
/// escapes) with its value's raw JSON text; `None` when `text` is not an
/// object. Duplicate keys are all yielded.
pub fn members(text: &str) -> Option<Members<'_>> {
    let start = skip_ws(text.as_bytes(), 0);
    (text.as_bytes().get(start) == Some(&b'{')).then_some(Members {
        text,
        pos: start + 1,
    })
}

/// A JSON string's contents from its raw text (borrowed unless it has
/// escapes); `None` for any other JSON type. Like `jsonrpc::raw_str` for
/// member texts that are not `RawValue`s.
pub fn string(raw: &str) -> Option<Cow<'_, str>> {
    if !raw.starts_with('"') {
        return None;
    }
    match string_end(raw.as_bytes(), 0)? {
        (end, false) if end == raw.len() => raw.get(1..end - 1).map(Cow::Borrowed),
        _ => serde_json::from_str::<String>(raw).ok().map(Cow::Owned),
    }
}

pub struct Members<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Iterator for Members<'a> {
    type Item = (Cow<'a, str>, &'a str);

    fn next(&mut self) -> Option<Self::Item> {
        let bytes = self.text.as_bytes();
        let mut pos = skip_ws(bytes, self.pos);
        if bytes.get(pos) == Some(&b',') {
            pos = skip_ws(bytes, pos + 1);
        }
        if bytes.get(pos) != Some(&b'"') {
            // `}` (the end) or not valid JSON: stop for good.
            self.pos = bytes.len();
            return None;
        }
        let (key_end, escaped) = string_end(bytes, pos)?;
        let key = if escaped {
            Cow::Owned(serde_json::from_str::<String>(self.text.get(pos..key_end)?).ok()?)
        } else {
            Cow::Borrowed(self.text.get(pos + 1..key_end - 1)?)
        };
        let colon = skip_ws(bytes, key_end);
        if bytes.get(colon) != Some(&b':') {
            self.pos = bytes.len();
            return None;
        }
        let value_start = skip_ws(bytes, colon + 1);
        let value_end = value_end(bytes, value_start)?;
        self.pos = value_end;
        Some((key, self.text.get(value_start..value_end)?))
    }
}

fn skip_ws(bytes: &[u8], mut pos: usize) -> usize {
    while matches!(bytes.get(pos), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        pos += 1;
    }
    pos
}

/// One past the closing quote of the string opening at `start`, and whether
/// the string has escapes.
fn string_end(bytes: &[u8], start: usize) -> Option<(usize, bool)> {
    let mut pos = start + 1;
    let mut escaped = false;
    loop {
        let at = quote_or_backslash(bytes, pos)?;
        if bytes[at] == b'"' {
            return Some((at + 1, escaped));
        }
        // A backslash escapes the next byte (`\"`, `\\`; `\u` needs no care).
        escaped = true;
        pos = at + 2;
    }
}

/// The first `"` or `\` at or after `pos`. Most strings in MCP messages are
/// short (keys, types, ids): they are scanned eight bytes at a time in place;
/// past 64 bytes `memchr` takes over, for long texts.
fn quote_or_backslash(bytes: &[u8], mut pos: usize) -> Option<usize> {
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    const QUOTES: u64 = u64::from_ne_bytes([b'"'; 8]);
    const BACKSLASHES: u64 = u64::from_ne_bytes([b'\\'; 8]);
    let limit = pos.saturating_add(64);
    while let Some(chunk) = bytes.get(pos..pos + 8) {
        let word = u64::from_le_bytes(chunk.try_into().ok()?);
        // A byte equal to the needle becomes zero; `(x - 1) & !x & 0x80` flags
        // the lowest zero byte exactly (higher flags may be false positives).
        let (q, b) = (word ^ QUOTES, word ^ BACKSLASHES);
        let found = ((q.wrapping_sub(ONES) & !q) | (b.wrapping_sub(ONES) & !b)) & HIGH;
        if found != 0 {
            return Some(pos + (found.trailing_zeros() / 8) as usize);
        }
        pos += 8;
        if pos >= limit {
            return memchr::memchr2(b'"', b'\\', bytes.get(pos..)?).map(|i| pos + i);
        }
    }
    let rest = bytes.get(pos..)?;
    rest.iter()
        .position(|&c| c == b'"' || c == b'\\')
        .map(|i| pos + i)
}

/// One past the end of the value starting at `start`.
fn value_end(bytes: &[u8], start: usize) -> Option<usize> {
    match bytes.get(start)? {
        b'"' => string_end(bytes, start).map(|(end, _)| end),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut pos = start;
            loop {
                match bytes.get(pos)? {
                    b'"' => {
                        pos = string_end(bytes, pos)?.0;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(pos + 1);
                        }
                    }
                    _ => {}
                }
                pos += 1;
            }
        }
        // A number, `true`, `false` or `null`.
        _ => {
            let len = bytes[start..]
                .iter()
                .position(|b| matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
                .unwrap_or(bytes.len() - start);
            Some(start + len)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::Value;

    fn collect(text: &str) -> Vec<(String, String)> {
        members(text)
            .expect("an object")
            .map(|(k, v)| (k.into_owned(), v.to_owned()))
            .collect()
    }

    #[test]
    fn members_come_in_order_with_their_raw_text() {
        let text =
            r#" { "a" : 1 , "b":{"c":[1,{"d":"}]"}]},"e":"x\"y","f":[],"g":null,"h":-1.5e3 } "#;
        assert_eq!(
            collect(text),
            [
                ("a", "1"),
                ("b", r#"{"c":[1,{"d":"}]"}]}"#),
                ("e", r#""x\"y""#),
                ("f", "[]"),
                ("g", "null"),
                ("h", "-1.5e3"),
            ]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
        );
        assert!(collect("{}").is_empty());
        assert!(collect(" {\n} ").is_empty());
    }

    #[test]
    fn escaped_keys_are_decoded_and_duplicates_kept() {
        let got = collect(r#"{"result\u0054ype":"a","resultType":"b","k\\":true}"#);
        let keys: Vec<&str> = got.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["resultType", "resultType", "k\\"]);
    }

    #[test]
    fn the_first_quote_or_backslash_is_found_at_any_offset_and_length() {
        for len in 0..200 {
            for at in 0..len {
                for needle in [b'"', b'\\'] {
                    let mut bytes = vec![b'a'; len];
                    bytes[at] = needle;
                    // A later needle of the other kind must not be taken.
                    if at + 1 < len {
                        bytes[len - 1] = b'"';
                    }
                    for from in [0, at / 2, at] {
                        assert_eq!(quote_or_backslash(&bytes, from), Some(at), "{len} {at} {from}");
                    }
                }
            }
            assert_eq!(quote_or_backslash(&vec![b'x'; len], 0), None, "{len}");
        }
        // Bytes that differ from a needle by one bit or sit next to it in value.
        let near = b"!#[]\x00\x7f\xa2\xdc\xff\x22";
        assert_eq!(quote_or_backslash(near, 0), Some(near.len() - 1));
    }

    #[test]
    fn other_json_types_are_not_objects() {
        for text in ["[1]", "\"{\"", "null", "1", "", "  "] {
            assert!(members(text).is_none(), "{text}");
        }
    }

    #[test]
    fn strings_decode_and_other_types_do_not() {
        assert_eq!(string(r#""plain""#).as_deref(), Some("plain"));
        assert_eq!(
            string(r#""caf\u00e9 \"q\"""#).as_deref(),
            Some("café \"q\"")
        );
        for other in ["1", "null", "{}", "[\"a\"]", "true"] {
            assert_eq!(string(other), None, "{other}");
        }
    }

    #[test]
    fn text_that_is_not_json_ends_the_members_without_panicking() {
        for text in [
            "{\"a\"",
            "{\"a\":",
            "{\"a\":\"unterminated",
            "{\"a\":[1,",
            "{\"a\" 1}",
            "{1:2}",
            "{\"a\":1 \"b\":2}",
            "{\"\\",
            "{\"a\":\"\\",
        ] {
            let _ = members(text).map(|m| m.count());
        }
    }

    fn json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            ".*".prop_map(Value::from),
            "[\"\\\\{}\\[\\], :]*".prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
                prop::collection::vec((".*", inner), 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Any object serde_json writes (compact or pretty) reads back as the
        /// same members, each value's text parsing to the same value.
        #[test]
        fn agrees_with_serde_json(
            pairs in prop::collection::vec((".*", json()), 0..8),
            pretty in any::<bool>(),
        ) {
            let value = Value::Object(pairs.into_iter().collect());
            let text = if pretty {
                serde_json::to_string_pretty(&value).unwrap_or_default()
            } else {
                serde_json::to_string(&value).unwrap_or_default()
            };
            let got: Vec<(String, Value)> = members(&text)
                .expect("an object")
                .map(|(k, v)| (k.into_owned(), serde_json::from_str(v).unwrap_or(Value::Bool(false))))
                .collect();
            // Parsed back rather than compared with `value`: floats need not
            // round-trip exactly, but both sides read the same digits.
            let want: serde_json::Map<String, Value> = serde_json::from_str(&text).unwrap_or_default();
            let want: Vec<(String, Value)> = want.into_iter().collect();
            prop_assert_eq!(got, want);
        }
    }
}
