//! Tasks through the gateway, on both wires (NOTES §1, §12.3): the 2026-07-28
//! tasks extension (`io.modelcontextprotocol/tasks`: a flat
//! `resultType:"task"` result, `tasks/get` with the outcome inlined,
//! `tasks/update`, `tasks/cancel` acks) and the 2025-11-25 core tasks (a
//! task-augmented `tools/call` answered `{task}`, `tasks/get`,
//! `tasks/result`, `tasks/cancel`).
//!
//! Every task id a client sees is sealed by Junction (`envelope::TaskRef`):
//! the upstream's own id, the upstream, the tool and the caller, so any
//! replica routes `tasks/*` to the right upstream and only the caller who
//! created a task can reach it. This file holds the pure part: who asked for
//! a task, and each wire's shapes turned into the other's. The handlers
//! (`methods/tasks.rs`) make the upstream requests.

use std::collections::HashMap;
use std::sync::LazyLock;

use memchr::memmem;

use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

use crate::error::GatewayError;
use junction_protocol::jsonrpc::{RawParams, RpcError};

/// The 2026-07-28 tasks extension's id, in `capabilities.extensions`.
pub const EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// The 2026-07-28 "Missing Required Client Capability" code.
const MISSING_CAPABILITY: i64 = -32021;

/// Which task shape a call's client reads, if it may get a task at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// No task: the call is answered synchronously.
    None,
    /// A modern client that declared the tasks extension: flat results.
    Modern,
    /// A handshake-era client that sent a task-augmented request: `{task}`.
    Legacy,
}

/// Finders built once: `str::contains` sets up its searcher on every call,
/// which costs more than the search in a short text (both run on every
/// `tools/call`).
static EXTENSION_FINDER: LazyLock<memmem::Finder<'static>> =
    LazyLock::new(|| memmem::Finder::new(EXTENSION));
static TASK_SUPPORT_FINDER: LazyLock<memmem::Finder<'static>> =
    LazyLock::new(|| memmem::Finder::new("taskSupport"));

/// Whether a tool definition may say anything about tasks (most do not:
/// no parse for them).
pub fn mentions_task_support(definition: &RawValue) -> bool {
    TASK_SUPPORT_FINDER
        .find(definition.get().as_bytes())
        .is_some()
}

/// Whether `capabilities` (a client's, as it sent them) declare the extension.
pub fn declares(capabilities: &RawValue) -> bool {
    #[derive(Deserialize)]
    struct Caps {
        #[serde(default)]
        extensions: Option<HashMap<String, IgnoredAny>>,
    }
    // Most clients never mention it: no parse for them.
    EXTENSION_FINDER
        .find(capabilities.get().as_bytes())
        .is_some()
        && serde_json::from_str::<Caps>(capabilities.get())
            .ok()
            .and_then(|c| c.extensions)
            .is_some_and(|e| e.contains_key(EXTENSION))
}

/// `capabilities` with the extension declared, for a modern upstream asked on
/// behalf of a handshake-era client that wants a task.
pub fn declaring(capabilities: &RawValue) -> Box<RawValue> {
    let mut caps: Map<String, Value> = serde_json::from_str(capabilities.get()).unwrap_or_default();
    let extensions = caps
        .entry("extensions")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(e) = extensions {
        e.insert(EXTENSION.to_owned(), json!({}));
    }
    serde_json::value::to_raw_value(&caps).unwrap_or_else(|_| capabilities.to_owned())
}

/// The task shape of a `tools/call`: a modern client's declared extension
/// (session-less, so per request), a handshake-era client's `params.task`.
pub fn shape(modern: bool, capabilities: &RawValue, params: &RawParams<'_>) -> Shape {
    match modern {
        true if declares(capabilities) => Shape::Modern,
        false if params.get("task").is_some() => Shape::Legacy,
        _ => Shape::None,
    }
}

/// The 2025-11-25 `execution.taskSupport` of a tool definition
/// (`"forbidden"` when absent, as that revision says).
pub fn task_support(definition: &RawValue) -> String {
    #[derive(Deserialize)]
    struct Tool {
        execution: Option<Execution>,
    }
    #[derive(Deserialize)]
    struct Execution {
        #[serde(rename = "taskSupport")]
        task_support: Option<String>,
    }
    serde_json::from_str::<Tool>(definition.get())
        .ok()
        .and_then(|t| t.execution)
        .and_then(|e| e.task_support)
        .unwrap_or_else(|| "forbidden".to_owned())
}

/// -32021 naming the extension, as the extension says a server answers a
/// client that did not declare it (HTTP 400 with the code, NOTES §2.3).
pub fn needs_extension(what: &str) -> GatewayError {
    GatewayError::UpstreamNeedsCapability(
        RpcError::new(
            MISSING_CAPABILITY,
            format!("{what} needs the {EXTENSION} extension, which this request did not declare"),
        )
        .with_data(json!({"requiredCapabilities": {"extensions": {EXTENSION: {}}}})),
    )
}

/// A task created upstream, read from either wire's result; `None` when the
/// result is not a task (an immediate answer).
pub struct Created {
    /// The upstream's task, in the 2026-07-28 member names.
    pub task: Map<String, Value>,
    /// The upstream's own task id, as raw JSON text.
    pub id: String,
    pub modern: bool,
}

pub fn created(raw: &RawValue) -> Result<Option<Created>, String> {
    let mut result: Map<String, Value> =
        serde_json::from_str(raw.get()).map_err(|_| "result is not a JSON object".to_owned())?;
    let (task, modern) = match result.get("resultType").and_then(Value::as_str) {
        Some("task") => (result, true),
        Some(_) => return Ok(None),
        // The 2025-11-25 `CreateTaskResult` has a `task` and no content.
        None if result.get("content").is_none() => match result.remove("task") {
            Some(Value::Object(task)) => (to_modern(task), false),
            _ => return Ok(None),
        },
        None => return Ok(None),
    };
    let id = match task.get("taskId") {
        Some(id @ Value::String(_)) => id.to_string(),
        _ => return Err("task result without a string taskId".to_owned()),
    };
    Ok(Some(Created { task, id, modern }))
}

/// The `_meta` key by which a 2025-11-25 message names its task.
pub const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

/// Whether a result (either wire's, as the upstream or the client has it)
/// creates a task instead of answering.
pub fn is_created(raw: &RawValue) -> bool {
    matches!(created(raw), Ok(Some(_)))
}

/// The client's answer to a created task: its id replaced by `sealed`, in
/// the client's shape.
pub fn created_for(shape: Shape, mut task: Map<String, Value>, sealed: &str) -> Value {
    task.insert("taskId".into(), Value::String(sealed.to_owned()));
    match shape {
        Shape::Legacy => json!({"task": to_legacy(task)}),
        _ => {
            let mut out = Map::new();
            out.insert("resultType".into(), json!("task"));
            for (k, v) in task {
                if !matches!(k.as_str(), "resultType" | "requestState" | "_meta") {
                    out.insert(k, v);
                }
            }
            out.entry("ttlMs").or_insert(Value::Null);
            Value::Object(out)
        }
    }
}

/// A 2025-11-25 `Task` in 2026-07-28 member names (`ttl` → `ttlMs`,
/// `pollInterval` → `pollIntervalMs`); other members kept.
pub fn to_modern(task: Map<String, Value>) -> Map<String, Value> {
    task.into_iter()
        .filter(|(k, _)| k != "_meta")
        .map(|(k, v)| match k.as_str() {
            "ttl" => ("ttlMs".to_owned(), v),
            "pollInterval" => ("pollIntervalMs".to_owned(), v),
            _ => (k, v),
        })
        .collect()
}

/// A 2026-07-28 task as a 2025-11-25 `Task`: its metadata only (that wire
/// has no inlined outcome; `tasks/result` gives it).
pub fn to_legacy(task: Map<String, Value>) -> Map<String, Value> {
    let mut out: Map<String, Value> = task
        .into_iter()
        .filter_map(|(k, v)| match k.as_str() {
            "ttlMs" => Some(("ttl".to_owned(), v)),
            "pollIntervalMs" => Some(("pollInterval".to_owned(), v)),
            "resultType" | "result" | "error" | "inputRequests" | "requestState" | "_meta" => None,
            _ => Some((k, v)),
        })
        .collect();
    out.entry("ttl").or_insert(Value::Null);
    out
}

/// A `tasks/*` answer's own task id replaced by the client's sealed one.
pub fn with_client_id(mut task: Map<String, Value>, token: &str) -> Map<String, Value> {
    if task.contains_key("taskId") {
        task.insert("taskId".into(), Value::String(token.to_owned()));
    }
    task
}

/// A 2026-07-28 `tasks/get` answer made from a 2025-11-25 `Task` and, for a
/// terminal one, what `tasks/result` said: `result` for a completed task
/// (its related-task `_meta` dropped: the id is at the root), `error` for a
/// failed one.
pub fn detailed(
    task: Map<String, Value>,
    payload: Option<Result<Value, RpcError>>,
) -> Map<String, Value> {
    let mut out = to_modern(task);
    out.insert("resultType".into(), json!("complete"));
    out.entry("ttlMs").or_insert(Value::Null);
    match payload {
        Some(Ok(Value::Object(mut result))) => {
            if let Some(Value::Object(meta)) = result.get_mut("_meta") {
                meta.remove(RELATED_TASK);
                if meta.is_empty() {
                    result.remove("_meta");
                }
            }
            result.entry("resultType").or_insert(json!("complete"));
            out.insert("result".into(), Value::Object(result));
        }
        Some(Ok(_)) | None => {}
        Some(Err(e)) => {
            out.insert(
                "error".into(),
                json!({"code": e.code, "message": e.message, "data": e.data}),
            );
        }
    }
    out
}

/// The status of a task in either wire's shape.
pub fn status(task: &Map<String, Value>) -> Option<&str> {
    task.get("status").and_then(Value::as_str)
}

pub fn is_terminal(status: Option<&str>) -> bool {
    matches!(status, Some("completed" | "failed" | "cancelled"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_owned()).unwrap()
    }

    #[test]
    fn the_extension_is_read_from_declared_capabilities_only() {
        assert!(declares(&raw(
            r#"{"extensions":{"io.modelcontextprotocol/tasks":{}}}"#
        )));
        assert!(!declares(&raw(r#"{"extensions":{}}"#)));
        assert!(!declares(&raw(r#"{"x":"io.modelcontextprotocol/tasks"}"#)));
        let added = declaring(&raw(r#"{"sampling":{}}"#));
        assert!(declares(&added));
        assert!(added.get().contains("sampling"));
    }

    #[test]
    fn created_tasks_are_read_from_both_wires() {
        let modern = r#"{"resultType":"task","taskId":"t1","status":"working","createdAt":"x","lastUpdatedAt":"x","ttlMs":60000,"pollIntervalMs":500}"#;
        let c = created(&raw(modern)).unwrap().unwrap();
        assert!(c.modern);
        assert_eq!(c.id, "\"t1\"");
        let legacy = r#"{"task":{"taskId":"t2","status":"working","createdAt":"x","lastUpdatedAt":"x","ttl":null,"pollInterval":500}}"#;
        let c = created(&raw(legacy)).unwrap().unwrap();
        assert!(!c.modern);
        assert_eq!(c.task.get("pollIntervalMs"), Some(&json!(500)));
        assert!(created(&raw(r#"{"content":[],"resultType":"complete"}"#))
            .unwrap()
            .is_none());
        assert!(created(&raw(r#"{"content":[],"task":{}}"#))
            .unwrap()
            .is_none());
        assert!(created(&raw(r#"{"resultType":"task","taskId":7}"#)).is_err());
    }

    #[test]
    fn each_client_gets_its_own_shape_with_the_sealed_id() {
        let c = created(&raw(
            r#"{"task":{"taskId":"t2","status":"working","ttl":1000,"pollInterval":5}}"#,
        ))
        .unwrap()
        .unwrap();
        let modern = created_for(Shape::Modern, c.task.clone(), "SEALED");
        assert_eq!(
            modern,
            json!({"resultType":"task","taskId":"SEALED","status":"working","ttlMs":1000,"pollIntervalMs":5})
        );
        let legacy = created_for(Shape::Legacy, c.task, "SEALED");
        assert_eq!(
            legacy,
            json!({"task":{"taskId":"SEALED","status":"working","ttl":1000,"pollInterval":5}})
        );
    }

    #[test]
    fn a_legacy_outcome_is_inlined_for_a_modern_client() {
        let task: Map<String, Value> =
            serde_json::from_value(json!({"taskId":"t","status":"completed","ttl":null})).unwrap();
        let result = json!({"content":[{"type":"text","text":"hi"}],
            "_meta":{"io.modelcontextprotocol/related-task":{"taskId":"t"}}});
        let d = detailed(task.clone(), Some(Ok(result)));
        assert_eq!(d["result"]["content"][0]["text"], "hi");
        assert!(d["result"].get("_meta").is_none());
        assert_eq!(d["resultType"], "complete");
        let failed = detailed(task, Some(Err(RpcError::new(-32603, "boom"))));
        assert_eq!(failed["error"]["code"], -32603);
        assert!(failed.get("result").is_none());
    }
}
