//! A small incremental `text/event-stream` parser: feed it bytes as they
//! arrive, take complete `data` payloads out. Comments, `id`, `retry` and
//! events of other types (legacy priming events carry no data) are skipped.

/// Cap on one partial line or one event's data; beyond it the stream is refused.
pub(crate) const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

#[derive(Default)]
pub(crate) struct SseParser {
    buf: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
    event_type: Vec<u8>,
}

impl SseParser {
    /// Feed bytes; returns every event payload completed by them.
    pub(crate) fn push(&mut self, chunk: &[u8]) -> Result<Vec<String>, String> {
        self.buf.extend_from_slice(chunk);
        let mut out = Vec::new();
        let mut start = 0;
        while let Some(pos) = self.buf[start..].iter().position(|&b| b == b'\n') {
            let end = start + pos;
            let mut line = &self.buf[start..end];
            if let Some(stripped) = line.strip_suffix(b"\r") {
                line = stripped;
            }
            let line = line.to_vec();
            start = end + 1;
            if let Some(event) = self.line(&line)? {
                out.push(event);
            }
        }
        self.buf.drain(..start);
        if self.buf.len() > MAX_MESSAGE_BYTES {
            return Err("SSE line exceeds 16 MiB".to_owned());
        }
        Ok(out)
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
                if self.data.len() > MAX_MESSAGE_BYTES {
                    return Err("SSE event exceeds 16 MiB".to_owned());
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
mod tests {
    use super::*;

    #[test]
    fn events_split_across_chunks() {
        let mut p = SseParser::default();
        assert!(p.push(b"data: {\"a\"").unwrap_or_default().is_empty());
        assert!(p.push(b":1}\r\n").unwrap_or_default().is_empty());
        assert_eq!(p.push(b"\r\n").unwrap_or_default(), vec![r#"{"a":1}"#]);
    }

    #[test]
    fn comments_priming_and_other_events_are_skipped() {
        let mut p = SseParser::default();
        let out = p
            .push(b": keepalive\n\nid: 1\ndata:\n\nevent: endpoint\ndata: /x\n\nevent: message\ndata: a\ndata: b\n\n")
            .unwrap_or_default();
        assert_eq!(out, vec!["a\nb"]);
    }

    #[test]
    fn oversized_line_is_refused() {
        let mut p = SseParser::default();
        let big = vec![b'x'; MAX_MESSAGE_BYTES + 1];
        assert!(p.push(&big).is_err());
    }
}
