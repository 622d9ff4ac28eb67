//! `audit`: the audit log of tool calls, off by default; per-route and
//! per-tool switches for arguments and results, and the redaction list.

use junction_config::*;

const UP: &str = "upstreams: [{id: a, url: 'http://127.0.0.1:1/mcp'}]\n";

#[test]
fn audit_is_off_by_default_with_nothing_included_and_common_secrets_redacted() {
    let c = load_str(UP, &[]).expect("valid");
    let a = &c.audit;
    assert!(!a.enabled);
    assert_eq!(a.file, None);
    assert!(!a.include_arguments && !a.include_results);
    assert_eq!(a.redact, DEFAULT_REDACT);
    for key in ["password", "token", "secret", "api_key", "authorization"] {
        assert!(a.redact.iter().any(|k| k == key), "{key}");
    }
    assert_eq!(a.includes("/mcp", "a__x"), AuditIncludes::default());
}

#[test]
fn audit_takes_its_file_switches_and_redaction_list() {
    let c = load_str(
        &format!(
            "{UP}routes: [{{path: /mcp, upstreams: ['*']}}, {{path: /ops, upstreams: [a]}}]
audit:
  enabled: true
  file: /var/log/junction/audit.jsonl
  include_results: true
  redact: [Password, ssn]
  routes: {{/ops: {{include_arguments: true}}}}
  tools: {{'a__*': {{include_results: false}}, a__get: {{include_results: true, include_arguments: false}}}}
"
        ),
        &[],
    )
    .expect("valid");
    let a = &c.audit;
    assert!(a.enabled);
    assert_eq!(
        a.file,
        Some(AuditFile::Path("/var/log/junction/audit.jsonl".into()))
    );
    assert_eq!(
        a.redact,
        ["password", "ssn"],
        "lower case, defaults replaced"
    );
    let inc = |route: &str, tool: &str| {
        let i = a.includes(route, tool);
        (i.arguments, i.results)
    };
    assert_eq!(inc("/mcp", "b__x"), (false, true));
    assert_eq!(inc("/ops", "b__x"), (true, true));
    assert_eq!(inc("/ops", "a__list"), (true, false));
    assert_eq!(inc("/ops", "a__get"), (false, true), "the exact name wins");

    let stderr = load_str(&format!("{UP}audit: {{enabled: true, file: stderr}}"), &[]);
    assert_eq!(stderr.expect("valid").audit.file, Some(AuditFile::Stderr));
    let env = [
        ("JUNCTION_AUDIT__ENABLED".to_string(), "true".to_string()),
        (
            "JUNCTION_AUDIT__FILE".to_string(),
            "/tmp/a.jsonl".to_string(),
        ),
    ];
    let from_env = load_str(UP, &env).expect("valid").audit;
    assert!(from_env.enabled);
    assert_eq!(from_env.file, Some(AuditFile::Path("/tmp/a.jsonl".into())));
}

#[test]
fn bad_audit_settings_are_refused_with_their_key_paths() {
    let e = load_str(
        &format!(
            "{UP}audit: {{enabled: yes, include_arguments: 1, redact: [''], routes: {{/nope: {{include_results: true}}, /mcp: {{include_everything: true}}}}, tools: {{'a__[': {{}}, a__x: {{include_arguments: maybe}}}}, rotate: daily}}"
        ),
        &[],
    )
    .expect_err("invalid");
    let mut paths = e.paths();
    paths.sort();
    assert_eq!(
        paths,
        [
            "audit.enabled",
            "audit.include_arguments",
            "audit.redact[0]",
            "audit.rotate",
            "audit.routes./mcp.include_everything",
            "audit.routes./nope",
            "audit.tools.a__[",
            "audit.tools.a__x.include_arguments",
        ],
        "{e}"
    );
    // Enabled without a file: where would the lines go?
    let e = load_str(&format!("{UP}audit: {{enabled: true}}"), &[]).expect_err("invalid");
    assert_eq!(e.paths(), ["audit.file"], "{e}");
    // Not a mapping of names.
    let e = load_str(&format!("{UP}audit: {{tools: [a__x]}}"), &[]).expect_err("invalid");
    assert_eq!(e.paths(), ["audit.tools"], "{e}");
}
