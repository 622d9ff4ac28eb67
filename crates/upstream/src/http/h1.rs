//! One HTTP/1.1 client connection to an upstream, Junction's own: a request
//! is written with one `write` (head and a small body together), the answer's
//! head is parsed by `httparse` (hyper's own parser), and its body is framed
//! here (`Content-Length`, chunked, or until the connection closes).
//!
//! It replaced hyper's client connection for plain and TLS HTTP/1.1 upstreams
//! (issue 26): hyper's dispatcher, request channel and body channel cost about
//! 12 k instructions a call, for a request Junction has whole in hand and an
//! answer it reads in order. What this connection does not do, because
//! Junction never asks for it: pipelining, `Expect: 100-continue`, upgrades,
//! request bodies streamed while the answer arrives. An answer is refused
//! (the call fails with a protocol error) when its head is larger than
//! [`MAX_HEAD`], has more than [`MAX_HEADERS`] fields, switches protocols, or
//! frames its body ambiguously (two different `Content-Length`s); a chunk or
//! trailer section that breaks the grammar ends the body with an error.
//!
//! The connection is reused only when the answer said nothing against it
//! (HTTP/1.1 without `Connection: close`), its body was framed by length or
//! chunks and read to the end, and nothing arrived after it.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes, BytesMut};

use crate::framing;
pub(crate) use crate::framing::{Chunk, Framing};
use http::header::{HeaderName, HeaderValue, CONNECTION, CONTENT_LENGTH, TRANSFER_ENCODING};
use http::{HeaderMap, Method, StatusCode};
use hyper_rustls::MaybeHttpsStream;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// The largest answer head (status line and fields) accepted (chunk-size
/// lines and trailers: `framing::MAX_LINE`).
pub(crate) const MAX_HEAD: usize = 64 * 1024;

/// The most header fields an answer may have (hyper's default too).
pub(crate) const MAX_HEADERS: usize = 100;

/// A request body up to this size is copied behind the head and written with
/// it; a larger one is written on its own, from where it is.
const INLINE_BODY: usize = 16 * 1024;

/// What a request head is given beyond its target and `Host` before it has
/// to grow.
const HEAD_ROOM: usize = 512;

/// The socket: plain TCP as it is, TLS through the connector's stream.
pub(crate) enum Stream {
    Plain(TcpStream),
    Tls(Box<TokioIo<MaybeHttpsStream<TokioIo<TcpStream>>>>),
}

impl Stream {
    pub(crate) fn new(io: MaybeHttpsStream<TokioIo<TcpStream>>) -> Stream {
        match io {
            MaybeHttpsStream::Http(tcp) => Stream::Plain(tcp.into_inner()),
            tls => Stream::Tls(Box::new(TokioIo::new(tls))),
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(&mut **s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(&mut **s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(&mut **s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(&mut **s).poll_shutdown(cx),
        }
    }
}

/// Why an exchange failed.
#[derive(Debug)]
pub(crate) enum Failure {
    /// Not one byte of the request was written: it may go out on another
    /// connection.
    Unsent(io::Error),
    /// The connection broke after the request (or part of it) was written.
    Broken(io::Error),
    /// The answer is not HTTP/1.1 Junction can read.
    Invalid(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Unsent(e) | Failure::Broken(e) => e.fmt(f),
            Failure::Invalid(m) => f.write_str(m),
        }
    }
}

/// A message's header fields (a request's, or an answer's), in order: the
/// few a call carries, kept in a list rather than a hash map (no hashing per
/// field, nothing to rehash; a lookup is a short scan). `insert` replaces a
/// field of the same name, `append` adds one more.
#[derive(Clone, Debug, Default)]
pub(crate) struct Fields(Vec<(HeaderName, HeaderValue)>);

impl Fields {
    pub(crate) fn with_capacity(n: usize) -> Fields {
        Fields(Vec::with_capacity(n))
    }

    pub(crate) fn insert(&mut self, name: HeaderName, value: HeaderValue) {
        match self.0.iter().position(|(n, _)| *n == name) {
            Some(at) => {
                self.0[at].1 = value;
                // Any further values of that name go: `insert` replaces all.
                let mut i = at + 1;
                while i < self.0.len() {
                    if self.0[i].0 == name {
                        self.0.remove(i);
                    } else {
                        i += 1;
                    }
                }
            }
            None => self.0.push((name, value)),
        }
    }

    pub(crate) fn append(&mut self, name: HeaderName, value: HeaderValue) {
        self.0.push((name, value));
    }

    pub(crate) fn contains(&self, name: &HeaderName) -> bool {
        self.get(name).is_some()
    }

    /// The first value of `name`.
    pub(crate) fn get(&self, name: &HeaderName) -> Option<&HeaderValue> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }

    pub(crate) fn reserve(&mut self, n: usize) {
        self.0.reserve(n);
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&HeaderName, &HeaderValue)> {
        self.0.iter().map(|(n, v)| (n, v))
    }

    /// A `HeaderMap`'s fields (hyper's HTTP/2 answers).
    pub(crate) fn from_map(map: &HeaderMap) -> Fields {
        Fields(map.iter().map(|(n, v)| (n.clone(), v.clone())).collect())
    }

    /// The same fields as a `HeaderMap` (for hyper's HTTP/2 requests).
    pub(crate) fn to_map(&self) -> HeaderMap {
        let mut map = HeaderMap::with_capacity(self.0.len());
        for (n, v) in &self.0 {
            map.append(n.clone(), v.clone());
        }
        map
    }
}

/// An answer's head, and how its body is framed.
pub(crate) struct Head {
    pub(crate) status: StatusCode,
    pub(crate) headers: Fields,
    pub(crate) body: Framing,
    /// The answer allows the connection to carry another request.
    pub(crate) keep_alive: bool,
}

/// One HTTP/1.1 connection: its socket and what was read but not yet used.
pub(crate) struct Conn {
    io: Stream,
    buf: BytesMut,
}

impl Conn {
    pub(crate) fn new(io: Stream) -> Conn {
        Conn {
            io,
            buf: BytesMut::new(),
        }
    }

    /// Writes one request: `target` in origin form, `host` as `Host`,
    /// `headers` (any hop-by-hop or framing field among them is left out:
    /// the framing is this connection's), and `body` with its length.
    pub(crate) async fn send(
        &mut self,
        method: &Method,
        target: &str,
        host: &HeaderValue,
        headers: &Fields,
        body: &Bytes,
    ) -> Result<(), Failure> {
        let inline = body.len() <= INLINE_BODY;
        let head = encode(method, target, host, headers, body, inline);
        let mut written = 0;
        let first = std::future::poll_fn(|cx| self.poll_write_all(cx, &head, &mut written)).await;
        if let Err(e) = first {
            return Err(if written == 0 {
                Failure::Unsent(e)
            } else {
                Failure::Broken(e)
            });
        }
        if !inline {
            let mut done = 0;
            std::future::poll_fn(|cx| self.poll_write_all(cx, body, &mut done))
                .await
                .map_err(Failure::Broken)?;
        }
        std::future::poll_fn(|cx| Pin::new(&mut self.io).poll_flush(cx))
            .await
            .map_err(Failure::Broken)
    }

    fn poll_write_all(
        &mut self,
        cx: &mut Context<'_>,
        data: &[u8],
        written: &mut usize,
    ) -> Poll<io::Result<()>> {
        framing::poll_write_all(&mut self.io, cx, data, written)
    }

    /// Reads the answer's head (informational `1xx` answers are skipped).
    pub(crate) async fn read_head(&mut self) -> Result<Head, Failure> {
        std::future::poll_fn(|cx| self.poll_head(cx)).await
    }

    fn poll_head(&mut self, cx: &mut Context<'_>) -> Poll<Result<Head, Failure>> {
        loop {
            if !self.buf.is_empty() {
                match parse_head(&mut self.buf)? {
                    Some(head) => return Poll::Ready(Ok(head)),
                    None if self.buf.len() >= MAX_HEAD => {
                        return Poll::Ready(Err(Failure::Invalid(format!(
                            "answer head larger than {MAX_HEAD} bytes"
                        ))))
                    }
                    None => {}
                }
            }
            let n = std::task::ready!(self.poll_fill(cx, 0)).map_err(Failure::Broken)?;
            if n == 0 {
                return Poll::Ready(Err(Failure::Broken(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "connection closed before the answer's head",
                ))));
            }
        }
    }

    /// Reads more into the buffer (`framing::poll_fill`).
    fn poll_fill(&mut self, cx: &mut Context<'_>, want: u64) -> Poll<io::Result<usize>> {
        framing::poll_fill(&mut self.io, &mut self.buf, cx, want)
    }

    /// The answer body's next data, `None` at its end (`body` is `Done`
    /// then).
    pub(crate) fn poll_data(
        &mut self,
        cx: &mut Context<'_>,
        body: &mut Framing,
    ) -> Poll<Option<io::Result<Bytes>>> {
        framing::poll_body(&mut self.io, &mut self.buf, body, cx)
    }

    /// Whether an idle connection can take another request: nothing is left
    /// unread and the upstream has neither closed it nor sent anything since.
    /// `cx`'s waker is woken when that may change.
    /// An idle connection keeps no more than an ordinary read buffer: one
    /// grown for a large answer is let go (the answer's data keeps its part
    /// alive for as long as it is used).
    pub(crate) fn poll_idle(&mut self, cx: &mut Context<'_>) -> bool {
        if !self.buf.is_empty() {
            return false;
        }
        if self.buf.capacity() > 2 * framing::READ_SIZE {
            self.buf = BytesMut::new();
        }
        // Into a byte of its own: the buffer may still be shared with the
        // last answer's body, and would be copied to make room.
        let mut one = [0u8; 1];
        let mut probe = ReadBuf::new(&mut one);
        Pin::new(&mut self.io)
            .poll_read(cx, &mut probe)
            .is_pending()
    }
}

/// Parses an answer head from the front of `buf` and removes it; `None` when
/// `buf` does not hold a whole one yet. Informational answers are removed
/// and skipped.
fn parse_head(buf: &mut BytesMut) -> Result<Option<Head>, Failure> {
    loop {
        // Uninitialised: a zeroed array of `MAX_HEADERS` fields would cost
        // more than parsing a usual head.
        let mut fields = [const { std::mem::MaybeUninit::uninit() }; MAX_HEADERS];
        let mut answer = httparse::Response::new(&mut []);
        let len = match httparse::ParserConfig::default().parse_response_with_uninit_headers(
            &mut answer,
            buf,
            &mut fields,
        ) {
            Ok(httparse::Status::Complete(len)) => len,
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(e) => return Err(Failure::Invalid(format!("invalid answer head: {e}"))),
        };
        let code = answer.code.unwrap_or_default();
        let status = StatusCode::from_u16(code)
            .map_err(|_| Failure::Invalid(format!("invalid answer status {code}")))?;
        if status == StatusCode::SWITCHING_PROTOCOLS {
            return Err(Failure::Invalid(
                "the upstream switched protocols".to_owned(),
            ));
        }
        if status.is_informational() {
            buf.advance(len);
            continue;
        }
        let version_11 = answer.version == Some(1);
        let mut length: Option<u64> = None;
        let mut coded = false;
        let mut chunked = false;
        let mut keep_alive = version_11;
        // Where each name and value lies in `buf`, so that once the head is
        // split off the values share its bytes (no copy, no allocation per
        // field).
        let mut spans = Vec::with_capacity(answer.headers.len());
        let base = buf.as_ptr() as usize;
        for field in answer.headers.iter() {
            let (name, value) = (field.name.as_bytes(), field.value);
            spans.push((
                name.as_ptr() as usize - base,
                name.len(),
                value.as_ptr() as usize - base,
                value.len(),
            ));
            if name.eq_ignore_ascii_case(b"content-length") {
                let n = framing::content_length(value)
                    .ok_or_else(|| Failure::Invalid("invalid Content-Length".to_owned()))?;
                if length.is_some_and(|l| l != n) {
                    return Err(Failure::Invalid("two different Content-Lengths".to_owned()));
                }
                length = Some(n);
            } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
                coded = true;
                chunked = framing::ends_chunked(value);
            } else if name.eq_ignore_ascii_case(b"connection")
                && value
                    .split(|&b| b == b',')
                    .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"close"))
            {
                keep_alive = false;
            }
        }
        let head = buf.split_to(len).freeze();
        let mut headers = Fields::with_capacity(spans.len());
        for (name_at, name_len, at, n) in spans {
            let name = HeaderName::from_bytes(&head[name_at..name_at + name_len])
                .map_err(|_| Failure::Invalid("invalid answer header name".to_owned()))?;
            let value = HeaderValue::from_maybe_shared(head.slice(at..at + n))
                .map_err(|_| Failure::Invalid("invalid answer header value".to_owned()))?;
            headers.append(name, value);
        }
        let framing = if status == StatusCode::NO_CONTENT || status == StatusCode::NOT_MODIFIED {
            Framing::Done
        } else if chunked {
            // Transfer-Encoding wins over Content-Length (RFC 9112 §6.3), and
            // an answer with both does not leave the connection trusted.
            if length.is_some() {
                keep_alive = false;
            }
            Framing::Chunked(Chunk::Size)
        } else if coded {
            Framing::Close
        } else {
            length.map_or(Framing::Close, Framing::Length)
        };
        if framing == Framing::Close {
            keep_alive = false;
        }
        return Ok(Some(Head {
            status,
            headers,
            body: framing,
            keep_alive,
        }));
    }
}

/// The request head: request line, `Host`, the fields of `headers` except
/// the ones this connection decides, `Content-Length`; `body` behind it when
/// `inline`.
fn encode(
    method: &Method,
    target: &str,
    host: &HeaderValue,
    headers: &Fields,
    body: &Bytes,
    inline: bool,
) -> Vec<u8> {
    // Room for the usual fields without walking them twice; more grows the
    // buffer once.
    let mut out = Vec::with_capacity(
        HEAD_ROOM + target.len() + host.len() + if inline { body.len() } else { 0 },
    );
    out.extend_from_slice(method.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(target.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\nhost: ");
    out.extend_from_slice(host.as_bytes());
    out.extend_from_slice(b"\r\n");
    for (name, value) in headers.iter() {
        if is_framing(name) {
            continue;
        }
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if !body.is_empty() || !matches!(*method, Method::GET | Method::HEAD | Method::DELETE) {
        framing::push_content_length(&mut out, body.len() as u64);
    }
    out.extend_from_slice(b"\r\n");
    if inline {
        out.extend_from_slice(body);
    }
    out
}

/// Fields this connection writes itself, or that describe a connection
/// rather than a request.
pub(crate) fn is_framing(name: &HeaderName) -> bool {
    name == http::header::HOST
        || name == CONTENT_LENGTH
        || name == TRANSFER_ENCODING
        || name == CONNECTION
        || name == http::header::TE
        || name == http::header::UPGRADE
        || name.as_str() == "keep-alive"
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "h1_tests.rs"]
mod tests;
