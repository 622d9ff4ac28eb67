//! How a route curates its upstreams' tools: include/exclude globs over
//! exposed tool names, leaving out secret-looking headers, overrides
//! (`overrides`) and the upstreams' pins (`pins`).

use globset::{Glob, GlobSet, GlobSetBuilder};

use std::collections::BTreeMap;

use crate::overrides::Overrides;
use crate::pins::Pins;
use crate::CatalogError;

/// `include` empty means every tool; `exclude` always wins over `include`.
/// Globs match the name a tool would have without overrides.
#[derive(Clone, Debug)]
pub struct ToolFilter {
    include: Option<GlobSet>,
    exclude: GlobSet,
    drop_secret_headers: bool,
    overrides: Overrides,
    /// Per upstream id: the reviewed definitions its tools must match.
    pins: BTreeMap<String, Pins>,
}

impl Default for ToolFilter {
    fn default() -> Self {
        ToolFilter {
            include: None,
            exclude: GlobSet::empty(),
            drop_secret_headers: false,
            overrides: Overrides::default(),
            pins: BTreeMap::new(),
        }
    }
}

fn build(globs: &[String]) -> Result<GlobSet, CatalogError> {
    let mut builder = GlobSetBuilder::new();
    for glob in globs {
        let g = Glob::new(glob).map_err(|e| CatalogError::BadGlob {
            glob: glob.clone(),
            reason: e.kind().to_string(),
        })?;
        builder.add(g);
    }
    builder.build().map_err(|e| CatalogError::BadGlob {
        glob: globs.join(","),
        reason: e.to_string(),
    })
}

impl ToolFilter {
    pub fn new(include: &[String], exclude: &[String]) -> Result<Self, CatalogError> {
        let include = if include.is_empty() {
            None
        } else {
            Some(build(include)?)
        };
        Ok(ToolFilter {
            include,
            exclude: build(exclude)?,
            drop_secret_headers: false,
            overrides: Overrides::default(),
            pins: BTreeMap::new(),
        })
    }

    /// The pins of the route's upstreams that have any.
    pub fn with_pins(mut self, pins: BTreeMap<String, Pins>) -> Self {
        self.pins = pins;
        self
    }

    pub fn pins(&self, upstream: &str) -> Option<&Pins> {
        self.pins.get(upstream)
    }

    /// The route's renames, texts, hidden and pinned properties.
    pub fn with_overrides(mut self, overrides: Overrides) -> Self {
        self.overrides = overrides;
        self
    }

    pub fn overrides(&self) -> &Overrides {
        &self.overrides
    }

    /// Also leave out tools whose `x-mcp-header` parameters look like secrets.
    pub fn dropping_secret_headers(mut self, drop: bool) -> Self {
        self.drop_secret_headers = drop;
        self
    }

    pub fn drops_secret_headers(&self) -> bool {
        self.drop_secret_headers
    }

    /// Whether a tool with this exposed name belongs on the route.
    pub fn allows(&self, exposed: &str) -> bool {
        let included = self
            .include
            .as_ref()
            .is_none_or(|set| set.is_match(exposed));
        included && !self.exclude.is_match(exposed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn empty_include_allows_all_and_exclude_wins() {
        let f = ToolFilter::new(&[], &s(&["alpha__secret_*"])).unwrap();
        assert!(f.allows("alpha__get"));
        assert!(f.allows("beta__x.y"));
        assert!(!f.allows("alpha__secret_key"));

        let f = ToolFilter::new(&s(&["alpha__*", "beta__get"]), &s(&["alpha__drop"])).unwrap();
        assert!(f.allows("alpha__a.b"));
        assert!(f.allows("beta__get"));
        assert!(!f.allows("beta__put"));
        assert!(!f.allows("alpha__drop"));
        assert!(ToolFilter::default().allows("anything"));
    }

    #[test]
    fn bad_glob_is_an_error() {
        let err = ToolFilter::new(&s(&["a[b"]), &[]).unwrap_err();
        assert!(err.to_string().contains("a[b"), "{err}");
    }
}

/// Names of `x-mcp-header` parameters that look like secrets (their values would
/// travel in headers every intermediary can read). Case-insensitive substring
/// match on the annotation and the property name.
pub fn secret_like_headers(params: &[junction_protocol::xmcp::HeaderParam]) -> Vec<String> {
    const WORDS: &[&str] = &[
        "password",
        "passwd",
        "token",
        "secret",
        "key",
        "authorization",
        "credential",
    ];
    params
        .iter()
        .filter(|p| {
            let property = p.path.last().map(String::as_str).unwrap_or("");
            [p.name.as_str(), property]
                .iter()
                .any(|n| WORDS.iter().any(|w| n.to_ascii_lowercase().contains(w)))
        })
        .map(|p| p.header.clone())
        .collect()
}

#[cfg(test)]
mod secret_tests {
    use super::*;
    use junction_protocol::xmcp::header_params;
    use serde_json::json;

    #[test]
    fn secret_like_annotations_are_found() {
        let schema = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "apiKey": {"type": "string", "x-mcp-header": "Api-Key"},
            "x": {"type": "string", "x-mcp-header": "Session-Token"}}});
        let params = header_params(&schema).unwrap();
        let mut found = secret_like_headers(&params);
        found.sort();
        assert_eq!(found, vec!["Mcp-Param-Api-Key", "Mcp-Param-Session-Token"]);
    }
}
