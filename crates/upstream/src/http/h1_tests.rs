//! The HTTP/1.1 client connection: answer heads, body framing, request
//! encoding, and whole exchanges over loopback with answers cut anywhere.

use super::*;
use crate::framing::{Next, READ_SIZE};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

fn head(text: &str) -> Result<Option<Head>, Failure> {
    parse_head(&mut BytesMut::from(text.as_bytes()))
}

fn whole(text: &str) -> Head {
    match head(text) {
        Ok(Some(h)) => h,
        Ok(None) => panic!("incomplete: {text:?}"),
        Err(e) => panic!("refused: {e}: {text:?}"),
    }
}

fn refused(text: &str) -> String {
    match head(text) {
        Err(e) => e.to_string(),
        Ok(Some(_)) => panic!("accepted: {text:?}"),
        Ok(None) => panic!("incomplete: {text:?}"),
    }
}

#[test]
fn a_head_says_status_fields_framing_and_reuse() {
    let h = whole("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 12\r\nMcp-Session-Id: abc\r\n\r\n");
    assert_eq!(h.status, StatusCode::OK);
    // Names are kept in lower case, values as sent, every field in order.
    let field = |n: &'static str| HeaderName::from_static(n);
    assert_eq!(
        h.headers.get(&field("content-type")).unwrap(),
        "application/json"
    );
    assert_eq!(h.headers.get(&field("mcp-session-id")).unwrap(), "abc");
    let names: Vec<_> = h.headers.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["content-type", "content-length", "mcp-session-id"]);
    assert_eq!(h.body, Framing::Length(12));
    assert!(h.keep_alive);

    let chunked = whole("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n");
    assert_eq!(chunked.body, Framing::Chunked(Chunk::Size));
    assert!(chunked.keep_alive);

    // Transfer-Encoding wins over Content-Length; the connection is not
    // trusted with another request after such an answer.
    let both = whole("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n");
    assert_eq!(both.body, Framing::Chunked(Chunk::Size));
    assert!(!both.keep_alive);

    // A coding that is not chunked last, or no length at all: until close.
    for text in [
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n",
    ] {
        let h = whole(text);
        assert_eq!(h.body, Framing::Close, "{text:?}");
        assert!(!h.keep_alive, "{text:?}");
    }

    // Nothing to read after a 204 or 304, whatever the fields say.
    let none = whole("HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n");
    assert_eq!(none.body, Framing::Done);

    let close = whole(
        "HTTP/1.1 202 Accepted\r\nConnection: keep-alive, Close\r\nContent-Length: 0\r\n\r\n",
    );
    assert!(!close.keep_alive);
    // HTTP/1.0 connections are not reused.
    assert!(!whole("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n").keep_alive);

    // Equal repeated lengths are one length.
    let twice = whole("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n");
    assert_eq!(twice.body, Framing::Length(3));
}

#[test]
fn informational_answers_are_skipped_and_the_rest_stays_in_the_buffer() {
    let mut buf = BytesMut::from(
        &b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"[..],
    );
    let h = parse_head(&mut buf).ok().flatten().unwrap();
    assert_eq!(h.status, StatusCode::OK);
    assert_eq!(&buf[..], b"ok");
}

#[test]
fn a_head_cut_anywhere_is_incomplete_not_wrong() {
    let text = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n";
    for cut in 1..text.len() {
        assert!(
            matches!(head(&text[..cut]), Ok(None)),
            "cut at {cut}: {:?}",
            &text[..cut]
        );
    }
}

#[test]
fn bad_heads_are_refused_with_what_is_wrong() {
    assert!(
        refused("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n")
            .contains("two different Content-Lengths")
    );
    for bad in ["-1", "1e3", "", "0x10", "99999999999999999999999"] {
        let text = format!("HTTP/1.1 200 OK\r\nContent-Length: {bad}\r\n\r\n");
        assert!(refused(&text).contains("invalid Content-Length"), "{bad:?}");
    }
    assert!(
        refused("HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n")
            .contains("switched protocols")
    );
    assert!(refused("SMTP ready\r\n\r\n").contains("invalid answer head"));
    let many: String = (0..=MAX_HEADERS).map(|i| format!("x-{i}: y\r\n")).collect();
    assert!(refused(&format!("HTTP/1.1 200 OK\r\n{many}\r\n")).contains("invalid answer head"));
}

/// Decodes `body` as a chunked body fed to the decoder `step` bytes at a time.
fn dechunk(body: &[u8], step: usize) -> Result<(Vec<u8>, usize), io::Error> {
    let mut buf = BytesMut::new();
    let mut fed = 0;
    let mut framing = Framing::Chunked(Chunk::Size);
    let mut out = Vec::new();
    loop {
        match crate::framing::next(&mut buf, &mut framing)? {
            Next::Data(d) => out.extend_from_slice(&d),
            Next::End => return Ok((out, buf.len())),
            Next::More(_) => {
                if fed == body.len() {
                    return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "fed all"));
                }
                let next = (fed + step).min(body.len());
                buf.extend_from_slice(&body[fed..next]);
                fed = next;
            }
        }
    }
}

#[test]
fn chunked_bodies_decode_however_they_arrive() {
    let body = b"5\r\nhello\r\n1;ext=\"x\"\r\n \r\n10\r\n0123456789abcdef\r\n0\r\nx-trailer: yes\r\n\r\nNEXT";
    for step in 1..body.len() {
        let (data, left) = dechunk(body, step).unwrap_or_else(|e| panic!("step {step}: {e}"));
        assert_eq!(data, b"hello 0123456789abcdef", "step {step}");
        // What follows the body is not the body's.
        assert!(left <= 4, "step {step}");
    }
    let (data, left) = dechunk(b"0\r\n\r\n", 100).unwrap();
    assert!(data.is_empty());
    assert_eq!(left, 0);
}

#[test]
fn broken_chunked_bodies_are_errors() {
    for bad in [
        &b"z\r\nhello\r\n0\r\n\r\n"[..],
        b"5\r\nhelloXX0\r\n\r\n",
        b"ffffffffffffffffffff\r\n",
    ] {
        let e = dechunk(bad, 3).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{bad:?}");
    }
    let endless = vec![b'a'; MAX_HEAD + 10];
    let mut trailers = b"0\r\n".to_vec();
    trailers.extend_from_slice(&endless);
    assert_eq!(
        dechunk(&trailers, 4096).unwrap_err().to_string(),
        "trailer section too long"
    );
}

proptest::proptest! {
    /// Whatever an upstream sends, reading a head or a chunked body returns
    /// an answer or an error, never a panic.
    #[test]
    fn any_bytes_are_an_answer_or_an_error(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400)) {
        let _ = parse_head(&mut BytesMut::from(&bytes[..]));
        let mut framed = b"HTTP/1.1 200 OK\r\n".to_vec();
        framed.extend_from_slice(&bytes);
        let _ = parse_head(&mut BytesMut::from(&framed[..]));
        let _ = dechunk(&bytes, 5);
    }

    /// Any data, chunked any way and fed in pieces of any size, comes back
    /// as it was sent.
    #[test]
    fn chunked_data_comes_back_whole(
        chunks in proptest::collection::vec(proptest::collection::vec(proptest::prelude::any::<u8>(), 1..40), 0..6),
        step in 1usize..32,
    ) {
        let mut body = Vec::new();
        for c in &chunks {
            body.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
            body.extend_from_slice(c);
            body.extend_from_slice(b"\r\n");
        }
        body.extend_from_slice(b"0\r\n\r\n");
        let (data, left) = dechunk(&body, step).map_err(|e| proptest::test_runner::TestCaseError::fail(e.to_string()))?;
        proptest::prop_assert_eq!(data, chunks.concat());
        proptest::prop_assert_eq!(left, 0);
    }
}

#[test]
fn fields_insert_replaces_every_value_of_a_name_and_append_adds_one() {
    let name = |n: &'static str| HeaderName::from_static(n);
    let value = HeaderValue::from_static;
    let mut f = Fields::default();
    f.append(name("a"), value("1"));
    f.append(name("b"), value("x"));
    f.append(name("a"), value("2"));
    assert!(f.contains(&name("a")) && !f.contains(&name("c")));
    f.insert(name("a"), value("3"));
    let all: Vec<_> = f
        .iter()
        .map(|(n, v)| (n.as_str(), v.to_str().unwrap()))
        .collect();
    assert_eq!(all, [("a", "3"), ("b", "x")]);
    f.insert(name("c"), value("y"));
    let map = f.to_map();
    assert_eq!(map.len(), 3);
    assert_eq!(map["a"], "3");
    assert_eq!(map["c"], "y");
    let back: Vec<_> = Fields::from_map(&map)
        .iter()
        .map(|(n, v)| (n.as_str().to_owned(), v.to_str().unwrap().to_owned()))
        .collect();
    assert_eq!(back.len(), 3);
    assert!(back.contains(&("a".into(), "3".into())) && back.contains(&("c".into(), "y".into())));
}

#[test]
fn a_request_head_carries_host_the_fields_and_the_length_only_once() {
    let field = |n: &'static str| HeaderName::from_static(n);
    let mut headers = Fields::default();
    headers.insert(
        field("content-type"),
        HeaderValue::from_static("application/json"),
    );
    headers.insert(field("content-length"), HeaderValue::from_static("999"));
    headers.insert(field("connection"), HeaderValue::from_static("close"));
    headers.insert(field("host"), HeaderValue::from_static("elsewhere"));
    headers.append(field("x-many"), HeaderValue::from_static("1"));
    headers.append(field("x-many"), HeaderValue::from_static("2"));
    let host = HeaderValue::from_static("127.0.0.1:9");
    let body = Bytes::from_static(b"{}");
    let out = encode(&Method::POST, "/mcp?a=1", &host, &headers, &body, true);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "POST /mcp?a=1 HTTP/1.1\r\nhost: 127.0.0.1:9\r\ncontent-type: application/json\r\nx-many: 1\r\nx-many: 2\r\ncontent-length: 2\r\n\r\n{}"
    );
    // A GET without a body says no length; a large body is not copied in.
    let get = encode(
        &Method::GET,
        "/",
        &host,
        &Fields::default(),
        &Bytes::new(),
        true,
    );
    assert_eq!(get, b"GET / HTTP/1.1\r\nhost: 127.0.0.1:9\r\n\r\n");
    let big = Bytes::from(vec![b'x'; 123_456]);
    let out = encode(&Method::POST, "/", &host, &Fields::default(), &big, false);
    assert!(out.ends_with(b"content-length: 123456\r\n\r\n"));
}

/// Serves one connection: reads one request (head and `Content-Length`
/// body), then writes `answer` in pieces of `step` bytes. Returns the URL's
/// address and the request it read.
async fn serve_once(
    answer: Vec<u8>,
    step: usize,
) -> (std::net::SocketAddr, tokio::task::JoinHandle<Vec<u8>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let (mut tcp, _) = listener.accept().await.unwrap();
        let mut seen = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            let n = tcp.read(&mut chunk).await.unwrap();
            assert!(n > 0, "the client closed before its request's end");
            seen.extend_from_slice(&chunk[..n]);
            let text = String::from_utf8_lossy(&seen).to_string();
            if let Some(end) = text.find("\r\n\r\n") {
                let length = text[..end]
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length: "))
                    .map_or(0, |v| v.parse::<usize>().unwrap());
                if seen.len() >= end + 4 + length {
                    break;
                }
            }
        }
        for piece in answer.chunks(step) {
            tcp.write_all(piece).await.unwrap();
            tcp.flush().await.unwrap();
            tokio::task::yield_now().await;
        }
        seen
    });
    (addr, task)
}

/// `n` bytes of the alphabet over and over: a body whose every part differs
/// from its neighbours.
fn letters(n: u32) -> Vec<u8> {
    (0..n).map(|i| b'a' + (i % 26) as u8).collect()
}

/// A connection to `addr` that has sent one POST of `body` to `/mcp`.
async fn sent(addr: std::net::SocketAddr, body: Bytes) -> Conn {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let mut conn = Conn::new(Stream::Plain(tcp));
    let host = HeaderValue::from_str(&addr.to_string()).unwrap();
    conn.send(&Method::POST, "/mcp", &host, &Fields::default(), &body)
        .await
        .unwrap();
    conn
}

/// One exchange: the answer's head and its body as read to the end.
async fn exchange(addr: std::net::SocketAddr, body: Bytes) -> (Head, Vec<u8>, Conn) {
    let mut conn = sent(addr, body).await;
    let mut head = conn.read_head().await.unwrap();
    let mut data = Vec::new();
    while let Some(d) = std::future::poll_fn(|cx| conn.poll_data(cx, &mut head.body)).await {
        data.extend_from_slice(&d.unwrap());
    }
    assert_eq!(head.body, Framing::Done);
    (head, data, conn)
}

#[tokio::test]
async fn whole_exchanges_read_every_framing_in_any_pieces() {
    let answers: [(&str, &[u8]); 3] = [
        ("length", b"HTTP/1.1 200 OK\r\ncontent-length: 11\r\n\r\nhello world"),
        (
            "chunked",
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n6\r\nhello \r\n5\r\nworld\r\n0\r\n\r\n",
        ),
        ("close", b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nhello world"),
    ];
    for (name, answer) in answers {
        for step in [1, 7, answer.len()] {
            let (addr, served) = serve_once(answer.to_vec(), step).await;
            let (head, data, _) = exchange(addr, Bytes::from_static(b"{\"id\":1}")).await;
            assert_eq!(data, b"hello world", "{name}, step {step}");
            assert_eq!(head.keep_alive, name != "close", "{name}");
            let seen = String::from_utf8(served.await.unwrap()).unwrap();
            assert!(
                seen.starts_with("POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:")
                    && seen.ends_with("content-length: 8\r\n\r\n{\"id\":1}"),
                "{seen:?}"
            );
        }
    }
}

#[tokio::test]
async fn a_large_answer_body_is_read_over_many_reads_and_a_huge_head_is_refused() {
    let body = letters(300_000);
    let mut answer =
        format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", body.len()).into_bytes();
    answer.extend_from_slice(&body);
    let (addr, _served) = serve_once(answer, 65_536).await;
    let (head, data, mut conn) = exchange(addr, Bytes::new()).await;
    assert!(head.keep_alive);
    assert_eq!(data, body);
    // Read in large pieces, and the large buffer not kept once idle.
    assert!(conn.poll_idle(&mut Context::from_waker(std::task::Waker::noop())));
    assert!(
        conn.buf.capacity() <= 2 * READ_SIZE,
        "{}",
        conn.buf.capacity()
    );

    // A head that never ends is cut off at MAX_HEAD, not read for ever.
    let mut endless = b"HTTP/1.1 200 OK\r\nx-filler: ".to_vec();
    endless.resize(MAX_HEAD + 1024, b'y');
    let (addr, _served) = serve_once(endless, 4096).await;
    let mut conn = sent(addr, Bytes::new()).await;
    match conn.read_head().await {
        Err(e @ Failure::Invalid(_)) => assert!(e.to_string().contains("larger than"), "{e}"),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("a head over the limit was taken"),
    }
}

#[tokio::test]
async fn a_large_request_body_arrives_whole() {
    let (addr, served) = serve_once(
        b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n".to_vec(),
        1000,
    )
    .await;
    let big = letters(200_000);
    let (head, data, _) = exchange(addr, Bytes::from(big.clone())).await;
    assert_eq!(head.status, StatusCode::OK);
    assert!(data.is_empty());
    let seen = served.await.unwrap();
    assert!(seen.ends_with(&big));
}

#[tokio::test]
async fn a_body_cut_short_is_an_error_and_an_idle_close_is_seen() {
    let (addr, _served) = serve_once(
        b"HTTP/1.1 200 OK\r\ncontent-length: 20\r\n\r\nonly ten b".to_vec(),
        100,
    )
    .await;
    let mut conn = sent(addr, Bytes::new()).await;
    let mut head = conn.read_head().await.unwrap();
    let mut got = Vec::new();
    let err = loop {
        match std::future::poll_fn(|cx| conn.poll_data(cx, &mut head.body)).await {
            Some(Ok(d)) => got.extend_from_slice(&d),
            Some(Err(e)) => break e,
            None => panic!("a short body ended cleanly"),
        }
    };
    assert_eq!(got, b"only ten b");
    assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);

    // A kept-alive connection the upstream then closes is not idle-usable.
    let (addr, served) = serve_once(
        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok".to_vec(),
        100,
    )
    .await;
    let (_, _, mut conn) = exchange(addr, Bytes::new()).await;
    let waker = std::task::Waker::noop();
    assert!(
        conn.poll_idle(&mut Context::from_waker(waker)),
        "open and quiet"
    );
    served.await.unwrap();
    // The server's socket is dropped with its task: the close arrives.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while conn.poll_idle(&mut Context::from_waker(waker)) {
        assert!(std::time::Instant::now() < deadline, "close never seen");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn an_answer_that_never_comes_is_a_broken_connection() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut tcp, _) = listener.accept().await.unwrap();
        let mut buf = [0u8; 1024];
        let _ = tcp.read(&mut buf).await;
        // Half a head, then gone.
        let _ = tcp.write_all(b"HTTP/1.1 200 OK\r\ncontent-").await;
    });
    let mut conn = sent(addr, Bytes::new()).await;
    match conn.read_head().await {
        Err(Failure::Broken(e)) => assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("half a head was taken for a head"),
    }
}
