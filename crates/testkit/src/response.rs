//! What the test client hands back: complete responses and open streams.

use crate::sse;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde_json::Value;
use std::collections::VecDeque;
use std::time::Duration;

/// A complete HTTP response, with the JSON-RPC messages it carried.
#[derive(Clone, Debug)]
pub struct TestResponse {
    pub status: u16,
    /// Lower-cased names.
    pub headers: Vec<(String, String)>,
    /// The final JSON-RPC message: for SSE the last response (result/error);
    /// `Null` for an empty or non-JSON body.
    pub body: Value,
    /// Every JSON-RPC message in order (SSE), or `[body]` (JSON, if non-null).
    pub events: Vec<Value>,
    pub raw: Vec<u8>,
}

impl TestResponse {
    pub(crate) fn new(status: u16, headers: Vec<(String, String)>, raw: Vec<u8>) -> Self {
        let is_sse = headers
            .iter()
            .any(|(n, v)| n == "content-type" && v.starts_with("text/event-stream"));
        let (body, events) = if is_sse {
            let events = sse::parse_all(&raw);
            let last = events
                .iter()
                .rev()
                .find(|m| m.get("result").is_some() || m.get("error").is_some())
                .or_else(|| events.iter().rev().find(|m| m.get("id").is_some()))
                .cloned()
                .unwrap_or(Value::Null);
            (last, events)
        } else {
            let body: Value = serde_json::from_slice(&raw).unwrap_or(Value::Null);
            let events = if body.is_null() {
                Vec::new()
            } else {
                vec![body.clone()]
            };
            (body, events)
        };
        TestResponse {
            status,
            headers,
            body,
            events,
            raw,
        }
    }

    /// `body.result` (`Null` if absent), for indexing: `resp.result()["tools"]`.
    pub fn result(&self) -> &Value {
        &self.body["result"]
    }

    pub fn error_code(&self) -> Option<i64> {
        self.body.pointer("/error/code").and_then(Value::as_i64)
    }

    pub fn error(&self) -> Option<&Value> {
        self.body.get("error")
    }

    /// First value of a header (name case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn is_sse(&self) -> bool {
        self.header("content-type")
            .is_some_and(|v| v.starts_with("text/event-stream"))
    }

    /// Messages without an id (progress, log messages, ...), in order.
    pub fn notifications(&self) -> Vec<&Value> {
        self.events
            .iter()
            .filter(|m| m.get("id").is_none())
            .collect()
    }

    /// The raw body as text, for failure messages.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.raw).into_owned()
    }
}

/// An open response read message by message.
pub struct TestStream {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    body: Incoming,
    is_sse: bool,
    parser: sse::SseParser,
    queue: VecDeque<Value>,
    done: bool,
    buffered: Vec<u8>,
}

impl TestStream {
    pub(crate) fn new(
        status: u16,
        headers: Vec<(String, String)>,
        body: Incoming,
        is_sse: bool,
    ) -> Self {
        TestStream {
            status,
            headers,
            body,
            is_sse,
            parser: sse::SseParser::default(),
            queue: VecDeque::new(),
            done: false,
            buffered: Vec::new(),
        }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Whether the server ended the response (as opposed to `next` giving up waiting).
    pub fn ended(&self) -> bool {
        self.done && self.queue.is_empty()
    }

    /// The next JSON-RPC message, or None when the stream ended or nothing came
    /// within `wait`.
    pub async fn next(&mut self, wait: Duration) -> Option<Value> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if let Some(m) = self.queue.pop_front() {
                return Some(m);
            }
            if self.done {
                return None;
            }
            let frame = tokio::time::timeout_at(deadline, self.body.frame())
                .await
                .ok()?;
            match frame {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.absorb(&data);
                    }
                }
                Some(Err(_)) | None => {
                    self.done = true;
                    self.flush();
                }
            }
        }
    }

    fn absorb(&mut self, data: &[u8]) {
        if self.is_sse {
            for d in self.parser.push(data) {
                self.enqueue(d);
            }
        } else {
            self.buffered.extend_from_slice(data);
        }
    }

    fn flush(&mut self) {
        if self.is_sse {
            if let Some(d) = self.parser.finish() {
                self.enqueue(d);
            }
        } else if let Ok(v) = serde_json::from_slice::<Value>(&self.buffered) {
            self.queue.push_back(v);
        }
    }

    fn enqueue(&mut self, data: String) {
        if !data.trim().is_empty() {
            self.queue
                .push_back(serde_json::from_str(&data).unwrap_or(Value::String(data)));
        }
    }

    /// Read until the response (result/error) arrives; returns every message.
    pub async fn collect(mut self, wait: Duration) -> Vec<Value> {
        let mut out = Vec::new();
        while let Some(m) = self.next(wait).await {
            let last = m.get("result").is_some() || m.get("error").is_some();
            out.push(m);
            if last {
                break;
            }
        }
        out
    }
}

/// The `inputResponses` that accept every request of an `InputRequiredResult`
/// (`result` is the result object) with `content`.
pub fn accept_all(result: &Value, content: Value) -> Value {
    let keys = result["inputRequests"]
        .as_object()
        .into_iter()
        .flat_map(|m| m.keys());
    Value::Object(
        keys.map(|k| {
            (
                k.clone(),
                serde_json::json!({"action": "accept", "content": content.clone()}),
            )
        })
        .collect(),
    )
}
