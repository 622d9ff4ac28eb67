//! Minimal JSON-RPC 2.0 framing shared by both demo servers.

use serde_json::{json, Value};

pub(crate) const PARSE_ERROR: i64 = -32700;
pub(crate) const INVALID_REQUEST: i64 = -32600;
pub(crate) const METHOD_NOT_FOUND: i64 = -32601;
pub(crate) const INVALID_PARAMS: i64 = -32602;
pub(crate) const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// One parsed input line.
pub(crate) enum Incoming {
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    Notification,
    /// A response from the client (neither server may send requests, so ignored).
    Response,
    /// Unusable line; the string is the error reply to write.
    Invalid(String),
}

pub(crate) fn parse(line: &str) -> Incoming {
    let value: Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(e) => {
            return Incoming::Invalid(error(
                &Value::Null,
                PARSE_ERROR,
                &format!("parse error: {e}"),
                None,
            ))
        }
    };
    let Some(obj) = value.as_object() else {
        return invalid("a message must be a JSON object (batches are not supported)");
    };
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return invalid("jsonrpc must be \"2.0\"");
    }
    let id = obj.get("id").cloned();
    let Some(method) = obj.get("method").and_then(Value::as_str) else {
        if obj.contains_key("result") || obj.contains_key("error") {
            return Incoming::Response;
        }
        return invalid("missing method");
    };
    let params = obj.get("params").cloned().unwrap_or(Value::Null);
    if !(params.is_object() || params.is_null()) {
        return invalid("params must be an object");
    }
    match id {
        None => Incoming::Notification,
        Some(id @ Value::String(_)) => Incoming::Request {
            id,
            method: method.to_string(),
            params,
        },
        Some(id @ Value::Number(_)) if id.is_i64() || id.is_u64() => Incoming::Request {
            id,
            method: method.to_string(),
            params,
        },
        Some(_) => invalid("id must be a string or an integer"),
    }
}

fn invalid(message: &str) -> Incoming {
    Incoming::Invalid(error(&Value::Null, INVALID_REQUEST, message, None))
}

pub(crate) fn result(id: &Value, result: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string()
}

pub(crate) fn error(id: &Value, code: i64, message: &str, data: Option<Value>) -> String {
    let mut err = json!({"code": code, "message": message});
    if let Some(data) = data {
        err["data"] = data;
    }
    json!({"jsonrpc": "2.0", "id": id, "error": err}).to_string()
}

pub(crate) fn notification(method: &str, params: Value) -> String {
    json!({"jsonrpc": "2.0", "method": method, "params": params}).to_string()
}

/// A tool execution error: a normal result with `isError`, so the model can read it.
pub(crate) fn tool_error(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": true})
}

pub(crate) fn text_result(text: &str, structured: Value) -> Value {
    json!({"content": [{"type": "text", "text": text}], "structuredContent": structured, "isError": false})
}
