//! HTTP/1.1 body framing (RFC 9112 §6–7): how much of a body is left and
//! where it ends, by `Content-Length`, by chunks, or by the connection
//! closing. Shared by the two HTTP/1.1 connections Junction has of its own:
//! the upstream's (`http::h1`, answer bodies) and the server's (request
//! bodies). Works on what was read into a buffer; reading more is the
//! connection's.

use std::io;

use bytes::{Buf, Bytes, BytesMut};

/// The largest chunk-size line or trailer section accepted.
pub const MAX_LINE: usize = 64 * 1024;

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
