//! `server`, `tools`, `catalog`, `limits`, `request_state`, `sessions`, `log`:
//! the sections that stand on their own.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use crate::checks;
use crate::types::*;
use crate::walk::{Ctx, Obj};

const DEFAULT_LISTEN: &str = "127.0.0.1:8080";

pub(crate) fn server(ctx: &mut Ctx, v: Option<&Value>) -> ServerConfig {
    let o = Obj::new(
        ctx,
        v,
        "server",
        &[
            "listen",
            "public_url",
            "tls",
            "shutdown_grace",
            "ready_when",
            "trusted_proxies",
        ],
    );
    let fallback: SocketAddr = SocketAddr::from(([127, 0, 0, 1], 8080));
    let listen = match o.string(ctx, "listen") {
        None => DEFAULT_LISTEN.parse().unwrap_or(fallback),
        Some(s) => match s.trim().parse::<SocketAddr>() {
            Ok(a) => a,
            Err(_) => {
                ctx.err(
                    &o.key_path("listen"),
                    format!("{s:?} is not IP:port, e.g. 127.0.0.1:8080 or [::1]:8080"),
                );
                fallback
            }
        },
    };
    let tls_path = o.key_path("tls");
    let tls = o.get("tls").and_then(|t| {
        let t = Obj::new(ctx, Some(t), &tls_path, &["cert_file", "key_file"]);
        let cert = t.required(ctx, "cert_file");
        let key = t.required(ctx, "key_file");
        Some(TlsConfig {
            cert_file: PathBuf::from(cert?),
            key_file: PathBuf::from(key?),
        })
    });
    let scheme = if o.has("tls") { "https" } else { "http" };
    let public_url = match o.nonempty(ctx, "public_url") {
        None => format!("{scheme}://{listen}"),
        Some(s) => {
            let path = o.key_path("public_url");
            if checks::http_url(ctx, &path, &s, false).is_some() {
                s.trim_end_matches('/').to_owned()
            } else {
                s
            }
        }
    };
    ServerConfig {
        listen,
        public_url,
        tls,
        shutdown_grace: o.duration(ctx, "shutdown_grace", Duration::from_secs(10)),
        ready_when: match o.choice(
            ctx,
            "ready_when",
            &["any_upstream", "all_upstreams", "listening"],
        ) {
            Some(1) => Readiness::AllUpstreams,
            Some(2) => Readiness::Listening,
            _ => Readiness::AnyUpstream,
        },
        trusted_proxies: o
            .strings(ctx, "trusted_proxies")
            .unwrap_or_default()
            .into_iter()
            .filter_map(|(p, s)| trusted_proxy(ctx, &p, &s))
            .collect(),
    }
}

/// A CIDR block (`10.0.0.0/8`, `fd00::/8`) or one address (that host alone).
fn trusted_proxy(ctx: &mut Ctx, path: &str, s: &str) -> Option<ipnet::IpNet> {
    let s = s.trim();
    if let Ok(net) = s.parse::<ipnet::IpNet>() {
        return Some(net.trunc());
    }
    if let Ok(ip) = s.parse::<std::net::IpAddr>() {
        return Some(ipnet::IpNet::from(ip));
    }
    ctx.err(
        path,
        format!("{s:?} is not an IP address or CIDR block, e.g. 10.0.0.0/8, fd00::/8 or 192.0.2.7"),
    );
    None
}

pub(crate) fn tools(ctx: &mut Ctx, v: Option<&Value>) -> ToolsConfig {
    let o = Obj::new(
        ctx,
        v,
        "tools",
        &["separator", "max_name_length", "drop_secret_headers"],
    );
    let separator = match o.string(ctx, "separator") {
        None => "__".to_owned(),
        Some(s) => {
            let path = o.key_path("separator");
            if s.is_empty() || s.chars().count() > 4 || !s.chars().all(checks::is_name_char) {
                ctx.err(
                    &path,
                    format!("{s:?}: must be 1 to 4 characters of [A-Za-z0-9_.-]"),
                );
            } else if !s.chars().any(|c| matches!(c, '_' | '.' | 'A'..='Z')) {
                // Ids are [a-z0-9-]: a separator made only of those chars
                // could also occur inside an id, and `a-b` + `-` + `x` would
                // not split back unambiguously.
                ctx.err(&path, format!("{s:?}: must contain `_`, `.` or an upper-case letter, which never occur in upstream ids, so exposed names split unambiguously"));
            }
            s
        }
    };
    let max_name_length = o.int(ctx, "max_name_length", 16, 128).map(|n| n as usize);
    let drop_secret_headers = o.boolean(ctx, "drop_secret_headers", false);
    ToolsConfig {
        separator,
        max_name_length,
        drop_secret_headers,
    }
}

pub(crate) fn catalog(ctx: &mut Ctx, v: Option<&Value>) -> CatalogConfig {
    let o = Obj::new(
        ctx,
        v,
        "catalog",
        &["list_deadline", "max_pages", "page_size"],
    );
    CatalogConfig {
        list_deadline: o.positive_duration(ctx, "list_deadline", Duration::from_secs(5)),
        max_pages: o
            .int(ctx, "max_pages", 1, u64::from(u32::MAX))
            .map_or(32, |n| n as u32),
        page_size: o
            .int(ctx, "page_size", 1, 10_000)
            .map_or(200, |n| n as usize),
    }
}

pub(crate) fn limits(ctx: &mut Ctx, v: Option<&Value>) -> LimitsConfig {
    let o = Obj::new(
        ctx,
        v,
        "limits",
        &[
            "max_body_bytes",
            "max_header_count",
            "max_header_bytes",
            "header_read_timeout",
            "body_read_timeout",
            "idle_timeout",
        ],
    );
    LimitsConfig {
        max_body_bytes: o.size(ctx, "max_body_bytes", 4 * 1024 * 1024),
        max_header_count: o
            .int(ctx, "max_header_count", 1, 10_000)
            .map_or(100, |n| n as usize),
        max_header_bytes: o.size(ctx, "max_header_bytes", 16 * 1024),
        header_read_timeout: o.positive_duration(
            ctx,
            "header_read_timeout",
            Duration::from_secs(10),
        ),
        body_read_timeout: o.positive_duration(ctx, "body_read_timeout", Duration::from_secs(30)),
        idle_timeout: o.positive_duration(ctx, "idle_timeout", Duration::from_secs(120)),
    }
}

/// Minimum key length for sealing requestState envelopes (HMAC-SHA256 key size).
pub const MIN_SECRET_BYTES: usize = 32;

pub(crate) fn request_state(
    ctx: &mut Ctx,
    v: Option<&Value>,
    env: &[(String, String)],
) -> RequestStateConfig {
    let o = Obj::new(ctx, v, "request_state", &["secret_env", "ttl"]);
    let secret_env = o.nonempty(ctx, "secret_env");
    let mut secret = None;
    if let Some(name) = &secret_env {
        let path = o.key_path("secret_env");
        if checks::env_name(ctx, &path, name) {
            match env.iter().rev().find(|(k, _)| k == name) {
                None => ctx.err(&path, format!("environment variable {name} is not set")),
                Some((_, value)) if value.len() < MIN_SECRET_BYTES => ctx.err(
                    &path,
                    format!(
                        "environment variable {name} holds {} bytes; the key needs at least {MIN_SECRET_BYTES}",
                        value.len()
                    ),
                ),
                Some((_, value)) => secret = Some(value.as_bytes().to_vec()),
            }
        }
    }
    RequestStateConfig {
        secret,
        secret_env,
        ttl: o.positive_duration(ctx, "ttl", Duration::from_secs(600)),
    }
}

pub(crate) fn sessions(ctx: &mut Ctx, v: Option<&Value>) -> SessionsConfig {
    let o = Obj::new(ctx, v, "sessions", &["ttl"]);
    SessionsConfig {
        ttl: o.positive_duration(ctx, "ttl", Duration::from_secs(24 * 3600)),
    }
}

pub(crate) fn fleet(ctx: &mut Ctx, v: Option<&Value>, server: &ServerConfig) -> FleetConfig {
    let o = Obj::new(ctx, v, "fleet", &["redis_url", "advertise_url"]);
    let redis_url = o.nonempty(ctx, "redis_url");
    if let Some(url) = &redis_url {
        checks::redis_url(ctx, &o.key_path("redis_url"), url);
    }
    let advertise_url = o.nonempty(ctx, "advertise_url").and_then(|url| {
        let url = url.trim_end_matches('/').to_owned();
        let rest = url.strip_prefix("http://").unwrap_or("");
        if rest.is_empty() || rest.contains(['/', '?', '#', '@']) {
            ctx.err(
                &o.key_path("advertise_url"),
                format!("{url:?}: expected http://host:port (this replica as the others reach it, no path)"),
            );
            return None;
        }
        if server.tls.is_some() {
            ctx.err(
                &o.key_path("advertise_url"),
                "replicas relay to each other over plain HTTP, which a listener with server.tls does not speak; terminate TLS in front of the replicas",
            );
            return None;
        }
        Some(url)
    });
    FleetConfig {
        redis_url,
        advertise_url,
    }
}

const LEVELS: &[&str] = &["trace", "debug", "info", "warn", "error", "off"];

pub(crate) fn log(ctx: &mut Ctx, v: Option<&Value>) -> LogConfig {
    let o = Obj::new(ctx, v, "log", &["format", "level", "access"]);
    let format = match o.choice(ctx, "format", &["text", "json"]) {
        Some(1) => LogFormat::Json,
        _ => LogFormat::Text,
    };
    let level = match o.nonempty(ctx, "level") {
        None => "info".to_owned(),
        Some(l) => {
            // A bare word must be a level; anything with `=` or `,` is an
            // EnvFilter directive list, which the telemetry crate parses.
            let directive = l.contains(['=', ',']);
            if !directive && !LEVELS.contains(&l.to_ascii_lowercase().as_str()) {
                ctx.err(&o.key_path("level"), format!("unknown level {l:?}, expected one of: {} (or a directive like info,junction=debug)", LEVELS.join(", ")));
            }
            l
        }
    };
    LogConfig {
        format,
        level,
        access: o.boolean(ctx, "access", true),
    }
}
