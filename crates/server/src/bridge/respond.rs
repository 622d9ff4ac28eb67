//! Writing a driven call to the client: plain JSON until something must be
//! streamed, then SSE.

use std::future::Future;

use bytes::Bytes;
use http::{Response, StatusCode};
use junction_protocol::jsonrpc::error_bytes;
use tokio::sync::mpsc;

use super::{Driver, Next};
use crate::cancel::Cancel;
use crate::error::GatewayError;
use crate::record::Answer;
use crate::response::{self, Body};

/// Streams or returns what the driver produces. Output starts as plain JSON;
/// the first relayed notification (or a question for a handshake-era client)
/// switches it to SSE. `record` gets the outcome label once, with the final
/// message or error (armed: a response or stream dropped before the end
/// counts as `cancelled`).
///
/// A function returning an `async` block, not an `async fn`: an `async fn`
/// keeps its arguments twice in its state (the driver is ~0.5 KiB), and this
/// future is part of every call's.
pub fn respond(
    mut d: Driver,
    open: prometheus::IntGauge,
    record: crate::record::Record,
) -> impl Future<Output = Result<Response<Body>, GatewayError>> + Send {
    let cancel = d.cancel.take();
    async move {
        let first = loop {
            let Some(next) = step(&mut d, None, cancel.as_deref()).await else {
                // Cancelled before anything was sent: the response ends empty
                // (an SSE stream with no message), never with a result.
                record.record("cancelled");
                let (_, rx) = mpsc::channel::<Bytes>(1);
                return Ok(response::sse(rx));
            };
            match next {
                Next::Done(Ok((bytes, outcome))) => {
                    record.record_answer(outcome, Answer::Message(&bytes));
                    return Ok(response::json(StatusCode::OK, bytes));
                }
                Next::Done(Err(e)) => {
                    record.record_answer(e.outcome(), Answer::Failed(&e));
                    return Err(e);
                }
                Next::Notify(n) if !d.sse_ok => drop(n),
                other => break other,
            }
        };
        let (tx, rx) = mpsc::channel::<Bytes>(32);
        if let Next::Notify(n) = first {
            let _ = tx.send(response::sse_event(n.get().as_bytes())).await;
        }
        open.inc();
        tokio::spawn(async move {
            struct Open(prometheus::IntGauge);
            impl Drop for Open {
                fn drop(&mut self) {
                    self.0.dec();
                }
            }
            let _open = Open(open);
            loop {
                let Some(next) = step(&mut d, Some(&tx), cancel.as_deref()).await else {
                    record.record("cancelled");
                    return; // dropping the driver cancels upstream; the stream ends
                };
                let bytes = match next {
                    Next::Notify(n) => {
                        if tx
                            .send(response::sse_event(n.get().as_bytes()))
                            .await
                            .is_err()
                        {
                            // Client went away: dropping the driver cancels
                            // upstream, dropping `record` counts it cancelled.
                            return;
                        }
                        continue;
                    }
                    Next::Switch => {
                        let e = GatewayError::Unsupported("bridge asked to switch twice".into());
                        record.record_answer(e.outcome(), Answer::Failed(&e));
                        error_bytes(Some(&d.id), &e.render().1)
                    }
                    Next::Done(Ok((bytes, outcome))) => {
                        record.record_answer(outcome, Answer::Message(&bytes));
                        bytes
                    }
                    Next::Done(Err(e)) => {
                        record.record_answer(e.outcome(), Answer::Failed(&e));
                        error_bytes(Some(&d.id), &e.render().1)
                    }
                };
                let _ = tx.send(response::sse_event(&bytes)).await;
                return;
            }
        });
        Ok(response::sse(rx))
    }
}

/// The driver's next step, or `None` once the client cancelled the call.
async fn step(
    d: &mut Driver,
    sink: Option<&mpsc::Sender<Bytes>>,
    cancel: Option<&Cancel>,
) -> Option<Next> {
    match cancel {
        None => Some(d.step(sink).await),
        Some(c) => tokio::select! {
            next = d.step(sink) => Some(next),
            () = c.cancelled() => None,
        },
    }
}
