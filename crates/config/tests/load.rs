//! Configs that must load, and what they load to.

use std::path::{Path, PathBuf};
use std::time::Duration;

use junction_config::*;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

const KEY: &str = "0123456789abcdef0123456789abcdef";

#[test]
fn design_example_parses() {
    let c = load(&fixture("design.yaml"), &[]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.server.listen.to_string(), "127.0.0.1:8080");
    assert_eq!(c.server.public_url, "http://127.0.0.1:8080");
    assert_eq!(c.upstreams.len(), 2);
    match &c.upstream("alpha").unwrap().transport {
        Transport::Http { url, headers, .. } => {
            assert_eq!(url, "http://127.0.0.1:8101/mcp");
            assert!(headers.is_empty());
        }
        other => panic!("alpha is HTTP, got {other:?}"),
    }
    match &c.upstream("files").unwrap().transport {
        Transport::Stdio { command, .. } => assert_eq!(command, &["my-mcp-server", "--stdio"]),
        other => panic!("files is stdio, got {other:?}"),
    }
    assert_eq!(c.routes.len(), 1);
    assert_eq!(c.routes[0].upstreams, ["alpha", "files"]);
    // `auth:` and `rate_limits:` holding only comments are "not set".
    assert!(c.auth.is_none());
    assert!(c.rate_limits.is_none());
    assert_eq!(c.limits.max_body_bytes, 4 * 1024 * 1024);
    assert_eq!(c.request_state.ttl, Duration::from_secs(600));
    assert!(c.request_state.secret.is_none());
}

#[test]
fn defaults() {
    let c = load(&fixture("minimal.yaml"), &[]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.server.listen.to_string(), "127.0.0.1:8080");
    assert_eq!(c.server.public_url, "http://127.0.0.1:8080");
    assert!(c.server.tls.is_none());
    assert_eq!(c.server.shutdown_grace, Duration::from_secs(10));
    assert!(c.server.trusted_proxies.is_empty());
    let u = &c.upstreams[0];
    assert_eq!(u.timeout, Duration::from_secs(30));
    assert_eq!(u.protocol, ProtocolPref::Auto);
    assert_eq!(u.list_ttl, Duration::from_secs(60));
    assert_eq!(c.routes.len(), 1);
    let r = &c.routes[0];
    assert_eq!((r.path.as_str(), r.prefix), ("/mcp", true));
    assert_eq!(r.upstreams, ["weather"]);
    assert!(r.include.is_empty() && r.exclude.is_empty());
    assert_eq!(c.tools.separator, "__");
    assert_eq!(c.tools.max_name_length, None);
    assert_eq!(c.catalog.list_deadline, Duration::from_secs(5));
    assert_eq!((c.catalog.max_pages, c.catalog.page_size), (32, 200));
    assert_eq!(c.headers.forward, ["traceparent", "tracestate", "baggage"]);
    assert!(c.headers.allowed_origins.is_empty());
    assert_eq!(c.limits.max_body_bytes, 4 << 20);
    assert_eq!(c.limits.max_header_count, 100);
    assert_eq!(c.limits.max_header_bytes, 16 << 10);
    assert_eq!(c.sessions.ttl, Duration::from_secs(86_400));
    assert_eq!(c.log.format, LogFormat::Text);
    assert_eq!(c.log.level, "info");
    assert!(c.log.access);
}

#[test]
fn every_key_of_the_full_example() {
    let c = load(&fixture("full.yaml"), &env(&[("JUNCTION_STATE_KEY", KEY)]))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.server.public_url, "https://mcp.example.com");
    assert_eq!(
        c.server.tls.as_ref().unwrap().key_file,
        Path::new("/etc/junction/tls.key")
    );
    // Blocks as given, one address as that host alone, host bits cleared.
    let proxies: Vec<String> = c
        .server
        .trusted_proxies
        .iter()
        .map(|n| n.to_string())
        .collect();
    assert_eq!(
        proxies,
        ["10.0.0.0/8", "fd00::/8", "192.0.2.7/32", "10.1.0.0/16"]
    );
    match &c.upstream("crm").unwrap().transport {
        Transport::Http {
            headers,
            bearer_token_env,
            ca_file,
            ..
        } => {
            assert_eq!(headers, &[("x-team".to_owned(), "platform".to_owned())]);
            assert_eq!(bearer_token_env.as_deref(), Some("CRM_TOKEN"));
            assert!(ca_file.is_some());
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        c.upstream("legacy-docs").unwrap().list_ttl,
        Duration::from_secs(300)
    );
    match &c.upstream("files").unwrap().transport {
        Transport::Stdio { env, cwd, .. } => {
            assert_eq!(
                env,
                &[
                    ("PORT".to_owned(), "3000".to_owned()),
                    ("ROOT".to_owned(), "/srv/files".to_owned())
                ]
            );
            assert_eq!(cwd.as_deref(), Some(Path::new("/srv")));
        }
        other => panic!("{other:?}"),
    }
    // Route upstreams come out in upstream config order, not reference order.
    assert_eq!(
        c.route("/docs-and-files").unwrap().upstreams,
        ["legacy-docs", "files"]
    );
    assert_eq!(
        c.route("/mcp").unwrap().upstreams,
        ["crm", "legacy-docs", "files"]
    );
    let crm = c.route("/crm").unwrap();
    assert!(!crm.prefix);
    assert_eq!(crm.include, ["get_*", "list_*"]);
    assert_eq!(c.tools.separator, ".");
    let auth = c.auth.as_ref().unwrap();
    assert_eq!(
        auth.jwt.jwks,
        JwksSource::Url("https://auth.example.com/.well-known/jwks.json".into())
    );
    assert_eq!(auth.authorization_servers, ["https://auth.example.com/"]);
    assert_eq!(auth.rules.len(), 2);
    let rl = c.rate_limits.as_ref().unwrap();
    assert_eq!(
        rl.backend,
        RateLimitBackend::Redis {
            url: "redis://127.0.0.1:6379".into()
        }
    );
    assert_eq!(rl.failure_mode, FailureMode::Closed);
    assert_eq!(rl.rules[0].key, [RateKey::Principal, RateKey::Tool]);
    assert_eq!((rl.rules[0].rate, rl.rules[0].burst), (10, 20));
    assert_eq!(rl.rules[0].methods, ["tools/call"]);
    assert_eq!(rl.rules[1].burst, 100, "burst defaults to rate");
    assert_eq!(rl.rules[1].per, Duration::from_secs(60));
    assert_eq!(
        c.headers.forward.last().map(String::as_str),
        Some("x-request-id")
    );
    assert_eq!(
        c.headers.allowed_origins,
        ["https://app.example.com", "http://localhost:3000"]
    );
    assert_eq!(c.limits.max_header_bytes, 8192);
    assert_eq!(c.request_state.secret.as_deref(), Some(KEY.as_bytes()));
    assert!(
        !format!("{:?}", c.request_state).contains(KEY),
        "Debug must not print the key"
    );
    assert_eq!(c.log.format, LogFormat::Json);
    assert!(!c.log.access);
}

#[test]
fn environment_overrides_the_file() {
    let c = load(
        &fixture("design.yaml"),
        &env(&[
            ("JUNCTION_SERVER__LISTEN", "127.0.0.1:9000"),
            ("JUNCTION_TOOLS__SEPARATOR", "_"),
            ("JUNCTION_LIMITS__MAX_BODY_BYTES", "1MiB"),
            ("JUNCTION_LIMITS__MAX_HEADER_COUNT", "50"),
            ("JUNCTION_LOG__FORMAT", "json"),
            ("JUNCTION_HEADERS__FORWARD", "[traceparent]"),
        ]),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.server.listen.to_string(), "127.0.0.1:9000");
    // public_url was set in the file, so it stays.
    assert_eq!(c.server.public_url, "http://127.0.0.1:8080");
    assert_eq!(c.tools.separator, "_");
    assert_eq!(c.limits.max_body_bytes, 1 << 20);
    assert_eq!(c.limits.max_header_count, 50);
    assert_eq!(c.log.format, LogFormat::Json);
    assert_eq!(c.headers.forward, ["traceparent"]);
}

#[test]
fn default_public_url_follows_listen_and_tls() {
    let c = load_str(
        "upstreams: [{id: a, url: 'http://127.0.0.1:1/mcp'}]",
        &env(&[("JUNCTION_SERVER__LISTEN", "127.0.0.1:9000")]),
    )
    .unwrap();
    assert_eq!(c.server.public_url, "http://127.0.0.1:9000");
    let c = load_str(
        "server: {tls: {cert_file: c.pem, key_file: k.pem}}\nupstreams: [{id: a, url: 'http://127.0.0.1:1/mcp'}]",
        &[],
    )
    .unwrap();
    assert_eq!(c.server.public_url, "https://127.0.0.1:8080");
}

#[test]
fn unrelated_junction_variables_are_not_config() {
    let c = load(
        &fixture("minimal.yaml"),
        &env(&[
            ("JUNCTION_STATE_KEY", KEY),
            ("JUNCTION_CONFIG", "other.yaml"),
            ("PATH", "/bin"),
        ]),
    );
    assert!(c.is_ok(), "{}", c.unwrap_err());
}

#[test]
fn route_globs_and_prefix_never_with_one_match() {
    let c = load_str(
        "upstreams:\n  - {id: crm-eu, url: 'http://127.0.0.1:1/'}\n  - {id: crm-us, url: 'http://127.0.0.1:2/'}\n  - {id: docs, url: 'http://127.0.0.1:3/'}\nroutes:\n  - {path: /crm, upstreams: ['crm-*']}\n  - {path: /docs, upstreams: [docs], prefix: never}\n",
        &[],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.routes[0].upstreams, ["crm-eu", "crm-us"]);
    assert_eq!(c.routes[1].upstreams, ["docs"]);
    assert!(!c.routes[1].prefix);
}

#[test]
fn missing_file_is_one_clear_error() {
    let e = load(Path::new("/nonexistent/gateway.yaml"), &[]).unwrap_err();
    assert_eq!(e.len(), 1);
    assert!(e.to_string().contains("/nonexistent/gateway.yaml"), "{e}");
}

#[test]
fn yaml_syntax_error_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gateway.yaml");
    std::fs::write(&path, "upstreams: [unclosed\n").unwrap();
    let e = load(&path, &[]).unwrap_err();
    assert_eq!(e.len(), 1, "{e}");
    assert_eq!(e.errors[0].path, "");
    assert!(
        e.to_string().starts_with(&path.display().to_string()),
        "{e}"
    );
}
