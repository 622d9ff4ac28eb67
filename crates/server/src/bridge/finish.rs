//! How an upstream result becomes the client's (`Finisher`): `resultType`
//! added where a handshake-era upstream left it out, an `input_required`
//! state sealed in Junction's envelope (bound to the caller, the upstream and
//! the target), a created task's id sealed and its shape made the client's
//! (`tasks`), as is the task id a result names in its related-task `_meta`,
//! and result types the client did not negotiate refused.

use std::borrow::Cow;
use std::sync::LazyLock;

use junction_protocol::object::{self, Sole};
use serde_json::value::RawValue;

use crate::envelope::{self, TaskRef};
use crate::error::GatewayError;
use crate::tasks::{self, Shape};

/// Turns an upstream result into the client's: `resultType` added where a
/// handshake-era upstream left it out, an `input_required` state sealed in
/// Junction's envelope, and results the client cannot read refused.
/// Shared with prompts and resources (`forward`), where `target` is the
/// exposed prompt name or the resource URI.
#[derive(Clone)]
pub struct Finisher {
    pub modern: bool,
    pub sealer: junction_protocol::seal::Sealer,
    pub principal: String,
    pub upstream: String,
    pub target: String,
    pub ttl_ms: u64,
    /// Whether (and how) this call's client may be handed a task.
    pub tasks: Shape,
    /// This replica as the others reach it, for a task bound to its upstream
    /// session (set only when the call may create a task).
    pub owner: Option<std::sync::Arc<String>>,
}

impl Finisher {
    pub fn result(&self, raw: Box<RawValue>) -> Result<Box<RawValue>, GatewayError> {
        let protocol = |detail: String| GatewayError::UpstreamProtocol {
            upstream: self.upstream.clone(),
            detail,
        };
        if self.tasks != Shape::None {
            if let Some(created) = tasks::created(&raw).map_err(protocol)? {
                return self.task_created(created);
            }
        }
        let raw = if self.tasks != Shape::None && raw.get().contains(tasks::RELATED_TASK) {
            self.related_task_sealed(raw)
        } else {
            raw
        };
        let result_type = result_type(&raw).map_err(|e| protocol(e.into()))?;
        match result_type.as_deref() {
            None => {
                if self.modern {
                    add_complete(&raw)
                        .ok_or_else(|| protocol("result is not a JSON object".into()))
                } else {
                    Ok(raw)
                }
            }
            Some("complete") => Ok(raw),
            Some("input_required") if self.modern => self.seal_state(&raw),
            Some("input_required") => Err(GatewayError::Unsupported(format!(
                "upstream {} asks for client input (InputRequiredResult), which cannot be relayed to a handshake-era client yet",
                self.upstream
            ))),
            Some(other) => Err(protocol(format!(
                "resultType {other:?} belongs to an extension this client did not negotiate"
            ))),
        }
    }

    /// A task the upstream created: its id sealed for this caller, in the
    /// client's shape.
    fn task_created(&self, created: tasks::Created) -> Result<Box<RawValue>, GatewayError> {
        let sealed = self.task_id(created.id, created.modern);
        serde_json::value::to_raw_value(&tasks::created_for(self.tasks, created.task, &sealed))
            .map_err(|e| GatewayError::Unsupported(e.to_string()))
    }

    /// A result that names its task in `_meta` (2025-11-25's related-task,
    /// as a core task's `tasks/result` answers): the upstream's id replaced
    /// by one sealed for this caller, or the member dropped when its id is not
    /// a string. An upstream's own task id never reaches a client.
    fn related_task_sealed(&self, raw: Box<RawValue>) -> Box<RawValue> {
        use serde_json::{Map, Value};
        let Ok(mut result) = serde_json::from_str::<Map<String, Value>>(raw.get()) else {
            return raw;
        };
        let Some(Value::Object(meta)) = result.get_mut("_meta") else {
            return raw;
        };
        match meta.get_mut(tasks::RELATED_TASK) {
            None => return raw,
            Some(Value::Object(related)) if related.get("taskId").is_some_and(Value::is_string) => {
                let id = related["taskId"].to_string();
                related.insert("taskId".into(), Value::String(self.task_id(id, false)));
            }
            Some(_) => {
                meta.remove(tasks::RELATED_TASK);
            }
        }
        serde_json::value::to_raw_value(&result).unwrap_or(raw)
    }

    /// The id this call's client knows the upstream's task `id` (raw JSON) by.
    fn task_id(&self, id: String, modern_upstream: bool) -> String {
        let task = TaskRef {
            principal: self.principal.clone(),
            upstream: self.upstream.clone(),
            tool: self.target.clone(),
            id,
            modern: modern_upstream,
            // A core task lives in this replica's upstream session.
            owner: (!modern_upstream)
                .then(|| self.owner.as_deref().cloned())
                .flatten(),
        };
        envelope::seal_task(&self.sealer, &task)
    }

    /// A notification on its way to this call's client. A task's status
    /// notification gets the id Junction handed the client, in the client's
    /// wire (`notifications/tasks/status` or the extension's
    /// `notifications/tasks`); a client that may not have tasks gets none,
    /// and one Junction cannot read is dropped: an upstream's own task id
    /// never reaches a client. Others pass unchanged.
    pub fn relayed(&self, n: Box<RawValue>) -> Option<Box<RawValue>> {
        if !n.get().contains("notifications/tasks") {
            return Some(n);
        }
        #[derive(serde::Deserialize)]
        struct Note {
            method: String,
            params: Option<serde_json::Map<String, serde_json::Value>>,
        }
        let note: Note = serde_json::from_str(n.get()).ok()?;
        let modern_upstream = match note.method.as_str() {
            "notifications/tasks" => true,
            "notifications/tasks/status" => false,
            _ => return Some(n),
        };
        if self.tasks == Shape::None {
            return None;
        }
        let params = note.params?;
        let id = match params.get("taskId") {
            Some(id @ serde_json::Value::String(_)) => id.to_string(),
            _ => return None,
        };
        let params = tasks::with_client_id(params, &self.task_id(id, modern_upstream));
        let (method, params) = if self.modern {
            ("notifications/tasks", tasks::to_modern(params))
        } else {
            ("notifications/tasks/status", tasks::to_legacy(params))
        };
        let out = serde_json::json!({"jsonrpc": "2.0", "method": method, "params": params});
        serde_json::value::to_raw_value(&out).ok()
    }

    fn seal_state(&self, raw: &RawValue) -> Result<Box<RawValue>, GatewayError> {
        let mut members: std::collections::BTreeMap<String, Box<RawValue>> =
            serde_json::from_str(raw.get()).map_err(|_| GatewayError::UpstreamProtocol {
                upstream: self.upstream.clone(),
                detail: "input_required result is not a JSON object".into(),
            })?;
        if let Some(state) = members.get("requestState") {
            let token = envelope::wrap(
                &self.sealer,
                &self.principal,
                &self.upstream,
                &self.target,
                state.get(),
                self.ttl_ms,
            );
            let raw = serde_json::value::to_raw_value(&token)
                .map_err(|e| GatewayError::Unsupported(e.to_string()))?;
            members.insert("requestState".into(), raw);
        }
        serde_json::value::to_raw_value(&members)
            .map_err(|e| GatewayError::Unsupported(e.to_string()))
    }
}

/// A result's `resultType`, if it names one. The answer was validated as a
/// whole when it arrived: its members are found without parsing it again
/// (`object::members`). Two `resultType` keys are refused (a JavaScript
/// client would read the last, serde_json neither).
pub fn result_type(raw: &RawValue) -> Result<Option<Cow<'_, str>>, &'static str> {
    static KEY: LazyLock<object::Key> = LazyLock::new(|| object::Key::new("resultType"));
    let members = object::members(raw.get()).ok_or("result is not a JSON object")?;
    // Most answers name it first, last, or nowhere: no walk then.
    match object::sole(raw.get(), &KEY) {
        Sole::Absent => return Ok(None),
        Sole::Once(value) => {
            return object::string(value)
                .map(Some)
                .ok_or("resultType is not a string")
        }
        Sole::Walk => {}
    }
    let mut result_type = None;
    for (key, value) in members {
        if key == "resultType" {
            if result_type.is_some() {
                return Err("result names resultType twice");
            }
            result_type = Some(object::string(value).ok_or("resultType is not a string")?);
        }
    }
    Ok(result_type)
}

/// `{"resultType":"complete", ...rest}` without re-serializing the rest.
fn add_complete(raw: &RawValue) -> Option<Box<RawValue>> {
    let out = object::prepend(raw.get(), r#""resultType":"complete""#)?;
    RawValue::from_string(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finisher(modern: bool) -> Finisher {
        Finisher {
            modern,
            sealer: junction_protocol::seal::Sealer::random(),
            principal: "alice".into(),
            upstream: "up".into(),
            target: "tool".into(),
            ttl_ms: 60_000,
            tasks: Shape::None,
            owner: None,
        }
    }

    fn finish(modern: bool, result: &str) -> Result<String, GatewayError> {
        let raw = RawValue::from_string(result.to_owned()).unwrap();
        finisher(modern).result(raw).map(|r| r.get().to_owned())
    }

    #[test]
    fn a_results_related_task_is_named_by_the_callers_id() {
        let f = Finisher {
            tasks: Shape::Legacy,
            ..finisher(false)
        };
        let out = |result: &str| -> serde_json::Value {
            let raw = RawValue::from_string(result.to_owned()).unwrap();
            serde_json::from_str(f.result(raw).unwrap().get()).unwrap()
        };
        let named = out(
            r#"{"content":[],"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"up-7","x":1},"k":2}}"#,
        );
        let related = &named["_meta"][tasks::RELATED_TASK];
        let token = related["taskId"].as_str().unwrap();
        let task = envelope::open_task(&f.sealer, token, "alice").unwrap();
        assert_eq!(
            (task.id.as_str(), task.upstream.as_str()),
            (r#""up-7""#, "up")
        );
        assert_eq!(
            (&related["x"], &named["_meta"]["k"]),
            (&1.into(), &2.into())
        );
        // An id that is not a string is not passed on at all.
        let odd =
            out(r#"{"content":[],"_meta":{"io.modelcontextprotocol/related-task":{"taskId":7}}}"#);
        assert_eq!(odd["_meta"], serde_json::json!({}));
    }

    #[test]
    fn results_get_their_result_type_however_the_key_is_spelled() {
        // No resultType: a modern client is told the call is complete.
        assert_eq!(
            finish(true, r#"{"content":[]}"#).unwrap(),
            r#"{"resultType":"complete","content":[]}"#
        );
        assert_eq!(
            finish(false, r#"{"content":[]}"#).unwrap(),
            r#"{"content":[]}"#
        );
        // Present, plainly or through escapes: read, not added twice.
        let plain = r#"{"resultType":"complete","content":[]}"#;
        assert_eq!(finish(true, plain).unwrap(), plain);
        let escaped = r#"{"result\u0054ype":"complete","content":[]}"#;
        assert_eq!(finish(true, escaped).unwrap(), escaped);
        let unknown = r#"{"result\u0054ype":"task","content":[]}"#;
        assert!(matches!(
            finish(true, unknown),
            Err(GatewayError::UpstreamProtocol { .. })
        ));
        // Escapes elsewhere do not make a result without the key fail.
        assert_eq!(
            finish(true, r#"{"text":"caf\u00e9"}"#).unwrap(),
            r#"{"resultType":"complete","text":"caf\u00e9"}"#
        );
        for bad in ["[1]", "\"x\"", "null"] {
            assert!(
                matches!(
                    finish(true, bad),
                    Err(GatewayError::UpstreamProtocol { .. })
                ),
                "{bad}"
            );
            assert!(
                matches!(
                    finish(false, bad),
                    Err(GatewayError::UpstreamProtocol { .. })
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_result_type_read_twice_or_not_a_string_is_refused() {
        // A JavaScript client reads the last duplicate, serde_json refuses
        // them: neither reading is forwarded.
        for bad in [
            r#"{"resultType":"complete","content":[],"resultType":"task"}"#,
            r#"{"resultType":"task","result\u0054ype":"complete"}"#,
            r#"{"resultType":1,"content":[]}"#,
            r#"{"resultType":null}"#,
        ] {
            let err = finish(true, bad).expect_err(bad);
            assert!(
                matches!(err, GatewayError::UpstreamProtocol { .. }),
                "{bad}: {err:?}"
            );
        }
        // A resultType nested in the content is not the result's own.
        let nested = r#"{"content":[{"type":"text","resultType":"task"}],"resultType":"complete"}"#;
        assert_eq!(finish(true, nested).unwrap(), nested);
        let inner_only = r#"{"structuredContent":{"resultType":"input_required"}}"#;
        assert_eq!(
            finish(true, inner_only).unwrap(),
            r#"{"resultType":"complete","structuredContent":{"resultType":"input_required"}}"#
        );
    }

    #[test]
    fn add_complete_keeps_members_byte_for_byte() {
        let raw =
            RawValue::from_string(r#"{"content":[{"type":"text","text":"x  y"}]}"#.into()).unwrap();
        assert_eq!(
            add_complete(&raw).unwrap().get(),
            r#"{"resultType":"complete","content":[{"type":"text","text":"x  y"}]}"#
        );
        let empty = RawValue::from_string("{ }".into()).unwrap();
        assert_eq!(
            add_complete(&empty).unwrap().get(),
            r#"{"resultType":"complete"}"#
        );
        let not_obj = RawValue::from_string("[1]".into()).unwrap();
        assert!(add_complete(&not_obj).is_none());
    }

    #[test]
    fn task_notifications_carry_the_clients_id_in_the_clients_wire() {
        let n = |s: &str| RawValue::from_string(s.to_owned()).unwrap();
        let v1 = r#"{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"taskId":"up-1","status":"completed","ttl":5000}}"#;
        let mut f = finisher(true);
        assert!(
            f.relayed(n(v1)).is_none(),
            "no tasks for this call: dropped"
        );
        f.tasks = Shape::Modern;
        let out: serde_json::Value = serde_json::from_str(f.relayed(n(v1)).unwrap().get()).unwrap();
        assert_eq!(out["method"], "notifications/tasks");
        assert_eq!(out["params"]["ttlMs"], 5000);
        let sealed = out["params"]["taskId"].as_str().unwrap();
        let task = envelope::open_task(&f.sealer, sealed, "alice").unwrap();
        assert_eq!((task.id.as_str(), task.modern), ("\"up-1\"", false));
        // The id the task was created with, exactly.
        let created = f
            .task_created(
                tasks::created(&n(r#"{"task":{"taskId":"up-1","status":"working"}}"#))
                    .unwrap()
                    .unwrap(),
            )
            .unwrap();
        assert!(created.get().contains(sealed));
        let progress =
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}"#;
        assert_eq!(f.relayed(n(progress)).unwrap().get(), progress);
    }
}
