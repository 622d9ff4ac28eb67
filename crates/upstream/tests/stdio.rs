//! stdio upstreams against tests/fixtures/fake_stdio.py.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use junction_protocol::jsonrpc::RawParams;
use junction_upstream::{
    Era, EraPref, TransportSpec, Upstream, UpstreamError, UpstreamRequest, UpstreamSpec,
};
use serde_json::{json, Value};

fn stdio_upstream(mode: &str, era: EraPref, timeout: Duration) -> Arc<Upstream> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/fake_stdio.py");
    Upstream::new(UpstreamSpec {
        id: "files".into(),
        transport: TransportSpec::Stdio {
            command: vec!["python3".into(), "-u".into(), script.into(), mode.into()],
            env: vec![],
            cwd: None,
        },
        timeout,
        era,
        max_message_bytes: junction_upstream::DEFAULT_MAX_MESSAGE_BYTES,
    })
    .expect("upstream")
}

fn call(name: &str) -> UpstreamRequest<'static> {
    let mut params = RawParams::new();
    params.insert(
        "name".into(),
        std::borrow::Cow::Owned(raw(&serde_json::to_string(name).expect("name"))),
    );
    params.insert("arguments".into(), std::borrow::Cow::Owned(raw("{}")));
    UpstreamRequest {
        method: "tools/call".into(),
        params,
        ..UpstreamRequest::default()
    }
}

/// The JSON inside the first text content of a tools/call result.
async fn call_text(up: &Upstream, req: UpstreamRequest<'_>) -> Value {
    let events = collect(up.request(req).await.expect("request")).await;
    let res = result_json(events.last().expect("an event"));
    serde_json::from_str(res["content"][0]["text"].as_str().expect("text")).expect("json text")
}

#[tokio::test]
async fn legacy_stdio_initializes_lists_and_maps_progress_tokens() {
    let up = stdio_upstream("legacy", EraPref::Auto, Duration::from_secs(10));
    assert_eq!(
        up.era().await.expect("era"),
        Era::Legacy {
            version: "2025-06-18".into()
        }
    );
    let page = up.list_tools_page(None).await.expect("list");
    assert_eq!(page.tools.len(), 6);

    let mut req = call("progress");
    req.meta
        .push(("progressToken".into(), raw(r#""client-token""#)));
    let events = collect(up.request(req).await.expect("request")).await;
    assert_eq!(events.len(), 3, "{events:?}");
    for (i, ev) in events[..2].iter().enumerate() {
        let n = notification_json(ev);
        assert_eq!(n["method"], "notifications/progress");
        assert_eq!(n["params"]["progress"], i as u64 + 1);
        assert_eq!(
            n["params"]["progressToken"], "client-token",
            "mapped back to the downstream token"
        );
    }
    let res = result_json(&events[2]);
    let seen: Value =
        serde_json::from_str(res["content"][0]["text"].as_str().expect("text")).expect("json");
    assert_ne!(
        seen["token_seen"], "client-token",
        "the upstream sees a token of ours"
    );
    assert!(seen["token_seen"].is_string());

    let answers = call_text(&up, call("answers")).await;
    assert_eq!(
        answers,
        json!([{"jsonrpc":"2.0","id":"srv-ping","result":{}}]),
        "server ping answered"
    );

    let mut changes = up.changes();
    let events = collect(up.request(call("changed")).await.expect("request")).await;
    assert_eq!(
        events.len(),
        1,
        "list_changed is not part of the call's stream: {events:?}"
    );
    assert_eq!(
        changes.recv().await.expect("change"),
        junction_upstream::Change::ToolsListChanged
    );
    up.shutdown().await;
}

#[tokio::test]
async fn modern_stdio_gets_meta_and_no_initialize() {
    let up = stdio_upstream("modern", EraPref::Auto, Duration::from_secs(10));
    assert_eq!(up.era().await.expect("era"), Era::Modern);
    let mut req = call("meta");
    req.client_capabilities = Some(std::borrow::Cow::Owned(raw(r#"{"elicitation":{}}"#)));
    req.meta.push(("traceparent".into(), raw(r#""00-1-2-01""#)));
    let meta = call_text(&up, req).await;
    assert_eq!(
        meta["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    assert_eq!(
        meta["io.modelcontextprotocol/clientCapabilities"],
        json!({"elicitation":{}})
    );
    assert_eq!(meta["traceparent"], "00-1-2-01");
    let page = up.list_tools_page(None).await.expect("list");
    assert_eq!(page.tools.len(), 6);
    let pid = call_text(&up, call("pid")).await;
    let proc_dir = format!("/proc/{pid}");
    assert!(std::path::Path::new(&proc_dir).exists());
    up.shutdown().await;
    assert!(
        !std::path::Path::new(&proc_dir).exists(),
        "shutdown ends (and reaps) the child"
    );
}

#[tokio::test]
async fn silent_probe_times_out_into_legacy() {
    let up = stdio_upstream("silent", EraPref::Auto, Duration::from_millis(1500));
    assert_eq!(
        up.era().await.expect("era"),
        Era::Legacy {
            version: "2025-06-18".into()
        }
    );
    up.shutdown().await;
}

#[tokio::test]
async fn dead_child_fails_in_flight_request_and_next_request_respawns() {
    let up = stdio_upstream("legacy", EraPref::Legacy, Duration::from_secs(10));
    let pid1 = call_text(&up, call("pid")).await;
    let events = collect(up.request(call("exit")).await.expect("request")).await;
    assert!(
        matches!(events.as_slice(), [Err(UpstreamError::Closed)]),
        "{events:?}"
    );
    let pid2 = call_text(&up, call("pid")).await;
    assert_ne!(pid1, pid2, "a new process serves the next request");
    assert_eq!(
        up.era().await.expect("era"),
        Era::Legacy {
            version: "2025-06-18".into()
        }
    );
    up.shutdown().await;
}

#[tokio::test]
async fn dropping_a_stream_sends_cancelled_and_timeouts_cancel_too() {
    let up = stdio_upstream("legacy", EraPref::Legacy, Duration::from_secs(10));
    let stream = up.request(call("hang")).await.expect("request");
    drop(stream);
    let mut timed = call("hang");
    timed.timeout = Some(Duration::from_millis(200));
    let events = collect(up.request(timed).await.expect("request")).await;
    assert!(
        matches!(events.as_slice(), [Err(UpstreamError::Timeout)]),
        "{events:?}"
    );
    let cancelled = call_text(&up, call("cancelled")).await;
    assert_eq!(cancelled.as_array().map(Vec::len), Some(2), "{cancelled}");
    up.shutdown().await;
}

#[tokio::test]
async fn concurrent_requests_are_demultiplexed_by_id() {
    let up = stdio_upstream("modern", EraPref::Modern, Duration::from_secs(10));
    let tasks: Vec<_> = (0..10)
        .map(|i| {
            let up = up.clone();
            tokio::spawn(async move {
                let mut req = call("progress");
                req.meta.push(("progressToken".into(), raw(&i.to_string())));
                let events = collect(up.request(req).await.expect("request")).await;
                (i, events)
            })
        })
        .collect();
    for t in tasks {
        let (i, events) = t.await.expect("join");
        assert_eq!(events.len(), 3);
        for ev in &events[..2] {
            assert_eq!(notification_json(ev)["params"]["progressToken"], i);
        }
        result_json(&events[2]);
    }
    up.shutdown().await;
}

#[tokio::test]
async fn spawn_failure_is_unavailable() {
    let up = Upstream::new(UpstreamSpec {
        id: "nope".into(),
        transport: TransportSpec::Stdio {
            command: vec!["/nonexistent/junction-test-binary".into()],
            env: vec![],
            cwd: None,
        },
        timeout: Duration::from_secs(5),
        era: EraPref::Auto,
        max_message_bytes: junction_upstream::DEFAULT_MAX_MESSAGE_BYTES,
    })
    .expect("upstream");
    let err = up.request(call("pid")).await.expect_err("spawn fails");
    assert!(matches!(err, UpstreamError::Unavailable(_)), "{err:?}");
    assert!(!err.request_may_have_reached_upstream());
}
