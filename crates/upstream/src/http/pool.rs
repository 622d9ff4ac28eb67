//! The connections to one upstream: HTTP/1.1 connections of Junction's own
//! ([`h1`]), and hyper's HTTP/2 connection API for https upstreams that pick
//! `h2` by ALPN.
//!
//! One `Pool` serves one upstream URL, so it needs no map keyed by origin:
//! HTTP/1.1 connections wait in a stack (the most recently used first), an
//! HTTP/2 connection is shared by every request and runs in a task of its
//! own.
//!
//! An HTTP/1.1 connection has no task: it is a [`Link`], which the request
//! holding it reads and writes itself, first for the answer's head, then
//! from its body ([`Leased`]). So a request and its answer cost no hand-off
//! to another task and no wake of one. The link goes back to the pool when
//! the answer's body has been read to the end; a body dropped before its end
//! takes its connection with it (dropping the connection closes it).
//! Connections idle for longer than `IDLE_LIMIT` are closed by one task per
//! pool.
//!
//! Nothing reads an idle HTTP/1.1 connection, so its socket's wake goes to
//! that task ([`IdleWake`]), which drops one the upstream closed; one closed
//! in a race is dropped when it is next taken (the idle check reads it
//! once). A request is sent again on another connection only when not one
//! byte of it was written: a request that reached the wire is never sent
//! twice.

use std::error::Error as StdError;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderValue, HOST};
use http::{Method, Request, StatusCode, Uri};
use http_body_util::Full;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::client::conn::http2;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::{Connection, HttpConnector};
use hyper_util::rt::TokioExecutor;
use tokio::time::Instant;
use tower_service::Service;

use super::h1::{self, Failure, Fields, Framing};
use crate::lock;
use crate::UpstreamError;

type ReqBody = Full<Bytes>;

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

/// An HTTP/1.1 connection ([`h1::Conn`]), counted as open while it lives.
pub(crate) struct Link {
    conn: h1::Conn,
    /// The idle stack it goes back to: its socket's thread's ([`crate::home`]).
    home: usize,
    /// What its socket wakes while it sits idle; `waker` is the same.
    wakes: Arc<IdleWake>,
    waker: Waker,
    _open: Open,
}

impl Link {
    /// Whether the link can take a request now; `idle` says whether it will
    /// then sit in the pool (its socket's wakes go to the reaper) or not.
    fn usable(&mut self, idle: bool) -> bool {
        self.wakes.idle.store(idle, Ordering::Relaxed);
        self.conn.poll_idle(&mut Context::from_waker(&self.waker))
    }
}

/// The waker an HTTP/1.1 connection's socket is left with between requests.
/// While the connection sits in the pool, a wake tells the pool's reaper (the
/// upstream closed it, mostly); once a request holds it, the request's own
/// reads register its task, and a wake left over from the idle check is
/// ignored rather than sending the reaper over every idle connection.
struct IdleWake {
    idle: AtomicBool,
    reaper: Arc<tokio::sync::Notify>,
}

impl Wake for IdleWake {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if self.idle.load(Ordering::Relaxed) {
            self.reaper.notify_one();
        }
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
    /// The answer's head is not HTTP/1.1 Junction can read.
    Invalid(String),
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
    path: String,
    host: HeaderValue,
    /// One stack per connection thread ([`crate::home`]), and one for any
    /// other thread: a connection is used where its socket is registered.
    idle: Box<[Arc<Stack>]>,
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
    /// Notified when an idle HTTP/1.1 connection's socket wakes ([`IdleWake`]).
    idle_woken: Arc<tokio::sync::Notify>,
}

/// One thread's idle connections. A lease holds its stack, not the pool:
/// cloning and dropping it per call writes a count only that thread writes,
/// where the pool's is one every connection thread would write in turn (a
/// cache line moving between the cores on every call). Aligned so no two
/// stacks (or their counts) share a cache line.
#[repr(align(128))]
#[derive(Default)]
struct Stack(Mutex<Vec<Idle>>);

impl Stack {
    fn put_back(&self, mut link: Link) {
        // Its socket's next wake is the reaper's: an idle link is polled by
        // no one else.
        if !link.usable(true) {
            return;
        }
        let mut idle = lock(&self.0);
        if idle.len() < MAX_IDLE {
            idle.push(Idle {
                link,
                since: Instant::now(),
            });
        }
    }
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
            .map_err(|e| bad(format!("upstream URL {url}: {e}")))?
            .to_string();
        // Only TLS can negotiate h2 (ALPN); plain http is HTTP/1.1.
        let protocol = if url.scheme_str() == Some("https") {
            UNKNOWN
        } else {
            HTTP1
        };
        Ok(Pool {
            idle_woken: Arc::default(),
            connector,
            url,
            path,
            host,
            idle: (0..crate::home::stacks()).map(|_| Arc::default()).collect(),
            h2: Mutex::new(None),
            idle_limit: IDLE_LIMIT,
            reaper: AtomicBool::new(false),
            counters: OnceLock::new(),
            protocol: AtomicU8::new(protocol),
            connecting: tokio::sync::Mutex::new(()),
        })
    }

    /// Sends one request on a pooled or new connection.
    pub(crate) async fn send(
        self: &Arc<Self>,
        method: Method,
        headers: Fields,
        body: Bytes,
    ) -> Result<Answered, SendError> {
        loop {
            let (conn, reused) = match self.checkout() {
                Some(conn) => (conn, true),
                // Boxed: the handshake futures are large and only live while
                // connecting; inline they would grow every request's state.
                None => Box::pin(self.connect_one()).await?,
            };
            match conn {
                Conn::H1(mut link) => {
                    let target = &self.path;
                    let sent = link
                        .conn
                        .send(&method, target, &self.host, &headers, &body)
                        .await;
                    let head = match sent {
                        Ok(()) => link.conn.read_head().await,
                        Err(e) => Err(e),
                    };
                    match head {
                        Ok(head) => return Ok(self.lease_h1(head, link)),
                        Err(Failure::Unsent(_)) if reused => {}
                        Err(Failure::Unsent(e) | Failure::Broken(e)) => {
                            return Err(SendError::Failed(e.to_string()))
                        }
                        Err(Failure::Invalid(m)) => return Err(SendError::Invalid(m)),
                    }
                }
                Conn::H2(mut tx) => {
                    let mut req = Request::new(Full::new(body.clone()));
                    *req.method_mut() = method.clone();
                    *req.uri_mut() = self.url.clone();
                    *req.headers_mut() = headers.to_map();
                    req.headers_mut().remove(HOST);
                    match tx.try_send_request(req).await {
                        Ok(resp) => {
                            let (head, body) = resp.into_parts();
                            return Ok(Answered {
                                status: head.status,
                                fields: Fields::from_map(&head.headers),
                                body: Leased(Answer::H2(body)),
                            });
                        }
                        Err(mut e) => match e.take_message() {
                            Some(_) if reused => {
                                lock(&self.h2).take();
                            }
                            _ => return Err(SendError::Failed(chain(e.error()))),
                        },
                    }
                }
            };
            tracing::debug!(url = %self.url, "pooled connection closed before the request left; retrying on another");
        }
    }

    fn checkout(&self) -> Option<Conn> {
        // An upstream known to speak HTTP/1.1 has no HTTP/2 connection: its
        // lock (a write every connection thread would make) is not taken.
        if self.protocol.load(Ordering::Relaxed) != HTTP1 {
            let mut h2 = lock(&self.h2);
            match h2.as_ref() {
                Some(tx) if !tx.is_closed() => return Some(Conn::H2(tx.clone())),
                Some(_) => *h2 = None,
                None => {}
            }
        }
        // Only this thread's own connections, the most recently returned
        // first: another thread's socket would wake that thread on every
        // answer, which then wakes this one (an eventfd write and an epoll
        // wait more per call). One the upstream closed (or sent something
        // on) while it sat idle is dropped.
        let mut idle = lock(&self.idle[self.own_stack()].0);
        while let Some(mut i) = idle.pop() {
            if i.link.usable(false) {
                return Some(Conn::H1(i.link));
            }
        }
        None
    }

    /// This thread's idle stack: where its new connections go back to, and
    /// the only one it takes from.
    fn own_stack(&self) -> usize {
        crate::home::current() % self.idle.len()
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
            let wakes = Arc::new(IdleWake {
                idle: AtomicBool::new(false),
                reaper: self.idle_woken.clone(),
            });
            Ok(Conn::H1(Link {
                conn: h1::Conn::new(h1::Stream::new(io)),
                home: self.own_stack(),
                waker: Waker::from(wakes.clone()),
                wakes,
                _open: self.opened(),
            }))
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

    // Inlined into `send` (its one caller) as it was before it grew the
    // reaper's check: out of line, the answer it returns is built and then
    // copied (~100 instructions a call).
    #[inline]
    fn lease_h1(self: &Arc<Self>, head: h1::Head, link: Link) -> Answered {
        // Read first: once it is set, the flag's line is only ever read.
        if !self.reaper.load(Ordering::Relaxed) && !self.reaper.swap(true, Ordering::Relaxed) {
            self.start_reaper();
        }
        // `home` is `own_stack()`, an index into `idle` by construction.
        let stack = self.idle[link.home].clone();
        let mut body = H1Body {
            framing: head.body,
            keep_alive: head.keep_alive,
            home: Some((stack, link)),
        };
        // Nothing to read (a 202 with no body, a 204): back right away.
        if body.framing.is_done() {
            body.release();
        }
        Answered {
            status: head.status,
            fields: head.headers,
            body: Leased(Answer::H1(body)),
        }
    }

    /// Closes, every third of `idle_limit`, the connections idle for longer
    /// than `idle_limit` (dropping a link closes its connection), and, when an
    /// idle connection wakes (`idle_woken`), those the upstream closed (one
    /// poll each notices). Started with the first lease; ends with
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
                for stack in pool.idle.iter() {
                    lock(&stack.0).retain_mut(|i| i.link.usable(true) && i.since.elapsed() < limit);
                }
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

/// An upstream's answer: its status, its header fields, its body.
pub(crate) struct Answered {
    status: StatusCode,
    fields: Fields,
    body: Leased,
}

impl Answered {
    pub(crate) fn status(&self) -> StatusCode {
        self.status
    }

    pub(crate) fn headers(&self) -> &Fields {
        &self.fields
    }

    pub(crate) fn into_body(self) -> Leased {
        self.body
    }
}

/// An answer's body. An HTTP/1.1 connection goes back to the pool once its
/// body has been read to the end; dropped before then, it is closed.
pub(crate) struct Leased(Answer);

enum Answer {
    H1(H1Body),
    H2(Incoming),
}

struct H1Body {
    framing: Framing,
    keep_alive: bool,
    /// `None` once the body has ended (the link went back, or was dropped).
    home: Option<(Arc<Stack>, Link)>,
}

impl H1Body {
    fn release(&mut self) {
        if let Some((stack, link)) = self.home.take() {
            if self.keep_alive && self.framing.is_done() {
                stack.put_back(link);
            }
        }
    }
}

impl Body for Leased {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        let body = match &mut self.get_mut().0 {
            Answer::H2(body) => {
                return Pin::new(body).poll_frame(cx).map_err(std::io::Error::other)
            }
            Answer::H1(body) => body,
        };
        let Some((_, link)) = &mut body.home else {
            return Poll::Ready(None);
        };
        let polled = link.conn.poll_data(cx, &mut body.framing);
        match &polled {
            // The end is also the last data of a body of known length,
            // after which a reader that checks `is_end_stream` stops polling.
            Poll::Ready(None) => body.release(),
            Poll::Ready(Some(Ok(_))) if body.framing.is_done() => body.release(),
            // A broken body takes its connection with it.
            Poll::Ready(Some(Err(_))) => drop(body.home.take()),
            _ => {}
        }
        polled.map(|d| d.map(|d| d.map(Frame::data)))
    }

    fn is_end_stream(&self) -> bool {
        match &self.0 {
            Answer::H2(body) => body.is_end_stream(),
            Answer::H1(body) => body.home.is_none() || body.framing.is_done(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.0 {
            Answer::H2(body) => body.size_hint(),
            Answer::H1(H1Body {
                framing: Framing::Length(n),
                ..
            }) => SizeHint::with_exact(*n),
            Answer::H1(H1Body {
                framing: Framing::Done,
                ..
            }) => SizeHint::with_exact(0),
            Answer::H1(_) => SizeHint::default(),
        }
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
            .send(Method::POST, Fields::default(), Bytes::new())
            .await
            .ok()
            .unwrap();
        assert_eq!(resp.into_body().collect().await.unwrap().to_bytes(), "ok");
    }

    #[tokio::test]
    async fn each_thread_reuses_only_the_connections_it_opened() {
        let (url, open) = keep_alive_server().await;
        let pool =
            Arc::new(Pool::new(super::super::wire::build_connector(None).unwrap(), url).unwrap());
        let sizes = |pool: &Pool| {
            pool.idle
                .iter()
                .map(|s| lock(&s.0).len())
                .collect::<Vec<_>>()
        };
        let (first, second) = (1 % pool.idle.len(), 2 % pool.idle.len());
        crate::home::set(1);
        ok_call(&pool).await;
        ok_call(&pool).await;
        assert_eq!(open.load(Ordering::SeqCst), 1, "kept alive and reused");
        assert_eq!(sizes(&pool)[first], 1, "back on its thread's stack");
        // Another thread opens its own rather than take the first one.
        crate::home::set(2);
        ok_call(&pool).await;
        ok_call(&pool).await;
        assert_eq!(open.load(Ordering::SeqCst), 2);
        assert_eq!(sizes(&pool)[first], 1);
        assert_eq!(sizes(&pool)[second], 1);
        crate::home::set(0);
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

    #[tokio::test]
    async fn an_idle_connection_the_upstream_closes_is_dropped_at_once() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url: Uri = format!("http://{}/mcp", listener.local_addr().unwrap())
            .parse()
            .unwrap();
        tokio::spawn(async move {
            let (mut tcp, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 4096];
            let _ = tcp.read(&mut buf).await;
            let _ = tcp
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                .await;
            // Kept alive as far as the answer says; closed a moment later,
            // once the connection sits idle in the pool.
            tokio::time::sleep(Duration::from_millis(200)).await;
        });
        let pool =
            Arc::new(Pool::new(super::super::wire::build_connector(None).unwrap(), url).unwrap());
        let counters = crate::ConnCounters {
            opened: prometheus::IntCounter::new("opened", "opened").unwrap(),
            open: prometheus::IntGauge::new("open", "open").unwrap(),
        };
        pool.count_connections(counters.clone());
        ok_call(&pool).await;
        let idle = |pool: &Pool| pool.idle.iter().map(|s| lock(&s.0).len()).sum::<usize>();
        assert_eq!(idle(&pool), 1, "kept alive");
        assert_eq!(counters.open.get(), 1);
        // Well before the reaper's first tick (30 s).
        let deadline = Instant::now() + Duration::from_secs(5);
        while counters.open.get() > 0 {
            assert!(
                Instant::now() < deadline,
                "the closed idle connection is still counted open"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(idle(&pool), 0);
    }
}
