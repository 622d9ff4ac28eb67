//! Streamable HTTP upstreams: era probe, legacy session (initialize once,
//! session header, re-initialize on 404), and request forwarding, with the
//! request's own `Authorization` or one from the upstream's token source.

mod auth;
mod dual;
mod h1;
mod pool;
mod wire;

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwapOption;
use http::header::{HeaderName, HeaderValue};
use http::Method;
use junction_protocol::{header_value, jsonrpc::RpcError, version};
use serde_json::value::RawValue;
use tokio::time::Instant;

use crate::envelope::{self, Stamp};
use crate::era::{self, Era, EraPref};
use crate::stream::{CancelGuard, Inner, ResponseStream, Strays};
use crate::{IdGen, TransportSpec, UpstreamError, UpstreamEvent, UpstreamRequest, UpstreamSpec};
pub use auth::{TokenFuture, TokenSource};
use h1::Fields;
use wire::{Answer, Responder, Wire};

const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";

/// What we know about the upstream once probed.
enum Ready {
    Modern,
    Legacy {
        version: String,
        session: Option<HeaderValue>,
    },
}

impl Ready {
    fn era(&self) -> Era {
        match self {
            Ready::Modern => Era::Modern,
            Ready::Legacy { version, .. } => Era::Legacy {
                version: version.clone(),
            },
        }
    }

    /// Headers every later legacy message carries.
    fn legacy_headers(&self) -> Fields {
        let mut h = Fields::with_capacity(3);
        if let Ready::Legacy { version, session } = self {
            if era::sends_version_header(version) {
                if let Ok(v) = HeaderValue::from_str(version) {
                    h.insert(VERSION_NAME, v);
                }
            }
            if let Some(s) = session {
                h.insert(SESSION_NAME, s.clone());
            }
        }
        h
    }
}

pub(crate) struct HttpTransport {
    wire: Arc<Wire>,
    pref: EraPref,
    ids: IdGen,
    ready: ArcSwapOption<Ready>,
    // Single-flight probe / initialize: concurrent first requests share one.
    init_lock: tokio::sync::Mutex<()>,
    /// The handshake-era session of a dual-era upstream (`dual.rs`).
    side: dual::Side,
    /// Handshake-era clients' calls in flight on a handshake-era upstream's
    /// own session: server requests of its GET stream (read by the change
    /// watcher, `standing_stream`) that name no call go to the one in flight.
    calls: Arc<dual::Calls>,
}

/// Why one attempt did not produce a stream.
enum Attempt {
    Failed(UpstreamError),
    /// Legacy 404 with a session: the session is gone, nothing ran.
    SessionExpired,
}

impl HttpTransport {
    /// The transport of `spec`, whose transport is `TransportSpec::Http`.
    pub(crate) fn new(
        spec: &UpstreamSpec,
        changes: tokio::sync::broadcast::Sender<String>,
    ) -> Result<HttpTransport, UpstreamError> {
        let upstream = spec.id.as_str();
        let TransportSpec::Http {
            url,
            headers,
            ca_file,
            token,
        } = &spec.transport
        else {
            return Err(UpstreamError::Unavailable(format!(
                "upstream {upstream} is not an HTTP upstream"
            )));
        };
        let uri = wire::parse_url(url)?;
        let mut static_headers = Vec::with_capacity(headers.len());
        for (name, value) in headers {
            let h = wire::header(name, value).ok_or_else(|| {
                UpstreamError::Unavailable(format!(
                    "invalid header {name:?} for upstream {upstream}"
                ))
            })?;
            static_headers.push(h);
        }
        Ok(HttpTransport {
            wire: Arc::new(Wire {
                upstream: upstream.to_owned(),
                pool: Arc::new(pool::Pool::new(
                    wire::build_connector(ca_file.as_deref())?,
                    uri,
                )?),
                static_headers,
                token: token.clone(),
                changes,
                max_message: spec.max_message_bytes,
            }),
            pref: spec.era,
            ids: IdGen::default(),
            ready: ArcSwapOption::empty(),
            init_lock: tokio::sync::Mutex::new(()),
            side: dual::Side::default(),
            calls: Arc::default(),
        })
    }

    pub(crate) fn count_connections(&self, counters: crate::ConnCounters) {
        self.wire.pool.count_connections(counters);
    }

    pub(crate) async fn era(&self, deadline: Instant) -> Result<Era, UpstreamError> {
        Ok(self.ensure_ready(deadline).await?.era())
    }

    /// The era learned so far (a pinned `modern` needs no probe).
    pub(crate) fn known_era(&self) -> Option<Era> {
        match (self.ready.load().as_deref(), self.pref) {
            (Some(ready), _) => Some(ready.era()),
            (None, EraPref::Modern) => Some(Era::Modern),
            (None, EraPref::Auto | EraPref::Legacy) => None,
        }
    }

    async fn ensure_ready(&self, deadline: Instant) -> Result<Arc<Ready>, UpstreamError> {
        if let Some(r) = self.ready.load_full() {
            return Ok(r);
        }
        // Boxed: once per upstream (and after a lost session); inline, the
        // probe and handshake made every request's future ~1.5 KiB larger.
        Box::pin(self.establish(deadline)).await
    }

    /// Learns the upstream's era (probe, or `initialize`), once for all the
    /// requests waiting on it.
    async fn establish(&self, deadline: Instant) -> Result<Arc<Ready>, UpstreamError> {
        let _flight = self.init_lock.lock().await;
        if let Some(r) = self.ready.load_full() {
            return Ok(r);
        }
        let ready = Arc::new(match self.pref {
            EraPref::Modern => Ready::Modern,
            EraPref::Legacy => self.initialize(deadline).await?,
            EraPref::Auto => match self.probe(deadline).await? {
                Some(ready) => ready,
                None => self.initialize(deadline).await?,
            },
        });
        tracing::debug!(upstream = %self.wire.upstream, era = ?ready.era(), "upstream era");
        self.ready.store(Some(ready.clone()));
        Ok(ready)
    }

    /// Forget `old` (if still current) so the next request probes again
    /// (or, for the handshake-era side session, initializes again).
    fn invalidate(&self, old: &Arc<Ready>) {
        let _ = self.ready.compare_and_swap(old, None);
        self.side.forget(old);
    }

    /// NOTES §3.2: `Some(Modern)` if the upstream showed it is modern,
    /// `None` to fall back to `initialize`.
    async fn probe(&self, deadline: Instant) -> Result<Option<Ready>, UpstreamError> {
        let id = self.ids.next();
        let params = envelope::build_params(
            &Default::default(),
            &[],
            None,
            &Stamp::Modern { caps: None },
        );
        let body = envelope::request_bytes(id, "server/discover", &params);
        let resp = self
            .wire
            .send(
                Method::POST,
                body,
                modern_headers("server/discover", None),
                &[],
                deadline,
            )
            .await?;
        let verdict = |err: &RpcError| -> Result<Option<Ready>, UpstreamError> {
            if era::is_modern_code(err.code) {
                era::modern_error_verdict(err).map(|_| Some(Ready::Modern))
            } else {
                Ok(None)
            }
        };
        match wire::read_answer(resp, id, None, Some(deadline), self.wire.max_message).await {
            Err(
                e
                @ (UpstreamError::Timeout | UpstreamError::Unavailable(_) | UpstreamError::Closed),
            ) => Err(e),
            Err(_) => Ok(None),
            Ok(Answer::Status { .. }) => Ok(None),
            Ok(Answer::RpcError { error, .. }) => verdict(&error),
            Ok(Answer::Stream(inner)) => match drain(inner, deadline).await {
                Ok(Ok(_)) => Ok(Some(Ready::Modern)),
                Ok(Err(error)) => verdict(&error),
                Err(e @ (UpstreamError::Timeout | UpstreamError::Closed)) => Err(e),
                Err(_) => Ok(None),
            },
        }
    }

    async fn initialize(&self, deadline: Instant) -> Result<Ready, UpstreamError> {
        let id = self.ids.next();
        let body = envelope::request_bytes(id, "initialize", &envelope::initialize_params());
        let resp = self
            .wire
            .send(Method::POST, body, Fields::default(), &[], deadline)
            .await?;
        let session = resp.headers().get(&SESSION_NAME).cloned();
        let result = match wire::read_answer(resp, id, None, Some(deadline), self.wire.max_message)
            .await?
        {
            Answer::Stream(inner) => drain(inner, deadline).await?.map_err(UpstreamError::Rpc)?,
            Answer::RpcError { error, .. } => return Err(UpstreamError::Rpc(error)),
            Answer::Status { status, body } => return Err(UpstreamError::Http { status, body }),
        };
        let ready = Ready::Legacy {
            version: era::negotiated_version(&result)?,
            session,
        };
        let resp = self
            .wire
            .send(
                Method::POST,
                envelope::initialized_bytes(),
                ready.legacy_headers(),
                &[],
                deadline,
            )
            .await?;
        if !resp.status().is_success() {
            tracing::warn!(upstream = %self.wire.upstream, status = %resp.status(), "upstream refused notifications/initialized");
        }
        Ok(ready)
    }

    pub(crate) async fn request(
        &self,
        req: &UpstreamRequest<'_>,
        deadline: Instant,
    ) -> Result<ResponseStream, UpstreamError> {
        let ready = self.ready_for(req, deadline).await?;
        let strays = self.enlist(&ready, req);
        match self.attempt(&ready, req, deadline).await {
            Ok(stream) => Ok(with_strays(stream, strays)),
            Err(Attempt::Failed(e)) => Err(e),
            Err(Attempt::SessionExpired) => {
                tracing::debug!(upstream = %self.wire.upstream, "legacy session expired; re-initializing");
                self.invalidate(&ready);
                let ready = self.ready_for(req, deadline).await?;
                let strays = self.enlist(&ready, req);
                match self.attempt(&ready, req, deadline).await {
                    Ok(stream) => Ok(with_strays(stream, strays)),
                    Err(Attempt::Failed(e)) => Err(e),
                    Err(Attempt::SessionExpired) => Err(UpstreamError::Http {
                        status: 404,
                        body: "legacy session not found right after initialize".to_owned(),
                    }),
                }
            }
        }
    }

    /// A call's share of the server requests naming no call, when it goes over
    /// a handshake-era session (with an `Mcp-Session-Id`) for a handshake-era client:
    /// a dual-era upstream's side session, or a handshake-era upstream's own.
    /// Modern clients' calls are not enlisted (unchanged: such requests are refused).
    fn enlist(&self, ready: &Arc<Ready>, req: &UpstreamRequest<'_>) -> Option<Strays> {
        if let Some(strays) = self.side.enlist(ready) {
            return Some(strays);
        }
        let own = req.handshake_client
            && matches!(
                ready.as_ref(),
                Ready::Legacy {
                    session: Some(_),
                    ..
                }
            )
            && self
                .ready
                .load()
                .as_ref()
                .is_some_and(|r| Arc::ptr_eq(r, ready));
        own.then(|| self.calls.enlist())
    }

    async fn attempt(
        &self,
        ready: &Arc<Ready>,
        req: &UpstreamRequest<'_>,
        deadline: Instant,
    ) -> Result<ResponseStream, Attempt> {
        let id = self.ids.next();
        let (stamp, mut headers) = match ready.as_ref() {
            Ready::Modern => {
                let mut h = modern_headers(
                    &req.method,
                    envelope::mcp_name(&req.method, &req.params).as_deref(),
                );
                for (name, value) in &req.param_headers {
                    if let Some((n, v)) = wire::header(name, value) {
                        h.insert(n, v);
                    }
                }
                (
                    Stamp::Modern {
                        caps: req.client_capabilities.as_deref(),
                    },
                    h,
                )
            }
            Ready::Legacy { .. } => (Stamp::Legacy, ready.legacy_headers()),
        };
        if let Some(value) = &req.authorization {
            // The caller's credentials for this upstream: they replace any
            // static or token-source `Authorization`, and a legacy session's
            // answers and cancel for this call carry them too.
            let value = auth::header_value(&self.wire.upstream, value).map_err(Attempt::Failed)?;
            headers.insert(http::header::AUTHORIZATION, value);
        }
        let body = envelope::request_body(id, &req.method, &req.params, &req.meta, None, &stamp);
        // A legacy session answers server requests and cancels with the same
        // headers; a modern upstream needs them only for this one POST.
        let session_headers = match ready.as_ref() {
            Ready::Legacy { .. } => Some(headers.clone()),
            Ready::Modern => None,
        };
        let legacy = session_headers.is_some();
        // `Upstream::send_once` bounds the whole attempt by `deadline`: the
        // exchange below arms no timers of its own.
        let resp = self
            .wire
            .send_within(Method::POST, body, headers, &req.forward_headers)
            .await
            .map_err(Attempt::Failed)?;
        let responder = session_headers.as_ref().map(|headers| {
            Arc::new(Responder {
                wire: self.wire.clone(),
                headers: headers.clone(),
            })
        });
        let answer = wire::read_answer(resp, id, responder.clone(), None, self.wire.max_message)
            .await
            .map_err(Attempt::Failed)?;
        match answer {
            Answer::Stream(inner) => {
                let guard = session_headers.map(|h| cancel_guard(self.wire.clone(), h, id));
                let stream = ResponseStream::new(inner, deadline, guard);
                Ok(match responder {
                    Some(r) => stream.with_replier(r),
                    None => stream,
                })
            }
            Answer::Status { status: 404, .. } | Answer::RpcError { status: 404, .. }
                if matches!(
                    ready.as_ref(),
                    Ready::Legacy {
                        session: Some(_),
                        ..
                    }
                ) =>
            {
                Err(Attempt::SessionExpired)
            }
            Answer::RpcError { error, .. } => {
                if legacy && era::is_modern_code(error.code) && self.pref == EraPref::Auto {
                    // A legacy answer turned modern: the server was replaced.
                    self.invalidate(ready);
                }
                Ok(ResponseStream::new(
                    Inner::ready(Ok(UpstreamEvent::Error(error))),
                    deadline,
                    None,
                ))
            }
            Answer::Status { status, body } => {
                if !legacy && matches!(status, 400 | 404 | 405) && self.pref == EraPref::Auto {
                    // A modern server answers these with a JSON-RPC body; this one didn't.
                    self.invalidate(ready);
                }
                if (200..300).contains(&status) {
                    return Err(Attempt::Failed(UpstreamError::Protocol(format!(
                        "unexpected HTTP {status} without a response body"
                    ))));
                }
                Err(Attempt::Failed(UpstreamError::Http { status, body }))
            }
        }
    }

    /// The GET stream of the legacy upstream session (its change notices go to
    /// `changes`, other notices come out as events). `Ok(None)`: the upstream
    /// is modern or has no GET stream (405).
    pub(crate) async fn standing_stream(
        &self,
        deadline: Instant,
    ) -> Result<Option<ResponseStream>, UpstreamError> {
        let ready = self.ensure_ready(deadline).await?;
        if !matches!(ready.as_ref(), Ready::Legacy { .. }) {
            return Ok(None);
        }
        let headers = ready.legacy_headers();
        let resp = self
            .wire
            .send(Method::GET, Vec::new(), headers.clone(), &[], deadline)
            .await?;
        match resp.status().as_u16() {
            405 => return Ok(None),
            404 => {
                self.invalidate(&ready);
                return Err(UpstreamError::Http {
                    status: 404,
                    body: "legacy session not found".to_owned(),
                });
            }
            _ => {}
        }
        let responder = Arc::new(Responder {
            wire: self.wire.clone(),
            headers,
        });
        match wire::read_answer(
            resp,
            0,
            Some(responder.clone()),
            Some(deadline),
            self.wire.max_message,
        )
        .await?
        {
            Answer::Stream(inner @ Inner::Source(_)) => Ok(Some(
                ResponseStream::new(inner, deadline, None)
                    .with_replier(responder)
                    .with_roster(self.calls.clone()),
            )),
            Answer::Status { status, body } => Err(UpstreamError::Http { status, body }),
            _ => Err(UpstreamError::Protocol(
                "the GET stream is not an SSE stream".to_owned(),
            )),
        }
    }

    pub(crate) async fn shutdown(&self, timeout: Duration) {
        for ready in [self.ready.swap(None), self.side.take()]
            .into_iter()
            .flatten()
        {
            self.delete_session(&ready, timeout).await;
        }
    }

    async fn delete_session(&self, ready: &Ready, timeout: Duration) {
        if let Ready::Legacy {
            session: Some(_), ..
        } = ready
        {
            let deadline = Instant::now() + timeout.min(Duration::from_secs(5));
            match self
                .wire
                .send(
                    Method::DELETE,
                    Vec::new(),
                    ready.legacy_headers(),
                    &[],
                    deadline,
                )
                .await
            {
                Ok(resp) => {
                    tracing::debug!(upstream = %self.wire.upstream, status = %resp.status(), "legacy session deleted")
                }
                Err(e) => {
                    tracing::debug!(upstream = %self.wire.upstream, error = %e, "deleting legacy session failed")
                }
            }
        }
    }
}

fn with_strays(stream: ResponseStream, strays: Option<Strays>) -> ResponseStream {
    match strays {
        Some(s) => stream.with_strays(s),
        None => stream,
    }
}

// Constants, not `from_static` calls: those check every byte again on
// each request.
const VERSION_NAME: HeaderName = HeaderName::from_static(VERSION_HEADER);
const MODERN_VERSION: HeaderValue = HeaderValue::from_static(version::MODERN);
const METHOD_NAME: HeaderName = HeaderName::from_static("mcp-method");
const NAME_NAME: HeaderName = HeaderName::from_static("mcp-name");
const SESSION_NAME: HeaderName = HeaderName::from_static(SESSION_HEADER);

fn modern_headers(method: &str, name: Option<&str>) -> Fields {
    let mut h = Fields::with_capacity(8);
    h.insert(VERSION_NAME, MODERN_VERSION);
    if let Some(v) = method_header_value(method) {
        h.insert(METHOD_NAME, v);
    }
    if let Some(name) = name {
        if let Ok(v) = HeaderValue::from_str(&header_value::encode(name)) {
            h.insert(NAME_NAME, v);
        }
    }
    h
}

/// `Mcp-Method` for a method name: the common ones without an allocation.
fn method_header_value(method: &str) -> Option<HeaderValue> {
    const TOOLS_CALL: HeaderValue = HeaderValue::from_static("tools/call");
    const TOOLS_LIST: HeaderValue = HeaderValue::from_static("tools/list");
    const PROMPTS_GET: HeaderValue = HeaderValue::from_static("prompts/get");
    const RESOURCES_READ: HeaderValue = HeaderValue::from_static("resources/read");
    Some(match method {
        "tools/call" => TOOLS_CALL,
        "tools/list" => TOOLS_LIST,
        "prompts/get" => PROMPTS_GET,
        "resources/read" => RESOURCES_READ,
        other => HeaderValue::from_str(other).ok()?,
    })
}

/// Legacy HTTP: closing the stream is not cancellation there, so say it.
fn cancel_guard(wire: Arc<Wire>, headers: Fields, id: i64) -> CancelGuard {
    Box::new(move || {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        rt.spawn(async move {
            let deadline = Instant::now() + Duration::from_secs(5);
            let body = envelope::cancelled_bytes(id, "request cancelled by the gateway");
            if let Err(e) = wire.send(Method::POST, body, headers, &[], deadline).await {
                tracing::debug!(upstream = %wire.upstream, error = %e, "sending notifications/cancelled failed");
            }
        });
    })
}

/// Read a stream to its response, skipping notifications (internal calls).
async fn drain(
    inner: Inner,
    deadline: Instant,
) -> Result<Result<Box<RawValue>, RpcError>, UpstreamError> {
    let mut stream = ResponseStream::new(inner, deadline, None);
    while let Some(item) = stream.next().await {
        match item? {
            UpstreamEvent::Notification(_) => continue,
            UpstreamEvent::Result(r) => return Ok(Ok(r)),
            UpstreamEvent::Error(e) => return Ok(Err(e)),
        }
    }
    Err(UpstreamError::Protocol(
        "stream ended without a response".to_owned(),
    ))
}
