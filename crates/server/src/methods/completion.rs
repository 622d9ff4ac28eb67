//! `completion/complete` for both client eras, routed (`resolve`) by what it
//! refers to: a `ref/prompt` by its exposed prompt name (renamed back to the
//! upstream's own here), a `ref/resource` by the upstream that lists the URI
//! or template (as `resources/read` is routed). Completion is neither cacheable nor MRTR
//! (NOTES §7), so the answer is forwarded as it comes.
//!
//! Junction advertises `completions` whatever its upstreams do, so an upstream
//! without completion (-32601) answers "no suggestions": an empty completion,
//! which is what that upstream would have meant.

use http::{Response, StatusCode};
use junction_protocol::codes;
use junction_protocol::jsonrpc::{error_bytes, result_bytes, Id};
use junction_upstream::UpstreamRequest;
use serde_json::value::RawValue;

use super::Request;
use crate::bridge::Finisher;
use crate::context::{Cx, Target};
use crate::error::GatewayError;
use crate::forward::{self, answer_of, raw_param};
use crate::identity;
use crate::record::{Record, UpstreamSpan};
use crate::response::{self, Body};

const METHOD: &str = "completion/complete";

pub async fn complete(
    cx: &Cx<'_>,
    id: &Id,
    r: Request<'_>,
) -> Result<Response<Body>, GatewayError> {
    let Request {
        params,
        client,
        target,
    } = r;
    let mut params = params.unwrap_or_default();
    // The reference as the upstream knows it.
    let (upstream_id, target) = match target {
        Target::Prompt {
            upstream,
            exposed,
            original,
        } => {
            let renamed = serde_json::json!({"type": "ref/prompt", "name": original});
            params.insert("ref".into(), raw_param(&renamed)?);
            (upstream, exposed)
        }
        Target::Resource { upstream, uri, own } => {
            if own != uri {
                let renamed = serde_json::json!({"type": "ref/resource", "uri": own});
                params.insert("ref".into(), raw_param(&renamed)?);
            }
            (upstream, uri)
        }
        Target::None | Target::Tool { .. } | Target::Task { .. } => {
            return Err(GatewayError::InvalidParams(
                "completion/complete needs params.ref".into(),
            ))
        }
    };
    let upstream = cx.state.upstreams.get(&upstream_id).ok_or_else(|| {
        GatewayError::InvalidParams(format!("{target:?} belongs to no upstream of this route"))
    })?;
    let meta = client.upstream_meta(&params);
    params.remove("_meta");
    let request = UpstreamRequest {
        authorization: identity::authorization(cx, upstream).await?,
        ..client.upstream_request(cx, METHOD, params, meta)
    };
    let mut request = request;
    let span = UpstreamSpan::start(&upstream_id, METHOD);
    if let Some(span) = &span {
        forward::carry_trace(&mut request, span);
    }
    let mut record = Record::upstream(&cx.state.metrics, &upstream_id, METHOD);
    record.arm();
    let answer = answer_of(upstream, request).await;
    let outcome = match &answer {
        Ok(Ok(_)) => "ok",
        Ok(Err(_)) => "upstream_error",
        Err(e) => e.outcome(),
    };
    if let Some(span) = span {
        span.end(outcome);
    }
    record.record(outcome);
    let raw = match answer? {
        Ok(raw) => raw,
        Err(e) if e.code == codes::METHOD_NOT_FOUND => no_suggestions(),
        // The upstream's own error (an unknown argument, say) reaches the client unchanged.
        Err(e) => return Ok(response::json(StatusCode::OK, error_bytes(Some(id), &e))),
    };
    let finish = Finisher {
        modern: client.is_modern(),
        sealer: cx.state.sealer.clone(),
        principal: cx.principal.clone(),
        upstream: upstream_id,
        target,
        ttl_ms: cx.state.config.request_state.ttl.as_millis() as u64,
        tasks: crate::tasks::Shape::None,
        owner: None,
    };
    let raw = finish.result(raw)?;
    Ok(response::json(StatusCode::OK, result_bytes(id, &raw)))
}

fn no_suggestions() -> Box<RawValue> {
    RawValue::from_string(r#"{"completion":{"values":[],"total":0,"hasMore":false}}"#.to_owned())
        .unwrap_or_else(|_| Box::<RawValue>::default())
}
