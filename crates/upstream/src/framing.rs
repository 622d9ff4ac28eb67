//! HTTP/1.1 body framing (RFC 9112 §6–7): how much of a body is left and
//! where it ends, by `Content-Length`, by chunks, or by the connection
//! closing; and what reads and writes a framed body makes on its socket
//! ([`poll_fill`], [`poll_body`], [`poll_write_all`]). Shared by the two
//! HTTP/1.1 connections Junction has of its own: the upstream's
//! (`http::h1`, answer bodies) and the server's (request bodies).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite};

/// The largest chunk-size line or trailer section accepted.
pub const MAX_LINE: usize = 64 * 1024;

/// How much room a read asks for.
pub const READ_SIZE: usize = 8 * 1024;

/// The most room made for one read, when the rest of a body is known to be
/// that large.
pub const MAX_READ: usize = 256 * 1024;

/// Reads more into `buf`: the number of bytes read, 0 at the end. `want` is
/// how much the reader expects (the rest of a body of known length): room
/// for up to [`MAX_READ`] of it is made, so a large body takes a few reads
/// rather than one per [`READ_SIZE`].
pub fn poll_fill<IO: AsyncRead + Unpin>(
    io: &mut IO,
    buf: &mut BytesMut,
    cx: &mut Context<'_>,
    want: u64,
) -> Poll<io::Result<usize>> {
    let want = usize::try_from(want).map_or(MAX_READ, |w| w.min(MAX_READ));
    let spare = buf.capacity() - buf.len();
    if spare < READ_SIZE / 4 || spare < want {
        buf.reserve(want.max(READ_SIZE));
    }
    tokio_util::io::poll_read_buf(Pin::new(io), cx, buf)
}

/// The body's next data, from `buf` and then from `io`; `None` at its end
/// (`body` is `Done` then). The connection's end ends a `Close` body and is
/// an error in any other.
pub fn poll_body<IO: AsyncRead + Unpin>(
    io: &mut IO,
    buf: &mut BytesMut,
    body: &mut Framing,
    cx: &mut Context<'_>,
) -> Poll<Option<io::Result<Bytes>>> {
    loop {
        let want = match next(buf, body) {
            Err(e) => return Poll::Ready(Some(Err(e))),
            Ok(Next::Data(data)) => return Poll::Ready(Some(Ok(data))),
            Ok(Next::End) => return Poll::Ready(None),
            Ok(Next::More(want)) => want,
        };
        match std::task::ready!(poll_fill(io, buf, cx, want)) {
            Err(e) => return Poll::Ready(Some(Err(e))),
            Ok(0) if *body == Framing::Close => {
                *body = Framing::Done;
                return Poll::Ready(None);
            }
            Ok(0) => {
                return Poll::Ready(Some(Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "connection closed before the body's end",
                ))))
            }
            Ok(_) => {}
        }
    }
}

/// Writes `data` from `*written` on, counting what went out in `written`,
/// so a write that had to wait resumes where it stopped.
pub fn poll_write_all<IO: AsyncWrite + Unpin>(
    io: &mut IO,
    cx: &mut Context<'_>,
    data: &[u8],
    written: &mut usize,
) -> Poll<io::Result<()>> {
    while *written < data.len() {
        let n = std::task::ready!(Pin::new(&mut *io).poll_write(cx, &data[*written..]))?;
        if n == 0 {
            return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
        }
        *written += n;
    }
    Poll::Ready(Ok(()))
}

/// Writes a `content-length: n` field line into a head being built.
pub fn push_content_length(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(b"content-length: ");
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// A `Content-Length` value: digits only (spaces around them allowed),
/// `None` for anything else.
pub fn content_length(value: &[u8]) -> Option<u64> {
    std::str::from_utf8(value)
        .ok()
        .map(str::trim)
        .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|v| v.parse::<u64>().ok())
}

/// Whether a `Transfer-Encoding` value makes the body chunked: only its last
/// coding says (RFC 9112 §6.3).
pub fn ends_chunked(value: &[u8]) -> bool {
    value
        .rsplit(|&b| b == b',')
        .next()
        .is_some_and(|last| last.trim_ascii().eq_ignore_ascii_case(b"chunked"))
}

/// How much of a body is left, and how its end is known.
#[derive(Debug, PartialEq, Eq)]
pub enum Framing {
    /// `Content-Length`: this many bytes are left.
    Length(u64),
    Chunked(Chunk),
    /// Until the peer closes the connection.
    Close,
    /// Read to its end.
    Done,
}

/// Where a chunked body's reading is.
#[derive(Debug, PartialEq, Eq)]
pub enum Chunk {
    Size,
    Data(u64),
    /// The CRLF after a chunk's data.
    DataEnd,
    /// Trailer fields up to the empty line; how many bytes they took so far.
    Trailers(usize),
}

impl Framing {
    pub fn is_done(&self) -> bool {
        matches!(self, Framing::Done | Framing::Length(0))
    }
}

/// What the buffer yields next.
#[derive(Debug)]
pub enum Next {
    Data(Bytes),
    /// The body's end (the framing is `Done` now). What follows it stays in
    /// the buffer.
    End,
    /// Read more: about this many bytes are expected (0: unknown). For
    /// `Close`, the connection's end is the body's.
    More(u64),
}

/// The body's next data from the front of `buf`, consumed from it.
pub fn next(buf: &mut BytesMut, body: &mut Framing) -> io::Result<Next> {
    loop {
        match body {
            Framing::Done => return Ok(Next::End),
            Framing::Length(0) => {
                *body = Framing::Done;
                return Ok(Next::End);
            }
            Framing::Length(left) => {
                return Ok(take(buf, left).map_or(Next::More(*left), Next::Data));
            }
            Framing::Close => {
                if buf.is_empty() {
                    return Ok(Next::More(0));
                }
                return Ok(Next::Data(buf.split().freeze()));
            }
            Framing::Chunked(chunk) => match chunk_step(buf, chunk)? {
                Step::Data(data) => return Ok(Next::Data(data)),
                Step::End => {
                    *body = Framing::Done;
                    return Ok(Next::End);
                }
                Step::Again => {}
                Step::More => {
                    let want = match chunk {
                        Chunk::Data(left) => *left,
                        _ => 0,
                    };
                    return Ok(Next::More(want));
                }
            },
        }
    }
}

/// Up to `left` bytes from the front of `buf`, if it has any.
fn take(buf: &mut BytesMut, left: &mut u64) -> Option<Bytes> {
    if buf.is_empty() {
        return None;
    }
    let n = usize::try_from(*left).map_or(buf.len(), |l| l.min(buf.len()));
    *left -= n as u64;
    Some(buf.split_to(n).freeze())
}

enum Step {
    Data(Bytes),
    /// Read past a size line or a CRLF: look again.
    Again,
    /// The buffer holds too little: read more.
    More,
    End,
}

/// One step through a chunked body.
fn chunk_step(buf: &mut BytesMut, chunk: &mut Chunk) -> io::Result<Step> {
    let invalid = |m: &str| io::Error::new(io::ErrorKind::InvalidData, m.to_owned());
    match chunk {
        Chunk::Size => match httparse::parse_chunk_size(buf) {
            Ok(httparse::Status::Complete((used, size))) => {
                buf.advance(used);
                *chunk = if size == 0 {
                    Chunk::Trailers(0)
                } else {
                    Chunk::Data(size)
                };
                Ok(Step::Again)
            }
            Ok(httparse::Status::Partial) if buf.len() >= MAX_LINE => {
                Err(invalid("chunk size line too long"))
            }
            Ok(httparse::Status::Partial) => Ok(Step::More),
            Err(_) => Err(invalid("invalid chunk size line")),
        },
        Chunk::Data(left) => match take(buf, left) {
            Some(data) => {
                if *left == 0 {
                    *chunk = Chunk::DataEnd;
                }
                Ok(Step::Data(data))
            }
            None => Ok(Step::More),
        },
        Chunk::DataEnd => {
            if buf.len() < 2 {
                return Ok(Step::More);
            }
            if &buf[..2] != b"\r\n" {
                return Err(invalid("chunk data not followed by CRLF"));
            }
            buf.advance(2);
            *chunk = Chunk::Size;
            Ok(Step::Again)
        }
        Chunk::Trailers(seen) => {
            let Some(eol) = memchr_crlf(buf) else {
                if *seen + buf.len() >= MAX_LINE {
                    return Err(invalid("trailer section too long"));
                }
                return Ok(Step::More);
            };
            buf.advance(eol + 2);
            if eol == 0 {
                return Ok(Step::End);
            }
            *seen += eol + 2;
            if *seen >= MAX_LINE {
                return Err(invalid("trailer section too long"));
            }
            Ok(Step::Again)
        }
    }
}

fn memchr_crlf(buf: &[u8]) -> Option<usize> {
    buf.windows(2).position(|w| w == b"\r\n")
}
