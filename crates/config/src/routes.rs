//! `routes`: endpoint paths, each over a set of upstreams with name filters.

use crate::checks;
use crate::types::{GuardrailConfig, RouteConfig};
use crate::walk::{Ctx, Obj};

const KEYS: &[&str] = &[
    "path",
    "upstreams",
    "prefix",
    "include",
    "exclude",
    "overrides",
    "guardrail",
];
const ADMIN_PATHS: &[&str] = &["/metrics", "/healthz", "/readyz"];

/// `ids` are the declared upstream ids in config order.
pub(crate) fn routes(ctx: &mut Ctx, root: &Obj, ids: &[String]) -> Vec<RouteConfig> {
    let Some(items) = root.list(ctx, "routes") else {
        if root.has("routes") {
            return Vec::new();
        }
        return vec![RouteConfig {
            path: "/mcp".to_owned(),
            upstreams: ids.to_vec(),
            prefix: true,
            include: Vec::new(),
            exclude: Vec::new(),
            overrides: Default::default(),
            guardrail: None,
        }];
    };
    if items.is_empty() {
        ctx.err("routes", "list at least one route, or leave `routes` out for the default /mcp over all upstreams");
    }
    let mut out = Vec::new();
    let mut seen: Vec<(String, String)> = Vec::new();
    for (path, item) in items {
        let o = Obj::new(ctx, Some(item), &path, KEYS);
        let route_path = o.required(ctx, "path").and_then(|p| {
            let key = o.key_path("path");
            let problem = route_path_problem(&p);
            if let Some(problem) = problem {
                ctx.err(&key, format!("{p:?}: {problem}"));
                return None;
            }
            if let Some((_, first)) = seen.iter().find(|(s, _)| *s == p) {
                ctx.err(
                    &key,
                    format!("duplicate route path {p:?} (first used at {first})"),
                );
                return None;
            }
            seen.push((p.clone(), key));
            Some(p)
        });
        let upstreams = resolve_upstreams(ctx, &o, ids);
        let prefix = !matches!(o.choice(ctx, "prefix", &["always", "never"]), Some(1));
        if let Some(resolved) = &upstreams {
            if !prefix && resolved.len() != 1 {
                ctx.err(
                    &o.key_path("prefix"),
                    format!(
                        "`never` needs exactly one upstream, but this route resolves to {} ({}); unprefixed names from several upstreams could collide",
                        resolved.len(),
                        resolved.join(", ")
                    ),
                );
            }
        }
        let include = globs(ctx, &o, "include");
        let exclude = globs(ctx, &o, "exclude");
        let overrides = crate::overrides::overrides(ctx, &o);
        let guardrail = guardrail(ctx, &o);
        if let (Some(path), Some(upstreams)) = (route_path, upstreams) {
            out.push(RouteConfig {
                path,
                upstreams,
                prefix,
                include,
                exclude,
                overrides,
                guardrail,
            });
        }
    }
    out
}

fn route_path_problem(p: &str) -> Option<&'static str> {
    if !p.starts_with('/') {
        return Some("a route path must start with `/`");
    }
    if p.contains(['?', '#']) || p.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Some("a route path cannot contain `?`, `#`, whitespace or control characters");
    }
    if p.contains("//") || p.split('/').any(|seg| seg == "." || seg == "..") {
        return Some("a route path cannot contain empty, `.` or `..` segments");
    }
    if ADMIN_PATHS.contains(&p.trim_end_matches('/')) {
        return Some("reserved for Junction's admin endpoints (/metrics, /healthz, /readyz)");
    }
    if p == "/.well-known" || p.starts_with("/.well-known/") {
        return Some("paths under /.well-known/ are reserved (OAuth protected resource metadata)");
    }
    None
}

/// Ids and globs over ids, resolved to ids in config order, deduplicated.
fn resolve_upstreams(ctx: &mut Ctx, o: &Obj, ids: &[String]) -> Option<Vec<String>> {
    let refs = match o.strings(ctx, "upstreams") {
        Some(refs) => refs,
        None if o.has("upstreams") => return None,
        None => vec![(o.key_path("upstreams"), "*".to_owned())],
    };
    let mut selected = vec![false; ids.len()];
    let mut ok = true;
    for (path, r) in &refs {
        if checks::is_glob(r) {
            match checks::glob(ctx, path, r) {
                Some(m) => {
                    for (i, id) in ids.iter().enumerate() {
                        selected[i] |= m.is_match(id);
                    }
                }
                None => ok = false,
            }
        } else if let Some(i) = ids.iter().position(|id| id == r) {
            selected[i] = true;
        } else {
            ctx.err(path, format!("no upstream has id {r:?}"));
            ok = false;
        }
    }
    if !ok {
        return None;
    }
    let resolved: Vec<String> = ids
        .iter()
        .zip(selected)
        .filter(|(_, s)| *s)
        .map(|(id, _)| id.clone())
        .collect();
    if resolved.is_empty() && !ids.is_empty() {
        ctx.err(&o.key_path("upstreams"), "matches no configured upstream");
        return None;
    }
    Some(resolved)
}

fn globs(ctx: &mut Ctx, o: &Obj, key: &str) -> Vec<String> {
    o.strings(ctx, key)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(path, pattern)| checks::glob(ctx, &path, &pattern).map(|_| pattern))
        .collect()
}

/// `routes[].guardrail`: the webhook asked about this route's tool calls.
fn guardrail(ctx: &mut Ctx, o: &Obj) -> Option<GuardrailConfig> {
    let v = o.get("guardrail")?;
    let path = o.key_path("guardrail");
    let g = Obj::new(
        ctx,
        Some(v),
        &path,
        &["url", "timeout", "on_error", "results"],
    );
    let url = g
        .required(ctx, "url")
        .filter(|url| crate::checks::http_url(ctx, &g.key_path("url"), url, true).is_some());
    let timeout = g.positive_duration(ctx, "timeout", std::time::Duration::from_secs(2));
    let fail_open = matches!(g.choice(ctx, "on_error", &["deny", "allow"]), Some(1));
    let results = g.boolean(ctx, "results", false);
    Some(GuardrailConfig {
        url: url?,
        timeout,
        fail_open,
        results,
    })
}
