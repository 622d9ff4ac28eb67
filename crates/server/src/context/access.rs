//! The access log's line of one request (`junction_telemetry::AccessLog`):
//! route, method, upstream and target once routed, HTTP status, outcome, the
//! JSON-RPC code when Junction refused the request, duration, the principal's
//! subject and the client's address (`client_ip`: behind trusted proxies, the
//! caller they name). Never arguments, results or tokens. A streamed answer's
//! line is written when the stream ends ([`LoggedStream`]), so its duration
//! is the whole exchange.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use hyper::body::{Body as _, Frame, SizeHint};

use crate::response::Body;
use crate::state::RouteState;

pub struct AccessLine<R: std::ops::Deref<Target = RouteState>> {
    pub route: R,
    pub method: &'static str,
    pub routed: Option<super::Routed>,
    pub status: u16,
    pub error: Option<i64>,
    /// The authenticated caller: its subject is written.
    pub principal: Option<junction_policy::Principal>,
    pub client: Option<std::net::IpAddr>,
    pub started: Instant,
}

impl<R: std::ops::Deref<Target = RouteState>> AccessLine<R> {
    pub fn with_route<S: std::ops::Deref<Target = RouteState>>(self, route: S) -> AccessLine<S> {
        AccessLine {
            route,
            method: self.method,
            routed: self.routed,
            status: self.status,
            error: self.error,
            principal: self.principal,
            client: self.client,
            started: self.started,
        }
    }

    pub fn write(&self, outcome: &str) {
        let Some(log) = junction_telemetry::access_log() else {
            return;
        };
        log.write(&junction_telemetry::AccessRecord {
            route: &self.route.path,
            method: self.method,
            upstream: self.routed.as_ref().map(|r| r.names().0),
            target: self.routed.as_ref().map(|r| r.names().1),
            status: self.status,
            outcome,
            error: self.error,
            duration_us: self.started.elapsed().as_micros() as u64,
            principal: self.principal.as_ref().map(|p| p.subject.as_str()),
            client: self.client,
        });
    }
}

/// A streamed answer (SSE) whose access line is written when the stream is
/// done: outcome `ok` once it reached its end, `aborted` when it was dropped
/// before (the client went away, or the connection was cut).
pub struct LoggedStream {
    pub body: Body,
    pub line: AccessLine<std::sync::Arc<RouteState>>,
    pub ended: bool,
}

impl hyper::body::Body for LoggedStream {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        if let Poll::Ready(None) = polled {
            self.ended = true;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl Drop for LoggedStream {
    fn drop(&mut self) {
        let ended = self.ended || self.body.is_end_stream();
        self.line.write(if ended { "ok" } else { "aborted" });
    }
}
