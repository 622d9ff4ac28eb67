//! `upstreams[].credentials`: how Junction authenticates to an HTTP upstream
//! (a static token, an OAuth client credentials grant, RFC 8693 token
//! exchange, or the caller's own token), its types and their validation.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use crate::checks;
use crate::walk::{describe, scalar_string, Ctx, Obj};

/// `upstreams[].credentials`: what an HTTP upstream is sent as `Authorization`.
/// Secrets are named here and read by whoever builds the client, never by the loader.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Credentials {
    /// `type: static`: one bearer token (`token_env` | `token_file`).
    Static(SecretSource),
    /// `type: client_credentials`: Junction's own token from an OAuth 2.1
    /// client credentials grant, for every request.
    ClientCredentials(OAuthClient),
    /// `type: token_exchange`: RFC 8693 with the caller's token as
    /// `subject_token` for caller requests; Junction's own requests use the
    /// client credentials grant of the same client. Needs `auth`.
    TokenExchange {
        client: OAuthClient,
        /// Exchanged tokens kept (bounded); default 10 000.
        cache_size: usize,
    },
    /// `type: passthrough`: the caller's own token, only when its `aud`
    /// lists `audience`. Needs `auth`.
    Passthrough { audience: String },
}

impl Credentials {
    /// The `type` as written (also the `kind` metric label).
    pub fn kind(&self) -> &'static str {
        match self {
            Credentials::Static(_) => "static",
            Credentials::ClientCredentials(_) => "client_credentials",
            Credentials::TokenExchange { .. } => "token_exchange",
            Credentials::Passthrough { .. } => "passthrough",
        }
    }
}

/// Where a secret is read from: an environment variable's name, or a file
/// (its contents trimmed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SecretSource {
    Env(String),
    File(PathBuf),
}

/// An OAuth client of a token endpoint (client credentials and token exchange).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OAuthClient {
    /// An http(s) URL.
    pub token_url: String,
    pub client_id: String,
    pub client_secret: SecretSource,
    /// Sent space-separated as `scope` when not empty; valid OAuth scope tokens.
    pub scopes: Vec<String>,
    /// Sent as `audience` when set.
    pub audience: Option<String>,
    /// Sent as `resource` (RFC 8707) when set; an absolute URI without fragment.
    pub resource: Option<String>,
    pub auth_method: ClientAuthMethod,
    /// One token request, connect to last byte; default 10 s.
    pub timeout: Duration,
    /// Extra PEM roots for an https `token_url`, besides the public web roots.
    pub ca_file: Option<PathBuf>,
}

/// How the client authenticates to the token endpoint (RFC 6749 §2.3.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAuthMethod {
    /// HTTP Basic with the form-encoded id and secret (the default).
    ClientSecretBasic,
    /// `client_id` and `client_secret` in the form body.
    ClientSecretPost,
}

const TYPES: &[&str] = &[
    "static",
    "client_credentials",
    "token_exchange",
    "passthrough",
];
const STATIC_KEYS: &[&str] = &["type", "token_env", "token_file"];
const PASSTHROUGH_KEYS: &[&str] = &["type", "audience"];
const OAUTH_KEYS: &[&str] = &[
    "type",
    "token_url",
    "client_id",
    "client_secret_env",
    "client_secret_file",
    "scopes",
    "audience",
    "resource",
    "auth_method",
    "timeout",
    "ca_file",
];
const EXCHANGE_KEYS: &[&str] = &[
    "type",
    "token_url",
    "client_id",
    "client_secret_env",
    "client_secret_file",
    "scopes",
    "audience",
    "resource",
    "auth_method",
    "timeout",
    "ca_file",
    "cache_size",
];
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
const DEFAULT_CACHE_SIZE: u64 = 10_000;
const MAX_CACHE_SIZE: u64 = 1_000_000;

/// `credentials` of the HTTP upstream at `path`; `has_auth`: the top-level
/// `auth` section is set (callers then carry a token to exchange or pass on).
pub(crate) fn credentials(
    ctx: &mut Ctx,
    v: &Value,
    path: &str,
    has_auth: bool,
) -> Option<Credentials> {
    let Value::Object(map) = v else {
        ctx.err(
            path,
            format!(
                "expected a mapping with a `type` ({}), found {}",
                TYPES.join(", "),
                describe(v)
            ),
        );
        return None;
    };
    let type_path = format!("{path}.type");
    let kind = match map.get("type").filter(|v| !v.is_null()) {
        None => {
            ctx.err(&type_path, format!("required: one of {}", TYPES.join(", ")));
            return None;
        }
        Some(t) => scalar_string(ctx, &type_path, t)?,
    };
    let Some(index) = TYPES.iter().position(|t| *t == kind) else {
        ctx.err(
            &type_path,
            format!(
                "unknown type {kind:?}, expected one of: {}",
                TYPES.join(", ")
            ),
        );
        return None;
    };
    if index >= 2 && !has_auth {
        ctx.err(
            &type_path,
            format!("{kind} needs the top-level `auth` section: it sends the caller's token on, and without `auth` callers have none"),
        );
    }
    match index {
        0 => {
            let o = Obj::new(ctx, Some(v), path, STATIC_KEYS);
            secret(ctx, &o, "token_env", "token_file").map(Credentials::Static)
        }
        1 => {
            let o = Obj::new(ctx, Some(v), path, OAUTH_KEYS);
            oauth_client(ctx, &o).map(Credentials::ClientCredentials)
        }
        2 => {
            let o = Obj::new(ctx, Some(v), path, EXCHANGE_KEYS);
            let cache_size = if o.has("cache_size") {
                o.int(ctx, "cache_size", 1, MAX_CACHE_SIZE)
            } else {
                Some(DEFAULT_CACHE_SIZE)
            };
            let client = oauth_client(ctx, &o);
            Some(Credentials::TokenExchange {
                client: client?,
                cache_size: usize::try_from(cache_size?).ok()?,
            })
        }
        _ => {
            let o = Obj::new(ctx, Some(v), path, PASSTHROUGH_KEYS);
            let audience = o.required(ctx, "audience");
            Some(Credentials::Passthrough {
                audience: audience?,
            })
        }
    }
}

/// Exactly one of `env_key` (a variable name) and `file_key` (a path).
fn secret(ctx: &mut Ctx, o: &Obj, env_key: &str, file_key: &str) -> Option<SecretSource> {
    let env = o.nonempty(ctx, env_key);
    let env_ok = env
        .as_deref()
        .is_none_or(|name| checks::env_name(ctx, &o.key_path(env_key), name));
    let file = o.nonempty(ctx, file_key).map(PathBuf::from);
    match (env, file) {
        (Some(name), None) => env_ok.then_some(SecretSource::Env(name)),
        (None, Some(path)) => Some(SecretSource::File(path)),
        (Some(_), Some(_)) => {
            ctx.err(
                o.path(),
                format!("set exactly one of `{env_key}` and `{file_key}`, not both"),
            );
            None
        }
        (None, None) => {
            // An empty value was reported already; only say what is missing.
            if !o.has(env_key) && !o.has(file_key) {
                ctx.err(
                    o.path(),
                    format!("set exactly one of `{env_key}` (an environment variable) and `{file_key}` (a path)"),
                );
            }
            None
        }
    }
}

fn oauth_client(ctx: &mut Ctx, o: &Obj) -> Option<OAuthClient> {
    let url_path = o.key_path("token_url");
    let token_url = o.required(ctx, "token_url");
    let uri = token_url
        .as_deref()
        .and_then(|u| checks::http_url(ctx, &url_path, u, true));
    let client_id = o.required(ctx, "client_id");
    let client_secret = secret(ctx, o, "client_secret_env", "client_secret_file");
    let scopes = crate::policy::scopes(ctx, o, "scopes");
    let audience = o.nonempty(ctx, "audience");
    let resource = o
        .nonempty(ctx, "resource")
        .and_then(|r| resource_uri(ctx, &o.key_path("resource"), r));
    let auth_method = match o.choice(
        ctx,
        "auth_method",
        &["client_secret_basic", "client_secret_post"],
    ) {
        Some(1) => ClientAuthMethod::ClientSecretPost,
        _ => ClientAuthMethod::ClientSecretBasic,
    };
    let timeout = o.positive_duration(ctx, "timeout", DEFAULT_TIMEOUT);
    let ca_file = o.nonempty(ctx, "ca_file").map(PathBuf::from);
    if ca_file.is_some()
        && uri
            .as_ref()
            .is_some_and(|u| u.scheme_str() != Some("https"))
    {
        ctx.err(
            &o.key_path("ca_file"),
            "only allowed with an https token_url",
        );
    }
    uri?;
    Some(OAuthClient {
        token_url: token_url?,
        client_id: client_id?,
        client_secret: client_secret?,
        scopes,
        audience,
        resource,
        auth_method,
        timeout,
        ca_file,
    })
}

/// RFC 8707 §2: an absolute URI (`scheme:…`) without a fragment.
fn resource_uri(ctx: &mut Ctx, path: &str, s: String) -> Option<String> {
    let scheme_ok = s.split_once(':').is_some_and(|(scheme, _)| {
        scheme.starts_with(|c: char| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    });
    let why = if !scheme_ok {
        "must be an absolute URI, e.g. https://crm.internal/mcp"
    } else if s.contains('#') {
        "must not contain a fragment (#…)"
    } else if s.chars().any(|c| c.is_whitespace() || c.is_control()) {
        "must not contain spaces or control characters"
    } else {
        return Some(s);
    };
    ctx.err(path, format!("{s:?}: {why}"));
    None
}
