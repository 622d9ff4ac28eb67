//! Sealed tokens come back from clients (session ids, cursors, requestState
//! envelopes): opening arbitrary text must fail cleanly, never panic, and a
//! token only opens under the key and purpose it was sealed with.
#![no_main]
use junction_catalog::cursor;
use junction_protocol::seal::{now_ms, Sealer};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let sealer = Sealer::new(b"fuzz-key-fuzz-key-fuzz-key-fuzz-key!");
    let token = String::from_utf8_lossy(data);
    let _ = sealer.open("junction/request-state/v1", &token, now_ms());
    let _ = cursor::decode(&sealer, &token, 7);

    // Whatever the payload, a fresh token opens once, under its own purpose only.
    let sealed = sealer.seal("fuzz/a", data, u64::MAX);
    assert_eq!(sealer.open("fuzz/a", &sealed, now_ms()).ok().as_deref(), Some(data));
    assert!(sealer.open("fuzz/b", &sealed, now_ms()).is_err());
    let other = Sealer::new(b"another-key-another-key-another-key!");
    assert!(other.open("fuzz/a", &sealed, now_ms()).is_err());
});
