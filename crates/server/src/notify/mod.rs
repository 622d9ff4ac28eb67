//! The change hub at work: every open change stream (modern
//! `subscriptions/listen`, handshake-era GET) with a digest of the lists its
//! client saw last. The hub's tables are `state::Hub` (in the replica's
//! tables, carried across reloads); what is done with them is here.
//!
//! Upstream changes (`Upstream::changes()`, fed by the standing upstream
//! streams) invalidate that upstream's cached lists and wake one diff task; a
//! reload wakes it too. The diff recomputes what each subscriber sees (route
//! include/exclude, then its authorization) and sends `list_changed` only for
//! the lists that really changed for it. Resource updates go to the streams
//! that asked for that URI of that upstream.
//!
//! Per replica: each replica fans in on its own upstream streams; what a
//! handshake-era client changed on another replica (a session ended, its
//! subscribed URIs) arrives through the fleet bus and is applied here
//! (`Hub::apply`). Nothing survives a restart (a client reconnects and lists
//! again). Every stream has a
//! bounded buffer: a client that stops reading is disconnected.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::HeaderMap;
use junction_catalog::lists::namespaced;
use junction_protocol::jsonrpc::result_bytes;
use junction_protocol::meta;
use junction_upstream::Change;
use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::context::Cx;
use crate::fleet;
use crate::logging::Level;
use crate::response::sse_event;
use crate::state::{
    lock, Digests, Hub, RouteState, SessionUris, State, Subscriber, Tag, UpstreamEntry, Wants,
    MAX_SUBSCRIBED_SESSIONS, MAX_SUBSCRIBERS,
};

mod stream;
mod view;

pub use stream::message;
use stream::{keep_alive, shutdown_signal};
use view::visible;

/// SSE keep-alive comment interval on change streams.
pub const KEEPALIVE: Duration = Duration::from_secs(15);
/// Messages a stream may have queued before its client counts as gone.
const STREAM_BUFFER: usize = 64;
/// Changes arriving this close together are diffed once.
const COALESCE: Duration = Duration::from_millis(50);

/// The upstream's own URI of a subscribed one (namespaced or not).
fn own_uri(uri: &str, upstream: &str) -> String {
    let prefix = namespaced(upstream, "");
    uri.strip_prefix(prefix.as_str()).unwrap_or(uri).to_owned()
}

impl Hub {
    pub fn new() -> Arc<Hub> {
        Arc::new(Hub::default())
    }

    /// Makes `state` the one diffs run against (cheap when it already is).
    /// Its upstreams' change notices invalidate their cached lists from now
    /// on, whether or not anyone listens.
    pub fn attach(self: &Arc<Self>, state: &Arc<State>) {
        let same = self
            .current
            .load()
            .as_ref()
            .is_some_and(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(state)));
        if !same {
            self.current.store(Some(Arc::new(Arc::downgrade(state))));
            for entry in state.upstreams.values() {
                self.listen_to(entry);
            }
            self.follow_fleet(state);
        }
    }

    /// Starts applying what other replicas changed (`fleet`), once: what
    /// already arrived first, before this request goes on.
    fn follow_fleet(self: &Arc<Self>, state: &State) {
        let Some(mut received) = state.replica.fleet.get().and_then(|b| b.take_received()) else {
            return;
        };
        while let Ok((event, ttl)) = received.try_recv() {
            self.apply(state, event, ttl);
        }
        let hub = Arc::clone(self);
        tokio::spawn(async move {
            while let Some((event, ttl)) = received.recv().await {
                if let Some(state) = hub.state() {
                    hub.apply(&state, event, ttl);
                }
            }
        });
    }

    /// One change another replica made, applied here as it was there.
    fn apply(&self, state: &State, event: fleet::Event, ttl: Duration) {
        let replica = &state.replica;
        match event {
            fleet::Event::Ended { session } => {
                replica.revoked.revoke(&session, ttl);
                replica.log_levels.forget(&session);
                self.end_session(&session);
            }
            fleet::Event::Level { session, level } => {
                if let Some(level) = Level::parse(&level) {
                    let _ = replica.log_levels.set(&session, level, ttl);
                }
            }
            fleet::Event::Uris {
                route,
                session,
                uris,
            } => {
                {
                    let mut sessions = lock(&self.sessions);
                    if uris.is_empty() {
                        sessions.remove(&(route, session));
                    } else if sessions.len() < MAX_SUBSCRIBED_SESSIONS
                        || sessions.contains_key(&(route.clone(), session.clone()))
                    {
                        let expires = tokio::time::Instant::now() + ttl;
                        sessions.insert((route, session), SessionUris { uris, expires });
                    }
                }
                self.refresh_resource_watch(state);
            }
            fleet::Event::Cancel { session, request } => {
                if let Ok(id) = serde_json::from_str(&request) {
                    replica.in_flight.cancel(&session, &id);
                }
            }
        }
    }

    fn state(&self) -> Option<Arc<State>> {
        self.current.load().as_ref().and_then(|w| w.upgrade())
    }

    pub fn open_streams(&self) -> usize {
        lock(&self.subs).len()
    }

    /// Registers a stream for the caller of `cx` and returns its receiver,
    /// `greeting` (the acknowledgement) queued first; `None` when the replica
    /// already holds `MAX_SUBSCRIBERS` streams.
    /// The digests of what it sees now are taken first, so the next change is
    /// measured against them.
    pub async fn subscribe(
        self: &Arc<Self>,
        cx: &Cx<'_>,
        wants: Wants,
        tag: Tag,
        greeting: Option<Bytes>,
    ) -> Option<(Arc<Subscriber>, mpsc::Receiver<Bytes>)> {
        if self.open_streams() >= MAX_SUBSCRIBERS {
            return None;
        }
        self.start();
        self.watch_route(cx.state, cx.route);
        let first = visible(cx, &wants).await;
        let (tx, rx) = mpsc::channel(STREAM_BUFFER);
        if let Some(g) = greeting {
            // Before the stream is registered: nothing can precede it.
            let _ = tx.try_send(g);
        }
        let sub = Arc::new(Subscriber {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            route: cx.route.path.clone(),
            identity: cx.identity.clone(),
            principal: cx.principal.clone(),
            wants,
            tag,
            tx,
            cancel: CancellationToken::new(),
            last: Mutex::new(first),
        });
        lock(&self.subs).insert(sub.id, sub.clone());
        let kind = match sub.tag {
            Tag::Modern(_) => "listen",
            Tag::Legacy { .. } => "get",
        };
        cx.state
            .metrics
            .open_streams
            .with_label_values(&[kind])
            .inc();
        self.refresh_resource_watch(cx.state);
        tokio::spawn(keep_alive(Arc::downgrade(self), sub.clone(), kind));
        Some((sub, rx))
    }

    /// Queues one message; a full buffer disconnects the stream.
    pub fn send(&self, sub: &Subscriber, message: Bytes) {
        match sub.tx.try_send(message) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                tracing::info!(route = %sub.route, "change stream client is not reading; disconnecting it");
                self.remove(sub.id);
            }
            Err(mpsc::error::TrySendError::Closed(_)) => self.remove(sub.id),
        }
    }

    /// A session ended by DELETE: its GET streams end and what it subscribed
    /// to is forgotten.
    pub(crate) fn end_session(&self, session: &str) {
        let ids: Vec<u64> = lock(&self.subs)
            .values()
            .filter(|s| matches!(&s.tag, Tag::Legacy { session: k } if k == session))
            .map(|s| s.id)
            .collect();
        lock(&self.sessions).retain(|(_, k), _| k != session);
        for id in ids {
            self.remove(id);
        }
        if let Some(state) = self.state() {
            self.refresh_resource_watch(&state);
        }
    }

    fn remove(&self, id: u64) {
        let gone = lock(&self.subs).remove(&id);
        if let Some(sub) = gone {
            sub.cancel.cancel();
            if let Some(state) = self.state() {
                self.refresh_resource_watch(&state);
            }
        }
    }

    /// Ends a stream gracefully: modern streams get the listen response.
    fn finish(&self, sub: &Subscriber) {
        if let Tag::Modern(id) = &sub.tag {
            let result = json!({"resultType": "complete", "_meta": {(meta::SUBSCRIPTION_ID): id}});
            if let Ok(raw) = serde_json::value::to_raw_value(&result) {
                let _ = sub.tx.try_send(sse_event(&result_bytes(id, &raw)));
            }
        }
        self.remove(sub.id);
    }

    /// Ends every stream gracefully (gateway shutdown).
    pub fn close_all(&self) {
        let all: Vec<Arc<Subscriber>> = lock(&self.subs).values().cloned().collect();
        for sub in all {
            self.finish(&sub);
        }
    }

    /// A reload swapped `state` in: watch its upstreams and diff at once.
    pub fn reloaded(self: &Arc<Self>, state: &Arc<State>) {
        self.attach(state);
        let routes: HashSet<String> = lock(&self.subs).values().map(|s| s.route.clone()).collect();
        for path in routes {
            if let Some(route) = state.routes.get(&path) {
                self.watch_route(state, route);
            }
        }
        self.refresh_resource_watch(state);
        self.wake.notify_one();
    }

    fn start(self: &Arc<Self>) {
        if self.started.swap(true, Ordering::AcqRel) {
            return;
        }
        let hub = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                let Some(h) = hub.upgrade() else { return };
                let wake = async { h.wake.notified().await };
                wake.await;
                tokio::time::sleep(COALESCE).await;
                if let Some(state) = h.state() {
                    h.diff_all(&state).await;
                }
            }
        });
        // The listener drains connections gracefully on these signals; listen
        // streams never end on their own, so end them first (with their
        // final response) instead of holding shutdown for the grace period.
        let hub = Arc::downgrade(self);
        tokio::spawn(async move {
            shutdown_signal().await;
            if let Some(h) = hub.upgrade() {
                h.close_all();
            }
        });
    }

    /// Opens the standing change stream of every upstream of the route: only
    /// once someone listens, so an idle gateway holds no upstream streams.
    fn watch_route(self: &Arc<Self>, state: &State, route: &RouteState) {
        for entry in route
            .upstreams
            .iter()
            .filter_map(|u| state.upstreams.get(u))
        {
            self.listen_to(entry);
            entry.client.start_watching();
        }
    }

    /// Consumes the upstream client's changes (once per client).
    fn listen_to(self: &Arc<Self>, entry: &UpstreamEntry) {
        let key = Arc::as_ptr(&entry.client) as usize;
        if !lock(&self.watched).insert(key) {
            return;
        }
        let mut changes = entry.client.changes();
        let hub = Arc::downgrade(self);
        let upstream = entry.id.clone();
        tokio::spawn(async move {
            while let Some(change) = changes.recv().await {
                let Some(h) = hub.upgrade() else { return };
                h.on_change(&upstream, change);
            }
            if let Some(h) = hub.upgrade() {
                lock(&h.watched).remove(&key);
            }
        });
    }

    fn on_change(&self, upstream: &str, change: Change) {
        let Some(state) = self.state() else { return };
        tracing::debug!(upstream, ?change, "upstream change");
        const PROMPTS: &[&str] = &["prompts/list"];
        const RESOURCES: &[&str] = &["resources/list", "resources/templates/list"];
        match change {
            Change::ResourceUpdated { uri } => return self.resource_updated(upstream, &uri),
            Change::ToolsListChanged => state.cache.invalidate(upstream),
            Change::PromptsListChanged => state.replica.lists.invalidate(upstream, PROMPTS),
            Change::ResourcesListChanged => state.replica.lists.invalidate(upstream, RESOURCES),
            Change::Missed => {
                state.cache.invalidate(upstream);
                state.replica.lists.invalidate(upstream, PROMPTS);
                state.replica.lists.invalidate(upstream, RESOURCES);
            }
        }
        self.wake.notify_one();
    }

    fn resource_updated(&self, upstream: &str, uri: &str) {
        let subs: Vec<Arc<Subscriber>> = lock(&self.subs).values().cloned().collect();
        let now = tokio::time::Instant::now();
        // A subscriber names the URI as it was listed to it: the upstream's own,
        // or namespaced when an earlier upstream lists the same one.
        let namespaced = namespaced(upstream, uri);
        for sub in subs {
            let wants = |uris: &BTreeMap<String, String>| {
                [uri, namespaced.as_str()]
                    .into_iter()
                    .find(|k| uris.get(*k).is_some_and(|u| u == upstream))
                    .map(str::to_owned)
            };
            let wanted = match &sub.tag {
                Tag::Modern(_) => wants(&sub.wants.uris),
                Tag::Legacy { session } => lock(&self.sessions)
                    .get(&(sub.route.clone(), session.clone()))
                    .filter(|s| s.expires > now)
                    .and_then(|s| wants(&s.uris)),
            };
            if let Some(listed) = wanted {
                let msg = message(&sub.tag, "notifications/resources/updated", Some(&listed));
                self.send(&sub, msg);
            }
        }
    }

    /// Tells each upstream which of its URIs some stream wants updates for.
    pub(crate) fn refresh_resource_watch(&self, state: &State) {
        let mut per_upstream: HashMap<String, BTreeSet<String>> = HashMap::new();
        for sub in lock(&self.subs).values() {
            for (uri, up) in &sub.wants.uris {
                per_upstream
                    .entry(up.clone())
                    .or_default()
                    .insert(own_uri(uri, up));
            }
        }
        let now = tokio::time::Instant::now();
        {
            let mut sessions = lock(&self.sessions);
            sessions.retain(|_, s| s.expires > now);
            let live: HashSet<(String, String)> = lock(&self.subs)
                .values()
                .filter_map(|s| match &s.tag {
                    Tag::Legacy { session } => Some((s.route.clone(), session.clone())),
                    Tag::Modern(_) => None,
                })
                .collect();
            for (key, s) in sessions.iter() {
                if !live.contains(key) {
                    continue;
                }
                for (uri, up) in &s.uris {
                    per_upstream
                        .entry(up.clone())
                        .or_default()
                        .insert(own_uri(uri, up));
                }
            }
        }
        for entry in state.upstreams.values() {
            let uris = per_upstream.remove(&entry.id).unwrap_or_default();
            entry.client.watch_resources(uris);
        }
    }

    async fn diff_all(&self, state: &State) {
        let subs: Vec<Arc<Subscriber>> = lock(&self.subs).values().cloned().collect();
        let mut seen: HashMap<String, Digests> = HashMap::new();
        let headers = HeaderMap::new();
        for sub in subs {
            let Some(route) = state.routes.get(&sub.route) else {
                // The route is gone with the reload: its streams end.
                self.finish(&sub);
                continue;
            };
            // Rules read scopes and claims: subscribers alike in all of
            // them see the same lists, which are computed once.
            let grants = sub
                .identity
                .as_ref()
                .map(|p| (p.scopes.join(" "), p.claims.to_string()));
            let w = &sub.wants;
            let key = format!(
                "{}|{}|{:?}|{}{}{}",
                sub.route, sub.principal, grants, w.tools, w.prompts, w.resources
            );
            let now = match seen.get(&key) {
                Some(d) => *d,
                None => {
                    let mut cx = Cx::new(state, route, &headers);
                    cx.principal = sub.principal.clone();
                    cx.identity = sub.identity.clone();
                    let d = visible(&cx, w).await;
                    seen.insert(key, d);
                    d
                }
            };
            let before = std::mem::replace(&mut *lock(&sub.last), now);
            let kinds = [
                (
                    now.tools != before.tools,
                    "notifications/tools/list_changed",
                ),
                (
                    now.prompts != before.prompts,
                    "notifications/prompts/list_changed",
                ),
                (
                    now.resources != before.resources,
                    "notifications/resources/list_changed",
                ),
            ];
            for (changed, method) in kinds {
                if changed {
                    self.send(&sub, message(&sub.tag, method, None));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use junction_protocol::jsonrpc::Id;
    use serde_json::Value;

    fn subscriber(id: u64, capacity: usize) -> (Arc<Subscriber>, mpsc::Receiver<Bytes>) {
        let (tx, rx) = mpsc::channel(capacity);
        let sub = Arc::new(Subscriber {
            id,
            route: "/mcp".into(),
            identity: None,
            principal: String::new(),
            wants: Wants::default(),
            tag: Tag::Modern(Id::Str("L1".into())),
            tx,
            cancel: CancellationToken::new(),
            last: Mutex::new(Digests::default()),
        });
        (sub, rx)
    }

    #[test]
    fn a_client_that_stops_reading_is_disconnected_not_buffered() {
        let hub = Hub::new();
        let (sub, _rx) = subscriber(1, 2);
        lock(&hub.subs).insert(sub.id, sub.clone());
        for _ in 0..3 {
            hub.send(
                &sub,
                message(&sub.tag, "notifications/tools/list_changed", None),
            );
        }
        assert_eq!(hub.open_streams(), 0);
        assert!(sub.cancel.is_cancelled());
    }

    #[test]
    fn messages_are_tagged_for_modern_streams_only() {
        let modern = message(
            &Tag::Modern(Id::Num(7)),
            "notifications/resources/updated",
            Some("a://b"),
        );
        let text = String::from_utf8(modern.to_vec()).unwrap_or_default();
        assert!(text.starts_with("event: message\ndata: "), "{text}");
        let json: Value =
            serde_json::from_str(text.trim_start_matches("event: message\ndata: ").trim())
                .unwrap_or_default();
        assert_eq!(
            json["params"],
            json!({"uri": "a://b", "_meta": {(meta::SUBSCRIPTION_ID): 7}})
        );
        let legacy = message(
            &Tag::Legacy {
                session: "s".into(),
            },
            "notifications/tools/list_changed",
            None,
        );
        let text = String::from_utf8(legacy.to_vec()).unwrap_or_default();
        assert!(
            text.contains(r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#),
            "{text}"
        );
    }
}
