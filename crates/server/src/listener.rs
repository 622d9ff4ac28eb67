//! The listener and the request router: admin endpoints (and the status page
//! when it is on), then the MCP endpoint of each configured route.

use std::future::Future;
use std::sync::Arc;

use arc_swap::ArcSwap;
use http::{header, HeaderMap, HeaderValue, Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};

use crate::conn_guard::{Busy, Counted, HeadGuard, InFlight};
use crate::inline_wake::inline_wakes;
use hyper::server::conn::http2;
use prometheus::Registry;
use tokio::net::TcpListener;

use crate::context::Cx;
use crate::endpoint;
use crate::h1::{self, RequestBody};
use crate::response::{self, Body};
use crate::state::State;
use crate::status::{self, ReloadLog};
use crate::views;
use crate::workers::{self, Workers};

const TLS_HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// What the listener serves: the current state (swapped whole on reload) and the
/// metrics registry made in `main`.
pub struct Shared {
    pub state: ArcSwap<State>,
    pub registry: Registry,
    /// TLS acceptor when `server.tls` is set; swapped by a reload.
    pub tls: arc_swap::ArcSwapOption<tokio_rustls::TlsAcceptor>,
    /// When the serving config was loaded and how the latest reload went
    /// (for the status page).
    pub reloads: ReloadLog,
}

impl Shared {
    /// The serving state for `state`, with the TLS acceptor its config asks for.
    pub fn new(state: Arc<State>, registry: Registry) -> Result<Shared, String> {
        let tls = match &state.config.server.tls {
            Some(t) => Some(Arc::new(crate::tls::acceptor(t)?)),
            None => None,
        };
        Ok(Shared {
            state: ArcSwap::new(state),
            registry,
            tls: arc_swap::ArcSwapOption::new(tls),
            reloads: ReloadLog::default(),
        })
    }
}

/// HTTP/2 with prior knowledge (h2c) opens with this preface; anything else is HTTP/1.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// How a connection is served once its protocol is known: HTTP/1.1 by
/// Junction's own connection (`h1`), HTTP/2 by hyper's. The protocol is
/// chosen before either sees a byte (TLS: ALPN; plain: a peek at the
/// preface) rather than by hyper-util's auto builder, which reads the first
/// bytes itself and hands them back through a rewind buffer.
struct Builders {
    h2: http2::Builder<TokioExecutor>,
}

impl Builders {
    async fn serve<I>(
        &self,
        io: I,
        h2: bool,
        service: Service,
        watcher: Watcher,
        stop: tokio_util::sync::CancellationToken,
    ) where
        I: tokio::io::AsyncRead + tokio::io::AsyncWrite + h1::HeadClock + Unpin + Send + 'static,
    {
        if !h2 {
            // The watcher is held until the connection ends, so shutdown
            // waits for it; `stop` tells the connection to finish.
            let _watcher = watcher;
            return h1::serve(io, stop, |req| service.respond(req)).await;
        }
        // hyper's HTTP/2 connection hands request bodies over through
        // channels its own task polls (`inline_wake`); Junction's HTTP/1.1
        // connection has no such wakes, and its task is not wrapped.
        let ended =
            inline_wakes(watcher.watch(self.h2.serve_connection(TokioIo::new(io), service))).await;
        if let Err(e) = ended {
            tracing::debug!(error = %e, "connection ended with an error");
        }
    }
}

type Watcher = hyper_util::server::graceful::Watcher;
type RouteFuture = std::pin::Pin<
    Box<dyn Future<Output = Result<Response<Counted<Body>>, std::convert::Infallible>> + Send>,
>;

/// The service of one connection: every request goes to `route` with the
/// client's address and the bearer token it presented last (arguments, not
/// request extensions: inserting one allocates the extension map and the
/// value on every request), counted in flight until its response is
/// written (the connection's idle clock).
#[derive(Clone)]
struct Service(Arc<Conn>);

/// What every request of one connection shares, cloned per request as a
/// count only this connection's thread writes. The gateway-wide `Shared` and
/// `State` are reached through it instead of being cloned per request: each
/// of their reference counts is a cache line that every connection thread
/// would write in turn, on every request.
struct Conn {
    shared: Arc<Shared>,
    peer: std::net::SocketAddr,
    in_flight: InFlight,
    /// The serving state as this connection last saw it, behind a count of
    /// its own; replaced when a reload has swapped `shared.state`.
    state: std::sync::Mutex<Arc<Seen>>,
    /// The bearer token this connection's client presented last.
    last_token: junction_policy::LastToken,
}

/// The serving state as one connection holds it: an `Arc` of the
/// connection's own around the gateway's, so a request's clone counts here.
struct Seen(Arc<State>);

impl Conn {
    fn new(shared: Arc<Shared>, peer: std::net::SocketAddr, in_flight: InFlight) -> Conn {
        let state = std::sync::Mutex::new(Arc::new(Seen(shared.state.load_full())));
        Conn {
            shared,
            peer,
            in_flight,
            state,
            last_token: junction_policy::LastToken::default(),
        }
    }

    /// The current serving state, for one request. `ArcSwap::load` writes
    /// only this thread's slot; the count cloned is this connection's.
    fn state(&self) -> Arc<Seen> {
        let current = self.shared.state.load();
        let mut kept = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if !Arc::ptr_eq(&kept.0, &*current) {
            *kept = Arc::new(Seen(Arc::clone(&current)));
        }
        Arc::clone(&kept)
    }
}

impl Service {
    fn respond(&self, req: Request<RequestBody>) -> RouteFuture {
        // Boxed: the connection (Junction's HTTP/1.1 one, or hyper's
        // HTTP/2 stream) would otherwise keep a slot the size of this future
        // for its whole life; the request's state machine (many
        // KiB) only lives while a request is in flight. Written into its box,
        // not moved there: `Box::pin` would build the future on the stack
        // and copy all of it.
        let fut = Box::write(
            Box::new_uninit(),
            route(self.0.clone(), req, self.0.in_flight.enter()),
        );
        Box::into_pin(fut)
    }
}

impl hyper::service::Service<Request<Incoming>> for Service {
    type Response = Response<Counted<Body>>;
    type Error = std::convert::Infallible;
    type Future = RouteFuture;

    fn call(&self, req: Request<Incoming>) -> RouteFuture {
        self.respond(req.map(RequestBody::H2))
    }
}

/// The most the request future may take: jemalloc's 7 KiB size class. One
/// class up it shares the 8 KiB class of the per-connection read buffers;
/// a request future writes its whole region, and a read buffer later given a
/// freed region keeps two pages resident where a fresh one touches one, 4 KiB
/// more per idle connection (fe5c22f grew it to 7,920 bytes: an idle
/// connection went from 8.2 to 12.2 KiB, a GET stream past the 20 KiB target).
/// Rare branches are boxed where they are awaited to stay under it.
#[cfg(test)]
const REQUEST_FUTURE_LIMIT: usize = 7 * 1024;

/// Whether a plain connection speaks HTTP/2 with prior knowledge. Peeks, so
/// nothing is consumed; a connection that closes is left to HTTP/1 to end.
async fn is_h2c(stream: &tokio::net::TcpStream) -> bool {
    let mut buf = [0u8; 24];
    loop {
        match stream.peek(&mut buf).await {
            Ok(0) | Err(_) => return false,
            Ok(n) if buf[..n] != H2_PREFACE[..n] => return false,
            Ok(n) if n == H2_PREFACE.len() => return true,
            // The start of the preface: wait for the rest (peek does not drain).
            Ok(_) => tokio::time::sleep(std::time::Duration::from_millis(10)).await,
        }
    }
}

/// Accepts connections until `shutdown` resolves, then lets in-flight requests
/// finish for up to the configured grace period.
pub async fn serve(listener: TcpListener, shared: Arc<Shared>, shutdown: impl Future<Output = ()>) {
    // `HeadGuard` keeps both the head clock and the idle clock of an
    // HTTP/1.1 connection (hyper's would arm a timer for every request).
    let limits = shared.state.load().config.limits.clone();
    let head_timeout = limits.header_read_timeout;
    let idle = limits.idle_timeout;
    let mut h2 = http2::Builder::new(TokioExecutor::new());
    h2.timer(hyper_util::rt::TokioTimer::new());
    let builders = Arc::new(Builders { h2 });
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    // Ends connections still before their first request (the h2c peek, the TLS
    // handshake): they hold a watcher, and shutdown would wait for them.
    let stop = tokio_util::sync::CancellationToken::new();
    // Each connection lives on one connection thread (`workers`), chosen in turn.
    let workers = Workers::start(workers::count()).unwrap_or_else(|e| {
        tracing::error!(error = %e, "could not start the connection threads; serving on the main runtime");
        Workers::here()
    });
    let mut turn = 0usize;
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                // Handed over as a plain socket: the connection thread
                // registers it with its own runtime, whose thread its
                // wakes then go to.
                let stream = match stream.into_std() {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::warn!(error = %e, "could not hand a connection over");
                        continue;
                    }
                };
                let worker = workers.get(turn);
                turn = turn.wrapping_add(1);
                let builders = builders.clone();
                let watcher = graceful.watcher();
                let (serving, stop) = (shared.clone(), stop.clone());
                // What the connection's requests share (its service and
                // in-flight count, and a child of the stop token: checking
                // it, twice a request, locks the child's mutex, not the one
                // every connection shares) is made on the connection's own
                // thread. Made here, one connection after another, the
                // allocations of neighbouring connections (on other threads)
                // would share cache lines.
                let start = move || {
                    let in_flight = InFlight::default();
                    let service = Service(Arc::new(Conn::new(serving, peer, in_flight.clone())));
                    (stop.child_token(), in_flight, service)
                };
                match shared.tls.load_full() {
                    None => {
                        worker.spawn(async move {
                            let (stop, in_flight, service) = start();
                            let Ok(stream) = tokio::net::TcpStream::from_std(stream) else { return };
                            // A connection that sends nothing is closed after the head
                            // limit, which also bounds the rest of its first head.
                            let by = tokio::time::Instant::now() + head_timeout;
                            let sniff = tokio::time::timeout_at(by, is_h2c(&stream));
                            let Some(Ok(h2)) = stop.run_until_cancelled(sniff).await else {
                                return;
                            };
                            let io = HeadGuard::with_first_head_by(stream, head_timeout, idle, in_flight, by);
                            builders.serve(io, h2, service, watcher, stop).await;
                        });
                    }
                    Some(acceptor) => {
                        worker.spawn(async move {
                            let (stop, in_flight, service) = start();
                            let Ok(stream) = tokio::net::TcpStream::from_std(stream) else { return };
                            let handshake = tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream));
                            let tls = match stop.run_until_cancelled(handshake).await {
                                Some(Ok(Ok(tls))) => tls,
                                Some(Ok(Err(e))) => {
                                    tracing::debug!(error = %e, "TLS handshake failed");
                                    return;
                                }
                                Some(Err(_)) | None => return,
                            };
                            let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2".as_slice());
                            let io = HeadGuard::new(tls, head_timeout, idle, in_flight);
                            builders.serve(io, h2, service, watcher, stop).await;
                        });
                    }
                }
            }
            _ = &mut shutdown => break,
        }
    }
    drop(listener);
    stop.cancel();
    let grace = shared.state.load().config.server.shutdown_grace;
    if tokio::time::timeout(grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("shutdown grace period ended with requests still in flight");
    }
}

/// The future boxed for every request (see `REQUEST_FUTURE_LIMIT`). A
/// function returning an `async` block, not an `async fn`: an `async fn` keeps
/// its arguments twice in its state (the captured arguments and the locals
/// they are moved into, 272 bytes here), and this future is allocated and
/// copied whole per request.
fn route(
    conn: Arc<Conn>,
    req: Request<RequestBody>,
    busy: Busy,
) -> impl Future<Output = Result<Response<Counted<Body>>, std::convert::Infallible>> + Send {
    // Split before the block, so the block keeps the parts, not the request too.
    let (parts, body) = req.into_parts();
    async move {
        let (shared, peer) = (&conn.shared, conn.peer);
        let kept = conn.state();
        let state: &Arc<State> = &kept.0;
        let path = parts.uri.path();
        let response = match path {
            "/healthz" => response::text(StatusCode::OK, "ok\n"),
            "/readyz" => readyz(state).await,
            "/metrics" => {
                state.observe_tables();
                let mut r =
                    Response::new(response::full(junction_telemetry::render(&shared.registry)));
                r.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
                );
                r
            }
            // Boxed: the report's futures would otherwise size every request's.
            p if status::serves(state, p) => {
                Box::pin(status::respond(state, &shared.reloads, &parts)).await
            }
            p if p.starts_with(WELL_KNOWN) => protected_resource(state, &p[WELL_KNOWN.len()..]),
            _ => match state.routes.get(path) {
                Some(route) => {
                    let client = endpoint::Client {
                        peer,
                        last_token: &conn.last_token,
                    };
                    endpoint::handle(state, route, parts, body, client).await
                }
                None => response::text(StatusCode::NOT_FOUND, "no MCP route at this path\n"),
            },
        };
        Ok(response.map(|body| Counted::new(body, busy)))
    }
}

const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// RFC 9728 metadata, for the gateway as a whole and for each route.
fn protected_resource(state: &State, rest: &str) -> Response<Body> {
    let Some(auth) = &state.auth else {
        return response::text(StatusCode::NOT_FOUND, "authentication is not configured\n");
    };
    let doc = match rest {
        "" | "/" => auth.authenticator.resource_metadata(None),
        route if state.routes.contains_key(route) => {
            auth.authenticator.resource_metadata(Some(route))
        }
        _ => return response::text(StatusCode::NOT_FOUND, "no MCP route at this path\n"),
    };
    response::json(StatusCode::OK, serde_json::to_vec(&doc).unwrap_or_default())
}

/// `/readyz`, by `server.ready_when`: `any_upstream` (default) wants at least one
/// upstream whose tool list was fetched (fresh or last good), `all_upstreams` wants
/// every one, `listening` only the listener.
async fn readyz(state: &State) -> Response<Body> {
    use junction_config::Readiness;
    let want = state.config.server.ready_when;
    if want == Readiness::Listening {
        return response::text(StatusCode::OK, "ready\n");
    }
    let headers = HeaderMap::new();
    let mut reachable = std::collections::HashSet::new();
    let mut missing = std::collections::HashSet::new();
    for route in state.routes.values() {
        let cx = Cx::new(state, route, &headers);
        let catalog = views::route_catalog(&cx).await;
        for id in &route.upstreams {
            let never_answered =
                catalog.degraded.contains(id) && !catalog.tools.iter().any(|t| &t.upstream == id);
            if never_answered {
                missing.insert(id.clone());
            } else {
                reachable.insert(id.clone());
            }
        }
    }
    let ready = match want {
        Readiness::AllUpstreams => missing.is_empty() && !reachable.is_empty(),
        Readiness::AnyUpstream | Readiness::Listening => !reachable.is_empty(),
    };
    if ready {
        response::text(StatusCode::OK, "ready\n")
    } else {
        response::text(
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: upstreams unreachable\n",
        )
    }
}

/// Fetches every route's catalog once at start, so the first client is served
/// from a warm cache and unreachable upstreams are logged early.
pub async fn warm_up(state: Arc<State>) {
    let headers = HeaderMap::new();
    for route in state.routes.values() {
        let cx = Cx::new(&state, route, &headers);
        let catalog = views::route_catalog(&cx).await;
        tracing::info!(route = %route.path, tools = catalog.tools.len(), degraded = ?catalog.degraded, "catalog ready");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn output_size<A, B, C, F: Future>(_: impl FnOnce(A, B, C) -> F) -> usize {
        std::mem::size_of::<F>()
    }

    /// Coroutine layouts are computed before code generation, so the size is
    /// the same in the dev profile as in release (6,400 bytes at this test's
    /// last change).
    #[test]
    fn the_request_future_stays_in_jemallocs_7_kib_class() {
        let size = output_size(route);
        assert!(
            size <= REQUEST_FUTURE_LIMIT,
            "the request future is {size} bytes, over {REQUEST_FUTURE_LIMIT}: box the branch \
             that grew it where it is awaited (BENCHMARKS.md, memory per open connection)"
        );
    }
}
