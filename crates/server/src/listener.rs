//! The listener and the request router: admin endpoints, then the MCP endpoint of
//! each configured route.

use std::future::Future;
use std::sync::Arc;

use arc_swap::ArcSwap;
use http::{header, HeaderMap, HeaderValue, Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};

use crate::conn_guard::HeadGuard;
use hyper_util::server::conn::auto;
use prometheus::Registry;
use tokio::net::TcpListener;

use crate::mcp::{self, Cx};
use crate::response::{self, Body};
use crate::state::State;
use crate::tools;

const TLS_HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The client's address, attached to every request it sends.
#[derive(Clone, Copy, Debug)]
pub struct Peer(pub std::net::SocketAddr);

/// What the listener serves: the current state (swapped whole on reload) and the
/// metrics registry made in `main`.
pub struct Shared {
    pub state: ArcSwap<State>,
    pub registry: Registry,
    /// TLS acceptor when `server.tls` is set; swapped by a reload.
    pub tls: arc_swap::ArcSwapOption<tokio_rustls::TlsAcceptor>,
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
        })
    }
}

/// Accepts connections until `shutdown` resolves, then lets in-flight requests
/// finish for up to the configured grace period.
pub async fn serve(listener: TcpListener, shared: Arc<Shared>, shutdown: impl Future<Output = ()>) {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // hyper's head timer also runs while a kept-alive connection idles, so it
    // gets the idle limit; the slowloris limit runs per head in `HeadGuard`.
    let limits = shared.state.load().config.limits.clone();
    let head_timeout = limits.header_read_timeout;
    let idle = limits.idle_timeout;
    builder
        .http1()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(idle.max(head_timeout));
    builder.http2().timer(hyper_util::rt::TokioTimer::new());
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
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
                let shared2 = shared.clone();
                let service = service_fn(move |mut req: Request<Incoming>| {
                    req.extensions_mut().insert(Peer(peer));
                    let shared = shared2.clone();
                    async move { Ok::<_, std::convert::Infallible>(route(shared, req).await) }
                });
                match shared.tls.load_full() {
                    None => {
                        let builder = builder.clone();
                        let watcher = graceful.watcher();
                        tokio::spawn(async move {
                            let io = TokioIo::new(HeadGuard::new(stream, head_timeout, idle));
                            let conn = builder.serve_connection_with_upgrades(io, service);
                            if let Err(e) = watcher.watch(conn.into_owned()).await {
                                tracing::debug!(error = %e, "connection ended with an error");
                            }
                        });
                    }
                    Some(acceptor) => {
                        let builder = builder.clone();
                        let watcher = graceful.watcher();
                        tokio::spawn(async move {
                            let tls = match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                                Ok(Ok(tls)) => tls,
                                Ok(Err(e)) => {
                                    tracing::debug!(error = %e, "TLS handshake failed");
                                    return;
                                }
                                Err(_) => return,
                            };
                            let io = TokioIo::new(HeadGuard::new(tls, head_timeout, idle));
                            let conn = builder.serve_connection_with_upgrades(io, service);
                            if let Err(e) = watcher.watch(conn.into_owned()).await {
                                tracing::debug!(error = %e, "connection ended with an error");
                            }
                        });
                    }
                }
            }
            _ = &mut shutdown => break,
        }
    }
    drop(listener);
    let grace = shared.state.load().config.server.shutdown_grace;
    if tokio::time::timeout(grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("shutdown grace period ended with requests still in flight");
    }
}

async fn route(shared: Arc<Shared>, req: Request<Incoming>) -> Response<Body> {
    let state = shared.state.load_full();
    let path = req.uri().path();
    match path {
        "/healthz" => response::text(StatusCode::OK, "ok\n"),
        "/readyz" => readyz(&state).await,
        "/metrics" => {
            let mut r = Response::new(response::full(junction_telemetry::render(&shared.registry)));
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
            );
            r
        }
        p if p.starts_with(WELL_KNOWN) => protected_resource(&state, &p[WELL_KNOWN.len()..]),
        _ => match state.routes.get(path).cloned() {
            Some(route) => mcp::handle(state, route, req).await,
            None => response::text(StatusCode::NOT_FOUND, "no MCP route at this path\n"),
        },
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
        let catalog = tools::route_catalog(&cx).await;
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
        let catalog = tools::route_catalog(&cx).await;
        tracing::info!(route = %route.path, tools = catalog.tools.len(), degraded = ?catalog.degraded, "catalog ready");
    }
}
