//! `upstreams`: one entry per MCP server, HTTP (`url`) or stdio (`command`);
//! an HTTP upstream's `credentials` are walked in `credentials.rs`.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use crate::checks;
use crate::credentials::{self, Credentials};
use crate::types::{PinsConfig, ProtocolPref, Transport, UpstreamConfig};
use crate::walk::{Ctx, Obj};

const KEYS: &[&str] = &[
    "id",
    "url",
    "command",
    "env",
    "cwd",
    "headers",
    "bearer_token_env",
    "bearer_token_file",
    "timeout",
    "protocol",
    "list_ttl",
    "ca_file",
    "max_response_bytes",
    "credentials",
    "overrides",
    "pins",
];
const HTTP_ONLY: &[&str] = &[
    "headers",
    "bearer_token_env",
    "bearer_token_file",
    "ca_file",
    "credentials",
];
const STDIO_ONLY: &[&str] = &["env", "cwd"];
/// Largest response body, SSE event or stdio line taken from an upstream.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;
const MIN_RESPONSE_BYTES: usize = 64 * 1024;

/// The valid upstreams, and every well-formed unique id declared (in order),
/// so that routes naming an upstream whose other keys are broken do not
/// get a second, misleading "unknown upstream" error.
pub(crate) fn upstreams(ctx: &mut Ctx, root: &Obj) -> (Vec<UpstreamConfig>, Vec<String>) {
    if !root.has("upstreams") {
        ctx.err(
            "upstreams",
            "required: list at least one upstream (an `id` with a `url` or a `command`)",
        );
        return (Vec::new(), Vec::new());
    }
    let Some(items) = root.list(ctx, "upstreams") else {
        return (Vec::new(), Vec::new());
    };
    if items.is_empty() {
        ctx.err("upstreams", "list at least one upstream");
    }
    let mut out: Vec<UpstreamConfig> = Vec::new();
    let mut seen: Vec<(String, String)> = Vec::new(); // (id, path of first use)
    for (path, item) in items {
        let o = Obj::new(ctx, Some(item), &path, KEYS);
        let id = o.required(ctx, "id").and_then(|id| {
            let id_path = o.key_path("id");
            if !checks::is_valid_upstream_id(&id) {
                ctx.err(&id_path, format!("{id:?}: ids are 1 to 32 characters of [a-z0-9-], starting with a letter or digit"));
                return None;
            }
            if let Some((_, first)) = seen.iter().find(|(s, _)| *s == id) {
                ctx.err(&id_path, format!("duplicate id {id:?} (first used at {first})"));
                return None;
            }
            seen.push((id.clone(), id_path));
            Some(id)
        });
        let transport = transport(ctx, &o, root.has("auth"));
        let timeout = o.positive_duration(ctx, "timeout", Duration::from_secs(30));
        let protocol = match o.choice(ctx, "protocol", &["auto", "modern", "legacy"]) {
            Some(1) => ProtocolPref::Modern,
            Some(2) => ProtocolPref::Legacy,
            _ => ProtocolPref::Auto,
        };
        let list_ttl = o.duration(ctx, "list_ttl", Duration::from_secs(60));
        let max_response_bytes = o.size(ctx, "max_response_bytes", DEFAULT_MAX_RESPONSE_BYTES);
        if max_response_bytes < MIN_RESPONSE_BYTES {
            ctx.err(
                &o.key_path("max_response_bytes"),
                format!("must be at least {MIN_RESPONSE_BYTES} bytes (64KiB): smaller would refuse ordinary tool lists"),
            );
        }
        let overrides = crate::overrides::overrides(ctx, &o);
        let pins_path = o.key_path("pins");
        let pins = o.get("pins").map(|v| {
            let p = Obj::new(ctx, Some(v), &pins_path, &["file", "unpinned"]);
            if !p.has("file") {
                ctx.err(
                    &p.key_path("file"),
                    "required: the pin file (`junction catalog --write-pins` writes it)",
                );
            }
            PinsConfig {
                file: p
                    .nonempty(ctx, "file")
                    .map(PathBuf::from)
                    .unwrap_or_default(),
                allow_unpinned: matches!(
                    p.choice(ctx, "unpinned", &["quarantine", "allow"]),
                    Some(1)
                ),
            }
        });
        if let (Some(id), Some(transport)) = (id, transport) {
            out.push(UpstreamConfig {
                id,
                transport,
                timeout,
                protocol,
                list_ttl,
                max_response_bytes,
                overrides,
                pins,
            });
        }
    }
    (out, seen.into_iter().map(|(id, _)| id).collect())
}

/// `has_auth`: the top-level `auth` section is set (some credentials need it).
fn transport(ctx: &mut Ctx, o: &Obj, has_auth: bool) -> Option<Transport> {
    match (o.has("url"), o.has("command")) {
        (true, false) => {
            misplaced(ctx, o, STDIO_ONLY, "stdio upstreams (`command`)");
            http(ctx, o, has_auth)
        }
        (false, true) => {
            misplaced(ctx, o, HTTP_ONLY, "HTTP upstreams (`url`)");
            stdio(ctx, o)
        }
        (true, true) => {
            ctx.err(
                o.path(),
                "set exactly one of `url` (HTTP upstream) or `command` (stdio upstream), not both",
            );
            None
        }
        (false, false) => {
            ctx.err(
                o.path(),
                "set exactly one of `url` (HTTP upstream) or `command` (stdio upstream)",
            );
            None
        }
    }
}

fn misplaced(ctx: &mut Ctx, o: &Obj, keys: &[&str], only_for: &str) {
    for key in keys {
        if o.has(key) {
            ctx.err(&o.key_path(key), format!("only allowed for {only_for}"));
        }
    }
}

fn http(ctx: &mut Ctx, o: &Obj, has_auth: bool) -> Option<Transport> {
    let url_path = o.key_path("url");
    let url = o.nonempty(ctx, "url");
    let uri = url
        .as_deref()
        .and_then(|u| checks::http_url(ctx, &url_path, u, true));

    let bearer_token_env = o.nonempty(ctx, "bearer_token_env");
    if let Some(name) = &bearer_token_env {
        checks::env_name(ctx, &o.key_path("bearer_token_env"), name);
    }
    let bearer_token_file = o.nonempty(ctx, "bearer_token_file").map(PathBuf::from);
    if bearer_token_env.is_some() && bearer_token_file.is_some() {
        ctx.err(
            o.path(),
            "set at most one of `bearer_token_env` and `bearer_token_file`",
        );
    }
    let has_bearer = bearer_token_env.is_some() || bearer_token_file.is_some();
    let credentials_path = o.key_path("credentials");
    let credentials = o
        .get("credentials")
        .and_then(|v| credentials::credentials(ctx, v, &credentials_path, has_auth));
    // With passthrough, the static bearer is Junction's own token (lists,
    // discovery, sessions): the caller's token rides only on its requests.
    let passthrough = matches!(credentials, Some(Credentials::Passthrough { .. }));
    if o.has("credentials") && has_bearer && !passthrough {
        ctx.err(
            &credentials_path,
            "set either `credentials` or `bearer_token_env`/`bearer_token_file`, not both (only `passthrough` takes a bearer token, for Junction's own requests)",
        );
    }
    let sets_authorization = if o.has("credentials") {
        Some("credentials")
    } else if has_bearer {
        Some("bearer_token_env/bearer_token_file")
    } else {
        None
    };

    let headers = o
        .string_map(ctx, "headers")
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(name, path, value)| {
            checks::upstream_header(ctx, &path, &name, &value, sets_authorization)
        })
        .collect();

    let ca_file = o.nonempty(ctx, "ca_file").map(PathBuf::from);
    if ca_file.is_some()
        && uri
            .as_ref()
            .is_some_and(|u| u.scheme_str() != Some("https"))
    {
        ctx.err(&o.key_path("ca_file"), "only allowed for https upstreams");
    }
    uri?;
    Some(Transport::Http {
        url: url?,
        headers,
        bearer_token_env,
        bearer_token_file,
        ca_file,
        credentials,
    })
}

fn stdio(ctx: &mut Ctx, o: &Obj) -> Option<Transport> {
    let cmd_path = o.key_path("command");
    let command = match o.get("command") {
        // A single string is a common slip; splitting it on spaces would
        // guess at quoting, so ask for the list form.
        Some(Value::String(s)) => {
            ctx.err(
                &cmd_path,
                format!("expected a list of program and arguments, e.g. [{s:?}]"),
            );
            None
        }
        _ => o.strings(ctx, "command"),
    };
    let command = command.and_then(|items| {
        if items.is_empty() {
            ctx.err(&cmd_path, "must name a program: [program, arg, …]");
            return None;
        }
        if items[0].1.is_empty() {
            ctx.err(&items[0].0, "the program must not be empty");
            return None;
        }
        Some(items.into_iter().map(|(_, s)| s).collect::<Vec<_>>())
    });
    let env = o
        .string_map(ctx, "env")
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(name, path, value)| {
            if !checks::env_name(ctx, &path, &name) {
                return None;
            }
            if value.contains('\0') {
                ctx.err(&path, "must not contain NUL");
                return None;
            }
            Some((name, value))
        })
        .collect();
    let cwd = o.nonempty(ctx, "cwd").map(PathBuf::from);
    Some(Transport::Stdio {
        command: command?,
        env,
        cwd,
    })
}
