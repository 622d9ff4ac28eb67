//! One page of a list as the client's result, for tools, prompts and
//! resources alike: the items (serialized once, when the list was built),
//! a sealed cursor bound to the list's version, degraded upstreams, and for
//! modern clients `resultType`, `ttlMs`, `cacheScope` and `serverInfo`.

use http::{Response, StatusCode};
use junction_catalog::cursor;
use junction_catalog::lists::MergedList;
use junction_protocol::jsonrpc::{result_bytes_of_json, Id, RawParams};
use junction_protocol::meta;
use serde_json::{Map, Value};

use crate::caps::server_info;
use crate::context::{param_str, ClientSide, Cx};
use crate::error::GatewayError;
use crate::response::{self, Body};

/// One page of a merged list as the client's result: `{key: [...], nextCursor}`
/// plus, for modern clients, `resultType`, `ttlMs` and `cacheScope`.
pub fn list_page(
    cx: &Cx<'_>,
    id: &Id,
    params: Option<&RawParams<'_>>,
    client: &ClientSide,
    key: &str,
    merged: &MergedList,
) -> Result<Response<Body>, GatewayError> {
    let start = match param_str(params, "cursor")? {
        None => 0,
        Some(c) => cursor::decode(&cx.state.sealer, &c, merged.version).map_err(|_| {
            GatewayError::InvalidParams(
                "cursor is invalid or from an older list; list again without a cursor".into(),
            )
        })?,
    };
    let size = cx.state.config.catalog.page_size.max(1);
    let end = start.saturating_add(size).min(merged.items.len());
    let page = merged.items.get(start..end).unwrap_or_default();
    let mut out = Vec::with_capacity(256 + page.iter().map(|i| i.get().len() + 1).sum::<usize>());
    out.extend_from_slice(format!("{{\"{key}\":[").as_bytes());
    for (n, item) in page.iter().enumerate() {
        if n > 0 {
            out.push(b',');
        }
        out.extend_from_slice(item.get().as_bytes());
    }
    out.push(b']');
    let next =
        (end < merged.items.len()).then(|| cursor::encode(&cx.state.sealer, merged.version, end));
    let shape = ListShape {
        next_cursor: next,
        degraded: &merged.degraded,
        modern: client.is_modern(),
        ttl_ms: merged.ttl_ms,
        public: merged.public && cx.state.auth.is_none(),
    };
    Ok(finish_list(id, out, shape))
}

/// What follows the items array of a list result.
pub struct ListShape<'a> {
    pub next_cursor: Option<String>,
    pub degraded: &'a [String],
    pub modern: bool,
    pub ttl_ms: u64,
    pub public: bool,
}

/// Completes `out` (which holds `{"<key>":[...]`) into a list result: cursor,
/// degraded upstreams, and for modern clients `resultType`, `ttlMs`,
/// `cacheScope` and `serverInfo`. Shared by tools, prompts and resources lists.
pub fn finish_list(id: &Id, mut out: Vec<u8>, shape: ListShape<'_>) -> Response<Body> {
    if let Some(c) = shape.next_cursor {
        out.extend_from_slice(b",\"nextCursor\":");
        out.extend_from_slice(&serde_json::to_vec(&c).unwrap_or_default());
    }
    let mut result_meta = Map::new();
    if !shape.degraded.is_empty() {
        result_meta.insert(
            meta::GATEWAY_DEGRADED.into(),
            Value::from(shape.degraded.to_vec()),
        );
    }
    if shape.modern {
        let scope = if shape.public { "public" } else { "private" };
        out.extend_from_slice(
            format!(
                ",\"resultType\":\"complete\",\"ttlMs\":{},\"cacheScope\":\"{scope}\"",
                shape.ttl_ms
            )
            .as_bytes(),
        );
        result_meta.insert(meta::SERVER_INFO.into(), server_info());
    }
    if !result_meta.is_empty() {
        out.extend_from_slice(b",\"_meta\":");
        out.extend_from_slice(&serde_json::to_vec(&result_meta).unwrap_or_default());
    }
    out.push(b'}');
    // The items were serialized by Junction when the catalog was built; the
    // page is not parsed again on every request.
    response::json(StatusCode::OK, result_bytes_of_json(id, &out))
}
