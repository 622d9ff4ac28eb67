//! Value rules shared by several sections: ids, URLs, header names, globs.

use crate::walk::Ctx;

/// `^[a-z0-9][a-z0-9-]{0,31}$`. A private copy of
/// `junction_protocol::names::is_valid_upstream_id`, so config builds and
/// tests without pulling in the protocol crate; the rule is fixed by DESIGN §2.
pub(crate) fn is_valid_upstream_id(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 32
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

/// Characters of MCP tool names (`[A-Za-z0-9_.-]`).
pub(crate) fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')
}

/// True for glob metacharacters: an upstream reference with one is a pattern.
pub(crate) fn is_glob(s: &str) -> bool {
    s.contains(['*', '?', '[', ']', '{', '}'])
}

/// A Redis URL (`redis://host:port` or `rediss://…`), or an error at `path`.
pub(crate) fn redis_url(ctx: &mut Ctx, path: &str, url: &str) -> bool {
    let ok = ["redis://", "rediss://"]
        .iter()
        .any(|s| url.starts_with(s) && url.len() > s.len());
    if !ok {
        ctx.err(
            path,
            format!("{url:?}: expected redis://host:port or rediss://host:port"),
        );
    }
    ok
}

pub(crate) fn glob(ctx: &mut Ctx, path: &str, pattern: &str) -> Option<globset::GlobMatcher> {
    if pattern.is_empty() {
        ctx.err(path, "empty pattern");
        return None;
    }
    match globset::Glob::new(pattern) {
        Ok(g) => Some(g.compile_matcher()),
        Err(e) => {
            ctx.err(path, format!("invalid glob {pattern:?}: {}", e.kind()));
            None
        }
    }
}

/// An absolute http(s) URL with a host, no credentials and no fragment.
/// `allow_query` is false for canonical URLs (public_url, origins).
pub(crate) fn http_url(ctx: &mut Ctx, path: &str, s: &str, allow_query: bool) -> Option<http::Uri> {
    let fail = |ctx: &mut Ctx, why: &str| {
        ctx.err(path, format!("invalid URL {s:?}: {why}"));
        None
    };
    if s.contains('#') {
        return fail(ctx, "a fragment (#…) is not allowed");
    }
    let uri: http::Uri = match s.parse() {
        Ok(u) => u,
        Err(e) => return fail(ctx, &e.to_string()),
    };
    match uri.scheme_str() {
        Some("http") | Some("https") => {}
        Some(other) => return fail(ctx, &format!("scheme must be http or https, not {other}")),
        None => return fail(ctx, "must be absolute, e.g. http://127.0.0.1:8101/mcp"),
    }
    let Some(authority) = uri.authority() else {
        return fail(ctx, "missing host");
    };
    if authority.as_str().contains('@') {
        return fail(
            ctx,
            "credentials in the URL would end up in logs; use `credentials`, bearer_token_env or headers",
        );
    }
    if authority.host().is_empty() {
        return fail(ctx, "missing host");
    }
    if !allow_query && uri.query().is_some() {
        return fail(ctx, "a query (?…) is not allowed here");
    }
    Some(uri)
}

/// Header names Junction manages itself on upstream requests; configuring
/// them would corrupt framing or the MCP header contract.
fn managed_by_junction(name: &str) -> bool {
    matches!(
        name,
        "host"
            | "content-length"
            | "content-type"
            | "content-encoding"
            | "accept"
            | "accept-encoding"
            | "last-event-id"
    ) || name.starts_with("mcp-")
}

fn hop_by_hop(name: &str) -> bool {
    matches!(
        name,
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
    )
}

/// Lower-cased header name if it is syntactically valid.
pub(crate) fn header_name(ctx: &mut Ctx, path: &str, name: &str) -> Option<String> {
    match http::HeaderName::from_bytes(name.as_bytes()) {
        Ok(n) => Some(n.as_str().to_owned()),
        Err(_) => {
            ctx.err(path, format!("{name:?} is not a valid header name"));
            None
        }
    }
}

/// A client header that may be forwarded upstream (DESIGN §4.5: no token passthrough).
pub(crate) fn forwardable_header(ctx: &mut Ctx, path: &str, name: &str) -> Option<String> {
    let lower = header_name(ctx, path, name)?;
    let why = if matches!(lower.as_str(), "authorization" | "proxy-authorization") {
        Some("client credentials are never forwarded as headers; an upstream's `credentials` decide what it is sent (`type: passthrough` sends the caller's token)")
    } else if matches!(lower.as_str(), "cookie" | "set-cookie") {
        Some("cookies are never forwarded upstream")
    } else if lower.starts_with("proxy-") {
        Some("proxy-* headers belong to this hop and are never forwarded")
    } else if hop_by_hop(&lower) {
        Some("hop-by-hop headers are never forwarded")
    } else if managed_by_junction(&lower) {
        Some("Junction sets this header itself on upstream requests")
    } else {
        None
    };
    match why {
        Some(why) => {
            ctx.err(path, format!("cannot forward {name:?}: {why}"));
            None
        }
        None => Some(lower),
    }
}

/// A static header configured for an HTTP upstream. `sets_authorization`
/// names the other setting that sets `Authorization`, if any.
pub(crate) fn upstream_header(
    ctx: &mut Ctx,
    path: &str,
    name: &str,
    value: &str,
    sets_authorization: Option<&str>,
) -> Option<(String, String)> {
    let lower = header_name(ctx, path, name)?;
    if hop_by_hop(&lower) {
        ctx.err(
            path,
            format!("{name:?} is a hop-by-hop header and cannot be configured"),
        );
        return None;
    }
    if managed_by_junction(&lower) {
        ctx.err(
            path,
            format!("Junction sets {name:?} itself on upstream requests"),
        );
        return None;
    }
    if let Some(setting) = sets_authorization.filter(|_| lower == "authorization") {
        ctx.err(
            path,
            format!("conflicts with {setting}, which sets Authorization; keep one"),
        );
        return None;
    }
    if http::HeaderValue::from_str(value).is_err() {
        ctx.err(
            path,
            "header value must be visible ASCII (no control characters or newlines)",
        );
        return None;
    }
    Some((lower, value.to_owned()))
}

/// A POSIX-ish environment variable name: what `bearer_token_env`,
/// `secret_env` and stdio `env` keys may be.
pub(crate) fn env_name(ctx: &mut Ctx, path: &str, name: &str) -> bool {
    let ok = !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !ok {
        ctx.err(
            path,
            format!("{name:?} is not a valid environment variable name ([A-Za-z_][A-Za-z0-9_]*)"),
        );
    }
    ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_ids() {
        for ok in [
            "a",
            "alpha",
            "0",
            "crm-2",
            "a234567890123456789012345678901b",
        ] {
            assert!(is_valid_upstream_id(ok), "{ok}");
        }
        for bad in [
            "",
            "-a",
            "Alpha",
            "a_b",
            "a.b",
            "a234567890123456789012345678901bc",
            "é",
        ] {
            assert!(!is_valid_upstream_id(bad), "{bad}");
        }
    }

    #[test]
    fn urls() {
        let mut ctx = Ctx::new(&[]);
        assert!(http_url(&mut ctx, "p", "http://127.0.0.1:8101/mcp", true).is_some());
        assert!(http_url(&mut ctx, "p", "https://[::1]/mcp?x=1", true).is_some());
        assert!(ctx.errors.is_empty());
        for bad in [
            "ftp://x/",
            "/mcp",
            "http://x/#frag",
            "http://u:p@x/",
            "not a url",
            "http:///x",
        ] {
            let mut ctx = Ctx::new(&[]);
            assert!(http_url(&mut ctx, "p", bad, true).is_none(), "{bad}");
            assert_eq!(ctx.errors.len(), 1, "{bad}");
        }
        let mut ctx = Ctx::new(&[]);
        assert!(http_url(&mut ctx, "p", "http://x/?q", false).is_none());
    }

    #[test]
    fn forwardable_headers() {
        let mut ctx = Ctx::new(&[]);
        assert_eq!(
            forwardable_header(&mut ctx, "p", "TraceParent").as_deref(),
            Some("traceparent")
        );
        for bad in [
            "Authorization",
            "cookie",
            "Proxy-Foo",
            "Connection",
            "TE",
            "mcp-name",
            "bad header",
        ] {
            assert!(forwardable_header(&mut ctx, "p", bad).is_none(), "{bad}");
        }
    }
}
