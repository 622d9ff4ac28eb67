//! `upstreams[].credentials`: the four types as loaded, and every way to get
//! them wrong, each error at its key path.

use std::path::PathBuf;
use std::time::Duration;

use junction_config::*;

const AUTH: &str = "auth: {jwt: {issuer: 'https://idp.test/', jwks_file: j.json}}\n";

fn load(yaml: &str) -> Config {
    match load_str(yaml, &[]) {
        Ok(c) => c,
        Err(e) => panic!("expected a valid config, got:\n{e}"),
    }
}

fn errors(yaml: &str) -> ConfigErrors {
    match load_str(yaml, &[]) {
        Ok(c) => panic!("expected errors, loaded {c:?}"),
        Err(e) => e,
    }
}

/// One upstream `a` with these credentials (a flow mapping), plus `extra`.
fn with(credentials: &str, extra: &str) -> String {
    format!(
        "upstreams:\n  - id: a\n    url: 'https://crm.internal/mcp'\n    credentials: {credentials}\n{extra}"
    )
}

fn creds(c: &Config) -> Credentials {
    c.upstream("a")
        .and_then(UpstreamConfig::credentials)
        .expect("credentials")
}

#[test]
fn client_credentials_with_every_key() {
    let c = load(&with(
        "{type: client_credentials, token_url: 'https://idp.example/oauth2/token', client_id: junction, client_secret_env: CRM_CLIENT_SECRET, scopes: [crm.read, crm.write], audience: 'https://crm.internal/mcp', resource: 'https://crm.internal/mcp', auth_method: client_secret_post, timeout: 3s, ca_file: /etc/ssl/idp.pem}",
        "",
    ));
    let want = OAuthClient {
        token_url: "https://idp.example/oauth2/token".into(),
        client_id: "junction".into(),
        client_secret: SecretSource::Env("CRM_CLIENT_SECRET".into()),
        scopes: vec!["crm.read".into(), "crm.write".into()],
        audience: Some("https://crm.internal/mcp".into()),
        resource: Some("https://crm.internal/mcp".into()),
        auth_method: ClientAuthMethod::ClientSecretPost,
        timeout: Duration::from_secs(3),
        ca_file: Some(PathBuf::from("/etc/ssl/idp.pem")),
    };
    assert_eq!(creds(&c), Credentials::ClientCredentials(want));
    assert_eq!(creds(&c).kind(), "client_credentials");
}

#[test]
fn defaults_of_an_oauth_client() {
    let c = load(&with(
        "{type: client_credentials, token_url: 'http://127.0.0.1:9/token', client_id: j, client_secret_file: /run/secret}",
        "",
    ));
    let Credentials::ClientCredentials(client) = creds(&c) else {
        panic!("{:?}", creds(&c));
    };
    assert_eq!(client.auth_method, ClientAuthMethod::ClientSecretBasic);
    assert_eq!(client.timeout, Duration::from_secs(10));
    assert_eq!(
        client.client_secret,
        SecretSource::File("/run/secret".into())
    );
    assert!(client.scopes.is_empty() && client.audience.is_none() && client.resource.is_none());
}

#[test]
fn token_exchange_passthrough_and_static() {
    let c = load(&with(
        "{type: token_exchange, token_url: 'https://idp/t', client_id: j, client_secret_env: S, resource: 'urn:crm'}",
        AUTH,
    ));
    match creds(&c) {
        Credentials::TokenExchange { client, cache_size } => {
            assert_eq!(cache_size, 10_000);
            assert_eq!(client.resource.as_deref(), Some("urn:crm"));
        }
        other => panic!("{other:?}"),
    }
    let c = load(&with(
        "{type: token_exchange, token_url: 'https://idp/t', client_id: j, client_secret_env: S, cache_size: 50}",
        AUTH,
    ));
    assert!(matches!(
        creds(&c),
        Credentials::TokenExchange { cache_size: 50, .. }
    ));
    let c = load(&with(
        "{type: passthrough, audience: 'https://legacy/mcp'}",
        AUTH,
    ));
    assert_eq!(
        creds(&c),
        Credentials::Passthrough {
            audience: "https://legacy/mcp".into()
        }
    );
    let c = load(&with("{type: static, token_env: NAME}", ""));
    assert_eq!(
        creds(&c),
        Credentials::Static(SecretSource::Env("NAME".into()))
    );
    let c = load(&with("{type: static, token_file: /t}", ""));
    assert_eq!(
        creds(&c),
        Credentials::Static(SecretSource::File("/t".into()))
    );
}

#[test]
fn bearer_settings_read_as_static_credentials() {
    let c = load("upstreams: [{id: a, url: 'http://x/mcp', bearer_token_env: T}]");
    assert_eq!(
        creds(&c),
        Credentials::Static(SecretSource::Env("T".into()))
    );
    let c = load("upstreams: [{id: a, url: 'http://x/mcp', bearer_token_file: /t}]");
    assert_eq!(
        creds(&c),
        Credentials::Static(SecretSource::File("/t".into()))
    );
    let c = load("upstreams: [{id: a, url: 'http://x/mcp'}, {id: b, command: [x]}]");
    assert!(c.upstreams.iter().all(|u| u.credentials().is_none()));
}

#[test]
fn type_is_required_and_one_of_four() {
    let e = errors(&with("{token_url: x}", ""));
    assert_eq!(e.paths(), ["upstreams[0].credentials.type"], "{e}");
    let e = errors(&with("{type: mtls}", ""));
    assert_eq!(e.paths(), ["upstreams[0].credentials.type"], "{e}");
    assert!(
        e.errors[0]
            .message
            .contains("static, client_credentials, token_exchange, passthrough"),
        "{e}"
    );
    let e = errors(&with("client_credentials", ""));
    assert_eq!(e.paths(), ["upstreams[0].credentials"], "{e}");
    assert!(e.errors[0].message.contains("found a string"), "{e}");
}

#[test]
fn unknown_keys_per_type() {
    let e = errors(&with("{type: static, token_env: T, cache_size: 5}", ""));
    assert_eq!(e.paths(), ["upstreams[0].credentials.cache_size"], "{e}");
    let e = errors(&with(
        "{type: client_credentials, token_url: 'https://i/t', client_id: j, client_secret_env: S, cache_size: 5, scope: x}",
        "",
    ));
    assert_eq!(
        e.paths(),
        [
            "upstreams[0].credentials.cache_size",
            "upstreams[0].credentials.scope"
        ],
        "{e}"
    );
    assert!(e.errors[1].message.contains("did you mean `scopes`"), "{e}");
    let e = errors(&with(
        "{type: passthrough, audience: x, token_url: y}",
        AUTH,
    ));
    assert_eq!(e.paths(), ["upstreams[0].credentials.token_url"], "{e}");
}

#[test]
fn oauth_client_errors() {
    let e = errors(&with(
        "{type: client_credentials, token_url: 'ftp://idp/t', client_secret_env: '1BAD', scopes: ['a b'], resource: 'crm#x', auth_method: private_key_jwt, timeout: 0s}",
        "",
    ));
    assert_eq!(
        e.paths(),
        [
            "upstreams[0].credentials.token_url",
            "upstreams[0].credentials.client_id",
            "upstreams[0].credentials.client_secret_env",
            "upstreams[0].credentials.scopes[0]",
            "upstreams[0].credentials.resource",
            "upstreams[0].credentials.auth_method",
            "upstreams[0].credentials.timeout",
        ],
        "{e}"
    );
    assert!(e.errors[4].message.contains("absolute URI"), "{e}");
    let e = errors(&with(
        "{type: client_credentials, token_url: 'http://idp/t', client_id: j, ca_file: ca.pem}",
        "",
    ));
    assert_eq!(
        e.paths(),
        [
            "upstreams[0].credentials",
            "upstreams[0].credentials.ca_file"
        ],
        "{e}"
    );
    assert!(e.errors[0].message.contains("exactly one"), "{e}");
    let e = errors(&with(
        "{type: token_exchange, token_url: 'https://idp/t', client_id: j, client_secret_env: S, client_secret_file: /s, cache_size: 0}",
        AUTH,
    ));
    assert_eq!(
        e.paths(),
        [
            "upstreams[0].credentials.cache_size",
            "upstreams[0].credentials"
        ],
        "{e}"
    );
}

#[test]
fn caller_tokens_need_auth() {
    for kind in [
        "{type: token_exchange, token_url: 'https://idp/t', client_id: j, client_secret_env: S}",
        "{type: passthrough, audience: x}",
    ] {
        let e = errors(&with(kind, ""));
        assert_eq!(e.paths(), ["upstreams[0].credentials.type"], "{e}");
        assert!(e.errors[0].message.contains("`auth`"), "{e}");
    }
    let e = errors(&with("{type: passthrough}", AUTH));
    assert_eq!(e.paths(), ["upstreams[0].credentials.audience"], "{e}");
}

#[test]
fn static_needs_exactly_one_source() {
    for c in [
        "{type: static}",
        "{type: static, token_env: A, token_file: /b}",
    ] {
        let e = errors(&with(c, ""));
        assert_eq!(e.paths(), ["upstreams[0].credentials"], "{c}: {e}");
    }
    let e = errors(&with("{type: static, token_env: 'not-a-name'}", ""));
    assert_eq!(e.paths(), ["upstreams[0].credentials.token_env"], "{e}");
}

#[test]
fn credentials_conflict_with_bearer_and_authorization_and_stdio() {
    let e = errors(
        "upstreams:\n  - id: a\n    url: 'http://x/mcp'\n    bearer_token_env: T\n    headers: {Authorization: x}\n    credentials: {type: static, token_env: U}\n  - {id: b, command: [x], credentials: {type: static, token_env: U}}\n",
    );
    assert_eq!(
        e.paths(),
        [
            "upstreams[0].credentials",
            "upstreams[0].headers.Authorization",
            "upstreams[1].credentials",
        ],
        "{e}"
    );
    assert!(e.errors[1].message.contains("credentials"), "{e}");
    assert!(e.errors[2].message.contains("HTTP upstreams"), "{e}");
}
