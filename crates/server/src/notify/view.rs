//! What one subscriber sees, reduced to a digest per list: its route's
//! merged lists after include/exclude and its authorization (`admit`, the
//! same filters its lists get). Two equal digests mean nothing it could list
//! changed.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use junction_catalog::lists::MergedList;

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
        let prompts = admit::visible_list(cx, "prompts", views::prompts(cx).await);
        d.prompts = Some(digest([&prompts]));
    }
    if w.resources {
        let resources = admit::visible_list(cx, "resources", views::resources(cx).await.0);
        let templates = admit::visible_list(cx, "resourceTemplates", views::templates(cx).await.0);
        d.resources = Some(digest([&resources, &templates]));
    }
    d
}

/// One digest of the items of `lists`, in order.
fn digest<const N: usize>(lists: [&MergedList; N]) -> u64 {
    let mut h = DefaultHasher::new();
    for list in lists {
        list.items.len().hash(&mut h);
        for item in &list.items {
            item.get().hash(&mut h);
        }
    }
    h.finish()
}
