//! A strict 2026-07-28 server: `_meta` and every standard header are checked
//! against the body before anything runs (NOTES §2.4, §4.1, §5.6).

use super::http::{error_body, parse_message, result_body, Message, Reply, Req};
use super::tools::{self, Call, Era};
use super::{lock, MockEra, Shared};
use crate::codec;
use serde_json::{json, Value};
use std::sync::Arc;

pub(crate) const VERSION: &str = "2026-07-28";
const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";

fn bad(id: &Value, code: i64, message: &str, data: Option<Value>) -> Reply {
    Reply::json(400, error_body(id, code, message, data))
}

pub(crate) async fn handle(shared: &Arc<Shared>, req: &Req) -> Reply {
    if req.http_method != "POST" {
        return Reply::Empty { status: 405 };
    }
    let (id, method, params) = match parse_message(&req.body) {
        Ok(Message::Request { id, method, params }) => (id, method, params),
        Ok(Message::Notification) => return Reply::Empty { status: 202 },
        Ok(Message::Response { .. }) => {
            return bad(
                &Value::Null,
                -32600,
                "Invalid Request: servers send no requests, so expect no responses",
                None,
            )
        }
        Err(body) => return Reply::json(400, body),
    };
    if method == "initialize" {
        // A modern-only server tells a legacy client what it does speak.
        let requested = params
            .get("protocolVersion")
            .cloned()
            .unwrap_or(Value::Null);
        let data = json!({"supported": [VERSION], "requested": requested});
        return bad(
            &id,
            -32022,
            "Unsupported protocol version: this server has no initialize",
            Some(data),
        );
    }
    if let Err(reply) = check_envelope(&id, &method, &params, req) {
        return reply;
    }
    let caps = params
        .pointer("/_meta")
        .and_then(|m| m.get(CLIENT_CAPABILITIES))
        .cloned()
        .unwrap_or(json!({}));
    let reply = match method.as_str() {
        "server/discover" => result_body(&id, tools::finish(shared, Era::Modern, discover(shared))),
        "tools/list" => match list(shared, &params) {
            Ok(result) => result_body(&id, tools::finish(shared, Era::Modern, result)),
            Err(msg) => error_body(&id, -32602, &msg, None),
        },
        "tools/call" => return call(shared, req, id, params, caps),
        "subscriptions/listen" => return super::notify::listen(shared, &id, &params),
        m if super::prompts::handles(m) => {
            super::prompts::answer(shared, Era::Modern, &id, m, &params)
        }
        _ => {
            return Reply::json(
                404,
                error_body(&id, -32601, &format!("Method not found: {method}"), None),
            )
        }
    };
    respond(shared, reply)
}

fn respond(shared: &Shared, message: Value) -> Reply {
    if shared.sse {
        tools::one_message_stream(message)
    } else {
        Reply::json(200, message)
    }
}

/// `_meta`, MCP-Protocol-Version, Mcp-Method, Mcp-Name.
fn check_envelope(id: &Value, method: &str, params: &Value, req: &Req) -> Result<(), Reply> {
    let meta = params.get("_meta");
    let version = meta
        .and_then(|m| m.get(PROTOCOL_VERSION))
        .and_then(Value::as_str);
    let caps_ok = meta
        .and_then(|m| m.get(CLIENT_CAPABILITIES))
        .is_some_and(Value::is_object);
    let Some(version) = version.filter(|_| caps_ok) else {
        let msg = "Invalid params: _meta must carry io.modelcontextprotocol/protocolVersion and io.modelcontextprotocol/clientCapabilities";
        return Err(bad(id, -32602, msg, None));
    };
    match req.header("mcp-protocol-version") {
        Some(h) if h == version => {}
        Some(h) => {
            return Err(bad(
                id,
                -32020,
                &format!("Header mismatch: MCP-Protocol-Version {h:?} != _meta {version:?}"),
                None,
            ))
        }
        None => {
            return Err(bad(
                id,
                -32020,
                "Header mismatch: MCP-Protocol-Version is required",
                None,
            ))
        }
    }
    if version != VERSION {
        let data = json!({"supported": [VERSION], "requested": version});
        return Err(bad(id, -32022, "Unsupported protocol version", Some(data)));
    }
    if req.header("mcp-method") != Some(method) {
        let got = req.header("mcp-method").unwrap_or("<missing>");
        return Err(bad(
            id,
            -32020,
            &format!("Header mismatch: Mcp-Method {got:?} != {method:?}"),
            None,
        ));
    }
    let name_field = match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        _ => None,
    };
    if let Some(field) = name_field {
        let body_name = params.get(field).and_then(Value::as_str);
        let header = req.header("mcp-name").map(codec::decode);
        match (header, body_name) {
            (Some(Ok(h)), Some(b)) if h == b => {}
            (Some(Err(e)), _) => {
                return Err(bad(
                    id,
                    -32020,
                    &format!("Header mismatch: Mcp-Name: {e}"),
                    None,
                ))
            }
            (None, _) => {
                return Err(bad(
                    id,
                    -32020,
                    "Header mismatch: Mcp-Name is required",
                    None,
                ))
            }
            (Some(Ok(h)), b) => {
                return Err(bad(
                    id,
                    -32020,
                    &format!("Header mismatch: Mcp-Name {h:?} != params.{field} {b:?}"),
                    None,
                ))
            }
        }
    }
    Ok(())
}

fn discover(shared: &Shared) -> Value {
    let mut versions = vec![VERSION];
    if shared.era == MockEra::Dual {
        versions.extend(super::legacy::VERSIONS);
    }
    json!({"supportedVersions": versions, "capabilities": {"tools": {"listChanged": true}},
           "instructions": format!("mock upstream {}", shared.label),
           "ttlMs": shared.ttl_ms, "cacheScope": "public"})
}

/// One page of `tools/list`, shared with the legacy era (which drops the hints).
pub(crate) fn list(shared: &Shared, params: &Value) -> Result<Value, String> {
    let tools = lock(&shared.tools).clone();
    let start = match params.get("cursor") {
        None | Some(Value::Null) => 0,
        Some(c) => c
            .as_str()
            .and_then(|c| c.strip_prefix("mock-cursor-"))
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|n| *n <= tools.len())
            .ok_or_else(|| format!("Invalid params: unknown cursor {c}"))?,
    };
    let end = shared
        .page_size
        .map_or(tools.len(), |n| (start + n).min(tools.len()));
    let page: Vec<Value> = tools[start..end]
        .iter()
        .map(|t| {
            json!({"name": t.name, "description": format!("{} from {}", t.name, shared.label),
                        "inputSchema": t.input_schema})
        })
        .collect();
    let mut result = json!({"tools": page});
    if end < tools.len() {
        result["nextCursor"] = json!(format!("mock-cursor-{end}"));
    }
    if shared.era != MockEra::Legacy
        || params
            .pointer("/_meta/io.modelcontextprotocol~1protocolVersion")
            .is_some()
    {
        result["ttlMs"] = json!(shared.ttl_ms);
        result["cacheScope"] = json!("public");
    }
    Ok(result)
}

fn call(shared: &Arc<Shared>, req: &Req, id: Value, params: Value, caps: Value) -> Reply {
    let Some(name) = params.get("name").and_then(Value::as_str) else {
        return respond(
            shared,
            error_body(&id, -32602, "Invalid params: tools/call needs name", None),
        );
    };
    let Some(tool) = tools::find_tool(shared, name) else {
        return respond(
            shared,
            error_body(&id, -32602, &format!("Unknown tool: {name}"), None),
        );
    };
    let args = params.get("arguments").cloned().unwrap_or(Value::Null);
    if let Err(msg) = check_param_headers(&tool.input_schema, &args, req) {
        return bad(&id, -32020, &format!("Header mismatch: {msg}"), None);
    }
    tools::run(Call {
        shared: shared.clone(),
        era: Era::Modern,
        id,
        params,
        caps,
        tool,
    })
}

/// Every annotated argument present and non-null needs its `Mcp-Param-*`
/// header with the same value; an absent or null one must have none.
fn check_param_headers(schema: &Value, args: &Value, req: &Req) -> Result<(), String> {
    for (name, path) in codec::annotated_paths(schema) {
        let header_name = format!("mcp-param-{}", name.to_ascii_lowercase());
        let header = req.header(&header_name);
        let value = codec::value_at(args, &path).filter(|v| !v.is_null());
        match (header, value) {
            (None, None) => {}
            (Some(_), None) => {
                return Err(format!(
                    "{header_name} sent but the argument is absent or null"
                ))
            }
            (None, Some(_)) => return Err(format!("{header_name} missing")),
            (Some(h), Some(v)) => {
                let decoded = codec::decode(h).map_err(|e| format!("{header_name}: {e}"))?;
                if !codec::matches(&decoded, v) {
                    return Err(format!(
                        "{header_name} {decoded:?} does not match the argument {v}"
                    ));
                }
            }
        }
    }
    Ok(())
}
