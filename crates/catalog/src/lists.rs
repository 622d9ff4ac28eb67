//! Prompt and resource lists: what is pure about them. The server fans a list
//! method out to the route's upstreams (it holds the clients); everything
//! after that lives here: the merge (prompts named like tools, resources keyed
//! by URI and namespaced when two upstreams list the same one), the merged
//! list serialized once with its version, the reversible namespacing of
//! URIs, and the per-upstream list cache and per-route URI memo
//! ([`ListCache`], [`ResourceIndex`]) as owned values.
//!
//! Order is config order, then name (or URI) bytewise, as for tools: the same
//! contributions always give the same bytes and the same version.

use std::collections::{HashMap, HashSet};

use serde_json::value::RawValue;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::naming::NamingRules;
use crate::overrides::{curate_item, Overrides};

mod cache;

pub use cache::{ListCache, Listed, Lookup, ResourceIndex};

/// One upstream's whole list for a method.
#[derive(Clone, Debug, PartialEq)]
pub struct Contribution {
    pub upstream: String,
    pub items: Vec<Value>,
    pub ttl_ms: u64,
    pub public: bool,
}

/// Every upstream that answered, in config order, and those that failed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Fanned {
    pub contributions: Vec<Contribution>,
    pub degraded: Vec<String>,
}

/// A merged list, items serialized once, with what the result hints need.
#[derive(Debug)]
pub struct MergedList {
    pub items: Vec<Box<RawValue>>,
    /// Bound into the list's cursors.
    pub version: u64,
    /// The shortest TTL of the contributions (0 when there are none).
    pub ttl_ms: u64,
    /// Every contribution was public.
    pub public: bool,
    pub degraded: Vec<String>,
}

impl MergedList {
    /// `kind` goes into the version, so a cursor of one list never pages another.
    pub fn new(
        kind: &str,
        items: Vec<Value>,
        contributions: &[Contribution],
        degraded: Vec<String>,
    ) -> MergedList {
        let items: Vec<Box<RawValue>> = items
            .iter()
            .filter_map(|v| serde_json::value::to_raw_value(v).ok())
            .collect();
        MergedList {
            version: version(kind, &items),
            items,
            ttl_ms: contributions.iter().map(|c| c.ttl_ms).min().unwrap_or(0),
            public: contributions.iter().all(|c| c.public),
            degraded,
        }
    }

    /// The items `keep` keeps (the ones a caller may see), with their own
    /// version, so a cursor of one caller's list never pages another's; not
    /// public, since it depends on who asks.
    pub fn filtered(&self, kind: &str, mut keep: impl FnMut(&RawValue) -> bool) -> MergedList {
        let items: Vec<Box<RawValue>> = self.items.iter().filter(|i| keep(i)).cloned().collect();
        MergedList {
            version: version(kind, &items),
            items,
            ttl_ms: self.ttl_ms,
            public: false,
            degraded: self.degraded.clone(),
        }
    }

    /// The items from `start`, at most `size` of them (0 = all), and where the
    /// next page starts if there is one. A start past the end is an empty page.
    pub fn page(&self, start: usize, size: usize) -> (&[Box<RawValue>], Option<usize>) {
        let len = self.items.len();
        let end = if size == 0 {
            len
        } else {
            start.saturating_add(size).min(len)
        };
        let page = self.items.get(start..end).unwrap_or_default();
        (page, (end < len).then_some(end))
    }
}

/// The first 8 bytes of SHA-256 over `kind` and the items: `kind` goes into
/// it, so a cursor of one list never pages another.
fn version(kind: &str, items: &[Box<RawValue>]) -> u64 {
    let mut h = Sha256::new();
    h.update(kind.as_bytes());
    for i in items {
        h.update([0u8]);
        h.update(i.get().as_bytes());
    }
    let digest = h.finalize();
    let mut v = [0u8; 8];
    v.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(v)
}

/// Prompts of every contributor, named `{upstream}{separator}{name}` (the
/// name alone on `prefix: never` routes), config order then name bytewise.
/// A prompt without a string name, or whose exposed name an earlier one
/// already has, is left out with a warning.
pub fn merge_prompts(fanned: Fanned, naming: &NamingRules, overrides: &Overrides) -> MergedList {
    let mut seen = HashSet::new();
    let mut items = Vec::new();
    for c in &fanned.contributions {
        let mut named: Vec<(String, Value)> = c
            .items
            .iter()
            .filter_map(|p| match p.get("name").and_then(Value::as_str) {
                Some(n) => Some((n.to_owned(), p.clone())),
                None => {
                    tracing::warn!(upstream = %c.upstream, "prompt without a name left out");
                    None
                }
            })
            .collect();
        named.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        for (name, mut prompt) in named {
            let default = naming.full_name(&c.upstream, &name);
            let o = overrides.prompts.get(&default);
            let exposed = o.and_then(|o| o.name.clone()).unwrap_or(default);
            if !seen.insert(exposed.clone()) {
                tracing::warn!(upstream = %c.upstream, prompt = %name, "duplicate prompt name left out");
                continue;
            }
            if let Some(obj) = prompt.as_object_mut() {
                obj.insert("name".into(), Value::String(exposed));
            }
            if let Some(o) = o {
                curate_item(o, &mut prompt, false);
            }
            items.push(prompt);
        }
    }
    MergedList::new("prompts", items, &fanned.contributions, fanned.degraded)
}

/// The route's resource overrides (texts, by URI or URI template as
/// listed) applied to merged resource or template items; `key` is `uri` or
/// `uriTemplate`.
pub fn curate_resources(items: &mut [Value], key: &str, overrides: &Overrides) {
    if overrides.resources.is_empty() {
        return;
    }
    for item in items {
        let listed = item.get(key).and_then(Value::as_str).map(str::to_owned);
        if let Some(o) = listed.and_then(|k| overrides.resources.get(&k)) {
            curate_item(o, item, false);
        }
    }
}

/// (upstream, original name) of an exposed prompt name on a route with these
/// upstreams (config order). No list is needed: the upstream id comes first
/// and cannot contain the separator. On `prefix: never` routes every name
/// belongs to the first upstream.
pub fn resolve_prompt(
    naming: &NamingRules,
    route_upstreams: &[String],
    exposed: &str,
) -> Option<(String, String)> {
    if !naming.prefix {
        return route_upstreams
            .first()
            .map(|u| (u.clone(), exposed.to_owned()));
    }
    let (upstream, original) = exposed.split_once(naming.separator.as_str())?;
    if original.is_empty() || !route_upstreams.iter().any(|u| u == upstream) {
        return None;
    }
    Some((upstream.to_owned(), original.to_owned()))
}

/// The scheme of URIs Junction namespaced because two upstreams list them.
pub const NAMESPACE: &str = "junction://";

/// The URI clients see for `uri` of `upstream` when an earlier upstream of the
/// route lists the same one.
pub fn namespaced(upstream: &str, uri: &str) -> String {
    format!("{NAMESPACE}{upstream}/{uri}")
}

/// (upstream, its own URI) of a namespaced URI naming one of the route's
/// upstreams; None for any other URI.
pub fn split_namespaced<'a>(
    uri: &'a str,
    route_upstreams: &[String],
) -> Option<(&'a str, &'a str)> {
    let (upstream, own) = uri.strip_prefix(NAMESPACE)?.split_once('/')?;
    route_upstreams
        .iter()
        .any(|u| u == upstream)
        .then_some((upstream, own))
}

/// Items of every contributor by `key` (`uri`, `uriTemplate`), config order
/// then key bytewise, each key once per upstream; a key already listed by an
/// earlier upstream is namespaced for the later one ([`namespaced`]). Items
/// without a string `key` are left out with a warning naming `what`. Returns
/// the items and, per item, (key as listed, upstream).
pub fn merge_keyed(fanned: &Fanned, key: &str, what: &str) -> (Vec<Value>, Vec<(String, String)>) {
    let mut seen: HashMap<String, String> = HashMap::new();
    let mut items = Vec::new();
    let mut owners = Vec::new();
    for c in &fanned.contributions {
        let mut keyed: Vec<(&str, &Value)> = c
            .items
            .iter()
            .filter_map(|r| match r.get(key).and_then(Value::as_str) {
                Some(k) => Some((k, r)),
                None => {
                    tracing::warn!(upstream = %c.upstream, "{what} without a {key} left out");
                    None
                }
            })
            .collect();
        keyed.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        keyed.dedup_by(|a, b| a.0 == b.0);
        for (k, r) in keyed {
            let mut item = r.clone();
            let listed = match seen.get(k) {
                None => k.to_owned(),
                Some(first) => {
                    let ns = namespaced(&c.upstream, k);
                    tracing::debug!(upstream = %c.upstream, owner = %first, "{what} {k} is also listed by an earlier upstream: exposed as {ns}");
                    if let Some(obj) = item.as_object_mut() {
                        obj.insert(key.to_owned(), Value::String(ns.clone()));
                    }
                    ns
                }
            };
            seen.entry(k.to_owned())
                .or_insert_with(|| c.upstream.clone());
            owners.push((listed, c.upstream.clone()));
            items.push(item);
        }
    }
    (items, owners)
}

/// The part of a URI template before its first expression.
pub fn literal_prefix(template: &str) -> &str {
    template.split('{').next().unwrap_or_default()
}

/// The upstream of the most specific template (longest literal prefix) for
/// `uri`, from (literal prefix, upstream) pairs in merged order; among equally
/// long prefixes the last wins.
pub fn match_template(prefixes: &[(String, String)], uri: &str) -> Option<String> {
    prefixes
        .iter()
        .filter(|(p, _)| uri.starts_with(p.as_str()))
        .max_by_key(|(p, _)| p.len())
        .map(|(_, u)| u.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_prefix_stops_at_the_first_expression() {
        assert_eq!(literal_prefix("mock://a/items/{id}"), "mock://a/items/");
        assert_eq!(literal_prefix("{+path}"), "");
        assert_eq!(literal_prefix("file:///etc"), "file:///etc");
    }

    #[test]
    fn the_longest_matching_prefix_wins() {
        let p = |a: &str, u: &str| (a.to_owned(), u.to_owned());
        let prefixes = [p("mock://", "a"), p("mock://x/", "b"), p("other://", "c")];
        assert_eq!(match_template(&prefixes, "mock://x/1"), Some("b".into()));
        assert_eq!(match_template(&prefixes, "mock://y/1"), Some("a".into()));
        assert_eq!(match_template(&prefixes, "file:///"), None);
    }

    #[test]
    fn namespaced_uris_name_a_route_upstream() {
        let ups = vec!["a".to_owned(), "b".to_owned()];
        assert_eq!(namespaced("b", "file:///x"), "junction://b/file:///x");
        assert_eq!(
            split_namespaced("junction://b/file:///x", &ups),
            Some(("b", "file:///x"))
        );
        assert_eq!(split_namespaced("junction://c/file:///x", &ups), None);
        assert_eq!(split_namespaced("file:///x", &ups), None);
    }

    #[test]
    fn pages_follow_the_catalog_convention() {
        let items: Vec<Value> = (0..5).map(Value::from).collect();
        let m = MergedList::new("k", items, &[], Vec::new());
        let (p, next) = m.page(0, 2);
        assert_eq!((p.len(), next), (2, Some(2)));
        let (p, next) = m.page(4, 2);
        assert_eq!((p.len(), next), (1, None));
        let (p, next) = m.page(9, 2);
        assert_eq!((p.len(), next), (0, None));
        let (p, next) = m.page(1, 0);
        assert_eq!((p.len(), next), (4, None));
        assert_eq!((m.ttl_ms, m.public), (0, true));
    }
}
