//! The HTTP/1.1 server connection over real loopback sockets, with raw
//! requests written and raw responses read, as a client sees them.

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use http_body_util::{combinators::BoxBody, BodyExt, Full, StreamBody};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;

type TestBody = BoxBody<Bytes, Infallible>;

impl HeadClock for TcpStream {
    fn head_ended(&mut self) {}
}

/// Answers every request with its method, path, body (read whole) and the
/// `x-n` field; `/stream` answers three SSE frames with no length, `/slow`
/// waits for `released` to be set, `/ignore` does not read the body.
fn answer(req: Request<RequestBody>, dropped: Arc<AtomicBool>) -> Responding<TestBody> {
    Box::pin(async move {
        let (parts, body) = req.into_parts();
        let path = parts.uri.path().to_owned();
        if path == "/stream" {
            let frames = ["a", "bb", "ccc"]
                .map(|s| Ok::<_, Infallible>(Frame::data(Bytes::from_static(s.as_bytes()))));
            let stream = futures_util::stream::iter(frames);
            return Ok(Response::new(StreamBody::new(stream).boxed()));
        }
        if path == "/slow" {
            struct Flag(Arc<AtomicBool>);
            impl Drop for Flag {
                fn drop(&mut self) {
                    self.0.store(true, Ordering::SeqCst);
                }
            }
            let _flag = Flag(dropped);
            tokio::time::sleep(Duration::from_secs(30)).await;
        }
        let got = if path == "/ignore" {
            Bytes::new()
        } else {
            body.collect()
                .await
                .map(|c| c.to_bytes())
                .unwrap_or_default()
        };
        let n = parts
            .headers
            .get("x-n")
            .map(|v| v.to_str().unwrap_or("").to_owned())
            .unwrap_or_default();
        let text = format!(
            "{} {} {} {}",
            parts.method,
            path,
            n,
            String::from_utf8_lossy(&got)
        );
        Ok(Response::new(Full::new(Bytes::from(text)).boxed()))
    })
}

struct Server {
    addr: std::net::SocketAddr,
    stop: CancellationToken,
    dropped: Arc<AtomicBool>,
}

async fn server() -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    let dropped = Arc::new(AtomicBool::new(false));
    let (s, d) = (stop.clone(), dropped.clone());
    tokio::spawn(async move {
        loop {
            let (io, _) = listener.accept().await.unwrap();
            let (s, d) = (s.clone(), d.clone());
            tokio::spawn(serve(io, s, move |req| answer(req, d.clone())));
        }
    });
    Server {
        addr,
        stop,
        dropped,
    }
}

/// Everything the server writes until it closes the connection.
async fn read_to_close(s: &mut TcpStream) -> String {
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out))
        .await
        .expect("the server closes the connection")
        .unwrap();
    String::from_utf8_lossy(&out).into_owned()
}

/// Reads until `want` responses' ends (`\r\n\r\n` plus body of
/// `content-length`) are in: enough for these tests' small answers.
async fn read_until(s: &mut TcpStream, marker: &str) -> String {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&out).contains(marker) {
        let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
            .await
            .expect("an answer")
            .unwrap();
        assert!(n > 0, "closed early: {:?}", String::from_utf8_lossy(&out));
        out.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test]
async fn requests_on_one_kept_alive_connection_are_answered_in_order_even_pipelined() {
    let srv = server().await;
    let mut s = TcpStream::connect(srv.addr).await.unwrap();
    s.write_all(b"POST /a HTTP/1.1\r\nhost: x\r\nx-n: 1\r\ncontent-length: 5\r\n\r\nhello")
        .await
        .unwrap();
    let first = read_until(&mut s, "hello").await;
    assert!(first.starts_with("HTTP/1.1 200 OK\r\n"), "{first:?}");
    assert!(first.contains("content-length: 15\r\n"), "{first:?}");
    assert!(first.contains("\r\ndate: "), "{first:?}");
    assert!(!first.contains("connection: close"), "{first:?}");
    assert!(first.ends_with("\r\n\r\nPOST /a 1 hello"), "{first:?}");
    // Two at once, in one write: both answered, in order.
    s.write_all(
        b"POST /b HTTP/1.1\r\nhost: x\r\nx-n: 2\r\ncontent-length: 3\r\n\r\ntwoGET /c HTTP/1.1\r\nhost: x\r\nx-n: 3\r\n\r\n",
    )
    .await
    .unwrap();
    let both = read_until(&mut s, "GET /c 3 ").await;
    let b = both.find("POST /b 2 two").expect("the first answer");
    assert!(b < both.find("GET /c 3 ").unwrap(), "{both:?}");
}

#[tokio::test]
async fn a_chunked_body_is_read_whole_and_100_continue_goes_out_when_the_body_is_read() {
    let srv = server().await;
    let mut s = TcpStream::connect(srv.addr).await.unwrap();
    s.write_all(
        b"POST /a HTTP/1.1\r\nhost: x\r\nexpect: 100-continue\r\ntransfer-encoding: chunked\r\n\r\n",
    )
    .await
    .unwrap();
    let interim = read_until(&mut s, "\r\n\r\n").await;
    assert_eq!(interim, "HTTP/1.1 100 Continue\r\n\r\n");
    s.write_all(b"3\r\nabc\r\n2;x=y\r\nde\r\n0\r\ntrailer: t\r\n\r\n")
        .await
        .unwrap();
    let answer = read_until(&mut s, "abcde").await;
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer:?}");
    assert!(answer.ends_with("POST /a  abcde"), "{answer:?}");
}

#[tokio::test]
async fn a_streamed_answer_is_chunked_and_close_delimited_for_http_1_0() {
    let srv = server().await;
    let mut s = TcpStream::connect(srv.addr).await.unwrap();
    s.write_all(b"GET /stream HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let answer = read_until(&mut s, "0\r\n\r\n").await;
    assert!(
        answer.contains("transfer-encoding: chunked\r\n"),
        "{answer:?}"
    );
    assert!(
        answer.ends_with("\r\n\r\n1\r\na\r\n2\r\nbb\r\n3\r\nccc\r\n0\r\n\r\n"),
        "{answer:?}"
    );

    let mut old = TcpStream::connect(srv.addr).await.unwrap();
    old.write_all(b"GET /stream HTTP/1.0\r\n\r\n")
        .await
        .unwrap();
    let answer = read_to_close(&mut old).await;
    assert!(answer.starts_with("HTTP/1.0 200 OK\r\n"), "{answer:?}");
    assert!(answer.contains("connection: close\r\n"), "{answer:?}");
    assert!(!answer.contains("transfer-encoding"), "{answer:?}");
    assert!(answer.ends_with("\r\n\r\nabbccc"), "{answer:?}");
}

#[tokio::test]
async fn http_1_0_keeps_the_connection_only_when_asked_and_head_answers_have_no_body() {
    let srv = server().await;
    let mut s = TcpStream::connect(srv.addr).await.unwrap();
    s.write_all(b"HEAD /h HTTP/1.0\r\nconnection: keep-alive\r\n\r\n")
        .await
        .unwrap();
    let answer = read_until(&mut s, "\r\n\r\n").await;
    assert!(answer.starts_with("HTTP/1.0 200 OK\r\n"), "{answer:?}");
    assert!(answer.contains("connection: keep-alive\r\n"), "{answer:?}");
    assert!(answer.contains("content-length: 9\r\n"), "{answer:?}");
    assert!(
        answer.ends_with("\r\n\r\n"),
        "no body after the head: {answer:?}"
    );
    s.write_all(b"GET /again HTTP/1.0\r\n\r\n").await.unwrap();
    let answer = read_to_close(&mut s).await;
    assert!(answer.contains("connection: close\r\n"), "{answer:?}");
    assert!(answer.ends_with("GET /again  "), "{answer:?}");
}

#[tokio::test]
async fn bad_heads_are_refused_with_400_or_431_and_the_connection_closed() {
    let srv = server().await;
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (
            b"NOT HTTP AT ALL\r\n\r\n".to_vec(),
            "HTTP/1.1 400 Bad Request\r\n",
        ),
        (
            b"POST /a HTTP/1.1\r\ncontent-length: 3\r\ncontent-length: 4\r\n\r\n".to_vec(),
            "HTTP/1.1 400 Bad Request\r\n",
        ),
        (
            b"POST /a HTTP/1.1\r\ncontent-length: x\r\n\r\n".to_vec(),
            "HTTP/1.1 400 Bad Request\r\n",
        ),
        (
            b"POST /a HTTP/1.1\r\ntransfer-encoding: gzip\r\n\r\n".to_vec(),
            "HTTP/1.1 400 Bad Request\r\n",
        ),
        (
            format!(
                "GET / HTTP/1.1\r\n{}\r\n",
                (0..=MAX_HEADERS)
                    .map(|i| format!("x-{i}: y\r\n"))
                    .collect::<String>()
            )
            .into_bytes(),
            "HTTP/1.1 431 Request Header Fields Too Large\r\n",
        ),
        (
            // Exactly the limit, never ending: all of it is read (so the
            // close is not a reset), and no more would be.
            {
                let start = "GET / HTTP/1.1\r\nx-big: ";
                format!("{start}{}", "y".repeat(MAX_HEAD - start.len())).into_bytes()
            },
            "HTTP/1.1 431 Request Header Fields Too Large\r\n",
        ),
    ];
    for (request, status) in cases {
        let mut s = TcpStream::connect(srv.addr).await.unwrap();
        let _ = s.write_all(&request).await;
        let answer = read_to_close(&mut s).await;
        assert!(answer.starts_with(status), "{answer:?}");
        assert!(answer.contains("connection: close\r\n"), "{answer:?}");
    }
}

#[tokio::test]
async fn a_client_closing_mid_request_drops_its_request() {
    let srv = server().await;
    let mut s = TcpStream::connect(srv.addr).await.unwrap();
    s.write_all(b"GET /slow HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!srv.dropped.load(Ordering::SeqCst));
    s.shutdown().await.unwrap();
    drop(s);
    for _ in 0..100 {
        if srv.dropped.load(Ordering::SeqCst) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the request in flight was not dropped when its client left");
}

#[tokio::test]
async fn an_unread_body_is_dropped_to_keep_the_connection_unless_too_long_or_too_slow() {
    let srv = server().await;
    // All of it here: dropped, and the connection kept.
    let mut s = TcpStream::connect(srv.addr).await.unwrap();
    s.write_all(b"POST /ignore HTTP/1.1\r\ncontent-length: 3\r\n\r\nabcGET /next HTTP/1.1\r\n\r\n")
        .await
        .unwrap();
    let both = read_until(&mut s, "GET /next").await;
    assert!(both.contains("POST /ignore  "), "{both:?}");
    // The rest still on its way (the head answered before the body came, as
    // a 401 is): waited for, dropped, and the connection serves the next
    // request.
    let mut s = TcpStream::connect(srv.addr).await.unwrap();
    s.write_all(b"POST /ignore HTTP/1.1\r\ncontent-length: 100\r\n\r\nabc")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    s.write_all(&[b'x'; 97]).await.unwrap();
    let first = read_until(&mut s, "POST /ignore  ").await;
    assert!(!first.contains("connection: close"), "{first:?}");
    s.write_all(b"GET /after HTTP/1.1\r\nx-n: 2\r\n\r\n")
        .await
        .unwrap();
    let second = read_until(&mut s, "GET /after 2 ").await;
    assert!(second.starts_with("HTTP/1.1 200 OK\r\n"), "{second:?}");
    // A rest that does not come: the answer says close after the wait, and
    // the connection ends.
    let mut s = TcpStream::connect(srv.addr).await.unwrap();
    s.write_all(b"POST /ignore HTTP/1.1\r\ncontent-length: 100\r\n\r\nabc")
        .await
        .unwrap();
    let answer = read_to_close(&mut s).await;
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer:?}");
    assert!(answer.contains("connection: close\r\n"), "{answer:?}");
    // Longer than is worth reading, or held back by a client that waits
    // for `100 Continue`: not waited for. The rest, sent soon after as for
    // the kept connection above, does not save the connection.
    for (head, rest) in [
        (
            &b"POST /ignore HTTP/1.1\r\ncontent-length: 65540\r\n\r\nabc"[..],
            65537,
        ),
        (
            &b"POST /ignore HTTP/1.1\r\nexpect: 100-continue\r\ncontent-length: 10\r\n\r\n"[..],
            10,
        ),
    ] {
        let mut s = TcpStream::connect(srv.addr).await.unwrap();
        s.write_all(head).await.unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        // The server may have closed already: the write may fail.
        let _ = s.write_all(&vec![b'x'; rest]).await;
        let answer = read_to_close(&mut s).await;
        assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer:?}");
        assert!(answer.contains("connection: close\r\n"), "{answer:?}");
        assert!(!answer.contains("100 Continue"), "{answer:?}");
    }
}

#[tokio::test]
async fn on_stop_an_idle_connection_closes_and_a_busy_one_after_its_answer() {
    let srv = server().await;
    let mut idle = TcpStream::connect(srv.addr).await.unwrap();
    idle.write_all(b"GET /a HTTP/1.1\r\n\r\n").await.unwrap();
    read_until(&mut idle, "GET /a").await;
    let mut busy = TcpStream::connect(srv.addr).await.unwrap();
    // Its body is still to come when the stop arrives.
    busy.write_all(b"POST /b HTTP/1.1\r\ncontent-length: 4\r\n\r\nab")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    srv.stop.cancel();
    assert_eq!(read_to_close(&mut idle).await, "");
    busy.write_all(b"cd").await.unwrap();
    let answer = read_to_close(&mut busy).await;
    assert!(answer.contains("connection: close\r\n"), "{answer:?}");
    assert!(answer.ends_with("POST /b  abcd"), "{answer:?}");
}

#[tokio::test]
async fn an_http_1_0_client_expecting_continue_gets_no_interim_answer() {
    let srv = server().await;
    let mut s = TcpStream::connect(srv.addr).await.unwrap();
    s.write_all(b"POST /a HTTP/1.0\r\nexpect: 100-continue\r\ncontent-length: 2\r\n\r\nhi")
        .await
        .unwrap();
    let answer = read_to_close(&mut s).await;
    assert!(answer.starts_with("HTTP/1.0 200 OK\r\n"), "{answer:?}");
    assert!(!answer.contains("100 Continue"), "{answer:?}");
    assert!(answer.ends_with("POST /a  hi"), "{answer:?}");
}

const HEAD: &[u8] = b"POST /mcp?x=1 HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n\
Mcp-Method: tools/call\r\nMCP-Protocol-Version: 2026-07-28\r\nX-Other: a b\r\n\
Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n";

#[test]
fn a_head_parses_the_same_however_much_of_it_has_arrived() {
    let len = HEAD.len() - b"3\r\nabc\r\n0\r\n\r\n".len();
    for cut in 0..len {
        let mut buf = BytesMut::from(&HEAD[..cut]);
        assert!(parse_head(&mut buf).unwrap().is_none(), "complete at {cut}");
        assert_eq!(buf.len(), cut, "nothing consumed at {cut}");
    }
    let mut buf = BytesMut::from(HEAD);
    let head = parse_head(&mut buf).unwrap().expect("a whole head");
    assert_eq!(
        &buf[..],
        b"3\r\nabc\r\n0\r\n\r\n",
        "the body stays in the buffer"
    );
    let req = &head.request;
    assert_eq!(req.method(), Method::POST);
    assert_eq!(req.uri().path(), "/mcp");
    assert_eq!(req.uri().query(), Some("x=1"));
    assert_eq!(req.headers()["mcp-method"], "tools/call");
    assert_eq!(req.headers()["MCP-Protocol-Version"], "2026-07-28");
    assert_eq!(req.headers()["x-other"], "a b");
    assert_eq!(req.headers().len(), 6);
    assert_eq!(head.body, Framing::Chunked(Chunk::Size));
    assert!(head.keep_alive);
}

proptest::proptest! {
    /// Whatever arrives, the parser answers (a head, not yet, or a status
    /// to refuse with) and never panics; what it does not take stays.
    #[test]
    fn arbitrary_bytes_never_panic_the_head_parser(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..512)) {
        let mut buf = BytesMut::from(&bytes[..]);
        match parse_head(&mut buf) {
            Ok(Some(_)) => proptest::prop_assert!(buf.len() < bytes.len()),
            Ok(None) => proptest::prop_assert_eq!(buf.len(), bytes.len()),
            Err(status) => proptest::prop_assert!(status.is_client_error()),
        }
    }

    /// A valid head with arbitrary field values and names of any case
    /// keeps every field, value for value.
    #[test]
    fn every_field_of_a_valid_head_is_kept(fields in proptest::collection::vec(("[A-Za-z][A-Za-z0-9-]{0,30}", "[ -~]{0,40}"), 0..20)) {
        let mut text = String::from("GET / HTTP/1.1\r\n");
        for (name, value) in &fields {
            text.push_str(&format!("{name}: {value}\r\n"));
        }
        text.push_str("\r\n");
        let mut buf = BytesMut::from(text.as_bytes());
        let head = match parse_head(&mut buf) {
            Ok(Some(head)) => head,
            // A generated Content-Length or Transfer-Encoding may be refused.
            Err(_) => return Ok(()),
            Ok(None) => panic!("a whole head read as partial: {text:?}"),
        };
        let got: Vec<(String, String)> = head
            .request
            .headers()
            .iter()
            .map(|(n, v)| (n.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
            .collect();
        let mut want: Vec<(String, String)> = fields
            .iter()
            .map(|(n, v)| (n.to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        // The map groups a name's values together, in arrival order.
        let mut sorted_got = got.clone();
        sorted_got.sort();
        want.sort();
        proptest::prop_assert_eq!(sorted_got, want);
    }
}
