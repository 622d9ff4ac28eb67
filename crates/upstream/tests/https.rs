//! HTTPS upstreams: a custom CA from `ca_file`, HTTP/2 by ALPN. The fixture
//! CA and server key in tests/fixtures exist only for these tests.

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, Version};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use junction_upstream::{
    ConnCounters, EraPref, TransportSpec, Upstream, UpstreamError, UpstreamSpec,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");

/// A TLS MCP endpoint answering every request with an empty tool list;
/// records the HTTP version of each request. Offers h2 and HTTP/1.1.
async fn tls_server() -> (String, Arc<Mutex<Vec<Version>>>) {
    let (url, versions, _) = tls_server_with(&[b"h2", b"http/1.1"], Duration::ZERO).await;
    (url, versions)
}

/// `tls_server` offering these ALPN protocols, pausing `slow` before each
/// TLS handshake and each answer; also returns the most handshakes it saw
/// under way at once.
async fn tls_server_with(
    alpn: &[&[u8]],
    slow: Duration,
) -> (String, Arc<Mutex<Vec<Version>>>, Arc<AtomicUsize>) {
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_file_iter(format!("{FIXTURES}/test-server.pem"))
            .expect("cert file")
            .collect::<Result<_, _>>()
            .expect("certs");
    let key = PrivateKeyDer::from_pem_file(format!("{FIXTURES}/test-server.key")).expect("key");
    let mut cfg = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .expect("server config");
    cfg.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(cfg));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let versions: Arc<Mutex<Vec<Version>>> = Arc::default();
    let (busiest, handshaking) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (v, most) = (versions.clone(), busiest.clone());
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            let (v, most, now) = (v.clone(), most.clone(), handshaking.clone());
            tokio::spawn(async move {
                most.fetch_max(now.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                tokio::time::sleep(slow).await;
                let tls = acceptor.accept(tcp).await;
                now.fetch_sub(1, Ordering::SeqCst);
                let Ok(tls) = tls else {
                    return;
                };
                let svc = service_fn(move |req: Request<Incoming>| {
                    let v = v.clone();
                    async move {
                        tokio::time::sleep(slow).await;
                        v.lock().expect("lock").push(req.version());
                        let body = req
                            .into_body()
                            .collect()
                            .await
                            .map(|b| b.to_bytes())
                            .unwrap_or_default();
                        let msg: serde_json::Value =
                            serde_json::from_slice(&body).unwrap_or_default();
                        let reply = serde_json::json!({"jsonrpc":"2.0","id":msg["id"],"result":{"resultType":"complete","tools":[]}});
                        Ok::<_, Infallible>(
                            Response::builder()
                                .header("content-type", "application/json")
                                .body(Full::new(Bytes::from(reply.to_string())))
                                .expect("response"),
                        )
                    }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    (format!("https://localhost:{port}/mcp"), versions, busiest)
}

fn upstream(url: &str, ca_file: Option<String>) -> Arc<Upstream> {
    Upstream::new(UpstreamSpec {
        id: "secure".into(),
        transport: TransportSpec::Http {
            url: url.into(),
            headers: vec![],
            ca_file: ca_file.map(Into::into),
            token: None,
        },
        timeout: Duration::from_secs(10),
        era: EraPref::Modern,
        max_message_bytes: junction_upstream::DEFAULT_MAX_MESSAGE_BYTES,
    })
    .expect("upstream")
}

#[tokio::test]
async fn https_with_ca_file_speaks_http2() {
    let (url, versions) = tls_server().await;
    let up = upstream(&url, Some(format!("{FIXTURES}/test-ca.pem")));
    up.list_tools_page(None).await.expect("first");
    up.list_tools_page(None).await.expect("second");
    assert_eq!(
        *versions.lock().expect("lock"),
        vec![Version::HTTP_2, Version::HTTP_2]
    );
}

#[tokio::test]
async fn a_burst_of_first_requests_shares_one_http2_connection() {
    let (url, versions) = tls_server().await;
    // Sixteen requests before any connection exists: the first makes the
    // connection, the others wait for it instead of each opening one.
    let counters = burst(&url, 16, &versions, Version::HTTP_2).await;
    assert_eq!(counters.opened.get(), 1, "connections opened");
    assert_eq!(counters.open.get(), 1, "connections open");
}

/// `n` requests at once to a fresh upstream at `url` (the fixture CA
/// trusted), all of which must succeed over `version` (as the server
/// recorded in `versions`); the upstream's connection counters.
async fn burst(
    url: &str,
    n: usize,
    versions: &Mutex<Vec<Version>>,
    version: Version,
) -> ConnCounters {
    let up = upstream(url, Some(format!("{FIXTURES}/test-ca.pem")));
    let counters = ConnCounters {
        opened: prometheus::IntCounter::new("opened", "opened").expect("counter"),
        open: prometheus::IntGauge::new("open", "open").expect("gauge"),
    };
    up.count_connections(counters.clone());
    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..n {
        let up = up.clone();
        calls.spawn(async move { up.list_tools_page(None).await.map(|_| ()) });
    }
    while let Some(done) = calls.join_next().await {
        done.expect("task").expect("page");
    }
    let versions = versions.lock().expect("lock").clone();
    assert!(versions.len() >= n, "{versions:?}");
    assert!(versions.iter().all(|v| *v == version), "{versions:?}");
    counters
}

#[tokio::test]
async fn a_burst_of_first_requests_to_an_http1_tls_upstream_connects_side_by_side() {
    // 0.3 s per handshake and per answer: the first request's connection is
    // busy while the others connect.
    let (url, versions, busiest) =
        tls_server_with(&[b"http/1.1"], Duration::from_millis(300)).await;
    // HTTP/1.1 carries one request at a time: once the first connection
    // shows the protocol, the requests that waited behind it open their own,
    // at the same time rather than one after another.
    let counters = burst(&url, 8, &versions, Version::HTTP_11).await;
    assert!(counters.opened.get() > 1, "{}", counters.opened.get());
    let busiest = busiest.load(Ordering::SeqCst);
    assert!(busiest > 1, "handshakes under way at once: {busiest}");
}

#[tokio::test]
async fn https_with_an_unknown_ca_is_unavailable() {
    let (url, versions) = tls_server().await;
    let up = upstream(&url, None);
    let err = up.list_tools_page(None).await.expect_err("untrusted");
    assert!(matches!(err, UpstreamError::Unavailable(_)), "{err:?}");
    assert!(
        versions.lock().expect("lock").is_empty(),
        "no request got through"
    );
}
