//! The pipeline's admit phase: authorization and rate limits, for every
//! request, in one place (DESIGN §4, steps 3 and 4). It runs once the target
//! is resolved, so a rule sees the upstream and the tool, prompt or URI, and
//! counts a request once. Lists and change notifications are filtered here
//! too (`visible`), so nothing the caller may not call shows in a list.

use std::sync::Arc;

use junction_catalog::Catalog;

use crate::context::{Cx, Target};
use crate::error::GatewayError;

/// Authorizes the request for `target`, then takes its rate-limit tokens.
/// Authorization comes first, so a call the caller may not make never drains
/// its budget.
pub async fn admit(cx: &Cx<'_>, method: &str, target: &Target) -> Result<(), GatewayError> {
    if let Some(tool) = target.tool() {
        authorize(cx, &tool.exposed)?;
    }
    let (upstream, name) = target.routed().unwrap_or(("", ""));
    rate_limit(cx, method, upstream, name).await
}

/// The part of the catalog this caller may see: everything without `auth`,
/// else the tools its scopes grant (then the list is `private`). A tool the
/// caller cannot see looks exactly like one that does not exist.
/// Returns the catalog and whether the answer depends on who asked.
pub fn visible(cx: &Cx<'_>, catalog: Arc<Catalog>) -> (Arc<Catalog>, bool) {
    match (&cx.state.auth, &cx.identity) {
        (Some(auth), Some(p)) if !auth.authorizer.grants_everything() => (
            Arc::new(catalog.filtered(|t| auth.authorizer.allows(p, &t.exposed))),
            true,
        ),
        (Some(_), _) => (catalog, true),
        (None, _) => (catalog, false),
    }
}

/// A call outside the caller's grant is 403 with a step-up challenge naming
/// every scope that would grant it.
fn authorize(cx: &Cx<'_>, exposed: &str) -> Result<(), GatewayError> {
    let (Some(auth), Some(p)) = (&cx.state.auth, &cx.identity) else {
        return Ok(());
    };
    if auth.authorizer.allows(p, exposed) {
        return Ok(());
    }
    let scopes = auth.authorizer.scopes_granting(exposed);
    let challenge = auth
        .authenticator
        .insufficient_scope_challenge(&cx.route.path, &scopes);
    cx.state
        .metrics
        .auth_failures_total
        .with_label_values(&["insufficient_scope"])
        .inc();
    Err(GatewayError::Forbidden {
        tool: exposed.to_owned(),
        scopes,
        challenge,
    })
}

/// Token buckets of the rules that cover `method` (the rules say which), keyed
/// by any of principal, upstream, target, route and client address.
async fn rate_limit(
    cx: &Cx<'_>,
    method: &str,
    upstream: &str,
    tool: &str,
) -> Result<(), GatewayError> {
    let Some(limiter) = &cx.state.rate_limiter else {
        return Ok(());
    };
    if !limiter.applies_to(method) {
        return Ok(());
    }
    let principal = if cx.principal.is_empty() {
        "anonymous"
    } else {
        cx.principal.as_str()
    };
    // Read (behind trusted proxies) only when a rule keys on it.
    let client_ip = if limiter.keys_on_client_ip() {
        cx.client_ip().map(|ip| ip.to_string()).unwrap_or_default()
    } else {
        String::new()
    };
    let key = junction_policy::RateKeyParts {
        method,
        principal,
        upstream,
        tool,
        route: &cx.route.path,
        client_ip: &client_ip,
    };
    limiter.check(&key).await.map_err(|r| {
        cx.state
            .metrics
            .rate_limited_total
            .with_label_values(&[&r.rule])
            .inc();
        GatewayError::RateLimited {
            rule: r.rule,
            retry_after_ms: r.retry_after.as_millis() as u64,
        }
    })
}
