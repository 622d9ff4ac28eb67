//! The pure merge of DESIGN §2: per-upstream lists → one named, ordered,
//! validated catalog. No clocks, no I/O, no dependence on the order of `lists`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use junction_protocol::{names, xmcp};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::catalog::{Catalog, DropKind, Dropped, ExposedTool};
use crate::filter::ToolFilter;
use crate::naming::NamingRules;
use crate::overrides::{curate_tool, Kind};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ListStatus {
    /// Listed within its TTL.
    Fresh,
    /// The last good list, served after a failed refresh.
    Stale,
    /// Never answered: contributes no tools.
    Missing,
}

/// One upstream's contribution to a merge.
#[derive(Clone, Debug)]
pub struct UpstreamTools {
    pub upstream: String,
    /// Tool objects exactly as the upstream listed them (all pages).
    pub tools: Arc<Vec<Value>>,
    /// The upstream's `ttlMs`; None (legacy or absent) contributes 0.
    pub ttl_ms: Option<u64>,
    pub public: bool,
    pub status: ListStatus,
    /// Changes whenever the cached list content changes (set by `ToolCache`);
    /// `MergedCache` uses it to skip rebuilding an unchanged merge.
    pub generation: u64,
}

impl UpstreamTools {
    /// An upstream with no list (never answered).
    pub fn missing(upstream: &str) -> UpstreamTools {
        UpstreamTools {
            upstream: upstream.to_owned(),
            tools: Arc::new(Vec::new()),
            ttl_ms: None,
            public: true,
            status: ListStatus::Missing,
            generation: 0,
        }
    }
}

fn drop(upstream: &str, tool: &str, kind: DropKind, reason: impl Into<String>) -> Dropped {
    Dropped {
        upstream: upstream.to_owned(),
        tool: tool.to_owned(),
        kind,
        reason: reason.into(),
    }
}

/// Only the character rule; length is handled by shortening.
fn safe_chars(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

fn input_schema_ok(tool: &Map<String, Value>) -> Result<&Value, &'static str> {
    let schema = tool.get("inputSchema").ok_or("inputSchema is missing")?;
    let obj = schema.as_object().ok_or("inputSchema is not an object")?;
    match obj.get("type") {
        Some(Value::String(t)) if t == "object" => Ok(schema),
        _ => Err("inputSchema root does not have \"type\": \"object\""),
    }
}

/// The tool object with `name` replaced, members otherwise in their order.
fn rewrite(tool: &Map<String, Value>, exposed: &str) -> Result<Box<RawValue>, String> {
    let mut buf: Vec<u8> = Vec::with_capacity(256);
    buf.push(b'{');
    for (i, (key, value)) in tool.iter().enumerate() {
        if i > 0 {
            buf.push(b',');
        }
        serde_json::to_writer(&mut buf, key).map_err(|e| e.to_string())?;
        buf.push(b':');
        if key == "name" {
            serde_json::to_writer(&mut buf, exposed).map_err(|e| e.to_string())?;
        } else {
            serde_json::to_writer(&mut buf, value).map_err(|e| e.to_string())?;
        }
    }
    buf.push(b'}');
    let text = String::from_utf8(buf).map_err(|e| e.to_string())?;
    RawValue::from_string(text).map_err(|e| e.to_string())
}

/// Merge the route's upstream lists. `order` is the route's upstream ids in
/// config order; each id is looked up in `lists` (at most one entry per id;
/// ids absent from `lists` count as Missing, entries not in `order` are ignored).
pub fn merge(
    order: &[String],
    lists: &[UpstreamTools],
    naming: &NamingRules,
    filter: &ToolFilter,
) -> Catalog {
    let mut by_id: HashMap<&str, &UpstreamTools> = HashMap::with_capacity(lists.len());
    for list in lists {
        by_id.entry(list.upstream.as_str()).or_insert(list);
    }
    let mut tools: Vec<ExposedTool> = Vec::new();
    let mut dropped = Vec::new();
    let mut degraded = Vec::new();
    let mut taken: HashMap<String, (String, String)> = HashMap::new();
    let mut ttl: Option<u64> = None;
    let mut public = true;
    let mut visited = HashSet::new();
    let overrides = filter.overrides();
    let mut seen: HashSet<String> = HashSet::new();
    let mut quarantined: Vec<(String, String)> = Vec::new();

    for id in order {
        if !visited.insert(id.as_str()) {
            continue;
        }
        let Some(list) = by_id
            .get(id.as_str())
            .filter(|l| l.status != ListStatus::Missing)
        else {
            degraded.push(id.clone());
            continue;
        };
        if list.status == ListStatus::Stale {
            degraded.push(id.clone());
        }
        let this_ttl = list.ttl_ms.unwrap_or(0);
        ttl = Some(ttl.map_or(this_ttl, |t| t.min(this_ttl)));
        public &= list.public;

        let mut named: Vec<(&str, &Map<String, Value>)> = Vec::with_capacity(list.tools.len());
        for tool in list.tools.iter() {
            let Some(obj) = tool.as_object() else {
                dropped.push(drop(
                    id,
                    "",
                    DropKind::NotAnObject,
                    "tool is not a JSON object",
                ));
                continue;
            };
            match obj.get("name") {
                Some(Value::String(name)) => named.push((name.as_str(), obj)),
                Some(_) => {
                    dropped.push(drop(id, "", DropKind::MissingName, "name is not a string"))
                }
                None => dropped.push(drop(id, "", DropKind::MissingName, "name is missing")),
            }
        }
        // stable: among duplicate names the first as listed comes first
        named.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));

        for (original, obj) in named {
            if !names::is_valid_tool_name(original) {
                dropped.push(drop(
                    id,
                    original,
                    DropKind::InvalidName,
                    "name is not 1..=128 characters of [A-Za-z0-9_.-]",
                ));
                continue;
            }
            let full = naming.full_name(id, original);
            if !safe_chars(&full) {
                dropped.push(drop(
                    id,
                    original,
                    DropKind::InvalidName,
                    format!("exposed name {full:?} has characters outside [A-Za-z0-9_.-]"),
                ));
                continue;
            }
            let Some(exposed) = naming.fit(full) else {
                dropped.push(drop(
                    id,
                    original,
                    DropKind::NameTooLong,
                    "max_name_length leaves no room for a name",
                ));
                continue;
            };
            if !overrides.tools.is_empty() {
                seen.insert(exposed.clone());
            }
            if !filter.allows(&exposed) {
                continue;
            }
            let schema = match input_schema_ok(obj) {
                Ok(schema) => schema,
                Err(why) => {
                    dropped.push(drop(id, original, DropKind::InvalidInputSchema, why));
                    continue;
                }
            };
            let header_params = match xmcp::header_params(schema) {
                Ok(params) => params,
                Err(e) => {
                    dropped.push(drop(
                        id,
                        original,
                        DropKind::InvalidHeaderAnnotation,
                        e.to_string(),
                    ));
                    continue;
                }
            };
            if filter.drops_secret_headers() {
                let secret = crate::filter::secret_like_headers(&header_params);
                if !secret.is_empty() {
                    let why = format!(
                        "x-mcp-header parameters look like secrets: {}",
                        secret.join(", ")
                    );
                    dropped.push(drop(id, original, DropKind::SecretHeader, why));
                    continue;
                }
            }
            let curated = overrides
                .tools
                .get(&exposed)
                .map(|o| curate_tool(o, obj, &exposed));
            if let Some(why) = filter.pins(id).and_then(|p| p.check(original, obj)) {
                let name = curated.as_ref().map_or(&exposed, |c| &c.exposed);
                quarantined.push((name.clone(), why.clone()));
                dropped.push(drop(id, original, DropKind::Quarantined, why));
                continue;
            }
            let (exposed, obj, pinned) = match &curated {
                Some(c) => (c.exposed.clone(), &c.definition, c.pinned.clone()),
                None => (exposed, obj, Vec::new()),
            };
            if let Some((owner, first)) = taken.get(&exposed) {
                let (kind, reason) = if owner == id && first == original {
                    (DropKind::Duplicate, "duplicate".to_owned())
                } else {
                    (
                        DropKind::NameCollision,
                        format!("exposed name {exposed:?} already used by {owner}/{first}"),
                    )
                };
                dropped.push(drop(id, original, kind, reason));
                continue;
            }
            let definition = match rewrite(obj, &exposed) {
                Ok(def) => def,
                Err(e) => {
                    dropped.push(drop(id, original, DropKind::NotAnObject, e));
                    continue;
                }
            };
            // A valid tool name ([A-Za-z0-9_.-]) needs no escaping.
            let Ok(original_json) = RawValue::from_string(format!("\"{original}\"")) else {
                dropped.push(drop(
                    id,
                    original,
                    DropKind::InvalidName,
                    "name is not a JSON string",
                ));
                continue;
            };
            taken.insert(exposed.clone(), (id.clone(), original.to_owned()));
            tools.push(ExposedTool {
                exposed,
                upstream: id.clone(),
                original: original.to_owned(),
                original_json,
                definition,
                header_params,
                pinned,
            });
        }
    }
    let unmatched: Vec<String> = if degraded.is_empty() {
        overrides
            .unmatched(Kind::Tool, |k| seen.contains(k))
            .map(str::to_owned)
            .collect()
    } else {
        Vec::new()
    };
    let mut catalog = Catalog::build(tools, dropped, degraded, ttl.unwrap_or(0), public);
    catalog.unmatched = unmatched;
    catalog.quarantined = quarantined;
    catalog
}
