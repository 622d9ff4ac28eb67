//! A JSON-RPC test client over HTTP for both eras. It builds correct requests
//! by default and lets a test override or break any part of them.
//! Transport failures panic: in a test they are the failure worth seeing.

pub use crate::response::{TestResponse, TestStream};
use crate::{codec, MODERN};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Map, Value};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Upper bound for one exchange, so a hung server fails the test instead of hanging it.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(60);

pub struct TestClient {
    url: String,
    http: Client<HttpConnector, Full<Bytes>>,
    next_id: AtomicI64,
    /// None = modern; Some(v) = handshake era asking for version v.
    legacy_version: Option<String>,
    capabilities: Mutex<Value>,
    session: Mutex<Option<String>>,
    default_headers: Vec<(String, String)>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Replace headers of the same name (case-insensitive), append the rest.
fn merge_headers(base: &mut Vec<(String, String)>, extra: Vec<(String, String)>) {
    for (name, value) in extra {
        let lower = name.to_ascii_lowercase();
        base.retain(|(n, _)| n.to_ascii_lowercase() != lower);
        base.push((lower, value));
    }
}

impl TestClient {
    fn new(url: &str, legacy_version: Option<String>) -> Self {
        TestClient {
            url: url.to_string(),
            http: Client::builder(TokioExecutor::new()).build_http(),
            next_id: AtomicI64::new(1),
            legacy_version,
            capabilities: Mutex::new(json!({})),
            session: Mutex::new(None),
            default_headers: Vec::new(),
        }
    }

    /// A 2026-07-28 client: `_meta` and headers on every request.
    pub fn modern(url: &str) -> Self {
        Self::new(url, None)
    }

    /// A handshake-era client asking for `version` in `initialize`.
    pub fn legacy(url: &str, version: &str) -> Self {
        Self::new(url, Some(version.to_string()))
    }

    /// Client capabilities (modern: per request in `_meta`; legacy: in `initialize`).
    pub fn with_capabilities(self, caps: Value) -> Self {
        self.set_capabilities(caps);
        self
    }

    pub fn set_capabilities(&self, caps: Value) {
        *lock(&self.capabilities) = caps;
    }

    /// A header sent on every request (e.g. `authorization`).
    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        merge_headers(
            &mut self.default_headers,
            vec![(name.to_string(), value.to_string())],
        );
        self
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn session_id(&self) -> Option<String> {
        lock(&self.session).clone()
    }

    pub fn set_session_id(&self, sid: Option<String>) {
        *lock(&self.session) = sid;
    }

    pub fn next_id(&self) -> i64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// The JSON-RPC request `request()` would send (fresh id; modern: `_meta`
    /// added, keeping any keys the test already put there).
    pub fn envelope(&self, method: &str, params: Value) -> Value {
        let mut params = match params {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        if self.legacy_version.is_none() {
            let meta = params.entry("_meta").or_insert_with(|| json!({}));
            if let Some(meta) = meta.as_object_mut() {
                meta.entry("io.modelcontextprotocol/protocolVersion")
                    .or_insert_with(|| json!(MODERN));
                meta.entry("io.modelcontextprotocol/clientCapabilities")
                    .or_insert_with(|| lock(&self.capabilities).clone());
                meta.entry("io.modelcontextprotocol/clientInfo")
                    .or_insert_with(|| json!({"name": "junction-testkit", "version": env!("CARGO_PKG_VERSION")}));
            }
        }
        json!({"jsonrpc": "2.0", "id": self.next_id(), "method": method, "params": params})
    }

    /// The standard headers for a body: Accept, Content-Type and, modern,
    /// MCP-Protocol-Version / Mcp-Method / Mcp-Name; legacy, the session id and
    /// MCP-Protocol-Version (2025-06-18 and later, after initialize).
    /// `Mcp-Param-*` is never computed: pass it to `send`/`request_with_headers`.
    pub fn headers_for(&self, body: &Value) -> Vec<(String, String)> {
        let mut h = vec![
            ("content-type".to_string(), "application/json".to_string()),
            (
                "accept".to_string(),
                "application/json, text/event-stream".to_string(),
            ),
        ];
        let method = body.get("method").and_then(Value::as_str);
        match &self.legacy_version {
            None => {
                let version = body
                    .pointer("/params/_meta/io.modelcontextprotocol~1protocolVersion")
                    .and_then(Value::as_str)
                    .unwrap_or(MODERN);
                h.push(("mcp-protocol-version".into(), version.into()));
                if let Some(method) = method {
                    h.push(("mcp-method".into(), method.into()));
                    let name = match method {
                        "tools/call" | "prompts/get" => body.pointer("/params/name"),
                        "resources/read" => body.pointer("/params/uri"),
                        "tasks/get" | "tasks/update" | "tasks/cancel" => {
                            body.pointer("/params/taskId")
                        }
                        _ => None,
                    };
                    if let Some(name) = name.and_then(Value::as_str) {
                        h.push(("mcp-name".into(), codec::encode(name)));
                    }
                }
            }
            Some(version) => {
                if let Some(sid) = self.session_id() {
                    h.push(("mcp-session-id".into(), sid));
                }
                if method != Some("initialize") && version.as_str() >= "2025-06-18" {
                    h.push(("mcp-protocol-version".into(), version.clone()));
                }
            }
        }
        merge_headers(&mut h, self.default_headers.clone());
        h
    }

    /// POST `body` with the standard headers plus `extra` (same-name headers in
    /// `extra` replace the standard ones, which is how mismatch tests are built).
    pub async fn send(&self, body: &Value, extra: Vec<(String, String)>) -> TestResponse {
        let mut headers = self.headers_for(body);
        merge_headers(&mut headers, extra);
        self.raw("POST", headers, body.to_string().into_bytes())
            .await
    }

    pub async fn request(&self, method: &str, params: Value) -> TestResponse {
        self.send(&self.envelope(method, params), Vec::new()).await
    }

    pub async fn request_with_headers(
        &self,
        method: &str,
        params: Value,
        extra: Vec<(String, String)>,
    ) -> TestResponse {
        self.send(&self.envelope(method, params), extra).await
    }

    /// `tools/call` with these arguments.
    pub async fn call_tool(&self, name: &str, arguments: Value) -> TestResponse {
        self.request("tools/call", json!({"name": name, "arguments": arguments}))
            .await
    }

    /// Legacy: `initialize`, remember the `Mcp-Session-Id`, then send
    /// `notifications/initialized`. Returns the initialize response.
    pub async fn initialize(&self) -> TestResponse {
        let version = self
            .legacy_version
            .clone()
            .unwrap_or_else(|| "2025-11-25".to_string());
        let params = json!({"protocolVersion": version, "capabilities": lock(&self.capabilities).clone(),
                            "clientInfo": {"name": "junction-testkit", "version": env!("CARGO_PKG_VERSION")}});
        let resp = self.request("initialize", params).await;
        if let Some(sid) = resp.header("mcp-session-id") {
            self.set_session_id(Some(sid.to_string()));
        }
        if resp.status == 200 && resp.error_code().is_none() {
            self.notify("notifications/initialized", json!({})).await;
        }
        resp
    }

    /// A notification (no id) with the standard headers.
    pub async fn notify(&self, method: &str, params: Value) -> TestResponse {
        let mut body = json!({"jsonrpc": "2.0", "method": method});
        if !params.is_null() {
            body["params"] = params;
        }
        self.send(&body, Vec::new()).await
    }

    /// Legacy: answer a server request (e.g. `elicitation/create`) received on a stream.
    pub async fn respond(&self, id: Value, result: Value) -> TestResponse {
        self.send(
            &json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Vec::new(),
        )
        .await
    }

    /// Legacy: DELETE the session (the id is kept, so a test can reuse it).
    pub async fn delete_session(&self) -> TestResponse {
        let mut headers = Vec::new();
        if let Some(sid) = self.session_id() {
            headers.push(("mcp-session-id".to_string(), sid));
        }
        if let Some(v) = &self.legacy_version {
            headers.push(("mcp-protocol-version".to_string(), v.clone()));
        }
        merge_headers(&mut headers, self.default_headers.clone());
        self.raw("DELETE", headers, Vec::new()).await
    }

    /// `body` POSTed as one raw HTTP/1.1 request on `s` (a connection the
    /// test holds, so it can check what one kept-alive connection does), with
    /// this client's headers; returns the response's head and body (read to
    /// its `content-length`, or until the server closes).
    pub async fn exchange_on(&self, s: &mut tokio::net::TcpStream, body: &Value) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let text = body.to_string();
        let mut head = format!(
            "POST /mcp HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\n",
            text.len()
        );
        for (n, v) in self.headers_for(body) {
            if n != "accept" {
                head.push_str(&format!("{n}: {v}\r\n"));
            }
        }
        head.push_str("accept: application/json, text/event-stream\r\n\r\n");
        for bytes in [head.as_bytes(), text.as_bytes()] {
            s.write_all(bytes)
                .await
                .unwrap_or_else(|e| panic!("writing the request: {e}"));
        }
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
                .await
                .unwrap_or_else(|_| panic!("no answer within 5 s"))
                .unwrap_or_else(|e| panic!("reading the answer: {e}"));
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
            let t = String::from_utf8_lossy(&got);
            if let Some((h, b)) = t.split_once("\r\n\r\n") {
                let len = h
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length: ")
                            .map(str::to_owned)
                    })
                    .and_then(|v| v.trim().parse::<usize>().ok());
                if len.is_some_and(|len| b.len() >= len) {
                    break;
                }
            }
        }
        String::from_utf8_lossy(&got).into_owned()
    }

    /// Exactly these headers and bytes (nothing added), for bad-input tests.
    pub async fn raw(
        &self,
        http_method: &str,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    ) -> TestResponse {
        let resp = self.exchange(http_method, headers, body).await;
        let (parts, incoming) = resp.into_parts();
        let bytes = tokio::time::timeout(EXCHANGE_TIMEOUT, incoming.collect())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "{} {}: response body did not finish in {EXCHANGE_TIMEOUT:?}",
                    http_method, self.url
                )
            })
            .map(|b| b.to_bytes().to_vec())
            .unwrap_or_else(|e| {
                panic!(
                    "{} {}: reading the response body failed: {e}",
                    http_method, self.url
                )
            });
        TestResponse::new(parts.status.as_u16(), header_pairs(&parts.headers), bytes)
    }

    /// POST a request and read its SSE stream message by message; dropping the
    /// stream closes it (the modern cancellation signal).
    pub async fn stream(
        &self,
        method: &str,
        params: Value,
        extra: Vec<(String, String)>,
    ) -> TestStream {
        let body = self.envelope(method, params);
        self.stream_body(&body, extra).await
    }

    /// `stream` of a message the test built (so it knows the id it sent).
    pub async fn stream_body(&self, body: &Value, extra: Vec<(String, String)>) -> TestStream {
        let mut headers = self.headers_for(body);
        merge_headers(&mut headers, extra);
        let resp = self
            .exchange("POST", headers, body.to_string().into_bytes())
            .await;
        let (parts, incoming) = resp.into_parts();
        let is_sse = parts
            .headers
            .get(hyper::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        TestStream::new(
            parts.status.as_u16(),
            header_pairs(&parts.headers),
            incoming,
            is_sse,
        )
    }

    async fn exchange(
        &self,
        http_method: &str,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    ) -> hyper::Response<Incoming> {
        let mut builder = hyper::Request::builder().method(http_method).uri(&self.url);
        for (n, v) in &headers {
            builder = builder.header(n.as_str(), v.as_str());
        }
        let req = builder
            .body(Full::new(Bytes::from(body)))
            .unwrap_or_else(|e| panic!("cannot build request to {}: {e}", self.url));
        tokio::time::timeout(EXCHANGE_TIMEOUT, self.http.request(req))
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "{http_method} {}: no response in {EXCHANGE_TIMEOUT:?}",
                    self.url
                )
            })
            .unwrap_or_else(|e| panic!("{http_method} {}: {e:?}", self.url))
    }
}

fn header_pairs(h: &hyper::HeaderMap) -> Vec<(String, String)> {
    h.iter()
        .map(|(n, v)| {
            (
                n.as_str().to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect()
}
