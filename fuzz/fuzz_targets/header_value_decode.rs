//! `Mcp-Name` / `Mcp-Param-*` values as received: decoding must not panic,
//! and encoding any string must decode back to the same string.
#![no_main]
use junction_protocol::header_value::{decode, encode};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let _ = decode(s);
    let encoded = encode(s);
    assert_eq!(decode(&encoded).as_deref(), Ok(s), "round trip of {s:?} via {encoded:?}");
});
