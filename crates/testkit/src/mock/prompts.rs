//! Prompts and resources of a mock upstream, the same fixed set for every mock,
//! with the label in every text so a test can see which upstream answered:
//!
//! - prompts `greet` (argument `name`) and, modern only, `confirm` (MRTR: asks
//!   once with `REQUEST_STATE`, completes on a retry carrying that exact state);
//! - resources `mock://{label}/readme` and `mock://shared/config` (every mock
//!   lists the latter, so a gateway sees a collision);
//! - template `mock://{label}/items/{id}`, readable for any id;
//! - `completion/complete` (modern mocks only, so a gateway also meets an
//!   upstream without completion): `greet`'s `name` completes to
//!   `{label}-alice`, `{label}-bob`, the template's `id` to `{label}-1`,
//!   `{label}-2`, each filtered by the typed prefix.

use super::http::{error_body, result_body};
use super::tools::{finish, Era};
use super::{Shared, REQUEST_STATE};
use serde_json::{json, Value};

pub(crate) fn handles(method: &str) -> bool {
    matches!(
        method,
        "prompts/list"
            | "prompts/get"
            | "resources/list"
            | "resources/templates/list"
            | "resources/read"
            | "completion/complete"
    )
}

/// The JSON-RPC answer to one of the methods `handles` accepts.
pub(crate) fn answer(shared: &Shared, era: Era, id: &Value, method: &str, params: &Value) -> Value {
    let label = &shared.label;
    let outcome = match method {
        "prompts/list" => Ok(list(shared, era, params, "prompts", prompts(shared, era))),
        "prompts/get" => get(shared, era, params),
        "resources/list" => {
            let items = vec![
                json!({"uri": format!("mock://{label}/readme"), "name": "readme",
                       "mimeType": "text/plain", "description": format!("readme of {label}")}),
                json!({"uri": "mock://shared/config", "name": "config", "mimeType": "text/plain"}),
            ];
            Ok(list(shared, era, params, "resources", items))
        }
        "resources/templates/list" => {
            let items = vec![
                json!({"uriTemplate": format!("mock://{label}/items/{{id}}"),
                                    "name": "item", "mimeType": "text/plain"}),
            ];
            Ok(list(shared, era, params, "resourceTemplates", items))
        }
        "completion/complete" if era == Era::Modern => complete(shared, params),
        "completion/complete" => Err((-32601, "Method not found: completion/complete".into())),
        _ => read(shared, params),
    };
    match outcome {
        Ok(result) => result_body(id, finish(shared, era, result)),
        Err((code, msg)) => error_body(id, code, &msg, None),
    }
}

fn prompts(shared: &Shared, era: Era) -> Vec<Value> {
    let mut v = vec![
        json!({"name": "greet", "description": format!("greeting from {}", shared.label),
                             "arguments": [{"name": "name", "required": true}]}),
    ];
    if era == Era::Modern {
        v.push(json!({"name": "confirm", "description": "asks the client first"}));
    }
    v
}

fn list(shared: &Shared, era: Era, params: &Value, key: &str, items: Vec<Value>) -> Value {
    let mut result = json!({ key: items });
    let modern_request = params
        .pointer("/_meta/io.modelcontextprotocol~1protocolVersion")
        .is_some();
    if era == Era::Modern || modern_request {
        result["ttlMs"] = json!(shared.ttl_ms);
        result["cacheScope"] = json!("public");
    }
    result
}

fn text_message(text: String) -> Value {
    json!({"role": "user", "content": {"type": "text", "text": text}})
}

fn get(shared: &Shared, era: Era, params: &Value) -> Result<Value, (i64, String)> {
    let label = &shared.label;
    match params.get("name").and_then(Value::as_str) {
        Some("greet") => {
            let who = params
                .pointer("/arguments/name")
                .and_then(Value::as_str)
                .unwrap_or("nobody");
            Ok(json!({"description": format!("greeting from {label}"),
                      "messages": [text_message(format!("Hello {who}, from {label}"))],
                      "_meta": {"mock/arguments": params.get("arguments").cloned().unwrap_or(Value::Null)}}))
        }
        Some("confirm") if era == Era::Modern => {
            let state = params.get("requestState");
            if state.is_none() {
                return Ok(json!({
                    "resultType": "input_required",
                    "inputRequests": {"confirm": {"method": "elicitation/create", "params": {
                        "mode": "form", "message": format!("Confirm on {label}?"),
                        "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}}}}},
                    "requestState": REQUEST_STATE,
                }));
            }
            if state.and_then(Value::as_str) != Some(REQUEST_STATE) {
                return Err((-32602, "requestState is missing or was altered".into()));
            }
            let answer = params
                .pointer("/inputResponses/confirm")
                .cloned()
                .unwrap_or(Value::Null);
            Ok(json!({"messages": [text_message(format!("confirmed on {label}: {answer}"))]}))
        }
        other => Err((-32602, format!("Unknown prompt: {other:?}"))),
    }
}

fn read(shared: &Shared, params: &Value) -> Result<Value, (i64, String)> {
    let label = &shared.label;
    let uri = params.get("uri").and_then(Value::as_str).unwrap_or("");
    let text = if uri == format!("mock://{label}/readme") {
        format!("readme of {label}")
    } else if uri == "mock://shared/config" {
        format!("config of {label}")
    } else if let Some(item) = uri.strip_prefix(&format!("mock://{label}/items/")) {
        format!("item {item} of {label}")
    } else {
        return Err((-32002, format!("Resource not found: {uri}")));
    };
    Ok(json!({"contents": [{"uri": uri, "mimeType": "text/plain", "text": text}]}))
}

fn complete(shared: &Shared, params: &Value) -> Result<Value, (i64, String)> {
    let label = &shared.label;
    let reference = params.get("ref").cloned().unwrap_or(Value::Null);
    let argument = params.pointer("/argument/name").and_then(Value::as_str);
    let typed = params
        .pointer("/argument/value")
        .and_then(Value::as_str)
        .unwrap_or("");
    let template = format!("mock://{label}/items/{{id}}");
    let all: Vec<String> = match (reference["type"].as_str(), argument) {
        (Some("ref/prompt"), Some("name")) if reference["name"] == "greet" => {
            vec![format!("{label}-alice"), format!("{label}-bob")]
        }
        (Some("ref/resource"), Some("id")) if reference["uri"] == template.as_str() => {
            vec![format!("{label}-1"), format!("{label}-2")]
        }
        _ => {
            return Err((
                -32602,
                format!("nothing to complete for {reference} {argument:?}"),
            ))
        }
    };
    let values: Vec<String> = all.into_iter().filter(|v| v.starts_with(typed)).collect();
    Ok(json!({"completion": {"values": values, "total": values.len(), "hasMore": false}}))
}
