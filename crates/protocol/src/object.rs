//! The top-level members of a JSON object that has been validated already
//! (the text of a `RawValue`), read without parsing it a second time.
//!
//! An upstream's answer is parsed once, as a whole, when it arrives: that pass
//! checks every byte and keeps `result` raw. Reading one member of it
//! afterwards (`resultType`) with serde_json would check every byte again and
//! allocate for what it keeps; this scanner only finds where each member
//! starts and ends, skipping strings a word at a time (`string_end`), so a
//! large result costs a fraction of a parse.
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
/// escapes); `None` for any other JSON type. `jsonrpc::raw_str` is this for a
/// `RawValue`.
pub fn string(raw: &str) -> Option<Cow<'_, str>> {
    if !raw.starts_with('"') {
        return None;
    }
    // Most strings (names, versions, `complete`) have no escape: one look
    // over the contents says so, and they are the contents. (The raw text of
    // a JSON string holds no control character, so `needs_escape` flags
    // exactly a quote or a backslash.)
    if let Some(inner) = raw[1..].strip_suffix('"') {
        if !needs_escape(inner) {
            return Some(Cow::Borrowed(inner));
        }
    }
    match string_end(raw.as_bytes(), 0)? {
        (end, false) if end == raw.len() => raw.get(1..end - 1).map(Cow::Borrowed),
        _ => serde_json::from_str::<String>(raw).ok().map(Cow::Owned),
    }
}

/// `text` (an object) with `members` (`"k":v` pairs, comma-separated, no
/// trailing comma) spliced in first, every existing member kept byte for
/// byte: how Junction adds a key to a result without re-serializing it.
/// `None` when `text` is not an object.
pub fn prepend(text: &str, members: &str) -> Option<String> {
    let rest = text.trim_start().strip_prefix('{')?.trim_start();
    Some(if rest.starts_with('}') {
        format!("{{{members}}}")
    } else {
        format!("{{{members},{rest}")
    })
}

/// A key to look up among an object's top-level members by [`sole`]: a
/// prebuilt searcher for it quoted, `"key"`.
pub struct Key {
    quoted: memchr::memmem::Finder<'static>,
}

impl Key {
    /// `key` must need no escape in JSON (plain ASCII letters, as protocol
    /// keys are).
    pub fn new(key: &'static str) -> Key {
        let quoted = format!("\"{key}\"");
        Key {
            quoted: memchr::memmem::Finder::new(quoted.as_bytes()).into_owned(),
        }
    }
}

/// What [`sole`] could tell without walking the members.
#[derive(Debug, PartialEq, Eq)]
pub enum Sole<'a> {
    /// No member anywhere in the text has the key.
    Absent,
    /// The key is a top-level member exactly once, with this raw value.
    Once(&'a str),
    /// Not decided: walk the members.
    Walk,
}

/// The top-level member `key` of the object `text` in the shapes answers
/// usually take, without walking every member: the key written nowhere
/// (`Absent`), or written once and that once as the object's first member or
/// as its last with a string value (`Once`). Anything else, and any text
/// with a `\u` escape (a key may be spelled with one), is `Walk`. One search
/// for the quoted key, over the part of the text another member would be in.
///
/// Why it is exact on valid JSON: a `"` inside a string is escaped, so the
/// first member's key (right after `{`), or the last member's read backwards
/// from the closing `}`, is a real key; and since the key needs no escape,
/// any other spelling of it needs `\u`.
pub fn sole<'a>(text: &'a str, key: &Key) -> Sole<'a> {
    let bytes = text.as_bytes();
    let quoted = key.quoted.needle();
    if unicode_escape(bytes) {
        return Sole::Walk;
    }
    let open = skip_ws(bytes, 0);
    if bytes.get(open) != Some(&b'{') {
        return Sole::Walk;
    }
    // The first member, written nowhere after.
    let first = skip_ws(bytes, open + 1);
    if bytes[first..].starts_with(quoted) {
        let after = first + quoted.len();
        if key.quoted.find(&bytes[after..]).is_some() {
            return Sole::Walk;
        }
        let colon = skip_ws(bytes, after);
        if bytes.get(colon) != Some(&b':') {
            return Sole::Walk;
        }
        let start = skip_ws(bytes, colon + 1);
        return match value_end(bytes, start).and_then(|end| text.get(start..end)) {
            Some(value) => Sole::Once(value),
            None => Sole::Walk,
        };
    }
    // The last member, read backwards (`"key" : "value" }`), written nowhere
    // before.
    if let Some((key_first, value)) = last_string_member(text) {
        if bytes[key_first..].starts_with(quoted) {
            return match key.quoted.find(&bytes[..key_first]) {
                None => Sole::Once(value),
                Some(_) => Sole::Walk,
            };
        }
    }
    match key.quoted.find(bytes) {
        None => Sole::Absent,
        Some(_) => Sole::Walk,
    }
}

/// The object's last member when its value is a string: where its key's
/// opening quote is, and the value's raw text.
fn last_string_member(text: &str) -> Option<(usize, &str)> {
    let bytes = text.as_bytes();
    let close = last_non_ws(bytes, bytes.len())?;
    let value_last = last_non_ws(bytes, close)?;
    if bytes[close] != b'}' || bytes[value_last] != b'"' {
        return None;
    }
    let value_first = string_start(bytes, value_last)?;
    let colon = last_non_ws(bytes, value_first)?;
    let key_last = last_non_ws(bytes, colon)?;
    if bytes[colon] != b':' || bytes[key_last] != b'"' {
        return None;
    }
    let key_first = string_start(bytes, key_last)?;
    Some((key_first, text.get(value_first..=value_last)?))
}

/// Whether `bytes` has `\u` (also where the backslash is itself escaped:
/// callers only need no false "no").
fn unicode_escape(bytes: &[u8]) -> bool {
    memchr::memchr_iter(b'\\', bytes).any(|i| bytes.get(i + 1) == Some(&b'u'))
}

/// The last byte before `end` that is not JSON whitespace.
fn last_non_ws(bytes: &[u8], end: usize) -> Option<usize> {
    bytes[..end]
        .iter()
        .rposition(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
}

/// The opening quote of the string whose closing quote is at `last`: the
/// nearest `"` before it not escaped (preceded by an even run of `\`).
fn string_start(bytes: &[u8], last: usize) -> Option<usize> {
    let mut end = last;
    loop {
        let quote = memchr::memrchr(b'"', &bytes[..end])?;
        let backslashes = bytes[..quote]
            .iter()
            .rev()
            .take_while(|&&b| b == b'\\')
            .count();
        if backslashes % 2 == 0 {
            return Some(quote);
        }
        end = quote;
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
/// the string has escapes. Eight bytes at a time: every `"` and `\` of a word
/// is flagged at once, so text dense with escapes (code, paths: one every few
/// dozen bytes) costs no more per byte than plain text; after 64 bytes with
/// neither, `memchr` looks further ahead, for long plain texts.
fn string_end(bytes: &[u8], start: usize) -> Option<(usize, bool)> {
    let mut pos = start + 1;
    let mut escaped = false;
    // The byte at `pos` is escaped (a word ended with a backslash).
    let mut skip_first = false;
    let mut quiet = 0;
    while let Some(chunk) = bytes.get(pos..pos + 8) {
        let word = u64::from_le_bytes(chunk.try_into().ok()?);
        let mut hits = zero_bytes(word ^ QUOTES) | zero_bytes(word ^ BACKSLASHES);
        if skip_first {
            hits &= !0xff;
            skip_first = false;
        }
        if hits == 0 {
            pos += 8;
            quiet += 1;
            if quiet == 8 {
                quiet = 0;
                pos += memchr::memchr2(b'"', b'\\', bytes.get(pos..)?)?;
            }
            continue;
        }
        quiet = 0;
        while hits != 0 {
            let i = (hits.trailing_zeros() / 8) as usize;
            if chunk[i] == b'"' {
                return Some((pos + i + 1, escaped));
            }
            escaped = true;
            // The backslash and the byte it escapes are done with.
            if i >= 6 {
                skip_first = i == 7;
                hits = 0;
            } else {
                hits &= !0u64 << ((i + 2) * 8);
            }
        }
        pos += 8;
    }
    // The last few bytes, one at a time.
    loop {
        if skip_first {
            skip_first = false;
            pos += 1;
            continue;
        }
        match bytes.get(pos)? {
            b'"' => return Some((pos + 1, escaped)),
            b'\\' => {
                escaped = true;
                skip_first = true;
            }
            _ => {}
        }
        pos += 1;
    }
}

const QUOTES: u64 = u64::from_ne_bytes([b'"'; 8]);
const BACKSLASHES: u64 = u64::from_ne_bytes([b'\\'; 8]);

/// Whether `s` has a byte JSON writes escaped inside a string: `"`, `\\` or a
/// control character below 0x20 (what serde_json escapes). Eight bytes at a
/// time: the writers call this for every key, method and id they copy, and
/// most are plain.
pub fn needs_escape(s: &str) -> bool {
    // A byte below 0x20 is one whose top three bits are zero.
    const HIGH3: u64 = u64::from_ne_bytes([0xe0; 8]);
    let mut words = s.as_bytes().chunks_exact(8);
    for chunk in words.by_ref() {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let word = u64::from_ne_bytes(word);
        if zero_bytes(word ^ QUOTES) | zero_bytes(word ^ BACKSLASHES) | zero_bytes(word & HIGH3)
            != 0
        {
            return true;
        }
    }
    words
        .remainder()
        .iter()
        .any(|&b| b < 0x20 || b == b'"' || b == b'\\')
}

/// 0x80 in each byte of `x` that is zero, 0 elsewhere (exact: no carry
/// crosses bytes, since `(b & 0x7f) + 0x7f` stays below 0x100).
fn zero_bytes(x: u64) -> u64 {
    const LOW7: u64 = u64::from_ne_bytes([0x7f; 8]);
    !(((x & LOW7) + LOW7) | x | LOW7)
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
    fn prepend_keeps_every_member_byte_for_byte() {
        assert_eq!(
            prepend(
                r#" {"content":[{"text":"x  y"}]}"#,
                r#""resultType":"complete""#
            )
            .as_deref(),
            Some(r#"{"resultType":"complete","content":[{"text":"x  y"}]}"#)
        );
        assert_eq!(
            prepend("{ }", r#""a":1,"b":2"#).as_deref(),
            Some(r#"{"a":1,"b":2}"#)
        );
        assert_eq!(prepend("[1]", r#""a":1"#), None);
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

    /// The plain reading of a JSON string's end, one byte at a time.
    fn string_end_bytewise(bytes: &[u8], start: usize) -> Option<(usize, bool)> {
        let (mut pos, mut escaped) = (start + 1, false);
        loop {
            match bytes.get(pos)? {
                b'"' => return Some((pos + 1, escaped)),
                b'\\' => {
                    escaped = true;
                    pos += 2;
                }
                _ => pos += 1,
            }
        }
    }

    #[test]
    fn string_ends_agree_with_a_bytewise_reading_at_every_offset() {
        // Strings of every length to 150 with an escape (or two in a row) at
        // every offset, so escapes meet word boundaries in every way; plus
        // long plain runs, where memchr takes over.
        let mut cases: Vec<Vec<u8>> = Vec::new();
        for len in 0..150 {
            cases.push(vec![b'a'; len]);
            for at in 0..len {
                for esc in [&br#"\""#[..], br"\\", br"\n", br"\u00e9", br#"\\\""#] {
                    let mut body = vec![b'a'; len];
                    body.splice(at..at, esc.iter().copied());
                    cases.push(body);
                }
            }
        }
        for len in [200, 1000, 5000] {
            let mut body = vec![b'x'; len];
            body.extend_from_slice(br#"\"tail"#);
            cases.push(body);
        }
        for body in cases {
            let mut text = b"  \"".to_vec();
            text.extend_from_slice(&body);
            text.extend_from_slice(b"\" , \"next\"");
            let want = string_end_bytewise(&text, 2);
            assert_eq!(
                string_end(&text, 2),
                want,
                "{}",
                String::from_utf8_lossy(&body)
            );
            assert!(want.is_some());
        }
        // Unterminated: none, whatever the length.
        for len in 0..40 {
            let mut text = b"\"".to_vec();
            text.extend(std::iter::repeat_n(b'a', len));
            assert_eq!(string_end(&text, 0), None, "{len}");
            text.push(b'\\');
            assert_eq!(string_end(&text, 0), None, "{len}");
        }
    }

    #[test]
    fn needs_escape_agrees_with_a_bytewise_reading() {
        let bytewise = |s: &[u8]| s.iter().any(|&b| b < 0x20 || b == b'"' || b == b'\\');
        // Every byte value (as UTF-8 where it is not ASCII) at every offset of
        // strings up to three words long, so it meets each word position and
        // the tail.
        for len in 0..24 {
            let plain = "a".repeat(len);
            assert!(!needs_escape(&plain), "{len}");
            for at in 0..len {
                for c in (0..=0x7fu8)
                    .map(char::from)
                    .chain(['é', '\u{7ff}', '€', '😀'])
                {
                    let mut s: String = plain.chars().take(at).collect();
                    s.push(c);
                    s.extend(plain.chars().skip(at + 1));
                    assert_eq!(needs_escape(&s), bytewise(s.as_bytes()), "{s:?}");
                }
            }
        }
        // What serde_json escapes, it flags; what it copies, it does not.
        for s in [
            "io.modelcontextprotocol/protocolVersion",
            "tools/call",
            "x\u{7f}y",
        ] {
            let written = serde_json::to_string(s).unwrap_or_default();
            assert_eq!(needs_escape(s), written != format!("\"{s}\""), "{s:?}");
        }
    }

    #[test]
    fn zero_bytes_flags_exactly_the_zero_bytes() {
        for byte in 0..=255u8 {
            for at in 0..8 {
                let mut word = [0x55u8; 8];
                word[at] = byte;
                let got = zero_bytes(u64::from_le_bytes(word));
                let want = if byte == 0 { 0x80u64 << (at * 8) } else { 0 };
                assert_eq!(got, want, "{byte:#x} at {at}");
            }
        }
        assert_eq!(zero_bytes(0), u64::from_ne_bytes([0x80; 8]));
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

    /// What walking the members says `sole` must answer (when it answers).
    fn walked<'a>(text: &'a str, key: &str) -> Vec<&'a str> {
        members(text)
            .expect("an object")
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v)
            .collect()
    }

    fn agrees_with_the_walk(text: &str) -> Sole<'_> {
        let got = sole(text, &Key::new("resultType"));
        let want = walked(text, "resultType");
        match got {
            Sole::Absent => assert!(want.is_empty(), "{text}"),
            Sole::Once(v) => assert_eq!(want, [v], "{text}"),
            Sole::Walk => {}
        }
        got
    }

    #[test]
    fn sole_decides_the_usual_shapes_and_walks_the_rest() {
        use Sole::*;
        for (text, want) in [
            (
                r#"{"content":[],"resultType":"complete"}"#,
                Once(r#""complete""#),
            ),
            (
                " {\n \"a\" : 1 ,\n \"resultType\" : \"x\\\"y\" \n} \n",
                Once(r#""x\"y""#),
            ),
            (r#"{"resultType":{"a":"}"},"b":1}"#, Once(r#"{"a":"}"}"#)),
            (r#"{ "resultType" : 3 }"#, Once("3")),
            (r#"{"content":[{"text":"other"}]}"#, Absent),
            // The key's text as a string value: not decided.
            (r#"{"content":[{"text":"resultType"}]}"#, Walk),
            (r#"{}"#, Absent),
            // Nested, not top-level: first of an inner object, last of one.
            (r#"{"a":{"resultType":"x"}}"#, Walk),
            (r#"{"a":{"b":1,"resultType":"x"}}"#, Walk),
            // In the middle, twice, or with a non-string last value.
            (r#"{"a":1,"resultType":"x","b":2}"#, Walk),
            (r#"{"resultType":"x","resultType":"y"}"#, Walk),
            (r#"{"a":1,"resultType":7}"#, Walk),
            // A longer key ending in an escaped quote and the key.
            (r#"{"a":1,"x\"resultType":"y"}"#, Walk),
            // Another spelling of the key.
            (r#"{"result\u0054ype":"a","resultType":"b"}"#, Walk),
            (r#"{"result\u0054ype":"a"}"#, Walk),
            // The key's text inside a string value, escaped.
            (r#"{"a":"\"resultType\":\"x\""}"#, Absent),
            (r#"{"a":"\\","resultType":"x"}"#, Once(r#""x""#)),
        ] {
            assert_eq!(agrees_with_the_walk(text), want, "{text}");
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

    /// The object of `pairs` as serde_json writes it, compact or pretty.
    fn written(pairs: Vec<(String, Value)>, pretty: bool) -> String {
        let value = Value::Object(pairs.into_iter().collect());
        if pretty {
            serde_json::to_string_pretty(&value).unwrap_or_default()
        } else {
            serde_json::to_string(&value).unwrap_or_default()
        }
    }

    proptest! {
        /// Objects with `resultType` members at any place (top level or
        /// nested): whatever `sole` decides, the walk agrees with.
        #[test]
        fn sole_agrees_with_walking_the_members(
            pairs in prop::collection::vec((prop_oneof![Just("resultType".to_owned()), ".*".prop_map(String::from)], json()), 0..6),
            pretty in any::<bool>(),
        ) {
            agrees_with_the_walk(&written(pairs, pretty));
        }
    }

    proptest! {
        /// Any object serde_json writes (compact or pretty) reads back as the
        /// same members, each value's text parsing to the same value.
        #[test]
        fn agrees_with_serde_json(
            pairs in prop::collection::vec((".*", json()), 0..8),
            pretty in any::<bool>(),
        ) {
            let text = written(pairs, pretty);
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
