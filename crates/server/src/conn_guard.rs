//! Two different clocks for an HTTP/1.1 connection: a request head must
//! arrive within `limits.header_read_timeout` once it has started
//! (slowloris), while a kept-alive connection with nothing in progress may
//! idle for the longer `limits.idle_timeout`. One timer for both (hyper's,
//! started whenever it waited for a head) would let a short head limit close
//! idle connections, cutting off a client reusing a pooled connection at that
//! moment. So this wrapper around the socket keeps both clocks: the head
//! clock from the first byte of each request to the end of its head (the
//! connection says when: [`h1::HeadClock`]), and the idle clock while the
//! connection has no request in flight ([`InFlight`]: each request is counted
//! in, and dropping its response body counts it out). The idle clock is one
//! timer per connection, re-armed only when it fires early, so an idle wait
//! costs a clock read instead of a timer.
//! It also closes a connection whose client stops reading: a write that makes
//! no progress for `idle_timeout` fails, so a stalled reader cannot hold a
//! connection (and what feeds it) forever. An HTTP/2 connection (its first
//! bytes are the preface) has neither clock: h2 has its own keep-alive rules.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

use crate::h1;

/// The requests of one connection whose responses are not yet written to
/// their end: while there are any, the connection is not idle.
#[derive(Clone, Default)]
pub struct InFlight(Arc<AtomicUsize>);

impl InFlight {
    /// Counts a request in until the returned guard is dropped (with its
    /// response body, or with the request if it never got one).
    pub fn enter(&self) -> Busy {
        self.0.fetch_add(1, Ordering::Relaxed);
        Busy(self.0.clone())
    }

    fn none(&self) -> bool {
        self.0.load(Ordering::Relaxed) == 0
    }
}

/// One request in flight ([`InFlight::enter`]).
pub struct Busy(Arc<AtomicUsize>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A response body that keeps its request counted in flight until the
/// connection has written it to its end and dropped it.
pub struct Counted<B> {
    body: B,
    _busy: Busy,
}

impl<B> Counted<B> {
    pub fn new(body: B, busy: Busy) -> Self {
        Counted { body, _busy: busy }
    }
}

impl<B: Body<Data = Bytes> + Unpin> Body for Counted<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Reading a request head; the head clock runs.
    Head,
    /// Head complete (`h1::HeadClock`): body and response (their own limits
    /// apply).
    Open,
    /// A response went out; the next byte starts a new head.
    Idle,
    /// HTTP/2: frames are not heads; h2 has its own keep-alive rules.
    Off,
}

pub struct HeadGuard<T> {
    inner: T,
    phase: Phase,
    first: bool,
    head_timeout: Duration,
    /// When the current head must be complete (while `phase` is `Head`).
    head_by: Instant,
    /// Its timer, made only when a read in the head has to wait: a head
    /// that arrives in one read (nearly all) costs a clock read, no timer.
    deadline: Option<Pin<Box<Sleep>>>,
    /// `limits.idle_timeout`: how long the connection may idle with nothing
    /// in flight, and how long a write may make no progress.
    idle: Duration,
    write_deadline: Option<Pin<Box<Sleep>>>,
    in_flight: InFlight,
    /// When the current idle wait began (`None` while not idle).
    idle_since: Option<Instant>,
    /// The idle clock: armed once, then re-armed only when it fires before
    /// the current idle wait is `idle` old.
    idle_clock: Option<Pin<Box<Sleep>>>,
}

impl<T> HeadGuard<T> {
    /// A new connection: its first head must arrive within `head_timeout`,
    /// counted from now (a connection that never sends a byte is closed then);
    /// with nothing of `in_flight` it may idle for `idle`, and a write
    /// blocked for `idle` fails.
    pub fn new(inner: T, head_timeout: Duration, idle: Duration, in_flight: InFlight) -> Self {
        let first_by = Instant::now() + head_timeout;
        Self::with_first_head_by(inner, head_timeout, idle, in_flight, first_by)
    }

    /// Like `new`, but the first head must be complete by `first_by` (the
    /// listener spent part of the head limit waiting for the first bytes).
    pub fn with_first_head_by(
        inner: T,
        head_timeout: Duration,
        idle: Duration,
        in_flight: InFlight,
        first_by: Instant,
    ) -> Self {
        HeadGuard {
            inner,
            phase: Phase::Head,
            first: true,
            head_timeout,
            head_by: first_by,
            deadline: None,
            idle,
            write_deadline: None,
            in_flight,
            idle_since: None,
            idle_clock: None,
        }
    }

    /// A read found nothing on a connection that may be idle: its idle wait
    /// runs from the first such read, and ends it after `idle`.
    fn poll_idle(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.phase != Phase::Idle || !self.in_flight.none() {
            return Poll::Pending;
        }
        let by = *self.idle_since.get_or_insert_with(Instant::now) + self.idle;
        let clock = self
            .idle_clock
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(by)));
        // Armed for an earlier wait, it may fire before this one is over:
        // then it is set to this one's end.
        while clock.as_mut().poll(cx).is_ready() {
            if clock.deadline() >= by {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "connection idle for limits.idle_timeout",
                )));
            }
            clock.as_mut().reset(by);
        }
        Poll::Pending
    }

    /// The outcome of one write attempt, with the stall clock applied.
    fn after_write(
        &mut self,
        cx: &mut Context<'_>,
        r: Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        match r {
            Poll::Ready(Ok(n)) => {
                self.write_deadline = None;
                self.wrote(n);
                // The connection drops a response's body before writing its
                // last bytes, and then waits for the next head: a response
                // just written with nothing left in flight starts the idle
                // wait here, its clock waking the connection.
                if n > 0 && self.phase == Phase::Idle && self.in_flight.none() {
                    self.idle_since = Some(Instant::now());
                    // A clock still running was polled with this connection's
                    // waker: it wakes the connection, which finds it early and
                    // sets it to this wait's end then.
                    if self.idle_clock.as_ref().is_none_or(|c| c.is_elapsed()) {
                        let _ = self.poll_idle(cx);
                    }
                }
                Poll::Ready(Ok(n))
            }
            Poll::Pending => {
                let stall = self.idle;
                let d = self
                    .write_deadline
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(stall)));
                if d.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the client stopped reading (limits.idle_timeout)",
                    )));
                }
                Poll::Pending
            }
            other => other,
        }
    }

    fn observe(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        self.idle_since = None;
        if std::mem::take(&mut self.first) && bytes.starts_with(b"PRI ") {
            self.phase = Phase::Off;
            self.deadline = None;
            return;
        }
        if self.phase == Phase::Idle {
            self.phase = Phase::Head;
            self.head_by = Instant::now() + self.head_timeout;
        }
    }

    fn wrote(&mut self, n: usize) {
        if n > 0 && self.phase == Phase::Open {
            self.phase = Phase::Idle;
        }
    }
}

impl<T> h1::HeadClock for HeadGuard<T> {
    fn head_ended(&mut self) {
        if matches!(self.phase, Phase::Head | Phase::Idle) {
            self.phase = Phase::Open;
            self.deadline = None;
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for HeadGuard<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                this.observe(&buf.filled()[before..]);
                Poll::Ready(Ok(()))
            }
            Poll::Pending if this.phase == Phase::Head => {
                let by = this.head_by;
                let d = match &mut this.deadline {
                    Some(d) => {
                        if d.deadline() != by {
                            d.as_mut().reset(by);
                        }
                        d
                    }
                    None => this.deadline.insert(Box::pin(tokio::time::sleep_until(by))),
                };
                match d.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "request head not received within limits.header_read_timeout",
                    ))),
                    Poll::Pending => Poll::Pending,
                }
            }
            Poll::Pending => this.poll_idle(cx),
            other => other,
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for HeadGuard<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.after_write(cx, r)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.after_write(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::h1::HeadClock;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const HEAD: Duration = Duration::from_millis(100);
    const STALL: Duration = Duration::from_secs(60);

    async fn read_some(g: &mut HeadGuard<tokio::io::DuplexStream>) -> io::Result<Vec<u8>> {
        let mut buf = [0u8; 256];
        let n = g.read(&mut buf).await?;
        Ok(buf[..n].to_vec())
    }

    #[tokio::test(start_paused = true)]
    async fn a_head_that_never_ends_times_out() {
        let (mut client, server) = tokio::io::duplex(1024);
        let mut g = HeadGuard::new(server, HEAD, STALL, InFlight::default());
        client
            .write_all(b"POST /mcp HTTP/1.1\r\nhost: x\r\n")
            .await
            .unwrap();
        assert!(!read_some(&mut g).await.unwrap().is_empty());
        let e = read_some(&mut g).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_kept_alive_connection_is_not_cut_by_the_head_clock() {
        let (mut client, server) = tokio::io::duplex(1024);
        let mut g = HeadGuard::new(server, HEAD, STALL, InFlight::default());
        client
            .write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        read_some(&mut g).await.unwrap();
        g.head_ended();
        g.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
            .await
            .unwrap();
        // Idle for far longer than the head limit, then the next request.
        let reader = tokio::spawn(async move {
            let got = read_some(&mut g).await;
            (g, got)
        });
        tokio::time::sleep(HEAD * 50).await;
        client.write_all(b"GET / HTTP/1.1\n").await.unwrap();
        let (mut g, got) = reader.await.unwrap();
        assert_eq!(got.unwrap(), b"GET / HTTP/1.1\n");
        // ...whose head, once started, is on the clock again.
        let e = read_some(&mut g).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_new_connection_times_out_and_http2_is_left_alone() {
        let (_client, server) = tokio::io::duplex(1024);
        let mut g = HeadGuard::new(server, HEAD, STALL, InFlight::default());
        assert_eq!(
            read_some(&mut g).await.unwrap_err().kind(),
            io::ErrorKind::TimedOut
        );
        let (mut client, server) = tokio::io::duplex(1024);
        let mut g = HeadGuard::new(server, HEAD, STALL, InFlight::default());
        client
            .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
            .await
            .unwrap();
        read_some(&mut g).await.unwrap();
        let reader = tokio::spawn(async move { read_some(&mut g).await });
        tokio::time::sleep(HEAD * 50).await;
        client.write_all(b"\0\0\0\x04").await.unwrap();
        assert_eq!(reader.await.unwrap().unwrap(), b"\0\0\0\x04");
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_that_stops_reading_fails_the_write_after_the_stall_limit() {
        let (_client, server) = tokio::io::duplex(64);
        let mut g = HeadGuard::new(server, HEAD, STALL, InFlight::default());
        let e = g.write_all(&[b'x'; 4096]).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_idles_for_the_idle_limit_only_with_nothing_in_flight() {
        const GET: &[u8] = b"GET / HTTP/1.1\r\nhost: x\r\n\r\n";
        const OK: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
        let (mut client, server) = tokio::io::duplex(1024);
        let in_flight = InFlight::default();
        let mut g = HeadGuard::new(server, HEAD, STALL, in_flight.clone());
        client.write_all(GET).await.unwrap();
        read_some(&mut g).await.unwrap();
        g.head_ended();
        // A response still being written (a stream with nothing to say yet)
        // keeps the connection however long it lasts.
        let busy = in_flight.enter();
        g.write_all(b"HTTP/1.1 200 OK\r\n\r\n").await.unwrap();
        let reader = tokio::spawn(async move {
            let got = read_some(&mut g).await;
            (g, got)
        });
        tokio::time::sleep(STALL * 3).await;
        assert!(!reader.is_finished(), "cut while a response was in flight");
        drop(busy);
        client.write_all(GET).await.unwrap();
        let (mut g, got) = reader.await.unwrap();
        assert_eq!(got.unwrap(), GET);
        g.head_ended();
        g.write_all(OK).await.unwrap();
        // Nothing in flight: idle from the first read that waits. A request
        // just inside the limit resets it; the clock armed for that wait is
        // carried over to the next, which still gets the whole limit.
        let reader = tokio::spawn(async move {
            let got = read_some(&mut g).await;
            (g, got)
        });
        tokio::time::sleep(STALL - Duration::from_secs(1)).await;
        client.write_all(GET).await.unwrap();
        let (mut g, got) = reader.await.unwrap();
        assert_eq!(got.unwrap(), GET);
        g.head_ended();
        g.write_all(OK).await.unwrap();
        let waited = Instant::now();
        let e = tokio::time::timeout(STALL * 2, read_some(&mut g))
            .await
            .expect("the idle clock ends the connection")
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert_eq!(Instant::now() - waited, STALL, "the whole limit, once");
    }
}
