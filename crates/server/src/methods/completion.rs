//! `completion/complete` for both client eras, routed by what it refers to: a
//! `ref/prompt` by its exposed prompt name (renamed back to the upstream's own),
//! a `ref/resource` by the upstream that lists the URI or template (as
//! `resources/read` is routed). Completion is neither cacheable nor MRTR
//! (NOTES §7), so the answer is forwarded as it comes.
//!
//! Junction advertises `completions` whatever its upstreams do, so an upstream
//! without completion (-32601) answers "no suggestions": an empty completion,
//! which is what that upstream would have meant.

use http::{Response, StatusCode};
use junction_protocol::codes;
use junction_protocol::jsonrpc::{error_bytes, result_bytes, Id, RawParams};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::bridge::Record;
use crate::error::GatewayError;
use crate::mcp::Cx;
use crate::response::{self, Body};
use crate::tools::{rate_limit, ClientSide, Finisher};

const METHOD: &str = "completion/complete";

#[derive(Deserialize)]
#[serde(tag = "type")]
enum Reference {
    #[serde(rename = "ref/prompt")]
    Prompt { name: String },
    #[serde(rename = "ref/resource")]
    Resource { uri: String },
}

pub async fn complete(
    cx: &Cx<'_>,
    id: &Id,
    params: Option<RawParams>,
    client: &ClientSide,
) -> Result<Response<Body>, GatewayError> {
    let mut params = params.unwrap_or_default();
    let raw_ref = params.get("ref").ok_or_else(|| {
        GatewayError::InvalidParams("completion/complete needs params.ref".into())
    })?;
    let reference: Reference = serde_json::from_str(raw_ref.get()).map_err(|_| {
        GatewayError::InvalidParams(
            "params.ref must be {type: \"ref/prompt\", name} or {type: \"ref/resource\", uri}"
                .into(),
        )
    })?;
    if !params
        .get("argument")
        .is_some_and(|a| a.get().trim_start().starts_with('{'))
    {
        return Err(GatewayError::InvalidParams(
            "completion/complete needs params.argument {name, value}".into(),
        ));
    }
    let (upstream_id, target) = match reference {
        Reference::Prompt { name } => {
            let (upstream, original) = crate::prompts::resolve(cx, &name)
                .ok_or_else(|| GatewayError::InvalidParams(format!("unknown prompt: {name}")))?;
            let renamed = serde_json::json!({"type": "ref/prompt", "name": original});
            params.insert("ref".into(), crate::forward::raw_param(&renamed)?);
            (upstream, name)
        }
        Reference::Resource { uri } => {
            let (upstream, own) = crate::resources::owner(cx, &uri).await.ok_or_else(|| {
                GatewayError::InvalidParams(format!(
                    "unknown resource: {uri} (no upstream of this route lists it or a matching template)"
                ))
            })?;
            if own != uri {
                let renamed = serde_json::json!({"type": "ref/resource", "uri": own});
                params.insert("ref".into(), crate::forward::raw_param(&renamed)?);
            }
            (upstream, uri)
        }
    };
    cx.note_target(&upstream_id, &target);
    rate_limit(cx, METHOD, &upstream_id, &target).await?;
    let upstream = cx.state.upstreams.get(&upstream_id).ok_or_else(|| {
        GatewayError::InvalidParams(format!("{target:?} belongs to no upstream of this route"))
    })?;
    let meta = client.upstream_meta(&params);
    params.remove("_meta");
    let request = client.upstream_request(cx, METHOD, params, meta);
    let mut record = Record::upstream(&cx.state.metrics, &upstream_id, METHOD);
    record.arm();
    let answer = crate::forward::answer_of(upstream, request).await;
    record.record(match &answer {
        Ok(Ok(_)) => "ok",
        Ok(Err(_)) => "upstream_error",
        Err(e) => e.outcome(),
    });
    let raw = match answer? {
        Ok(raw) => raw,
        Err(e) if e.code == codes::METHOD_NOT_FOUND => no_suggestions(),
        // The upstream's own error (an unknown argument, say) reaches the client unchanged.
        Err(e) => return Ok(response::json(StatusCode::OK, error_bytes(Some(id), &e))),
    };
    let finish = Finisher {
        modern: matches!(client, ClientSide::Modern { .. }),
        sealer: cx.state.sealer.clone(),
        principal: cx.principal.clone(),
        upstream: upstream_id,
        target,
        ttl_ms: cx.state.config.request_state.ttl.as_millis() as u64,
    };
    let raw = finish.result(raw)?;
    Ok(response::json(StatusCode::OK, result_bytes(id, &raw)))
}

fn no_suggestions() -> Box<RawValue> {
    RawValue::from_string(r#"{"completion":{"values":[],"total":0,"hasMore":false}}"#.to_owned())
        .unwrap_or_else(|_| Box::<RawValue>::default())
}
