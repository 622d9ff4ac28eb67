//! Handshake-era HTTP upstreams and the era probe.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

use common::*;
use junction_upstream::{Era, EraPref, UpstreamError, UpstreamRequest};
use serde_json::json;
use tokio::sync::Notify;

/// A 2025-11-25 server: sessions `s1`, `s2`, … minted by initialize; a request
/// with a session other than the current one gets 404.
fn legacy_server(
    expired: Arc<AtomicBool>,
    inits: Arc<AtomicU32>,
) -> impl Fn(&Recorded) -> Reply + Send + Sync {
    move |r| {
        match r.rpc_method() {
        "server/discover" => Reply::Json {
            status: 400,
            body: json!({"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Bad Request: Server not initialized"}}).to_string(),
            headers: vec![],
        },
        "initialize" => {
            let n = inits.fetch_add(1, Ordering::SeqCst) + 1;
            expired.store(false, Ordering::SeqCst);
            Reply::Json {
                status: 200,
                body: json!({"jsonrpc":"2.0","id":r.id(),"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"old","version":"1"}}}).to_string(),
                headers: vec![("mcp-session-id", format!("s{n}"))],
            }
        }
        _ => {
            let current = format!("s{}", inits.load(Ordering::SeqCst));
            if expired.load(Ordering::SeqCst) || r.header("mcp-session-id") != Some(current.as_str()) {
                return Reply::Status(404);
            }
            Reply::result(&r.id(), json!({"tools":[{"name":"t","inputSchema":{"type":"object"}}]}))
        }
    }
    }
}

#[tokio::test]
async fn probe_falls_back_to_initialize_and_session_is_reused_and_renewed_on_404() {
    let expired = Arc::new(AtomicBool::new(false));
    let inits = Arc::new(AtomicU32::new(0));
    let fake = serve(legacy_server(expired.clone(), inits.clone())).await;
    let up = http_upstream(&fake.url, EraPref::Auto);

    assert_eq!(
        up.era().await.expect("era"),
        Era::Legacy {
            version: "2025-11-25".into()
        }
    );
    let page = up.list_tools_page(None).await.expect("list");
    assert_eq!(page.tools.len(), 1);
    assert_eq!((page.ttl_ms, page.cache_public), (None, false));
    up.list_tools_page(None).await.expect("list again");
    assert_eq!(
        inits.load(Ordering::SeqCst),
        1,
        "one initialize serves many requests"
    );

    expired.store(true, Ordering::SeqCst);
    up.list_tools_page(None)
        .await
        .expect("list after session expiry");
    assert_eq!(inits.load(Ordering::SeqCst), 2, "404 re-initializes once");

    let lists = fake.calls("tools/list");
    assert_eq!(lists.len(), 4, "the 404'd request was retried");
    let sessions: Vec<_> = lists
        .iter()
        .map(|r| r.header("mcp-session-id").map(str::to_owned))
        .collect();
    assert_eq!(
        sessions,
        [Some("s1"), Some("s1"), Some("s1"), Some("s2")].map(|s| s.map(String::from))
    );
    for r in &lists {
        assert_eq!(r.header("mcp-protocol-version"), Some("2025-11-25"));
        assert!(
            r.header("mcp-method").is_none(),
            "no modern headers to a legacy server"
        );
        assert!(
            r.body["params"].get("_meta").is_none(),
            "no modern _meta to a legacy server"
        );
    }
    let initialized = fake.calls("notifications/initialized");
    assert_eq!(initialized.len(), 2);
    assert_eq!(initialized[0].header("mcp-session-id"), Some("s1"));
    let init = &fake.calls("initialize")[0];
    assert_eq!(init.body["params"]["protocolVersion"], "2025-11-25");
    assert_eq!(
        init.body["params"]["capabilities"],
        json!({"elicitation":{"form":{},"url":{}},"sampling":{},"roots":{}})
    );
    assert_eq!(init.body["params"]["clientInfo"]["name"], "junction");
}

#[tokio::test]
async fn concurrent_first_requests_share_one_initialize() {
    let inits = Arc::new(AtomicU32::new(0));
    let fake = serve(legacy_server(Arc::default(), inits.clone())).await;
    let up = http_upstream(&fake.url, EraPref::Legacy);
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let up = up.clone();
            tokio::spawn(async move { up.list_tools_page(None).await })
        })
        .collect();
    for t in tasks {
        t.await.expect("join").expect("list");
    }
    assert_eq!(inits.load(Ordering::SeqCst), 1);
    assert!(
        fake.calls("server/discover").is_empty(),
        "a pinned era skips the probe"
    );
}

#[tokio::test]
async fn legacy_requests_carry_downstream_meta() {
    let fake = serve(legacy_server(Arc::default(), Arc::default())).await;
    let up = http_upstream(&fake.url, EraPref::Legacy);
    let req = UpstreamRequest {
        method: "tools/list".into(),
        meta: vec![("progressToken".into(), raw(r#""p""#))],
        client_capabilities: Some(std::borrow::Cow::Owned(raw(r#"{"sampling":{}}"#))),
        ..UpstreamRequest::default()
    };
    collect(up.request(req).await.expect("request")).await;
    let r = &fake.calls("tools/list")[0];
    assert_eq!(r.body["params"]["_meta"], json!({"progressToken":"p"}));
}

#[tokio::test]
async fn probe_finds_modern_server_by_discover_result() {
    let fake = serve(|r| match r.rpc_method() {
        "server/discover" => Reply::result(&r.id(), json!({"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{},"ttlMs":0,"cacheScope":"public"})),
        _ => Reply::result(&r.id(), json!({"resultType":"complete","tools":[],"ttlMs":5,"cacheScope":"private"})),
    })
    .await;
    let up = http_upstream(&fake.url, EraPref::Auto);
    assert_eq!(up.era().await.expect("era"), Era::Modern);
    let page = up.list_tools_page(None).await.expect("list");
    assert_eq!(page.ttl_ms, Some(5));
    assert!(fake.calls("initialize").is_empty());
    let discover = &fake.calls("server/discover")[0];
    assert_eq!(discover.header("mcp-protocol-version"), Some("2026-07-28"));
    assert_eq!(
        discover.body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    assert_eq!(
        fake.calls("tools/list")[0].header("mcp-method"),
        Some("tools/list")
    );
}

#[tokio::test]
async fn probe_treats_modern_400_error_as_modern_and_missing_version_as_unavailable() {
    let modern_400 = |supported: serde_json::Value| {
        move |r: &Recorded| {
            match r.rpc_method() {
            "server/discover" => Reply::Json {
                status: 400,
                body: json!({"jsonrpc":"2.0","id":r.id(),"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":supported.clone(),"requested":"2026-07-28"}}}).to_string(),
                headers: vec![],
            },
            _ => Reply::Status(500),
        }
        }
    };
    let ok = serve(modern_400(json!(["2026-07-28"]))).await;
    assert_eq!(
        http_upstream(&ok.url, EraPref::Auto)
            .era()
            .await
            .expect("era"),
        Era::Modern
    );

    let future_only = serve(modern_400(json!(["2027-03-01"]))).await;
    let err = http_upstream(&future_only.url, EraPref::Auto)
        .era()
        .await
        .expect_err("no common version");
    assert!(
        matches!(&err, UpstreamError::Unavailable(m) if m.contains("2026-07-28")),
        "{err:?}"
    );
    assert!(
        future_only.calls("initialize").is_empty(),
        "a modern error never falls back to initialize"
    );
}

#[tokio::test]
async fn legacy_sse_server_ping_is_answered_and_dropping_the_stream_cancels() {
    let answered = Arc::new(Notify::new());
    let a = answered.clone();
    let fake = serve(move |r| match r.rpc_method() {
        "initialize" => Reply::Json {
            status: 200,
            body: json!({"jsonrpc":"2.0","id":r.id(),"result":{"protocolVersion":"2025-03-26","capabilities":{}}}).to_string(),
            headers: vec![("mcp-session-id", "sess".into())],
        },
        _ => Reply::Sse {
            before: vec![
                json!({"jsonrpc":"2.0","id":"srv-1","method":"ping"}).to_string(),
                json!({"jsonrpc":"2.0","id":"srv-2","method":"roots/list"}).to_string(),
                json!({"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"hi"}}).to_string(),
            ],
            gate: Some(a.clone()),
            after: vec![],
        },
    })
    .await;
    let up = http_upstream(&fake.url, EraPref::Legacy);
    let mut req = UpstreamRequest {
        method: "tools/call".into(),
        ..UpstreamRequest::default()
    };
    req.params
        .insert("name".into(), std::borrow::Cow::Owned(raw(r#""slow""#)));
    let mut stream = up.request(req).await.expect("request");
    let first = stream.next().await.expect("event");
    assert_eq!(notification_json(&first)["method"], "notifications/message");
    let call_id = fake.calls("tools/call")[0].id();
    drop(stream);

    let mut seen = Vec::new();
    for _ in 0..200 {
        seen = fake.requests();
        let replies = seen
            .iter()
            .filter(|r| r.body.get("result").is_some() || r.body.get("error").is_some())
            .count();
        let cancelled = seen
            .iter()
            .any(|r| r.rpc_method() == "notifications/cancelled");
        if replies == 2 && cancelled {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    answered.notify_one();
    let ping = seen
        .iter()
        .find(|r| r.body["id"] == "srv-1")
        .expect("ping answered");
    assert_eq!(ping.body["result"], json!({}));
    assert_eq!(ping.header("mcp-session-id"), Some("sess"));
    assert!(
        ping.header("mcp-protocol-version").is_none(),
        "2025-03-26 has no version header"
    );
    let roots = seen
        .iter()
        .find(|r| r.body["id"] == "srv-2")
        .expect("roots answered");
    assert_eq!(roots.body["error"]["code"], -32601);
    let cancel = seen
        .iter()
        .find(|r| r.rpc_method() == "notifications/cancelled")
        .expect("cancel sent");
    assert_eq!(cancel.body["params"]["requestId"], call_id);
}

#[tokio::test]
async fn shutdown_deletes_the_legacy_session() {
    let fake = serve(legacy_server(Arc::default(), Arc::default())).await;
    let up = http_upstream(&fake.url, EraPref::Legacy);
    up.list_tools_page(None).await.expect("list");
    up.shutdown().await;
    let deletes: Vec<_> = fake
        .requests()
        .into_iter()
        .filter(|r| r.method == http::Method::DELETE)
        .collect();
    assert_eq!(deletes.len(), 1);
    assert_eq!(deletes[0].header("mcp-session-id"), Some("s1"));
}

#[tokio::test]
async fn upstream_error_on_internal_call_is_rpc() {
    let fake = serve(|r| match r.rpc_method() {
        "initialize" => Reply::result(
            &r.id(),
            json!({"protocolVersion":"2025-06-18","capabilities":{}}),
        ),
        _ => Reply::json(
            json!({"jsonrpc":"2.0","id":r.id(),"error":{"code":-32603,"message":"boom"}})
                .to_string(),
        ),
    })
    .await;
    let up = http_upstream(&fake.url, EraPref::Auto);
    let err = up.list_tools_page(None).await.expect_err("rpc error");
    assert!(
        matches!(&err, UpstreamError::Rpc(e) if e.code == -32603),
        "{err:?}"
    );
    assert_eq!(
        up.era().await.expect("era"),
        Era::Legacy {
            version: "2025-06-18".into()
        }
    );
}
