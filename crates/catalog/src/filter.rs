//! Route-level include/exclude globs over exposed tool names.

use globset::{Glob, GlobSet, GlobSetBuilder};

use crate::CatalogError;

/// `include` empty means every tool; `exclude` always wins over `include`.
#[derive(Clone, Debug)]
pub struct ToolFilter {
    include: Option<GlobSet>,
    exclude: GlobSet,
}

impl Default for ToolFilter {
    fn default() -> Self {
        ToolFilter {
            include: None,
            exclude: GlobSet::empty(),
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
        })
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
