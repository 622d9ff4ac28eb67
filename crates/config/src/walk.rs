//! Hand-walking the merged tree: every helper records its error and returns
//! None (or a default) so the walk goes on and every problem is reported.

use std::time::Duration;

use serde_json::{Map, Value};

use crate::error::ConfigError;

pub(crate) struct Ctx<'a> {
    pub errors: Vec<ConfigError>,
    /// (dotted key path, variable name) for keys set from the environment.
    env_keys: &'a [(String, String)],
}

impl<'a> Ctx<'a> {
    pub fn new(env_keys: &'a [(String, String)]) -> Ctx<'a> {
        Ctx {
            errors: Vec::new(),
            env_keys,
        }
    }

    pub fn err(&mut self, path: &str, message: impl Into<String>) {
        let mut message = message.into();
        let from_env = self.env_keys.iter().find(|(key, _)| {
            path == key
                || path
                    .strip_prefix(key.as_str())
                    .is_some_and(|r| r.starts_with(['.', '[']))
        });
        if let Some((_, var)) = from_env {
            message.push_str(&format!(" (set by environment variable {var})"));
        }
        self.errors.push(ConfigError {
            path: path.to_owned(),
            message,
        });
    }
}

pub(crate) fn join(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_owned()
    } else {
        format!("{parent}.{key}")
    }
}

pub(crate) fn index(parent: &str, i: usize) -> String {
    format!("{parent}[{i}]")
}

/// A mapping whose keys have been checked against the known set.
#[derive(Clone, Copy)]
pub(crate) struct Obj<'v> {
    map: Option<&'v Map<String, Value>>,
    path: &'v str,
}

pub(crate) fn describe(v: &Value) -> &'static str {
    match v {
        Value::Null => "nothing",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

impl<'v> Obj<'v> {
    /// Absent or null = empty mapping (so `auth:` with only comments is "not set").
    pub fn new(ctx: &mut Ctx, value: Option<&'v Value>, path: &'v str, known: &[&str]) -> Obj<'v> {
        let map = match value {
            None | Some(Value::Null) => None,
            Some(Value::Object(m)) => Some(m),
            Some(other) => {
                ctx.err(
                    path,
                    format!("expected a mapping, found {}", describe(other)),
                );
                None
            }
        };
        if let Some(m) = map {
            for key in m.keys() {
                if !known.contains(&key.as_str()) {
                    ctx.err(&join(path, key), unknown_key_message(key, known));
                }
            }
        }
        Obj { map, path }
    }

    pub fn path(&self) -> &'v str {
        self.path
    }

    pub fn key_path(&self, key: &str) -> String {
        join(self.path, key)
    }

    /// The value at `key` unless absent or null.
    pub fn get(&self, key: &str) -> Option<&'v Value> {
        self.map?.get(key).filter(|v| !v.is_null())
    }

    pub fn has(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    pub fn string(&self, ctx: &mut Ctx, key: &str) -> Option<String> {
        let v = self.get(key)?;
        scalar_string(ctx, &self.key_path(key), v)
    }

    /// A string that must not be empty.
    pub fn nonempty(&self, ctx: &mut Ctx, key: &str) -> Option<String> {
        let s = self.string(ctx, key)?;
        if s.is_empty() {
            ctx.err(&self.key_path(key), "must not be empty");
            return None;
        }
        Some(s)
    }

    pub fn required(&self, ctx: &mut Ctx, key: &str) -> Option<String> {
        if !self.has(key) {
            ctx.err(&self.key_path(key), "required");
            return None;
        }
        self.nonempty(ctx, key)
    }

    pub fn duration(&self, ctx: &mut Ctx, key: &str, default: Duration) -> Duration {
        let Some(v) = self.get(key) else {
            return default;
        };
        parse_duration(ctx, &self.key_path(key), v).unwrap_or(default)
    }

    /// A duration for which zero is a mistake, not a setting: a timeout, a
    /// deadline or a lifetime of 0 would fail or expire everything at once.
    pub fn positive_duration(&self, ctx: &mut Ctx, key: &str, default: Duration) -> Duration {
        let d = self.duration(ctx, key, default);
        if d.is_zero() {
            ctx.err(
                &self.key_path(key),
                "must be greater than zero: with 0 every request would time out or expire at once",
            );
            return default;
        }
        d
    }

    pub fn size(&self, ctx: &mut Ctx, key: &str, default: usize) -> usize {
        let Some(v) = self.get(key) else {
            return default;
        };
        parse_size(ctx, &self.key_path(key), v).unwrap_or(default)
    }

    /// An integer within `min..=max`.
    pub fn int(&self, ctx: &mut Ctx, key: &str, min: u64, max: u64) -> Option<u64> {
        let v = self.get(key)?;
        let path = self.key_path(key);
        let n = match v {
            Value::Number(n) => n.as_u64(),
            Value::String(s) => s.trim().parse::<u64>().ok(),
            _ => None,
        };
        match n {
            Some(n) if (min..=max).contains(&n) => Some(n),
            Some(n) => {
                ctx.err(&path, format!("must be between {min} and {max}, got {n}"));
                None
            }
            None => {
                ctx.err(
                    &path,
                    format!(
                        "expected a whole number between {min} and {max}, found {}",
                        shown(v)
                    ),
                );
                None
            }
        }
    }

    /// A boolean (`true`/`false`; env values arrive as the strings).
    pub fn boolean(&self, ctx: &mut Ctx, key: &str, default: bool) -> bool {
        match self.get(key) {
            None | Some(Value::Null) => default,
            Some(Value::Bool(b)) => *b,
            Some(Value::String(s)) if s == "true" || s == "false" => s == "true",
            Some(other) => {
                ctx.err(
                    &self.key_path(key),
                    format!("expected true or false, found {}", describe(other)),
                );
                default
            }
        }
    }

    /// One of `choices`; the index into `choices`.
    pub fn choice(&self, ctx: &mut Ctx, key: &str, choices: &[&str]) -> Option<usize> {
        let s = self.string(ctx, key)?;
        let found = choices.iter().position(|c| *c == s);
        if found.is_none() {
            ctx.err(
                &self.key_path(key),
                format!(
                    "unknown value {s:?}, expected one of: {}",
                    choices.join(", ")
                ),
            );
        }
        found
    }

    /// A list: (element path, element).
    pub fn list(&self, ctx: &mut Ctx, key: &str) -> Option<Vec<(String, &'v Value)>> {
        let v = self.get(key)?;
        let path = self.key_path(key);
        match v {
            Value::Array(items) => Some(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| (index(&path, i), item))
                    .collect(),
            ),
            other => {
                ctx.err(&path, format!("expected a list, found {}", describe(other)));
                None
            }
        }
    }

    /// A list of strings: (element path, string); bad elements are reported and skipped.
    pub fn strings(&self, ctx: &mut Ctx, key: &str) -> Option<Vec<(String, String)>> {
        let items = self.list(ctx, key)?;
        Some(
            items
                .into_iter()
                .filter_map(|(p, v)| scalar_string(ctx, &p, v).map(|s| (p, s)))
                .collect(),
        )
    }

    /// A mapping of name to scalar: (name, value path, value), sorted by name.
    pub fn string_map(&self, ctx: &mut Ctx, key: &str) -> Option<Vec<(String, String, String)>> {
        let v = self.get(key)?;
        let path = self.key_path(key);
        let Value::Object(m) = v else {
            ctx.err(&path, format!("expected a mapping, found {}", describe(v)));
            return None;
        };
        Some(
            m.iter()
                .filter_map(|(k, v)| {
                    let p = join(&path, k);
                    scalar_string(ctx, &p, v).map(|s| (k.clone(), p, s))
                })
                .collect(),
        )
    }
}

/// Strings, and numbers or booleans read as their text (YAML `PORT: 3000`).
pub(crate) fn scalar_string(ctx: &mut Ctx, path: &str, v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        other => {
            ctx.err(
                path,
                format!("expected a string, found {}", describe(other)),
            );
            None
        }
    }
}

fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        Value::Number(n) => n.to_string(),
        other => describe(other).to_owned(),
    }
}

pub(crate) fn parse_duration(ctx: &mut Ctx, path: &str, v: &Value) -> Option<Duration> {
    match v {
        Value::String(s) => match humantime::parse_duration(s.trim()) {
            Ok(d) => Some(d),
            Err(e) => {
                ctx.err(
                    path,
                    format!("invalid duration {s:?} ({e}); write e.g. \"30s\", \"250ms\", \"10m\""),
                );
                None
            }
        },
        Value::Number(n) => {
            ctx.err(
                path,
                format!("a duration needs a unit: write \"{n}s\" or \"{n}ms\""),
            );
            None
        }
        other => {
            ctx.err(
                path,
                format!(
                    "expected a duration like \"30s\", found {}",
                    describe(other)
                ),
            );
            None
        }
    }
}

/// `4MiB`, `512KiB`, `1000` (bytes), or a plain integer.
pub(crate) fn parse_size(ctx: &mut Ctx, path: &str, v: &Value) -> Option<usize> {
    let bytes = match v {
        Value::Number(n) => n
            .as_u64()
            .ok_or_else(|| format!("expected a whole number of bytes, got {n}")),
        Value::String(s) => s
            .trim()
            .parse::<bytesize::ByteSize>()
            .map(|b| b.as_u64())
            .map_err(|_| {
                format!("invalid size {s:?}; write e.g. \"4MiB\", \"512KiB\" or a number of bytes")
            }),
        other => Err(format!(
            "expected a size like \"4MiB\", found {}",
            describe(other)
        )),
    };
    match bytes.and_then(|b| usize::try_from(b).map_err(|_| "too large".to_owned())) {
        Ok(0) => {
            ctx.err(path, "must be greater than zero");
            None
        }
        Ok(b) => Some(b),
        Err(msg) => {
            ctx.err(path, msg);
            None
        }
    }
}

fn unknown_key_message(key: &str, known: &[&str]) -> String {
    let close = known
        .iter()
        .map(|k| (edit_distance(key, k), *k))
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d);
    match close {
        Some((_, k)) => format!("unknown key (did you mean `{k}`?)"),
        None => format!("unknown key (expected one of: {})", known.join(", ")),
    }
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn size(v: Value) -> Result<usize, String> {
        let mut ctx = Ctx::new(&[]);
        parse_size(&mut ctx, "p", &v).ok_or_else(|| ctx.errors[0].message.clone())
    }

    fn duration(v: Value) -> Result<Duration, String> {
        let mut ctx = Ctx::new(&[]);
        parse_duration(&mut ctx, "p", &v).ok_or_else(|| ctx.errors[0].message.clone())
    }

    #[test]
    fn sizes() {
        assert_eq!(size(json!("4MiB")), Ok(4 * 1024 * 1024));
        assert_eq!(size(json!("512KiB")), Ok(512 * 1024));
        assert_eq!(size(json!("1000")), Ok(1000));
        assert_eq!(size(json!(2048)), Ok(2048));
        assert!(size(json!("lots")).is_err());
        assert!(size(json!("4 parsecs")).is_err());
        assert!(size(json!(0)).is_err());
        assert!(size(json!(-5)).is_err());
        assert!(size(json!(true)).is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(duration(json!("30s")), Ok(Duration::from_secs(30)));
        assert_eq!(duration(json!("250ms")), Ok(Duration::from_millis(250)));
        assert_eq!(duration(json!("10m")), Ok(Duration::from_secs(600)));
        assert!(duration(json!("soon")).is_err());
        assert!(duration(json!(30)).unwrap_err().contains("\"30s\""));
        assert!(duration(json!([1])).is_err());
    }

    #[test]
    fn unknown_keys_suggest_the_nearest_known_key() {
        assert!(unknown_key_message("lisen", &["listen", "tls"]).contains("`listen`"));
        assert!(unknown_key_message("zzzzzz", &["listen", "tls"])
            .contains("expected one of: listen, tls"));
    }
}
