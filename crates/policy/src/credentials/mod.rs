//! What Junction sends an HTTP upstream as `Authorization`, per upstream
//! (`upstreams[].credentials`): a static token, its own token from an OAuth
//! client credentials grant, a token exchanged for the caller's (RFC 8693),
//! or the caller's own token when it was issued for that upstream.
//!
//! Secrets are read once, when [`UpstreamCredentials::new`] runs; tokens are
//! fetched when first needed and cached until shortly before they expire.
//! No secret or token is ever logged or put in an error.

mod cache;
mod endpoint;

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use junction_config::{Credentials, OAuthClient, SecretSource};
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::time::Instant;

use crate::PolicyError;
use endpoint::Endpoint;

/// The caller of a request, as authenticated: its bearer token and claims.
#[derive(Clone, Copy)]
pub struct Caller<'a> {
    pub token: &'a str,
    pub claims: &'a Value,
}

impl std::fmt::Debug for Caller<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Caller")
            .field("token", &"<redacted>")
            .finish_non_exhaustive()
    }
}

/// A bearer token for one upstream request. `fresh`: it came from a token
/// request made for this very call (not from the cache, nor shared with a
/// concurrent request that made it); static and passthrough tokens never
/// are. `Debug` hides the value.
#[derive(Clone, PartialEq, Eq)]
pub struct Token {
    pub value: String,
    pub fresh: bool,
}

impl Token {
    /// The `Authorization` header value: `Bearer <token>`.
    pub fn authorization(&self) -> String {
        format!("Bearer {}", self.value)
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Token")
            .field("value", &"<redacted>")
            .field("fresh", &self.fresh)
            .finish()
    }
}

/// Why no token could be had. Refusals and audience mismatches are about the
/// caller or Junction's client (403); unavailability is the endpoint's (503).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CredentialError {
    /// The token endpoint answered 4xx (not 408/429): a wrong client or
    /// secret, a grant or audience it does not allow, a caller token it
    /// will not exchange. `error` is the OAuth error code when it sent a
    /// well-formed one; `description` its `error_description`, for logs.
    #[error("the token endpoint refused (HTTP {status}, {})", .error.as_deref().unwrap_or("no error code"))]
    Refused {
        status: u16,
        error: Option<String>,
        description: Option<String>,
    },
    /// No usable answer: connect or TLS failure, timeout, 408/429/5xx, a
    /// response that is not a token.
    #[error("the token endpoint is unavailable: {0}")]
    Unavailable(String),
    /// Passthrough: the caller's token does not list the upstream's audience in `aud`.
    #[error("the caller's token is not issued for {audience:?}")]
    AudienceMismatch { audience: String },
}

impl CredentialError {
    /// The `outcome` label of `junction_upstream_credentials_total`.
    pub fn reason(&self) -> &'static str {
        match self {
            CredentialError::Refused { .. } => "refused",
            CredentialError::Unavailable(_) => "unavailable",
            CredentialError::AudienceMismatch { .. } => "audience_mismatch",
        }
    }
}

/// One upstream's credentials, built from its config.
pub struct UpstreamCredentials {
    upstream: String,
    how: How,
}

enum How {
    Static(String),
    ClientCredentials {
        endpoint: Endpoint,
        own: cache::OwnToken,
    },
    TokenExchange {
        endpoint: Endpoint,
        own: cache::OwnToken,
        exchanged: cache::Exchanged,
    },
    Passthrough {
        audience: String,
    },
}

impl std::fmt::Debug for UpstreamCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("UpstreamCredentials");
        d.field("upstream", &self.upstream)
            .field("kind", &self.kind());
        match &self.how {
            How::ClientCredentials { endpoint, .. } | How::TokenExchange { endpoint, .. } => {
                d.field("endpoint", endpoint)
            }
            How::Passthrough { audience } => d.field("audience", audience),
            How::Static(_) => d.field("token", &"<redacted>"),
        };
        d.finish()
    }
}

impl UpstreamCredentials {
    /// Reads the secret (the variable from `env`, or the file, trimmed) and
    /// builds the token endpoint's client; no network I/O. A plain-http
    /// `token_url` to a host other than loopback is accepted with a warning.
    pub fn new(
        upstream_id: &str,
        cfg: &Credentials,
        env: &HashMap<String, String>,
    ) -> Result<UpstreamCredentials, PolicyError> {
        let err = |reason: String| PolicyError::Credentials {
            upstream: upstream_id.to_owned(),
            reason,
        };
        let endpoint = |client: &OAuthClient| -> Result<Endpoint, PolicyError> {
            let secret = read_secret(&client.client_secret, "client_secret", env).map_err(err)?;
            let endpoint = Endpoint::new(client, secret).map_err(err)?;
            if secret_in_clear(endpoint.url()) {
                tracing::warn!(upstream = upstream_id, token_url = %endpoint.url(),
                    "credentials.token_url is plain http to another host: the client secret and tokens cross the network unencrypted");
            }
            Ok(endpoint)
        };
        let how = match cfg {
            Credentials::Static(source) => {
                let token = read_secret(source, "token", env).map_err(err)?;
                if !token.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
                    return Err(err(
                        "the token has characters a bearer token cannot have".into()
                    ));
                }
                How::Static(token)
            }
            Credentials::ClientCredentials(client) => How::ClientCredentials {
                endpoint: endpoint(client)?,
                own: cache::OwnToken::default(),
            },
            Credentials::TokenExchange { client, cache_size } => How::TokenExchange {
                endpoint: endpoint(client)?,
                own: cache::OwnToken::default(),
                exchanged: cache::Exchanged::new(*cache_size),
            },
            Credentials::Passthrough { audience } => How::Passthrough {
                audience: audience.clone(),
            },
        };
        Ok(UpstreamCredentials {
            upstream: upstream_id.to_owned(),
            how,
        })
    }

    /// `static`, `client_credentials`, `token_exchange` or `passthrough`
    /// (the `kind` metric label).
    pub fn kind(&self) -> &'static str {
        match self.how {
            How::Static(_) => "static",
            How::ClientCredentials { .. } => "client_credentials",
            How::TokenExchange { .. } => "token_exchange",
            How::Passthrough { .. } => "passthrough",
        }
    }

    /// Whether requests Junction makes on its own (`for_caller(None)`) carry
    /// a token: false only for `passthrough`.
    pub fn covers_own_requests(&self) -> bool {
        !matches!(self.how, How::Passthrough { .. })
    }

    /// The token for one upstream request. `caller`: the authenticated
    /// caller the request is made for; None for requests Junction makes on
    /// its own (list pages, `initialize`, probes, change streams).
    ///
    /// Tokens are kept until less than min(60 s, a tenth of their lifetime)
    /// is left; one without `expires_in` is taken to live 5 minutes. One
    /// token request at a time per token (Junction's own, or per caller
    /// token): concurrent requests share its answer. A failed request is an
    /// error, never an older token; for Junction's own token the same error
    /// is answered for 1 s before the endpoint is asked again.
    ///
    /// - `static`: always the configured token.
    /// - `client_credentials`: Junction's token, for callers and itself alike.
    /// - `token_exchange`: a caller gets a token exchanged for its own
    ///   (cached per caller token until shortly before expiry, never past
    ///   the caller token's `exp`); Junction's own requests get a client
    ///   credentials token of the same client.
    /// - `passthrough`: the caller's own token once its `aud` (a string or
    ///   a list) names the configured audience; Junction's own requests
    ///   carry nothing (`Ok(None)`): the upstream must serve lists, probes
    ///   and change streams without a token, or it is degraded for them.
    pub async fn for_caller(
        &self,
        caller: Option<Caller<'_>>,
    ) -> Result<Option<Token>, CredentialError> {
        let token = match (&self.how, caller) {
            (How::Static(token), _) => Token {
                value: token.clone(),
                fresh: false,
            },
            (How::ClientCredentials { endpoint, own }, _)
            | (How::TokenExchange { endpoint, own, .. }, None) => {
                let token = own.get(|| endpoint.client_credentials()).await;
                if let Err(e) = &token {
                    tracing::warn!(upstream = %self.upstream, error = %e, "no client credentials token");
                }
                token?
            }
            (
                How::TokenExchange {
                    endpoint,
                    exchanged,
                    ..
                },
                Some(caller),
            ) => {
                let key: [u8; 32] = Sha256::digest(caller.token.as_bytes()).into();
                let cap = expiry(caller.claims);
                let token = exchanged
                    .get(key, cap, || endpoint.exchange(caller.token))
                    .await;
                if let Err(e) = &token {
                    tracing::debug!(upstream = %self.upstream, error = %e, "token exchange failed");
                }
                token?
            }
            (How::Passthrough { .. }, None) => return Ok(None),
            (How::Passthrough { audience }, Some(caller)) => {
                if !lists_audience(caller.claims, audience) {
                    return Err(CredentialError::AudienceMismatch {
                        audience: audience.clone(),
                    });
                }
                Token {
                    value: caller.token.to_owned(),
                    fresh: false,
                }
            }
        };
        Ok(Some(token))
    }
}

fn read_secret(
    source: &SecretSource,
    what: &str,
    env: &HashMap<String, String>,
) -> Result<String, String> {
    let value = match source {
        SecretSource::Env(name) => env
            .get(name)
            .cloned()
            .ok_or_else(|| format!("{what}_env: environment variable {name} is not set"))?,
        SecretSource::File(path) => std::fs::read_to_string(path)
            .map_err(|e| format!("{what}_file {}: {e}", path.display()))?
            .trim()
            .to_owned(),
    };
    if value.is_empty() {
        return Err(format!("the {what} is empty"));
    }
    Ok(value)
}

/// `aud` as RFC 7519 §4.1.3 allows: one string or a list of strings.
fn lists_audience(claims: &Value, audience: &str) -> bool {
    match claims.get("aud") {
        Some(Value::String(aud)) => aud == audience,
        Some(Value::Array(list)) => list.iter().any(|a| a.as_str() == Some(audience)),
        _ => false,
    }
}

/// The caller token's `exp` as an instant on tokio's clock; None without one.
fn expiry(claims: &Value) -> Option<Instant> {
    let exp = claims.get("exp").and_then(Value::as_f64)?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or_default();
    let left = Duration::try_from_secs_f64((exp - now).max(0.0)).unwrap_or(cache::DEFAULT_LIFETIME);
    Some(Instant::now() + left.min(Duration::from_secs(365 * 24 * 3600)))
}

/// Plain http to a host other than loopback.
fn secret_in_clear(url: &http::Uri) -> bool {
    if url.scheme_str() != Some("http") {
        return false;
    }
    let host = url.host().unwrap_or_default().trim_matches(['[', ']']);
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    !loopback
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn audiences_as_string_or_list() {
        assert!(lists_audience(&json!({"aud": "https://a"}), "https://a"));
        assert!(lists_audience(
            &json!({"aud": ["x", "https://a"]}),
            "https://a"
        ));
        assert!(!lists_audience(&json!({"aud": ["x"]}), "https://a"));
        assert!(!lists_audience(&json!({"aud": "https://a/"}), "https://a"));
        assert!(!lists_audience(&json!({}), "https://a"));
    }

    #[test]
    fn only_plain_http_off_loopback_is_in_clear() {
        for (url, clear) in [
            ("http://idp.internal/token", true),
            ("https://idp.internal/token", false),
            ("http://127.0.0.1:9/token", false),
            ("http://[::1]:9/token", false),
            ("http://LOCALHOST/token", false),
        ] {
            let uri: http::Uri = url.parse().expect("url");
            assert_eq!(secret_in_clear(&uri), clear, "{url}");
        }
    }

    #[tokio::test]
    async fn a_past_or_missing_exp_caps_nothing_or_everything() {
        assert_eq!(expiry(&json!({})), None);
        let past = expiry(&json!({"exp": 1})).expect("cap");
        assert!(past <= Instant::now());
    }
}
