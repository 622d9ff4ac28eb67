//! `ResponseStream`: the events of one upstream request, in arrival order,
//! bounded by the request's deadline. Dropping it early cancels the request.

use std::collections::VecDeque;

use tokio::time::Instant;

use crate::{http::SseBody, stdio::StdioRx, UpstreamError, UpstreamEvent};

pub(crate) type Item = Result<UpstreamEvent, UpstreamError>;

pub(crate) enum Inner {
    /// Already complete (a JSON body, or an error body).
    Ready(VecDeque<Item>),
    Sse(Box<SseBody>),
    Stdio(StdioRx),
}

impl Inner {
    /// `None` means the source ended without our response.
    async fn next(&mut self) -> Option<Item> {
        match self {
            Inner::Ready(q) => q.pop_front(),
            Inner::Sse(body) => body.next().await,
            Inner::Stdio(rx) => rx.next().await,
        }
    }

    pub(crate) fn ready(item: Item) -> Inner {
        Inner::Ready(VecDeque::from([item]))
    }
}

/// Runs once if the stream is dropped (or fails) before the upstream answered:
/// tells the upstream to stop (legacy HTTP, stdio).
pub(crate) type CancelGuard = Box<dyn FnOnce() + Send>;

pub struct ResponseStream {
    inner: Inner,
    deadline: Instant,
    finished: bool,
    guard: Option<CancelGuard>,
}

impl ResponseStream {
    pub(crate) fn new(inner: Inner, deadline: Instant, guard: Option<CancelGuard>) -> Self {
        ResponseStream {
            inner,
            deadline,
            finished: false,
            guard,
        }
    }

    /// Next event. Notifications come first, in order; the stream ends after a
    /// `Result`, an `Error` or an `Err`. Progress does not extend the deadline.
    pub async fn next(&mut self) -> Option<Result<UpstreamEvent, UpstreamError>> {
        if self.finished {
            return None;
        }
        let item = match tokio::time::timeout_at(self.deadline, self.inner.next()).await {
            Ok(Some(item)) => item,
            Ok(None) => Err(UpstreamError::Protocol(
                "upstream stream ended before the response".to_owned(),
            )),
            Err(_) => Err(UpstreamError::Timeout),
        };
        match &item {
            Ok(UpstreamEvent::Notification(_)) => {}
            Ok(_) => self.finish(false),
            Err(_) => self.finish(true),
        }
        Some(item)
    }

    fn finish(&mut self, cancel: bool) {
        self.finished = true;
        // Release the connection / routing entry now, not when the caller drops us.
        self.inner = Inner::Ready(VecDeque::new());
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
