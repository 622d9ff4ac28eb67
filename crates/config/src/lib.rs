//! junction-config: `gateway.yaml` (DESIGN §6) to a validated, immutable [`Config`].
//!
//! Layers, later wins: built-in defaults, the YAML file, then `JUNCTION_…`
//! environment pairs with `__` for nesting (`JUNCTION_SERVER__LISTEN`). The
//! environment is passed in, never read from the process, so callers and
//! tests decide what it holds. Validation walks the merged tree by hand and
//! reports every problem with its key path, not just the first.
//!
//! This crate never binds sockets, never opens files other than the config
//! file itself, and never returns a `Config` that failed any check.

mod audit;
mod checks;
mod credentials;
mod error;
mod otel;
mod overrides;
mod policy;
mod routes;
mod server;
mod source;
mod status;
mod types;
mod upstreams;
mod walk;

use std::path::Path;

pub use audit::{AuditConfig, AuditFile, AuditIncludes, AuditSwitches, AuditTool, DEFAULT_REDACT};
pub use credentials::{ClientAuthMethod, Credentials, OAuthClient, SecretSource};
pub use error::{ConfigError, ConfigErrors};
pub use otel::TracingConfig;
pub use overrides::{OverrideConfig, OverridesConfig};
pub use server::MIN_SECRET_BYTES;
pub use status::StatusConfig;
pub use types::*;

use walk::{Ctx, Obj};

const SECTIONS: &[&str] = &[
    "server",
    "upstreams",
    "routes",
    "tools",
    "catalog",
    "auth",
    "rate_limits",
    "headers",
    "limits",
    "request_state",
    "sessions",
    "fleet",
    "log",
    "tracing",
    "audit",
    "status",
];

/// Read and validate the file at `path`, then apply `env` overrides.
/// `env` is typically `std::env::vars().collect::<Vec<_>>()`; only
/// `JUNCTION_<SECTION>__…` names and the variable named by
/// `request_state.secret_env` are looked at.
pub fn load(path: &Path, env: &[(String, String)]) -> Result<Config, ConfigErrors> {
    let yaml = std::fs::read_to_string(path)
        .map_err(|e| ConfigErrors::single("", format!("cannot read {}: {e}", path.display())))?;
    load_str(&yaml, env).map_err(|mut errors| {
        // Whole-document problems (YAML syntax) have no key path; name the file.
        for e in errors.errors.iter_mut().filter(|e| e.path.is_empty()) {
            e.message = format!("{}: {}", path.display(), e.message);
        }
        errors
    })
}

/// Validate a YAML document, then apply `env` overrides.
pub fn load_str(yaml: &str, env: &[(String, String)]) -> Result<Config, ConfigErrors> {
    let merged = source::merge(yaml, env)?;
    let mut ctx = Ctx::new(&merged.env_keys);
    let config = build(&mut ctx, &merged.value, env);
    if ctx.errors.is_empty() {
        Ok(config)
    } else {
        Err(ConfigErrors { errors: ctx.errors })
    }
}

fn build(ctx: &mut Ctx, root: &serde_json::Value, env: &[(String, String)]) -> Config {
    let r = Obj::new(ctx, Some(root), "", SECTIONS);
    let server = server::server(ctx, r.get("server"));
    let (upstreams, declared_ids) = upstreams::upstreams(ctx, &r);
    let routes = routes::routes(ctx, &r, &declared_ids);
    Config {
        tools: server::tools(ctx, r.get("tools")),
        catalog: server::catalog(ctx, r.get("catalog")),
        auth: policy::auth(ctx, r.get("auth"), &server.public_url),
        rate_limits: policy::rate_limits(ctx, r.get("rate_limits")),
        headers: policy::headers(ctx, r.get("headers")),
        limits: server::limits(ctx, r.get("limits")),
        request_state: server::request_state(ctx, r.get("request_state"), env),
        sessions: server::sessions(ctx, r.get("sessions")),
        fleet: server::fleet(ctx, r.get("fleet"), &server),
        log: server::log(ctx, r.get("log")),
        tracing: otel::tracing(ctx, r.get("tracing")),
        audit: audit::audit(ctx, r.get("audit"), &routes),
        status: status::status(ctx, r.get("status"), &routes),
        server,
        upstreams,
        routes,
    }
}
