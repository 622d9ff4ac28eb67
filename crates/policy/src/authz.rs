//! Authorization rules (DESIGN §4.3): which exposed tools, prompts and
//! resource URIs a caller may see and use.
//!
//! Reading of the config: a rule grants its globs to a caller holding *every*
//! scope it lists (an empty list = any authenticated caller) and matching
//! *every* claim it lists (the caller's claim, a string or a list of strings,
//! holds one of the rule's values); a name is granted when any rule grants it;
//! a name no rule grants is denied, whatever its kind. With no rules at all,
//! authentication alone grants everything (auth turned on just to know who
//! calls).

use globset::{Glob, GlobSet, GlobSetBuilder};
use junction_config::AuthRule;
use serde_json::Value;

use crate::{PolicyError, Principal};

/// What a rule's globs are matched against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An exposed tool name.
    Tool,
    /// An exposed prompt name.
    Prompt,
    /// A resource URI (or template) as clients see it.
    Resource,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Tool => "tool",
            Kind::Prompt => "prompt",
            Kind::Resource => "resource",
        }
    }
}

pub struct Authorizer {
    rules: Vec<Rule>,
}

struct Rule {
    scopes: Vec<String>,
    claims: Vec<(String, Vec<String>)>,
    tools: GlobSet,
    prompts: GlobSet,
    resources: GlobSet,
}

impl Rule {
    fn globs(&self, kind: Kind) -> &GlobSet {
        match kind {
            Kind::Tool => &self.tools,
            Kind::Prompt => &self.prompts,
            Kind::Resource => &self.resources,
        }
    }

    fn holds(&self, p: &Principal) -> bool {
        self.scopes.iter().all(|s| p.scopes.contains(s))
            && self
                .claims
                .iter()
                .all(|(claim, values)| has_claim(&p.claims, claim, values))
    }
}

/// Whether the caller's `claim` (a string, or a list holding strings) is
/// one of `values`.
fn has_claim(claims: &Value, claim: &str, values: &[String]) -> bool {
    let accepted = |v: &Value| v.as_str().is_some_and(|s| values.iter().any(|w| w == s));
    match claims.get(claim) {
        Some(Value::Array(items)) => items.iter().any(accepted),
        Some(v) => accepted(v),
        None => false,
    }
}

fn glob_set(patterns: &[String]) -> Result<GlobSet, PolicyError> {
    let mut b = GlobSetBuilder::new();
    for pattern in patterns {
        let glob = Glob::new(pattern).map_err(|e| PolicyError::Glob {
            pattern: pattern.clone(),
            reason: e.to_string(),
        })?;
        b.add(glob);
    }
    b.build().map_err(|e| PolicyError::Glob {
        pattern: patterns.join(", "),
        reason: e.to_string(),
    })
}

impl Authorizer {
    pub fn new(rules: &[AuthRule]) -> Result<Self, PolicyError> {
        let rules = rules
            .iter()
            .map(|r| {
                Ok(Rule {
                    scopes: r.scopes.clone(),
                    claims: r.claims.clone(),
                    tools: glob_set(&r.tools)?,
                    prompts: glob_set(&r.prompts)?,
                    resources: glob_set(&r.resources)?,
                })
            })
            .collect::<Result<Vec<_>, PolicyError>>()?;
        Ok(Authorizer { rules })
    }

    /// True when there are no rules: every authenticated caller sees everything,
    /// so lists are not per-caller (no need for `cacheScope: private`).
    pub fn grants_everything(&self) -> bool {
        self.rules.is_empty()
    }

    /// Whether the caller may see and use the `kind` named `name`.
    pub fn allows(&self, p: &Principal, kind: Kind, name: &str) -> bool {
        self.rules.is_empty()
            || self
                .rules
                .iter()
                .any(|r| r.globs(kind).is_match(name) && r.holds(p))
    }

    /// Every scope named by a rule that matches `name`, sorted and without
    /// duplicates: the `scope` of the `insufficient_scope` challenge (NOTES §10:
    /// all of them in one challenge). Empty when no rule covers it, so no
    /// scope could grant it.
    pub fn scopes_granting(&self, kind: Kind, name: &str) -> Vec<String> {
        let mut out: Vec<String> = self
            .rules
            .iter()
            .filter(|r| r.globs(kind).is_match(name))
            .flat_map(|r| r.scopes.iter().cloned())
            .collect();
        out.sort();
        out.dedup();
        out
    }
}
