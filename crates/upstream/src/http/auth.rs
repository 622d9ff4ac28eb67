//! Where an HTTP upstream's `Authorization` comes from when a request does
//! not bring its own: a [`TokenSource`] the server supplies (for example
//! OAuth client credentials), asked once per HTTP request.

use std::future::Future;
use std::pin::Pin;

use http::header::{HeaderValue, AUTHORIZATION};

use crate::UpstreamError;

/// What [`TokenSource::authorization`] returns: the whole header value
/// (`Bearer …`), or why there is none.
pub type TokenFuture<'a> = Pin<Box<dyn Future<Output = Result<String, UpstreamError>> + Send + 'a>>;

/// Supplies the `Authorization` value of the requests an upstream client
/// makes without a per-request one: list pages, the era probe, `initialize`
/// and the legacy session's other requests, standing GET streams, DELETE.
/// Asked for every such request, so it should answer from a cache.
pub trait TokenSource: Send + Sync {
    fn authorization(&self) -> TokenFuture<'_>;
}

/// `value` as a header value marked sensitive (never indexed by HPACK).
pub(crate) fn header_value(upstream: &str, value: &str) -> Result<HeaderValue, UpstreamError> {
    let mut v = HeaderValue::from_str(value).map_err(|_| {
        UpstreamError::Unavailable(format!(
            "the Authorization value for upstream {upstream} is not a valid header value"
        ))
    })?;
    v.set_sensitive(true);
    Ok(v)
}

/// Sets `Authorization` from `source` unless `headers` already has one.
/// A source that fails makes the request fail as `Unavailable`: it was never sent.
pub(crate) async fn authorize(
    upstream: &str,
    source: &dyn TokenSource,
    headers: &mut super::h1::Fields,
) -> Result<(), UpstreamError> {
    if headers.contains(&AUTHORIZATION) {
        return Ok(());
    }
    let value = source.authorization().await.map_err(|e| {
        let why = match e {
            UpstreamError::Unavailable(why) => why,
            other => other.to_string(),
        };
        UpstreamError::Unavailable(format!("no credentials for upstream {upstream}: {why}"))
    })?;
    headers.insert(AUTHORIZATION, header_value(upstream, &value)?);
    Ok(())
}
