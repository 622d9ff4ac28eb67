//! The standing change stream of one upstream: a background task that keeps
//! the stream open where the upstream has one, so list changes and resource
//! updates reach `Upstream::changes()` without any client request in flight.
//!
//! - modern upstreams: `subscriptions/listen` with every list-changed flag and
//!   `resourceSubscriptions` for the URIs the gateway was asked to watch;
//! - handshake-era HTTP upstreams: the GET stream of the upstream session
//!   (405: the upstream has none, stop trying), plus `resources/subscribe` /
//!   `resources/unsubscribe` for the watched URIs;
//! - handshake-era stdio upstreams need nothing: their change notices already
//!   arrive on stdout.
//!
//! Reconnects back off exponentially (never a busy loop) and the task ends on
//! `Upstream::shutdown` or when the client is dropped.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use junction_protocol::codes;
use junction_protocol::jsonrpc::RawParams;
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

use crate::{Era, Upstream, UpstreamError, UpstreamEvent, UpstreamRequest};

/// One change an upstream announced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    ToolsListChanged,
    PromptsListChanged,
    ResourcesListChanged,
    /// `notifications/resources/updated` for this URI (as the upstream names it).
    ResourceUpdated {
        uri: String,
    },
    /// The receiver fell behind and lost notices: treat everything as changed.
    Missed,
}

impl Change {
    /// The change a `notifications/*` method announces, if any.
    pub fn from_notification(method: &str, uri: Option<&str>) -> Option<Change> {
        match method {
            "notifications/tools/list_changed" => Some(Change::ToolsListChanged),
            "notifications/prompts/list_changed" => Some(Change::PromptsListChanged),
            "notifications/resources/list_changed" => Some(Change::ResourcesListChanged),
            "notifications/resources/updated" => {
                uri.map(|u| Change::ResourceUpdated { uri: u.to_owned() })
            }
            _ => None,
        }
    }
}

/// Receiver of an upstream's changes: the notices the transports saw on their
/// own (stdio, legacy call streams) and those of the standing stream.
pub struct Changes {
    seen: broadcast::Receiver<String>,
    watched: broadcast::Receiver<Change>,
}

impl Changes {
    pub(crate) fn new(
        seen: broadcast::Receiver<String>,
        watched: broadcast::Receiver<Change>,
    ) -> Changes {
        Changes { seen, watched }
    }

    /// The next change; `None` once the upstream client is gone.
    pub async fn recv(&mut self) -> Option<Change> {
        loop {
            let got = tokio::select! {
                m = self.seen.recv() => m.map(|m| Change::from_notification(&m, None)),
                c = self.watched.recv() => c.map(Some),
            };
            match got {
                Ok(Some(change)) => return Some(change),
                Ok(None) => continue,
                Err(broadcast::error::RecvError::Lagged(_)) => return Some(Change::Missed),
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }
}

/// The watcher's handles inside `Upstream`.
pub(crate) struct WatchState {
    started: AtomicBool,
    stop: CancellationToken,
    uris: watch::Sender<BTreeSet<String>>,
    pub(crate) events: broadcast::Sender<Change>,
}

impl WatchState {
    pub(crate) fn new(capacity: usize) -> WatchState {
        WatchState {
            started: AtomicBool::new(false),
            stop: CancellationToken::new(),
            uris: watch::Sender::new(BTreeSet::new()),
            events: broadcast::channel(capacity).0,
        }
    }

    pub(crate) fn stop(&self) {
        self.stop.cancel();
    }
}

/// How long one upstream listen request may run before it is renewed (its
/// deadline covers the whole stream).
const LISTEN_SPAN: Duration = Duration::from_secs(300);
const BACKOFF_MIN: Duration = Duration::from_millis(500);
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// A stream that stayed up this long was healthy: reconnect without backing off.
const HEALTHY: Duration = Duration::from_secs(10);
/// Upper bound on watched URIs per upstream (they come from clients).
pub(crate) const MAX_URIS: usize = 1024;

impl Upstream {
    /// Starts the standing change stream (once; later calls do nothing).
    /// Needs a Tokio runtime.
    pub fn start_watching(self: &Arc<Self>) {
        if self.watch.started.swap(true, Ordering::AcqRel) {
            return;
        }
        let weak = Arc::downgrade(self);
        let stop = self.watch.stop.clone();
        let uris = self.watch.uris.subscribe();
        let events = self.watch.events.clone();
        let id = self.id.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = stop.cancelled() => {}
                _ = run(weak, uris, events) => {}
            }
            tracing::debug!(upstream = %id, "change watcher stopped");
        });
    }

    /// The resource URIs (upstream names) whose updates the gateway wants; the
    /// standing stream is renewed when the set changes. Capped at `MAX_URIS`.
    pub fn watch_resources(&self, uris: BTreeSet<String>) {
        let uris: BTreeSet<String> = uris.into_iter().take(MAX_URIS).collect();
        self.watch.uris.send_if_modified(|cur| {
            if *cur == uris {
                return false;
            }
            *cur = uris;
            true
        });
    }

    /// Whether resource updates of this upstream can reach the gateway
    /// (stdio delivers only list changes outside a request).
    pub fn can_watch_resources(&self) -> bool {
        matches!(self.transport, crate::Transport::Http(_))
    }
}

enum Ended {
    /// The upstream has no standing stream: stop trying.
    Unsupported,
    /// The stream ended or failed after `lasted`.
    Dropped { lasted: Duration },
    /// The watched URIs changed: reopen at once with the new set.
    Renew,
}

async fn run(
    weak: Weak<Upstream>,
    mut uris: watch::Receiver<BTreeSet<String>>,
    events: broadcast::Sender<Change>,
) {
    let mut backoff = BACKOFF_MIN;
    // Legacy: URIs currently subscribed upstream.
    let mut subscribed = BTreeSet::new();
    loop {
        let Some(up) = weak.upgrade() else { return };
        let wanted = uris.borrow_and_update().clone();
        let started = tokio::time::Instant::now();
        let ended = match up.era().await {
            Err(_) => Ended::Dropped {
                lasted: Duration::ZERO,
            },
            Ok(Era::Modern) => listen(&up, &wanted, &mut uris, &events).await,
            Ok(Era::Legacy { .. }) => match &up.transport {
                crate::Transport::Stdio(_) => Ended::Unsupported,
                crate::Transport::Http(t) => {
                    let opened = t
                        .standing_stream(tokio::time::Instant::now() + LISTEN_SPAN)
                        .await;
                    match opened {
                        Ok(None) => Ended::Unsupported,
                        Err(e) => {
                            tracing::debug!(upstream = %up.id, error = %e, "upstream GET stream failed");
                            Ended::Dropped {
                                lasted: started.elapsed(),
                            }
                        }
                        Ok(Some(stream)) => {
                            // Subscribed only once the stream is open, so no
                            // update can fall between the two; every URI again
                            // on every connection (the session may be new).
                            sync_legacy_subscriptions(&up, &mut subscribed, &wanted, true).await;
                            drop(up);
                            let legacy = Some((&weak, &mut subscribed));
                            relay(stream, &mut uris, &events, started, legacy).await
                        }
                    }
                }
            },
        };
        match ended {
            Ended::Unsupported => {
                tracing::debug!(upstream = %weak.upgrade().map(|u| u.id.clone()).unwrap_or_default(),
                    "upstream has no standing change stream");
                // Legacy HTTP without a GET stream may still change its URI set.
                return;
            }
            Ended::Renew => continue,
            Ended::Dropped { lasted } => {
                if lasted >= HEALTHY {
                    backoff = BACKOFF_MIN;
                }
                tokio::time::sleep(jitter(backoff)).await;
                backoff = (backoff * 2).min(BACKOFF_MAX);
            }
        }
    }
}

/// A pause between `d` and 1.5 d, so many gateways do not reconnect in step.
fn jitter(d: Duration) -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|t| t.subsec_nanos())
        .unwrap_or_default();
    let extra = f64::from(nanos % 1000) / 2000.0;
    d + d.mul_f64(extra)
}

async fn listen(
    up: &Arc<Upstream>,
    wanted: &BTreeSet<String>,
    uris: &mut watch::Receiver<BTreeSet<String>>,
    events: &broadcast::Sender<Change>,
) -> Ended {
    let started = tokio::time::Instant::now();
    let mut filter = serde_json::json!({
        "toolsListChanged": true,
        "promptsListChanged": true,
        "resourcesListChanged": true,
    });
    if !wanted.is_empty() {
        filter["resourceSubscriptions"] = serde_json::json!(wanted);
    }
    let mut params = RawParams::new();
    if let Ok(raw) = serde_json::value::to_raw_value(&filter) {
        params.insert("notifications".into(), Cow::Owned(raw));
    }
    let req = UpstreamRequest {
        method: "subscriptions/listen".into(),
        params,
        timeout: Some(LISTEN_SPAN),
        ..UpstreamRequest::default()
    };
    let stream = match up.request(req).await {
        Ok(s) => s,
        Err(e) => {
            tracing::debug!(upstream = %up.id, error = %e, "upstream subscriptions/listen failed");
            return Ended::Dropped {
                lasted: started.elapsed(),
            };
        }
    };
    relay(stream, uris, events, started, None).await
}

/// Passes a standing stream's notices on until it ends or the URIs change.
async fn relay(
    mut stream: crate::ResponseStream,
    uris: &mut watch::Receiver<BTreeSet<String>>,
    events: &broadcast::Sender<Change>,
    started: tokio::time::Instant,
    mut legacy: Option<(&Weak<Upstream>, &mut BTreeSet<String>)>,
) -> Ended {
    // While no stream was open, notices had nowhere to go: whoever listens
    // must look again (this also covers every reconnect).
    let _ = events.send(Change::Missed);
    loop {
        let item = tokio::select! {
            item = stream.next() => item,
            changed = uris.changed() => match (changed, legacy.as_mut()) {
                (Err(_), _) => return Ended::Unsupported,
                (Ok(()), None) => return Ended::Renew,
                // Legacy: the GET stream stays; only the subscriptions change.
                (Ok(()), Some((weak, subscribed))) => {
                    let Some(up) = weak.upgrade() else { return Ended::Unsupported };
                    let wanted = uris.borrow_and_update().clone();
                    sync_legacy_subscriptions(&up, subscribed, &wanted, false).await;
                    continue;
                }
            },
        };
        let lasted = started.elapsed();
        match item {
            None | Some(Ok(UpstreamEvent::Result(_))) => return Ended::Dropped { lasted },
            Some(Ok(UpstreamEvent::Notification(raw))) => {
                if let Some(change) = parse_notice(&raw) {
                    let _ = events.send(change);
                }
            }
            Some(Ok(UpstreamEvent::Error(e))) if e.code == codes::METHOD_NOT_FOUND => {
                return Ended::Unsupported
            }
            Some(Ok(UpstreamEvent::Error(e))) => {
                tracing::debug!(code = e.code, message = %e.message, "upstream refused the standing stream");
                return Ended::Dropped { lasted };
            }
            // The deadline of a healthy stream: renew it.
            Some(Err(UpstreamError::Timeout)) => return Ended::Renew,
            Some(Err(e)) => {
                tracing::debug!(error = %e, "upstream standing stream broke off");
                return Ended::Dropped { lasted };
            }
        }
    }
}

#[derive(Deserialize)]
struct Notice {
    method: String,
    #[serde(default)]
    params: Option<NoticeParams>,
}

#[derive(Deserialize)]
struct NoticeParams {
    #[serde(default)]
    uri: Option<String>,
}

fn parse_notice(raw: &RawValue) -> Option<Change> {
    let n: Notice = serde_json::from_str(raw.get()).ok()?;
    let uri = n.params.and_then(|p| p.uri);
    Change::from_notification(&n.method, uri.as_deref())
}

/// Brings the legacy upstream session's `resources/subscribe` set to `wanted`.
async fn sync_legacy_subscriptions(
    up: &Upstream,
    subscribed: &mut BTreeSet<String>,
    wanted: &BTreeSet<String>,
    again: bool,
) {
    let gone: Vec<String> = subscribed.difference(wanted).cloned().collect();
    let new: Vec<String> = if again {
        wanted.iter().cloned().collect()
    } else {
        wanted.difference(subscribed).cloned().collect()
    };
    for (method, uri) in gone
        .iter()
        .map(|u| ("resources/unsubscribe", u))
        .chain(new.iter().map(|u| ("resources/subscribe", u)))
    {
        let mut params = RawParams::new();
        if let Ok(raw) = serde_json::value::to_raw_value(uri) {
            params.insert("uri".into(), Cow::Owned(raw));
        }
        let req = UpstreamRequest {
            method: method.into(),
            params,
            ..UpstreamRequest::default()
        };
        let ok = match up.request(req).await {
            Ok(mut s) => matches!(s.next().await, Some(Ok(UpstreamEvent::Result(_)))),
            Err(_) => false,
        };
        if method == "resources/subscribe" {
            if ok {
                subscribed.insert(uri.clone());
            } else {
                tracing::debug!(upstream = %up.id, "upstream refused resources/subscribe");
            }
        } else {
            subscribed.remove(uri);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notices_map_to_changes() {
        let raw = |s: &str| RawValue::from_string(s.to_owned()).expect("json");
        assert_eq!(
            parse_notice(&raw(
                r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{}}}"#
            )),
            Some(Change::ToolsListChanged)
        );
        assert_eq!(
            parse_notice(&raw(
                r#"{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"file:///a"}}"#
            )),
            Some(Change::ResourceUpdated {
                uri: "file:///a".into()
            })
        );
        assert_eq!(
            parse_notice(&raw(
                r#"{"jsonrpc":"2.0","method":"notifications/resources/updated"}"#
            )),
            None
        );
        assert_eq!(
            parse_notice(&raw(
                r#"{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{}}"#
            )),
            None
        );
    }
}
