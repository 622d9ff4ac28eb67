//! One HTTP/1.1 server connection, Junction's own: request heads are parsed
//! by `httparse` (hyper's own parser), a request's body is read by the
//! request itself straight from the connection's buffer and socket (no
//! channel, no second task), and a response is written with one `write`
//! when it is whole at hand (head and body together), chunk by chunk when
//! it streams (SSE).
//!
//! It replaced hyper's HTTP/1 server connection (issue 26): hyper's
//! dispatcher, body channel and response encoder stood around a request
//! Junction reads whole and an answer it has whole. With the head clock
//! told where a head ends (`HeadClock`) and the request's names matched
//! instead of allocated, a proxied call costs about 4 k instructions less
//! (53.5k → 49.4k; BENCHMARKS.md).
//! HTTP/2 (h2c by prior knowledge, or TLS with ALPN `h2`) stays on hyper,
//! so the request body a route sees is a [`RequestBody`], either kind.
//!
//! What it does as hyper did:
//! - keep-alive by the request's version and `Connection`; `Connection:
//!   close` in the response when the connection ends after it;
//! - a body framed by `Content-Length` or chunks (`Transfer-Encoding`, which
//!   wins over a length; the connection then ends after the response);
//! - `Expect: 100-continue`: the `100 Continue` goes out when the request
//!   first reads its body;
//! - a client closing the connection while its request is in flight ends
//!   the request (its future is dropped: the call is cancelled upstream);
//! - a response's length from its body when it is known, chunked when not
//!   (close-delimited to an HTTP/1.0 client); a `Date` field;
//! - a head that is not HTTP/1.x is answered `400`, one larger than
//!   [`MAX_HEAD`] or with more than [`MAX_HEADERS`] fields `431`, and the
//!   connection is closed;
//! - on shutdown an idle connection closes at once, a busy one after its
//!   response.
//!
//! A request body the route did not read to its end is dropped if it is
//! already in the buffer. A rest of up to 64 KiB of known length still on
//! its way is waited for (2 s at most) and dropped before the response goes
//! out, unless the client waits for a `100 Continue`. Otherwise, or if it
//! does not come, the connection closes after the response. The clocks
//! (head, idle, write stall) are `HeadGuard`'s, around the socket, as
//! before.

use std::cell::RefCell;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http::header::{self, HeaderName, HeaderValue};
use http::{HeaderMap, Method, Request, Response, StatusCode, Uri, Version};
use hyper::body::{Frame, SizeHint};
use junction_upstream::framing::{self, Chunk, Framing, Next};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::sync::CancellationToken;

/// The largest request head accepted (hyper's default buffer limit).
pub const MAX_HEAD: usize = 8 * 1024 + 4096 * 100;

/// The most header fields a request may have (hyper's default too).
pub const MAX_HEADERS: usize = 100;

/// A response body up to this size is copied behind the head and written
/// with it; a larger frame is written on its own.
const INLINE_BODY: usize = 16 * 1024;

/// The socket wrapper that keeps the connection's clocks (`HeadGuard`) is
/// told when a request's head has been read whole.
pub trait HeadClock {
    fn head_ended(&mut self);
}

/// The request body a route reads: from this connection (HTTP/1.1) or from
/// hyper's HTTP/2 connection.
pub enum RequestBody {
    H1(Body),
    H2(hyper::body::Incoming),
}

impl hyper::body::Body for RequestBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        match self.get_mut() {
            RequestBody::H1(b) => b.poll_data(cx).map(|d| d.map(|r| r.map(Frame::data))),
            RequestBody::H2(b) => Pin::new(b).poll_frame(cx).map_err(io::Error::other),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            RequestBody::H1(b) => b.is_end(),
            RequestBody::H2(b) => b.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            RequestBody::H1(b) => b.size_hint(),
            RequestBody::H2(b) => b.size_hint(),
        }
    }
}

/// What the connection has read and not yet used, the socket, and where the
/// current request's body is: shared by the connection and the request's
/// [`Body`] (one task polls both; the lock is never contended).
struct Inner<IO> {
    io: IO,
    buf: BytesMut,
    body: Framing,
    /// How much of `100 Continue` is still to be written before the body is
    /// read (0: none owed).
    continue_left: usize,
}

const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// The request body's way to its connection, without the socket's type.
trait Source: Send + Sync {
    fn poll_data(&self, cx: &mut Context<'_>) -> Poll<Option<io::Result<Bytes>>>;
    fn is_end(&self) -> bool;
    fn size_hint(&self) -> SizeHint;
}

/// A request's body on an HTTP/1.1 connection.
pub struct Body(Arc<dyn Source>);

impl Body {
    fn poll_data(&self, cx: &mut Context<'_>) -> Poll<Option<io::Result<Bytes>>> {
        self.0.poll_data(cx)
    }

    fn is_end(&self) -> bool {
        self.0.is_end()
    }

    fn size_hint(&self) -> SizeHint {
        self.0.size_hint()
    }
}

struct Link<IO>(Mutex<Inner<IO>>);

impl<IO> Link<IO> {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner<IO>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin + Send> Source for Link<IO> {
    fn poll_data(&self, cx: &mut Context<'_>) -> Poll<Option<io::Result<Bytes>>> {
        let mut inner = self.lock();
        let inner = &mut *inner;
        if inner.continue_left > 0 {
            let mut written = CONTINUE.len() - inner.continue_left;
            let sent = framing::poll_write_all(&mut inner.io, cx, CONTINUE, &mut written);
            inner.continue_left = CONTINUE.len() - written;
            if let Err(e) = std::task::ready!(sent) {
                return Poll::Ready(Some(Err(e)));
            }
        }
        framing::poll_body(&mut inner.io, &mut inner.buf, &mut inner.body, cx)
    }

    fn is_end(&self) -> bool {
        self.lock().body.is_done()
    }

    fn size_hint(&self) -> SizeHint {
        match self.lock().body {
            Framing::Length(n) => SizeHint::with_exact(n),
            Framing::Done => SizeHint::with_exact(0),
            _ => SizeHint::default(),
        }
    }
}

/// The response future a connection awaits for each request.
pub type Responding<B> =
    Pin<Box<dyn Future<Output = Result<Response<B>, std::convert::Infallible>> + Send>>;

/// A parsed request head and what the connection must know of it.
struct Head {
    request: Request<()>,
    body: Framing,
    keep_alive: bool,
    expects_continue: bool,
}

/// Serves HTTP/1.1 requests on `io` until the client closes it, an error
/// ends it, or `stop` is cancelled (then after the response in flight).
/// `respond` turns each request into its response future.
pub async fn serve<IO, B, F>(io: IO, stop: CancellationToken, mut respond: F)
where
    IO: AsyncRead + AsyncWrite + HeadClock + Unpin + Send + 'static,
    B: hyper::body::Body<Data = Bytes> + Unpin,
    F: FnMut(Request<RequestBody>) -> Responding<B>,
{
    let link = Arc::new(Link(Mutex::new(Inner {
        io,
        buf: BytesMut::new(),
        body: Framing::Done,
        continue_left: 0,
    })));
    let stopped = stop.cancelled();
    tokio::pin!(stopped);
    // Polled once, to leave the waker with the token; then the flag is read.
    let mut waiting_for_stop = false;
    loop {
        let head = std::future::poll_fn(|cx| {
            let mut inner = link.lock();
            poll_head(
                &mut inner,
                cx,
                &stop,
                stopped.as_mut(),
                &mut waiting_for_stop,
            )
        })
        .await;
        let head = match head {
            Ok(Some(head)) => head,
            Ok(None) => return,
            Err(HeadError::Refused(status)) => {
                let mut out = Vec::with_capacity(128);
                status_line(&mut out, Version::HTTP_11, status);
                out.extend_from_slice(b"content-length: 0\r\nconnection: close\r\n");
                date(&mut out);
                out.extend_from_slice(b"\r\n");
                let _ = send(&link, &out).await;
                close(&link).await;
                return;
            }
            Err(HeadError::Gone) => return,
        };
        let Head {
            request,
            body,
            mut keep_alive,
            expects_continue,
        } = head;
        let version = request.version();
        let is_head = request.method() == Method::HEAD;
        {
            let mut inner = link.lock();
            inner.continue_left = if expects_continue && !body.is_done() {
                CONTINUE.len()
            } else {
                0
            };
            inner.body = body;
        }
        let body = RequestBody::H1(Body(link.clone()));
        let mut responding = respond(request.map(|()| body));
        let response = std::future::poll_fn(|cx| {
            if let Poll::Ready(r) = responding.as_mut().poll(cx) {
                return Poll::Ready(Some(r));
            }
            if client_gone(&mut link.lock(), cx) {
                return Poll::Ready(None);
            }
            Poll::Pending
        })
        .await;
        drop(responding);
        let Some(Ok(response)) = response else {
            return;
        };
        // What the request left of its body: dropped if it is all here. A
        // short rest still on its way (the request was answered before its
        // body was read, as a 401 is) is waited for and dropped too, so
        // that the client's next request can use the connection. Otherwise
        // the connection cannot be read further.
        let rest = {
            let mut inner = link.lock();
            let inner = &mut *inner;
            // A client still waiting for `100 Continue` may never send it.
            let awaits_continue = inner.continue_left > 0;
            inner.continue_left = 0;
            while let Ok(Next::Data(_)) = framing::next(&mut inner.buf, &mut inner.body) {}
            match inner.body {
                _ if inner.body.is_done() => Rest::None,
                Framing::Length(left) if left <= DISCARD_MAX && !awaits_continue => Rest::Short,
                _ => Rest::Long,
            }
        };
        if stop.is_cancelled() {
            keep_alive = false;
        }
        match rest {
            Rest::None => {}
            Rest::Short if keep_alive => {
                if !discard_rest(&link).await {
                    keep_alive = false;
                }
            }
            Rest::Short | Rest::Long => keep_alive = false,
        }
        let (parts, body) = response.into_parts();
        let written = write_response(&link, parts, body, version, is_head, &mut keep_alive).await;
        if written.is_err() || !keep_alive {
            close(&link).await;
            return;
        }
    }
}

/// The most of an unread request body the connection waits for and drops
/// to stay open, and how long it waits for it.
const DISCARD_MAX: u64 = 64 * 1024;
const DISCARD_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// What a request left unread of its body once it was answered.
enum Rest {
    None,
    /// At most `DISCARD_MAX` bytes of a known length.
    Short,
    /// More, of no known length, or held back for a `100 Continue`.
    Long,
}

/// Reads and drops the rest of the request's body (`Rest::Short`): whether
/// all of it came within `DISCARD_WAIT`. A client slower than that, or one
/// that closes, has its connection closed after the answer, as before.
async fn discard_rest<IO: AsyncRead + Unpin>(link: &Link<IO>) -> bool {
    let rest = std::future::poll_fn(|cx| {
        let mut inner = link.lock();
        let inner = &mut *inner;
        loop {
            match std::task::ready!(framing::poll_body(
                &mut inner.io,
                &mut inner.buf,
                &mut inner.body,
                cx
            )) {
                Some(Ok(_)) => {}
                None => return Poll::Ready(true),
                Some(Err(_)) => return Poll::Ready(false),
            }
        }
    });
    tokio::time::timeout(DISCARD_WAIT, rest)
        .await
        .unwrap_or(false)
}

enum HeadError {
    /// Answered with this status, then closed.
    Refused(StatusCode),
    /// Closed or broken mid-head, or its clock ran out: closed unanswered.
    Gone,
}

/// The next request's head: `None` when the client closed the connection
/// between requests, or `stop` fired with no request begun.
fn poll_head<IO: AsyncRead + HeadClock + Unpin>(
    inner: &mut Inner<IO>,
    cx: &mut Context<'_>,
    stop: &CancellationToken,
    stopped: Pin<&mut tokio_util::sync::WaitForCancellationFuture<'_>>,
    waiting_for_stop: &mut bool,
) -> Poll<Result<Option<Head>, HeadError>> {
    if inner.buf.is_empty() {
        let stopping = if *waiting_for_stop {
            stop.is_cancelled()
        } else {
            *waiting_for_stop = true;
            stopped.poll(cx).is_ready()
        };
        if stopping {
            return Poll::Ready(Ok(None));
        }
    }
    loop {
        if !inner.buf.is_empty() {
            match parse_head(&mut inner.buf) {
                Err(status) => return Poll::Ready(Err(HeadError::Refused(status))),
                Ok(Some(head)) => {
                    inner.io.head_ended();
                    return Poll::Ready(Ok(Some(head)));
                }
                Ok(None) if inner.buf.len() >= MAX_HEAD => {
                    return Poll::Ready(Err(HeadError::Refused(
                        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                    )))
                }
                Ok(None) => {}
            }
        }
        match std::task::ready!(framing::poll_fill(&mut inner.io, &mut inner.buf, cx, 0)) {
            Ok(0) if inner.buf.is_empty() => return Poll::Ready(Ok(None)),
            Ok(0) | Err(_) => return Poll::Ready(Err(HeadError::Gone)),
            Ok(_) => {}
        }
    }
}

/// Whether the client closed the connection while its request is in
/// flight. Looked at only once the request's body is read (until then the
/// body's reads would find it); what the client sends meanwhile is kept for
/// the next request, up to a head's worth.
fn client_gone<IO: AsyncRead + Unpin>(inner: &mut Inner<IO>, cx: &mut Context<'_>) -> bool {
    if !inner.body.is_done() {
        return false;
    }
    while inner.buf.len() < MAX_HEAD {
        match framing::poll_fill(&mut inner.io, &mut inner.buf, cx, 0) {
            Poll::Pending => return false,
            Poll::Ready(Ok(0) | Err(_)) => return true,
            Poll::Ready(Ok(_)) => {}
        }
    }
    false
}

const MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");
const MCP_NAME: HeaderName = HeaderName::from_static("mcp-name");
const MCP_PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
const MCP_SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");

/// A request field's name, lowercased once and matched against the names
/// of an ordinary MCP request (neither looked up among `HeaderName`'s
/// standard names nor, for Junction's own, allocated); any other name goes
/// to `HeaderName::from_bytes`.
fn header_name(name: &[u8]) -> Result<HeaderName, StatusCode> {
    let mut lower = [0u8; 24];
    if let Some(l) = lower.get_mut(..name.len()) {
        l.copy_from_slice(name);
        l.make_ascii_lowercase();
        let known = match &*l {
            b"host" => Some(header::HOST),
            b"accept" => Some(header::ACCEPT),
            b"expect" => Some(header::EXPECT),
            b"mcp-name" => Some(MCP_NAME),
            b"mcp-method" => Some(MCP_METHOD),
            b"connection" => Some(header::CONNECTION),
            b"user-agent" => Some(header::USER_AGENT),
            b"content-type" => Some(header::CONTENT_TYPE),
            b"authorization" => Some(header::AUTHORIZATION),
            b"content-length" => Some(header::CONTENT_LENGTH),
            b"mcp-session-id" => Some(MCP_SESSION_ID),
            b"transfer-encoding" => Some(header::TRANSFER_ENCODING),
            b"mcp-protocol-version" => Some(MCP_PROTOCOL_VERSION),
            _ => None,
        };
        if let Some(known) = known {
            return Ok(known);
        }
    }
    HeaderName::from_bytes(name).map_err(|_| StatusCode::BAD_REQUEST)
}

/// Parses a request head from the front of `buf` and removes it; `None`
/// when `buf` does not hold a whole one yet.
fn parse_head(buf: &mut BytesMut) -> Result<Option<Head>, StatusCode> {
    let bad = StatusCode::BAD_REQUEST;
    // Uninitialised: a zeroed array of `MAX_HEADERS` fields would cost more
    // than parsing a usual head.
    let mut slots = [const { std::mem::MaybeUninit::uninit() }; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut []);
    let len = match httparse::ParserConfig::default()
        .parse_request_with_uninit_headers(&mut req, buf, &mut slots)
    {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => {
            return Err(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE)
        }
        Err(_) => return Err(bad),
    };
    let version = match req.version {
        Some(1) => Version::HTTP_11,
        _ => Version::HTTP_10,
    };
    let method = Method::from_bytes(req.method.unwrap_or_default().as_bytes()).map_err(|_| bad)?;
    let base = buf.as_ptr() as usize;
    let path = req.path.unwrap_or_default();
    let path_span = (path.as_ptr() as usize - base, path.len());
    let mut length: Option<u64> = None;
    let mut coded = false;
    let mut chunked = false;
    let mut keep_alive = version == Version::HTTP_11;
    let mut expects_continue = false;
    // Each field's name, and where its value lies in `buf`, so that once
    // the head is split off the values share its bytes.
    let mut fields = Vec::with_capacity(req.headers.len());
    for field in req.headers.iter() {
        let (name, value) = (header_name(field.name.as_bytes())?, field.value);
        if name == header::CONTENT_LENGTH {
            let n = framing::content_length(value).ok_or(bad)?;
            if length.is_some_and(|l| l != n) {
                return Err(bad);
            }
            length = Some(n);
        } else if name == header::TRANSFER_ENCODING {
            coded = true;
            chunked = framing::ends_chunked(value);
        } else if name == header::CONNECTION {
            for token in value.split(|&b| b == b',').map(<[u8]>::trim_ascii) {
                if token.eq_ignore_ascii_case(b"close") {
                    keep_alive = false;
                } else if token.eq_ignore_ascii_case(b"keep-alive") && version == Version::HTTP_10 {
                    keep_alive = true;
                }
            }
        } else if name == header::EXPECT {
            // An HTTP/1.0 client is never sent a `100 Continue` (RFC 9110 §10.1.1).
            expects_continue = version == Version::HTTP_11
                && value.trim_ascii().eq_ignore_ascii_case(b"100-continue");
        }
        fields.push((name, value.as_ptr() as usize - base, value.len()));
    }
    let body = if coded {
        // A request body's coding must end in chunked (RFC 9112 §6.3), and
        // HTTP/1.0 has none; chunked wins over a length, and such a request
        // does not leave the connection trusted.
        if !chunked || version == Version::HTTP_10 {
            return Err(bad);
        }
        if length.is_some() {
            keep_alive = false;
        }
        Framing::Chunked(Chunk::Size)
    } else {
        Framing::Length(length.unwrap_or(0))
    };
    let head = buf.split_to(len).freeze();
    let uri = Uri::from_maybe_shared(head.slice(path_span.0..path_span.0 + path_span.1))
        .map_err(|_| bad)?;
    let mut headers = HeaderMap::with_capacity(fields.len());
    for (name, at, n) in fields {
        let value = HeaderValue::from_maybe_shared(head.slice(at..at + n)).map_err(|_| bad)?;
        headers.append(name, value);
    }
    let mut request = Request::new(());
    *request.method_mut() = method;
    *request.uri_mut() = uri;
    *request.version_mut() = version;
    *request.headers_mut() = headers;
    Ok(Some(Head {
        request,
        body,
        keep_alive,
        expects_continue,
    }))
}

fn status_line(out: &mut Vec<u8>, version: Version, status: StatusCode) {
    out.extend_from_slice(if version == Version::HTTP_10 {
        b"HTTP/1.0 "
    } else {
        b"HTTP/1.1 "
    });
    out.extend_from_slice(status.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(status.canonical_reason().unwrap_or("").as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// The `Date` field, formatted once a second per thread.
fn date(out: &mut Vec<u8>) {
    thread_local! {
        static NOW: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
    }
    let now = std::time::SystemTime::now();
    let secs = now
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    NOW.with_borrow_mut(|(at, text)| {
        if *at != secs {
            *at = secs;
            *text = httpdate::fmt_http_date(now);
        }
        out.extend_from_slice(b"date: ");
        out.extend_from_slice(text.as_bytes());
        out.extend_from_slice(b"\r\n");
    });
}

/// How a response's body is framed on the wire.
#[derive(PartialEq, Eq)]
enum Out {
    /// No body (HEAD, 1xx, 204, 304).
    None,
    Length,
    Chunked,
    /// Until the connection closes (HTTP/1.0 and a length not known).
    Close,
}

/// Writes one response: the head, then the body's frames as they come (a
/// frame ready at once goes into the same write). The body is dropped
/// before its last bytes are written (its request stops counting in flight
/// then: `HeadGuard`'s idle clock starts from that write).
async fn write_response<IO, B>(
    link: &Link<IO>,
    parts: http::response::Parts,
    body: B,
    version: Version,
    is_head: bool,
    keep_alive: &mut bool,
) -> io::Result<()>
where
    IO: AsyncRead + AsyncWrite + Unpin,
    B: hyper::body::Body<Data = Bytes> + Unpin,
{
    let status = parts.status;
    let bodiless = is_head
        || status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED;
    let exact = body.size_hint().exact();
    let mut out = Vec::with_capacity(
        256 + usize::try_from(exact.unwrap_or(0)).map_or(INLINE_BODY, |n| n.min(INLINE_BODY)),
    );
    status_line(&mut out, version, status);
    // The fields as they are, except the connection's own; what they say
    // of the framing and the date is noted on the way.
    let (mut has_length, mut has_date) = (false, false);
    for (name, value) in &parts.headers {
        if name == header::CONNECTION {
            if value.as_bytes().eq_ignore_ascii_case(b"close") {
                *keep_alive = false;
            }
            continue;
        }
        if name == header::TRANSFER_ENCODING {
            continue;
        }
        has_length |= name == header::CONTENT_LENGTH;
        has_date |= name == header::DATE;
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    let out_kind = if bodiless {
        Out::None
    } else if has_length || body.is_end_stream() || exact.is_some() {
        Out::Length
    } else if version == Version::HTTP_11 {
        Out::Chunked
    } else {
        Out::Close
    };
    if out_kind == Out::Close {
        *keep_alive = false;
    }
    if !has_length {
        match out_kind {
            Out::Length => framing::push_content_length(&mut out, exact.unwrap_or(0)),
            Out::None if is_head => {
                if let Some(n) = exact {
                    framing::push_content_length(&mut out, n);
                }
            }
            Out::Chunked => out.extend_from_slice(b"transfer-encoding: chunked\r\n"),
            Out::None | Out::Close => {}
        }
    }
    if !*keep_alive {
        out.extend_from_slice(b"connection: close\r\n");
    } else if version == Version::HTTP_10 {
        out.extend_from_slice(b"connection: keep-alive\r\n");
    }
    if !has_date {
        date(&mut out);
    }
    out.extend_from_slice(b"\r\n");
    if out_kind == Out::None {
        drop(body);
        return send(link, &out).await;
    }
    let mut body = Some(body);
    loop {
        enum Step {
            Frame(Option<Bytes>),
            Write,
            Gone,
        }
        let step = std::future::poll_fn(|cx| {
            let Some(b) = body.as_mut() else {
                return Poll::Ready(Step::Frame(None));
            };
            match Pin::new(b).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    Poll::Ready(Step::Frame(Some(frame.into_data().unwrap_or_default())))
                }
                Poll::Ready(Some(Err(_)) | None) => Poll::Ready(Step::Frame(None)),
                Poll::Pending if !out.is_empty() => Poll::Ready(Step::Write),
                Poll::Pending => {
                    if client_gone(&mut link.lock(), cx) {
                        Poll::Ready(Step::Gone)
                    } else {
                        Poll::Pending
                    }
                }
            }
        })
        .await;
        match step {
            Step::Gone => {
                *keep_alive = false;
                return Ok(());
            }
            Step::Write => {
                send(link, &out).await?;
                out.clear();
            }
            Step::Frame(Some(data)) => {
                if data.is_empty() {
                    continue;
                }
                if out_kind == Out::Chunked {
                    out.extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
                }
                if data.len() <= INLINE_BODY {
                    out.extend_from_slice(&data);
                } else {
                    send(link, &out).await?;
                    out.clear();
                    send(link, &data).await?;
                }
                if out_kind == Out::Chunked {
                    out.extend_from_slice(b"\r\n");
                }
            }
            Step::Frame(None) => {
                drop(body.take());
                if out_kind == Out::Chunked {
                    out.extend_from_slice(b"0\r\n\r\n");
                }
                if !out.is_empty() {
                    send(link, &out).await?;
                }
                return Ok(());
            }
        }
    }
}

/// Writes all of `data` (the lock is taken per poll, never held across a
/// wait).
async fn send<IO: AsyncWrite + Unpin>(link: &Link<IO>, data: &[u8]) -> io::Result<()> {
    let mut written = 0;
    std::future::poll_fn(|cx| {
        let mut inner = link.lock();
        std::task::ready!(framing::poll_write_all(
            &mut inner.io,
            cx,
            data,
            &mut written
        ))?;
        Pin::new(&mut inner.io).poll_flush(cx)
    })
    .await
}

/// Ends the connection: the write side is shut down (TLS: `close_notify`).
async fn close<IO: AsyncWrite + Unpin>(link: &Link<IO>) {
    let _ = std::future::poll_fn(|cx| Pin::new(&mut link.lock().io).poll_shutdown(cx)).await;
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
