//! `status`: the status page, off by default; its path never collides with
//! what else Junction serves, and its token comes from one place.

use std::path::PathBuf;

use junction_config::*;

const UP: &str = "upstreams: [{id: a, url: 'http://127.0.0.1:1/mcp'}]\n";

fn paths(yaml: &str) -> Vec<String> {
    let e = load_str(yaml, &[]).expect_err("invalid");
    let mut paths: Vec<String> = e.paths().into_iter().map(str::to_owned).collect();
    paths.sort();
    paths
}

fn message(yaml: &str) -> String {
    load_str(yaml, &[]).expect_err("invalid").to_string()
}

#[test]
fn status_is_off_by_default_and_takes_its_settings() {
    let c = load_str(UP, &[]).expect("valid");
    assert_eq!(c.status, StatusConfig::default());
    assert!(!c.status.enabled);
    assert_eq!(c.status.path, "/status");
    assert_eq!(c.status.json_path(), "/status.json");
    let c = load_str(
        &format!("{UP}status: {{enabled: true, path: /ops/junction, token_env: STATUS_TOKEN}}"),
        &[],
    )
    .expect("valid");
    assert!(c.status.enabled);
    assert_eq!(c.status.path, "/ops/junction");
    assert_eq!(
        c.status.token,
        Some(SecretSource::Env("STATUS_TOKEN".into()))
    );
    let c = load_str(
        &format!("{UP}status: {{enabled: true, token_file: /run/secrets/status}}"),
        &[],
    )
    .expect("valid");
    assert_eq!(
        c.status.token,
        Some(SecretSource::File(PathBuf::from("/run/secrets/status")))
    );
    // From the environment, as every scalar.
    let env = [("JUNCTION_STATUS__ENABLED".to_string(), "true".to_string())];
    assert!(load_str(UP, &env).expect("valid").status.enabled);
}

#[test]
fn bad_status_settings_are_refused_with_their_key_paths() {
    assert_eq!(
        paths(&format!(
            "{UP}status: {{enabled: maybe, path: status, token_env: 'NOT A NAME', tokn: x}}"
        )),
        [
            "status.enabled",
            "status.path",
            "status.token_env",
            "status.tokn"
        ]
    );
    assert_eq!(
        paths(&format!("{UP}status: {{token_env: T, token_file: /t}}")),
        ["status"]
    );
    for bad in [
        "/",
        "/status/",
        "/a//b",
        "/a/../b",
        "/a?b",
        "/a b",
        "/.well-known/status",
    ] {
        assert_eq!(
            paths(&format!("{UP}status: {{path: '{bad}'}}")),
            ["status.path"],
            "{bad}"
        );
    }
}

#[test]
fn an_enabled_status_path_never_collides_with_routes_or_admin_endpoints() {
    for (path, names) in [
        ("/metrics", "/metrics"),
        ("/healthz", "/healthz"),
        ("/readyz", "/readyz"),
        ("/mcp", "/mcp"),
    ] {
        let m = message(&format!("{UP}status: {{enabled: true, path: {path}}}"));
        assert!(m.starts_with("status.path: "), "{m}");
        assert!(m.contains(names), "{m}");
    }
    // The JSON path (path + `.json`) counts too.
    let m = message(&format!(
        "{UP}routes: [{{path: /ops.json, upstreams: [a]}}]\nstatus: {{enabled: true, path: /ops}}"
    ));
    assert!(m.contains("/ops.json"), "{m}");
    // The default path against a route of that name.
    let m = message(&format!(
        "{UP}routes: [{{path: /status, upstreams: [a]}}]\nstatus: {{enabled: true}}"
    ));
    assert!(m.contains("(the default)"), "{m}");
    // While the page is off, a route may have its path.
    load_str(
        &format!("{UP}routes: [{{path: /status, upstreams: [a]}}]\nstatus: {{enabled: false}}"),
        &[],
    )
    .expect("valid while off");
}
