use super::*;
use proptest::prelude::*;
use serde_json::json;

#[test]
fn plain_values_stay_plain() {
    for s in [
        "eu-1",
        "true",
        "42",
        "a b\tc",
        "crm.lookup",
        "~!@#$%^&*()",
        "=?base64",
        "",
    ] {
        assert!(is_plain_safe(s), "{s:?}");
        assert_eq!(encode(s), s);
        assert_eq!(decode(s).as_deref(), Ok(s));
    }
}

#[test]
fn unsafe_values_are_encoded() {
    assert_eq!(encode("Zürich"), "=?base64?WsO8cmljaA==?=");
    for s in [
        " lead", "trail ", "\tx", "a\r\nb", "nul\0", "del\x7f", "日本",
    ] {
        assert!(!is_plain_safe(s), "{s:?}");
        assert!(encode(s).starts_with("=?base64?"), "{s:?}");
    }
}

#[test]
fn sentinel_lookalikes_are_encoded() {
    for s in [
        "=?base64?aGk=?=",
        "=?base64??=",
        "=?BASE64?aGk=?=",
        "=?base64?notclosed",
    ] {
        assert!(!is_plain_safe(s), "{s:?}");
        let e = encode(s);
        assert_ne!(e, s);
        assert_eq!(decode(&e).as_deref(), Ok(s));
    }
}

#[test]
fn decode_rejects_bad_values() {
    assert_eq!(
        decode("a\r\nb"),
        Err(HeaderValueError::InvalidCharacter { at: 1 })
    );
    assert_eq!(
        decode("a\nb"),
        Err(HeaderValueError::InvalidCharacter { at: 1 })
    );
    assert_eq!(
        decode("\x01"),
        Err(HeaderValueError::InvalidCharacter { at: 0 })
    );
    assert!(matches!(
        decode("Zürich"),
        Err(HeaderValueError::InvalidCharacter { at: 1 })
    ));
    assert_eq!(decode("=?base64?***?="), Err(HeaderValueError::BadBase64));
    // 0xff 0xfe is not UTF-8
    assert_eq!(decode("=?base64?//4=?="), Err(HeaderValueError::NotUtf8));
    // unpadded base64 from a lenient peer is accepted
    assert_eq!(decode("=?base64?WsO8cmljaA?=").as_deref(), Ok("Zürich"));
    // a decoded sentinel may carry anything, CR/LF included
    assert_eq!(decode(&encode("a\r\nb")).as_deref(), Ok("a\r\nb"));
}

#[test]
fn stringify_primitives() {
    assert_eq!(stringify(&json!("x")), Ok(Some("x".into())));
    assert_eq!(stringify(&json!(42)), Ok(Some("42".into())));
    assert_eq!(stringify(&json!(-7)), Ok(Some("-7".into())));
    assert_eq!(stringify(&json!(42.0)), Ok(Some("42".into())));
    assert_eq!(stringify(&json!(u64::MAX)), Ok(Some(u64::MAX.to_string())));
    assert_eq!(stringify(&json!(false)), Ok(Some("false".into())));
    assert_eq!(stringify(&json!(null)), Ok(None));
    assert!(stringify(&json!(1.5)).is_err());
    assert!(stringify(&json!([1])).is_err());
    assert!(stringify(&json!({"a":1})).is_err());
}

#[test]
fn matches_compares_by_type() {
    assert!(matches("eu-1", &json!("eu-1")));
    assert!(!matches("EU-1", &json!("eu-1")));
    assert!(matches("true", &json!(true)));
    assert!(!matches("True", &json!(true)));
    assert!(!matches("1", &json!(true)));
    assert!(matches("false", &json!(false)));
    assert!(matches("42", &json!(42)));
    assert!(matches("42", &json!(42.0)));
    assert!(matches("42.0", &json!(42)));
    assert!(
        matches("042", &json!(42)),
        "leading zeros compare numerically"
    );
    assert!(matches("-5", &json!(-5)));
    assert!(!matches("43", &json!(42)));
    assert!(!matches("+42", &json!(42)));
    assert!(!matches("42abc", &json!(42)));
    assert!(!matches("1.5", &json!(1.5)), "non-integers never match");
    assert!(!matches("", &json!(null)));
    assert!(!matches("[]", &json!([])));
}

proptest! {
    #[test]
    fn encode_decode_round_trip(s in any::<String>()) {
        let e = encode(&s);
        prop_assert!(e.bytes().all(|b| (0x20..=0x7e).contains(&b) || b == b'\t'));
        prop_assert!(is_plain_safe(&e) || e.starts_with("=?base64?"));
        prop_assert_eq!(decode(&e).map(|d| d.into_owned()), Ok(s));
    }

    #[test]
    fn ascii_round_trip(s in "[ -~\t]{0,40}") {
        prop_assert_eq!(decode(&encode(&s)).map(|d| d.into_owned()), Ok(s));
    }

    #[test]
    fn decode_never_panics(s in any::<String>()) {
        let _ = decode(&s);
    }

    #[test]
    fn integers_match_their_decimal(n in any::<i64>()) {
        prop_assert!(matches(&n.to_string(), &json!(n)));
        prop_assert!(!matches(&n.wrapping_add(1).to_string(), &json!(n)));
    }
}
