//! `prompts/list` and `prompts/get` for both client eras. Prompts are named like
//! tools (`{upstream}{separator}{name}`, unchanged on `prefix: never` routes) and
//! ordered the same way (config order, then name bytewise); `prompts/get` goes
//! to the owning upstream with the original name and the arguments byte for byte.

use http::Response;
use junction_protocol::jsonrpc::{Id, RawParams};
use serde_json::Value;

use crate::error::GatewayError;
use crate::forward;
use crate::mcp::{param_str, Cx};
use crate::merged::{self, Merged};
use crate::response::Body;
use crate::tools::{rate_limit, ClientSide};

pub async fn list(
    cx: &Cx<'_>,
    id: &Id,
    params: Option<&RawParams>,
    client: &ClientSide,
) -> Result<Response<Body>, GatewayError> {
    let fanned = forward::fan_out(cx, "prompts/list", "prompts").await;
    let merged = merge(cx, fanned);
    merged::list_page(cx, id, params, client, "prompts", &merged)
}

fn merge(cx: &Cx<'_>, fanned: forward::Fanned) -> Merged {
    let naming = &cx.route.naming;
    let mut seen = std::collections::HashSet::new();
    let mut items = Vec::new();
    for c in &fanned.contributions {
        let mut named: Vec<(String, Value)> = c
            .items
            .iter()
            .filter_map(|p| match p.get("name").and_then(Value::as_str) {
                Some(n) => Some((n.to_owned(), p.clone())),
                None => {
                    tracing::warn!(upstream = %c.upstream, "prompt without a name left out");
                    None
                }
            })
            .collect();
        named.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        for (name, mut prompt) in named {
            let exposed = naming.full_name(&c.upstream, &name);
            if !seen.insert(exposed.clone()) {
                tracing::warn!(upstream = %c.upstream, prompt = %name, "duplicate prompt name left out");
                continue;
            }
            if let Some(obj) = prompt.as_object_mut() {
                obj.insert("name".into(), Value::String(exposed));
            }
            items.push(prompt);
        }
    }
    Merged::new("prompts", items, &fanned.contributions, fanned.degraded)
}

/// (upstream, original name) of an exposed prompt name. No list is needed: the
/// upstream id comes first and cannot contain the separator.
pub(crate) fn resolve(cx: &Cx<'_>, exposed: &str) -> Option<(String, String)> {
    let route = cx.route;
    if !route.naming.prefix {
        return route
            .upstreams
            .first()
            .map(|u| (u.clone(), exposed.to_owned()));
    }
    let (upstream, original) = exposed.split_once(route.naming.separator.as_str())?;
    if original.is_empty() || !route.upstreams.iter().any(|u| u == upstream) {
        return None;
    }
    Some((upstream.to_owned(), original.to_owned()))
}

pub async fn get(
    cx: &Cx<'_>,
    id: &Id,
    params: Option<RawParams>,
    client: &ClientSide,
) -> Result<Response<Body>, GatewayError> {
    let mut params = params.unwrap_or_default();
    let exposed = param_str(Some(&params), "name")?
        .map(|s| s.into_owned())
        .ok_or_else(|| GatewayError::InvalidParams("prompts/get needs params.name".into()))?;
    let (upstream, original) = resolve(cx, &exposed)
        .ok_or_else(|| GatewayError::InvalidParams(format!("unknown prompt: {exposed}")))?;
    if let Some(raw) = params.get("arguments") {
        if !raw.get().trim_start().starts_with('{') {
            return Err(GatewayError::InvalidParams(
                "params.arguments must be an object".into(),
            ));
        }
    }
    cx.note_target(&upstream, &exposed);
    rate_limit(cx, "prompts/get", &upstream, &exposed).await?;
    params.insert("name".into(), forward::raw_param(&original)?);
    forward::forward(cx, id, &upstream, "prompts/get", &exposed, params, client).await
}
