//! The SSE parser lives in junction-protocol (no I/O, fuzzed there).

pub(crate) use junction_protocol::sse::{SseParser, MAX_MESSAGE_BYTES};
