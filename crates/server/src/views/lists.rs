//! A merged prompt or resource list: items serialized once, a version bound
//! into its cursors, and one page of it as the client's result.

use http::{Response, StatusCode};
use junction_catalog::cursor;
use junction_protocol::jsonrpc::{result_bytes_of_json, Id, RawParams};
use junction_protocol::meta;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::error::GatewayError;
use crate::forward::Contribution;
use crate::mcp::{param_str, Cx};
use crate::modern::server_info;
use crate::response::{self, Body};
use crate::tools::ClientSide;

/// A merged list, items serialized once, with what the result hints need.
pub(crate) struct Merged {
    pub items: Vec<Box<RawValue>>,
    pub version: u64,
    pub ttl_ms: u64,
    pub public: bool,
    pub degraded: Vec<String>,
}

impl Merged {
    /// `kind` goes into the version, so a cursor of one list never pages another.
    pub fn new(
        kind: &str,
        items: Vec<Value>,
        contributions: &[Contribution],
        degraded: Vec<String>,
    ) -> Merged {
        let mut h = Sha256::new();
        h.update(kind.as_bytes());
        let items: Vec<Box<RawValue>> = items
            .iter()
            .filter_map(|v| serde_json::value::to_raw_value(v).ok())
            .collect();
        for i in &items {
            h.update([0u8]);
            h.update(i.get().as_bytes());
        }
        let digest = h.finalize();
        let mut v = [0u8; 8];
        v.copy_from_slice(&digest[..8]);
        Merged {
            items,
            version: u64::from_be_bytes(v),
            ttl_ms: contributions.iter().map(|c| c.ttl_ms).min().unwrap_or(0),
            public: contributions.iter().all(|c| c.public),
            degraded,
        }
    }
}

/// One page of a merged list as the client's result: `{key: [...], nextCursor}`
/// plus, for modern clients, `resultType`, `ttlMs` and `cacheScope`.
pub(crate) fn list_page(
    cx: &Cx<'_>,
    id: &Id,
    params: Option<&RawParams>,
    client: &ClientSide,
    key: &str,
    merged: &Merged,
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
        modern: matches!(client, ClientSide::Modern { .. }),
        ttl_ms: merged.ttl_ms,
        public: merged.public && cx.state.auth.is_none(),
    };
    Ok(finish_list(id, out, shape))
}

/// What follows the items array of a list result.
pub(crate) struct ListShape<'a> {
    pub next_cursor: Option<String>,
    pub degraded: &'a [String],
    pub modern: bool,
    pub ttl_ms: u64,
    pub public: bool,
}

/// Completes `out` (which holds `{"<key>":[...]`) into a list result: cursor,
/// degraded upstreams, and for modern clients `resultType`, `ttlMs`,
/// `cacheScope` and `serverInfo`. Shared by tools, prompts and resources lists.
pub(crate) fn finish_list(id: &Id, mut out: Vec<u8>, shape: ListShape<'_>) -> Response<Body> {
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
