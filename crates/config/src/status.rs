//! `status`: the read-only status page and its JSON (`GET <path>`,
//! `GET <path>.json`). Off unless `enabled`; open to anyone who can reach it
//! unless `token_env` or `token_file` names a bearer token (read by the
//! server when it builds its state, like upstream tokens).

use serde_json::Value;

use crate::checks;
use crate::credentials::SecretSource;
use crate::types::RouteConfig;
use crate::walk::{Ctx, Obj};

/// Paths the status page can never take: the admin endpoints.
const ADMIN_PATHS: &[&str] = &["/metrics", "/healthz", "/readyz"];

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusConfig {
    pub enabled: bool,
    /// The HTML page; its JSON is at this path plus `.json`. Starts with
    /// `/`, no trailing `/`, never an MCP route, admin or well-known path.
    pub path: String,
    /// Where the bearer token is; `None`: no token asked (in-cluster only).
    pub token: Option<SecretSource>,
}

impl Default for StatusConfig {
    fn default() -> Self {
        StatusConfig {
            enabled: false,
            path: "/status".into(),
            token: None,
        }
    }
}

impl StatusConfig {
    /// The path of the JSON document.
    pub fn json_path(&self) -> String {
        format!("{}.json", self.path)
    }
}

pub(crate) fn status(ctx: &mut Ctx, v: Option<&Value>, routes: &[RouteConfig]) -> StatusConfig {
    let d = StatusConfig::default();
    let o = Obj::new(
        ctx,
        v,
        "status",
        &["enabled", "path", "token_env", "token_file"],
    );
    let enabled = o.boolean(ctx, "enabled", d.enabled);
    let path = match (o.has("path"), o.nonempty(ctx, "path")) {
        (_, Some(p)) => match path_problem(&p, enabled, routes) {
            Some(problem) => {
                ctx.err(&o.key_path("path"), format!("{p:?}: {problem}"));
                d.path
            }
            None => p,
        },
        // Written but not a usable string: reported already.
        (true, None) => d.path,
        // The default can collide with a route too.
        (false, None) => {
            if let Some(problem) = path_problem(&d.path, enabled, routes) {
                let message = format!("{:?} (the default): {problem}", d.path);
                ctx.err(&o.key_path("path"), message);
            }
            d.path
        }
    };
    let env = o.nonempty(ctx, "token_env");
    let env_ok = env
        .as_deref()
        .is_none_or(|name| checks::env_name(ctx, &o.key_path("token_env"), name));
    let file = o.nonempty(ctx, "token_file");
    let token = match (env, file) {
        (Some(_), Some(_)) => {
            ctx.err(
                "status",
                "set at most one of `token_env` and `token_file`, not both",
            );
            None
        }
        (Some(name), None) => env_ok.then_some(SecretSource::Env(name)),
        (None, Some(path)) => Some(SecretSource::File(path.into())),
        (None, None) => None,
    };
    StatusConfig {
        enabled,
        path,
        token,
    }
}

/// Why `p` cannot be the status path. Collisions only matter while the page
/// is on (a disabled page serves nothing).
fn path_problem(p: &str, enabled: bool, routes: &[RouteConfig]) -> Option<String> {
    if !p.starts_with('/') || p == "/" {
        return Some("the status path must start with `/` and name something".into());
    }
    if p.ends_with('/') {
        return Some("the status path cannot end with `/`".into());
    }
    if p.contains(['?', '#', '%']) || p.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Some(
            "the status path cannot contain `?`, `#`, `%`, whitespace or control characters".into(),
        );
    }
    if p.contains("//") || p.split('/').any(|seg| seg == "." || seg == "..") {
        return Some("the status path cannot contain empty, `.` or `..` segments".into());
    }
    if p == "/.well-known" || p.starts_with("/.well-known/") {
        return Some(
            "paths under /.well-known/ are reserved (OAuth protected resource metadata)".into(),
        );
    }
    if !enabled {
        return None;
    }
    let json = format!("{p}.json");
    if let Some(admin) = ADMIN_PATHS.iter().find(|a| **a == p || **a == json) {
        return Some(format!("collides with Junction's admin endpoint {admin}"));
    }
    if let Some(route) = routes.iter().find(|r| {
        let route = r.path.trim_end_matches('/');
        route == p || route == json
    }) {
        return Some(format!(
            "collides with the MCP route {} (the page is served at the path and its JSON at the path plus `.json`)",
            route.path
        ));
    }
    None
}
