//! What one subscriber sees, reduced to a digest per list: its route's
//! merged lists after include/exclude and, for tools, its authorization. Two
//! equal digests mean nothing it could list changed.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use super::Wants;
use crate::mcp::Cx;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Digests {
    pub(super) tools: Option<u64>,
    pub(super) prompts: Option<u64>,
    pub(super) resources: Option<u64>,
}

/// Digests of the lists the caller of `cx` sees, for the kinds it wants.
pub(super) async fn visible(cx: &Cx<'_>, w: &Wants) -> Digests {
    let mut d = Digests::default();
    if w.tools {
        let catalog = crate::tools::route_catalog(cx).await;
        let mut h = DefaultHasher::new();
        let grant = match (&cx.state.auth, &cx.identity) {
            (Some(auth), Some(p)) => Some((auth, p)),
            _ => None,
        };
        for t in &catalog.tools {
            if grant.is_none_or(|(a, p)| a.authorizer.allows(p, &t.exposed)) {
                t.exposed.hash(&mut h);
                t.definition.get().hash(&mut h);
            }
        }
        d.tools = Some(h.finish());
    }
    if w.prompts {
        d.prompts = Some(fanned_digest(cx, &[("prompts/list", "prompts")]).await);
    }
    if w.resources {
        let methods = [
            ("resources/list", "resources"),
            ("resources/templates/list", "resourceTemplates"),
        ];
        d.resources = Some(fanned_digest(cx, &methods).await);
    }
    d
}

async fn fanned_digest(cx: &Cx<'_>, methods: &[(&str, &str)]) -> u64 {
    let mut h = DefaultHasher::new();
    for (method, key) in methods {
        let fanned = crate::forward::fan_out(cx, method, key).await;
        for c in &fanned.contributions {
            c.upstream.hash(&mut h);
            for item in &c.items {
                item.to_string().hash(&mut h);
            }
        }
    }
    h.finish()
}
