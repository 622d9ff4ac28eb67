//! The pipeline's resolve phase: what a request names upstream, by the kind
//! its method row gives (`methods::Route`): a tool through the route's
//! catalog, a prompt by its exposed name, a resource URI through the
//! resource lists, a completion by its `ref`, a task by the id Junction
//! sealed for the caller. An unknown name is the client's error (-32602)
//! here, before anything is admitted or forwarded.

use junction_catalog::lists::resolve_prompt;
use junction_catalog::Catalog;
use junction_protocol::jsonrpc::RawParams;
use serde::Deserialize;

use crate::context::{param_str, ClientSide, Cx, Target};
use crate::envelope;
use crate::error::GatewayError;
use crate::tasks;
use crate::views;

/// What a method is routed by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// Nothing upstream in particular (lists, sessions, streams).
    None,
    /// `params.name`, a tool of the route's catalog.
    Tool,
    /// `params.name`, an exposed prompt name.
    Prompt,
    /// `params.uri`, a resource some upstream serves.
    Resource,
    /// `params.ref`, a prompt or resource reference.
    Completion,
    /// `params.taskId`, a task id Junction sealed (`tasks`).
    Task,
}

pub async fn target(
    cx: &Cx<'_>,
    route: Route,
    method: &str,
    params: Option<&RawParams<'_>>,
    client: &ClientSide,
) -> Result<Target, GatewayError> {
    match route {
        Route::None => Ok(Target::None),
        Route::Tool => tool(cx, method, params).await,
        Route::Prompt => {
            let name = required(params, "name", method)?;
            let target = prompt(cx, &name).await?;
            object_or_absent(params, "arguments")?;
            Ok(target)
        }
        Route::Resource => {
            let uri = required(params, "uri", method)?;
            resource(cx, &uri).await
        }
        Route::Completion => completion(cx, params).await,
        Route::Task => task(cx, method, params, client),
    }
}

/// A modern client reaches tasks only with the extension declared (the
/// extension's gate comes before the id is looked at); the id must be one
/// Junction sealed for this caller, of an upstream of this route.
fn task(
    cx: &Cx<'_>,
    method: &str,
    params: Option<&RawParams<'_>>,
    client: &ClientSide,
) -> Result<Target, GatewayError> {
    if client.is_modern() && !tasks::declares(client.capabilities()) {
        return Err(tasks::needs_extension(method));
    }
    let token = required(params, "taskId", method)?;
    let unknown = |why: &str| GatewayError::InvalidParams(format!("{why}: {token}"));
    let task = envelope::open_task(&cx.state.sealer, &token, &cx.principal).map_err(unknown)?;
    if !cx.route.upstreams.contains(&task.upstream) {
        return Err(unknown("unknown task (not of this route)"));
    }
    Ok(Target::Task { task, token })
}

fn required(
    params: Option<&RawParams<'_>>,
    key: &str,
    method: &str,
) -> Result<String, GatewayError> {
    param_str(params, key)?
        .map(|s| s.into_owned())
        .ok_or_else(|| GatewayError::InvalidParams(format!("{method} needs params.{key}")))
}

/// `params.{key}` must be a JSON object when present.
pub fn object_or_absent(params: Option<&RawParams<'_>>, key: &str) -> Result<(), GatewayError> {
    match params.and_then(|p| p.get(key)) {
        Some(raw) if !raw.get().trim_start().starts_with('{') => Err(GatewayError::InvalidParams(
            format!("params.{key} must be an object"),
        )),
        _ => Ok(()),
    }
}

async fn tool(
    cx: &Cx<'_>,
    method: &str,
    params: Option<&RawParams<'_>>,
) -> Result<Target, GatewayError> {
    let name = param_str(params, "name")?
        .ok_or_else(|| GatewayError::InvalidParams(format!("{method} needs params.name")))?;
    let catalog = views::route_catalog(cx).await;
    let index = catalog
        .position(&name)
        .ok_or_else(|| unknown_tool(cx, &catalog, &name))?;
    Ok(Target::Tool { catalog, index })
}

fn unknown_tool(cx: &Cx<'_>, catalog: &Catalog, name: &str) -> GatewayError {
    // A tool held back by its pin says why, so the operator can act.
    if let Some((_, why)) = catalog.quarantined.iter().find(|(n, _)| n == name) {
        return GatewayError::Quarantined {
            tool: name.to_owned(),
            reason: why.clone(),
        };
    }
    // A prefixed name of an upstream that is down is an availability problem,
    // not a typo: say so.
    let sep = &cx.route.naming.separator;
    if let Some((upstream, _)) = name.split_once(sep.as_str()) {
        if catalog.degraded.iter().any(|d| d == upstream) {
            return GatewayError::UpstreamUnavailable {
                upstream: upstream.to_owned(),
                detail: format!("its tool list could not be fetched, so {name:?} cannot be routed"),
            };
        }
    }
    GatewayError::InvalidParams(format!("unknown tool: {name}"))
}

/// The upstream id comes first and cannot contain the separator (after a
/// rename override is undone); the prompt must be one its upstream lists
/// (the route's cached prompt list), so an unknown name under a known prefix
/// is -32602 here, not whatever error that upstream would send.
async fn prompt(cx: &Cx<'_>, exposed: &str) -> Result<Target, GatewayError> {
    let unknown = || GatewayError::InvalidParams(format!("unknown prompt: {exposed}"));
    // A renamed prompt is known by its new name only.
    let overrides = cx.route.filter.overrides();
    if overrides.prompt_renamed_away(exposed) {
        return Err(unknown());
    }
    let default = overrides.prompt_default_name(exposed);
    let (upstream, original) =
        resolve_prompt(&cx.route.naming, &cx.route.upstreams, default).ok_or_else(unknown)?;
    if !views::prompt_listed(cx, &upstream, exposed).await {
        return Err(unknown());
    }
    Ok(Target::Prompt {
        upstream,
        exposed: exposed.to_owned(),
        original,
    })
}

async fn resource(cx: &Cx<'_>, uri: &str) -> Result<Target, GatewayError> {
    let (upstream, own) = views::resource_owner(cx, uri).await.ok_or_else(|| {
        GatewayError::InvalidParams(format!(
            "unknown resource: {uri} (no upstream of this route lists it or a matching template)"
        ))
    })?;
    Ok(Target::Resource {
        upstream,
        uri: uri.to_owned(),
        own,
    })
}

#[derive(Deserialize)]
#[serde(tag = "type")]
enum Reference {
    #[serde(rename = "ref/prompt")]
    Prompt { name: String },
    #[serde(rename = "ref/resource")]
    Resource { uri: String },
}

/// `completion/complete` is routed by what it refers to: a `ref/prompt` by its
/// exposed prompt name, a `ref/resource` as `resources/read` is routed.
async fn completion(cx: &Cx<'_>, params: Option<&RawParams<'_>>) -> Result<Target, GatewayError> {
    let raw_ref = params.and_then(|p| p.get("ref")).ok_or_else(|| {
        GatewayError::InvalidParams("completion/complete needs params.ref".into())
    })?;
    let reference: Reference = serde_json::from_str(raw_ref.get()).map_err(|_| {
        GatewayError::InvalidParams(
            "params.ref must be {type: \"ref/prompt\", name} or {type: \"ref/resource\", uri}"
                .into(),
        )
    })?;
    if !params
        .and_then(|p| p.get("argument"))
        .is_some_and(|a| a.get().trim_start().starts_with('{'))
    {
        return Err(GatewayError::InvalidParams(
            "completion/complete needs params.argument {name, value}".into(),
        ));
    }
    match reference {
        Reference::Prompt { name } => prompt(cx, &name).await,
        Reference::Resource { uri } => resource(cx, &uri).await,
    }
}
