//! `Authorization` to HTTP upstreams: a request's own value, the upstream's
//! token source for everything else, the static header as the fallback.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use junction_upstream::{
    EraPref, TokenFuture, TokenSource, TransportSpec, Upstream, UpstreamError, UpstreamRequest,
    UpstreamSpec,
};
use serde_json::json;

/// `Bearer own` every time, or an outage; counts the requests for one.
struct Source {
    asked: AtomicUsize,
    down: bool,
}

impl TokenSource for Source {
    fn authorization(&self) -> TokenFuture<'_> {
        Box::pin(async move {
            self.asked.fetch_add(1, Ordering::SeqCst);
            if self.down {
                Err(UpstreamError::Unavailable("token endpoint down".into()))
            } else {
                Ok("Bearer own".to_owned())
            }
        })
    }
}

fn source(down: bool) -> Arc<Source> {
    Arc::new(Source {
        asked: AtomicUsize::new(0),
        down,
    })
}

/// An upstream with the static `Bearer upstream-secret` header and `token`.
fn upstream(url: &str, era: EraPref, token: Option<Arc<Source>>) -> Arc<Upstream> {
    Upstream::new(UpstreamSpec {
        id: "alpha".into(),
        transport: TransportSpec::Http {
            url: url.into(),
            headers: vec![("Authorization".into(), "Bearer upstream-secret".into())],
            ca_file: None,
            token: token.map(|t| t as Arc<dyn TokenSource>),
        },
        timeout: Duration::from_secs(5),
        era,
        max_message_bytes: junction_upstream::DEFAULT_MAX_MESSAGE_BYTES,
    })
    .expect("upstream")
}

fn call(authorization: Option<&str>) -> UpstreamRequest<'static> {
    UpstreamRequest {
        method: "tools/call".into(),
        params: [("name".into(), std::borrow::Cow::Owned(raw(r#""t""#)))]
            .into_iter()
            .collect(),
        authorization: authorization.map(str::to_owned),
        ..UpstreamRequest::default()
    }
}

fn modern() -> impl Fn(&Recorded) -> Reply + Send + Sync {
    |r| match r.rpc_method() {
        "server/discover" => Reply::result(
            &r.id(),
            json!({"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{},"ttlMs":0,"cacheScope":"public"}),
        ),
        "tools/list" => Reply::result(
            &r.id(),
            json!({"resultType":"complete","tools":[],"ttlMs":0}),
        ),
        _ => Reply::result(&r.id(), json!({"resultType":"complete","content":[]})),
    }
}

fn legacy() -> impl Fn(&Recorded) -> Reply + Send + Sync {
    |r| {
        match r.rpc_method() {
        "initialize" => Reply::Json {
            status: 200,
            body: json!({"jsonrpc":"2.0","id":r.id(),"result":{"protocolVersion":"2025-11-25","capabilities":{}}}).to_string(),
            headers: vec![("mcp-session-id", "s1".into())],
        },
        "tools/call" => Reply::Sse {
            before: vec![
                json!({"jsonrpc":"2.0","id":"srv-1","method":"ping"}).to_string(),
                json!({"jsonrpc":"2.0","id":r.id(),"result":{"content":[]}}).to_string(),
            ],
            gate: None,
            after: vec![],
        },
        _ => Reply::result(&r.id(), json!({"tools":[]})),
    }
    }
}

fn auth_of(r: &Recorded) -> Option<String> {
    r.header("authorization").map(str::to_owned)
}

#[tokio::test]
async fn a_requests_own_authorization_replaces_the_static_header() {
    let fake = serve(modern()).await;
    let up = upstream(&fake.url, EraPref::Modern, None);
    collect(
        up.request(call(Some("Bearer caller-x")))
            .await
            .expect("call"),
    )
    .await;
    collect(up.request(call(None)).await.expect("call")).await;
    let calls = fake.calls("tools/call");
    assert_eq!(auth_of(&calls[0]).as_deref(), Some("Bearer caller-x"));
    assert_eq!(
        auth_of(&calls[1]).as_deref(),
        Some("Bearer upstream-secret")
    );
    assert!(calls
        .iter()
        .all(|c| c.headers.get_all("authorization").iter().count() == 1));
}

#[tokio::test]
async fn the_token_source_covers_probes_lists_and_calls_without_their_own() {
    let fake = serve(modern()).await;
    let token = source(false);
    let up = upstream(&fake.url, EraPref::Auto, Some(token.clone()));
    up.list_tools_page(None).await.expect("list");
    collect(up.request(call(None)).await.expect("call")).await;
    collect(
        up.request(call(Some("Bearer exchanged")))
            .await
            .expect("call"),
    )
    .await;
    let seen: Vec<(String, Option<String>)> = fake
        .requests()
        .iter()
        .map(|r| (r.rpc_method().to_owned(), auth_of(r)))
        .collect();
    let own = Some("Bearer own".to_owned());
    assert_eq!(
        seen,
        [
            ("server/discover".to_owned(), own.clone()),
            ("tools/list".to_owned(), own.clone()),
            ("tools/call".to_owned(), own),
            ("tools/call".to_owned(), Some("Bearer exchanged".to_owned())),
        ]
    );
    assert_eq!(
        token.asked.load(Ordering::SeqCst),
        3,
        "not asked when the request has one"
    );
}

#[tokio::test]
async fn legacy_session_requests_carry_the_token_and_a_calls_own_value_follows_the_call() {
    let fake = serve(legacy()).await;
    let up = upstream(&fake.url, EraPref::Legacy, Some(source(false)));
    up.list_tools_page(None).await.expect("list");
    collect(up.request(call(Some("Bearer caller"))).await.expect("call")).await;
    up.start_watching();
    for _ in 0..100 {
        if fake
            .requests()
            .iter()
            .any(|r| r.method == http::Method::GET)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    up.shutdown().await;
    let requests = fake.requests();
    let by = |pred: &dyn Fn(&Recorded) -> bool| {
        requests
            .iter()
            .find(|r| pred(r))
            .map(auth_of)
            .unwrap_or_else(|| panic!("missing request in {requests:#?}"))
    };
    let own = Some("Bearer own".to_owned());
    assert_eq!(by(&|r| r.rpc_method() == "initialize"), own);
    assert_eq!(by(&|r| r.rpc_method() == "notifications/initialized"), own);
    assert_eq!(by(&|r| r.rpc_method() == "tools/list"), own);
    assert_eq!(by(&|r| r.method == http::Method::GET), own);
    assert_eq!(by(&|r| r.method == http::Method::DELETE), own);
    let caller = Some("Bearer caller".to_owned());
    assert_eq!(by(&|r| r.rpc_method() == "tools/call"), caller);
    // Its answer to the upstream's ping belongs to the call.
    assert_eq!(by(&|r| r.body["id"] == "srv-1"), caller);
}

#[tokio::test]
async fn a_failing_token_source_fails_the_request_before_it_is_sent() {
    let fake = serve(modern()).await;
    let up = upstream(&fake.url, EraPref::Modern, Some(source(true)));
    let err = up.list_tools_page(None).await.expect_err("no token");
    assert!(
        matches!(&err, UpstreamError::Unavailable(m) if m.contains("no credentials for upstream alpha") && m.contains("token endpoint down")),
        "{err:?}"
    );
    assert!(fake.requests().is_empty(), "nothing reached the upstream");
    // A request with its own value does not need the source.
    collect(up.request(call(Some("Bearer caller"))).await.expect("call")).await;
    assert_eq!(fake.requests().len(), 1);
}

#[test]
fn authorization_values_stay_out_of_debug() {
    let shown = format!("{:?}", call(Some("Bearer caller-secret")));
    assert!(
        !shown.contains("caller-secret") && shown.contains("<redacted>"),
        "{shown}"
    );
    let spec = TransportSpec::Http {
        url: "http://x/mcp".into(),
        headers: vec![],
        ca_file: None,
        token: Some(source(false)),
    };
    assert!(format!("{spec:?}").contains("<source>"));
}

#[tokio::test]
async fn a_bad_authorization_value_is_refused_not_sent() {
    let fake = serve(modern()).await;
    let up = upstream(&fake.url, EraPref::Modern, None);
    let err = up
        .request(call(Some("Bearer a\nb")))
        .await
        .expect_err("bad value");
    assert!(matches!(err, UpstreamError::Unavailable(_)), "{err:?}");
    assert!(fake.requests().is_empty());
}
