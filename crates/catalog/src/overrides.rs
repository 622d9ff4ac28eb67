//! How a route curates what it exposes (`routes[].overrides`, with
//! `upstreams[].overrides` as every route's default): per tool, prompt or
//! resource a new name (tools and prompts), title or description; per tool,
//! input-schema properties hidden from clients, or pinned to fixed values
//! that are merged into every call's arguments. Pure: applied by `merge` and
//! the list merges, keyed by the name the route would expose without them
//! (a resource by its URI).

use std::collections::BTreeMap;

use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// What to change about one tool, prompt or resource.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Override {
    /// The name clients see instead (tools, prompts).
    pub name: Option<String>,
    pub title: Option<String>,
    pub description: Option<String>,
    /// Input-schema properties clients neither see nor may send (tools).
    pub hide: Vec<String>,
    /// Input-schema properties fixed to these values: left out of the schema
    /// clients see, and set in every call's arguments (tools).
    pub pin: Vec<(String, Value)>,
    /// Where it was configured (a config key path), for messages.
    pub origin: String,
}

/// A route's overrides, keyed by default exposed name (resources: URI).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Overrides {
    pub tools: BTreeMap<String, Override>,
    pub prompts: BTreeMap<String, Override>,
    pub resources: BTreeMap<String, Override>,
}

impl Overrides {
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty() && self.prompts.is_empty() && self.resources.is_empty()
    }

    /// The default exposed name of the prompt clients know as `name` (itself
    /// when no override renamed a prompt to it).
    pub fn prompt_default_name<'a>(&'a self, name: &'a str) -> &'a str {
        self.prompts
            .iter()
            .find(|(_, o)| o.name.as_deref() == Some(name))
            .map_or(name, |(default, _)| default.as_str())
    }

    /// Whether `name` is a prompt's default name that an override replaced
    /// (so clients can no longer use it).
    pub fn prompt_renamed_away(&self, name: &str) -> bool {
        self.prompts.get(name).is_some_and(|o| o.name.is_some())
    }

    /// Overrides that matched nothing in `seen` (tools, prompts and resource
    /// URIs a merge met): their key paths, for a warning or `junction catalog`.
    pub fn unmatched<'a>(
        &'a self,
        kind: Kind,
        seen: impl Fn(&str) -> bool + 'a,
    ) -> impl Iterator<Item = &'a str> + 'a {
        let map = match kind {
            Kind::Tool => &self.tools,
            Kind::Prompt => &self.prompts,
            Kind::Resource => &self.resources,
        };
        map.iter()
            .filter(move |(k, _)| !seen(k))
            .map(|(_, o)| o.origin.as_str())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Tool,
    Prompt,
    Resource,
}

/// A tool as overridden: its exposed name, the definition clients see, and
/// the pinned arguments (raw JSON) each call gets.
pub(crate) struct CuratedTool {
    pub exposed: String,
    pub definition: Map<String, Value>,
    pub pinned: Vec<(String, Box<RawValue>)>,
}

/// Applies `o` to a tool object listed as `default` (its default exposed name).
pub(crate) fn curate_tool(o: &Override, tool: &Map<String, Value>, default: &str) -> CuratedTool {
    let exposed = o.name.clone().unwrap_or_else(|| default.to_owned());
    let mut definition = tool.clone();
    set_texts(&mut definition, o);
    let gone: Vec<&str> = o
        .hide
        .iter()
        .map(String::as_str)
        .chain(o.pin.iter().map(|(k, _)| k.as_str()))
        .collect();
    if let Some(schema) = definition
        .get_mut("inputSchema")
        .and_then(Value::as_object_mut)
    {
        if let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut) {
            props.retain(|k, _| !gone.contains(&k.as_str()));
        }
        if let Some(required) = schema.get_mut("required").and_then(Value::as_array_mut) {
            required.retain(|r| r.as_str().is_none_or(|r| !gone.contains(&r)));
        }
    }
    let pinned = o
        .pin
        .iter()
        .filter_map(|(k, v)| Some((k.clone(), serde_json::value::to_raw_value(v).ok()?)))
        .collect();
    CuratedTool {
        exposed,
        definition,
        pinned,
    }
}

/// Applies `o`'s texts (and, for a prompt, its name) to a list item.
pub(crate) fn curate_item(o: &Override, item: &mut Value, rename: bool) {
    let Some(obj) = item.as_object_mut() else {
        return;
    };
    if rename {
        if let Some(name) = &o.name {
            obj.insert("name".into(), Value::String(name.clone()));
        }
    }
    set_texts(obj, o);
}

fn set_texts(obj: &mut Map<String, Value>, o: &Override) {
    if let Some(title) = &o.title {
        obj.insert("title".into(), Value::String(title.clone()));
    }
    if let Some(description) = &o.description {
        obj.insert("description".into(), Value::String(description.clone()));
    }
}

/// `arguments` (a JSON object, or absent) with the pinned members set: a
/// pinned value replaces whatever the client sent under that key. `None`
/// when `arguments` is not an object.
pub fn with_pinned(
    arguments: Option<&RawValue>,
    pinned: &[(String, Box<RawValue>)],
) -> Option<Box<RawValue>> {
    let mut members: BTreeMap<String, Box<RawValue>> = match arguments {
        None => BTreeMap::new(),
        Some(raw) => serde_json::from_str(raw.get()).ok()?,
    };
    for (k, v) in pinned {
        members.insert(k.clone(), v.clone());
    }
    serde_json::value::to_raw_value(&members).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_curated_tool_hides_and_pins_properties_and_keeps_the_rest() {
        let tool = json!({"name": "add", "description": "adds",
            "inputSchema": {"type": "object", "properties": {"a": {}, "b": {}, "debug": {}, "units": {}},
                            "required": ["a", "units"]}});
        let o = Override {
            name: Some("sum".into()),
            description: Some("Adds two numbers".into()),
            hide: vec!["debug".into()],
            pin: vec![("units".into(), json!("metric"))],
            ..Override::default()
        };
        let c = curate_tool(&o, tool.as_object().unwrap(), "calc__add");
        assert_eq!(c.exposed, "sum");
        assert_eq!(
            Value::Object(c.definition),
            json!({"name": "add", "description": "Adds two numbers",
                "inputSchema": {"type": "object", "properties": {"a": {}, "b": {}}, "required": ["a"]}})
        );
        assert_eq!(c.pinned.len(), 1);
        assert_eq!(c.pinned[0].1.get(), "\"metric\"");
    }

    #[test]
    fn pinned_values_win_over_what_the_client_sent() {
        let pinned = vec![(
            "units".to_string(),
            RawValue::from_string("\"metric\"".into()).unwrap(),
        )];
        let args = RawValue::from_string(r#"{"a":1,"units":"imperial"}"#.into()).unwrap();
        assert_eq!(
            with_pinned(Some(&args), &pinned).unwrap().get(),
            r#"{"a":1,"units":"metric"}"#
        );
        assert_eq!(
            with_pinned(None, &pinned).unwrap().get(),
            r#"{"units":"metric"}"#
        );
        let not_object = RawValue::from_string("[1]".into()).unwrap();
        assert!(with_pinned(Some(&not_object), &pinned).is_none());
    }

    #[test]
    fn renamed_prompts_map_back_to_their_default_name() {
        let mut o = Overrides::default();
        o.prompts.insert(
            "notes__greet".into(),
            Override {
                name: Some("hello".into()),
                ..Override::default()
            },
        );
        assert_eq!(o.prompt_default_name("hello"), "notes__greet");
        assert_eq!(o.prompt_default_name("other"), "other");
        assert!(o.prompt_renamed_away("notes__greet"));
        assert!(!o.prompt_renamed_away("hello"));
    }
}
