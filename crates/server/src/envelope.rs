//! Junction's envelope around an upstream's `requestState` (DESIGN §3). The upstream
//! only ever sees Junction's identity, so Junction binds the state to the real
//! caller, the upstream, the exposed tool and an expiry. On retry the envelope is
//! opened and the upstream's own state forwarded byte for byte. The sealed
//! references Junction hands out for input it holds (`seal_pending`) and for
//! tasks (`seal_task`) are bound the same way.

use junction_protocol::seal::{now_ms, Sealer};
use serde::{Deserialize, Serialize};

const PURPOSE: &str = "junction/request-state/v1";

#[derive(Serialize, Deserialize)]
struct Envelope {
    /// principal digest
    p: String,
    /// upstream id
    u: String,
    /// exposed tool name (or other method target)
    t: String,
    /// the upstream's requestState, as its raw JSON text
    s: String,
}

/// Seals `upstream_state` (raw JSON text of the upstream's `requestState`).
pub fn wrap(
    sealer: &Sealer,
    principal: &str,
    upstream: &str,
    target: &str,
    upstream_state: &str,
    ttl_ms: u64,
) -> String {
    let env = Envelope {
        p: principal.into(),
        u: upstream.into(),
        t: target.into(),
        s: upstream_state.into(),
    };
    let payload = serde_json::to_vec(&env).unwrap_or_default();
    sealer.seal(PURPOSE, &payload, now_ms().saturating_add(ttl_ms))
}

/// Opens an envelope made for this caller, upstream and target; returns the
/// upstream's raw requestState JSON text.
pub fn unwrap(
    sealer: &Sealer,
    token: &str,
    principal: &str,
    upstream: &str,
    target: &str,
) -> Result<String, &'static str> {
    let bytes = sealer
        .open(PURPOSE, token, now_ms())
        .map_err(|_| "requestState is invalid or expired")?;
    let env: Envelope = serde_json::from_slice(&bytes).map_err(|_| "requestState is invalid")?;
    if env.p != principal || env.u != upstream || env.t != target {
        return Err("requestState was issued for another caller or tool");
    }
    Ok(env.s)
}

/// The `requestState` Junction hands a modern client when a handshake-era
/// upstream asked for input mid-call: it names a call held by one replica
/// (`bridge`), bound to the caller, the upstream and the target, and, with
/// `fleet.advertise_url`, names that replica, so a retry landing on another
/// is relayed there (`relay`).
const PENDING_PURPOSE: &str = "junction/pending-input/v1";

#[derive(Serialize, Deserialize)]
struct PendingRef {
    p: String,
    u: String,
    t: String,
    /// the held call's entry id
    e: String,
    /// the replica holding it (its `fleet.advertise_url`)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    o: Option<String>,
}

/// A held call a pending-input token names.
#[derive(Debug, PartialEq, Eq)]
pub struct Held {
    pub entry: String,
    /// The replica that holds it, when replicas relay to each other.
    pub owner: Option<String>,
}

pub fn seal_pending(
    sealer: &Sealer,
    (principal, upstream, target): (&str, &str, &str),
    entry: &str,
    owner: Option<&str>,
    ttl_ms: u64,
) -> String {
    let r = PendingRef {
        p: principal.into(),
        u: upstream.into(),
        t: target.into(),
        e: entry.into(),
        o: owner.map(str::to_owned),
    };
    let payload = serde_json::to_vec(&r).unwrap_or_default();
    sealer.seal(PENDING_PURPOSE, &payload, now_ms().saturating_add(ttl_ms))
}

/// `Ok(None)`: not a pending-input token (it may be a wrapped upstream state).
/// `Ok(Some(held))`: a token of this caller, upstream and target.
pub fn open_pending(
    sealer: &Sealer,
    token: &str,
    principal: &str,
    upstream: &str,
    target: &str,
) -> Result<Option<Held>, &'static str> {
    let bytes = match sealer.open(PENDING_PURPOSE, token, now_ms()) {
        Ok(b) => b,
        Err(junction_protocol::seal::SealError::Expired) => {
            return Err("input request expired, call again")
        }
        Err(_) => return Ok(None),
    };
    let r: PendingRef = serde_json::from_slice(&bytes).map_err(|_| "requestState is invalid")?;
    if r.p != principal || r.u != upstream || r.t != target {
        return Err("requestState was issued for another caller or tool");
    }
    Ok(Some(Held {
        entry: r.e,
        owner: r.o,
    }))
}

/// A task id Junction hands a client (`tasks`): the upstream's own id, sealed
/// with the caller, the upstream, the exposed tool that created the task and
/// the wire the upstream spoke then, so `tasks/*` from any replica reaches the
/// right upstream, and only for the caller who created the task.
const TASK_PURPOSE: &str = "junction/task/v1";

/// A task id does not expire: the upstream's own `ttl` decides how long the
/// task lives (an id of a task it dropped is its "unknown task"). So the same
/// task always seals to the same id, and a status notification relayed later
/// carries exactly the id the client was handed.
const TASK_ID_EXPIRY_MS: u64 = u64::MAX;

/// What a sealed task id names.
#[derive(Serialize, Deserialize, Debug, PartialEq, Eq)]
pub struct TaskRef {
    #[serde(rename = "p")]
    pub principal: String,
    #[serde(rename = "u")]
    pub upstream: String,
    /// The exposed tool the task runs (authorized again on every `tasks/*`).
    #[serde(rename = "t")]
    pub tool: String,
    /// The upstream's task id, as its raw JSON text.
    #[serde(rename = "i")]
    pub id: String,
    /// The upstream spoke the 2026-07-28 tasks extension (else 2025-11-25 core tasks).
    #[serde(rename = "m")]
    pub modern: bool,
    /// The replica whose upstream session created a core task
    /// (`fleet.advertise_url`): such a task lives in that session, so
    /// `tasks/*` for it are relayed there.
    #[serde(rename = "o", default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

pub fn seal_task(sealer: &Sealer, task: &TaskRef) -> String {
    let payload = serde_json::to_vec(task).unwrap_or_default();
    sealer.seal(TASK_PURPOSE, &payload, TASK_ID_EXPIRY_MS)
}

/// Opens a task id made for this caller. Any failure reads as an unknown task.
pub fn open_task(sealer: &Sealer, token: &str, principal: &str) -> Result<TaskRef, &'static str> {
    let bytes = sealer
        .open(TASK_PURPOSE, token, now_ms())
        .map_err(|_| "unknown task (the id is invalid or expired)")?;
    let task: TaskRef = serde_json::from_slice(&bytes).map_err(|_| "unknown task")?;
    if task.principal != principal {
        return Err("unknown task (it was created by another caller)");
    }
    Ok(task)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bound_to_principal_upstream_and_tool() {
        let s = Sealer::new(b"0123456789abcdef0123456789abcdef");
        let t = wrap(&s, "alice", "alpha", "alpha__x", "\"st+/= ä\"", 60_000);
        assert_eq!(
            unwrap(&s, &t, "alice", "alpha", "alpha__x").unwrap(),
            "\"st+/= ä\""
        );
        assert!(unwrap(&s, &t, "bob", "alpha", "alpha__x").is_err());
        assert!(unwrap(&s, &t, "alice", "beta", "alpha__x").is_err());
        assert!(unwrap(&s, &t, "alice", "alpha", "alpha__y").is_err());
        let mut forged = t.clone();
        forged.insert(3, 'A');
        assert!(unwrap(&s, &forged, "alice", "alpha", "alpha__x").is_err());
    }

    #[test]
    fn pending_tokens_are_bound_and_distinct_from_wrapped_state() {
        let s = Sealer::new(b"0123456789abcdef0123456789abcdef");
        let bound = ("alice", "alpha", "alpha__x");
        let t = seal_pending(&s, bound, "e1", None, 60_000);
        assert_eq!(
            open_pending(&s, &t, "alice", "alpha", "alpha__x"),
            Ok(Some(Held {
                entry: "e1".into(),
                owner: None
            }))
        );
        let owned = seal_pending(&s, bound, "e2", Some("http://10.0.0.7:8080"), 60_000);
        assert_eq!(
            open_pending(&s, &owned, "alice", "alpha", "alpha__x"),
            Ok(Some(Held {
                entry: "e2".into(),
                owner: Some("http://10.0.0.7:8080".into())
            }))
        );
        assert!(open_pending(&s, &t, "bob", "alpha", "alpha__x").is_err());
        assert!(open_pending(&s, &t, "alice", "alpha", "alpha__y").is_err());
        let wrapped = wrap(&s, "alice", "alpha", "alpha__x", "\"st\"", 60_000);
        assert_eq!(
            open_pending(&s, &wrapped, "alice", "alpha", "alpha__x"),
            Ok(None)
        );
        assert!(unwrap(&s, &t, "alice", "alpha", "alpha__x").is_err());
    }

    #[test]
    fn task_ids_open_only_for_their_caller() {
        let s = Sealer::new(b"0123456789abcdef0123456789abcdef");
        let task = TaskRef {
            principal: "alice".into(),
            upstream: "alpha".into(),
            tool: "alpha__x".into(),
            id: "\"t-1\"".into(),
            modern: true,
            owner: None,
        };
        let t = seal_task(&s, &task);
        assert_eq!(seal_task(&s, &task), t, "one task, one id");
        assert_eq!(open_task(&s, &t, "alice"), Ok(task));
        assert!(open_task(&s, &t, "bob").is_err());
        let wrapped = wrap(&s, "alice", "alpha", "alpha__x", "\"st\"", 60_000);
        assert!(open_task(&s, &wrapped, "alice").is_err());
    }
}
