use super::*;
use proptest::prelude::*;

const NOW: u64 = 1_800_000_000_000;

#[test]
fn round_trip() {
    let s = Sealer::new(b"k");
    let t = s.seal("cursor", b"page-2", NOW + 1000);
    assert!(t
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.'));
    assert_eq!(s.open("cursor", &t, NOW), Ok(b"page-2".to_vec()));
    assert_eq!(s.clone().open("cursor", &t, NOW), Ok(b"page-2".to_vec()));
    let empty = s.seal("p", b"", NOW + 1);
    assert_eq!(s.open("p", &empty, NOW), Ok(Vec::new()));
}

#[test]
fn same_key_opens_across_instances_other_key_does_not() {
    let long_key = [7u8; 100];
    let t = Sealer::new(&long_key).seal("p", b"x", NOW + 1);
    assert_eq!(Sealer::new(&long_key).open("p", &t, NOW), Ok(b"x".to_vec()));
    assert_eq!(
        Sealer::new(b"other").open("p", &t, NOW),
        Err(SealError::BadMac)
    );
    assert_eq!(Sealer::random().open("p", &t, NOW), Err(SealError::BadMac));
}

#[test]
fn matches_standard_hmac() {
    // The infallible key preparation must equal plain HMAC for short and long keys.
    for key in [&b""[..], b"short", &[9u8; 64], &[3u8; 65], &[1u8; 200]] {
        let t = Sealer::new(key).seal("p", b"data", 5);
        let (body, tag) = t.split_once('.').expect("dot");
        let body = URL_SAFE_NO_PAD.decode(body).expect("b64");
        let mut mac = <HmacSha256 as Mac>::new_from_slice(key).expect("any key length");
        mac.update(&1u32.to_be_bytes());
        mac.update(b"p");
        mac.update(&body);
        assert_eq!(URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes()), tag);
    }
}

#[test]
fn wrong_purpose_is_rejected() {
    let s = Sealer::new(b"k");
    let t = s.seal("cursor", b"x", NOW + 1000);
    assert_eq!(s.open("session", &t, NOW), Err(SealError::BadMac));
    assert_eq!(s.open("cursor ", &t, NOW), Err(SealError::BadMac));
}

#[test]
fn expiry() {
    let s = Sealer::new(b"k");
    let t = s.seal("p", b"x", NOW);
    assert_eq!(s.open("p", &t, NOW - 1), Ok(b"x".to_vec()));
    assert_eq!(s.open("p", &t, NOW), Err(SealError::Expired));
    assert_eq!(s.open("p", &t, NOW + 1), Err(SealError::Expired));
}

#[test]
fn malformed_tokens() {
    let s = Sealer::new(b"k");
    for t in ["", ".", "abc", "abc.", "!!!.AAAA", "AAAA.!!!", "AA.AA"] {
        let r = s.open("p", t, NOW);
        assert!(
            matches!(r, Err(SealError::Malformed | SealError::BadMac)),
            "{t:?}: {r:?}"
        );
    }
    assert_eq!(s.open("p", "nodot", NOW), Err(SealError::Malformed));
    // A validly signed body with an unknown format version is malformed.
    let mut body = vec![2u8];
    body.extend_from_slice(&u64::MAX.to_be_bytes());
    let tag = s.keyed("p", &body).finalize().into_bytes();
    let t = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(&body),
        URL_SAFE_NO_PAD.encode(tag)
    );
    assert_eq!(s.open("p", &t, NOW), Err(SealError::Malformed));
}

#[test]
fn debug_does_not_leak_key() {
    assert_eq!(format!("{:?}", Sealer::new(b"secret")), "Sealer { .. }");
}

#[test]
fn now_is_after_2020() {
    assert!(now_ms() > 1_577_836_800_000);
}

const B64URL: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.";

proptest! {
    #[test]
    fn any_payload_round_trips(payload in proptest::collection::vec(any::<u8>(), 0..200), purpose in ".{0,20}") {
        let s = Sealer::new(b"key");
        let t = s.seal(&purpose, &payload, NOW + 1);
        prop_assert_eq!(s.open(&purpose, &t, NOW), Ok(payload));
    }

    #[test]
    fn any_changed_character_is_rejected(
        payload in proptest::collection::vec(any::<u8>(), 0..64),
        pos in any::<proptest::sample::Index>(),
        with in any::<proptest::sample::Index>(),
    ) {
        let s = Sealer::new(b"key");
        let t = s.seal("p", &payload, NOW + 1);
        let mut bytes = t.clone().into_bytes();
        let i = pos.index(bytes.len());
        let mut c = B64URL[with.index(B64URL.len())];
        if c == bytes[i] {
            c = if c == b'A' { b'B' } else { b'A' };
        }
        bytes[i] = c;
        let tampered = String::from_utf8(bytes).expect("ascii");
        prop_assert!(s.open("p", &tampered, NOW).is_err(), "{} -> {}", t, tampered);
    }

    #[test]
    fn truncation_is_rejected(payload in proptest::collection::vec(any::<u8>(), 0..64), cut in any::<proptest::sample::Index>()) {
        let s = Sealer::new(b"key");
        let t = s.seal("p", &payload, NOW + 1);
        let n = cut.index(t.len());
        prop_assert!(s.open("p", &t[..n], NOW).is_err());
    }

    #[test]
    fn open_never_panics(t in ".{0,120}") {
        let _ = Sealer::new(b"key").open("p", &t, NOW);
    }
}
