//! The validated, immutable runtime configuration. Every value here has
//! passed validation; consumers never re-check it.

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::credentials::{Credentials, SecretSource};

#[derive(Clone, Debug)]
pub struct Config {
    pub server: ServerConfig,
    /// In config order: this order drives catalog order and route resolution.
    pub upstreams: Vec<UpstreamConfig>,
    pub routes: Vec<RouteConfig>,
    pub tools: ToolsConfig,
    pub catalog: CatalogConfig,
    pub auth: Option<AuthConfig>,
    pub rate_limits: Option<RateLimitConfig>,
    pub headers: HeadersConfig,
    pub limits: LimitsConfig,
    pub request_state: RequestStateConfig,
    pub sessions: SessionsConfig,
    /// What replicas share besides the sealing key (off by default).
    pub fleet: FleetConfig,
    pub log: LogConfig,
    pub tracing: crate::otel::TracingConfig,
    pub audit: crate::audit::AuditConfig,
    /// The read-only status page (off by default).
    pub status: crate::status::StatusConfig,
}

impl Config {
    pub fn upstream(&self, id: &str) -> Option<&UpstreamConfig> {
        self.upstreams.iter().find(|u| u.id == id)
    }

    pub fn route(&self, path: &str) -> Option<&RouteConfig> {
        self.routes.iter().find(|r| r.path == path)
    }
}

#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    /// Canonical origin (scheme://host[:port][/path], no trailing slash, no
    /// query or fragment). Token audience and base of resource metadata.
    /// Defaults to `http://<listen>` (`https://` when `tls` is set).
    pub public_url: String,
    pub tls: Option<TlsConfig>,
    pub shutdown_grace: Duration,
    /// What `/readyz` requires (default: any upstream's tool list fetched).
    pub ready_when: Readiness,
    /// Peers whose `X-Forwarded-For` names the caller (the `client_ip` rate
    /// key); empty: the TCP peer is the caller and the header is not read.
    pub trusted_proxies: Vec<ipnet::IpNet>,
}

/// `server.ready_when`: `any_upstream` | `all_upstreams` | `listening`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Readiness {
    AnyUpstream,
    AllUpstreams,
    Listening,
}

/// Paths as written; the server reads and checks the files when it binds.
#[derive(Clone, Debug)]
pub struct TlsConfig {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
}

#[derive(Clone, Debug)]
pub struct UpstreamConfig {
    pub id: String,
    pub transport: Transport,
    pub timeout: Duration,
    pub protocol: ProtocolPref,
    /// Cache TTL for tool lists of handshake-era upstreams (modern ones send `ttlMs`).
    pub list_ttl: Duration,
    /// Largest response body, SSE event or stdio line accepted (else -31003).
    pub max_response_bytes: usize,
    /// Every route's default overrides of this upstream's tools, prompts and
    /// resources, keyed by the upstream's own names.
    pub overrides: crate::overrides::OverridesConfig,
    /// Reviewed tool definitions this upstream's tools must match.
    pub pins: Option<PinsConfig>,
}

/// `upstreams[].pins`: where the reviewed definitions are, and what an
/// unpinned tool gets (quarantine by default).
#[derive(Clone, Debug, PartialEq)]
pub struct PinsConfig {
    pub file: std::path::PathBuf,
    pub allow_unpinned: bool,
}

#[derive(Clone, Debug)]
#[allow(
    clippy::large_enum_variant,
    reason = "made once per config load; boxing would only complicate matching"
)]
pub enum Transport {
    Http {
        url: String,
        /// Static headers sent on every request; names lower-cased, sorted by name.
        headers: Vec<(String, String)>,
        /// Name of the environment variable holding the bearer token (read
        /// by the upstream client, not by the loader).
        bearer_token_env: Option<String>,
        bearer_token_file: Option<PathBuf>,
        /// Extra CA bundle (PEM) trusted for this https upstream.
        ca_file: Option<PathBuf>,
        /// `credentials:` as written; never set together with a bearer token
        /// or an `authorization` header. [`UpstreamConfig::credentials`]
        /// folds the bearer settings in.
        credentials: Option<Credentials>,
    },
    Stdio {
        /// Program followed by its arguments; never empty.
        command: Vec<String>,
        /// Added to the child's environment; sorted by name.
        env: Vec<(String, String)>,
        cwd: Option<PathBuf>,
    },
}

impl UpstreamConfig {
    /// How Junction authenticates to this upstream: `credentials`, or the
    /// older `bearer_token_env` / `bearer_token_file` as a static token
    /// (validation keeps the two apart). None for stdio upstreams and for
    /// HTTP upstreams without either.
    pub fn credentials(&self) -> Option<Credentials> {
        match &self.transport {
            Transport::Http {
                credentials: Some(c),
                ..
            } => Some(c.clone()),
            Transport::Http {
                bearer_token_env: Some(name),
                ..
            } => Some(Credentials::Static(SecretSource::Env(name.clone()))),
            Transport::Http {
                bearer_token_file: Some(path),
                ..
            } => Some(Credentials::Static(SecretSource::File(path.clone()))),
            Transport::Http { .. } | Transport::Stdio { .. } => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProtocolPref {
    /// Probe `server/discover`, fall back to `initialize`.
    Auto,
    Modern,
    Legacy,
}

#[derive(Clone, Debug)]
pub struct RouteConfig {
    /// Starts with `/`; unique; never an admin or `/.well-known/` path.
    pub path: String,
    /// Resolved upstream ids, in the order of `Config::upstreams`, no duplicates, never empty.
    pub upstreams: Vec<String>,
    /// true = `prefix: always` (exposed name = id + separator + tool);
    /// false = `prefix: never` (exactly one upstream, names unchanged).
    pub prefix: bool,
    /// Globs over exposed names; each compiles with `globset`. Empty include = everything.
    pub include: Vec<String>,
    pub exclude: Vec<String>,
    /// Renames, texts, hidden and pinned properties on this route.
    pub overrides: crate::overrides::OverridesConfig,
    /// The webhook asked about this route's tool calls.
    pub guardrail: Option<GuardrailConfig>,
}

/// `routes[].guardrail`.
#[derive(Clone, Debug, PartialEq)]
pub struct GuardrailConfig {
    pub url: String,
    pub timeout: std::time::Duration,
    /// `on_error: allow`: a failing hook lets calls through (default: deny).
    pub fail_open: bool,
    /// Results go to the hook too.
    pub results: bool,
}

#[derive(Clone, Debug)]
pub struct ToolsConfig {
    /// 1-4 chars of `[A-Za-z0-9_.-]`, at least one of which can never appear
    /// in an upstream id (`_`, `.` or `A-Z`), so exposed names split unambiguously.
    pub separator: String,
    /// 16..=128 when set.
    pub max_name_length: Option<usize>,
    /// Leave out tools whose `x-mcp-header` parameters look like secrets
    /// (password, token, secret, key, authorization): header values are visible
    /// to every intermediary. Off by default; `junction catalog` flags them either way.
    pub drop_secret_headers: bool,
}

#[derive(Clone, Debug)]
pub struct CatalogConfig {
    /// Per-upstream deadline of one `tools/list` fan-out.
    pub list_deadline: Duration,
    /// Upstream pages drained per list, at least 1.
    pub max_pages: u32,
    /// Tools per downstream page, 1..=10000.
    pub page_size: usize,
}

#[derive(Clone, Debug)]
pub struct AuthConfig {
    pub jwt: JwtConfig,
    /// RFC 9728 `authorization_servers`; defaults to `[jwt.issuer]`.
    pub authorization_servers: Vec<String>,
    pub scopes_supported: Vec<String>,
    /// What each scope grants; how an empty list is read is the policy crate's call.
    pub rules: Vec<AuthRule>,
}

#[derive(Clone, Debug)]
pub struct JwtConfig {
    pub issuer: String,
    /// Defaults to `[server.public_url]`.
    pub audiences: Vec<String>,
    pub jwks: JwksSource,
    /// Clock skew allowed on `exp`/`nbf`; default 60s.
    pub leeway: Duration,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JwksSource {
    Url(String),
    File(PathBuf),
}

#[derive(Clone, Debug, Default)]
pub struct AuthRule {
    /// The caller needs every scope listed; an empty list matches any authenticated caller.
    pub scopes: Vec<String>,
    /// The caller's token must match every claim listed: (claim, accepted
    /// values); its claim (a string, or a list of strings) must hold one of them.
    pub claims: Vec<(String, Vec<String>)>,
    /// Globs over exposed tool names; each compiles with `globset`.
    pub tools: Vec<String>,
    /// Globs over exposed prompt names.
    pub prompts: Vec<String>,
    /// Globs over resource URIs as clients see them (and resource templates).
    pub resources: Vec<String>,
}

#[derive(Clone, Debug)]
pub struct RateLimitConfig {
    pub backend: RateLimitBackend,
    pub failure_mode: FailureMode,
    pub rules: Vec<RateLimitRule>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RateLimitBackend {
    Local,
    /// `redis://` or `rediss://` URL.
    Redis {
        url: String,
    },
}

/// What to do when the shared backend cannot be reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureMode {
    /// Let the request through.
    Open,
    /// Reject it as rate limited.
    Closed,
}

#[derive(Clone, Debug)]
pub struct RateLimitRule {
    /// Unique; used as the `rule` metric label.
    pub name: String,
    /// Bucket key dimensions, no duplicates; empty = one bucket shared by all requests.
    pub key: Vec<RateKey>,
    /// Tokens added per `per`; > 0.
    pub rate: u64,
    /// > 0.
    pub per: Duration,
    /// Bucket capacity; defaults to `rate`; >= 1.
    pub burst: u64,
    /// JSON-RPC methods the rule applies to; default `["tools/call"]`.
    pub methods: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RateKey {
    Principal,
    Upstream,
    Tool,
    Route,
    ClientIp,
}

#[derive(Clone, Debug)]
pub struct HeadersConfig {
    /// Client headers forwarded to upstreams, lower-cased. Never contains
    /// credentials, cookies, hop-by-hop or `mcp-*` names.
    pub forward: Vec<String>,
    /// Browser origins allowed besides Junction's own. Empty (the default)
    /// means: a request without `Origin` is allowed (non-browser clients), a
    /// request whose `Origin` equals the origin of `server.public_url` is
    /// allowed, every other `Origin` gets 403. Entries are normalized to
    /// lower-case `scheme://host[:port]`; the single entry `*` allows any origin.
    pub allowed_origins: Vec<String>,
}

#[derive(Clone, Debug)]
pub struct LimitsConfig {
    pub max_body_bytes: usize,
    pub max_header_count: usize,
    pub max_header_bytes: usize,
    /// A client must finish sending its request head within this (slowloris).
    pub header_read_timeout: Duration,
    /// ... and its body within this (HTTP 408 otherwise).
    pub body_read_timeout: Duration,
    /// A kept-alive connection with no request in progress is closed after this
    /// (longer than common client pool idle times, so closes do not race reuse).
    pub idle_timeout: Duration,
}

/// Debug never prints the secret.
#[derive(Clone)]
pub struct RequestStateConfig {
    /// Key bytes read from the variable named by `secret_env` (>= 32 bytes);
    /// None = the server picks a random key per process (one replica only).
    pub secret: Option<Vec<u8>>,
    pub secret_env: Option<String>,
    pub ttl: Duration,
}

impl fmt::Debug for RequestStateConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RequestStateConfig")
            .field("secret", &self.secret.as_ref().map(|_| "<redacted>"))
            .field("secret_env", &self.secret_env)
            .field("ttl", &self.ttl)
            .finish()
    }
}

#[derive(Clone, Debug)]
pub struct SessionsConfig {
    /// Lifetime of downstream legacy `Mcp-Session-Id` tokens.
    pub ttl: Duration,
}

/// `fleet`: the Redis through which replicas tell each other what a client
/// changed on one of them (a session ended by DELETE, a session's log level,
/// its `resources/subscribe` set), and the address other replicas relay a
/// held call's retry to. Unset: each replica keeps these to itself.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FleetConfig {
    pub redis_url: Option<String>,
    /// This replica's own base URL as the other replicas reach it
    /// (`http://<pod IP>:<port>`): a retry or a client's answer that lands on
    /// another replica is relayed here when this replica holds its call.
    pub advertise_url: Option<String>,
}

#[derive(Clone, Debug)]
pub struct LogConfig {
    pub format: LogFormat,
    /// A level (`info`) or an `EnvFilter` directive list (`info,junction=debug`).
    pub level: String,
    /// One `junction::access` line per MCP request (default on; the level
    /// does not filter it).
    pub access: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}
