//! Writing a driven call to the client: plain JSON until something must be
//! streamed, then SSE.

use bytes::Bytes;
use http::{Response, StatusCode};
use junction_protocol::jsonrpc::error_bytes;
use tokio::sync::mpsc;

use super::{Driver, Next};
use crate::error::GatewayError;
use crate::response::{self, Body};

/// Streams or returns what the driver produces. Output starts as plain JSON;
/// the first relayed notification (or a question for a handshake-era client)
/// switches it to SSE. `record` gets the outcome label once.
pub(crate) async fn respond(
    mut d: Driver,
    open: prometheus::IntGauge,
    record: Box<dyn FnOnce(&str) + Send>,
) -> Result<Response<Body>, GatewayError> {
    let first = loop {
        match d.step(None).await {
            Next::Done(Ok((bytes, outcome))) => {
                record(outcome);
                return Ok(response::json(StatusCode::OK, bytes));
            }
            Next::Done(Err(e)) => {
                record(e.outcome());
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
            let bytes = match d.step(Some(&tx)).await {
                Next::Notify(n) => {
                    if tx
                        .send(response::sse_event(n.get().as_bytes()))
                        .await
                        .is_err()
                    {
                        return; // client went away: dropping the driver cancels upstream
                    }
                    continue;
                }
                Next::Switch => {
                    let e = GatewayError::Unsupported("bridge asked to switch twice".into());
                    error_bytes(Some(&d.id), &e.render().1)
                }
                Next::Done(Ok((bytes, outcome))) => {
                    record(outcome);
                    bytes
                }
                Next::Done(Err(e)) => {
                    record(e.outcome());
                    error_bytes(Some(&d.id), &e.render().1)
                }
            };
            let _ = tx.send(response::sse_event(&bytes)).await;
            return;
        }
    });
    Ok(response::sse(rx))
}
