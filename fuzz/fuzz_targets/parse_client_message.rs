//! Any bytes a client can POST: parsing must answer Ok or a JSON-RPC error,
//! never panic, and whatever it accepts must carry a usable method.
#![no_main]
use junction_protocol::jsonrpc::{parse_client_message, ClientMessage};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match parse_client_message(data) {
        Ok(msg) => {
            assert!(!msg.method().is_empty());
            if let ClientMessage::Request { .. } = &msg {
                assert!(msg.id().is_some());
            }
        }
        Err(e) => assert!(e.code == -32700 || e.code == -32600, "code {}", e.code),
    }
});
