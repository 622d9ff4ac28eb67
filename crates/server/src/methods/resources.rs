//! `resources/list`, `resources/templates/list` and `resources/read` for both
//! client eras. A URI (or template) that one upstream of the route lists is
//! kept as it is; one that an earlier upstream (config order) already lists is
//! namespaced reversibly as `junction://{upstream}/{uri}` for the later one,
//! so both stay listed and readable, and adding an upstream never renames the
//! resources clients already know (`junction_catalog::lists`). A read goes to
//! the upstream the resolve phase found (`views::resource_owner`), with that
//! upstream's own URI.

use http::Response;
use junction_protocol::jsonrpc::Id;
use junction_protocol::object;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::Request;
use crate::admit;
use crate::context::{Cx, Target};
use crate::error::GatewayError;
use crate::forward::{self, raw_param};
use crate::response::Body;
use crate::views;

pub async fn list(cx: &Cx<'_>, id: &Id, r: Request<'_>) -> Result<Response<Body>, GatewayError> {
    let (merged, _) = views::resources(cx).await;
    let merged = admit::visible_list(cx, "resources", merged);
    views::list_page(cx, id, r.params.as_ref(), &r.client, "resources", &merged)
}

pub async fn templates(
    cx: &Cx<'_>,
    id: &Id,
    r: Request<'_>,
) -> Result<Response<Body>, GatewayError> {
    let (merged, _) = views::templates(cx).await;
    let merged = admit::visible_list(cx, "resourceTemplates", merged);
    views::list_page(
        cx,
        id,
        r.params.as_ref(),
        &r.client,
        "resourceTemplates",
        &merged,
    )
}

pub async fn read(cx: &Cx<'_>, id: &Id, r: Request<'_>) -> Result<Response<Body>, GatewayError> {
    let Target::Resource { uri, own, .. } = &r.target else {
        return Err(GatewayError::InvalidParams(
            "resources/read needs params.uri".into(),
        ));
    };
    let mut params = r.params.unwrap_or_default();
    if own != uri {
        params.insert("uri".into(), raw_param(own)?);
    }
    let hints = r
        .client
        .is_modern()
        .then_some(with_cache_hints as fn(_) -> _);
    // A requestState envelope stays bound to the URI the client named.
    let method = ("resources/read", "resource");
    forward::forward_named(cx, id, &r.client, method, &r.target, params, hints).await
}

#[derive(Deserialize)]
struct HintsHead<'a> {
    #[serde(rename = "resultType", borrow, default)]
    result_type: Option<std::borrow::Cow<'a, str>>,
    #[serde(rename = "ttlMs", default)]
    ttl_ms: Option<serde::de::IgnoredAny>,
    #[serde(rename = "cacheScope", default)]
    cache_scope: Option<serde::de::IgnoredAny>,
}

/// A complete `resources/read` result for a modern client must carry `ttlMs`
/// and `cacheScope` (NOTES §9); a handshake-era upstream sends neither, so
/// Junction says "do not cache" (`0`, `private`). Other members stay raw.
fn with_cache_hints(raw: Box<RawValue>) -> Box<RawValue> {
    let Ok(head) = serde_json::from_str::<HintsHead<'_>>(raw.get()) else {
        return raw;
    };
    if head.result_type.as_deref() != Some("complete") {
        return raw;
    }
    let mut add = Vec::new();
    if head.ttl_ms.is_none() {
        add.push("\"ttlMs\":0");
    }
    if head.cache_scope.is_none() {
        add.push("\"cacheScope\":\"private\"");
    }
    if add.is_empty() {
        return raw;
    }
    object::prepend(raw.get(), &add.join(","))
        .and_then(|out| RawValue::from_string(out).ok())
        .unwrap_or(raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_owned()).unwrap()
    }

    #[test]
    fn read_results_get_cache_hints_only_when_missing() {
        assert_eq!(
            with_cache_hints(raw(r#"{"resultType":"complete","contents":[]}"#)).get(),
            r#"{"ttlMs":0,"cacheScope":"private","resultType":"complete","contents":[]}"#
        );
        let given = r#"{"resultType":"complete","ttlMs":5,"cacheScope":"public","contents":[]}"#;
        assert_eq!(with_cache_hints(raw(given)).get(), given);
        let asking = r#"{"resultType":"input_required","requestState":"x"}"#;
        assert_eq!(with_cache_hints(raw(asking)).get(), asking);
    }
}
