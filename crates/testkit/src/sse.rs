//! Server-sent events: writing them in the mocks, reading them in the client
//! (`SseParser` for POST answers, `GetStream` for GET streams).
//! Only `data:` fields matter for MCP; comments (`:`) and priming events with
//! empty data are skipped.

use bytes::Bytes;
use serde_json::Value;

/// One SSE event carrying a JSON-RPC message.
pub fn event(msg: &Value) -> Bytes {
    Bytes::from(format!("event: message\ndata: {msg}\n\n"))
}

/// Incremental parser: feed chunks, get the `data` payload of each complete event.
#[derive(Default, Debug)]
pub struct SseParser {
    buf: String,
    data: Vec<String>,
}

impl SseParser {
    pub fn push(&mut self, chunk: &[u8]) -> Vec<String> {
        self.buf.push_str(&String::from_utf8_lossy(chunk));
        let mut out = Vec::new();
        while let Some(pos) = self.buf.find('\n') {
            let line: String = self.buf.drain(..=pos).collect();
            let line = line.trim_end_matches(['\n', '\r']);
            if line.is_empty() {
                // Priming events (id only, empty data) carry no message.
                let data = std::mem::take(&mut self.data).join("\n");
                if !data.is_empty() {
                    out.push(data);
                }
            } else if let Some(rest) = line.strip_prefix("data:") {
                self.data
                    .push(rest.strip_prefix(' ').unwrap_or(rest).to_string());
            }
            // `event:`, `id:`, `retry:` and `:` comments carry nothing we need.
        }
        out
    }

    /// Flush an event left unterminated at end of stream.
    pub fn finish(&mut self) -> Option<String> {
        if !self.buf.is_empty() {
            let rest = std::mem::take(&mut self.buf);
            self.push(rest.as_bytes());
            self.push(b"\n");
        }
        if self.data.is_empty() {
            None
        } else {
            Some(std::mem::take(&mut self.data).join("\n"))
        }
    }
}

/// Every JSON message in a complete SSE body, in order. Non-JSON data is kept
/// as a JSON string so a test can see what arrived.
pub fn parse_all(body: &[u8]) -> Vec<Value> {
    let mut p = SseParser::default();
    let mut datas = p.push(body);
    datas.extend(p.finish());
    datas
        .into_iter()
        .filter(|d| !d.trim().is_empty())
        .map(|d| serde_json::from_str(&d).unwrap_or(Value::String(d)))
        .collect()
}

/// A GET stream (a handshake-era session's, or any SSE answer to a GET), read
/// message by message.
pub struct GetStream {
    pub status: u16,
    /// The response's headers (a load balancer's marker, say).
    pub headers: http::HeaderMap,
    pub body: Option<hyper::body::Incoming>,
    parser: SseParser,
    queue: std::collections::VecDeque<Value>,
}

impl GetStream {
    /// GET `url` with `Accept: text/event-stream` and `headers`; panics when
    /// no answer comes within `wait`.
    pub async fn open(url: &str, headers: &[(&str, &str)], wait: std::time::Duration) -> GetStream {
        use http_body_util::Empty;
        let client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build_http::<Empty<Bytes>>();
        let mut b = hyper::Request::builder()
            .method("GET")
            .uri(url)
            .header("accept", "text/event-stream");
        for (n, v) in headers {
            b = b.header(*n, *v);
        }
        let request = b.body(Empty::new()).expect("a valid GET request");
        let resp = tokio::time::timeout(wait, client.request(request))
            .await
            .expect("the GET was answered in time")
            .expect("the GET reached the server");
        let (parts, body) = resp.into_parts();
        GetStream {
            status: parts.status.as_u16(),
            headers: parts.headers,
            body: Some(body),
            parser: SseParser::default(),
            queue: Default::default(),
        }
    }

    /// The next message, or `None` once the stream ended or `wait` passed.
    pub async fn next(&mut self, wait: std::time::Duration) -> Option<Value> {
        use http_body_util::BodyExt;
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if let Some(m) = self.queue.pop_front() {
                return Some(m);
            }
            let body = self.body.as_mut()?;
            match tokio::time::timeout_at(deadline, body.frame()).await.ok()? {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        for d in self.parser.push(&data) {
                            if let Ok(v) = serde_json::from_str(&d) {
                                self.queue.push_back(v);
                            }
                        }
                    }
                }
                _ => self.body = None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_split_chunks_comments_and_priming() {
        let mut p = SseParser::default();
        assert!(p
            .push(b"id: 0\ndata:\n\n: keep-alive\n\nevent: message\ndata: {\"a\"")
            .is_empty());
        assert_eq!(
            p.push(b":1}\r\n\r\ndata: 2\n\n"),
            vec!["{\"a\":1}".to_string(), "2".to_string()]
        );
        assert_eq!(parse_all(&event(&json!({"x": 1}))), vec![json!({"x": 1})]);
        assert_eq!(parse_all(b"data: {\"y\":2}"), vec![json!({"y": 2})]);
    }
}
