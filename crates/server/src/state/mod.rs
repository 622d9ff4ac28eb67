//! The runtime state built from one validated `Config`: upstream clients, routes
//! with their naming rules, the tool-list cache, the sealing key, the policy
//! engines and the per-replica tables (`replica`). A request reads it through
//! one `ArcSwap::load`; a reload builds a new one aside (reusing unchanged
//! upstream clients, the caches and the tables) and swaps it in whole.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use junction_catalog::{
    Catalog, Deadline, NamingRules, Override, Overrides, PinFile, Pins, SourceError, SourcePage,
    ToolCache, ToolFilter, ToolSource,
};
use junction_config::{
    Config, Credentials, ProtocolPref, RouteConfig, SecretSource, Transport, UpstreamConfig,
};
use junction_policy::UpstreamCredentials;
use junction_protocol::seal::Sealer;
use junction_telemetry::{Metrics, OkSeries};
use junction_upstream::{EraPref, TokenFuture, TokenSource, TransportSpec, Upstream, UpstreamSpec};

mod replica;

pub use replica::*;

/// Failure to turn a valid config into a running state (bad credentials file,
/// unknown executable, ...). Reported before anything binds.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("upstreams[{index}] ({id}): {message}")]
    Upstream {
        index: usize,
        id: String,
        message: String,
    },
    #[error("routes[{index}] ({path}): {message}")]
    Route {
        index: usize,
        path: String,
        message: String,
    },
    #[error("{section}: {message}")]
    Policy {
        section: &'static str,
        message: String,
    },
}

pub struct UpstreamEntry {
    pub id: String,
    /// The config this client was built from; a reload reuses the client (its
    /// pooled connections, stdio child and legacy session) when it is unchanged.
    pub fingerprint: String,
    pub client: Arc<Upstream>,
    pub source: Arc<dyn ToolSource>,
    pub list_ttl: Duration,
    pub is_http: bool,
    /// This upstream's `tools/call` request series with outcome `ok`.
    pub call_ok: Arc<OkSeries>,
    /// Its tools' call series with outcome `ok`.
    pub tools_ok: Arc<junction_telemetry::ToolOkSeries>,
    /// `credentials` of the upstream, when its requests carry the caller's
    /// identity (`token_exchange`, `passthrough`): `identity` asks it per
    /// call. Junction's own requests get theirs from the client's token
    /// source.
    pub credentials: Option<Arc<UpstreamCredentials>>,
}

/// Fingerprint of a merge's inputs (generation, status per upstream) and its result.
pub type MergedMemo = (Vec<(u64, u8)>, Arc<Catalog>);

/// One served MCP endpoint.
pub struct RouteState {
    pub path: String,
    pub upstreams: Vec<String>,
    pub naming: NamingRules,
    pub filter: ToolFilter,
    /// Last merged catalog and the fingerprint of the inputs it came from, so an
    /// unchanged set of upstream lists is never merged twice.
    pub merged: Mutex<Option<MergedMemo>>,
    /// The warm path: the catalog last served, valid while the tool cache has
    /// not changed (`ToolCache::changes`) and before the earliest TTL of its
    /// lists runs out. Checked first, so a warm request costs one atomic load,
    /// one clock read and this lock instead of a cache lookup per upstream.
    pub warm: Mutex<Option<WarmMemo>>,
    /// The webhook asked about this route's tool calls (`guardrail`).
    pub guardrail: Option<crate::guardrail::Guardrail>,
    /// `requests_total` / `request_duration_seconds` with outcome `ok`, one
    /// per slot of a method label (the endpoint's method table gives each
    /// label its slot and checks at compile time that they fit).
    pub ok_series: [OkSeries; METHOD_SLOTS],
}

/// Slots for per-method series of a route: more than the method table has
/// labels (the endpoint asserts it), so adding a method needs no change here
/// until the table outgrows it.
pub const METHOD_SLOTS: usize = 32;

/// (`ToolCache::changes` when built, valid until, the catalog).
pub type WarmMemo = (u64, tokio::time::Instant, Arc<Catalog>);

pub struct State {
    pub config: Arc<Config>,
    /// FNV, not SipHash: keys from the config, looked up once per call
    /// each (issue 26).
    pub upstreams: fnv::FnvHashMap<String, UpstreamEntry>,
    pub routes: fnv::FnvHashMap<String, Arc<RouteState>>,
    pub cache: Arc<ToolCache>,
    pub sealer: Sealer,
    pub metrics: Metrics,
    /// Present when `auth` is configured: every MCP request must authenticate.
    pub auth: Option<Auth>,
    pub rate_limiter: Option<junction_policy::RateLimiter>,
    /// What this replica remembers between requests; carried over by every
    /// reload.
    pub replica: Arc<Replica>,
    /// `headers.forward`, parsed.
    pub forward: junction_policy::ForwardList,
    /// SHA-256 of the status page's bearer token (`status.token_env` /
    /// `token_file`), read at each build; `None`: the page asks for none.
    pub status_token: Option<[u8; 32]>,
}

pub struct Auth {
    pub authenticator: junction_policy::Authenticator,
    pub authorizer: junction_policy::Authorizer,
}

/// Whether a JWKS URL fetches the signing keys unencrypted from another
/// machine: plain http to a host that is not loopback.
fn keys_in_clear(url: &str) -> bool {
    let Ok(uri) = url.parse::<http::Uri>() else {
        return false;
    };
    let host = uri.host().unwrap_or_default();
    let host = host.trim_start_matches('[').trim_end_matches(']');
    uri.scheme_str() == Some("http")
        && !host.eq_ignore_ascii_case("localhost")
        && !host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Adapts an upstream client to the catalog's `ToolSource` trait.
struct UpstreamSource(Arc<Upstream>, Metrics);

impl ToolSource for UpstreamSource {
    fn id(&self) -> &str {
        self.0.id()
    }

    fn list_page<'a>(
        &'a self,
        cursor: Option<String>,
        deadline: Deadline,
    ) -> BoxFuture<'a, Result<SourcePage, SourceError>> {
        Box::pin(async move {
            let page = crate::record::counted_page(
                &self.1,
                self.0.id(),
                "tools/list",
                deadline.at,
                self.0.list_tools_page(cursor),
            )
            .await;
            let page = match page {
                Some(Ok(page)) => page,
                Some(Err(e)) => return Err(SourceError(e.to_string())),
                None => return Err(deadline.error()),
            };
            Ok(SourcePage {
                tools: page.tools,
                next_cursor: page.next_cursor,
                ttl_ms: page.ttl_ms,
                public: page.cache_public,
            })
        })
    }
}

impl State {
    /// Sets `junction_table_entries` and `junction_table_capacity` for this
    /// replica's bounded tables, and the fleet bus's state; called at each
    /// scrape.
    pub(crate) fn observe_tables(&self) {
        let m = &self.metrics;
        for (table, entries, capacity) in self.replica.tables() {
            let gauge = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
            m.table_entries
                .with_label_values(&[table])
                .set(gauge(entries));
            m.table_capacity
                .with_label_values(&[table])
                .set(gauge(capacity));
        }
        if let Some(bus) = self.replica.fleet.get() {
            m.fleet_connected
                .with_label_values(&["redis"])
                .set(i64::from(bus.is_up()));
            let dropped = m.fleet_dropped_total.with_label_values(&["redis"]);
            dropped.inc_by(bus.dropped().saturating_sub(dropped.get()));
        }
    }

    /// `env` is the process environment (injected so tests never mutate it).
    pub async fn build(
        config: Config,
        env: &HashMap<String, String>,
        metrics: Metrics,
    ) -> Result<State, BuildError> {
        State::rebuild(config, env, metrics, None).await
    }

    /// Builds a state for `config`, reusing from `previous` every upstream client
    /// whose config did not change, the tool-list cache (entries of changed or
    /// removed upstreams are invalidated) and, when the key is unchanged or random,
    /// the sealing key, so sessions, cursors and requestState survive a reload.
    pub async fn rebuild(
        config: Config,
        env: &HashMap<String, String>,
        metrics: Metrics,
        previous: Option<&State>,
    ) -> Result<State, BuildError> {
        let config = Arc::new(config);
        for net in &config.server.trusted_proxies {
            if net.prefix_len() == 0 {
                tracing::warn!(%net, "server.trusted_proxies trusts every address: any client's X-Forwarded-For is believed, so a caller can choose its own client_ip rate-limit bucket");
            }
        }
        if let Some(url) = config.auth.as_ref().and_then(|a| match &a.jwt.jwks {
            junction_config::JwksSource::Url(url) => keys_in_clear(url).then_some(url),
            junction_config::JwksSource::File(_) => None,
        }) {
            tracing::warn!(jwks_url = %url, "auth.jwt.jwks_url is plain http to another host: the token signing keys travel unencrypted, so anyone on the path can swap them and mint tokens Junction accepts; serve them over https");
        }
        let mut upstreams = fnv::FnvHashMap::default();
        for (index, u) in config.upstreams.iter().enumerate() {
            let failed = |message: String| BuildError::Upstream {
                index,
                id: u.id.clone(),
                message,
            };
            let credentials = match &u.transport {
                Transport::Http {
                    credentials: Some(c),
                    ..
                } => Some(Arc::new(
                    UpstreamCredentials::new(&u.id, c, env).map_err(|e| failed(e.to_string()))?,
                )),
                _ => None,
            };
            let mut spec = upstream_spec(u, env).map_err(failed)?;
            let fingerprint = format!(
                "{}|{}",
                fingerprint(&spec, u.list_ttl),
                credentials_fingerprint(u, env)
            );
            if let Some(old) = previous
                .and_then(|p| p.upstreams.get(&u.id))
                .filter(|o| o.fingerprint == fingerprint)
            {
                upstreams.insert(
                    u.id.clone(),
                    UpstreamEntry {
                        id: old.id.clone(),
                        fingerprint,
                        client: old.client.clone(),
                        source: old.source.clone(),
                        list_ttl: old.list_ttl,
                        is_http: old.is_http,
                        call_ok: old.call_ok.clone(),
                        tools_ok: old.tools_ok.clone(),
                        credentials: old.credentials.clone(),
                    },
                );
                continue;
            }
            // Junction's own requests (lists, discovery, sessions, streams)
            // carry Junction's token, except through passthrough, where
            // they carry the static bearer if one is set.
            if let (Some(c), TransportSpec::Http { token, .. }) =
                (&credentials, &mut spec.transport)
            {
                if c.covers_own_requests() {
                    *token = Some(Arc::new(OwnToken {
                        credentials: c.clone(),
                        metrics: metrics.clone(),
                        upstream: u.id.clone(),
                    }));
                }
            }
            let is_http = matches!(spec.transport, TransportSpec::Http { .. });
            let client = Upstream::new(spec).map_err(|e| BuildError::Upstream {
                index,
                id: u.id.clone(),
                message: e.to_string(),
            })?;
            if is_http {
                client.count_connections(junction_upstream::ConnCounters {
                    opened: metrics
                        .upstream_connections_opened_total
                        .with_label_values(&[&u.id]),
                    open: metrics.upstream_connections.with_label_values(&[&u.id]),
                });
            }
            let source: Arc<dyn ToolSource> =
                Arc::new(UpstreamSource(client.clone(), metrics.clone()));
            upstreams.insert(
                u.id.clone(),
                UpstreamEntry {
                    id: u.id.clone(),
                    fingerprint,
                    client,
                    source,
                    list_ttl: u.list_ttl,
                    is_http,
                    call_ok: Default::default(),
                    tools_ok: Default::default(),
                    credentials: credentials
                        .filter(|c| matches!(c.kind(), "token_exchange" | "passthrough")),
                },
            );
        }
        // Pins come from files the operator approves: read once per build,
        // the same on every replica.
        let mut pins = std::collections::BTreeMap::new();
        for (index, u) in config.upstreams.iter().enumerate() {
            let Some(p) = &u.pins else { continue };
            let file = read_pins(&p.file).map_err(|message| BuildError::Upstream {
                index,
                id: u.id.clone(),
                message,
            })?;
            pins.insert(
                u.id.clone(),
                Pins {
                    file,
                    allow_unpinned: p.allow_unpinned,
                },
            );
        }
        let mut routes = fnv::FnvHashMap::default();
        for (index, r) in config.routes.iter().enumerate() {
            let route = route_state(r, &config, &pins).map_err(|message| BuildError::Route {
                index,
                path: r.path.clone(),
                message,
            })?;
            routes.insert(r.path.clone(), Arc::new(route));
        }
        let same_key =
            previous.is_some_and(|p| p.config.request_state.secret == config.request_state.secret);
        let sealer = match (previous, &config.request_state.secret) {
            (Some(p), _) if same_key => p.sealer.clone(),
            (_, Some(key)) => Sealer::new(key),
            (_, None) => {
                tracing::warn!(
                    "request_state.secret_env is not set: sessions, cursors and requestState are sealed \
                     with a random per-process key, so only this replica can open them"
                );
                Sealer::random()
            }
        };
        let cache = match previous {
            Some(p) if p.config.catalog.max_pages == config.catalog.max_pages => {
                for (id, old) in &p.upstreams {
                    if upstreams
                        .get(id)
                        .is_none_or(|n| !Arc::ptr_eq(&n.client, &old.client))
                    {
                        p.cache.invalidate(id);
                    }
                }
                p.cache.clone()
            }
            _ => Arc::new(ToolCache::new(config.catalog.max_pages as usize)),
        };
        let auth = match &config.auth {
            None => None,
            Some(a) => Some(Auth {
                authenticator: junction_policy::Authenticator::new(a, &config.server.public_url)
                    .map_err(|e| BuildError::Policy {
                        section: "auth",
                        message: e.to_string(),
                    })?,
                authorizer: junction_policy::Authorizer::new(&a.rules).map_err(|e| {
                    BuildError::Policy {
                        section: "auth.rules",
                        message: e.to_string(),
                    }
                })?,
            }),
        };
        let rate_limiter = match &config.rate_limits {
            None => None,
            Some(r) => Some(junction_policy::RateLimiter::new(r).await.map_err(|e| {
                BuildError::Policy {
                    section: "rate_limits",
                    message: e.to_string(),
                }
            })?),
        };
        let status_token = status_token(&config, env)?;
        let replica = previous.map_or_else(Arc::default, |p| p.replica.clone());
        // Lists of upstreams that are gone or changed can never be served again.
        replica
            .lists
            .retain(|id, fp| upstreams.get(id).is_some_and(|u| u.fingerprint == fp));
        replica.resources.retain(|path| routes.contains_key(path));
        replica
            .advertise
            .store(config.fleet.advertise_url.clone().map(Arc::new));
        if let Some(url) = &config.fleet.redis_url {
            if replica.fleet.get().is_none() {
                let bus = crate::fleet::Bus::new(url).map_err(|message| BuildError::Policy {
                    section: "fleet",
                    message,
                })?;
                bus.start();
                let _ = replica.fleet.set(bus);
            } else if previous.is_some_and(|p| p.config.fleet.redis_url != config.fleet.redis_url) {
                tracing::warn!("fleet.redis_url changed: the new value takes effect on restart");
            }
        }
        Ok(State {
            forward: junction_policy::ForwardList::new(&config.headers.forward),
            config,
            upstreams,
            routes,
            cache,
            sealer,
            metrics,
            auth,
            rate_limiter,
            replica,
            status_token,
        })
    }

    /// Clients of `previous` that this state no longer uses (removed or changed
    /// upstreams): the caller shuts them down once in-flight requests had time
    /// to finish.
    pub fn retired_from(&self, previous: &State) -> Vec<Arc<Upstream>> {
        previous
            .upstreams
            .values()
            .filter(|old| {
                self.upstreams
                    .get(&old.id)
                    .is_none_or(|n| !Arc::ptr_eq(&n.client, &old.client))
            })
            .map(|old| old.client.clone())
            .collect()
    }

    /// Stops every upstream client (stdio children, legacy sessions).
    pub async fn shutdown(&self) {
        let all = self.upstreams.values().map(|u| u.client.shutdown());
        futures_util::future::join_all(all).await;
    }
}

/// The digest of the status page's token, when the page is on and asks for one.
fn status_token(
    config: &Config,
    env: &HashMap<String, String>,
) -> Result<Option<[u8; 32]>, BuildError> {
    use sha2::{Digest, Sha256};
    let status = &config.status;
    let Some(source) = status.token.as_ref().filter(|_| status.enabled) else {
        return Ok(None);
    };
    let failed = |message: String| BuildError::Policy {
        section: "status",
        message,
    };
    let token = match source {
        SecretSource::Env(name) => env
            .get(name)
            .cloned()
            .ok_or_else(|| failed(format!("token_env: environment variable {name} is not set")))?,
        SecretSource::File(path) => std::fs::read_to_string(path)
            .map_err(|e| failed(format!("token_file {}: {e}", path.display())))?,
    };
    match token.trim() {
        "" => Err(failed("the token is empty".into())),
        token => Ok(Some(Sha256::digest(token.as_bytes()).into())),
    }
}

fn read_pins(path: &std::path::Path) -> Result<PinFile, String> {
    let bytes = std::fs::read(path).map_err(|e| {
        format!(
            "pins.file {}: {e} (junction catalog --write-pins writes it)",
            path.display()
        )
    })?;
    serde_json::from_slice(&bytes).map_err(|e| format!("pins.file {}: {e}", path.display()))
}

fn route_state(
    r: &RouteConfig,
    config: &Config,
    pins: &std::collections::BTreeMap<String, Pins>,
) -> Result<RouteState, String> {
    let naming = NamingRules {
        separator: config.tools.separator.clone(),
        prefix: r.prefix,
        max_name_length: config.tools.max_name_length,
    };
    let filter = ToolFilter::new(&r.include, &r.exclude)
        .map_err(|e| e.to_string())?
        .dropping_secret_headers(config.tools.drop_secret_headers)
        .with_overrides(route_overrides(r, config, &naming))
        .with_pins(
            r.upstreams
                .iter()
                .filter_map(|id| Some((id.clone(), pins.get(id)?.clone())))
                .collect(),
        );
    Ok(RouteState {
        path: r.path.clone(),
        upstreams: r.upstreams.clone(),
        naming,
        filter,
        guardrail: match &r.guardrail {
            None => None,
            Some(g) => Some(crate::guardrail::Guardrail::new(
                &g.url,
                g.timeout,
                g.fail_open,
                g.results,
            )?),
        },
        merged: Mutex::new(None),
        warm: Mutex::new(None),
        ok_series: Default::default(),
    })
}

/// The route's overrides: each of its upstreams' (keyed by the upstream's own
/// names, here turned into the names the route would expose), then the
/// route's own, which replace an upstream's entry for the same name.
fn route_overrides(r: &RouteConfig, config: &Config, naming: &NamingRules) -> Overrides {
    fn entry(o: &junction_config::OverrideConfig) -> Override {
        Override {
            name: o.name.clone(),
            title: o.title.clone(),
            description: o.description.clone(),
            hide: o.hide.clone(),
            pin: o.pin.clone(),
            origin: o.path.clone(),
        }
    }
    let mut out = Overrides::default();
    for u in r.upstreams.iter().filter_map(|id| config.upstream(id)) {
        let o = &u.overrides;
        // An upstream renames its own tool: the route still prefixes it.
        let own = |e: &junction_config::OverrideConfig| Override {
            name: e.name.as_ref().map(|n| naming.full_name(&u.id, n)),
            ..entry(e)
        };
        for (name, e) in &o.tools {
            out.tools.insert(naming.full_name(&u.id, name), own(e));
        }
        for (name, e) in &o.prompts {
            out.prompts.insert(naming.full_name(&u.id, name), own(e));
        }
        for (uri, e) in &o.resources {
            out.resources.insert(uri.clone(), entry(e));
        }
    }
    let o = &r.overrides;
    for (name, e) in &o.tools {
        out.tools.insert(name.clone(), entry(e));
    }
    for (name, e) in &o.prompts {
        out.prompts.insert(name.clone(), entry(e));
    }
    for (uri, e) in &o.resources {
        out.resources.insert(uri.clone(), entry(e));
    }
    out
}

/// Maps one upstream's config to the client's spec, resolving credentials from the
/// environment or a file, and the program name `junction` to this very binary (so
/// the demo upstreams of the default config need nothing on PATH).
fn upstream_spec(
    u: &UpstreamConfig,
    env: &HashMap<String, String>,
) -> Result<UpstreamSpec, String> {
    let transport = match &u.transport {
        Transport::Http {
            url,
            headers,
            bearer_token_env,
            bearer_token_file,
            ca_file,
            ..
        } => {
            let mut headers = headers.clone();
            let token = match (bearer_token_env, bearer_token_file) {
                (Some(name), _) => Some(env.get(name).cloned().ok_or_else(|| {
                    format!("bearer_token_env: environment variable {name} is not set")
                })?),
                (None, Some(path)) => Some(
                    std::fs::read_to_string(path)
                        .map_err(|e| format!("bearer_token_file {}: {e}", path.display()))?
                        .trim()
                        .to_owned(),
                ),
                (None, None) => None,
            };
            if let Some(token) = token {
                headers.retain(|(k, _)| !k.eq_ignore_ascii_case("authorization"));
                headers.push(("authorization".into(), format!("Bearer {token}")));
            }
            TransportSpec::Http {
                url: url.clone(),
                headers,
                ca_file: ca_file.clone(),
                token: None,
            }
        }
        Transport::Stdio {
            command,
            env: child_env,
            cwd,
        } => {
            let mut command = command.clone();
            if command.first().map(String::as_str) == Some("junction") {
                let exe = std::env::current_exe()
                    .map_err(|e| format!("cannot locate the junction binary: {e}"))?;
                command[0] = exe.to_string_lossy().into_owned();
            }
            TransportSpec::Stdio {
                command,
                env: child_env.clone(),
                cwd: cwd.clone(),
            }
        }
    };
    let era = match u.protocol {
        ProtocolPref::Auto => EraPref::Auto,
        ProtocolPref::Modern => EraPref::Modern,
        ProtocolPref::Legacy => EraPref::Legacy,
    };
    Ok(UpstreamSpec {
        id: u.id.clone(),
        transport,
        timeout: u.timeout,
        era,
        max_message_bytes: u.max_response_bytes,
    })
}

/// What makes two upstreams' credentials different: the config (which names
/// where secrets are) and a digest of the secrets themselves. Never logged.
fn credentials_fingerprint(u: &UpstreamConfig, env: &HashMap<String, String>) -> String {
    use sha2::{Digest, Sha256};
    let Transport::Http {
        credentials: Some(c),
        ..
    } = &u.transport
    else {
        return String::new();
    };
    let mut h = Sha256::new();
    h.update(format!("{c:?}").as_bytes());
    let sources = match c {
        Credentials::Static(s) => vec![s],
        Credentials::ClientCredentials(client) | Credentials::TokenExchange { client, .. } => {
            vec![&client.client_secret]
        }
        Credentials::Passthrough { .. } => Vec::new(),
    };
    for source in sources {
        match source {
            SecretSource::Env(name) => {
                h.update(env.get(name).map(String::as_bytes).unwrap_or(b"-"))
            }
            SecretSource::File(path) => h.update(std::fs::read(path).unwrap_or_default()),
        }
    }
    format!("{:x}", h.finalize())
}

/// Junction's own token for an upstream's requests, from its credentials,
/// counted in `junction_upstream_credentials_total`.
struct OwnToken {
    credentials: Arc<UpstreamCredentials>,
    metrics: Metrics,
    upstream: String,
}

impl TokenSource for OwnToken {
    fn authorization(&self) -> TokenFuture<'_> {
        Box::pin(async move {
            let got = self.credentials.for_caller(None).await;
            let outcome = match &got {
                Ok(Some(t)) if t.fresh => "fresh",
                Ok(_) => "cached",
                Err(e) => e.reason(),
            };
            self.metrics
                .upstream_credentials_total
                .with_label_values(&[&self.upstream, self.credentials.kind(), outcome])
                .inc();
            match got {
                Ok(Some(t)) => Ok(t.authorization()),
                Ok(None) => Err(junction_upstream::UpstreamError::Unavailable(
                    "no credentials for Junction's own requests".into(),
                )),
                Err(e) => Err(junction_upstream::UpstreamError::Unavailable(format!(
                    "credentials of upstream {}: {e}",
                    self.upstream
                ))),
            }
        })
    }
}

/// Everything that makes two upstream clients different, secrets included (the
/// spec's Debug redacts them, so it cannot serve here). Never logged.
fn fingerprint(spec: &UpstreamSpec, list_ttl: Duration) -> String {
    let transport = match &spec.transport {
        TransportSpec::Http {
            url,
            headers,
            ca_file,
            token: _,
        } => format!("http|{url}|{headers:?}|{ca_file:?}"),
        TransportSpec::Stdio { command, env, cwd } => format!("stdio|{command:?}|{env:?}|{cwd:?}"),
    };
    let era = match spec.era {
        EraPref::Auto => "auto",
        EraPref::Modern => "modern",
        EraPref::Legacy => "legacy",
    };
    format!(
        "{transport}|{:?}|{era}|{list_ttl:?}|{}",
        spec.timeout, spec.max_message_bytes
    )
}

#[cfg(test)]
mod tests {
    use super::keys_in_clear;

    #[test]
    fn only_plain_http_to_another_host_sends_keys_in_clear() {
        for url in [
            "http://keycloak.auth.svc:8080/realms/x/protocol/openid-connect/certs",
            "http://192.0.2.7/jwks",
            "http://[2001:db8::1]/jwks",
        ] {
            assert!(keys_in_clear(url), "{url}");
        }
        for url in [
            "https://issuer.example/jwks",
            "http://127.0.0.1:9000/jwks",
            "http://127.3.2.1/jwks",
            "http://localhost/jwks",
            "http://LOCALHOST:80/jwks",
            "http://[::1]:9000/jwks",
        ] {
            assert!(!keys_in_clear(url), "{url}");
        }
    }
}
