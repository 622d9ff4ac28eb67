use http::{HeaderMap, HeaderName, HeaderValue};

/// Why a request was refused at the edge, before its body was read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EdgeError {
    #[error("too many request headers ({count} > {max})")]
    TooManyHeaders { count: usize, max: usize },
    #[error("request headers too large ({bytes} bytes > {max})")]
    HeadersTooLarge { bytes: usize, max: usize },
    #[error("origin {0:?} is not allowed")]
    OriginNotAllowed(String),
}

/// Headers a client may never pass to an upstream: credentials and hop-by-hop
/// headers (RFC 9110 §7.6.1). Names are compared lower-case.
pub fn is_never_forwarded(name: &str) -> bool {
    const NEVER: [&str; 12] = [
        "authorization",
        "cookie",
        "set-cookie",
        "connection",
        "keep-alive",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        "mcp-session-id",
    ];
    let starts = |prefix: &str| {
        name.get(..prefix.len())
            .is_some_and(|p| p.eq_ignore_ascii_case(prefix))
    };
    NEVER.iter().any(|n| n.eq_ignore_ascii_case(name)) || starts("proxy-") || starts("mcp-")
}

/// `headers.forward`, parsed once when the config is loaded: the names that
/// [`is_never_forwarded`] refuses (and any that is not a header name, which
/// config validation already rejects) are left out, so a request pays one
/// hashed lookup per name instead of a name parse and the refusal checks.
#[derive(Debug, Default)]
pub struct ForwardList(Vec<HeaderName>);

impl ForwardList {
    pub fn new(allow: &[String]) -> ForwardList {
        ForwardList(
            allow
                .iter()
                .filter(|name| !is_never_forwarded(name))
                .filter_map(|name| HeaderName::from_bytes(name.as_bytes()).ok())
                .collect(),
        )
    }
}

/// The client headers that may travel upstream: those on the allow-list,
/// minus anything [`is_never_forwarded`] refuses.
pub fn forwardable_headers(headers: &HeaderMap, allow: &ForwardList) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for name in &allow.0 {
        for value in headers.get_all(name) {
            if let Ok(v) = value.to_str() {
                out.push((name.as_str().to_owned(), v.to_owned()));
            }
        }
    }
    out
}

/// Header count and total size limits (HTTP 431 when broken).
pub fn check_header_limits(
    headers: &HeaderMap,
    max_count: usize,
    max_bytes: usize,
) -> Result<(), EdgeError> {
    let count = headers.len();
    if count > max_count {
        return Err(EdgeError::TooManyHeaders {
            count,
            max: max_count,
        });
    }
    let bytes: usize = headers
        .iter()
        .map(|(k, v)| k.as_str().len() + v.len() + 4)
        .sum();
    if bytes > max_bytes {
        return Err(EdgeError::HeadersTooLarge {
            bytes,
            max: max_bytes,
        });
    }
    Ok(())
}

/// `Origin` check (DNS-rebinding defence, NOTES §4.1): a request without `Origin`
/// (not from a browser) passes; one with an `Origin` passes only when it equals the
/// gateway's own public origin or is on the allow-list (`*` allows any).
pub fn check_origin(
    origin: Option<&HeaderValue>,
    public_origin: &str,
    allowed: &[String],
) -> Result<(), EdgeError> {
    let Some(origin) = origin else {
        return Ok(());
    };
    let origin = origin.to_str().unwrap_or("");
    let public = origin_of(public_origin);
    let same = origin.eq_ignore_ascii_case(public);
    // A gateway whose own URL is on loopback is a local one: browsers on this
    // machine reach it as localhost or 127.0.0.1 on any port. A DNS-rebinding
    // page still carries its own (non-loopback) origin and is refused.
    let local = is_loopback_origin(public) && is_loopback_origin(origin);
    if same
        || local
        || allowed
            .iter()
            .any(|a| a == "*" || a.trim_end_matches('/').eq_ignore_ascii_case(origin))
    {
        Ok(())
    } else {
        Err(EdgeError::OriginNotAllowed(origin.to_owned()))
    }
}

/// `scheme://authority` of a URL (drops any path).
fn origin_of(url: &str) -> &str {
    let url = url.trim_end_matches('/');
    match url.find("://") {
        Some(i) => match url[i + 3..].find('/') {
            Some(j) => &url[..i + 3 + j],
            None => url,
        },
        None => url,
    }
}

fn is_loopback_origin(origin: &str) -> bool {
    let Some(rest) = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
    else {
        return false;
    };
    let host = if let Some(v6) = rest.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        rest.split(':').next().unwrap_or("")
    };
    host.eq_ignore_ascii_case("localhost")
        || host == "::1"
        || host
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn map(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut m = HeaderMap::new();
        for (k, v) in pairs {
            m.append(*k, HeaderValue::from_static(v));
        }
        m
    }

    #[test]
    fn never_forwarded_names_in_any_case() {
        for name in [
            "Authorization",
            "COOKIE",
            "Mcp-Session-Id",
            "mcp-anything",
            "Proxy-Authorization",
            "Transfer-Encoding",
            "te",
        ] {
            assert!(is_never_forwarded(name), "{name}");
        }
        for name in ["traceparent", "X-Request-Id", "tea", "proxy", "mcp", "m"] {
            assert!(!is_never_forwarded(name), "{name}");
        }
    }

    #[test]
    fn forwarded_in_allow_list_order_with_each_names_values_in_request_order() {
        let mut h = map(&[("tracestate", "s1"), ("x-other", "1"), ("baggage", "b")]);
        h.append("traceparent", HeaderValue::from_static("00-abc-def-01"));
        h.append("tracestate", HeaderValue::from_static("s2"));
        h.append(
            "baggage",
            HeaderValue::from_bytes(b"caf\xc3\xa9").unwrap_or(HeaderValue::from_static("")),
        );
        let allow: Vec<String> = ["traceparent", "tracestate", "baggage"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let pairs = |v: &[(&str, &str)]| -> Vec<(String, String)> {
            v.iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(
            forwardable_headers(&h, &ForwardList::new(&allow)),
            pairs(&[
                ("traceparent", "00-abc-def-01"),
                ("tracestate", "s1"),
                ("tracestate", "s2"),
                ("baggage", "b"),
            ]),
            "a value that is not visible ASCII is left out"
        );
        assert!(
            forwardable_headers(&map(&[("x-other", "1")]), &ForwardList::new(&allow)).is_empty()
        );
    }

    #[test]
    fn credentials_never_forwarded_even_if_allow_listed() {
        let h = map(&[
            ("authorization", "Bearer client-token"),
            ("cookie", "sid=1"),
            ("proxy-authorization", "x"),
            ("traceparent", "00-abc-def-01"),
            ("x-other", "1"),
        ]);
        let allow: Vec<String> = [
            "authorization",
            "cookie",
            "proxy-authorization",
            "traceparent",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let out = forwardable_headers(&h, &ForwardList::new(&allow));
        assert_eq!(
            out,
            vec![("traceparent".to_string(), "00-abc-def-01".to_string())]
        );
    }

    #[test]
    fn header_limits() {
        let h = map(&[("a", "1"), ("b", "2"), ("c", "3")]);
        assert!(check_header_limits(&h, 3, 1000).is_ok());
        assert_eq!(
            check_header_limits(&h, 2, 1000),
            Err(EdgeError::TooManyHeaders { count: 3, max: 2 })
        );
        assert!(matches!(
            check_header_limits(&h, 10, 5),
            Err(EdgeError::HeadersTooLarge { .. })
        ));
    }

    #[test]
    fn origin_rules() {
        assert!(check_origin(None, "http://127.0.0.1:8080", &[]).is_ok());
        let same = map(&[("origin", "http://127.0.0.1:8080")]);
        assert!(check_origin(same.get("origin"), "http://127.0.0.1:8080/", &[]).is_ok());
        let local = map(&[("origin", "http://localhost:3000")]);
        assert!(
            check_origin(local.get("origin"), "http://127.0.0.1:8080", &[]).is_ok(),
            "local gateway, local page"
        );
        assert!(
            check_origin(local.get("origin"), "https://mcp.example.com", &[]).is_err(),
            "public gateway"
        );
        let pathy = map(&[("origin", "https://mcp.example.com")]);
        assert!(check_origin(pathy.get("origin"), "https://mcp.example.com/gw", &[]).is_ok());
        let evil = map(&[("origin", "http://evil.example")]);
        assert!(check_origin(evil.get("origin"), "http://127.0.0.1:8080", &[]).is_err());
        assert!(check_origin(
            evil.get("origin"),
            "http://127.0.0.1:8080",
            &["http://evil.example".into()]
        )
        .is_ok());
    }
}
