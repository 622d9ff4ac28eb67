//! Reading a whole HTTP body up to a size limit, for the bodies Junction
//! parses at once: a client's request (the server) and an upstream's JSON
//! answer (`http::wire`).
//!
//! A small body comes as one frame (hyper hands over what it read with the
//! head), and that frame is the body: it is kept as it is, with no buffer
//! list, no copy and no poll past the end it announced. Only a body in
//! several frames is gathered into one buffer.

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Body;

/// Why a body could not be read whole.
#[derive(Debug)]
pub enum ReadError<E> {
    /// Longer than the limit. Found by reading, not from an announced
    /// length: the data up to the limit is read, as `http_body_util::Limited`
    /// did, so a client still sending gets its 413 rather than a reset.
    TooLarge,
    /// The body's own error: the connection broke, a malformed chunk.
    Broken(E),
}

/// All of `body`'s data, at most `max` bytes; trailers are ignored.
pub async fn read_whole<B>(mut body: B, max: usize) -> Result<Bytes, ReadError<B::Error>>
where
    B: Body<Data = Bytes> + Unpin,
{
    let mut whole = Bytes::new();
    let mut gathered: Option<Vec<u8>> = None;
    while !body.is_end_stream() {
        let Some(frame) = body.frame().await else {
            break;
        };
        let Ok(data) = frame.map_err(ReadError::Broken)?.into_data() else {
            continue;
        };
        let have = gathered.as_ref().map_or(whole.len(), Vec::len);
        if have + data.len() > max {
            return Err(ReadError::TooLarge);
        }
        match &mut gathered {
            Some(buf) => buf.extend_from_slice(&data),
            None if whole.is_empty() => whole = data,
            None => {
                let mut buf = Vec::with_capacity(have + data.len());
                buf.extend_from_slice(&whole);
                buf.extend_from_slice(&data);
                gathered = Some(buf);
            }
        }
    }
    Ok(gathered.map_or(whole, Bytes::from))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use http_body_util::{Full, StreamBody};
    use hyper::body::Frame;

    fn frames(parts: &[&'static str]) -> impl Body<Data = Bytes, Error = std::io::Error> + Unpin {
        let items: Vec<Result<Frame<Bytes>, std::io::Error>> = parts
            .iter()
            .map(|p| Ok(Frame::data(Bytes::from_static(p.as_bytes()))))
            .collect();
        StreamBody::new(futures_util::stream::iter(items))
    }

    #[tokio::test]
    async fn one_frame_is_the_body_and_several_are_joined() {
        let one = Full::new(Bytes::from_static(b"{\"a\":1}"));
        assert_eq!(read_whole(one, 100).await.unwrap(), "{\"a\":1}");
        let many = frames(&["{\"a\"", ":", "1}"]);
        assert_eq!(read_whole(many, 100).await.unwrap(), "{\"a\":1}");
        let empty = frames(&[]);
        assert_eq!(read_whole(empty, 100).await.unwrap(), "");
    }

    #[tokio::test]
    async fn a_body_over_the_limit_is_refused_whether_in_one_frame_or_several() {
        let announced = Full::new(Bytes::from_static(b"0123456789"));
        assert!(matches!(
            read_whole(announced, 9).await,
            Err(ReadError::TooLarge)
        ));
        assert_eq!(
            read_whole(Full::new(Bytes::from_static(b"0123456789")), 10)
                .await
                .unwrap()
                .len(),
            10
        );
        // Chunked: only the frames tell; the limit is on the sum.
        let streamed = frames(&["01234", "56789"]);
        assert!(matches!(
            read_whole(streamed, 9).await,
            Err(ReadError::TooLarge)
        ));
    }

    #[tokio::test]
    async fn a_broken_body_is_its_own_error() {
        let items: Vec<Result<Frame<Bytes>, std::io::Error>> = vec![
            Ok(Frame::data(Bytes::from_static(b"{"))),
            Err(std::io::Error::other("reset")),
        ];
        let body = StreamBody::new(futures_util::stream::iter(items));
        match read_whole(body, 100).await {
            Err(ReadError::Broken(e)) => assert_eq!(e.to_string(), "reset"),
            other => panic!("{other:?}"),
        }
        // Trailers are not data.
        let with_trailers = Full::new(Bytes::from_static(b"x"))
            .with_trailers(std::future::ready(Some(Ok(http::HeaderMap::new()))));
        assert_eq!(read_whole(with_trailers, 10).await.unwrap(), "x");
    }
}
