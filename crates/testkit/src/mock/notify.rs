//! Change notifications of the mocks: modern `subscriptions/listen` streams
//! (acknowledged, every message tagged with the listen id) and the legacy GET
//! stream of a session, plus legacy `resources/subscribe`/`unsubscribe`.
//! `MockUpstream::set_tools` announces `notifications/tools/list_changed` on
//! every open stream that asked for it.

use super::http::{error_body, result_body, Reply, Req};
use super::{lock, MockUpstream, Shared};
use serde_json::{json, Map, Value};
use std::collections::BTreeSet;
use std::sync::Mutex;
use tokio::sync::mpsc;

const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

struct Listener {
    tx: mpsc::Sender<Value>,
    /// Modern: the listen request's id. Legacy GET streams have none.
    subscription: Option<Value>,
    tools: bool,
    prompts: bool,
    resources: bool,
    /// Modern `resourceSubscriptions`; legacy streams use `Listeners::uris`.
    uris: BTreeSet<String>,
}

/// Open change streams of one mock.
#[derive(Default)]
pub(crate) struct Listeners {
    open: Mutex<Vec<Listener>>,
    /// Legacy `resources/subscribe` set (all sessions together: the mock has
    /// one client, the gateway).
    uris: Mutex<BTreeSet<String>>,
}

/// Modern `subscriptions/listen`.
pub(crate) fn listen(shared: &Shared, id: &Value, params: &Value) -> Reply {
    let Some(filter) = params.get("notifications").and_then(Value::as_object) else {
        return Reply::json(
            200,
            error_body(id, -32602, "params.notifications is required", None),
        );
    };
    let flag = |k: &str| filter.get(k).and_then(Value::as_bool).unwrap_or(false);
    let uris: BTreeSet<String> = filter
        .get("resourceSubscriptions")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    let mut granted = Map::new();
    for k in [
        "toolsListChanged",
        "promptsListChanged",
        "resourcesListChanged",
    ] {
        if flag(k) {
            granted.insert(k.into(), Value::Bool(true));
        }
    }
    if !uris.is_empty() {
        granted.insert("resourceSubscriptions".into(), json!(uris));
    }
    let (tx, rx) = mpsc::channel(64);
    let ack = json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
        "params": {"notifications": granted, "_meta": {SUBSCRIPTION_ID: id}}});
    let _ = tx.try_send(ack);
    lock(&shared.listeners.open).push(Listener {
        tx,
        subscription: Some(id.clone()),
        tools: flag("toolsListChanged"),
        prompts: flag("promptsListChanged"),
        resources: flag("resourcesListChanged"),
        uris,
    });
    Reply::Stream {
        rx,
        headers: Vec::new(),
    }
}

/// Legacy GET on a session: the standalone stream.
pub(crate) fn get_stream(shared: &Shared, req: &Req) -> Reply {
    let known = req
        .header("mcp-session-id")
        .map(|sid| lock(&shared.sessions).contains_key(sid));
    match known {
        // No session: not a GET this server knows (its older tests expect 405).
        None => Reply::Empty { status: 405 },
        Some(false) => Reply::json(
            404,
            error_body(&Value::Null, -32600, "Session not found", None),
        ),
        // As the Python SDK does: a GET that does not accept SSE is refused.
        Some(true)
            if !req
                .header("accept")
                .is_some_and(|a| a.contains("text/event-stream")) =>
        {
            Reply::json(
                406,
                error_body(
                    &Value::Null,
                    -32600,
                    "Not Acceptable: Client must accept text/event-stream",
                    None,
                ),
            )
        }
        Some(true) => {
            let (tx, rx) = mpsc::channel(64);
            lock(&shared.listeners.open).push(Listener {
                tx,
                subscription: None,
                tools: true,
                prompts: true,
                resources: true,
                uris: BTreeSet::new(),
            });
            Reply::Stream {
                rx,
                headers: Vec::new(),
            }
        }
    }
}

/// Legacy `resources/subscribe` / `resources/unsubscribe`.
pub(crate) fn subscription(shared: &Shared, id: &Value, method: &str, params: &Value) -> Value {
    let Some(uri) = params.get("uri").and_then(Value::as_str) else {
        return error_body(id, -32602, "params.uri is required", None);
    };
    let mut uris = lock(&shared.listeners.uris);
    if method == "resources/subscribe" {
        uris.insert(uri.to_owned());
    } else {
        uris.remove(uri);
    }
    result_body(id, json!({}))
}

fn emit(shared: &Shared, wants: impl Fn(&Listener) -> bool, method: &str, uri: Option<&str>) {
    let mut open = lock(&shared.listeners.open);
    open.retain(|l| !l.tx.is_closed());
    for l in open.iter().filter(|l| wants(l)) {
        let mut params = Map::new();
        if let Some(u) = uri {
            params.insert("uri".into(), json!(u));
        }
        if let Some(sid) = &l.subscription {
            params.insert("_meta".into(), json!({SUBSCRIPTION_ID: sid}));
        }
        let mut msg = json!({"jsonrpc": "2.0", "method": method});
        if !params.is_empty() {
            msg["params"] = Value::Object(params);
        }
        let _ = l.tx.try_send(msg);
    }
}

pub(crate) fn tools_changed(shared: &Shared) {
    emit(
        shared,
        |l| l.tools,
        "notifications/tools/list_changed",
        None,
    );
}

impl MockUpstream {
    /// Announce `notifications/{kind}/list_changed` (`kind`: tools, prompts or
    /// resources) on every open stream that asked for it.
    pub fn announce_list_changed(&self, kind: &str) {
        let method = format!("notifications/{kind}/list_changed");
        emit(
            &self.shared,
            |l| match kind {
                "tools" => l.tools,
                "prompts" => l.prompts,
                _ => l.resources,
            },
            &method,
            None,
        );
    }

    /// Announce `notifications/resources/updated` for `uri` on the streams
    /// subscribed to it (modern `resourceSubscriptions`, legacy `resources/subscribe`).
    pub fn touch_resource(&self, uri: &str) {
        let legacy = lock(&self.shared.listeners.uris).contains(uri);
        emit(
            &self.shared,
            |l| match l.subscription {
                Some(_) => l.uris.contains(uri),
                None => legacy,
            },
            "notifications/resources/updated",
            Some(uri),
        );
    }

    /// Open change streams (listen or GET) that are still connected.
    pub fn open_change_streams(&self) -> usize {
        let mut open = lock(&self.shared.listeners.open);
        open.retain(|l| !l.tx.is_closed());
        open.len()
    }

    /// URIs subscribed so far: modern listen streams' and legacy `resources/subscribe`'s.
    pub fn subscribed_uris(&self) -> BTreeSet<String> {
        let mut all = lock(&self.shared.listeners.uris).clone();
        for l in lock(&self.shared.listeners.open).iter() {
            if !l.tx.is_closed() {
                all.extend(l.uris.iter().cloned());
            }
        }
        all
    }
}
