//! `audit`: the audit log of tool calls, prompts and resources read (one
//! JSON line per `tools/call`, `prompts/get`, `resources/read`), off unless
//! `enabled`. Whether a call's line carries its arguments and its result is
//! decided per call ([`AuditConfig::includes`]): the most specific `tools`
//! entry matching the exposed name that sets the switch, else the route's
//! entry, else the section's default (both off); for prompts and resources
//! the route's entry, else the default ([`AuditConfig::route_includes`]). `redact` names
//! object keys whose values are never written. Validated here, written by
//! the telemetry crate (`junction_telemetry::audit`); `enabled` and `file`
//! are read at start (the file is opened then), the rest follows reloads.

use std::path::PathBuf;

use serde_json::Value;

use crate::checks;
use crate::types::RouteConfig;
use crate::walk::{join, Ctx, Obj};

/// Keys redacted when `redact` is not set (compared ignoring case).
pub const DEFAULT_REDACT: &[&str] = &[
    "password",
    "passwd",
    "secret",
    "client_secret",
    "token",
    "access_token",
    "refresh_token",
    "id_token",
    "api_key",
    "apikey",
    "authorization",
    "cookie",
    "private_key",
];

#[derive(Clone, Debug)]
pub struct AuditConfig {
    pub enabled: bool,
    /// Required when `enabled`.
    pub file: Option<AuditFile>,
    /// The defaults of every call.
    pub include_arguments: bool,
    pub include_results: bool,
    /// Lower case; a member with one of these keys, at any depth of the
    /// arguments or the result, is written as `"[redacted]"`.
    pub redact: Vec<String>,
    /// By route path (each a configured route).
    pub routes: Vec<(String, AuditSwitches)>,
    /// Most specific first: exact names, then globs by length, longest first.
    pub tools: Vec<AuditTool>,
}

impl Default for AuditConfig {
    fn default() -> Self {
        AuditConfig {
            enabled: false,
            file: None,
            include_arguments: false,
            include_results: false,
            redact: DEFAULT_REDACT.iter().map(|k| (*k).to_owned()).collect(),
            routes: Vec::new(),
            tools: Vec::new(),
        }
    }
}

/// `audit.file`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AuditFile {
    /// `stderr`: with the log lines.
    Stderr,
    /// Appended to (created if missing).
    Path(PathBuf),
}

/// A route's or tool's switches; `None` leaves the decision to the next
/// level (tool, then route, then the section).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AuditSwitches {
    pub include_arguments: Option<bool>,
    pub include_results: Option<bool>,
}

/// One `audit.tools` entry: an exposed name or a glob over exposed names.
#[derive(Clone, Debug)]
pub struct AuditTool {
    pub pattern: String,
    matcher: globset::GlobMatcher,
    pub switches: AuditSwitches,
}

/// What one call's line carries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AuditIncludes {
    pub arguments: bool,
    pub results: bool,
}

impl AuditConfig {
    /// What the line of a call of `tool` (exposed name) on `route` carries.
    pub fn includes(&self, route: &str, tool: &str) -> AuditIncludes {
        self.includes_of(route, Some(tool))
    }

    /// What the line of a `prompts/get` or `resources/read` on `route`
    /// carries: the route's entry, else the section's default (the `tools`
    /// entries name tools only).
    pub fn route_includes(&self, route: &str) -> AuditIncludes {
        self.includes_of(route, None)
    }

    fn includes_of(&self, route: &str, tool: Option<&str>) -> AuditIncludes {
        let mut arguments = None;
        let mut results = None;
        let matching = self
            .tools
            .iter()
            .filter(|t| tool.is_some_and(|tool| t.matcher.is_match(tool)));
        for t in matching {
            arguments = arguments.or(t.switches.include_arguments);
            results = results.or(t.switches.include_results);
        }
        if let Some((_, r)) = self.routes.iter().find(|(path, _)| path == route) {
            arguments = arguments.or(r.include_arguments);
            results = results.or(r.include_results);
        }
        AuditIncludes {
            arguments: arguments.unwrap_or(self.include_arguments),
            results: results.unwrap_or(self.include_results),
        }
    }
}

const KEYS: &[&str] = &[
    "enabled",
    "file",
    "include_arguments",
    "include_results",
    "redact",
    "routes",
    "tools",
];
const SWITCHES: &[&str] = &["include_arguments", "include_results"];

pub(crate) fn audit(ctx: &mut Ctx, v: Option<&Value>, routes: &[RouteConfig]) -> AuditConfig {
    let d = AuditConfig::default();
    let o = Obj::new(ctx, v, "audit", KEYS);
    let enabled = o.boolean(ctx, "enabled", false);
    let file = o.nonempty(ctx, "file").map(|f| match f.as_str() {
        "stderr" => AuditFile::Stderr,
        _ => AuditFile::Path(PathBuf::from(f)),
    });
    if enabled && file.is_none() && !o.has("file") {
        ctx.err(
            &o.key_path("file"),
            "required when audit.enabled is true: a file path (appended to), or stderr",
        );
    }
    let redact = match o.strings(ctx, "redact") {
        None => d.redact,
        Some(keys) => keys
            .into_iter()
            .filter_map(|(path, key)| {
                if key.is_empty() {
                    ctx.err(&path, "must not be empty");
                    return None;
                }
                Some(key.to_lowercase())
            })
            .collect(),
    };
    let mut route_switches = Vec::new();
    for (path, key, entry) in entries(ctx, &o, "routes") {
        if !routes.iter().any(|r| r.path == key) {
            let known: Vec<&str> = routes.iter().map(|r| r.path.as_str()).collect();
            ctx.err(
                &path,
                format!("no route has this path (routes: {})", known.join(", ")),
            );
        }
        route_switches.push((key, switches(ctx, entry, &path)));
    }
    let mut tools = Vec::new();
    for (path, key, entry) in entries(ctx, &o, "tools") {
        let switches = switches(ctx, entry, &path);
        if let Some(matcher) = checks::glob(ctx, &path, &key) {
            tools.push(AuditTool {
                pattern: key,
                matcher,
                switches,
            });
        }
    }
    // Most specific first: an exact name before any glob, a longer glob
    // before a shorter one; ties in name order.
    tools.sort_by(|a, b| {
        let rank = |t: &AuditTool| {
            (
                checks::is_glob(&t.pattern),
                std::cmp::Reverse(t.pattern.len()),
            )
        };
        rank(a)
            .cmp(&rank(b))
            .then_with(|| a.pattern.cmp(&b.pattern))
    });
    AuditConfig {
        enabled,
        file,
        include_arguments: o.boolean(ctx, "include_arguments", d.include_arguments),
        include_results: o.boolean(ctx, "include_results", d.include_results),
        redact,
        routes: route_switches,
        tools,
    }
}

/// The members of the mapping at `key`: (key path, key, value).
fn entries<'v>(ctx: &mut Ctx, o: &Obj<'v>, key: &str) -> Vec<(String, String, &'v Value)> {
    let Some(v) = o.get(key) else {
        return Vec::new();
    };
    let path = o.key_path(key);
    let Value::Object(map) = v else {
        ctx.err(
            &path,
            "expected a mapping of name to {include_arguments, include_results}",
        );
        return Vec::new();
    };
    map.iter()
        .map(|(k, v)| (join(&path, k), k.clone(), v))
        .collect()
}

fn switches(ctx: &mut Ctx, v: &Value, path: &str) -> AuditSwitches {
    let o = Obj::new(ctx, Some(v), path, SWITCHES);
    let switch = |ctx: &mut Ctx, key: &str| o.has(key).then(|| o.boolean(ctx, key, false));
    AuditSwitches {
        include_arguments: switch(ctx, "include_arguments"),
        include_results: switch(ctx, "include_results"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(pattern: &str, arguments: Option<bool>, results: Option<bool>) -> AuditTool {
        AuditTool {
            pattern: pattern.into(),
            matcher: globset::Glob::new(pattern)
                .map(|g| g.compile_matcher())
                .unwrap_or_else(|e| panic!("{e}")),
            switches: AuditSwitches {
                include_arguments: arguments,
                include_results: results,
            },
        }
    }

    #[test]
    fn a_tool_entry_beats_its_route_which_beats_the_default_switch_by_switch() {
        let c = AuditConfig {
            include_results: true,
            routes: vec![(
                "/mcp".into(),
                AuditSwitches {
                    include_arguments: Some(true),
                    include_results: None,
                },
            )],
            tools: vec![
                tool("crm__get", None, Some(false)),
                tool("crm__*", Some(false), Some(true)),
            ],
            ..AuditConfig::default()
        };
        let inc = |route: &str, t: &str| {
            let i = c.includes(route, t);
            (i.arguments, i.results)
        };
        assert_eq!(inc("/other", "x__y"), (false, true), "the defaults");
        assert_eq!(inc("/mcp", "x__y"), (true, true), "the route's arguments");
        assert_eq!(inc("/mcp", "crm__list"), (false, true), "the glob");
        // The exact name decides results; arguments fall to the glob.
        assert_eq!(inc("/mcp", "crm__get"), (false, false));
    }
}
