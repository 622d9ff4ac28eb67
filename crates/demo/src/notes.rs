//! The handshake-era demo server (2025-11-25, also 2025-06-18 / 2025-03-26):
//! `initialize` first, results without `resultType`, progress notifications.

use crate::rpc::{self, Incoming};
use serde_json::{json, Value};

const VERSIONS: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];
const MAX_COUNTDOWN: i64 = 100;

#[derive(Debug, Default)]
pub(crate) struct NotesState {
    initialized: bool,
    notes: Vec<String>,
}

pub(crate) fn handle(state: &mut NotesState, msg: Incoming) -> Vec<String> {
    match msg {
        Incoming::Request { id, method, params } => respond(state, &id, &method, &params),
        // notifications/initialized needs nothing more (initialize already armed us);
        // notifications/cancelled: every request is answered synchronously, so the
        // cancelled one is already done and there is nothing to stop.
        Incoming::Notification | Incoming::Response => Vec::new(),
        Incoming::Invalid(reply) => vec![reply],
    }
}

fn respond(state: &mut NotesState, id: &Value, method: &str, params: &Value) -> Vec<String> {
    match method {
        "initialize" => vec![initialize(state, id, params)],
        "ping" => vec![rpc::result(id, json!({}))],
        "tools/list" | "tools/call" if !state.initialized => {
            vec![rpc::error(
                id,
                rpc::INVALID_REQUEST,
                "not initialized",
                None,
            )]
        }
        "tools/list" => vec![rpc::result(id, tools_list())],
        "tools/call" => call(state, id, params),
        _ => vec![rpc::error(
            id,
            rpc::METHOD_NOT_FOUND,
            &format!("method not found: {method}"),
            None,
        )],
    }
}

fn initialize(state: &mut NotesState, id: &Value, params: &Value) -> String {
    let requested = params
        .get("protocolVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    // Echo a version we speak; otherwise offer our latest and let the client decide.
    let version = VERSIONS
        .iter()
        .find(|v| **v == requested)
        .copied()
        .unwrap_or(VERSIONS[0]);
    state.initialized = true;
    rpc::result(
        id,
        json!({
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": false}},
            "serverInfo": {"name": "junction-demo-notes", "version": env!("CARGO_PKG_VERSION")},
            "instructions": "Demo notes server: notes live in memory until the process exits.",
        }),
    )
}

fn tools_list() -> Value {
    json!({"tools": [
        {
            "name": "add_note",
            "description": "Store a note in memory.",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}},
                "required": ["text"]}
        },
        {
            "name": "countdown",
            "description": "Count down from n, reporting progress when the request has a progressToken.",
            "inputSchema": {"type": "object",
                "properties": {"n": {"type": "integer", "minimum": 0, "maximum": MAX_COUNTDOWN}},
                "required": ["n"]}
        },
        {
            "name": "list_notes",
            "description": "List the stored notes.",
            "inputSchema": {"type": "object"}
        }
    ]})
}

fn call(state: &mut NotesState, id: &Value, params: &Value) -> Vec<String> {
    let Some(name) = params.get("name").and_then(Value::as_str) else {
        return vec![rpc::error(
            id,
            rpc::INVALID_PARAMS,
            "tools/call needs params.name",
            None,
        )];
    };
    let args = params.get("arguments").cloned().unwrap_or(json!({}));
    match name {
        "add_note" => vec![rpc::result(id, add_note(state, &args))],
        "list_notes" => vec![rpc::result(id, list_notes(state))],
        "countdown" => countdown(id, params, &args),
        other => vec![rpc::error(
            id,
            rpc::INVALID_PARAMS,
            &format!("unknown tool: {other}"),
            None,
        )],
    }
}

fn add_note(state: &mut NotesState, args: &Value) -> Value {
    let Some(text) = args.get("text").and_then(Value::as_str) else {
        return rpc::tool_error("add_note needs a string argument \"text\"");
    };
    state.notes.push(text.to_string());
    let n = state.notes.len();
    rpc::text_result(&format!("Saved note #{n}."), json!({"id": n, "text": text}))
}

fn list_notes(state: &NotesState) -> Value {
    let text = if state.notes.is_empty() {
        "No notes yet.".to_string()
    } else {
        state
            .notes
            .iter()
            .enumerate()
            .map(|(i, t)| format!("{}. {t}", i + 1))
            .collect::<Vec<_>>()
            .join("\n")
    };
    rpc::text_result(&text, json!({"notes": state.notes}))
}

fn countdown(id: &Value, params: &Value, args: &Value) -> Vec<String> {
    let n = match args.get("n").and_then(Value::as_i64) {
        Some(n @ 0..=MAX_COUNTDOWN) => n,
        _ => {
            let msg = format!("countdown needs an integer \"n\" from 0 to {MAX_COUNTDOWN}");
            return vec![rpc::result(id, rpc::tool_error(&msg))];
        }
    };
    let mut out = Vec::new();
    let token = params
        .pointer("/_meta/progressToken")
        .filter(|t| t.is_string() || t.is_i64() || t.is_u64());
    if let Some(token) = token {
        for step in 1..=n {
            out.push(rpc::notification(
                "notifications/progress",
                json!({"progressToken": token, "progress": step, "total": n,
                       "message": format!("{} left", n - step)}),
            ));
        }
    }
    out.push(rpc::result(
        id,
        rpc::text_result(&format!("Liftoff after {n}."), json!({"counted": n})),
    ));
    out
}
