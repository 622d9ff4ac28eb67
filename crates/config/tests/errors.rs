//! Configs that must be refused, and how the refusal reads.

use std::path::Path;

use junction_config::*;

const UP: &str = "upstreams: [{id: a, url: 'http://127.0.0.1:1/mcp'}]\n";

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn errors(yaml: &str) -> ConfigErrors {
    errors_env(yaml, &[])
}

fn errors_env(yaml: &str, pairs: &[(&str, &str)]) -> ConfigErrors {
    match load_str(yaml, &env(pairs)) {
        Ok(c) => panic!("expected errors, loaded {c:?}"),
        Err(e) => e,
    }
}

/// The single error's path and message.
fn one(yaml: &str) -> (String, String) {
    let e = errors(yaml);
    assert_eq!(e.len(), 1, "expected one error, got:\n{e}");
    (e.errors[0].path.clone(), e.errors[0].message.clone())
}

#[test]
fn four_errors_are_all_reported_with_their_paths() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/four-errors.yaml");
    let e = load(&path, &[]).unwrap_err();
    assert_eq!(
        e.paths(),
        [
            "server.listen",
            "upstreams[1].url",
            "routes[0].include[2]",
            "limits.max_body_bytes"
        ],
        "{e}"
    );
    // Display: one `path: message` line per error.
    let text = e.to_string();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{text}");
    assert!(lines[1].starts_with("upstreams[1].url: "), "{text}");
    assert!(lines[2].contains("[unclosed"), "{text}");
}

#[test]
fn unknown_keys_top_level_and_nested() {
    let e = errors(&format!(
        "{UP}servr: {{}}\nserver: {{lisen: 127.0.0.1:1}}\nroutes: [{{path: /mcp, prefx: never}}]\nrate_limits: {{rules: [{{name: r, rate: 1, per: 1s, brust: 2}}]}}"
    ));
    assert_eq!(
        e.paths(),
        [
            "servr",
            "server.lisen",
            "routes[0].prefx",
            "rate_limits.rules[0].brust"
        ],
        "{e}"
    );
    assert!(e.errors[1].message.contains("did you mean `listen`"), "{e}");
    let e = errors("upstreams: [{id: a, url: 'http://127.0.0.1:1/mcp', tiemout: 5s}]");
    assert_eq!(e.paths(), ["upstreams[0].tiemout"]);
}

#[test]
fn unknown_key_from_the_environment_names_the_variable() {
    let e = errors_env(UP, &[("JUNCTION_SERVER__LISTN", "127.0.0.1:1")]);
    assert_eq!(e.paths(), ["server.listn"]);
    assert!(
        e.errors[0].message.contains("JUNCTION_SERVER__LISTN"),
        "{e}"
    );
    let e = errors_env(UP, &[("JUNCTION_SERVER__LISTEN", "nope")]);
    assert_eq!(e.paths(), ["server.listen"]);
    assert!(
        e.errors[0].message.contains("JUNCTION_SERVER__LISTEN"),
        "{e}"
    );
}

#[test]
fn durations_and_sizes() {
    let (p, m) = one(&format!("{UP}sessions: {{ttl: forever}}"));
    assert_eq!(p, "sessions.ttl");
    assert!(m.contains("forever"), "{m}");
    let (p, m) = one(&format!("{UP}catalog: {{list_deadline: 5}}"));
    assert_eq!(p, "catalog.list_deadline");
    assert!(m.contains("\"5s\""), "{m}");
    let (p, _) = one(&format!("{UP}limits: {{max_header_bytes: 12 parsecs}}"));
    assert_eq!(p, "limits.max_header_bytes");
    // A timeout, deadline or lifetime of zero would fail or expire
    // everything at once; durations where 0 means "none" stay allowed.
    let zeros = errors(
        "upstreams: [{id: a, url: 'http://127.0.0.1:1/mcp', timeout: 0s, list_ttl: 0s}]\n\
         catalog: {list_deadline: 0ms}\n\
         limits: {header_read_timeout: 0s, body_read_timeout: 0s, idle_timeout: 0s}\n\
         request_state: {ttl: 0s}\nsessions: {ttl: 0s}\nserver: {shutdown_grace: 0s}\n",
    );
    assert_eq!(
        zeros.paths(),
        [
            "upstreams[0].timeout",
            "catalog.list_deadline",
            "limits.header_read_timeout",
            "limits.body_read_timeout",
            "limits.idle_timeout",
            "request_state.ttl",
            "sessions.ttl",
        ],
        "{zeros}"
    );
    assert!(
        zeros.errors[0].message.contains("greater than zero"),
        "{zeros}"
    );
    let c = load_str(&format!("{UP}limits: {{max_body_bytes: 1000, max_header_bytes: 512KiB}}\nsessions: {{ttl: 250ms}}"), &[]).unwrap();
    assert_eq!(c.limits.max_body_bytes, 1000);
    assert_eq!(c.limits.max_header_bytes, 512 * 1024);
    assert_eq!(c.sessions.ttl.as_millis(), 250);
}

#[test]
fn upstream_ids_must_be_valid_and_unique() {
    let e = errors(
        "upstreams:\n  - {id: a, url: 'http://127.0.0.1:1/'}\n  - {id: a, command: [x]}\n  - {id: Bad_Id, command: [x]}\n  - {url: 'http://127.0.0.1:2/'}\n",
    );
    assert_eq!(
        e.paths(),
        ["upstreams[1].id", "upstreams[2].id", "upstreams[3].id"],
        "{e}"
    );
    assert!(
        e.errors[0].message.contains("duplicate")
            && e.errors[0].message.contains("upstreams[0].id"),
        "{e}"
    );
    assert!(e.errors[2].message.contains("required"), "{e}");
}

#[test]
fn at_least_one_upstream() {
    assert_eq!(one("server: {listen: 127.0.0.1:1}").0, "upstreams");
    assert_eq!(one("upstreams: []").0, "upstreams");
    assert_eq!(one("").0, "upstreams");
}

#[test]
fn url_and_command_both_or_neither() {
    let (p, m) = one("upstreams: [{id: a, url: 'http://127.0.0.1:1/', command: [x]}]");
    assert_eq!(p, "upstreams[0]");
    assert!(m.contains("not both"), "{m}");
    let (p, m) = one("upstreams: [{id: a, timeout: 5s}]");
    assert_eq!(p, "upstreams[0]");
    assert!(m.contains("exactly one"), "{m}");
}

#[test]
fn transport_specific_keys() {
    let e = errors(
        "upstreams:\n  - {id: a, command: [x], headers: {X-A: b}, bearer_token_env: T}\n  - {id: b, url: 'http://127.0.0.1:1/', cwd: /tmp, ca_file: ca.pem}\n  - {id: c, command: []}\n  - {id: d, command: 'server --stdio'}\n",
    );
    assert_eq!(
        e.paths(),
        [
            "upstreams[0].headers",
            "upstreams[0].bearer_token_env",
            "upstreams[1].cwd",
            "upstreams[1].ca_file",
            "upstreams[2].command",
            "upstreams[3].command",
        ],
        "{e}"
    );
}

#[test]
fn upstream_credentials_and_headers() {
    let e = errors(
        "upstreams:\n  - id: a\n    url: 'https://127.0.0.1:1/'\n    bearer_token_env: T\n    bearer_token_file: /t\n    headers: {Authorization: x, Connection: close, Mcp-Name: y, 'bad name': z}\n",
    );
    assert_eq!(
        e.paths(),
        [
            "upstreams[0]",
            "upstreams[0].headers.Authorization",
            "upstreams[0].headers.Connection",
            "upstreams[0].headers.Mcp-Name",
            "upstreams[0].headers.bad name",
        ],
        "{e}"
    );
    // Without a bearer setting, a static Authorization header is the operator's choice.
    assert!(load_str(
        "upstreams: [{id: a, url: 'http://127.0.0.1:1/', headers: {Authorization: Basic eA==}}]",
        &[]
    )
    .is_ok());
}

#[test]
fn routes_referencing_missing_upstreams() {
    let (p, m) = one(&format!(
        "{UP}routes: [{{path: /x, upstreams: [a, ghost]}}]"
    ));
    assert_eq!(p, "routes[0].upstreams[1]");
    assert!(m.contains("ghost"), "{m}");
    let (p, _) = one(&format!("{UP}routes: [{{path: /x, upstreams: ['zz-*']}}]"));
    assert_eq!(p, "routes[0].upstreams");
}

#[test]
fn prefix_never_needs_exactly_one_upstream() {
    let (p, m) = one(
        "upstreams: [{id: a, url: 'http://127.0.0.1:1/'}, {id: b, command: [x]}]\nroutes: [{path: /mcp, prefix: never}]",
    );
    assert_eq!(p, "routes[0].prefix");
    assert!(m.contains("a, b"), "{m}");
    assert_eq!(
        one(&format!("{UP}routes: [{{path: /mcp, prefix: sometimes}}]")).0,
        "routes[0].prefix"
    );
}

#[test]
fn reserved_and_malformed_route_paths() {
    let e = errors(&format!(
        "{UP}routes:\n  - {{path: /metrics}}\n  - {{path: /healthz}}\n  - {{path: /readyz/}}\n  - {{path: /.well-known/oauth-protected-resource}}\n  - {{path: mcp}}\n  - {{path: /ok}}\n  - {{path: /ok}}\n  - {{upstreams: [a]}}\n"
    ));
    assert_eq!(
        e.paths(),
        [
            "routes[0].path",
            "routes[1].path",
            "routes[2].path",
            "routes[3].path",
            "routes[4].path",
            "routes[6].path",
            "routes[7].path",
        ],
        "{e}"
    );
    assert!(e.errors[5].message.contains("duplicate"), "{e}");
}

#[test]
fn bad_globs() {
    let e = errors(&format!(
        "{UP}routes: [{{path: /mcp, include: ['a_{{b'], exclude: ['ok', '[z-a]']}}]\nauth: {{jwt: {{issuer: https://i/, jwks_file: j.json}}, rules: [{{scopes: [s], tools: ['x[']}}]}}"
    ));
    assert_eq!(
        e.paths(),
        [
            "routes[0].include[0]",
            "routes[0].exclude[1]",
            "auth.rules[0].tools[0]"
        ],
        "{e}"
    );
}

#[test]
fn secret_env_must_be_set_and_long_enough() {
    let yaml = format!("{UP}request_state: {{secret_env: MY_KEY}}");
    let e = errors(&yaml);
    assert_eq!(e.paths(), ["request_state.secret_env"]);
    assert!(
        e.errors[0].message.contains("MY_KEY") && e.errors[0].message.contains("not set"),
        "{e}"
    );
    let e = errors_env(&yaml, &[("MY_KEY", "short")]);
    assert_eq!(e.paths(), ["request_state.secret_env"]);
    assert!(e.errors[0].message.contains("32"), "{e}");
    let c = load_str(&yaml, &env(&[("MY_KEY", &"k".repeat(32))])).unwrap();
    assert_eq!(c.request_state.secret_env.as_deref(), Some("MY_KEY"));
    assert_eq!(c.request_state.secret.as_ref().map(Vec::len), Some(32));
}

#[test]
fn separators_and_name_lengths() {
    assert_eq!(
        one(&format!("{UP}tools: {{separator: '::'}}")).0,
        "tools.separator"
    );
    assert_eq!(
        one(&format!("{UP}tools: {{separator: '_____'}}")).0,
        "tools.separator"
    );
    let (p, m) = one(&format!("{UP}tools: {{separator: '-'}}"));
    assert_eq!(p, "tools.separator");
    assert!(m.contains("unambiguously"), "{m}");
    assert_eq!(
        one(&format!("{UP}tools: {{max_name_length: 8}}")).0,
        "tools.max_name_length"
    );
    assert_eq!(
        one(&format!("{UP}catalog: {{page_size: 0}}")).0,
        "catalog.page_size"
    );
}

#[test]
fn forwarded_headers_refuse_credentials_and_hop_by_hop() {
    let e = errors(&format!(
        "{UP}headers: {{forward: [traceparent, Authorization, Cookie, Proxy-Authorization, Connection, Mcp-Session-Id]}}"
    ));
    assert_eq!(e.len(), 5, "{e}");
    assert_eq!(e.errors[0].path, "headers.forward[1]");
    assert!(e.errors[0].message.contains("never forwarded"), "{e}");
    assert_eq!(
        one(&format!(
            "{UP}headers: {{allowed_origins: ['https://a.example/path']}}"
        ))
        .0,
        "headers.allowed_origins[0]"
    );
}

#[test]
fn trusted_proxies_are_addresses_or_cidr_blocks() {
    let e = errors(&format!(
        "{UP}server: {{trusted_proxies: [10.0.0.0/8, ingress.local, 10.0.0.0/33, '::1', 7]}}"
    ));
    assert_eq!(
        e.paths(),
        [
            "server.trusted_proxies[1]",
            "server.trusted_proxies[2]",
            "server.trusted_proxies[4]"
        ],
        "{e}"
    );
    assert!(
        e.errors[0]
            .message
            .contains("not an IP address or CIDR block"),
        "{e}"
    );
    assert_eq!(
        one(&format!("{UP}server: {{trusted_proxies: 10.0.0.0/8}}")).0,
        "server.trusted_proxies"
    );
}

#[test]
fn auth_shape() {
    let e = errors(&format!("{UP}auth: {{jwt: {{jwks_url: https://i/jwks, jwks_file: f}}, rules: [{{scopes: ['bad scope'], tools: []}}]}}"));
    assert_eq!(
        e.paths(),
        ["auth.jwt.issuer", "auth.jwt", "auth.rules[0].scopes[0]"],
        "{e}"
    );
    assert_eq!(
        one(&format!("{UP}auth: {{scopes_supported: [a]}}")).0,
        "auth.jwt"
    );
    let c = load_str(
        &format!("{UP}auth: {{jwt: {{issuer: https://i/, jwks_file: j.json}}}}"),
        &[],
    )
    .unwrap();
    let auth = c.auth.unwrap();
    assert_eq!(
        auth.jwt.audiences,
        ["http://127.0.0.1:8080"],
        "audience defaults to public_url"
    );
    assert_eq!(auth.jwt.jwks, JwksSource::File("j.json".into()));
}

#[test]
fn rate_limit_shape() {
    let e = errors(&format!(
        "{UP}rate_limits:\n  backend: redis\n  rules:\n    - {{name: a, key: [principal, user], rate: 0, per: 0s}}\n    - {{name: a, key: [tool, tool], rate: 1}}\n"
    ));
    assert_eq!(
        e.paths(),
        [
            "rate_limits.redis_url",
            "rate_limits.rules[0].key[1]",
            "rate_limits.rules[0].rate",
            "rate_limits.rules[0].per",
            "rate_limits.rules[1].name",
            "rate_limits.rules[1].key[1]",
            "rate_limits.rules[1].per",
        ],
        "{e}"
    );
    assert_eq!(
        one(&format!("{UP}rate_limits: {{redis_url: 'redis://x:1'}}")).0,
        "rate_limits.redis_url"
    );
}

#[test]
fn fleet_urls_are_checked() {
    for bad in ["http://x:1", "redis://", "''"] {
        let (path, message) = one(&format!("{UP}fleet: {{redis_url: {bad}}}"));
        assert_eq!(path, "fleet.redis_url", "{bad}: {message}");
    }
    assert_eq!(one(&format!("{UP}fleet: {{redis: x}}")).0, "fleet.redis");
    for bad in [
        "https://10.0.0.1:8080",
        "http://",
        "http://10.0.0.1:8080/mcp",
        "10.0.0.1:8080",
    ] {
        let (path, message) = one(&format!("{UP}fleet: {{advertise_url: '{bad}'}}"));
        assert_eq!(path, "fleet.advertise_url", "{bad}: {message}");
    }
    let (path, message) = one(&format!(
        "{UP}server: {{tls: {{cert_file: c, key_file: k}}}}\nfleet: {{advertise_url: 'http://10.0.0.1:8080'}}"
    ));
    assert_eq!(path, "fleet.advertise_url", "{message}");
    assert!(message.contains("server.tls"), "{message}");
}

#[test]
fn wrong_types_are_named() {
    let e = errors("upstreams: {id: a}\nserver: [1]\nlog: {level: verbose}\n");
    assert_eq!(e.paths(), ["server", "upstreams", "log.level"], "{e}");
    assert!(e.errors[1].message.contains("expected a list"), "{e}");
}
