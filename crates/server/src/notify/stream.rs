//! The bytes and the life of one change stream: notifications (tagged for
//! modern streams), keep-alive comments, token expiry, and the shutdown
//! signal that ends every stream gracefully.

use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::Bytes;
use junction_protocol::jsonrpc::notification_bytes;
use junction_protocol::meta;
use serde_json::{json, Value};

use super::{Hub, Subscriber, Tag, KEEPALIVE};
use crate::response::sse_event;

/// One notification for a stream: modern ones carry the subscriptionId.
pub fn message(tag: &Tag, method: &str, uri: Option<&str>) -> Bytes {
    let mut params = serde_json::Map::new();
    if let Some(u) = uri {
        params.insert("uri".into(), Value::String(u.to_owned()));
    }
    if let Tag::Modern(id) = tag {
        params.insert("_meta".into(), json!({(meta::SUBSCRIPTION_ID): id}));
    }
    let bytes = if params.is_empty() {
        format!("{{\"jsonrpc\":\"2.0\",\"method\":{}}}", json!(method)).into_bytes()
    } else {
        let raw = serde_json::value::to_raw_value(&Value::Object(params)).unwrap_or_default();
        notification_bytes(method, &raw)
    };
    sse_event(&bytes)
}

/// Keep-alive comments; ends (and unregisters) the stream when the client
/// left, stopped reading, or the hub ended it.
pub(super) async fn keep_alive(hub: Weak<Hub>, sub: Arc<Subscriber>, kind: &'static str) {
    let mut tick = tokio::time::interval(KEEPALIVE);
    tick.tick().await;
    // A stream lives no longer than the token it was opened with: the client
    // listens again with a fresh one (and is authorized again).
    let expiry = sub
        .identity
        .as_ref()
        .and_then(|p| p.claims.get("exp"))
        .and_then(Value::as_u64)
        .map(|exp| {
            let left = exp
                .saturating_mul(1000)
                .saturating_sub(junction_protocol::seal::now_ms());
            tokio::time::Instant::now() + Duration::from_millis(left)
        });
    let expired = async {
        match expiry {
            Some(at) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(expired);
    loop {
        tokio::select! {
            _ = sub.cancel.cancelled() => break,
            _ = &mut expired => {
                if let Some(h) = hub.upgrade() {
                    h.finish(&sub);
                }
                break;
            }
            _ = sub.tx.closed() => break,
            _ = tick.tick() => {
                if sub.tx.try_send(Bytes::from_static(b": keep-alive\n\n")).is_err() {
                    break;
                }
            }
        }
    }
    if let Some(h) = hub.upgrade() {
        h.remove(sub.id);
        if let Some(state) = h.state() {
            state.metrics.open_streams.with_label_values(&[kind]).dec();
        }
    }
}

pub(super) async fn shutdown_signal() {
    #[cfg(unix)]
    {
        let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate());
        match term {
            Ok(mut t) => {
                tokio::select! {
                    _ = t.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
