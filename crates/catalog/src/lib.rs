//! junction-catalog: per-upstream tool lists in, one merged, named, ordered
//! catalog per route out (DESIGN §2), with its route table, pre-serialized
//! list pages, sealed cursors and the per-upstream list cache. The same for
//! prompt and resource lists ([`lists`]): their merge (prompts named like
//! tools, resource URIs namespaced when two upstreams list one), the merged
//! list serialized once, the per-upstream [`ListCache`] and the per-route
//! [`ResourceIndex`] of who serves which URI.
//!
//! Merging is a pure function: the same inputs always give the same bytes and
//! the same version. This crate never touches sockets; it reaches upstreams
//! only through the [`ToolSource`] trait, which `junction-upstream` implements
//! and tests fake. Prompt and resource lists are fetched by the server, which
//! hands them here as [`lists::Fanned`].

pub mod cache;
mod catalog;
pub mod cursor;
mod filter;
pub mod lists;
mod memo;
mod merge;
mod naming;
pub mod overrides;
pub mod pins;

pub use cache::{fan_out, Deadline, SourceError, SourcePage, ToolCache, ToolSource};
pub use catalog::{Catalog, DropKind, Dropped, ExposedTool};
pub use cursor::CursorError;
pub use filter::{secret_like_headers, ToolFilter};
pub use lists::{ListCache, ResourceIndex};
pub use memo::MergedCache;
pub use merge::{merge, ListStatus, UpstreamTools};
pub use naming::NamingRules;
pub use overrides::{Override, Overrides};
pub use pins::{PinFile, Pins};

/// Errors from building catalog inputs (config-time, not per request).
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("invalid tool glob {glob:?}: {reason}")]
    BadGlob { glob: String, reason: String },
}
