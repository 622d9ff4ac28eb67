//! `tasks/get`, `tasks/cancel` (both eras), the 2026-07-28 extension's
//! `tasks/update` and the handshake era's `tasks/result`, for a task the
//! resolve phase found by the id Junction sealed (`Target::Task`). The
//! upstream is asked with its own id, and the answer carries the client's id
//! in the client's shape (`tasks`): the same wire passes through, and the two
//! wires are translated where they map (NOTES §12.3):
//!
//! | client \ upstream | 2026-07-28 extension | 2025-11-25 core tasks |
//! |---|---|---|
//! | modern `tasks/get` | as is | `tasks/get`, plus `tasks/result` once terminal, inlined |
//! | modern `tasks/cancel` | as is | `tasks/cancel`, answered with the empty ack |
//! | modern `tasks/update` | as is | refused: that wire takes input inside `tasks/result` |
//! | legacy `tasks/get` | `tasks/get`, outcome left out | as is |
//! | legacy `tasks/result` | `tasks/get` polled until terminal | forwarded (server requests bridged) |
//! | legacy `tasks/cancel` | `tasks/cancel`, then `tasks/get` for the `Task` | as is |
//!
//! On a route whose guardrail checks results, a finished task's result goes
//! through the hook each time a client reads it (`tasks/get` for a modern
//! client, `tasks/result` for a handshake-era one): the call that created the
//! task skipped the result phase.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use http::{Response, StatusCode};
use junction_protocol::jsonrpc::{error_bytes, result_bytes, Id, RawParams, RpcError};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::Request;
use crate::context::{ClientSide, Cx, Target};
use crate::envelope::TaskRef;
use crate::error::GatewayError;
use crate::forward::{self, answer_of, Outbound};
use crate::guardrail::{self, ResultCheck, Verdict};
use crate::identity;
use crate::record::Record;
use crate::relay;
use crate::response::{self, Body};
use crate::state::UpstreamEntry;
use crate::tasks::{self, Shape};
use crate::views;

type Answer = Result<Map<String, Value>, RpcError>;

/// A core task lives in the upstream session of the replica that created it:
/// a `tasks/*` for it that lands on another replica is relayed there (`relay`).
async fn relayed(cx: &Cx<'_>, r: &Request<'_>) -> Option<Result<Response<Body>, GatewayError>> {
    let Target::Task { task, .. } = &r.target else {
        return None;
    };
    let owner = task.owner.as_deref()?;
    if !relay::elsewhere(cx, owner) {
        return None;
    }
    Some(Box::pin(relay::to_owner(cx, owner)).await)
}

pub async fn get(cx: &Cx<'_>, id: &Id, r: Request<'_>) -> Result<Response<Body>, GatewayError> {
    if let Some(answer) = relayed(cx, &r).await {
        return answer;
    }
    let (task, token, u) = task_of(cx, &r)?;
    let answer = ask(cx, &r.client, u, task, "tasks/get", None).await?;
    let task_now = match answer {
        Ok(t) => tasks::with_client_id(t, token),
        Err(e) => return Ok(rpc_error(id, &e)),
    };
    let out = match (r.client.is_modern(), task.modern) {
        (true, true) | (false, false) => task_now,
        (false, true) => tasks::to_legacy(task_now),
        (true, false) => {
            // The outcome of a finished core task comes from `tasks/result`.
            let payload = match tasks::status(&task_now) {
                Some("completed" | "failed") => Some(
                    ask(cx, &r.client, u, task, "tasks/result", None)
                        .await?
                        .map(Value::Object),
                ),
                _ => None,
            };
            tasks::detailed(task_now, payload)
        }
    };
    // A modern client reads a finished task's result here.
    let mut out = out;
    let check = if out.contains_key("result") {
        result_check(cx, task).await
    } else {
        None
    };
    if let (Some(check), Some(result)) = (check, out.get_mut("result")) {
        *result = guarded(&check, std::mem::take(result)).await?;
    }
    reply(id, &Value::Object(out))
}

pub async fn cancel(cx: &Cx<'_>, id: &Id, r: Request<'_>) -> Result<Response<Body>, GatewayError> {
    if let Some(answer) = relayed(cx, &r).await {
        return answer;
    }
    let (task, token, u) = task_of(cx, &r)?;
    let answer = ask(cx, &r.client, u, task, "tasks/cancel", None).await?;
    match (r.client.is_modern(), task.modern) {
        (true, true) | (false, false) => match answer {
            Ok(t) => reply(id, &Value::Object(tasks::with_client_id(t, token))),
            Err(e) => Ok(rpc_error(id, &e)),
        },
        (true, false) => {
            // The extension's cancel is an idempotent ack; core tasks refuse
            // to cancel a finished task, which the ack covers too.
            if let Err(e) = answer {
                let now = ask(cx, &r.client, u, task, "tasks/get", None).await?;
                if !now.is_ok_and(|t| tasks::is_terminal(tasks::status(&t))) {
                    return Ok(rpc_error(id, &e));
                }
            }
            reply(id, &serde_json::json!({"resultType": "complete"}))
        }
        (false, true) => {
            if let Err(e) = answer {
                return Ok(rpc_error(id, &e));
            }
            // A core-tasks client reads the task back from its cancel.
            match ask(cx, &r.client, u, task, "tasks/get", None).await? {
                Ok(t) => reply(
                    id,
                    &Value::Object(tasks::to_legacy(tasks::with_client_id(t, token))),
                ),
                Err(e) => Ok(rpc_error(id, &e)),
            }
        }
    }
}

pub async fn update(cx: &Cx<'_>, id: &Id, r: Request<'_>) -> Result<Response<Body>, GatewayError> {
    let (task, token, u) = task_of(cx, &r)?;
    if !task.modern {
        return Err(GatewayError::Unsupported(format!(
            "task of upstream {} is a 2025-11-25 core task, which takes input inside tasks/result; Junction does not turn tasks/update into that yet",
            task.upstream
        )));
    }
    let responses = r
        .params
        .as_ref()
        .and_then(|p| p.get("inputResponses"))
        .map(|v| &**v);
    match ask(cx, &r.client, u, task, "tasks/update", responses).await? {
        Ok(t) => reply(id, &Value::Object(tasks::with_client_id(t, token))),
        Err(e) => Ok(rpc_error(id, &e)),
    }
}

/// The handshake era's blocking `tasks/result`: forwarded to a core-tasks
/// upstream as a call is (its server requests bridged to this client); for
/// an extension upstream, `tasks/get` until the task is finished.
pub async fn result(cx: &Cx<'_>, id: &Id, r: Request<'_>) -> Result<Response<Body>, GatewayError> {
    if let Some(answer) = relayed(cx, &r).await {
        return answer;
    }
    let (task, _, u) = task_of(cx, &r)?;
    let check = result_check(cx, task).await;
    if !task.modern {
        let mut params = r.params.clone().unwrap_or_default();
        params.insert("taskId".into(), Cow::Owned(raw(&task.id)?));
        let out = Outbound {
            method: "tasks/result",
            params,
            param_headers: Vec::new(),
            record: Record::upstream(&cx.state.metrics, &u.id, "tasks/result"),
            relay_notifications: true,
            on_result: None,
            check: check.clone(),
            unknown_name: None,
            // Its status notifications carry the client's id.
            tasks: Shape::Legacy,
        };
        let answered = forward::forward(cx, id, &r.client, u, &task.tool, out).await;
        return match (check, answered) {
            (Some(check), Ok(response)) => forward::check_whole(id, &check, response).await,
            (_, answered) => answered,
        };
    }
    loop {
        let now = match ask(cx, &r.client, u, task, "tasks/get", None).await? {
            Ok(t) => t,
            Err(e) => return Ok(rpc_error(id, &e)),
        };
        match tasks::status(&now) {
            Some("completed") => {
                let result = now.get("result").cloned().unwrap_or(Value::Null);
                let result = match &check {
                    Some(check) => guarded(check, result).await?,
                    None => result,
                };
                return reply(id, &result);
            }
            Some("failed") => {
                let e = now.get("error").cloned().unwrap_or(Value::Null);
                let e = RpcError::new(
                    e.get("code").and_then(Value::as_i64).unwrap_or(-32603),
                    e.get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("task failed"),
                );
                return Ok(rpc_error(id, &e));
            }
            Some("cancelled") => {
                return Ok(rpc_error(id, &RpcError::new(-32603, "task was cancelled")));
            }
            Some("input_required") => {
                return Err(GatewayError::Unsupported(format!(
                    "task of upstream {} needs client input, which Junction does not relay to a handshake-era client's tasks/result yet",
                    task.upstream
                )));
            }
            _ => {}
        }
        let every = now
            .get("pollIntervalMs")
            .and_then(Value::as_u64)
            .unwrap_or(500)
            .clamp(100, 5_000);
        tokio::time::sleep(Duration::from_millis(every)).await;
    }
}

/// The route's guardrail result phase for `task`'s tool, when the route
/// checks results: a task's result reaches its client later, by `tasks/get`
/// (modern) or `tasks/result` (handshake era), and is checked each time it
/// does. The hook is told the tool's name upstream while the route still
/// lists the tool (else its exposed name).
async fn result_check(cx: &Cx<'_>, task: &TaskRef) -> Option<Arc<ResultCheck>> {
    let g = cx.route.guardrail.as_ref().filter(|g| g.checks_results())?;
    let catalog = views::route_catalog(cx).await;
    let original = catalog
        .position(&task.tool)
        .and_then(|i| catalog.tools.get(i))
        .map_or(task.tool.as_str(), |t| t.original.as_str());
    let call = guardrail::Call {
        route: &cx.route.path,
        principal: cx.identity.as_ref().map(|p| p.subject.as_str()),
        tool: &task.tool,
        upstream: &task.upstream,
        upstream_tool: original,
        metrics: &cx.state.metrics,
    };
    Some(Arc::new(ResultCheck::new(g, &call)))
}

/// A task's `result` as the guardrail allows it: kept, the hook's rewrite,
/// or refused (the error).
async fn guarded(check: &ResultCheck, result: Value) -> Result<Value, GatewayError> {
    let raw = serde_json::value::to_raw_value(&result)
        .map_err(|e| GatewayError::Unsupported(e.to_string()))?;
    match check.result(&raw).await? {
        Verdict::Allow => Ok(result),
        Verdict::Rewrite(new) => {
            serde_json::from_str(new.get()).map_err(|e| GatewayError::Unsupported(e.to_string()))
        }
    }
}

fn task_of<'r>(
    cx: &Cx<'r>,
    r: &'r Request,
) -> Result<(&'r TaskRef, &'r str, &'r UpstreamEntry), GatewayError> {
    let Target::Task { task, token } = &r.target else {
        return Err(GatewayError::InvalidParams("needs params.taskId".into()));
    };
    let u = cx.state.upstreams.get(&task.upstream).ok_or_else(|| {
        GatewayError::InvalidParams(format!("unknown task (upstream {} is gone)", task.upstream))
    })?;
    Ok((task, token, u))
}

/// `method` for `task` on its upstream, with the upstream's own id: the
/// answer as a JSON object, or the upstream's JSON-RPC error as it sent it.
/// A modern upstream is asked as a client that declared the extension.
async fn ask(
    cx: &Cx<'_>,
    client: &ClientSide,
    u: &UpstreamEntry,
    task: &TaskRef,
    method: &'static str,
    input: Option<&RawValue>,
) -> Result<Answer, GatewayError> {
    let mut params = RawParams::new();
    params.insert("taskId".into(), Cow::Owned(raw(&task.id)?));
    if let Some(input) = input {
        params.insert("inputResponses".into(), Cow::Borrowed(input));
    }
    let mut request = client.upstream_request(cx, method, params, Vec::new());
    if task.modern {
        // The extension's task lives on the modern wire, also for a
        // handshake-era client of a dual-era upstream.
        if let Some(caps) = &request.client_capabilities {
            request.client_capabilities = Some(Cow::Owned(tasks::declaring(caps)));
        }
        request.handshake_client = false;
    }
    if u.credentials.is_some() {
        request.authorization = Box::pin(identity::authorization(cx, u)).await?;
    }
    Ok(match answer_of(u, request).await? {
        Ok(raw) => match serde_json::from_str::<Map<String, Value>>(raw.get()) {
            Ok(m) => Ok(m),
            Err(_) => {
                return Err(GatewayError::UpstreamProtocol {
                    upstream: u.id.clone(),
                    detail: format!("{method} result is not a JSON object"),
                })
            }
        },
        Err(e) => Err(e),
    })
}

fn raw(text: &str) -> Result<Box<RawValue>, GatewayError> {
    RawValue::from_string(text.to_owned()).map_err(|e| GatewayError::Unsupported(e.to_string()))
}

fn reply(id: &Id, result: &Value) -> Result<Response<Body>, GatewayError> {
    let raw = serde_json::value::to_raw_value(result)
        .map_err(|e| GatewayError::Unsupported(e.to_string()))?;
    Ok(response::json(StatusCode::OK, result_bytes(id, &raw)))
}

/// The upstream's own JSON-RPC error, passed to the client unchanged.
fn rpc_error(id: &Id, e: &RpcError) -> Response<Body> {
    response::json(StatusCode::OK, error_bytes(Some(id), e))
}
