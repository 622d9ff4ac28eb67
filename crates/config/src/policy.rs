//! `auth`, `rate_limits`, `headers`: the edge policy sections. Validated and
//! stored typed here; enforced by the policy crate.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use crate::checks;
use crate::types::*;
use crate::walk::{parse_duration, Ctx, Obj};

pub(crate) fn auth(ctx: &mut Ctx, v: Option<&Value>, public_url: &str) -> Option<AuthConfig> {
    let v = v.filter(|v| !v.is_null())?;
    let o = Obj::new(
        ctx,
        Some(v),
        "auth",
        &["jwt", "authorization_servers", "scopes_supported", "rules"],
    );
    if !matches!(v, Value::Object(_)) {
        return None;
    }
    let jwt = if o.has("jwt") {
        let path = o.key_path("jwt");
        jwt(ctx, o.get("jwt"), &path, public_url)
    } else {
        ctx.err(
            &o.key_path("jwt"),
            "required when `auth` is set: {issuer, jwks_url | jwks_file}",
        );
        None
    };
    let authorization_servers = match o.strings(ctx, "authorization_servers") {
        Some(list) => list
            .into_iter()
            .filter_map(|(p, s)| checks::http_url(ctx, &p, &s, false).map(|_| s))
            .collect(),
        None => jwt
            .as_ref()
            .map(|j: &JwtConfig| vec![j.issuer.clone()])
            .unwrap_or_default(),
    };
    let scopes_supported = scopes(ctx, &o, "scopes_supported");
    let rules = o
        .list(ctx, "rules")
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(path, item)| auth_rule(ctx, &path, item))
        .collect();
    Some(AuthConfig {
        jwt: jwt?,
        authorization_servers,
        scopes_supported,
        rules,
    })
}

/// What one `auth.rules` entry grants: globs over tools, prompts and resource
/// URIs, to callers holding every scope and matching every claim it lists.
fn auth_rule(ctx: &mut Ctx, path: &str, item: &Value) -> Option<AuthRule> {
    const GRANTS: [&str; 3] = ["tools", "prompts", "resources"];
    let r = Obj::new(
        ctx,
        Some(item),
        path,
        &["scopes", "claims", "tools", "prompts", "resources"],
    );
    let scopes = scopes(ctx, &r, "scopes");
    let mut globs = |key: &str| -> Vec<String> {
        r.strings(ctx, key)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|(p, g)| checks::glob(ctx, &p, &g).map(|_| g))
            .collect()
    };
    let (tools, prompts, resources) = (globs("tools"), globs("prompts"), globs("resources"));
    if !GRANTS.iter().any(|k| r.has(k)) {
        ctx.err(
            &r.key_path("tools"),
            "a rule grants something: globs over exposed tool names (`tools`), prompt names (`prompts`) or resource URIs (`resources`)",
        );
    }
    let claims = claims(ctx, &r);
    let grants = !(tools.is_empty() && prompts.is_empty() && resources.is_empty());
    grants.then_some(AuthRule {
        scopes,
        claims,
        tools,
        prompts,
        resources,
    })
}

/// `claims: {name: value | [values]}`: a token claim that must hold one of the values.
fn claims(ctx: &mut Ctx, r: &Obj) -> Vec<(String, Vec<String>)> {
    let Some(v) = r.get("claims") else {
        return Vec::new();
    };
    let path = r.key_path("claims");
    let Value::Object(m) = v else {
        ctx.err(
            &path,
            "expected a mapping of claim name to a value or a list of values, e.g. {groups: [crm-users]}",
        );
        return Vec::new();
    };
    let mut out = Vec::new();
    for (name, value) in m {
        let p = format!("{path}.{name}");
        if name.is_empty() {
            ctx.err(&p, "a claim name must not be empty");
            continue;
        }
        let values: Option<Vec<String>> = match value {
            Value::String(s) => Some(vec![s.clone()]),
            Value::Array(items) if !items.is_empty() => items
                .iter()
                .map(|i| i.as_str().map(str::to_owned))
                .collect(),
            _ => None,
        };
        match values {
            Some(values) if values.iter().all(|v| !v.is_empty()) => {
                out.push((name.clone(), values))
            }
            _ => ctx.err(
                &p,
                "expected a non-empty string or a non-empty list of non-empty strings (the claim must hold one of them)",
            ),
        }
    }
    out
}

fn jwt(ctx: &mut Ctx, v: Option<&Value>, path: &str, public_url: &str) -> Option<JwtConfig> {
    let o = Obj::new(
        ctx,
        v,
        path,
        &["issuer", "audiences", "jwks_url", "jwks_file", "leeway"],
    );
    let issuer = o.required(ctx, "issuer");
    let audiences = match o.strings(ctx, "audiences") {
        Some(list) => {
            if list.is_empty() {
                ctx.err(
                    &o.key_path("audiences"),
                    "list at least one audience, or leave it out for server.public_url",
                );
            }
            list.into_iter()
                .filter_map(|(p, s)| {
                    if s.is_empty() {
                        ctx.err(&p, "must not be empty");
                        return None;
                    }
                    Some(s)
                })
                .collect()
        }
        None => vec![public_url.to_owned()],
    };
    let jwks = match (o.has("jwks_url"), o.has("jwks_file")) {
        (true, false) => {
            let p = o.key_path("jwks_url");
            o.nonempty(ctx, "jwks_url")
                .and_then(|u| checks::http_url(ctx, &p, &u, true).map(|_| JwksSource::Url(u)))
        }
        (false, true) => o
            .nonempty(ctx, "jwks_file")
            .map(|f| JwksSource::File(PathBuf::from(f))),
        _ => {
            ctx.err(path, "set exactly one of `jwks_url` and `jwks_file`");
            None
        }
    };
    let leeway = o.duration(ctx, "leeway", Duration::from_secs(60));
    Some(JwtConfig {
        issuer: issuer?,
        audiences,
        jwks: jwks?,
        leeway,
    })
}

/// OAuth scope tokens (RFC 6749 §3.3: printable ASCII without space, `"` or `\`).
pub(crate) fn scopes(ctx: &mut Ctx, o: &Obj, key: &str) -> Vec<String> {
    o.strings(ctx, key)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(p, s)| {
            let ok = !s.is_empty()
                && s.bytes()
                    .all(|b| (0x21..=0x7e).contains(&b) && b != b'"' && b != b'\\');
            if !ok {
                ctx.err(&p, format!("{s:?} is not a valid OAuth scope"));
            }
            ok.then_some(s)
        })
        .collect()
}

const RATE_KEYS: &[&str] = &["principal", "upstream", "tool", "route", "client_ip"];
const RATE_KEY_VALUES: [RateKey; 5] = [
    RateKey::Principal,
    RateKey::Upstream,
    RateKey::Tool,
    RateKey::Route,
    RateKey::ClientIp,
];

pub(crate) fn rate_limits(ctx: &mut Ctx, v: Option<&Value>) -> Option<RateLimitConfig> {
    let v = v.filter(|v| !v.is_null())?;
    let o = Obj::new(
        ctx,
        Some(v),
        "rate_limits",
        &["backend", "redis_url", "failure_mode", "rules"],
    );
    let redis_url = o.nonempty(ctx, "redis_url");
    let backend = match o.choice(ctx, "backend", &["local", "redis"]) {
        Some(1) => match redis_url {
            None => {
                ctx.err(
                    &o.key_path("redis_url"),
                    "required with backend: redis, e.g. redis://127.0.0.1:6379",
                );
                None
            }
            Some(url) => checks::redis_url(ctx, &o.key_path("redis_url"), &url)
                .then_some(RateLimitBackend::Redis { url }),
        },
        None if o.has("backend") => None,
        _ => {
            if redis_url.is_some() {
                ctx.err(&o.key_path("redis_url"), "only used with backend: redis");
            }
            Some(RateLimitBackend::Local)
        }
    };
    let failure_mode = match o.choice(ctx, "failure_mode", &["open", "closed"]) {
        Some(1) => FailureMode::Closed,
        _ => FailureMode::Open,
    };
    let mut names: Vec<(String, String)> = Vec::new();
    let rules = o
        .list(ctx, "rules")
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(path, item)| rate_rule(ctx, &path, item, &mut names))
        .collect();
    Some(RateLimitConfig {
        backend: backend?,
        failure_mode,
        rules,
    })
}

fn rate_rule(
    ctx: &mut Ctx,
    path: &str,
    item: &Value,
    names: &mut Vec<(String, String)>,
) -> Option<RateLimitRule> {
    let o = Obj::new(
        ctx,
        Some(item),
        path,
        &["name", "key", "rate", "per", "burst", "methods"],
    );
    let name = o.required(ctx, "name").and_then(|n| {
        let p = o.key_path("name");
        if !n.chars().all(checks::is_name_char) || n.len() > 64 {
            ctx.err(&p, format!("{n:?}: rule names are up to 64 characters of [A-Za-z0-9_.-] (used as a metric label)"));
            return None;
        }
        if let Some((_, first)) = names.iter().find(|(s, _)| *s == n) {
            ctx.err(&p, format!("duplicate rule name {n:?} (first used at {first})"));
            return None;
        }
        names.push((n.clone(), p));
        Some(n)
    });
    let mut key = Vec::new();
    for (p, k) in o.strings(ctx, "key").unwrap_or_default() {
        match RATE_KEYS.iter().position(|c| *c == k) {
            Some(i) if key.contains(&RATE_KEY_VALUES[i]) => {
                ctx.err(&p, format!("{k:?} listed twice"))
            }
            Some(i) => key.push(RATE_KEY_VALUES[i]),
            None => ctx.err(
                &p,
                format!(
                    "unknown key {k:?}, expected one of: {}",
                    RATE_KEYS.join(", ")
                ),
            ),
        }
    }
    if !o.has("rate") {
        ctx.err(&o.key_path("rate"), "required: tokens per `per`");
    }
    let rate = o.int(ctx, "rate", 1, u64::from(u32::MAX));
    let per_path = o.key_path("per");
    let per = match o.get("per") {
        None => {
            ctx.err(&per_path, "required: the refill period, e.g. 1s or 1m");
            None
        }
        Some(v) => parse_duration(ctx, &per_path, v).and_then(|d| {
            if d.is_zero() {
                ctx.err(&per_path, "must be greater than zero");
                return None;
            }
            Some(d)
        }),
    };
    let burst = if o.has("burst") {
        o.int(ctx, "burst", 1, u64::from(u32::MAX))
    } else {
        rate
    };
    let methods = match o.strings(ctx, "methods") {
        None => vec!["tools/call".to_owned()],
        Some(list) => {
            if list.is_empty() {
                ctx.err(
                    &o.key_path("methods"),
                    "list at least one method, or leave it out for [tools/call]",
                );
            }
            list.into_iter()
                .filter_map(|(p, m)| {
                    if m.is_empty() {
                        ctx.err(&p, "must not be empty");
                        return None;
                    }
                    Some(m)
                })
                .collect()
        }
    };
    Some(RateLimitRule {
        name: name?,
        key,
        rate: rate?,
        per: per?,
        burst: burst?,
        methods,
    })
}

pub(crate) fn headers(ctx: &mut Ctx, v: Option<&Value>) -> HeadersConfig {
    let o = Obj::new(ctx, v, "headers", &["forward", "allowed_origins"]);
    let forward = match o.strings(ctx, "forward") {
        None => ["traceparent", "tracestate", "baggage"]
            .map(str::to_owned)
            .to_vec(),
        Some(list) => {
            let mut out: Vec<String> = Vec::new();
            for (p, name) in list {
                if let Some(n) = checks::forwardable_header(ctx, &p, &name) {
                    if !out.contains(&n) {
                        out.push(n);
                    }
                }
            }
            out
        }
    };
    let allowed_origins = o
        .strings(ctx, "allowed_origins")
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(p, s)| origin(ctx, &p, &s))
        .collect();
    HeadersConfig {
        forward,
        allowed_origins,
    }
}

/// `scheme://host[:port]`, lower-cased; `*` passes through.
fn origin(ctx: &mut Ctx, path: &str, s: &str) -> Option<String> {
    if s == "*" {
        return Some(s.to_owned());
    }
    let uri = checks::http_url(ctx, path, s, false)?;
    if !matches!(uri.path(), "" | "/") {
        ctx.err(
            path,
            format!("{s:?}: an origin is scheme://host[:port], without a path"),
        );
        return None;
    }
    let authority = uri.authority().map(|a| a.as_str().to_ascii_lowercase())?;
    Some(format!(
        "{}://{authority}",
        uri.scheme_str().unwrap_or("http")
    ))
}
