//! What one subscriber sees, reduced to a digest per list: its route's
//! merged lists after include/exclude and, for tools, its authorization
//! (`admit::visible`, the filter its `tools/list` gets). Two equal digests
//! mean nothing it could list changed.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use crate::admit;
use crate::context::Cx;
use crate::state::{Digests, Wants};
use crate::views;

/// Digests of the lists the caller of `cx` sees, for the kinds it wants.
pub(super) async fn visible(cx: &Cx<'_>, w: &Wants) -> Digests {
    let mut d = Digests::default();
    if w.tools {
        let (catalog, _) = admit::visible(cx, views::route_catalog(cx).await);
        let mut h = DefaultHasher::new();
        for t in &catalog.tools {
            t.exposed.hash(&mut h);
            t.definition.get().hash(&mut h);
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
        let fanned = views::fan_out(cx, method, key).await;
        for c in &fanned.contributions {
            c.upstream.hash(&mut h);
            for item in &c.items {
                item.to_string().hash(&mut h);
            }
        }
    }
    h.finish()
}
