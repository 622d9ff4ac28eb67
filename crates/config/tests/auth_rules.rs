//! `auth.rules`: what a rule grants (tools, prompts, resources) and to whom
//! (scopes, claims), and how a bad rule is refused.

use junction_config::*;

const HEAD: &str = "upstreams: [{id: a, url: 'http://127.0.0.1:1/mcp'}]
auth:
  jwt: {issuer: 'https://idp.test', jwks_file: jwks.json}
  rules:
";

fn load_rules(rules: &str) -> Result<Config, ConfigErrors> {
    load_str(&format!("{HEAD}{rules}"), &[])
}

#[test]
fn a_rule_grants_tools_prompts_and_resources_to_scopes_and_claims() {
    let c = load_rules(
        "    - {scopes: [crm.read], claims: {groups: [crm, admins], tenant: acme}, tools: ['crm__*'], prompts: ['crm__p*'], resources: ['crm://*']}
    - {prompts: ['docs__*']}
",
    )
    .expect("valid");
    let rules = &c.auth.expect("auth").rules;
    assert_eq!(rules.len(), 2);
    let r = &rules[0];
    assert_eq!(r.scopes, ["crm.read"]);
    let mut claims = r.claims.clone();
    claims.sort();
    assert_eq!(
        claims,
        [
            (
                "groups".to_string(),
                vec!["crm".to_string(), "admins".to_string()]
            ),
            ("tenant".to_string(), vec!["acme".to_string()]),
        ]
    );
    assert_eq!(
        (&r.tools[..], &r.prompts[..], &r.resources[..]),
        (
            &["crm__*".to_string()][..],
            &["crm__p*".to_string()][..],
            &["crm://*".to_string()][..]
        )
    );
    assert!(rules[1].tools.is_empty() && rules[1].scopes.is_empty());
    assert_eq!(rules[1].prompts, ["docs__*"]);
}

#[test]
fn bad_rules_are_refused_with_their_key_paths() {
    let e = load_rules(
        "    - {scopes: [crm.read]}
    - {claims: {groups: []}, tools: [x]}
    - {claims: {groups: [1]}, prompts: [y]}
    - {claims: [groups], resources: ['z[']}
    - {tools: [x], other: 1}
",
    )
    .expect_err("invalid");
    assert_eq!(
        e.paths(),
        [
            "auth.rules[0].tools",
            "auth.rules[1].claims.groups",
            "auth.rules[2].claims.groups",
            "auth.rules[3].resources[0]",
            "auth.rules[3].claims",
            "auth.rules[4].other",
        ],
        "{e}"
    );
    let text = e.to_string();
    assert!(
        text.contains("`tools`") && text.contains("`prompts`") && text.contains("`resources`"),
        "{text}"
    );
}
