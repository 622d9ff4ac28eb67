//! The figment layers: YAML document, then `JUNCTION_…` environment pairs
//! (`__` nests), merged into one JSON tree for the validator to walk.
//! Defaults are applied by the validator, per key, so a value left out and a
//! value given are checked by the same code.

use figment::providers::{Format, Serialized, Yaml};
use figment::Figment;
use serde_json::{Map, Value};

use crate::error::{ConfigError, ConfigErrors};

pub(crate) const ENV_PREFIX: &str = "JUNCTION_";
const ENV_SPLIT: &str = "__";

/// Merged document plus, for each key set from the environment, the
/// variable that set it (so errors can name it).
pub(crate) struct Merged {
    pub value: Value,
    pub env_keys: Vec<(String, String)>,
}

pub(crate) fn merge(yaml: &str, env: &[(String, String)]) -> Result<Merged, ConfigErrors> {
    let (overrides, env_keys) = env_overrides(env)?;
    let mut figment = Figment::new();
    if !yaml_is_empty(yaml) {
        figment = figment.merge(Yaml::string(yaml));
    }
    let figment = figment.merge(Serialized::defaults(Value::Object(overrides)));
    match figment.extract::<Value>() {
        Ok(value) => Ok(Merged { value, env_keys }),
        Err(err) => Err(ConfigErrors {
            errors: err
                .into_iter()
                .map(|e| {
                    let path = e.path.join(".");
                    let message = if path.is_empty() {
                        format!("not a valid config document: {}", e.kind)
                    } else {
                        e.kind.to_string()
                    };
                    ConfigError { path, message }
                })
                .collect(),
        }),
    }
}

/// A file with only comments (or nothing) is an empty mapping, not an error
/// of its own: the validator then reports what is missing.
fn yaml_is_empty(yaml: &str) -> bool {
    matches!(serde_yaml::from_str::<Value>(yaml), Ok(Value::Null))
}

type Overrides = (Map<String, Value>, Vec<(String, String)>);

/// Only variables of the form `JUNCTION_<SECTION>__<KEY>…` are config:
/// every section is a mapping, so a top-level scalar never comes from the
/// environment, and names like `JUNCTION_STATE_KEY` (a secret that
/// `request_state.secret_env` may point at) stay out of the config tree.
fn env_overrides(env: &[(String, String)]) -> Result<Overrides, ConfigErrors> {
    let mut pairs: Vec<&(String, String)> = env
        .iter()
        .filter(|(name, _)| {
            name.strip_prefix(ENV_PREFIX)
                .is_some_and(|rest| rest.contains(ENV_SPLIT))
        })
        .collect();
    pairs.sort();
    let mut root = Map::new();
    let mut keys = Vec::new();
    let mut errors = Vec::new();
    for (name, raw) in pairs {
        let rest = &name[ENV_PREFIX.len()..];
        let segments: Vec<String> = rest.split(ENV_SPLIT).map(str::to_ascii_lowercase).collect();
        let path = segments.join(".");
        if segments.iter().any(String::is_empty) {
            errors.push(env_error(
                name,
                "empty key segment (check for `___` or a trailing `__`)",
            ));
            continue;
        }
        if segments
            .iter()
            .any(|s| s.bytes().all(|b| b.is_ascii_digit()))
        {
            errors.push(env_error(
                name,
                "list entries cannot be set from the environment; set the whole list in the file",
            ));
            continue;
        }
        if insert(&mut root, &segments, env_value(raw)).is_err() {
            errors.push(env_error(
                name,
                "conflicts with another JUNCTION_ variable that sets a parent or child of this key",
            ));
            continue;
        }
        keys.push((path, name.clone()));
    }
    if errors.is_empty() {
        Ok((root, keys))
    } else {
        Err(ConfigErrors { errors })
    }
}

fn env_error(name: &str, message: &str) -> ConfigError {
    ConfigError {
        path: String::new(),
        message: format!("environment variable {name}: {message}"),
    }
}

/// Values read like YAML scalars (`8080` is a number, `1MiB` a string,
/// `[a, b]` a list); an empty value is the empty string.
fn env_value(raw: &str) -> Value {
    if raw.is_empty() {
        return Value::String(String::new());
    }
    serde_yaml::from_str::<Value>(raw).unwrap_or_else(|_| Value::String(raw.to_owned()))
}

fn insert(map: &mut Map<String, Value>, segments: &[String], value: Value) -> Result<(), ()> {
    let Some((first, rest)) = segments.split_first() else {
        return Err(());
    };
    if rest.is_empty() {
        if map.contains_key(first) {
            return Err(());
        }
        map.insert(first.clone(), value);
        return Ok(());
    }
    let child = map
        .entry(first.clone())
        .or_insert_with(|| Value::Object(Map::new()));
    match child {
        Value::Object(inner) => insert(inner, rest, value),
        _ => Err(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn env_nests_lowercases_and_parses_scalars() {
        let m = merge(
            "server: {listen: 1.2.3.4:5}\nlimits: {max_header_count: 7}",
            &env(&[
                ("JUNCTION_SERVER__PUBLIC_URL", "http://x"),
                ("JUNCTION_LIMITS__MAX_HEADER_COUNT", "9"),
                ("JUNCTION_STATE_KEY", "not config"),
                ("HOME", "/root"),
            ]),
        )
        .unwrap();
        assert_eq!(m.value["server"]["listen"], "1.2.3.4:5");
        assert_eq!(m.value["server"]["public_url"], "http://x");
        assert_eq!(m.value["limits"]["max_header_count"], 9);
        assert!(m.value.get("state_key").is_none());
        assert_eq!(m.env_keys.len(), 2);
    }

    #[test]
    fn comment_only_file_is_an_empty_mapping() {
        let m = merge("# nothing\n", &[]).unwrap();
        assert_eq!(m.value, Value::Object(Map::new()));
    }

    #[test]
    fn yaml_syntax_error_is_reported() {
        let e = merge("server: [unclosed", &[]).err().unwrap();
        assert_eq!(e.len(), 1);
    }

    #[test]
    fn env_conflicts_and_indices_are_reported() {
        let e = merge(
            "",
            &env(&[
                ("JUNCTION_SERVER__TLS", "x"),
                ("JUNCTION_SERVER__TLS__CERT_FILE", "y"),
                ("JUNCTION_UPSTREAMS__0__URL", "http://x"),
            ]),
        )
        .err()
        .unwrap();
        assert_eq!(e.len(), 2, "{e}");
    }
}
