//! Definition pinning against tool "rug pulls" (an upstream silently changing
//! a tool's description or schema after review): a digest of each reviewed
//! tool's definition, kept with the definition itself in a pin file the
//! operator approves (`junction catalog --write-pins`). A listed tool whose
//! definition no longer matches its pin, or (by default) that has no pin, is
//! quarantined: left out of the catalog, and a call to it is refused naming
//! what changed. Pure: the merge checks, the server reads files.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// The members of a tool definition a pin covers: what a model reads and
/// what a call must look like.
const PINNED_MEMBERS: [&str; 6] = [
    "name",
    "title",
    "description",
    "inputSchema",
    "outputSchema",
    "annotations",
];

/// One reviewed tool: its digest and the definition it was taken from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pin {
    pub digest: String,
    pub definition: Value,
}

/// One upstream's pins, as its pin file holds them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PinFile {
    pub tools: BTreeMap<String, Pin>,
}

/// An upstream's pins as the merge checks them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Pins {
    pub file: PinFile,
    /// A listed tool without a pin is quarantined too (default), or allowed.
    pub allow_unpinned: bool,
}

/// The pinned part of a tool definition, keys sorted (serde_json's map is
/// ordered), so the same definition always gives the same digest.
pub fn pinned_part(tool: &Map<String, Value>) -> Value {
    let mut out = Map::new();
    for k in PINNED_MEMBERS {
        if let Some(v) = tool.get(k) {
            out.insert(k.to_owned(), v.clone());
        }
    }
    Value::Object(out)
}

/// `sha256:<hex>` of the pinned part of `tool`.
pub fn digest(tool: &Map<String, Value>) -> String {
    let text = pinned_part(tool).to_string();
    format!("sha256:{:x}", Sha256::digest(text.as_bytes()))
}

/// A pin for `tool` as listed now (what `--write-pins` records).
pub fn pin(tool: &Map<String, Value>) -> Pin {
    Pin {
        digest: digest(tool),
        definition: pinned_part(tool),
    }
}

impl Pins {
    /// Why `tool` (the upstream's `name`) is quarantined, if it is: the
    /// members that changed since it was pinned, or that it has no pin.
    pub fn check(&self, name: &str, tool: &Map<String, Value>) -> Option<String> {
        let Some(p) = self.file.tools.get(name) else {
            return (!self.allow_unpinned).then(|| {
                "it has no pin: review it, then record it with junction catalog --write-pins"
                    .to_owned()
            });
        };
        if p.digest == digest(tool) {
            return None;
        }
        Some(format!(
            "its definition changed since it was pinned ({}): review the change (junction catalog --diff), then update the pin",
            changes(&p.definition, &pinned_part(tool)).join(", ")
        ))
    }
}

/// The pinned members that differ between two pinned parts.
pub fn changes(pinned: &Value, now: &Value) -> Vec<String> {
    let changed: Vec<String> = PINNED_MEMBERS
        .iter()
        .filter(|k| pinned.get(**k) != now.get(**k))
        .map(|k| (*k).to_owned())
        .collect();
    if changed.is_empty() {
        // The pin's digest does not match its own definition (edited by hand).
        vec!["digest".to_owned()]
    } else {
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn the_digest_covers_what_a_model_reads_and_ignores_member_order_and_the_rest() {
        let a = obj(
            json!({"name": "t", "description": "d", "inputSchema": {"type": "object", "x": 1}, "_meta": {"k": 1}}),
        );
        let b = obj(
            json!({"inputSchema": {"x": 1, "type": "object"}, "description": "d", "name": "t"}),
        );
        assert_eq!(digest(&a), digest(&b));
        let c = obj(
            json!({"name": "t", "description": "d (now also exfiltrates)", "inputSchema": {"type": "object", "x": 1}}),
        );
        assert_ne!(digest(&a), digest(&c));
    }

    #[test]
    fn a_changed_or_unpinned_tool_is_quarantined_with_the_reason() {
        let reviewed =
            obj(json!({"name": "t", "description": "d", "inputSchema": {"type": "object"}}));
        let mut pins = Pins::default();
        pins.file.tools.insert("t".into(), pin(&reviewed));
        assert_eq!(pins.check("t", &reviewed), None);
        let pulled = obj(
            json!({"name": "t", "description": "d", "inputSchema": {"type": "object", "properties": {"ssh_key": {}}}}),
        );
        let why = pins.check("t", &pulled).unwrap_or_default();
        assert!(why.contains("(inputSchema)"), "{why}");
        assert!(pins
            .check("new", &reviewed)
            .unwrap_or_default()
            .contains("no pin"));
        pins.allow_unpinned = true;
        assert_eq!(pins.check("new", &reviewed), None);
    }
}
