//! What the status page shows, gathered from the serving state: every
//! upstream (transport, era, health, breaker, latest error and latency), every
//! route's merged catalog (`views::route_catalog`, as `/readyz` reads it), the
//! rate-limit rules with their live buckets, and the config version with the
//! latest reload. Serialized as is for `<path>.json`; `html` renders the same.

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, SystemTime};

use http::HeaderMap;
use junction_config::{FailureMode, RateKey, RateLimitBackend, Transport, UpstreamConfig};
use junction_upstream::{BreakerState, Era, Upstream};
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::text::{display_url, duration_text, program_name, rfc3339};
use super::ReloadLog;
use crate::context::Cx;
use crate::state::State;
use crate::views;

#[derive(Serialize)]
pub struct Report {
    /// Junction's own version.
    pub junction: &'static str,
    pub generated_at: String,
    pub config: ConfigInfo,
    /// In config order.
    pub upstreams: Vec<UpstreamInfo>,
    /// In config order.
    pub routes: Vec<RouteInfo>,
    /// `None` without `rate_limits`.
    pub rate_limits: Option<RateLimitsInfo>,
}

#[derive(Serialize)]
pub struct ConfigInfo {
    /// The first 12 hex digits of SHA-256 over the loaded config (as parsed,
    /// environment overrides included).
    pub version: String,
    /// When the config now serving was loaded (start or reload).
    pub loaded_at: String,
    /// The latest reload attempt; `None` before the first.
    pub last_reload: Option<ReloadInfo>,
}

#[derive(Serialize)]
pub struct ReloadInfo {
    pub ok: bool,
    pub at: String,
    /// Why it failed (the old config kept serving).
    pub error: Option<String>,
}

#[derive(Serialize)]
pub struct UpstreamInfo {
    pub id: String,
    /// `http` or `stdio`.
    pub transport: &'static str,
    /// The URL without user info, query or fragment, or the stdio program's name.
    pub target: String,
    /// `modern`, `legacy`, or `unknown` (not learned yet).
    pub era: &'static str,
    /// The version a handshake-era upstream negotiated.
    pub protocol_version: Option<String>,
    /// `up`, `down` (breaker not closed, or its latest list fetch failed),
    /// or `unknown` (not contacted yet).
    pub health: &'static str,
    pub breaker: BreakerInfo,
    /// Distinct tools of this upstream in the routes' catalogs.
    pub tools: usize,
    pub last_error: Option<ErrorInfo>,
    /// How long its latest answer took to begin, in milliseconds.
    pub latency_ms: Option<f64>,
}

#[derive(Serialize)]
pub struct BreakerInfo {
    /// `closed`, `open` or `half_open`.
    pub state: &'static str,
    /// Consecutive failures so far (closed only).
    pub failures: u32,
    /// When open: milliseconds until the next probe may go.
    pub retry_in_ms: Option<u64>,
}

#[derive(Serialize)]
pub struct ErrorInfo {
    pub message: String,
    /// `None` when only the tool-list cache remembers it (a fetch its
    /// deadline cut short).
    pub at: Option<String>,
}

#[derive(Serialize)]
pub struct RouteInfo {
    pub path: String,
    pub upstreams: Vec<String>,
    /// Upstreams served from a stale list or left out.
    pub degraded: Vec<String>,
    /// In catalog order.
    pub tools: Vec<ToolInfo>,
    /// Tools left out of the catalog, and why.
    pub dropped: Vec<DroppedInfo>,
}

#[derive(Serialize)]
pub struct ToolInfo {
    /// The name clients call.
    pub name: String,
    pub upstream: String,
    /// The upstream's own name for it.
    pub original: String,
}

#[derive(Serialize)]
pub struct DroppedInfo {
    pub upstream: String,
    pub tool: String,
    pub reason: &'static str,
}

#[derive(Serialize)]
pub struct RateLimitsInfo {
    /// `local` or `redis` (the URL is never shown: it may hold a password).
    pub backend: &'static str,
    pub failure_mode: &'static str,
    /// Rule checks the shared backend could not answer.
    pub backend_failures: u64,
    pub rules: Vec<RuleInfo>,
}

#[derive(Serialize)]
pub struct RuleInfo {
    pub name: String,
    pub key: Vec<&'static str>,
    pub methods: Vec<String>,
    pub rate: u64,
    /// `per` as written in config style (`1s`, `250ms`).
    pub per: String,
    pub burst: u64,
    /// Buckets that are not full (local backend only).
    pub live_buckets: Option<usize>,
}

/// Everything the page shows, as of now. Lists that are due are refreshed on
/// the way, as a `tools/list` (or `/readyz`) would.
pub async fn gather(state: &State, reloads: &ReloadLog) -> Report {
    let headers = HeaderMap::new();
    let mut routes = Vec::new();
    let mut tools: HashMap<&str, BTreeSet<String>> = HashMap::new();
    for config in &state.config.routes {
        let Some(route) = state.routes.get(&config.path) else {
            continue;
        };
        let catalog = views::route_catalog(&Cx::new(state, route, &headers)).await;
        for t in &catalog.tools {
            if let Some(id) = route.upstreams.iter().find(|id| **id == t.upstream) {
                tools.entry(id).or_default().insert(t.original.clone());
            }
        }
        routes.push(RouteInfo {
            path: route.path.clone(),
            upstreams: route.upstreams.clone(),
            degraded: catalog.degraded.clone(),
            tools: catalog
                .tools
                .iter()
                .map(|t| ToolInfo {
                    name: t.exposed.clone(),
                    upstream: t.upstream.clone(),
                    original: t.original.clone(),
                })
                .collect(),
            dropped: catalog
                .dropped
                .iter()
                .map(|d| DroppedInfo {
                    upstream: d.upstream.clone(),
                    tool: d.tool.clone(),
                    reason: d.kind.as_str(),
                })
                .collect(),
        });
    }
    let upstreams = state
        .config
        .upstreams
        .iter()
        .filter_map(|u| {
            let entry = state.upstreams.get(&u.id)?;
            let count = tools.get(u.id.as_str()).map_or(0, BTreeSet::len);
            Some(upstream(state, u, &entry.client, count))
        })
        .collect();
    let (loaded_at, last) = reloads.read();
    Report {
        junction: env!("CARGO_PKG_VERSION"),
        generated_at: rfc3339(SystemTime::now()),
        config: ConfigInfo {
            version: config_version(&state.config),
            loaded_at: rfc3339(loaded_at),
            last_reload: last.map(|r| ReloadInfo {
                ok: r.ok,
                at: rfc3339(r.at),
                error: r.error,
            }),
        },
        upstreams,
        routes,
        rate_limits: rate_limits(state),
    }
}

fn upstream(state: &State, u: &UpstreamConfig, client: &Upstream, tools: usize) -> UpstreamInfo {
    let (transport, target) = match &u.transport {
        Transport::Http { url, .. } => ("http", display_url(url)),
        Transport::Stdio { command, .. } => ("stdio", program_name(command)),
    };
    let (era, protocol_version) = match client.known_era() {
        Some(Era::Modern) => ("modern", None),
        Some(Era::Legacy { version }) => ("legacy", Some(version)),
        None => ("unknown", None),
    };
    let breaker = client.breaker_state();
    let list_failed = state.cache.last_error(&u.id);
    let latency = client.latency();
    let last_error = match (client.last_error(), &list_failed) {
        (Some(e), _) => Some(ErrorInfo {
            message: e.message,
            at: Some(rfc3339(e.at)),
        }),
        (None, Some(message)) => Some(ErrorInfo {
            message: message.clone(),
            at: None,
        }),
        (None, None) => None,
    };
    let health = match breaker {
        BreakerState::Open { .. } | BreakerState::HalfOpen => "down",
        BreakerState::Closed { .. } if list_failed.is_some() => "down",
        BreakerState::Closed { .. } if latency.is_none() && last_error.is_none() => "unknown",
        BreakerState::Closed { .. } => "up",
    };
    UpstreamInfo {
        id: u.id.clone(),
        transport,
        target,
        era,
        protocol_version,
        health,
        breaker: BreakerInfo {
            state: breaker.as_str(),
            failures: match breaker {
                BreakerState::Closed { failures } => failures,
                BreakerState::Open { .. } | BreakerState::HalfOpen => 0,
            },
            retry_in_ms: match breaker {
                BreakerState::Open { retry_in } => Some(millis(retry_in)),
                BreakerState::Closed { .. } | BreakerState::HalfOpen => None,
            },
        },
        tools,
        last_error,
        latency_ms: latency.map(|d| (d.as_secs_f64() * 1e6).round() / 1e3),
    }
}

fn rate_limits(state: &State) -> Option<RateLimitsInfo> {
    let config = state.config.rate_limits.as_ref()?;
    let limiter = state.rate_limiter.as_ref();
    let live = limiter.and_then(junction_policy::RateLimiter::live_buckets);
    Some(RateLimitsInfo {
        backend: match config.backend {
            RateLimitBackend::Local => "local",
            RateLimitBackend::Redis { .. } => "redis",
        },
        failure_mode: match config.failure_mode {
            FailureMode::Open => "open",
            FailureMode::Closed => "closed",
        },
        backend_failures: limiter.map_or(0, junction_policy::RateLimiter::backend_failures),
        rules: config
            .rules
            .iter()
            .enumerate()
            .map(|(i, r)| RuleInfo {
                name: r.name.clone(),
                key: r.key.iter().map(|k| key_name(*k)).collect(),
                methods: r.methods.clone(),
                rate: r.rate,
                per: duration_text(r.per),
                burst: r.burst,
                live_buckets: live.as_ref().and_then(|l| l.get(i).copied()),
            })
            .collect(),
    })
}

fn key_name(k: RateKey) -> &'static str {
    match k {
        RateKey::Principal => "principal",
        RateKey::Upstream => "upstream",
        RateKey::Tool => "tool",
        RateKey::Route => "route",
        RateKey::ClientIp => "client_ip",
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// 12 hex digits of SHA-256 over the config's `Debug` text: secrets kept in
/// the environment or files are not in it (the sealing key is redacted),
/// values written into the config (static headers) are.
fn config_version(config: &junction_config::Config) -> String {
    let digest = Sha256::digest(format!("{config:?}").as_bytes());
    digest[..6].iter().map(|b| format!("{b:02x}")).collect()
}
