//! A fast modern (2026-07-28) MCP upstream for load tests and benchmarks.
//!
//! Unlike `mock`, it validates nothing and records nothing: it reads the
//! JSON-RPC `id` and `method` and answers from pre-built bytes, so that a
//! benchmark measures the gateway and not the upstream. It answers
//! `server/discover`, `tools/list` (every tool in one page) and `tools/call`
//! (a small text result for any tool name); anything else gets -32601.
//!
//! One process serves many upstreams: the URL path picks the shape. Every path
//! segment of the form `key=value` is an option, others are ignored (so
//! `/u17/tools=50/mcp` and `/u18/tools=50/mcp` are two distinct upstreams):
//! - `tools=N`: how many tools `tools/list` returns (default [`FastOptions::tools`]),
//!   named `tool0` … `tool{N-1}`;
//! - `ttl=MS`: the `ttlMs` of `tools/list` and `server/discover` (default 60 000;
//!   `ttl=0` makes a gateway refetch the list on every request);
//! - `delay=MS`: `tools/list` answers after this many milliseconds (a slow upstream).

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::net::TcpListener;

/// Defaults for paths that do not say otherwise.
#[derive(Clone, Debug)]
pub struct FastOptions {
    pub tools: usize,
    pub ttl_ms: u64,
}

impl Default for FastOptions {
    fn default() -> Self {
        FastOptions {
            tools: 10,
            ttl_ms: 60_000,
        }
    }
}

/// The shape one path asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Shape {
    tools: usize,
    ttl_ms: u64,
    delay_ms: u64,
}

struct Shared {
    defaults: FastOptions,
    /// Pre-built `tools/list` results per (tools, ttl); a handful of entries.
    lists: Mutex<HashMap<(usize, u64), Bytes>>,
}

const CALL_RESULT: &str =
    r#"{"content":[{"type":"text","text":"ok"}],"isError":false,"resultType":"complete"}"#;

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    id: Option<&'a RawValue>,
    #[serde(borrow)]
    method: Option<&'a str>,
}

fn shape(path: &str, defaults: &FastOptions) -> Shape {
    let mut s = Shape {
        tools: defaults.tools,
        ttl_ms: defaults.ttl_ms,
        delay_ms: 0,
    };
    for seg in path.split('/') {
        let Some((k, v)) = seg.split_once('=') else {
            continue;
        };
        let Ok(n) = v.parse::<u64>() else { continue };
        match k {
            "tools" => s.tools = usize::try_from(n).unwrap_or(usize::MAX).min(100_000),
            "ttl" => s.ttl_ms = n,
            "delay" => s.delay_ms = n.min(60_000),
            _ => {}
        }
    }
    s
}

fn list_result(tools: usize, ttl_ms: u64) -> Bytes {
    let mut out = String::with_capacity(64 + tools * 160);
    out.push_str(r#"{"tools":["#);
    for i in 0..tools {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&format!(
            r#"{{"name":"tool{i}","description":"Benchmark tool number {i}: echoes its text.","inputSchema":{{"type":"object","properties":{{"text":{{"type":"string"}}}}}}}}"#
        ));
    }
    out.push_str(&format!(
        r#"],"resultType":"complete","ttlMs":{ttl_ms},"cacheScope":"public"}}"#
    ));
    Bytes::from(out)
}

fn discover_result(ttl_ms: u64) -> String {
    format!(
        r#"{{"supportedVersions":["2026-07-28"],"capabilities":{{"tools":{{}}}},"serverInfo":{{"name":"fast-upstream","version":"0"}},"resultType":"complete","ttlMs":{ttl_ms},"cacheScope":"public"}}"#
    )
}

fn envelope(id: &str, member: &str, value: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(value.len() + id.len() + 40);
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(b",\"");
    out.extend_from_slice(member.as_bytes());
    out.extend_from_slice(b"\":");
    out.extend_from_slice(value);
    out.push(b'}');
    Bytes::from(out)
}

fn reply(status: StatusCode, body: Bytes) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(body));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    resp
}

async fn handle(
    shared: Arc<Shared>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let shape = shape(req.uri().path(), &shared.defaults);
    if req.method() != hyper::Method::POST {
        return Ok(reply(StatusCode::METHOD_NOT_ALLOWED, Bytes::new()));
    }
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => return Ok(reply(StatusCode::BAD_REQUEST, Bytes::new())),
    };
    let Ok(env) = serde_json::from_slice::<Envelope<'_>>(&body) else {
        let err = br#"{"code":-32700,"message":"parse error"}"#;
        return Ok(reply(
            StatusCode::BAD_REQUEST,
            envelope("null", "error", err),
        ));
    };
    let Some(id) = env.id.map(RawValue::get) else {
        return Ok(reply(StatusCode::ACCEPTED, Bytes::new()));
    };
    let out = match env.method.unwrap_or("") {
        "tools/call" => envelope(id, "result", CALL_RESULT.as_bytes()),
        "tools/list" => {
            if shape.delay_ms > 0 {
                tokio::time::sleep(Duration::from_millis(shape.delay_ms)).await;
            }
            let list = {
                let mut lists = match shared.lists.lock() {
                    Ok(l) => l,
                    Err(poisoned) => poisoned.into_inner(),
                };
                lists
                    .entry((shape.tools, shape.ttl_ms))
                    .or_insert_with(|| list_result(shape.tools, shape.ttl_ms))
                    .clone()
            };
            envelope(id, "result", &list)
        }
        "server/discover" => envelope(id, "result", discover_result(shape.ttl_ms).as_bytes()),
        "ping" => envelope(id, "result", b"{}"),
        _ => {
            let err = br#"{"code":-32601,"message":"Method not found"}"#;
            return Ok(reply(StatusCode::NOT_FOUND, envelope(id, "error", err)));
        }
    };
    Ok(reply(StatusCode::OK, out))
}

/// A running fast upstream; dropping it does not stop the accept loop (it
/// lives as long as the runtime), which is what a benchmark process wants.
pub struct FastUpstream {
    pub addr: SocketAddr,
}

impl FastUpstream {
    /// `http://127.0.0.1:PORT{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

/// Bind `addr` (use `127.0.0.1:0` for a free port) and serve HTTP/1.1 with
/// keep-alive until the runtime ends.
pub async fn serve(addr: SocketAddr, defaults: FastOptions) -> std::io::Result<FastUpstream> {
    let listener = TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let shared = Arc::new(Shared {
        defaults,
        lists: Mutex::new(HashMap::new()),
    });
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            let shared = shared.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| handle(shared.clone(), req));
                let _ = hyper::server::conn::http1::Builder::new()
                    .keep_alive(true)
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok(FastUpstream { addr })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_options_override_defaults() {
        let d = FastOptions::default();
        let s = shape("/u3/tools=50/ttl=0/delay=20/mcp", &d);
        assert_eq!(
            s,
            Shape {
                tools: 50,
                ttl_ms: 0,
                delay_ms: 20
            }
        );
        assert_eq!(shape("/mcp", &d).tools, d.tools);
    }

    #[test]
    fn list_is_valid_json_with_every_tool() {
        let v: serde_json::Value = serde_json::from_slice(&list_result(3, 7)).expect("valid JSON");
        assert_eq!(v["tools"].as_array().map(Vec::len), Some(3));
        assert_eq!(v["tools"][2]["name"], "tool2");
        assert_eq!(v["ttlMs"], 7);
        let d: serde_json::Value = serde_json::from_str(&discover_result(5)).expect("valid JSON");
        assert_eq!(d["supportedVersions"][0], "2026-07-28");
    }

    #[tokio::test]
    async fn answers_with_the_request_id() {
        let up = serve("127.0.0.1:0".parse().expect("addr"), FastOptions::default())
            .await
            .expect("bind");
        let req = Request::post(up.url("/mcp"))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from_static(
                br#"{"jsonrpc":"2.0","id":"a-7","method":"tools/call","params":{"name":"tool0"}}"#,
            )))
            .expect("request");
        let client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build_http();
        let resp = client.request(req).await.expect("response");
        assert_eq!(resp.status(), StatusCode::OK);
        let body = resp.into_body().collect().await.expect("body").to_bytes();
        let v: serde_json::Value = serde_json::from_slice(&body).expect("json");
        assert_eq!(v["id"], "a-7");
        assert_eq!(v["result"]["content"][0]["text"], "ok");
    }
}
