//! The connections to one upstream: Junction's own pool over hyper's
//! connection API.
//!
//! One `Pool` serves one upstream URL, so it needs no map keyed by origin:
//! HTTP/1.1 connections wait in a stack (the most recently used first), an
//! HTTP/2 connection (https upstreams that pick `h2` by ALPN) is shared by
//! every request and runs in a task of its own.
//!
//! An HTTP/1.1 connection has no task: it is a [`Link`], hyper's sender and
//! connection future together, and the request that holds it polls the
//! connection itself, first while waiting for the answer's head, then from
//! its body ([`Leased`]). So a request and its answer cost no hand-off to
//! another task and no wake of one (issue 26: one task and two cross-task
//! wakes less per call). The link goes back to the pool when the answer's body
//! has been read to the end; a body dropped before its end takes its
//! connection with it (dropping the connection closes it). Connections idle
//! for longer than `IDLE_LIMIT` are closed by one task per pool.
//!
//! Nothing polls an idle HTTP/1.1 connection, so one the upstream closed
//! while it sat idle is noticed when it is next taken (the idle check polls it
//! once, and `is_closed`), by the idle task, or, in a race, by hyper handing
//! the request back unsent (`try_send_request`): then the request goes out on
//! the next connection. A request that reached the wire is never sent twice.

use std::error::Error as StdError;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use bytes::Bytes;
use futures_util::task::AtomicWaker;
use http::header::{HeaderValue, HOST};
use http::{Request, Response, Uri};
use http_body_util::Full;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::client::conn::{http1, http2};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::{Connection, HttpConnector};
use hyper_util::rt::TokioExecutor;
use tokio::time::Instant;
use tower_service::Service;

use crate::lock;
use crate::UpstreamError;

pub(crate) type ReqBody = Full<Bytes>;

/// Idle HTTP/1.1 connections kept per upstream; more are closed when they
/// come back (the upstream's own keep-alive limit usually closes them sooner).
const MAX_IDLE: usize = 256;

/// How long a connection may sit idle in the pool before Junction closes it
/// (hyper-util's client, which this pool replaced, used the same 90 s): an
/// upstream without a keep-alive limit of its own is not left holding the
/// connections of a burst for ever.
const IDLE_LIMIT: Duration = Duration::from_secs(90);

struct Idle {
    link: Link,
    since: Instant,
}

/// What the connector hands back: TCP, or TLS over TCP.
type Io = <HttpsConnector<HttpConnector> as Service<Uri>>::Response;

/// An HTTP/1.1 connection driven by the request that holds it: hyper's
/// sender, and its connection future, polled by [`Link::poll_with`] instead
/// of by a task of its own.
pub(crate) struct Link {
    tx: http1::SendRequest<ReqBody>,
    /// `None` once the connection future has ended. Dropped then, not kept:
    /// a request still queued in hyper's channel is handed back only when
    /// the connection is dropped (a task of its own would drop it on
    /// return). Boxed: hyper's connection state (buffers, parser) stays put
    /// while the link moves between the pool and the requests holding it.
    conn: Option<Pin<Box<http1::Connection<Io, ReqBody>>>>,
    wakes: Arc<LinkWakes>,
    /// `wakes` as a waker: the one the connection always gets, so what it
    /// stores compares equal (`will_wake`) from poll to poll.
    waker: Waker,
    /// Counted as open while it lives.
    _open: Open,
}

/// How many times in a row a link's connection is driven again in place
/// because it woke itself, before the wake goes to the task.
const ROUNDS: usize = 4;

/// The waker a link's connection gets. A wake while the holder is polling
/// it (`busy`) is noted and handled in place: hyper's answer body wakes its
/// connection each time a chunk is taken, and that wake comes from the very
/// poll that drives the connection, so sending it to the task would poll the
/// whole request again for nothing. Any other wake (the socket, from the IO
/// driver) goes to the task holding the link, or, while the link is idle
/// (no task), to the pool's reaper, which looks at the idle connections.
struct LinkWakes {
    busy: AtomicBool,
    /// Set by every wake, cleared just before each drive: whether the
    /// connection may have something to do.
    woken: AtomicBool,
    task: AtomicWaker,
    idle: Arc<tokio::sync::Notify>,
}

impl Wake for LinkWakes {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // `woken` before `busy`, and the holder clears `busy` before it reads
        // `woken` a last time: a wake that finds `busy` set is seen.
        self.woken.store(true, Ordering::SeqCst);
        if !self.busy.load(Ordering::SeqCst) {
            match self.task.take() {
                Some(task) => task.wake(),
                None => self.idle.notify_one(),
            }
        }
    }
}

impl Link {
    fn new(
        tx: http1::SendRequest<ReqBody>,
        conn: http1::Connection<Io, ReqBody>,
        open: Open,
        idle: Arc<tokio::sync::Notify>,
    ) -> Link {
        let wakes = Arc::new(LinkWakes {
            busy: AtomicBool::new(false),
            // Never polled yet: nothing has registered to wake it.
            woken: AtomicBool::new(true),
            task: AtomicWaker::new(),
            idle,
        });
        Link {
            tx,
            conn: Some(Box::pin(conn)),
            waker: Waker::from(wakes.clone()),
            wakes,
            _open: open,
        }
    }

    /// Polls `f` (what waits on the connection: the answer's head, its body)
    /// and drives the connection until `f` is ready or the connection can do
    /// nothing more for now; then `cx` is woken when it can. `f` gets a
    /// context that wakes no one: only driving the connection makes it
    /// ready, and it is polled again right after.
    ///
    /// The connection is driven only when it was woken since it was last
    /// driven (a new link starts woken): whatever it waits for (the socket,
    /// a request queued by `f`, a body asking for more) wakes it. The task
    /// holding a link is also polled for reasons of its own (its client's
    /// connection: hyper's request body hand-off wakes it about once a
    /// call), and such a poll finds nothing to do here (issue 26: ~0.6
    /// connection polls a call, ~3k instructions each).
    fn poll_with<T>(
        &mut self,
        cx: &mut Context<'_>,
        mut f: impl FnMut(&mut Context<'_>) -> Poll<T>,
    ) -> Poll<T> {
        self.wakes.task.register(cx.waker());
        self.wakes.busy.store(true, Ordering::SeqCst);
        let mut quiet = Context::from_waker(Waker::noop());
        let mut rounds = 0;
        let out = loop {
            if let Poll::Ready(v) = f(&mut quiet) {
                break Poll::Ready(v);
            }
            if rounds == ROUNDS || !self.wakes.woken.load(Ordering::SeqCst) {
                break Poll::Pending;
            }
            rounds += 1;
            self.wakes.woken.store(false, Ordering::SeqCst);
            self.drive();
        };
        self.wakes.busy.store(false, Ordering::SeqCst);
        if out.is_pending() && self.wakes.woken.load(Ordering::SeqCst) {
            cx.waker().wake_by_ref();
        }
        out
    }

    /// Lets the connection read and write what it can. Its end (the upstream
    /// closed it, or it broke) is noted, and what waits on it then sees the
    /// error.
    fn drive(&mut self) {
        let Some(conn) = &mut self.conn else { return };
        if let Poll::Ready(result) = conn.as_mut().poll(&mut Context::from_waker(&self.waker)) {
            self.conn = None;
            if let Err(e) = result {
                tracing::debug!(error = %chain(&e), "upstream connection ended");
            }
        }
    }

    /// Marks the link as being polled by its holder until the next
    /// [`Link::poll_with`] ends: wakes until then are the holder's.
    fn hold(&self) {
        self.wakes.busy.store(true, Ordering::SeqCst);
    }

    /// Drives the connection with no task to wake: for one about to sit idle
    /// (its last answer ended) or being checked while idle. The request that
    /// takes it next registers its own task.
    fn settle(&mut self) {
        drop(self.wakes.task.take());
        // A wake from this very poll is the connection's own; only a later
        // one (the socket, while idle) is for the reaper.
        self.hold();
        self.wakes.woken.store(false, Ordering::SeqCst);
        self.drive();
        self.wakes.busy.store(false, Ordering::SeqCst);
    }

    fn is_closed(&self) -> bool {
        self.conn.is_none() || self.tx.is_closed()
    }
}

/// A connection counted as open until dropped.
struct Open(Option<prometheus::IntGauge>);

impl Drop for Open {
    fn drop(&mut self) {
        if let Some(g) = &self.0 {
            g.dec();
        }
    }
}

/// Why a request got no response.
pub(crate) enum SendError {
    /// No connection could be made (refused, DNS, TLS handshake).
    Connect(String),
    /// The connection broke while the request was sent or answered.
    Failed(String),
}

enum Conn {
    H1(Link),
    H2(http2::SendRequest<ReqBody>),
}

pub(crate) struct Pool {
    connector: HttpsConnector<HttpConnector>,
    /// The upstream URL: what is connected to, and the HTTP/2 request target.
    url: Uri,
    /// The HTTP/1.1 request target (origin form) and `Host`.
    path: Uri,
    host: HeaderValue,
    idle: Mutex<Vec<Idle>>,
    h2: Mutex<Option<http2::SendRequest<ReqBody>>>,
    idle_limit: Duration,
    /// Whether the task that closes connections idle past `idle_limit` runs.
    reaper: AtomicBool,
    /// Where connections are counted, once the server has said so.
    counters: OnceLock<crate::ConnCounters>,
    /// What the last connection spoke ([`UNKNOWN`], [`HTTP1`], [`HTTP2`]);
    /// plain-http upstreams speak HTTP/1.1 from the start.
    protocol: AtomicU8,
    /// Taken to connect while `protocol` is not HTTP/1.1 ([`Pool::connect_one`]).
    connecting: tokio::sync::Mutex<()>,
    /// Notified when an idle HTTP/1.1 connection is woken ([`LinkWakes`]).
    idle_woken: Arc<tokio::sync::Notify>,
}

const UNKNOWN: u8 = 0;
const HTTP1: u8 = 1;
const HTTP2: u8 = 2;

pub(crate) fn chain(e: &dyn StdError) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        out.push_str(": ");
        out.push_str(&s.to_string());
        cur = s.source();
    }
    out
}

impl Pool {
    pub(crate) fn new(
        connector: HttpsConnector<HttpConnector>,
        url: Uri,
    ) -> Result<Pool, UpstreamError> {
        let bad = |m: String| UpstreamError::Unavailable(m);
        let host = HeaderValue::from_str(&host_header(&url))
            .map_err(|e| bad(format!("upstream URL {url}: {e}")))?;
        let path = url
            .path_and_query()
            .map(|p| p.as_str())
            .unwrap_or("/")
            .parse::<Uri>()
            .map_err(|e| bad(format!("upstream URL {url}: {e}")))?;
        // Only TLS can negotiate h2 (ALPN); plain http is HTTP/1.1.
        let protocol = if url.scheme_str() == Some("https") {
            UNKNOWN
        } else {
            HTTP1
        };
        Ok(Pool {
            connector,
            url,
            path,
            host,
            idle: Mutex::new(Vec::new()),
            h2: Mutex::new(None),
            idle_limit: IDLE_LIMIT,
            reaper: AtomicBool::new(false),
            counters: OnceLock::new(),
            protocol: AtomicU8::new(protocol),
            connecting: tokio::sync::Mutex::new(()),
            idle_woken: Arc::default(),
        })
    }

    /// Sends `req` (its URI is replaced by this upstream's) on a pooled or new
    /// connection.
    pub(crate) async fn send(
        self: &Arc<Self>,
        mut req: Request<ReqBody>,
    ) -> Result<Response<Leased>, SendError> {
        loop {
            let (conn, reused) = match self.checkout() {
                Some(conn) => (conn, true),
                // Boxed: the handshake futures are large and only live while
                // connecting; inline they would grow every request's state.
                None => Box::pin(self.connect_one()).await?,
            };
            let unsent = match conn {
                Conn::H1(mut link) => {
                    *req.uri_mut() = self.path.clone();
                    req.headers_mut().insert(HOST, self.host.clone());
                    // Queuing the request wakes the connection: held, so
                    // that wake is this request's own, not the reaper's.
                    link.hold();
                    let mut sent = std::pin::pin!(link.tx.try_send_request(req));
                    let answered =
                        std::future::poll_fn(|cx| link.poll_with(cx, |q| sent.as_mut().poll(q)))
                            .await;
                    match answered {
                        Ok(resp) => return Ok(self.lease(resp, Some(link))),
                        Err(mut e) => match e.take_message() {
                            Some(back) if reused => back,
                            _ => return Err(SendError::Failed(chain(e.error()))),
                        },
                    }
                }
                Conn::H2(mut tx) => {
                    *req.uri_mut() = self.url.clone();
                    req.headers_mut().remove(HOST);
                    match tx.try_send_request(req).await {
                        Ok(resp) => return Ok(self.lease(resp, None)),
                        Err(mut e) => match e.take_message() {
                            Some(back) if reused => {
                                lock(&self.h2).take();
                                back
                            }
                            _ => return Err(SendError::Failed(chain(e.error()))),
                        },
                    }
                }
            };
            tracing::debug!(url = %self.url, "pooled connection closed before the request left; retrying on another");
            req = unsent;
        }
    }

    fn checkout(&self) -> Option<Conn> {
        {
            let mut h2 = lock(&self.h2);
            match h2.as_ref() {
                Some(tx) if !tx.is_closed() => return Some(Conn::H2(tx.clone())),
                Some(_) => *h2 = None,
                None => {}
            }
        }
        let mut idle = lock(&self.idle);
        // From the most recently returned down; `swap_remove` only moves an
        // element already looked at.
        let mut i = idle.len();
        while i > 0 {
            i -= 1;
            let link = &mut idle[i].link;
            if !link.tx.is_ready() {
                // Not yet marked idle by hyper, or closed by the upstream
                // since: one poll tells.
                link.settle();
            }
            if link.is_closed() {
                idle.swap_remove(i);
            } else if link.tx.is_ready() {
                return Some(Conn::H1(idle.swap_remove(i).link));
            }
        }
        None
    }

    /// A new connection, made one at a time unless the upstream is known to
    /// speak HTTP/1.1: an https upstream may pick h2, whose one connection
    /// every request shares, so a burst of first requests (or the requests in
    /// flight when that connection broke) must not each open one. A request
    /// that waited takes the connection another made meanwhile (`true`:
    /// pooled, so a request it hands back unsent is tried again).
    async fn connect_one(&self) -> Result<(Conn, bool), SendError> {
        if self.protocol.load(Ordering::Relaxed) == HTTP1 {
            return Ok((self.connect().await?, false));
        }
        let one = self.connecting.lock().await;
        if let Some(conn) = self.checkout() {
            return Ok((conn, true));
        }
        // Learnt HTTP/1.1 while waiting: the requests queued behind this one
        // need connections of their own, so they connect side by side.
        if self.protocol.load(Ordering::Relaxed) == HTTP1 {
            drop(one);
        }
        Ok((self.connect().await?, false))
    }

    async fn connect(&self) -> Result<Conn, SendError> {
        let connect = |e: &dyn StdError| SendError::Connect(chain(e));
        let io = self
            .connector
            .clone()
            .call(self.url.clone())
            .await
            .map_err(|e| connect(&*e))?;
        let h2 = io.connected().is_negotiated_h2();
        self.protocol
            .store(if h2 { HTTP2 } else { HTTP1 }, Ordering::Relaxed);
        if h2 {
            let (tx, conn) = http2::Builder::new(TokioExecutor::new())
                .handshake(io)
                .await
                .map_err(|e| connect(&e))?;
            self.spawn_h2(conn);
            *lock(&self.h2) = Some(tx.clone());
            Ok(Conn::H2(tx))
        } else {
            let (tx, conn) = http1::Builder::new()
                .handshake(io)
                .await
                .map_err(|e| connect(&e))?;
            Ok(Conn::H1(Link::new(
                tx,
                conn,
                self.opened(),
                self.idle_woken.clone(),
            )))
        }
    }

    /// Counts this pool's connections from now on (`Upstream::count_connections`).
    pub(crate) fn count_connections(&self, counters: crate::ConnCounters) {
        let _ = self.counters.set(counters);
    }

    /// A new connection, counted as opened, and as open until the guard drops.
    fn opened(&self) -> Open {
        Open(self.counters.get().map(|c| {
            c.opened.inc();
            c.open.inc();
            c.open.clone()
        }))
    }

    /// Runs a new HTTP/2 connection (shared by every request) in its own task
    /// until it closes.
    fn spawn_h2(&self, conn: impl Future<Output = hyper::Result<()>> + Send + 'static) {
        let open = self.opened();
        let url = self.url.clone();
        tokio::spawn(async move {
            let _open = open;
            if let Err(e) = conn.await {
                tracing::debug!(%url, error = %chain(&e), "upstream HTTP/2 connection ended");
            }
        });
    }

    fn lease(self: &Arc<Self>, resp: Response<Incoming>, link: Option<Link>) -> Response<Leased> {
        resp.map(|body| {
            let mut body = Leased {
                body,
                home: link.map(|link| (self.clone(), link)),
            };
            // Nothing to read (a 202, a HEAD-like answer): back right away.
            if body.body.is_end_stream() {
                body.release();
            }
            body
        })
    }

    fn put_back(self: &Arc<Self>, mut link: Link) {
        // Lets hyper finish the answer (keep-alive or close) before the link
        // waits: an idle link is polled by no one.
        link.settle();
        if link.is_closed() {
            return;
        }
        {
            let mut idle = lock(&self.idle);
            if idle.len() >= MAX_IDLE {
                return;
            }
            idle.push(Idle {
                link,
                since: Instant::now(),
            });
        }
        if !self.reaper.swap(true, Ordering::Relaxed) {
            self.start_reaper();
        }
    }

    /// Closes, every third of `idle_limit`, the connections idle for longer
    /// than `idle_limit` (dropping a link closes its connection), and, when an
    /// idle connection wakes (`idle_woken`), those the upstream closed (one
    /// poll each notices). Started with the first idle connection; ends with
    /// the pool.
    fn start_reaper(self: &Arc<Self>) {
        let pool = Arc::downgrade(self);
        let every = self.idle_limit / 3;
        let woken = self.idle_woken.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                // Also as soon as an idle connection's socket stirs (the
                // upstream closed it, mostly), so it is not counted open and
                // held half-closed until the next tick.
                tokio::select! {
                    _ = tick.tick() => {}
                    () = woken.notified() => {}
                }
                let Some(pool) = pool.upgrade() else { return };
                let limit = pool.idle_limit;
                lock(&pool.idle).retain_mut(|i| {
                    i.link.settle();
                    !i.link.is_closed() && i.since.elapsed() < limit
                });
            }
        });
    }
}

/// `Host` for an HTTP/1.1 request to `url`: the host, and the port unless it
/// is the scheme's default (never the URL's user info).
fn host_header(url: &Uri) -> String {
    let host = url.host().unwrap_or_default();
    let default = match url.scheme_str() {
        Some("https") => 443,
        _ => 80,
    };
    match url.port_u16() {
        Some(port) if port != default => format!("{host}:{port}"),
        _ => host.to_owned(),
    }
}

/// An answer's body; reading it drives its HTTP/1.1 connection, which goes
/// back to the pool once the body has been read to the end.
pub(crate) struct Leased {
    body: Incoming,
    home: Option<(Arc<Pool>, Link)>,
}

impl Leased {
    fn release(&mut self) {
        if let Some((pool, link)) = self.home.take() {
            pool.put_back(link);
        }
    }
}

impl Body for Leased {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = self.get_mut();
        let body = &mut this.body;
        let polled = match &mut this.home {
            Some((_, link)) => link.poll_with(cx, |q| Pin::new(&mut *body).poll_frame(q)),
            None => Pin::new(body).poll_frame(cx),
        };
        // The end is also the last chunk of a body of known length, after
        // which a reader that checks `is_end_stream` stops polling.
        match &polled {
            Poll::Ready(None) => this.release(),
            Poll::Ready(Some(Ok(_))) if this.body.is_end_stream() => this.release(),
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn host_and_request_target_come_from_the_upstream_url() {
        let cases = [
            ("http://127.0.0.1:8080/mcp", "127.0.0.1:8080", "/mcp"),
            (
                "http://user:secret@mcp.example.test:80/mcp",
                "mcp.example.test",
                "/mcp",
            ),
            (
                "https://mcp.example.test:443/a/b?x=1",
                "mcp.example.test",
                "/a/b?x=1",
            ),
            (
                "https://mcp.example.test:8443",
                "mcp.example.test:8443",
                "/",
            ),
            ("http://[::1]:9000/mcp", "[::1]:9000", "/mcp"),
        ];
        for (url, host, target) in cases {
            let url: Uri = url.parse().unwrap();
            let pool = Pool::new(
                super::super::wire::build_connector(None).unwrap(),
                url.clone(),
            )
            .unwrap();
            assert_eq!(pool.host, host, "{url}");
            assert_eq!(pool.path, target, "{url}");
        }
    }

    /// A keep-alive HTTP/1.1 server that answers every request with `ok` and
    /// counts the connections that are still open.
    async fn keep_alive_server() -> (Uri, Arc<std::sync::atomic::AtomicUsize>) {
        use std::sync::atomic::AtomicUsize;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let open = Arc::new(AtomicUsize::new(0));
        let count = open.clone();
        tokio::spawn(async move {
            while let Ok((mut tcp, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                let count = count.clone();
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    // One read per request is enough for the small test bodies.
                    while let Ok(n) = tcp.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                        let reply = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                        if tcp.write_all(reply).await.is_err() {
                            break;
                        }
                    }
                    count.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        (url.parse().unwrap(), open)
    }

    /// One request through `pool`, its body read to the end.
    async fn ok_call(pool: &Arc<Pool>) {
        use http_body_util::BodyExt;
        let resp = pool
            .send(Request::new(ReqBody::default()))
            .await
            .ok()
            .unwrap();
        assert_eq!(resp.into_body().collect().await.unwrap().to_bytes(), "ok");
    }

    #[tokio::test]
    async fn a_connection_idle_past_the_limit_is_closed() {
        let (url, open) = keep_alive_server().await;
        let mut pool = Pool::new(super::super::wire::build_connector(None).unwrap(), url).unwrap();
        pool.idle_limit = Duration::from_millis(300);
        let pool = Arc::new(pool);
        for _ in 0..3 {
            ok_call(&pool).await;
        }
        assert_eq!(open.load(Ordering::SeqCst), 1, "one kept-alive connection");
        let deadline = Instant::now() + Duration::from_secs(5);
        while open.load(Ordering::SeqCst) > 0 {
            assert!(
                Instant::now() < deadline,
                "the idle connection was never closed"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // The pool still serves: a new connection.
        ok_call(&pool).await;
    }
}
