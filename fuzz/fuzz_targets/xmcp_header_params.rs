//! An upstream's `inputSchema` (bytes -> JSON -> the x-mcp-header walk) and
//! arguments: no panic, and the headers Junction generates from a schema and
//! arguments must pass Junction's own downstream check.
//! Input: `{"schema": …, "arguments": …}`, or any JSON used as both.
#![no_main]
use junction_protocol::xmcp::{check, extract, header_params};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(v) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let (schema, args) = match (v.get("schema"), v.get("arguments")) {
        (Some(s), a) => (s, a),
        (None, _) => (&v, Some(&v)),
    };
    let Ok(params) = header_params(schema) else {
        return;
    };
    let Ok(headers) = extract(&params, args) else {
        return;
    };
    if let Err(why) = check(&params, args, &headers) {
        panic!("generated headers {headers:?} fail the check: {why}");
    }
});
