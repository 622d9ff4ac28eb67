//! A small incremental `text/event-stream` parser: feed it bytes as they
//! arrive, take complete `data` payloads out. Comments, `id`, `retry` and
//! events of other types (legacy priming events carry no data) are skipped.
//! Bytes come from upstreams Junction does not control, so every buffer is
//! capped and a byte-by-byte sender costs linear, not quadratic, time.

/// Default cap on one partial line or one event's data.
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

#[derive(Debug)]
pub struct SseParser {
    buf: Vec<u8>,
    /// How much of `buf` is known to hold no newline (the next search starts there).
    scanned: usize,
    data: Vec<u8>,
    has_data: bool,
    event_type: Vec<u8>,
    max: usize,
}

impl Default for SseParser {
    fn default() -> Self {
        SseParser::with_limit(MAX_MESSAGE_BYTES)
    }
}

impl SseParser {
    /// A parser that refuses any line or event larger than `max` bytes.
    pub fn with_limit(max: usize) -> Self {
        SseParser {
            buf: Vec::new(),
            scanned: 0,
            data: Vec::new(),
            has_data: false,
            event_type: Vec::new(),
            max,
        }
    }

    /// Feed bytes; returns every event payload completed by them, or why the
    /// stream must be refused (oversized line or event, data not UTF-8).
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<String>, String> {
        self.buf.extend_from_slice(chunk);
        let mut out = Vec::new();
        let mut start = 0;
        let mut from = self.scanned;
        while let Some(pos) = self.buf[from..].iter().position(|&b| b == b'\n') {
            let end = from + pos;
            let mut line_end = end;
            if line_end > start && self.buf[line_end - 1] == b'\r' {
                line_end -= 1;
            }
            let line = std::mem::take(&mut self.buf);
            let event = self.line(&line[start..line_end]);
            self.buf = line;
            if let Some(event) = event? {
                out.push(event);
            }
            start = end + 1;
            from = start;
        }
        self.buf.drain(..start);
        self.scanned = self.buf.len();
        if self.buf.len() > self.max {
            return Err(format!("SSE line exceeds {} bytes", self.max));
        }
        Ok(out)
    }

    /// The end of the stream: an event still open (no blank line after it) is
    /// delivered if complete lines made it up.
    pub fn finish(&mut self) -> Result<Option<String>, String> {
        let rest = std::mem::take(&mut self.buf);
        self.scanned = 0;
        let rest = rest.strip_suffix(b"\r").unwrap_or(&rest);
        if !rest.is_empty() {
            if let Some(e) = self.line(rest)? {
                return Ok(Some(e));
            }
        }
        self.dispatch()
    }

    fn line(&mut self, line: &[u8]) -> Result<Option<String>, String> {
        if line.is_empty() {
            return self.dispatch();
        }
        if line.starts_with(b":") {
            return Ok(None);
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"data" => {
                if self.has_data {
                    self.data.push(b'\n');
                }
                self.data.extend_from_slice(value);
                self.has_data = true;
                if self.data.len() > self.max {
                    return Err(format!("SSE event exceeds {} bytes", self.max));
                }
            }
            b"event" => self.event_type = value.to_vec(),
            _ => {}
        }
        Ok(None)
    }

    fn dispatch(&mut self) -> Result<Option<String>, String> {
        let data = std::mem::take(&mut self.data);
        let has_data = std::mem::take(&mut self.has_data);
        let event_type = std::mem::take(&mut self.event_type);
        let is_message = event_type.is_empty() || event_type == b"message";
        if !has_data || !is_message || data.iter().all(u8::is_ascii_whitespace) {
            return Ok(None);
        }
        String::from_utf8(data)
            .map(Some)
            .map_err(|_| "SSE event is not UTF-8".to_owned())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn events_split_across_chunks() {
        let mut p = SseParser::default();
        assert!(p.push(b"data: {\"a\"").unwrap().is_empty());
        assert!(p.push(b":1}\r\n").unwrap().is_empty());
        assert_eq!(p.push(b"\r\n").unwrap(), vec![r#"{"a":1}"#]);
    }

    #[test]
    fn comments_priming_and_other_events_are_skipped() {
        let mut p = SseParser::default();
        let out = p
            .push(b": keepalive\n\nid: 1\ndata:\n\nevent: endpoint\ndata: /x\n\nevent: message\ndata: a\ndata: b\n\n")
            .unwrap();
        assert_eq!(out, vec!["a\nb"]);
    }

    #[test]
    fn oversized_line_and_event_are_refused() {
        let mut p = SseParser::with_limit(64);
        assert!(p.push(&[b'x'; 65]).is_err());
        let mut p = SseParser::with_limit(64);
        for _ in 0..10 {
            if p.push(b"data: 0123456789\n").is_err() {
                return;
            }
        }
        panic!("an event of many small data lines must hit the cap too");
    }

    #[test]
    fn a_final_event_without_blank_line_is_delivered_at_the_end() {
        let mut p = SseParser::default();
        assert!(p.push(b"data: last\n").unwrap().is_empty());
        assert_eq!(p.finish().unwrap().as_deref(), Some("last"));
    }

    #[test]
    fn byte_by_byte_equals_all_at_once_for_a_large_line() {
        // A slow upstream sending one big event a byte at a time: the scan
        // resumes where it stopped, so this stays linear.
        let mut body = b"data: ".to_vec();
        body.extend(std::iter::repeat_n(b'y', 200_000));
        body.extend_from_slice(b"\n\n");
        let mut p = SseParser::default();
        let mut got = Vec::new();
        for b in &body {
            got.extend(p.push(std::slice::from_ref(b)).unwrap());
        }
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].len(), 200_000);
    }

    proptest! {
        #[test]
        fn any_split_gives_the_same_events(
            events in proptest::collection::vec("[a-z{}\":, ]{0,12}", 0..6),
            cut in proptest::collection::vec(0usize..200, 0..8),
            crlf in any::<bool>(),
        ) {
            let nl = if crlf { "\r\n" } else { "\n" };
            let text: String = events.iter().map(|e| format!(": c{nl}data: {e}{nl}{nl}")).collect();
            let bytes = text.as_bytes();
            let mut whole = SseParser::default();
            let expected = whole.push(bytes).unwrap();
            let mut cuts: Vec<usize> = cut.into_iter().map(|c| c.min(bytes.len())).collect();
            cuts.sort_unstable();
            let mut p = SseParser::default();
            let mut got = Vec::new();
            let mut at = 0;
            for c in cuts.into_iter().chain([bytes.len()]) {
                got.extend(p.push(&bytes[at..c]).unwrap());
                at = c;
            }
            prop_assert_eq!(got, expected);
        }
    }
}
