//! Scope rules (DESIGN §4.3): which exposed tool names a principal's scopes grant.
//!
//! Reading of the config: a rule grants its tool globs to a caller holding
//! *every* scope it lists (an empty list = any authenticated caller); a tool is
//! granted when any rule grants it; a tool no rule grants is denied. With no
//! rules at all, authentication alone grants every tool (auth turned on just
//! to know who calls).

use globset::{Glob, GlobSet, GlobSetBuilder};
use junction_config::AuthRule;

use crate::{PolicyError, Principal};

pub struct Authorizer {
    rules: Vec<Rule>,
}

struct Rule {
    scopes: Vec<String>,
    tools: GlobSet,
}

impl Authorizer {
    pub fn new(rules: &[AuthRule]) -> Result<Self, PolicyError> {
        let rules = rules
            .iter()
            .map(|r| {
                let mut b = GlobSetBuilder::new();
                for pattern in &r.tools {
                    let glob = Glob::new(pattern).map_err(|e| PolicyError::Glob {
                        pattern: pattern.clone(),
                        reason: e.to_string(),
                    })?;
                    b.add(glob);
                }
                let tools = b.build().map_err(|e| PolicyError::Glob {
                    pattern: r.tools.join(", "),
                    reason: e.to_string(),
                })?;
                Ok(Rule {
                    scopes: r.scopes.clone(),
                    tools,
                })
            })
            .collect::<Result<Vec<_>, PolicyError>>()?;
        Ok(Authorizer { rules })
    }

    /// True when there are no rules: every authenticated caller sees everything,
    /// so `tools/list` is not per-caller (no need for `cacheScope: private`).
    pub fn grants_everything(&self) -> bool {
        self.rules.is_empty()
    }

    pub fn allows(&self, p: &Principal, exposed_tool: &str) -> bool {
        self.rules.is_empty()
            || self.rules.iter().any(|r| {
                r.scopes.iter().all(|s| p.scopes.contains(s)) && r.tools.is_match(exposed_tool)
            })
    }

    /// Every scope named by a rule that matches the tool, sorted and without
    /// duplicates: the `scope` of the `insufficient_scope` challenge (NOTES §10:
    /// all of them in one challenge). Empty when no rule covers the tool, so no
    /// scope could grant it.
    pub fn scopes_granting(&self, exposed_tool: &str) -> Vec<String> {
        let mut out: Vec<String> = self
            .rules
            .iter()
            .filter(|r| r.tools.is_match(exposed_tool))
            .flat_map(|r| r.scopes.iter().cloned())
            .collect();
        out.sort();
        out.dedup();
        out
    }
}
