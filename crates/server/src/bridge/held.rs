//! What the bridge does with the replica's two tables (`state::Replica`'s
//! `held` and `waiting`), both bounded, expiring and keyed by the caller's
//! principal:
//! - held upstream calls waiting for a modern client's retry (`hold`, `resume`);
//! - server requests sent to a handshake-era client, waiting for the
//!   response it POSTs (`ask`, `client_response`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Response, StatusCode};
use junction_protocol::jsonrpc::{self, result_bytes, Id, RpcError};
use junction_upstream::{ResponseStream, ServerRequest};
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::{capability_of, Driver, Resumed};
use crate::context::Cx;
use crate::envelope;
use crate::error::GatewayError;
use crate::response::{self, Body};
use crate::state::{lock, Answer, Ask, HeldCall, Replica, MAX_HELD, MAX_WAITING};
use crate::{fleet, relay};
use junction_protocol::seal::Sealer;

/// How long a held call or an unanswered question lives.
pub(crate) const HOLD_TTL: Duration = Duration::from_secs(60);
const EXPIRED: &str = "input request expired, call again";

/// Keys the client sees: `elicitation-1`, `sampling-1`, ….
pub(super) fn number(requests: Vec<ServerRequest>) -> Vec<Ask> {
    let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
    requests
        .into_iter()
        .map(|r| {
            let kind = capability_of(&r.method);
            let n = counts.entry(kind).or_default();
            *n += 1;
            Ask {
                key: format!("{kind}-{n}"),
                id: r.id,
                method: r.method,
                params: r.params,
            }
        })
        .collect()
}

fn new_id() -> String {
    format!("{:032x}", rand::random::<u128>())
}

/// Hold `stream` and build the `InputRequiredResult` that names it.
pub(super) fn hold(
    d: &Driver,
    stream: ResponseStream,
    asks: Vec<Ask>,
) -> Result<(Vec<u8>, &'static str), GatewayError> {
    let f = &d.finish;
    let entry = new_id();
    let mut requests: Vec<(String, Box<RawValue>)> = Vec::with_capacity(asks.len());
    for a in &asks {
        let method = serde_json::value::to_raw_value(&a.method)
            .map_err(|e| GatewayError::Unsupported(e.to_string()))?;
        let empty = RawValue::from_string("{}".into())
            .map_err(|e| GatewayError::Unsupported(e.to_string()))?;
        let params = a.params.as_deref().unwrap_or(&empty);
        let req = jsonrpc::raw_object([("method", method.as_ref()), ("params", params)]);
        requests.push((a.key.clone(), req));
    }
    let owner = d.replica.advertise.load();
    let token = envelope::seal_pending(
        &f.sealer,
        (&f.principal, &f.upstream, &f.target),
        &entry,
        owner.as_deref().map(String::as_str),
        HOLD_TTL.as_millis() as u64,
    );
    let kind = RawValue::from_string("\"input_required\"".into())
        .map_err(|e| GatewayError::Unsupported(e.to_string()))?;
    let map = jsonrpc::raw_object(requests.iter().map(|(k, v)| (k.as_str(), v.as_ref())));
    let state = serde_json::value::to_raw_value(&token)
        .map_err(|e| GatewayError::Unsupported(e.to_string()))?;
    let result = jsonrpc::raw_object([
        ("resultType", kind.as_ref()),
        ("inputRequests", map.as_ref()),
        ("requestState", state.as_ref()),
    ]);
    let call = HeldCall {
        principal: f.principal.clone(),
        upstream: f.upstream.clone(),
        target: f.target.clone(),
        method: d.method,
        stream,
        asks,
        expires: Instant::now() + HOLD_TTL,
    };
    let expired: Vec<HeldCall>;
    {
        let mut held = lock(&d.replica.held);
        let now = Instant::now();
        let gone: Vec<String> = held
            .iter()
            .filter(|(_, c)| c.expires <= now)
            .map(|(k, _)| k.clone())
            .collect();
        expired = gone.iter().filter_map(|k| held.remove(k)).collect();
        if held.len() >= MAX_HELD {
            drop(held);
            drop(expired);
            return Err(GatewayError::Unsupported(
                "too many calls are waiting for client input; try again later".into(),
            ));
        }
        held.insert(entry.clone(), call);
    }
    // Dropping a held stream cancels its upstream request: do it outside the lock.
    drop(expired);
    let replica = Arc::downgrade(&d.replica);
    tokio::spawn(async move {
        tokio::time::sleep(HOLD_TTL).await;
        let Some(replica) = replica.upgrade() else {
            return;
        };
        let call = lock(&replica.held).remove(&entry);
        if call.is_some() {
            tracing::debug!("a call held for client input expired");
        }
        drop(call);
    });
    Ok((result_bytes(&d.id, &result), "input_required"))
}

/// Answer a held call's questions with the client's `inputResponses`; what is
/// still unanswered is asked again.
pub(super) async fn resume(
    entry: String,
    principal: &str,
    mut d: Driver,
    responses: BTreeMap<String, Box<RawValue>>,
) -> Result<Resumed, GatewayError> {
    let call = {
        let mut held = lock(&d.replica.held);
        match held.get(&entry) {
            Some(c)
                if c.principal == principal
                    && c.upstream == d.finish.upstream
                    && c.target == d.finish.target
                    && c.method == d.method =>
            {
                held.remove(&entry)
            }
            Some(_) => {
                return Err(GatewayError::InvalidParams(
                    "requestState was issued for another caller or tool".into(),
                ))
            }
            None => None,
        }
    };
    let Some(call) = call.filter(|c| c.expires > Instant::now()) else {
        return Err(GatewayError::InvalidParams(EXPIRED.into()));
    };
    let mut stream = call.stream;
    let mut missing = Vec::new();
    for ask in call.asks {
        match responses.get(&ask.key) {
            Some(answer) => {
                if let Err(e) = stream.reply(&ask.id, Ok(answer.clone())).await {
                    return Ok(Resumed::Answer(Err(GatewayError::from_upstream(
                        &d.finish.upstream,
                        e,
                    ))));
                }
            }
            None => missing.push(ask),
        }
    }
    if !missing.is_empty() {
        return Ok(Resumed::Answer(hold(&d, stream, missing)));
    }
    d.stream = Some(stream);
    Ok(Resumed::Continue(Box::new(d)))
}

/// Removes this call's questions when it stops waiting (answered, timed out, gone).
struct Asked<'a>(&'a Replica, Vec<(String, String)>);

impl Drop for Asked<'_> {
    fn drop(&mut self) {
        let mut w = lock(&self.0.waiting);
        for k in &self.1 {
            w.remove(k);
        }
    }
}

/// Send `questions` as JSON-RPC requests on a handshake-era client's SSE
/// stream and wait for its answers, in order.
pub(super) async fn ask(
    (replica, sealer): (&Replica, &Sealer),
    principal: &str,
    tx: &mpsc::Sender<Bytes>,
    questions: Vec<(String, Option<Box<RawValue>>)>,
) -> Result<Vec<Answer>, GatewayError> {
    let owner = replica.advertise.load();
    let mut asked = Asked(replica, Vec::with_capacity(questions.len()));
    let mut waits = Vec::with_capacity(questions.len());
    let empty =
        RawValue::from_string("{}".into()).map_err(|e| GatewayError::Unsupported(e.to_string()))?;
    for (method, params) in &questions {
        // Names this replica when replicas relay: the answer may land elsewhere.
        let id = fleet::question_id(
            sealer,
            owner.as_deref().map(String::as_str),
            HOLD_TTL.as_millis() as u64,
        );
        let (done, wait) = oneshot::channel();
        {
            let mut w = lock(&replica.waiting);
            if w.len() >= MAX_WAITING {
                return Err(GatewayError::Unsupported(
                    "too many server requests are waiting for clients; try again later".into(),
                ));
            }
            w.insert((principal.to_owned(), id.clone()), done);
        }
        asked.1.push((principal.to_owned(), id.clone()));
        let bytes =
            jsonrpc::request_bytes(&Id::Str(id), method, params.as_deref().unwrap_or(&empty));
        if tx.send(response::sse_event(&bytes)).await.is_err() {
            return Err(GatewayError::InvalidParams(
                "the client closed the stream".into(),
            ));
        }
        waits.push(wait);
    }
    let deadline = Instant::now() + HOLD_TTL;
    let mut answers = Vec::with_capacity(waits.len());
    for wait in waits {
        tokio::select! {
            got = wait => match got {
                Ok(a) => answers.push(a),
                Err(_) => return Err(GatewayError::InvalidParams(EXPIRED.into())),
            },
            _ = tx.closed() => return Err(GatewayError::InvalidParams("the client closed the stream".into())),
            _ = tokio::time::sleep_until(deadline) => {
                return Err(GatewayError::InvalidParams(
                    "the client did not answer the server request in time".into(),
                ))
            }
        }
    }
    Ok(answers)
}

#[derive(Deserialize)]
struct ClientReply {
    id: Option<Id>,
    method: Option<serde::de::IgnoredAny>,
    result: Option<Box<RawValue>>,
    error: Option<RpcError>,
}

/// What becomes of a handshake-era client's answer.
pub enum Reply {
    /// Handed to the waiting call here (202), or refused.
    Done(Result<Response<Body>, GatewayError>),
    /// The question was asked by this other replica: relay the answer there.
    Relay(String),
}

/// A POSTed JSON-RPC response from a handshake-era session, for a question
/// Junction asked on one of its streams: routed to the waiting call, 202, or
/// to the replica that asked it. `None`: not such a response (the endpoint
/// handles the body as usual).
pub fn client_response(cx: &Cx<'_>, body: &[u8]) -> Option<Reply> {
    let token = crate::context::text(cx.known.session_id)?;
    let reply: ClientReply = serde_json::from_slice(body).ok()?;
    if reply.method.is_some() || (reply.result.is_none() && reply.error.is_none()) {
        return None;
    }
    let session = match cx.session(token) {
        Ok((session, _)) => session,
        Err(e) => return Some(Reply::Done(Err(e))),
    };
    let answer = match (reply.result, reply.error) {
        (Some(r), None) => Ok(r),
        (None, Some(e)) => Err(e),
        _ => {
            return Some(Reply::Done(Err(GatewayError::Malformed(RpcError::new(
                junction_protocol::codes::INVALID_REQUEST,
                "a response has exactly one of result and error",
            )))))
        }
    };
    let Some(Id::Str(id)) = reply.id else {
        return Some(Reply::Done(Err(not_waiting())));
    };
    let waiting = lock(&cx.state.replica.waiting).remove(&(session.p, id.clone()));
    Some(match waiting {
        Some(done) => {
            let _ = done.send(answer);
            Reply::Done(Ok(response::empty(StatusCode::ACCEPTED)))
        }
        None => match fleet::question_owner(&cx.state.sealer, &id) {
            Some(owner) if relay::elsewhere(cx, &owner) => Reply::Relay(owner),
            _ => Reply::Done(Err(not_waiting())),
        },
    })
}

fn not_waiting() -> GatewayError {
    GatewayError::InvalidParams(
        "no server request with this id is waiting for an answer (expired or answered)".into(),
    )
}
