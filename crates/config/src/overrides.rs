//! `routes[].overrides` and `upstreams[].overrides`: how a route curates what
//! it exposes. Keys are names (a route's: the names it would expose without
//! overrides; an upstream's: its own names) and resource URIs; values rename
//! (tools, prompts), retitle and redescribe, and for tools hide input-schema
//! properties or pin them to fixed values. Whether a key names a real tool is
//! known only once upstreams answer: `junction catalog` reports the ones that
//! match nothing.

use serde_json::Value;

use crate::walk::{Ctx, Obj};

/// One entry's changes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OverrideConfig {
    pub name: Option<String>,
    pub title: Option<String>,
    pub description: Option<String>,
    pub hide: Vec<String>,
    pub pin: Vec<(String, Value)>,
    /// This entry's key path, for messages.
    pub path: String,
}

/// The overrides of one route or upstream, by kind, in key order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OverridesConfig {
    pub tools: Vec<(String, OverrideConfig)>,
    pub prompts: Vec<(String, OverrideConfig)>,
    pub resources: Vec<(String, OverrideConfig)>,
}

impl OverridesConfig {
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty() && self.prompts.is_empty() && self.resources.is_empty()
    }
}

const TOOL_KEYS: &[&str] = &["name", "title", "description", "hide", "pin"];
const PROMPT_KEYS: &[&str] = &["name", "title", "description"];
const RESOURCE_KEYS: &[&str] = &["title", "description"];

pub(crate) fn overrides(ctx: &mut Ctx, o: &Obj) -> OverridesConfig {
    let Some(v) = o.get("overrides") else {
        return OverridesConfig::default();
    };
    let path = o.key_path("overrides");
    let top = Obj::new(ctx, Some(v), &path, &["tools", "prompts", "resources"]);
    let mut out = OverridesConfig {
        tools: entries(ctx, &top, "tools", TOOL_KEYS),
        prompts: entries(ctx, &top, "prompts", PROMPT_KEYS),
        resources: entries(ctx, &top, "resources", RESOURCE_KEYS),
    };
    // Two entries may not claim one name: the second is the error.
    for list in [&mut out.tools, &mut out.prompts] {
        let mut claimed: Vec<(String, String)> = Vec::new();
        for (key, entry) in list.iter() {
            let exposed = entry.name.clone().unwrap_or_else(|| key.clone());
            if let Some((_, first)) = claimed.iter().find(|(n, _)| *n == exposed) {
                ctx.err(
                    &entry.path,
                    format!("exposes {exposed:?}, as {first} already does"),
                );
            } else {
                claimed.push((exposed, entry.path.clone()));
            }
        }
    }
    out
}

fn entries(ctx: &mut Ctx, top: &Obj, kind: &str, known: &[&str]) -> Vec<(String, OverrideConfig)> {
    let Some(v) = top.get(kind) else {
        return Vec::new();
    };
    let path = top.key_path(kind);
    let Value::Object(map) = v else {
        ctx.err(&path, "expected a mapping of name (or URI) to its changes");
        return Vec::new();
    };
    let mut out = Vec::new();
    for (key, value) in map {
        let entry_path = format!("{path}.{key}");
        let e = Obj::new(ctx, Some(value), &entry_path, known);
        let name = e.nonempty(ctx, "name");
        if let Some(n) = &name {
            if !valid_name(n) {
                ctx.err(
                    &e.key_path("name"),
                    format!("{n:?} is not 1..=128 characters of [A-Za-z0-9_.-]"),
                );
            }
        }
        let hide: Vec<String> = e
            .strings(ctx, "hide")
            .unwrap_or_default()
            .into_iter()
            .map(|(_, s)| s)
            .collect();
        let pin: Vec<(String, Value)> = match e.get("pin") {
            None => Vec::new(),
            Some(Value::Object(m)) => m.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            Some(_) => {
                ctx.err(
                    &e.key_path("pin"),
                    "expected a mapping of input property to its fixed value",
                );
                Vec::new()
            }
        };
        for (k, _) in &pin {
            if hide.contains(k) {
                ctx.err(
                    &format!("{}.{k}", e.key_path("pin")),
                    "a property is either hidden or pinned, not both",
                );
            }
        }
        out.push((
            key.clone(),
            OverrideConfig {
                name,
                title: e.nonempty(ctx, "title"),
                description: e.string(ctx, "description"),
                hide,
                pin,
                path: entry_path,
            },
        ));
    }
    out
}

/// The spec's tool-name rule (also used for prompt names here).
fn valid_name(n: &str) -> bool {
    (1..=128).contains(&n.len())
        && n.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}
