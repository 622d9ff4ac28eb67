//! The pipeline's admit phase: authorization and rate limits, for every
//! request, in one place (DESIGN §4, steps 3 and 4). It runs once the target
//! is resolved, so a rule sees the upstream and the tool, prompt or URI, and
//! counts a request once. Lists, subscriptions and change notifications are
//! filtered here too (`visible`, `visible_list`, `allowed`), so nothing the
//! caller may not use shows in a list, a `list_changed` or a subscription:
//! there it looks exactly like something that does not exist.

use std::sync::Arc;

use junction_catalog::lists::MergedList;
use junction_catalog::Catalog;
use junction_policy::Kind;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::context::{Cx, Target};
use crate::error::GatewayError;

/// Authorizes the request for `target`, then takes its rate-limit tokens.
/// Authorization comes first, so a call the caller may not make never drains
/// its budget.
pub async fn admit(cx: &Cx<'_>, method: &str, target: &Target) -> Result<(), GatewayError> {
    let kind = match target {
        Target::None => None,
        // A task is the tool that created it: who may no longer call the
        // tool may no longer reach its tasks either.
        Target::Tool { .. } | Target::Task { .. } => Some(Kind::Tool),
        Target::Prompt { .. } => Some(Kind::Prompt),
        Target::Resource { .. } => Some(Kind::Resource),
    };
    let (upstream, name) = target.routed().unwrap_or(("", ""));
    if let Some(kind) = kind {
        authorize(cx, kind, name)?;
    }
    rate_limit(cx, method, upstream, name).await
}

/// Whether the caller may see and use the `kind` named `name` (always, without
/// `auth`).
pub fn allowed(cx: &Cx<'_>, kind: Kind, name: &str) -> bool {
    match (&cx.state.auth, &cx.identity) {
        (Some(auth), Some(p)) => auth.authorizer.allows(p, kind, name),
        _ => true,
    }
}

/// The part of the catalog this caller may see: everything without `auth`,
/// else the tools its scopes grant (then the list is `private`). A tool the
/// caller cannot see looks exactly like one that does not exist.
/// Returns the catalog and whether the answer depends on who asked.
pub fn visible(cx: &Cx<'_>, catalog: Arc<Catalog>) -> (Arc<Catalog>, bool) {
    match (&cx.state.auth, &cx.identity) {
        (Some(auth), Some(p)) if !auth.authorizer.grants_everything() => (
            Arc::new(catalog.filtered(|t| auth.authorizer.allows(p, Kind::Tool, &t.exposed))),
            true,
        ),
        (Some(_), _) => (catalog, true),
        (None, _) => (catalog, false),
    }
}

/// The part of a prompt or resource list (`key`: `prompts`, `resources`,
/// `resourceTemplates`) this caller may see, as [`visible`] does for tools.
pub fn visible_list(cx: &Cx<'_>, key: &str, list: MergedList) -> MergedList {
    let (Some(auth), Some(p)) = (&cx.state.auth, &cx.identity) else {
        return list;
    };
    if auth.authorizer.grants_everything() {
        return list;
    }
    let (kind, field) = match key {
        "prompts" => (Kind::Prompt, Field::Name),
        "resourceTemplates" => (Kind::Resource, Field::UriTemplate),
        _ => (Kind::Resource, Field::Uri),
    };
    list.filtered(key, |item| {
        name_of(item, field).is_some_and(|n| auth.authorizer.allows(p, kind, &n))
    })
}

#[derive(Clone, Copy)]
enum Field {
    Name,
    Uri,
    UriTemplate,
}

/// The member of a list item that names it.
fn name_of(item: &RawValue, field: Field) -> Option<String> {
    #[derive(Deserialize)]
    struct Named {
        name: Option<String>,
        uri: Option<String>,
        #[serde(rename = "uriTemplate")]
        uri_template: Option<String>,
    }
    let n: Named = serde_json::from_str(item.get()).ok()?;
    match field {
        Field::Name => n.name,
        Field::Uri => n.uri,
        Field::UriTemplate => n.uri_template,
    }
}

/// A request outside the caller's grant is 403 with a step-up challenge
/// naming every scope that would grant it.
fn authorize(cx: &Cx<'_>, kind: Kind, name: &str) -> Result<(), GatewayError> {
    let (Some(auth), Some(p)) = (&cx.state.auth, &cx.identity) else {
        return Ok(());
    };
    if auth.authorizer.allows(p, kind, name) {
        return Ok(());
    }
    let scopes = auth.authorizer.scopes_granting(kind, name);
    let challenge = auth
        .authenticator
        .insufficient_scope_challenge(&cx.route.path, &scopes);
    cx.state
        .metrics
        .auth_failures_total
        .with_label_values(&["insufficient_scope"])
        .inc();
    Err(GatewayError::Forbidden {
        kind: kind.as_str(),
        target: name.to_owned(),
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
    // A relayed request took its tokens on the replica it first reached.
    if cx.hop.is_some() {
        return Ok(());
    }
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
