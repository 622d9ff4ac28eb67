//! Micro-benches of the per-request protocol work: decoding a typical
//! `tools/call`, encoding its response envelope, the header value codec and
//! sealed tokens (requestState-like envelope). `baseline/*` entries are what a
//! naive implementation would do in the same run; BENCHMARKS.md reports every
//! figure as a ratio against `baseline/value_parse_tools_call`.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use junction_protocol::jsonrpc::{parse_client_message, result_bytes, Id};
use junction_protocol::seal::{now_ms, Sealer};
use junction_protocol::{header_value, object};
use serde_json::value::RawValue;

#[path = "common/mod.rs"]
mod common;

/// What an agent sends: a prefixed tool name, a few arguments, the modern `_meta`.
const TOOLS_CALL: &[u8] = br#"{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"weather__get_forecast","arguments":{"city":"Berlin","days":3,"units":"metric","include":["wind","rain"]},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{},"sampling":{}},"progressToken":"p-42"}}}"#;

/// A typical small tool result.
const CALL_RESULT: &str = r#"{"content":[{"type":"text","text":"Berlin: 3 days, 12-18 C, light rain on day 2, wind 15 km/h from the west."}],"structuredContent":{"city":"Berlin","days":[{"min":12,"max":17},{"min":13,"max":18},{"min":12,"max":16}]},"isError":false,"resultType":"complete"}"#;

const PURPOSE: &str = "junction/request-state/v1";

/// A tool result of about 64 KiB: one long text (a file, a page of search
/// hits) with the escapes such text has, then `resultType`.
fn large_result() -> String {
    let line = r#"line of a source file: \"quoted\", a tab\t and a path C:\\src\\lib.rs\n"#;
    let text = line.repeat(64 * 1024 / line.len());
    format!(
        r#"{{"content":[{{"type":"text","text":"{text}"}}],"isError":false,"resultType":"complete"}}"#
    )
}

/// What `Finisher::result` did before `object::members`: parse the whole
/// result again with serde_json, keeping only `resultType`.
#[derive(serde::Deserialize)]
struct ResultHead<'a> {
    #[serde(rename = "resultType", borrow, default)]
    result_type: Option<std::borrow::Cow<'a, str>>,
}

fn result_type(text: &str) -> Option<std::borrow::Cow<'_, str>> {
    object::members(text)?
        .filter(|(k, _)| k == "resultType")
        .last()
        .and_then(|(_, v)| object::string(v))
}

/// The shape of Junction's requestState envelope payload (principal digest,
/// upstream, exposed tool, upstream state as raw JSON text).
fn request_state_payload() -> Vec<u8> {
    let upstream_state =
        r#"{"step":2,"pending":"confirm_booking","nonce":"8f14e45fceea167a5a36dedd4bea2543"}"#;
    serde_json::to_vec(&serde_json::json!({
        "p": "3f79bb7b435b05321651daefd374cdc681dc06faa65e374e38337b88ca046dea",
        "u": "travel",
        "t": "travel__book_flight",
        "s": upstream_state,
    }))
    .unwrap_or_default()
}

fn benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("protocol");

    g.bench_function("baseline/value_parse_tools_call", |b| {
        b.iter(|| serde_json::from_slice::<serde_json::Value>(black_box(TOOLS_CALL)))
    });
    g.bench_function("decode_tools_call", |b| {
        b.iter(|| parse_client_message(black_box(TOOLS_CALL)))
    });

    let result: Box<RawValue> =
        RawValue::from_string(CALL_RESULT.to_owned()).unwrap_or_else(|_| Box::default());
    let result_value: serde_json::Value =
        serde_json::from_str(CALL_RESULT).unwrap_or(serde_json::Value::Null);
    let id = Id::from(42);
    g.bench_function("baseline/value_encode_result", |b| {
        b.iter(|| {
            serde_json::to_vec(&serde_json::json!({
                "jsonrpc": "2.0", "id": 42, "result": black_box(&result_value)
            }))
        })
    });
    g.bench_function("encode_result", |b| {
        b.iter(|| result_bytes(black_box(&id), black_box(&result)))
    });

    // Reading resultType from a result the answer's parse has validated.
    let large = large_result();
    for (label, text) in [("small", CALL_RESULT), ("64k", large.as_str())] {
        assert_eq!(result_type(text).as_deref(), Some("complete"));
        g.bench_function(format!("baseline/serde_result_type_{label}"), |b| {
            b.iter(|| {
                serde_json::from_str::<ResultHead<'_>>(black_box(text))
                    .map(|h| h.result_type.is_some())
            })
        });
        g.bench_function(format!("result_type_{label}"), |b| {
            b.iter(|| result_type(black_box(text)))
        });
    }

    let plain = "get_forecast";
    let unicode = "Zürich, 北京 — ☂";
    let plain_enc = header_value::encode(plain);
    let unicode_enc = header_value::encode(unicode);
    g.bench_function("header_encode_plain", |b| {
        b.iter(|| header_value::encode(black_box(plain)))
    });
    g.bench_function("header_encode_base64", |b| {
        b.iter(|| header_value::encode(black_box(unicode)))
    });
    g.bench_function("header_decode_plain", |b| {
        b.iter(|| header_value::decode(black_box(&plain_enc)))
    });
    g.bench_function("header_decode_base64", |b| {
        b.iter(|| header_value::decode(black_box(&unicode_enc)))
    });

    let sealer = Sealer::new(b"0123456789abcdef0123456789abcdef");
    let payload = request_state_payload();
    let expires = now_ms() + 600_000;
    let token = sealer.seal(PURPOSE, &payload, expires);
    g.bench_function("request_state_seal", |b| {
        b.iter(|| sealer.seal(black_box(PURPOSE), black_box(&payload), expires))
    });
    g.bench_function("request_state_open", |b| {
        b.iter(|| {
            let bytes = sealer.open(black_box(PURPOSE), black_box(&token), now_ms());
            bytes.map(|b| serde_json::from_slice::<serde_json::Value>(&b).is_ok())
        })
    });
    g.finish();
}

criterion_group! { name = protocol; config = common::short_runs(50); targets = benches }
criterion_main!(protocol);
