//! Any bytes an upstream can send as an SSE stream, cut into chunks at
//! fuzzer-chosen points: the parser never panics, never returns an event over
//! its cap, and a refused stream is refused however the bytes were split.
#![no_main]
use junction_protocol::sse::SseParser;
use libfuzzer_sys::fuzz_target;

const CAP: usize = 4096;

fuzz_target!(|data: &[u8]| {
    // The first byte picks the chunk size (1..=64), the rest is the stream.
    let Some((&size, stream)) = data.split_first() else {
        return;
    };
    let size = usize::from(size % 64) + 1;
    let mut whole = SseParser::with_limit(CAP);
    let all_at_once = whole.push(stream);
    let mut p = SseParser::with_limit(CAP);
    let mut events = Vec::new();
    let mut refused = false;
    for chunk in stream.chunks(size) {
        match p.push(chunk) {
            Ok(e) => events.extend(e),
            Err(_) => {
                refused = true;
                break;
            }
        }
    }
    for e in &events {
        assert!(e.len() <= CAP, "an event over the cap was delivered");
    }
    if let (Ok(expected), false) = (&all_at_once, refused) {
        assert_eq!(&events, expected, "chunking changed the events");
    }
});
