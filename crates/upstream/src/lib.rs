//! junction-upstream: one client per upstream MCP server.
//!
//! It speaks Streamable HTTP (its own pool and HTTP/1.1 connections, hyper for h2, rustls) or stdio (a
//! spawned child, newline-delimited JSON-RPC), finds out and caches the era
//! the upstream speaks (modern `server/discover` first, legacy `initialize`
//! as fallback, NOTES §3.2), and relays each request's notifications and
//! final response as they arrive.
//!
//! It must never forward the downstream client's credentials (only headers
//! the caller hands it, and the `Authorization` the caller decided on:
//! `UpstreamRequest::authorization`, `TransportSpec::Http::token`), never
//! reuse a downstream JSON-RPC id upstream, never re-serialize forwarded
//! payloads, and never panic on what an upstream sends.

pub mod body;
mod breaker;
mod envelope;
mod era;
mod error;
pub mod framing;
pub mod home;
mod http;
mod observed;
mod sse;
mod stdio;
mod stream;
mod watch;

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use junction_protocol::jsonrpc::{RawParams, RpcError};
use serde_json::value::RawValue;
use tokio::time::Instant;

pub use breaker::{BreakerConfig, BreakerState};
pub use era::{Era, EraPref};
pub use error::UpstreamError;
pub use http::{TokenFuture, TokenSource};
pub use observed::LastError;
pub use stream::{Bridged, ResponseStream, ServerRequest};
pub use watch::{Change, Changes};

/// Everything needed to reach one upstream; the server builds it from config.
#[derive(Clone, Debug)]
pub struct UpstreamSpec {
    pub id: String,
    pub transport: TransportSpec,
    /// Default per-request deadline (connect + whole response).
    pub timeout: Duration,
    pub era: EraPref,
    /// Largest response body, SSE event or stdio line accepted from it.
    pub max_message_bytes: usize,
}

/// The default of `UpstreamSpec::max_message_bytes` (`upstreams[].max_response_bytes`).
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = sse::MAX_MESSAGE_BYTES;

/// `Debug` prints header names only: values may hold upstream credentials.
#[derive(Clone)]
pub enum TransportSpec {
    Http {
        url: String,
        /// Static headers, including an `Authorization` built from config.
        headers: Vec<(String, String)>,
        /// Extra PEM roots, trusted in addition to the public web roots.
        ca_file: Option<PathBuf>,
        /// `Authorization` for every request without a per-request one
        /// (`UpstreamRequest::authorization`): list pages, the era probe,
        /// `initialize` and legacy session requests, standing GET streams,
        /// DELETE. Replaces a static `Authorization` header. A failure fails
        /// that request with `Unavailable`.
        token: Option<Arc<dyn TokenSource>>,
    },
    Stdio {
        command: Vec<String>,
        /// Added to the inherited environment.
        env: Vec<(String, String)>,
        cwd: Option<PathBuf>,
    },
}

impl std::fmt::Debug for TransportSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TransportSpec::Http {
                url,
                headers,
                ca_file,
                token,
            } => f
                .debug_struct("Http")
                .field("url", url)
                .field(
                    "headers",
                    &headers.iter().map(|(k, _)| k).collect::<Vec<_>>(),
                )
                .field("ca_file", ca_file)
                .field("token", &token.as_ref().map(|_| "<source>"))
                .finish(),
            TransportSpec::Stdio { command, env, cwd } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field("env", &env.iter().map(|(k, _)| k).collect::<Vec<_>>())
                .field("cwd", cwd)
                .finish(),
        }
    }
}

/// One request to forward. `params` excludes `_meta`; the era-specific `_meta`
/// members are added here. `params` may borrow the client's message (`'a`):
/// a request is sent before its caller's body is dropped. `Debug` hides
/// `authorization`.
#[derive(Default)]
pub struct UpstreamRequest<'a> {
    /// Borrowed for the methods Junction names itself (every forwarded one):
    /// no allocation per call.
    pub method: std::borrow::Cow<'static, str>,
    pub params: RawParams<'a>,
    /// Downstream `_meta` entries to forward (progressToken, logLevel, traceparent…).
    pub meta: Vec<(String, Box<RawValue>)>,
    /// The downstream client's capabilities, for modern upstreams (default
    /// `{}`), usually borrowed from the client's side of the call.
    pub client_capabilities: Option<Cow<'a, RawValue>>,
    /// Pre-encoded `Mcp-Param-*` headers (modern HTTP only).
    pub param_headers: Vec<(String, String)>,
    /// Allow-listed client headers (traceparent…), HTTP only.
    pub forward_headers: Vec<(String, String)>,
    /// Overrides the spec's timeout.
    pub timeout: Option<Duration>,
    /// The downstream client speaks the handshake era. An HTTP upstream that
    /// serves both eras then gets the request on a handshake-era session of
    /// its own, so the upstream's server requests have a back-channel
    /// (`next_bridged`); a modern request has none there.
    pub handshake_client: bool,
    /// The whole `Authorization` value (`Bearer …`) for this request, HTTP
    /// only: replaces the static header and the token source. On a legacy
    /// session the call's answers to server requests and its cancel carry it too.
    pub authorization: Option<String>,
}

impl std::fmt::Debug for UpstreamRequest<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamRequest")
            .field("method", &self.method)
            .field("params", &self.params)
            .field("meta", &self.meta)
            .field("client_capabilities", &self.client_capabilities)
            .field("param_headers", &self.param_headers)
            .field("forward_headers", &self.forward_headers)
            .field("timeout", &self.timeout)
            .field("handshake_client", &self.handshake_client)
            .field(
                "authorization",
                &self.authorization.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

/// One page of an upstream's `tools/list`.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolsPage {
    /// Shared with the previous answer when the upstream sent the same bytes
    /// (see `ToolsMemo`).
    pub tools: Arc<Vec<serde_json::Value>>,
    pub next_cursor: Option<String>,
    /// `ttlMs` as sent (negative → 0); `None` when absent (legacy upstreams).
    pub ttl_ms: Option<u64>,
    pub cache_public: bool,
}

#[derive(Debug)]
pub enum UpstreamEvent {
    /// A whole notification message; on stdio its progressToken is mapped back
    /// to the downstream value.
    Notification(Box<RawValue>),
    /// The `result` member of the response.
    Result(Box<RawValue>),
    /// The upstream's JSON-RPC error, passed through.
    Error(RpcError),
}

/// JSON-RPC ids for everything this upstream client sends; never reused.
#[derive(Default)]
pub(crate) struct IdGen(AtomicI64);

impl IdGen {
    pub(crate) fn next(&self) -> i64 {
        self.0.fetch_add(1, Ordering::Relaxed) + 1
    }
}

enum Transport {
    Http(http::HttpTransport),
    Stdio(stdio::StdioTransport),
}

/// Where an HTTP upstream's pool counts its connections: `opened` once per
/// connection made (TCP, TLS, HTTP handshake), `open` while it lives (in use
/// or idle). Shared by an upstream's pools across reloads, so the gauge stays
/// exact while an old pool's connections close.
#[derive(Clone)]
pub struct ConnCounters {
    pub opened: prometheus::IntCounter,
    pub open: prometheus::IntGauge,
}

pub struct Upstream {
    id: String,
    timeout: Duration,
    transport: Transport,
    changes: tokio::sync::broadcast::Sender<String>,
    watch: watch::WatchState,
    breaker: breaker::Breaker,
    tools_memo: std::sync::Mutex<Option<ToolsMemo>>,
    /// The latest failure and answer time, for the status page.
    observed: observed::Observed,
}

/// The first `tools/list` page as last received: its `tools` array's bytes
/// and their parse. Most refreshes return the same list; equal bytes parse to
/// equal tools, so the page is handed back without parsing it again (and the
/// catalog sees the same `Arc`, so it neither compares nor drops a copy).
/// Only the first page: later pages are rare and their cursors can differ
/// every time.
struct ToolsMemo {
    raw: Box<str>,
    tools: Arc<Vec<serde_json::Value>>,
}

/// A mutex's guard even if a holder panicked: nothing this crate guards is
/// left half-updated by a panic, and its tables must stay usable.
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Pause before the one retry of a request that never left Junction: long
/// enough for a respawned child or a restarted listener, short next to any deadline.
const RETRY_PAUSE: Duration = Duration::from_millis(50);

/// Capacity of the change channel; a lagging receiver just refreshes.
const CHANGES_CAPACITY: usize = 16;

/// `notifications/*/list_changed` that belong to no request (stdio, legacy SSE).
pub(crate) fn is_change_notification(method: &str) -> bool {
    method.starts_with("notifications/") && method.ends_with("/list_changed")
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl Upstream {
    /// Validates the spec and builds the pooled client; does no network I/O.
    /// The circuit breaker uses `BreakerConfig::default()`.
    pub fn new(spec: UpstreamSpec) -> Result<Arc<Upstream>, UpstreamError> {
        Self::with_breaker(spec, BreakerConfig::default())
    }

    /// Like `new`, with explicit circuit-breaker tuning.
    pub fn with_breaker(
        spec: UpstreamSpec,
        breaker: BreakerConfig,
    ) -> Result<Arc<Upstream>, UpstreamError> {
        let (changes, _) = tokio::sync::broadcast::channel(CHANGES_CAPACITY);
        let transport = match &spec.transport {
            TransportSpec::Http { .. } => {
                Transport::Http(http::HttpTransport::new(&spec, changes.clone())?)
            }
            TransportSpec::Stdio { command, env, cwd } => {
                if command.is_empty() {
                    return Err(UpstreamError::Unavailable("empty stdio command".to_owned()));
                }
                Transport::Stdio(stdio::StdioTransport::new(
                    &spec,
                    command.clone(),
                    env.clone(),
                    cwd.clone(),
                    changes.clone(),
                ))
            }
        };
        Ok(Arc::new(Upstream {
            id: spec.id,
            timeout: spec.timeout,
            transport,
            changes,
            watch: watch::WatchState::new(CHANGES_CAPACITY),
            breaker: breaker::Breaker::new(breaker),
            tools_memo: std::sync::Mutex::new(None),
            observed: observed::Observed::default(),
        }))
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// Changes the upstream announced outside any request's own stream:
    /// stdio and legacy call streams always, and the standing stream (modern
    /// `subscriptions/listen`, legacy GET) once `start_watching` ran.
    pub fn changes(&self) -> Changes {
        Changes::new(self.changes.subscribe(), self.watch.events.subscribe())
    }

    /// The upstream's era: probed once and cached; re-probed after failures
    /// that suggest the cached answer broke (stdio: after every respawn).
    pub async fn era(&self) -> Result<Era, UpstreamError> {
        let deadline = Instant::now() + self.timeout;
        let fut = async {
            match &self.transport {
                Transport::Http(t) => t.era(deadline).await,
                Transport::Stdio(t) => t.era().await,
            }
        };
        tokio::time::timeout_at(deadline, fut)
            .await
            .unwrap_or(Err(UpstreamError::Timeout))
    }

    /// Counts this upstream's connections into `counters` from now on: HTTP
    /// upstreams only (a stdio child is one pipe, not a pool). Set once; later
    /// calls change nothing.
    pub fn count_connections(&self, counters: ConnCounters) {
        if let Transport::Http(t) = &self.transport {
            t.count_connections(counters);
        }
    }

    /// Passive health: false while the circuit breaker is open or probing.
    pub fn is_healthy(&self) -> bool {
        self.breaker.is_healthy()
    }

    /// The era as known now, without probing: `None` until the first
    /// request learned it (and for a stdio upstream whose child is gone).
    pub fn known_era(&self) -> Option<Era> {
        match &self.transport {
            Transport::Http(t) => t.known_era(),
            Transport::Stdio(t) => t.known_era(),
        }
    }

    /// Where the circuit breaker stands.
    pub fn breaker_state(&self) -> BreakerState {
        self.breaker.state()
    }

    /// The latest request (a call, a list page) that failed without an
    /// answer from the upstream: unreachable, timed out, HTTP error, broken
    /// protocol. Kept after later successes; requests the open breaker
    /// refused do not replace it.
    pub fn last_error(&self) -> Option<LastError> {
        self.observed.last_error()
    }

    /// How long the latest answered request (a call, a list page) took
    /// until its answer began: the whole page for a list, the first message
    /// or headers for a call. `None` before the first answer.
    pub fn latency(&self) -> Option<Duration> {
        self.observed.latency()
    }

    /// Send one request; its deadline covers the era probe, connect and the
    /// whole response. Fails fast with `Unavailable("circuit open")` while the
    /// breaker is open. A request that provably never left Junction
    /// (`Unavailable`) is retried once; nothing that may have reached the
    /// upstream is ever sent twice.
    pub async fn request(&self, req: UpstreamRequest<'_>) -> Result<ResponseStream, UpstreamError> {
        let permit = self.admit()?;
        // The deadline's start, and the latency's.
        let started = Instant::now();
        let result = self.send_retrying(&req, started).await;
        permit.record(breaker::Outcome::of(&result));
        self.observed.record(started, &result);
        result
    }

    fn admit(&self) -> Result<breaker::Permit<'_>, UpstreamError> {
        self.breaker
            .admit()
            .ok_or_else(|| UpstreamError::Unavailable("circuit open".to_owned()))
    }

    /// `started`: when the request's deadline (its timeout) began.
    async fn send_retrying(
        &self,
        req: &UpstreamRequest<'_>,
        started: Instant,
    ) -> Result<ResponseStream, UpstreamError> {
        let deadline = started + req.timeout.unwrap_or(self.timeout);
        match self.send_once(req, deadline).await {
            Err(UpstreamError::Unavailable(why)) if Instant::now() + RETRY_PAUSE < deadline => {
                tracing::debug!(upstream = %self.id, error = %why, "nothing was sent; retrying once");
                tokio::time::sleep(RETRY_PAUSE).await;
                self.send_once(req, deadline).await
            }
            other => other,
        }
    }

    async fn send_once(
        &self,
        req: &UpstreamRequest<'_>,
        deadline: Instant,
    ) -> Result<ResponseStream, UpstreamError> {
        let fut = async {
            match &self.transport {
                Transport::Http(t) => t.request(req, deadline).await,
                Transport::Stdio(t) => t.request(req, deadline).await,
            }
        };
        tokio::time::timeout_at(deadline, fut)
            .await
            .unwrap_or(Err(UpstreamError::Timeout))
    }

    /// `tools/list` for one page; an upstream JSON-RPC error is `Rpc`. Listing
    /// is idempotent, so a page whose connection closed or got a 502/503/504
    /// is asked for once more. The breaker sees the outcome of the whole page,
    /// stream included.
    pub async fn list_tools_page(
        &self,
        cursor: Option<String>,
    ) -> Result<ToolsPage, UpstreamError> {
        let permit = self.admit()?;
        let started = Instant::now();
        let mut result = self.list_once(cursor.as_deref()).await;
        if result.as_ref().is_err_and(list_retry_helps) {
            tracing::debug!(upstream = %self.id, "retrying tools/list once");
            result = self.list_once(cursor.as_deref()).await;
        }
        permit.record(breaker::Outcome::of(&result));
        self.observed.record(started, &result);
        result
    }

    async fn list_once(&self, cursor: Option<&str>) -> Result<ToolsPage, UpstreamError> {
        let mut params = RawParams::new();
        if let Some(c) = cursor {
            let raw =
                serde_json::to_string(c).map_err(|e| UpstreamError::Protocol(e.to_string()))?;
            params.insert("cursor".into(), Cow::Owned(envelope::raw_string(raw)));
        }
        let mut stream = self
            .send_retrying(
                &UpstreamRequest {
                    method: "tools/list".into(),
                    params,
                    ..UpstreamRequest::default()
                },
                Instant::now(),
            )
            .await?;
        while let Some(event) = stream.next().await {
            match event? {
                UpstreamEvent::Notification(_) => continue,
                UpstreamEvent::Result(raw) => {
                    let memo = cursor.is_none().then_some(&self.tools_memo);
                    return parse_tools_page(&raw, memo);
                }
                UpstreamEvent::Error(err) => return Err(UpstreamError::Rpc(err)),
            }
        }
        Err(UpstreamError::Protocol(
            "tools/list stream ended without a result".to_owned(),
        ))
    }

    /// stdio: close stdin, wait up to 2 s, then kill. Legacy HTTP: DELETE the
    /// session. The change watcher stops.
    pub async fn shutdown(&self) {
        self.watch.stop();
        match &self.transport {
            Transport::Http(t) => t.shutdown(self.timeout).await,
            Transport::Stdio(t) => t.shutdown().await,
        }
    }
}

/// Transient trouble worth one more try of an idempotent list (a timeout is
/// not: its deadline is spent).
fn list_retry_helps(e: &UpstreamError) -> bool {
    matches!(
        e,
        UpstreamError::Closed
            | UpstreamError::Http {
                status: 502..=504,
                ..
            }
    )
}

#[derive(serde::Deserialize)]
struct ListToolsResult<'a> {
    #[serde(borrow)]
    tools: &'a RawValue,
    #[serde(rename = "nextCursor", default)]
    next_cursor: Option<String>,
    #[serde(rename = "ttlMs", default)]
    ttl_ms: Option<serde_json::Value>,
    #[serde(rename = "cacheScope", default)]
    cache_scope: Option<String>,
}

/// `memo`: the upstream's first-page memo, when this is the first page.
fn parse_tools_page(
    raw: &RawValue,
    memo: Option<&std::sync::Mutex<Option<ToolsMemo>>>,
) -> Result<ToolsPage, UpstreamError> {
    let bad = |e: serde_json::Error| UpstreamError::Protocol(format!("bad tools/list result: {e}"));
    let r: ListToolsResult<'_> = serde_json::from_str(raw.get()).map_err(bad)?;
    let text = r.tools.get();
    let remembered = memo.and_then(|m| {
        let m = lock(m);
        m.as_ref()
            .filter(|m| *m.raw == *text)
            .map(|m| m.tools.clone())
    });
    let tools = match remembered {
        Some(tools) => tools,
        None => {
            let tools: Arc<Vec<serde_json::Value>> =
                Arc::new(serde_json::from_str(text).map_err(bad)?);
            if let Some(m) = memo {
                *lock(m) = Some(ToolsMemo {
                    raw: text.into(),
                    tools: tools.clone(),
                });
            }
            tools
        }
    };
    let ttl_ms = r.ttl_ms.as_ref().and_then(|v| {
        v.as_u64()
            .or_else(|| v.as_i64().map(|_| 0))
            .or_else(|| v.as_f64().map(|f| if f > 0.0 { f as u64 } else { 0 }))
    });
    Ok(ToolsPage {
        tools,
        next_cursor: r.next_cursor,
        ttl_ms,
        cache_public: r.cache_scope.as_deref() == Some("public"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_cross_tasks() {
        fn send<T: Send>() {}
        fn send_sync<T: Send + Sync>() {}
        send::<ResponseStream>();
        send::<UpstreamError>();
        send_sync::<Upstream>();
    }

    #[tokio::test]
    async fn refused_connections_open_the_breaker_then_fail_fast() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string());
            l.and_then(|l| l.local_addr().map_err(|e| e.to_string()))
                .map(|a| a.port())
                .unwrap_or(1)
        };
        let spec = UpstreamSpec {
            id: "down".into(),
            transport: TransportSpec::Http {
                url: format!("http://127.0.0.1:{port}/mcp"),
                headers: Vec::new(),
                ca_file: None,
                token: None,
            },
            timeout: Duration::from_secs(5),
            era: EraPref::Modern,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
        };
        let cfg = BreakerConfig {
            failure_threshold: 2,
            ..BreakerConfig::default()
        };
        let up = Upstream::with_breaker(spec, cfg).expect("valid spec");
        assert!(up.is_healthy());
        for _ in 0..2 {
            let err = up.list_tools_page(None).await.expect_err("refused");
            assert!(
                matches!(err, UpstreamError::Unavailable(ref m) if m != "circuit open"),
                "{err}"
            );
        }
        assert!(!up.is_healthy());
        let err = up.list_tools_page(None).await.expect_err("open");
        assert!(
            matches!(err, UpstreamError::Unavailable(ref m) if m == "circuit open"),
            "{err}"
        );
        let err = up
            .request(UpstreamRequest {
                method: "tools/call".into(),
                ..UpstreamRequest::default()
            })
            .await
            .expect_err("open");
        assert!(
            matches!(err, UpstreamError::Unavailable(ref m) if m == "circuit open"),
            "{err}"
        );
    }

    #[test]
    fn spec_debug_hides_credentials() {
        let spec = TransportSpec::Http {
            url: "https://x.test/mcp".into(),
            headers: vec![("Authorization".into(), "Bearer s3cret".into())],
            ca_file: None,
            token: None,
        };
        let shown = format!("{spec:?}");
        assert!(
            shown.contains("Authorization") && !shown.contains("s3cret"),
            "{shown}"
        );
    }

    #[test]
    fn tools_page_fields() {
        let raw = envelope::raw_string(
            r#"{"tools":[{"name":"a"}],"nextCursor":"","ttlMs":-5,"cacheScope":"public"}"#
                .to_owned(),
        );
        let page = parse_tools_page(&raw, None).ok();
        assert_eq!(
            page,
            Some(ToolsPage {
                tools: Arc::new(vec![serde_json::json!({"name":"a"})]),
                next_cursor: Some(String::new()),
                ttl_ms: Some(0),
                cache_public: true,
            })
        );
        let legacy = envelope::raw_string(r#"{"tools":[]}"#.to_owned());
        let page = parse_tools_page(&legacy, None).ok();
        assert_eq!(
            page.map(|p| (p.ttl_ms, p.cache_public)),
            Some((None, false))
        );
        assert!(parse_tools_page(&envelope::raw_string("{}".to_owned()), None).is_err());
        let not_array = envelope::raw_string(r#"{"tools":{"name":"a"}}"#.to_owned());
        assert!(parse_tools_page(&not_array, None).is_err());
    }

    #[test]
    fn an_unchanged_first_page_is_handed_back_not_parsed_again() {
        let memo = std::sync::Mutex::new(None);
        let page = |text: &str| {
            let raw = envelope::raw_string(text.to_owned());
            parse_tools_page(&raw, Some(&memo)).expect("page")
        };
        let first = page(r#"{"tools":[{"name":"a"}],"ttlMs":1000}"#);
        // Same tools bytes (other members may differ): the same list.
        let again = page(r#"{"tools":[{"name":"a"}],"ttlMs":0,"cacheScope":"public"}"#);
        assert!(Arc::ptr_eq(&first.tools, &again.tools));
        assert_eq!((again.ttl_ms, again.cache_public), (Some(0), true));
        // Different bytes, even for an equal list: parsed, and remembered.
        let spaced = page(r#"{"tools":[ {"name":"a"} ]}"#);
        assert!(!Arc::ptr_eq(&first.tools, &spaced.tools));
        assert_eq!(*spaced.tools, *first.tools);
        let changed = page(r#"{"tools":[{"name":"b"}]}"#);
        assert_eq!(*changed.tools, vec![serde_json::json!({"name":"b"})]);
        let back = page(r#"{"tools":[{"name":"b"}]}"#);
        assert!(Arc::ptr_eq(&changed.tools, &back.tools));
        // A broken page does not replace what was remembered.
        assert!(page_err(&memo, r#"{"tools":[{"name":"b"},]}"#));
        assert!(Arc::ptr_eq(
            &page(r#"{"tools":[{"name":"b"}]}"#).tools,
            &back.tools
        ));
    }

    fn page_err(memo: &std::sync::Mutex<Option<ToolsMemo>>, text: &str) -> bool {
        parse_tools_page(&envelope::raw_string(text.to_owned()), Some(memo)).is_err()
    }
}
