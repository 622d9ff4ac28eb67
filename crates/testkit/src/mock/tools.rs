//! Tool behaviours, shared by both eras. The era decides only the result
//! decoration (`resultType`) and how an elicitation is asked for.

use super::http::{error_body, result_body, Reply};
use super::{lock, Behavior, MockTool, Shared, REQUEST_STATE};
use serde_json::{json, Map, Value};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// Pause between streamed progress notifications, so they really are streamed.
const STEP_PAUSE: Duration = Duration::from_millis(10);
/// How long a legacy elicitation waits for the client's answer.
const ELICIT_WAIT: Duration = Duration::from_secs(30);

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Era {
    Modern,
    Legacy,
}

pub(crate) struct Call {
    pub(crate) shared: Arc<Shared>,
    pub(crate) era: Era,
    pub(crate) id: Value,
    pub(crate) params: Value,
    /// Modern: this request's clientCapabilities; legacy: the session's.
    pub(crate) caps: Value,
    pub(crate) tool: MockTool,
}

pub(crate) fn find_tool(shared: &Shared, name: &str) -> Option<MockTool> {
    lock(&shared.tools).iter().find(|t| t.name == name).cloned()
}

/// Decorate a result for the era and tag it with the mock's label.
pub(crate) fn finish(shared: &Shared, era: Era, mut result: Value) -> Value {
    if let Some(obj) = result.as_object_mut() {
        if era == Era::Modern {
            obj.entry("resultType").or_insert_with(|| json!("complete"));
        }
        let meta = obj
            .entry("_meta")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert("mock/upstream".into(), json!(shared.label));
            if era == Era::Modern {
                meta.insert(
                    "io.modelcontextprotocol/serverInfo".into(),
                    json!({"name": format!("mock-{}", shared.label), "version": "0.0.0"}),
                );
            }
        }
    }
    result
}

fn payload(call: &Call) -> Map<String, Value> {
    let mut p = Map::new();
    p.insert("upstream".into(), json!(call.shared.label));
    p.insert("tool".into(), json!(call.tool.name));
    p.insert(
        "arguments".into(),
        call.params.get("arguments").cloned().unwrap_or(Value::Null),
    );
    p
}

fn content_result(payload: Value, is_error: bool) -> Value {
    json!({"content": [{"type": "text", "text": payload.to_string()}],
           "structuredContent": payload, "isError": is_error})
}

fn ok(call: &Call, result: Value) -> Value {
    result_body(&call.id, finish(&call.shared, call.era, result))
}

/// Run a `tools/call` whose tool exists and whose headers were already checked.
pub(crate) fn run(call: Call) -> Reply {
    let streamed = match call.tool.behavior {
        Behavior::Progress { .. } | Behavior::Logs => true,
        Behavior::InputRequired => call.era == Era::Legacy && has_elicitation(&call.caps),
        Behavior::Slow(_) => call.shared.sse,
        _ => false,
    };
    if streamed {
        let (tx, rx) = mpsc::channel(16);
        tokio::spawn(stream_call(call, tx));
        return Reply::Stream {
            rx,
            headers: Vec::new(),
        };
    }
    let (status, message) = match &call.tool.behavior {
        Behavior::Echo | Behavior::Progress { .. } | Behavior::Logs | Behavior::Slow(_) => (
            200,
            ok(&call, content_result(Value::Object(payload(&call)), false)),
        ),
        Behavior::ToolError => {
            let mut p = payload(&call);
            p.insert(
                "error".into(),
                json!(format!(
                    "tool {} failed on {}",
                    call.tool.name, call.shared.label
                )),
            );
            (200, ok(&call, content_result(Value::Object(p), true)))
        }
        Behavior::Error { code, message } => (200, error_body(&call.id, *code, message, None)),
        Behavior::InputRequired if call.era == Era::Legacy => {
            let msg = "this tool needs a client with the elicitation capability";
            (200, ok(&call, content_result(json!(msg), true)))
        }
        Behavior::InputRequired => input_required(&call),
    };
    if call.shared.sse {
        one_message_stream(message)
    } else {
        Reply::json(status, message)
    }
}

pub(crate) fn one_message_stream(message: Value) -> Reply {
    let (tx, rx) = mpsc::channel(1);
    // Capacity 1 and a fresh channel: this cannot fail.
    let _ = tx.try_send(message);
    Reply::Stream {
        rx,
        headers: Vec::new(),
    }
}

fn has_elicitation(caps: &Value) -> bool {
    caps.get("elicitation").is_some_and(Value::is_object)
}

fn elicitation_params(call: &Call) -> Value {
    json!({"mode": "form",
           "message": format!("Confirm {} on {}?", call.tool.name, call.shared.label),
           "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}})
}

/// Modern MRTR: ask on the first call, accept only a byte-identical state back.
fn input_required(call: &Call) -> (u16, Value) {
    let state = call.params.get("requestState");
    let responses = call.params.get("inputResponses");
    if state.is_none() && responses.is_none() {
        if !has_elicitation(&call.caps) {
            let data = json!({"requiredCapabilities": {"elicitation": {}}});
            let msg = "Missing required client capability: elicitation";
            return (400, error_body(&call.id, -32021, msg, Some(data)));
        }
        let result = json!({
            "resultType": "input_required",
            "inputRequests": {"confirm": {"method": "elicitation/create", "params": elicitation_params(call)}},
            "requestState": REQUEST_STATE,
        });
        return (200, ok(call, result));
    }
    if state.and_then(Value::as_str) != Some(REQUEST_STATE) {
        let data = json!({"received": state.cloned().unwrap_or(Value::Null)});
        return (
            200,
            error_body(
                &call.id,
                -32602,
                "requestState is missing or was altered",
                Some(data),
            ),
        );
    }
    if responses.and_then(|r| r.get("confirm")).is_none() {
        // The spec's advice when an answer is missing: ask again rather than fail.
        let result = json!({
            "resultType": "input_required",
            "inputRequests": {"confirm": {"method": "elicitation/create", "params": elicitation_params(call)}},
            "requestState": REQUEST_STATE,
        });
        return (200, ok(call, result));
    }
    let mut p = payload(call);
    p.insert(
        "inputResponses".into(),
        responses.cloned().unwrap_or(Value::Null),
    );
    p.insert("requestState".into(), json!(REQUEST_STATE));
    (200, ok(call, content_result(Value::Object(p), false)))
}

async fn stream_call(call: Call, tx: mpsc::Sender<Value>) {
    let outcome = match call.tool.behavior.clone() {
        Behavior::Progress { steps } => progress(&call, &tx, steps).await,
        Behavior::Logs => logs(&call, &tx).await,
        Behavior::Slow(d) => tokio::select! {
            _ = tokio::time::sleep(d) => Some(Value::Object(payload(&call))),
            _ = tx.closed() => None,
        },
        Behavior::InputRequired => legacy_elicit(&call, &tx).await,
        _ => Some(Value::Object(payload(&call))),
    };
    match outcome {
        Some(p) => {
            let _ = tx.send(ok(&call, content_result(p, false))).await;
        }
        None => lock(&call.shared.cancelled).push(call.id.clone()),
    }
}

/// Send progress; None when the client went away first.
async fn progress(call: &Call, tx: &mpsc::Sender<Value>, steps: u32) -> Option<Value> {
    let token = call.params.pointer("/_meta/progressToken").cloned();
    for step in 1..=steps {
        if let Some(token) = &token {
            let n = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                "params": {"progressToken": token, "progress": step, "total": steps,
                           "message": format!("step {step} of {steps}")}});
            if tx.send(n).await.is_err() {
                return None;
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(STEP_PAUSE) => {}
            _ = tx.closed() => return None,
        }
    }
    let mut p = payload(call);
    p.insert("steps".into(), json!(steps));
    Some(Value::Object(p))
}

/// Log messages at four levels, each naming its level; None when the client went away.
async fn logs(call: &Call, tx: &mpsc::Sender<Value>) -> Option<Value> {
    for level in ["debug", "info", "warning", "error"] {
        let n = json!({"jsonrpc": "2.0", "method": "notifications/message",
            "params": {"level": level, "logger": call.shared.label, "data": format!("{level} from {}", call.tool.name)}});
        if tx.send(n).await.is_err() {
            return None;
        }
    }
    Some(Value::Object(payload(call)))
}

/// Legacy: a real server-to-client `elicitation/create` on the response stream;
/// the client POSTs its answer, which `legacy.rs` hands over through `pending`.
async fn legacy_elicit(call: &Call, tx: &mpsc::Sender<Value>) -> Option<Value> {
    let n = call.shared.counter.fetch_add(1, Ordering::Relaxed);
    let rid = format!("mock-elicit-{n}");
    let (answer_tx, answer_rx) = oneshot::channel();
    lock(&call.shared.pending).insert(rid.clone(), answer_tx);
    let request = json!({"jsonrpc": "2.0", "id": rid, "method": "elicitation/create",
                         "params": elicitation_params(call)});
    if tx.send(request).await.is_err() {
        lock(&call.shared.pending).remove(&rid);
        return None;
    }
    let answer = tokio::select! {
        a = tokio::time::timeout(ELICIT_WAIT, answer_rx) => a.ok().and_then(Result::ok),
        _ = tx.closed() => None,
    };
    lock(&call.shared.pending).remove(&rid);
    let mut p = payload(call);
    p.insert("elicitation".into(), answer?);
    Some(Value::Object(p))
}
