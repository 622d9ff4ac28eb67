//! A handshake-era server (2025-11-25, also 2025-06-18 / 2025-03-26) in the
//! manner of the Python SDK 1.x: `initialize` mints an `Mcp-Session-Id`, which
//! every later request must carry (missing -> 400, unknown -> 404).

use super::http::{error_body, parse_message, result_body, Message, Reply, Req};
use super::tools::{self, Call, Era};
use super::{lock, Session, Shared};
use serde_json::{json, Value};
use std::sync::atomic::Ordering;
use std::sync::Arc;

pub(crate) const VERSIONS: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];

/// The Python SDK answers transport-level failures with this id.
fn transport_error(status: u16, message: &str) -> Reply {
    Reply::json(
        status,
        error_body(&json!("server-error"), -32600, message, None),
    )
}

pub(crate) async fn handle(shared: &Arc<Shared>, req: &Req) -> Reply {
    match req.http_method.as_str() {
        "POST" => {}
        "DELETE" => return delete(shared, req),
        "GET" => return super::notify::get_stream(shared, req),
        _ => return Reply::Empty { status: 405 },
    }
    let message = match parse_message(&req.body) {
        Ok(m) => m,
        Err(body) => return Reply::json(400, body),
    };
    if let Message::Request { id, method, params } = &message {
        if method == "initialize" {
            return initialize(shared, id, params);
        }
    }
    let session = match session_of(shared, req) {
        Ok(s) => s,
        Err(reply) => return reply,
    };
    // Missing means 2025-03-26 (the header did not exist then); a present one
    // must be a version we speak and the one this session negotiated.
    if let Some(v) = req.header("mcp-protocol-version") {
        if !VERSIONS.contains(&v) {
            return transport_error(
                400,
                &format!("Bad Request: Unsupported protocol version: {v}"),
            );
        }
        if v != session.version {
            let msg = format!(
                "Bad Request: MCP-Protocol-Version {v} but the session negotiated {}",
                session.version
            );
            return transport_error(400, &msg);
        }
    }
    match message {
        Message::Notification => Reply::Empty { status: 202 },
        Message::Response { id, message } => {
            let key = id.as_str().map_or_else(|| id.to_string(), str::to_string);
            if let Some(waiter) = lock(&shared.pending).remove(&key) {
                let answer = message
                    .get("result")
                    .or_else(|| message.get("error"))
                    .cloned()
                    .unwrap_or(Value::Null);
                let _ = waiter.send(answer);
            }
            Reply::Empty { status: 202 }
        }
        Message::Request { id, method, params } => request(shared, session, id, &method, params),
    }
}

fn session_of(shared: &Shared, req: &Req) -> Result<Session, Reply> {
    let Some(sid) = req.header("mcp-session-id") else {
        return Err(transport_error(400, "Bad Request: Missing session ID"));
    };
    lock(&shared.sessions)
        .get(sid)
        .cloned()
        .ok_or_else(|| transport_error(404, "Session not found"))
}

fn delete(shared: &Shared, req: &Req) -> Reply {
    let Some(sid) = req.header("mcp-session-id") else {
        return transport_error(400, "Bad Request: Missing session ID");
    };
    match lock(&shared.sessions).remove(sid) {
        Some(_) => Reply::Empty { status: 200 },
        None => transport_error(404, "Session not found"),
    }
}

fn initialize(shared: &Arc<Shared>, id: &Value, params: &Value) -> Reply {
    let requested = params
        .get("protocolVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let version = VERSIONS
        .iter()
        .find(|v| **v == requested)
        .copied()
        .unwrap_or(VERSIONS[0]);
    let n = shared.counter.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let sid = format!(
        "{}-{n}-{nanos:08x}",
        shared.label.replace(|c: char| !c.is_ascii_graphic(), "_")
    );
    let capabilities = params.get("capabilities").cloned().unwrap_or(json!({}));
    lock(&shared.sessions).insert(
        sid.clone(),
        Session {
            version: version.to_string(),
            capabilities,
        },
    );
    let result = json!({
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": true}},
        "serverInfo": {"name": format!("mock-{}", shared.label), "version": "0.0.0"},
        "instructions": format!("mock upstream {}", shared.label),
    });
    let message = result_body(id, tools::finish(shared, Era::Legacy, result));
    let headers = vec![("mcp-session-id".to_string(), sid)];
    if shared.sse {
        match tools::one_message_stream(message) {
            Reply::Stream { rx, .. } => Reply::Stream { rx, headers },
            other => other,
        }
    } else {
        Reply::Json {
            status: 200,
            body: message,
            headers,
        }
    }
}

fn request(
    shared: &Arc<Shared>,
    session: Session,
    id: Value,
    method: &str,
    params: Value,
) -> Reply {
    let message = match method {
        "ping" => result_body(&id, json!({})),
        "resources/subscribe" | "resources/unsubscribe" => {
            super::notify::subscription(shared, &id, method, &params)
        }
        "tools/list" => match super::modern::list(shared, &params) {
            Ok(result) => result_body(&id, tools::finish(shared, Era::Legacy, result)),
            Err(msg) => error_body(&id, -32602, &msg, None),
        },
        "tools/call" => {
            let name = params
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            match tools::find_tool(shared, &name) {
                Some(tool) => {
                    let caps = session.capabilities;
                    return tools::run(Call {
                        shared: shared.clone(),
                        era: Era::Legacy,
                        id,
                        params,
                        caps,
                        tool,
                    });
                }
                None => error_body(&id, -32602, &format!("Unknown tool: {name}"), None),
            }
        }
        m if super::prompts::handles(m) => {
            super::prompts::answer(shared, Era::Legacy, &id, m, &params)
        }
        _ => error_body(&id, -32601, &format!("Method not found: {method}"), None),
    };
    if shared.sse {
        tools::one_message_stream(message)
    } else {
        Reply::json(200, message)
    }
}
