//! Relaying a request to the replica that holds its call. A held upstream
//! stream cannot move between processes, so a modern client's retry for a
//! held call, or a handshake-era client's answer to a question Junction asked
//! on its stream, that a load balancer sends to another replica goes, as the
//! client sent it, to the replica the sealed `requestState` or question id
//! names (`fleet.advertise_url`), and that replica's answer streams back
//! unchanged.
//!
//! The owner's address comes only from a token sealed with the shared key, so
//! no client can point a relay anywhere else. The relayed request carries a
//! hop token (`fleet::HOP_HEADER`): the owner does not relay it again, takes
//! no rate-limit tokens for it a second time, and logs the first replica's
//! caller. Authentication and authorization run again on the owner, on the
//! client's own headers.

use std::convert::Infallible;
use std::time::Duration;

use http::header::{self, HeaderName};
use http::{Request, Response};
use http_body_util::{BodyExt, Full, StreamBody};

use crate::context::Cx;
use crate::error::GatewayError;
use crate::fleet;
use crate::response::Body;
use crate::state::RelayClient;

/// A replica that does not accept the connection by then is gone.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// Headers of one connection, never relayed (RFC 9110 §7.6.1), and the
/// framing the relay recomputes.
const HOP_BY_HOP: [HeaderName; 7] = [
    header::CONNECTION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
    header::HOST,
    header::CONTENT_LENGTH,
];

fn hop_by_hop(name: &HeaderName) -> bool {
    HOP_BY_HOP.contains(name)
        || name.as_str() == "keep-alive"
        || name.as_str() == "proxy-connection"
        || *name == fleet::HOP_HEADER
}

/// Whether this request may be relayed to `owner`: it names another replica,
/// and it was not relayed here already (a hop is never relayed again).
pub fn elsewhere(cx: &Cx<'_>, owner: &str) -> bool {
    let own = cx.state.replica.advertise.load();
    cx.hop.is_none() && own.as_deref().is_some_and(|own| own.as_str() != owner)
}

/// Sends the request's body (`Cx::body`, kept whenever replicas relay) with
/// the client's headers to the same route on `owner` and answers with what
/// it answers.
pub async fn to_owner(cx: &Cx<'_>, owner: &str) -> Result<Response<Body>, GatewayError> {
    let body = cx.body.get().cloned().unwrap_or_default();
    let gone = |e: String| {
        GatewayError::InvalidParams(format!(
            "the replica holding this call ({owner}) cannot be reached ({e}); call again"
        ))
    };
    let mut request = Request::post(format!("{owner}{}", cx.route.path))
        .body(Full::new(body))
        .map_err(|e| gone(e.to_string()))?;
    for (name, value) in cx.headers {
        if !hop_by_hop(name) {
            request.headers_mut().append(name, value.clone());
        }
    }
    let hop = fleet::seal_hop(&cx.state.sealer, cx.client_ip());
    let hop = http::HeaderValue::from_str(&hop).map_err(|e| gone(e.to_string()))?;
    request.headers_mut().insert(fleet::HOP_HEADER, hop);
    tracing::debug!(%owner, route = %cx.route.path, "relaying a request to the replica holding its call");
    let client = cx.state.replica.relay.get_or_init(client);
    let answer = client
        .request(request)
        .await
        .map_err(|e| gone(e.to_string()))?;
    let (mut parts, incoming) = answer.into_parts();
    let relayed: Vec<HeaderName> = parts
        .headers
        .keys()
        .filter(|n| hop_by_hop(n))
        .cloned()
        .collect();
    for name in relayed {
        parts.headers.remove(name);
    }
    // Streamed as it comes (an SSE answer lasts as long as the call); a
    // broken relay ends the stream, as a broken upstream would.
    let frames = futures_util::stream::unfold(incoming, |mut body| async move {
        match body.frame().await {
            Some(Ok(frame)) => Some((Ok::<_, Infallible>(frame), body)),
            _ => None,
        }
    });
    Ok(Response::from_parts(parts, StreamBody::new(frames).boxed()))
}

fn client() -> RelayClient {
    let mut connector = hyper_util::client::legacy::connect::HttpConnector::new();
    connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
    connector.set_nodelay(true);
    hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build(connector)
}
