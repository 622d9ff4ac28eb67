//! The caller's identity carried to an upstream: for an upstream whose
//! `credentials` are `token_exchange` or `passthrough`, the `Authorization`
//! its request for this caller carries (an exchanged token, or the caller's
//! own after its audience is checked). Never the caller's token by accident:
//! any failure is the caller's error, never a fallback to another token.
//! Counted in `junction_upstream_credentials_total{upstream,kind,outcome}`.

use junction_policy::{Caller, CredentialError};

use crate::context::Cx;
use crate::error::{CredentialFailure, GatewayError};
use crate::state::UpstreamEntry;

/// The `Authorization` value of this caller's request to `upstream`; `None`
/// when the upstream's requests carry Junction's own identity.
pub async fn authorization(
    cx: &Cx<'_>,
    upstream: &UpstreamEntry,
) -> Result<Option<String>, GatewayError> {
    let Some(credentials) = &upstream.credentials else {
        return Ok(None);
    };
    // The token authentication validated, read the same way.
    let token = junction_policy::bearer_token(crate::context::text(cx.known.authorization));
    let null = serde_json::Value::Null;
    let claims = cx.identity.as_ref().map_or(&null, |p| &p.claims);
    let got = match token {
        Some(token) => credentials.for_caller(Some(Caller { token, claims })).await,
        // Only an authenticated caller reaches here (the config requires
        // `auth` for these kinds); without a token there is nothing to carry.
        None => Err(CredentialError::Unavailable(
            "the request carries no bearer token to carry upstream".into(),
        )),
    };
    let outcome = match &got {
        Ok(Some(t)) if t.fresh => "fresh",
        Ok(_) => "cached",
        Err(e) => e.reason(),
    };
    cx.state
        .metrics
        .upstream_credentials_total
        .with_label_values(&[&upstream.id, credentials.kind(), outcome])
        .inc();
    match got {
        Ok(token) => Ok(token.map(|t| t.authorization())),
        Err(e) => Err(refusal(cx, upstream, credentials.kind(), e)),
    }
}

fn refusal(cx: &Cx<'_>, upstream: &UpstreamEntry, kind: &str, e: CredentialError) -> GatewayError {
    tracing::info!(upstream = %upstream.id, kind, reason = e.reason(), error = %e, "no credentials for the caller's request");
    let refused = !matches!(e, CredentialError::Unavailable(_));
    let detail = match &e {
        CredentialError::Refused { .. } => {
            format!("the token endpoint refused to issue a token for upstream {} ({kind})", upstream.id)
        }
        CredentialError::AudienceMismatch { audience } => format!(
            "the caller's token is not issued for upstream {} (its audience must include {audience:?})",
            upstream.id
        ),
        CredentialError::Unavailable(_) => format!(
            "no token could be had for upstream {} ({kind}): the token endpoint is unavailable",
            upstream.id
        ),
    };
    let challenge = match (&cx.state.auth, refused) {
        (Some(auth), true) => Some(
            auth.authenticator
                .insufficient_scope_challenge(&cx.route.path, &[]),
        ),
        _ => None,
    };
    GatewayError::Credentials(Box::new(CredentialFailure {
        upstream: upstream.id.clone(),
        reason: e.reason(),
        refused,
        detail,
        challenge,
    }))
}
