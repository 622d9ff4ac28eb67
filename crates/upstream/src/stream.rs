//! `ResponseStream`: the events of one upstream request, in arrival order,
//! bounded by the request's deadline. Dropping it early cancels the request.
//!
//! A handshake-era upstream may ask its client something in the middle of a
//! call (`elicitation/create`, `sampling/createMessage`, `roots/list`).
//! `next_bridged` hands such requests to the caller, who answers them with
//! `reply` on the same session or channel while the stream stays open; `next`
//! refuses them on the caller's behalf (Junction offers nothing it cannot relay).
//!
//! This module also defines what a transport hands a `ResponseStream`: an
//! `EventSource` (the events still to come), a `Reply` (where answers to
//! server requests go) and a `Strays` channel with its `Roster`. The HTTP and
//! stdio transports implement them; this module knows neither, so the
//! transports depend on it and never the other way round.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use junction_protocol::codes;
use junction_protocol::jsonrpc::{self, Id, RpcError};
use serde_json::value::RawValue;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::{UpstreamError, UpstreamEvent};

/// A request a handshake-era upstream sent to its client during a call.
#[derive(Debug)]
pub struct ServerRequest {
    /// The upstream's own id; `reply` echoes it.
    pub id: Id,
    pub method: String,
    pub params: Option<Box<RawValue>>,
}

/// One item of a bridged read: an ordinary event, or a server request to answer.
#[derive(Debug)]
pub enum Bridged {
    Event(UpstreamEvent),
    ServerRequest(ServerRequest),
}

pub(crate) type Item = Result<Bridged, UpstreamError>;

/// Methods a legacy upstream may ask its client for, which a caller may bridge.
pub(crate) fn is_bridgeable(method: &str) -> bool {
    matches!(
        method,
        "elicitation/create" | "sampling/createMessage" | "roots/list"
    )
}

/// The events of one request that are yet to arrive (an SSE body, a stdio
/// call's channels). Poll-based, so reading one costs no future of its own.
pub(crate) trait EventSource: Send {
    /// `Ready(None)`: the source ended (without our response, if none came).
    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Item>>;

    /// The response arrived: release what the request holds without calling
    /// it off. Dropping a source unsettled abandons its request.
    fn settle(self: Box<Self>) {}
}

/// Where answers to server requests go (a legacy HTTP session, a child's
/// stdin). Boxing the future is fine: replies are rare.
pub(crate) trait Reply: Send + Sync {
    fn reply(&self, message: Vec<u8>, deadline: Instant) -> ReplyFuture<'_>;
}

pub(crate) type ReplyFuture<'a> =
    Pin<Box<dyn Future<Output = Result<(), UpstreamError>> + Send + 'a>>;

/// The calls that take server requests naming no call: `leave` takes
/// `key`'s call off when its stream goes.
pub(crate) trait Roster: Send + Sync {
    fn leave(&self, key: u64);

    /// Hands `r` to the one call that can take it, or gives it back.
    fn hand(&self, r: ServerRequest) -> Result<(), ServerRequest>;
}

/// One call's share of the server requests that arrived naming no call (a
/// session's GET stream); dropping it leaves the roster.
pub(crate) struct Strays {
    rx: mpsc::Receiver<ServerRequest>,
    key: u64,
    roster: Arc<dyn Roster>,
}

impl Strays {
    pub(crate) fn new(
        rx: mpsc::Receiver<ServerRequest>,
        key: u64,
        roster: Arc<dyn Roster>,
    ) -> Strays {
        Strays { rx, key, roster }
    }
}

impl Drop for Strays {
    fn drop(&mut self) {
        self.roster.leave(self.key);
    }
}

pub(crate) enum Inner {
    /// Already complete (a JSON body, or an error body).
    Ready(VecDeque<Item>),
    Source(Box<dyn EventSource>),
}

impl Inner {
    /// `Ready(None)` means the source ended without our response.
    pub(crate) fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Item>> {
        match self {
            Inner::Ready(q) => Poll::Ready(q.pop_front()),
            Inner::Source(source) => source.poll_next(cx),
        }
    }

    pub(crate) fn ready(item: Result<UpstreamEvent, UpstreamError>) -> Inner {
        Inner::Ready(VecDeque::from([item.map(Bridged::Event)]))
    }
}

/// Runs once if the stream is dropped (or fails) before the upstream answered:
/// tells the upstream to stop (legacy HTTP).
pub(crate) type CancelGuard = Box<dyn FnOnce() + Send>;

pub struct ResponseStream {
    inner: Inner,
    deadline: Instant,
    /// The request's whole budget; a reply starts it again, since the time the
    /// client took to answer is not the upstream's.
    budget: Duration,
    finished: bool,
    guard: Option<CancelGuard>,
    replier: Option<Arc<dyn Reply>>,
    strays: Option<Strays>,
    /// Where this stream's server requests go when read with `next` (a
    /// session's GET stream: they name no call).
    roster: Option<Arc<dyn Roster>>,
}

impl ResponseStream {
    pub(crate) fn new(inner: Inner, deadline: Instant, guard: Option<CancelGuard>) -> Self {
        ResponseStream {
            inner,
            deadline,
            budget: deadline.saturating_duration_since(Instant::now()),
            finished: false,
            guard,
            replier: None,
            strays: None,
            roster: None,
        }
    }

    /// `next` hands this stream's server requests to the one call of `roster`
    /// in flight instead of refusing them.
    pub(crate) fn with_roster(mut self, roster: Arc<dyn Roster>) -> Self {
        self.roster = Some(roster);
        self
    }

    pub(crate) fn with_strays(mut self, strays: Strays) -> Self {
        self.strays = Some(strays);
        self
    }

    pub(crate) fn with_replier(mut self, replier: Arc<dyn Reply>) -> Self {
        self.replier = Some(replier);
        self
    }

    /// Next event. Notifications come first, in order; the stream ends after a
    /// `Result`, an `Error` or an `Err`. Progress does not extend the deadline.
    /// Server requests are refused here (`-32601`), or handed to a call of
    /// the stream's roster (`with_roster`); read with `next_bridged` to answer
    /// them yourself.
    pub async fn next(&mut self) -> Option<Result<UpstreamEvent, UpstreamError>> {
        loop {
            match self.next_bridged().await? {
                Ok(Bridged::Event(e)) => return Some(Ok(e)),
                Err(e) => return Some(Err(e)),
                Ok(Bridged::ServerRequest(r)) => {
                    let (r, why) = match &self.roster {
                        Some(roster) => match roster.hand(r) {
                            Ok(()) => continue,
                            Err(r) => {
                                let why = format!("junction cannot tell which call {} belongs to: send it related to its request", r.method);
                                (r, why)
                            }
                        },
                        None => {
                            let why = format!("junction does not offer {} to upstreams", r.method);
                            (r, why)
                        }
                    };
                    let err = RpcError::new(codes::METHOD_NOT_FOUND, why);
                    if let Err(e) = self.reply(&r.id, Err(err)).await {
                        tracing::debug!(error = %e, "refusing a server request failed");
                    }
                }
            }
        }
    }

    /// Like `next`, but a handshake-era upstream's `elicitation/create`,
    /// `sampling/createMessage` or `roots/list` comes out as a `ServerRequest`
    /// that the caller must answer with `reply`; the stream stays open for
    /// the final result. (`ping` is always answered here.)
    pub async fn next_bridged(&mut self) -> Option<Item> {
        if self.finished {
            return None;
        }
        let inner = &mut self.inner;
        let mut strays = self.strays.as_mut();
        // Our own events first; a stray only while none is ready.
        let next = std::future::poll_fn(|cx| {
            if let Poll::Ready(item) = inner.poll_next(cx) {
                return Poll::Ready(item);
            }
            match strays.as_mut().map(|s| s.rx.poll_recv(cx)) {
                Some(Poll::Ready(Some(r))) => Poll::Ready(Some(Ok(Bridged::ServerRequest(r)))),
                _ => Poll::Pending,
            }
        });
        let item = match tokio::time::timeout_at(self.deadline, next).await {
            Ok(Some(item)) => item,
            Ok(None) => Err(UpstreamError::Protocol(
                "upstream stream ended before the response".to_owned(),
            )),
            Err(_) => Err(UpstreamError::Timeout),
        };
        match &item {
            Ok(Bridged::Event(UpstreamEvent::Notification(_))) | Ok(Bridged::ServerRequest(_)) => {}
            Ok(_) => self.finish(false),
            Err(_) => self.finish(true),
        }
        Some(item)
    }

    /// Answer a `ServerRequest` of this stream: a POST of the JSON-RPC response
    /// on the upstream's session (HTTP) or a line on its stdin (stdio). Restarts
    /// the request's deadline.
    pub async fn reply(
        &mut self,
        id: &Id,
        outcome: Result<Box<RawValue>, RpcError>,
    ) -> Result<(), UpstreamError> {
        let bytes = match &outcome {
            Ok(result) => jsonrpc::result_bytes(id, result),
            Err(err) => jsonrpc::error_bytes(Some(id), err),
        };
        self.deadline = self.deadline.max(Instant::now() + self.budget);
        match &self.replier {
            None => Err(UpstreamError::Protocol(
                "this stream takes no replies".to_owned(),
            )),
            Some(r) => r.reply(bytes, self.deadline).await,
        }
    }

    fn finish(&mut self, cancel: bool) {
        self.finished = true;
        // Release the connection / routing entry now, not when the caller drops us.
        let inner = std::mem::replace(&mut self.inner, Inner::Ready(VecDeque::new()));
        if let (Inner::Source(source), false) = (inner, cancel) {
            source.settle();
        }
        self.replier = None;
        self.strays = None;
        if let Some(guard) = self.guard.take() {
            if cancel {
                guard();
            }
        }
    }
}

impl Drop for ResponseStream {
    fn drop(&mut self) {
        if let Some(guard) = self.guard.take() {
            guard();
        }
    }
}

impl std::fmt::Debug for ResponseStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseStream")
            .field("finished", &self.finished)
            .finish_non_exhaustive()
    }
}
