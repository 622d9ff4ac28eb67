//! HTTP edge cases: spec validation, size cap, re-probing, change notices.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use junction_upstream::{Era, EraPref, TransportSpec, Upstream, UpstreamError, UpstreamSpec};
use serde_json::json;

fn spec(url: &str, headers: Vec<(String, String)>, ca_file: Option<&str>) -> UpstreamSpec {
    UpstreamSpec {
        id: "alpha".into(),
        transport: TransportSpec::Http {
            url: url.into(),
            headers,
            ca_file: ca_file.map(Into::into),
            token: None,
        },
        timeout: Duration::from_secs(5),
        era: EraPref::Auto,
        max_message_bytes: junction_upstream::DEFAULT_MAX_MESSAGE_BYTES,
    }
}

#[test]
fn bad_specs_are_refused_before_any_io() {
    for url in ["not a url", "ftp://example.test/mcp", "/relative/mcp"] {
        let err = Upstream::new(spec(url, vec![], None)).expect_err(url);
        assert!(
            matches!(err, UpstreamError::Unavailable(_)),
            "{url}: {err:?}"
        );
    }
    let bad_header = vec![("Authorization".to_owned(), "Bearer a\nb".to_owned())];
    assert!(Upstream::new(spec("http://127.0.0.1:1/mcp", bad_header, None)).is_err());
    let missing_ca = Upstream::new(spec(
        "https://127.0.0.1:1/mcp",
        vec![],
        Some("/nonexistent/ca.pem"),
    ));
    assert!(matches!(missing_ca, Err(UpstreamError::Unavailable(m)) if m.contains("ca_file")));
    let dir = std::env::temp_dir().join(format!("junction-upstream-ca-{}", std::process::id()));
    std::fs::write(&dir, "no certificates here\n").expect("write");
    let empty_ca = Upstream::new(spec("https://127.0.0.1:1/mcp", vec![], dir.to_str()));
    let _ = std::fs::remove_file(&dir);
    assert!(
        matches!(empty_ca, Err(UpstreamError::Unavailable(m)) if m.contains("no certificates"))
    );
    assert!(Upstream::new(spec("https://mcp.example.test/mcp", vec![], None)).is_ok());
}

#[tokio::test]
async fn oversized_json_body_is_a_protocol_error() {
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"result":{{"x":"{}"}}}}"#,
        "a".repeat(17 * 1024 * 1024)
    );
    let fake = serve(move |_| Reply::json(big.clone())).await;
    let up = http_upstream(&fake.url, EraPref::Modern);
    let err = up.list_tools_page(None).await.expect_err("too big");
    assert!(
        matches!(&err, UpstreamError::Protocol(m) if m.contains("max_response_bytes")),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_modern_upstream_replaced_by_a_legacy_one_is_re_probed() {
    let legacy = Arc::new(AtomicBool::new(false));
    let l = legacy.clone();
    let fake = serve(move |r| {
        let is_legacy = l.load(Ordering::SeqCst);
        match (is_legacy, r.rpc_method()) {
            (false, _) if r.rpc_method() == "server/discover" => {
                Reply::result(&r.id(), json!({"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{}}))
            }
            (false, _) => Reply::result(&r.id(), json!({"resultType":"complete","tools":[]})),
            (true, "initialize") => Reply::result(&r.id(), json!({"protocolVersion":"2025-11-25","capabilities":{}})),
            (true, _) if r.header("mcp-method").is_some() => Reply::Json { status: 400, body: "Bad Request".into(), headers: vec![] },
            (true, _) => Reply::result(&r.id(), json!({"tools":[{"name":"old"}]})),
        }
    })
    .await;
    let up = http_upstream(&fake.url, EraPref::Auto);
    assert_eq!(up.era().await.expect("era"), Era::Modern);
    legacy.store(true, Ordering::SeqCst);
    let err = up
        .list_tools_page(None)
        .await
        .expect_err("modern request refused");
    assert!(
        matches!(err, UpstreamError::Http { status: 400, .. }),
        "{err:?}"
    );
    let page = up.list_tools_page(None).await.expect("after re-probe");
    assert_eq!(*page.tools, vec![json!({"name":"old"})]);
    assert_eq!(
        up.era().await.expect("era"),
        Era::Legacy {
            version: "2025-11-25".into()
        }
    );
}

#[tokio::test]
async fn legacy_list_changed_on_a_call_stream_goes_to_changes() {
    let fake = serve(|r| match r.rpc_method() {
        "initialize" => Reply::result(
            &r.id(),
            json!({"protocolVersion":"2025-11-25","capabilities":{}}),
        ),
        _ => Reply::Sse {
            before: vec![
                json!({"jsonrpc":"2.0","method":"notifications/tools/list_changed"}).to_string(),
                json!({"jsonrpc":"2.0","id":r.id(),"result":{"tools":[]}}).to_string(),
            ],
            gate: None,
            after: vec![],
        },
    })
    .await;
    let up = http_upstream(&fake.url, EraPref::Legacy);
    let mut changes = up.changes();
    up.list_tools_page(None).await.expect("list");
    assert_eq!(
        changes.recv().await.expect("change"),
        junction_upstream::Change::ToolsListChanged
    );
}

#[tokio::test]
async fn header_precedence_ours_then_content_negotiation_then_config_then_forwarded() {
    let fake = serve(|r| Reply::result(&r.id(), json!({"resultType":"complete"}))).await;
    let headers = vec![
        ("X-Team".to_owned(), "a".to_owned()),
        ("X-Team".to_owned(), "b".to_owned()),
        // Junction decides what it accepts.
        ("Accept".to_owned(), "text/plain".to_owned()),
    ];
    let mut s = spec(&fake.url, headers, None);
    s.era = EraPref::Modern;
    let up = Upstream::new(s).expect("upstream");
    let req = junction_upstream::UpstreamRequest {
        method: "tools/list".into(),
        forward_headers: vec![
            ("x-team".into(), "from-client".into()),
            ("x-trace".into(), "1".into()),
            ("x-trace".into(), "2".into()),
            // Ours (the modern mirror headers) are never the client's.
            ("mcp-method".into(), "tools/call".into()),
        ],
        ..Default::default()
    };
    collect(up.request(req).await.expect("request")).await;
    let r = &fake.calls("tools/list")[0];
    let all = |name: &str| -> Vec<&str> {
        r.headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect()
    };
    assert_eq!(all("x-team"), ["a", "b"], "config values, all of them");
    assert_eq!(all("x-trace"), ["1", "2"], "forwarded values, all of them");
    assert_eq!(all("accept"), ["application/json, text/event-stream"]);
    assert_eq!(all("content-type"), ["application/json"]);
    assert_eq!(all("mcp-method"), ["tools/list"]);
}
