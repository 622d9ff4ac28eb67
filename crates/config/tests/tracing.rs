//! `tracing`: OpenTelemetry export settings, off by default.

use junction_config::*;

const UP: &str = "upstreams: [{id: a, url: 'http://127.0.0.1:1/mcp'}]\n";

#[test]
fn tracing_is_off_by_default_and_takes_its_settings() {
    let c = load_str(UP, &[]).expect("valid");
    assert_eq!(c.tracing, TracingConfig::default());
    assert!(!c.tracing.enabled);
    let c = load_str(
        &format!(
            "{UP}tracing: {{enabled: true, endpoint: 'https://otel.example:4318/v1/traces', sampling_ratio: 0.25, service_name: edge, max_queue: 100, headers: {{x-api-key: k}}, timeout: 2s}}"
        ),
        &[],
    )
    .expect("valid");
    let t = &c.tracing;
    assert!(t.enabled);
    assert_eq!(t.endpoint, "https://otel.example:4318/v1/traces");
    assert_eq!(t.sampling_ratio, 0.25);
    assert_eq!(t.service_name, "edge");
    assert_eq!(t.max_queue, 100);
    assert_eq!(t.headers, [("x-api-key".to_string(), "k".to_string())]);
    assert_eq!(t.timeout, std::time::Duration::from_secs(2));
    // The ratio from the environment arrives as text.
    let env = [(
        "JUNCTION_TRACING__SAMPLING_RATIO".to_string(),
        "0.5".to_string(),
    )];
    assert_eq!(
        load_str(UP, &env).expect("valid").tracing.sampling_ratio,
        0.5
    );
}

#[test]
fn bad_tracing_settings_are_refused_with_their_key_paths() {
    let e = load_str(
        &format!(
            "{UP}tracing: {{enabled: yes-please, endpoint: 'ftp://x', sampling_ratio: 2, max_queue: 0, headers: {{'bad header': v}}, timeout: 0s, sample: 1}}"
        ),
        &[],
    )
    .expect_err("invalid");
    let mut paths = e.paths();
    paths.sort();
    assert_eq!(
        paths,
        [
            "tracing.enabled",
            "tracing.endpoint",
            "tracing.headers.bad header",
            "tracing.max_queue",
            "tracing.sample",
            "tracing.sampling_ratio",
            "tracing.timeout",
        ],
        "{e}"
    );
}
