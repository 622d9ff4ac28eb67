//! The modern-only demo server (2026-07-28): stateless, every request carries
//! `_meta`, `server/discover` instead of `initialize`, MRTR for confirmation.

use crate::rpc::{self, Incoming};
use serde_json::{json, Map, Value};

pub(crate) const VERSION: &str = "2026-07-28";
const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
const TTL_MS: u64 = 300_000;

pub(crate) fn handle(msg: Incoming) -> Vec<String> {
    match msg {
        Incoming::Request { id, method, params } => vec![respond(&id, &method, &params)],
        // notifications/cancelled and anything else: nothing to stop, nothing to say.
        Incoming::Notification | Incoming::Response => Vec::new(),
        Incoming::Invalid(reply) => vec![reply],
    }
}

fn respond(id: &Value, method: &str, params: &Value) -> String {
    if method == "initialize" {
        // A legacy client cannot fall forward, so tell it what we do speak.
        let requested = params
            .get("protocolVersion")
            .cloned()
            .unwrap_or(Value::Null);
        return rpc::error(
            id,
            rpc::UNSUPPORTED_PROTOCOL_VERSION,
            "this server only speaks MCP 2026-07-28 (no initialize; send _meta on every request)",
            Some(json!({"supported": [VERSION], "requested": requested})),
        );
    }
    let meta = params.get("_meta");
    let version = meta
        .and_then(|m| m.get(PROTOCOL_VERSION))
        .and_then(Value::as_str);
    let caps = meta
        .and_then(|m| m.get(CLIENT_CAPABILITIES))
        .filter(|c| c.is_object());
    let (Some(version), Some(caps)) = (version, caps) else {
        return rpc::error(
            id,
            rpc::INVALID_PARAMS,
            "params._meta must carry io.modelcontextprotocol/protocolVersion and io.modelcontextprotocol/clientCapabilities",
            None,
        );
    };
    if version != VERSION {
        return rpc::error(
            id,
            rpc::UNSUPPORTED_PROTOCOL_VERSION,
            "unsupported protocol version",
            Some(json!({"supported": [VERSION], "requested": version})),
        );
    }
    let outcome = match method {
        "server/discover" => Ok(discover()),
        "tools/list" => Ok(tools_list()),
        "tools/call" => call(params, caps),
        _ => Err((
            rpc::METHOD_NOT_FOUND,
            format!("method not found: {method}"),
            None,
        )),
    };
    match outcome {
        Ok(result) => rpc::result(id, finish(result)),
        Err((code, message, data)) => rpc::error(id, code, &message, data),
    }
}

type Outcome = Result<Value, (i64, String, Option<Value>)>;

/// Every modern result carries `resultType` and names the server in `_meta`.
fn finish(mut result: Value) -> Value {
    if let Some(obj) = result.as_object_mut() {
        obj.entry("resultType").or_insert_with(|| json!("complete"));
        let meta = obj
            .entry("_meta")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert(SERVER_INFO.into(), server_info());
        }
    }
    result
}

fn server_info() -> Value {
    json!({"name": "junction-demo-weather", "version": env!("CARGO_PKG_VERSION")})
}

fn discover() -> Value {
    json!({
        "supportedVersions": [VERSION],
        "capabilities": {"tools": {}},
        "instructions": "Demo weather server: fake, deterministic forecasts.",
        "ttlMs": TTL_MS,
        "cacheScope": "public",
    })
}

fn tools_list() -> Value {
    json!({
        "tools": [
            {
                "name": "add",
                "description": "Add two integers.",
                "inputSchema": {"type": "object", "properties": {
                    "a": {"type": "integer"}, "b": {"type": "integer"}},
                    "required": ["a", "b"], "additionalProperties": false},
                "annotations": {"readOnlyHint": true}
            },
            {
                "name": "confirm_reset",
                "description": "Pretend to reset a target; asks the user to confirm first (elicitation).",
                "inputSchema": {"type": "object", "properties": {
                    "target": {"type": "string"}},
                    "required": ["target"], "additionalProperties": false},
                "annotations": {"destructiveHint": true}
            },
            {
                "name": "forecast",
                "description": "Fake, deterministic weather forecast for a city.",
                "inputSchema": {"type": "object", "properties": {
                    "city": {"type": "string", "description": "City name", "x-mcp-header": "City"},
                    "days": {"type": "integer", "minimum": 1, "maximum": 7}},
                    "required": ["city"], "additionalProperties": false},
                "annotations": {"readOnlyHint": true}
            }
        ],
        "ttlMs": TTL_MS,
        "cacheScope": "public",
    })
}

fn call(params: &Value, caps: &Value) -> Outcome {
    let Some(name) = params.get("name").and_then(Value::as_str) else {
        return Err((
            rpc::INVALID_PARAMS,
            "tools/call needs params.name".into(),
            None,
        ));
    };
    let empty = Value::Object(Map::new());
    let args = params.get("arguments").unwrap_or(&empty);
    match name {
        "forecast" => Ok(forecast(args)),
        "add" => Ok(add(args)),
        "confirm_reset" => confirm_reset(params, args, caps),
        other => Err((rpc::INVALID_PARAMS, format!("unknown tool: {other}"), None)),
    }
}

fn forecast(args: &Value) -> Value {
    let Some(city) = args.get("city").and_then(Value::as_str) else {
        return rpc::tool_error("forecast needs a string argument \"city\"");
    };
    let days = match args.get("days") {
        None | Some(Value::Null) => 3,
        Some(v) => match v.as_i64() {
            Some(d @ 1..=7) => d,
            _ => return rpc::tool_error("\"days\" must be an integer from 1 to 7"),
        },
    };
    const CONDITIONS: [&str; 6] = ["sunny", "cloudy", "rain", "windy", "snow", "fog"];
    let seed: u64 = city
        .chars()
        .enumerate()
        .map(|(i, c)| (i as u64 + 1) * u64::from(c))
        .sum();
    let mut text = format!("Forecast for {city} (demo data):");
    let mut out = Vec::new();
    for day in 1..=days as u64 {
        let conditions = CONDITIONS[((seed + day) % CONDITIONS.len() as u64) as usize];
        let high_c = ((seed + day * 7) % 35) as i64 - 5;
        text.push_str(&format!(" day {day}: {conditions}, {high_c}°C;"));
        out.push(json!({"day": day, "conditions": conditions, "highC": high_c}));
    }
    text.pop();
    rpc::text_result(&text, json!({"city": city, "days": out}))
}

fn add(args: &Value) -> Value {
    let a = args.get("a").and_then(Value::as_i64);
    let b = args.get("b").and_then(Value::as_i64);
    let (Some(a), Some(b)) = (a, b) else {
        return rpc::tool_error("add needs integer arguments \"a\" and \"b\"");
    };
    match a.checked_add(b) {
        Some(sum) => rpc::text_result(&sum.to_string(), json!({"sum": sum})),
        None => rpc::tool_error("the sum does not fit in a 64-bit integer"),
    }
}

/// MRTR: the first call asks for confirmation; the retry carries the answer and
/// our requestState. The state names the target so a retry cannot swap it.
fn confirm_reset(params: &Value, args: &Value, caps: &Value) -> Outcome {
    let Some(target) = args.get("target").and_then(Value::as_str) else {
        return Ok(rpc::tool_error(
            "confirm_reset needs a string argument \"target\"",
        ));
    };
    let expected_state = format!("demo-weather.v1:confirm_reset:{target}");
    let retry = params.get("requestState").is_some() || params.get("inputResponses").is_some();
    if retry {
        if params.get("requestState").and_then(Value::as_str) != Some(expected_state.as_str()) {
            return Err((
                rpc::INVALID_PARAMS,
                "requestState does not belong to this request".into(),
                None,
            ));
        }
        let answer = params.pointer("/inputResponses/confirm");
        if let Some(answer) = answer {
            let action = answer.get("action").and_then(Value::as_str).unwrap_or("");
            return Ok(if action == "accept" {
                rpc::text_result(
                    &format!("Reset {target}."),
                    json!({"target": target, "reset": true}),
                )
            } else {
                rpc::text_result(
                    &format!("Reset of {target} was not confirmed ({action})."),
                    json!({"target": target, "reset": false}),
                )
            });
        }
        // The client retried without the answer: ask again rather than fail.
    }
    if !supports_form_elicitation(caps) {
        return Ok(rpc::tool_error(
            "confirm_reset needs a client that declares the elicitation capability (form mode)",
        ));
    }
    Ok(json!({
        "resultType": "input_required",
        "inputRequests": {"confirm": {"method": "elicitation/create", "params": {
            "mode": "form",
            "message": format!("Really reset {target}?"),
            "requestedSchema": {"type": "object",
                "properties": {"ok": {"type": "boolean", "description": "Confirm the reset"}},
                "required": ["ok"]}
        }}},
        "requestState": expected_state,
    }))
}

/// `elicitation: {}` means form only; otherwise `form` must be listed.
fn supports_form_elicitation(caps: &Value) -> bool {
    match caps.get("elicitation").and_then(Value::as_object) {
        Some(e) => e.is_empty() || e.contains_key("form"),
        None => false,
    }
}
