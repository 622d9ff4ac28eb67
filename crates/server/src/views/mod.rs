//! What a route exposes, as its clients see it: the merged tool catalog
//! (`tools`), the merged prompt and resource lists and who serves each
//! resource (`lists`), and one page of any of them as a result (`page`).
//! Built from the upstreams' cached lists by the pure merges of
//! `junction_catalog`; authorization filtering is `admit`'s.

mod lists;
mod page;
mod tools;

pub use lists::{prompt_listed, prompts, resource_owner, resources, templates, update_source};
pub use page::{finish_list, list_page, ListShape};
pub use tools::{route_catalog, route_catalog_for};
