//! Two different clocks for an HTTP/1 connection: a request head must arrive
//! within `limits.header_read_timeout` once it has started (slowloris), while
//! a kept-alive connection with nothing in progress may idle for the longer
//! `limits.idle_timeout`. hyper has one timer for both, started whenever it
//! waits for a head, so a short head limit also closes idle connections, and a
//! client reusing a pooled connection at that moment sees its request cut off.
//! hyper keeps the idle clock (set to `idle_timeout`); this wrapper runs the
//! head clock from the first byte of each request to the end of its head.
//! It also closes a connection whose client stops reading: a write that makes
//! no progress for `idle_timeout` fails, so a stalled reader cannot hold a
//! connection (and what feeds it) forever.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Reading a request head; the head clock runs.
    Head,
    /// Head complete: body and response (their own limits apply).
    Open,
    /// A response went out; the next byte starts a new head.
    Idle,
    /// HTTP/2: frames are not heads; h2 has its own keep-alive rules.
    Off,
}

pub struct HeadGuard<T> {
    inner: T,
    phase: Phase,
    /// Progress towards an empty line (`\n\n` or `\n\r\n`): 0, 1 after `\n`, 2 after `\n\r`.
    scan: u8,
    first: bool,
    head_timeout: Duration,
    deadline: Option<Pin<Box<Sleep>>>,
    write_stall: Duration,
    write_deadline: Option<Pin<Box<Sleep>>>,
}

impl<T> HeadGuard<T> {
    /// A new connection: its first head must arrive within `head_timeout`,
    /// counted from now (a connection that never sends a byte is closed then);
    /// a write blocked for `write_stall` fails.
    pub fn new(inner: T, head_timeout: Duration, write_stall: Duration) -> Self {
        let first_by = tokio::time::Instant::now() + head_timeout;
        Self::with_first_head_by(inner, head_timeout, write_stall, first_by)
    }

    /// Like `new`, but the first head must be complete by `first_by` (the
    /// listener spent part of the head limit waiting for the first bytes).
    pub fn with_first_head_by(
        inner: T,
        head_timeout: Duration,
        write_stall: Duration,
        first_by: tokio::time::Instant,
    ) -> Self {
        HeadGuard {
            inner,
            phase: Phase::Head,
            scan: 0,
            first: true,
            head_timeout,
            deadline: Some(Box::pin(tokio::time::sleep_until(first_by))),
            write_stall,
            write_deadline: None,
        }
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
                Poll::Ready(Ok(n))
            }
            Poll::Pending => {
                let stall = self.write_stall;
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
        if std::mem::take(&mut self.first) && bytes.starts_with(b"PRI ") {
            self.phase = Phase::Off;
            self.deadline = None;
            return;
        }
        if self.phase == Phase::Idle {
            self.phase = Phase::Head;
            self.scan = 0;
            self.deadline = Some(Box::pin(tokio::time::sleep(self.head_timeout)));
        }
        if self.phase != Phase::Head {
            return;
        }
        if end_of_head(&mut self.scan, bytes) {
            self.phase = Phase::Open;
            self.deadline = None;
        }
    }

    fn wrote(&mut self, n: usize) {
        if n > 0 && self.phase == Phase::Open {
            self.phase = Phase::Idle;
        }
    }
}

/// Whether `bytes` complete a head: an empty line (`\n\n` or `\n\r\n`), with
/// `scan` carrying a partial match across reads (0; 1 after `\n`; 2 after
/// `\n\r`). Jumps from one `\n` to the next instead of matching every byte.
fn end_of_head(scan: &mut u8, bytes: &[u8]) -> bool {
    let mut i = 0;
    // Continue a match that the previous read left open.
    while *scan != 0 {
        let Some(&b) = bytes.get(i) else { return false };
        *scan = match (*scan, b) {
            (_, b'\n') => return true,
            (1, b'\r') => 2,
            _ => 0,
        };
        i += 1;
    }
    while let Some(p) = memchr::memchr(b'\n', &bytes[i..]) {
        let after = i + p + 1;
        match (bytes.get(after), bytes.get(after + 1)) {
            (Some(b'\n'), _) | (Some(b'\r'), Some(b'\n')) => return true,
            (None, _) => {
                *scan = 1;
                return false;
            }
            (Some(b'\r'), None) => {
                *scan = 2;
                return false;
            }
            _ => i = after,
        }
    }
    false
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
            Poll::Pending => {
                if let Some(d) = this.deadline.as_mut() {
                    if d.as_mut().poll(cx).is_ready() {
                        return Poll::Ready(Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            "request head not received within limits.header_read_timeout",
                        )));
                    }
                }
                Poll::Pending
            }
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
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const HEAD: Duration = Duration::from_millis(100);
    const STALL: Duration = Duration::from_secs(5);

    #[test]
    fn the_end_of_a_head_is_found_however_the_reads_split_it() {
        let heads: [&[u8]; 4] = [
            b"GET / HTTP/1.1\r\nhost: x\r\n\r\n",
            b"GET / HTTP/1.1\nhost: x\n\n",
            b"GET / HTTP/1.1\r\nx: \r\r\n\r\n",
            b"POST / HTTP/1.1\r\n\r\n",
        ];
        for head in heads {
            for a in 0..=head.len() {
                for b in a..=head.len() {
                    let mut scan = 0;
                    let parts = [&head[..a], &head[a..b], &head[b..]];
                    // Found exactly in the read holding the last byte.
                    let found: Vec<bool> =
                        parts.iter().map(|p| end_of_head(&mut scan, p)).collect();
                    let last = if b < head.len() {
                        2
                    } else if a < head.len() {
                        1
                    } else {
                        0
                    };
                    for (n, f) in found.iter().enumerate() {
                        if n < last {
                            assert!(!f, "{head:?} split at {a},{b}: early in part {n}");
                        }
                    }
                    assert!(found[last], "{head:?} split at {a},{b}: not found");
                }
            }
        }
        for not_yet in [
            &b"GET / HTTP/1.1\r\nhost: x\r\n"[..],
            b"a\r\n\rb\n",
            b"\r\n\r",
        ] {
            assert!(!end_of_head(&mut 0, not_yet), "{not_yet:?}");
        }
    }

    async fn read_some(g: &mut HeadGuard<tokio::io::DuplexStream>) -> io::Result<Vec<u8>> {
        let mut buf = [0u8; 256];
        let n = g.read(&mut buf).await?;
        Ok(buf[..n].to_vec())
    }

    #[tokio::test(start_paused = true)]
    async fn a_head_that_never_ends_times_out() {
        let (mut client, server) = tokio::io::duplex(1024);
        let mut g = HeadGuard::new(server, HEAD, STALL);
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
        let mut g = HeadGuard::new(server, HEAD, STALL);
        client
            .write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        read_some(&mut g).await.unwrap();
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
        let mut g = HeadGuard::new(server, HEAD, STALL);
        assert_eq!(
            read_some(&mut g).await.unwrap_err().kind(),
            io::ErrorKind::TimedOut
        );
        let (mut client, server) = tokio::io::duplex(1024);
        let mut g = HeadGuard::new(server, HEAD, STALL);
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
        let mut g = HeadGuard::new(server, HEAD, STALL);
        let e = g.write_all(&[b'x'; 4096]).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
    }
}
