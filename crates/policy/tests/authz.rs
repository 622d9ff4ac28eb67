//! Scope rules: globs over exposed names, every listed scope required, and the
//! scope set an insufficient_scope challenge names.

use junction_config::AuthRule;
use junction_policy::{Authorizer, Identity, Kind, Principal};
use serde_json::json;

fn rule(scopes: &[&str], tools: &[&str]) -> AuthRule {
    AuthRule {
        scopes: scopes.iter().map(|s| s.to_string()).collect(),
        tools: tools.iter().map(|s| s.to_string()).collect(),
        ..AuthRule::default()
    }
}

fn caller(scopes: &[&str]) -> Principal {
    Identity {
        subject: "alice".into(),
        scopes: scopes.iter().map(|s| s.to_string()).collect(),
        digest: "00".into(),
        claims: json!({}),
    }
    .into()
}

fn crm_rules() -> Authorizer {
    Authorizer::new(&[
        rule(&["crm.read"], &["crm__get_*", "crm__list_*"]),
        rule(&["crm.write"], &["crm__*"]),
        rule(&["admin", "ops"], &["crm__delete_*", "files__*"]),
        rule(&[], &["public__*"]),
    ])
    .expect("rules")
}

#[test]
fn globs_grant_by_scope() {
    let a = crm_rules();
    let reader = caller(&["crm.read"]);
    assert!(a.allows(&reader, Kind::Tool, "crm__get_contact"));
    assert!(a.allows(&reader, Kind::Tool, "crm__list_deals"));
    assert!(!a.allows(&reader, Kind::Tool, "crm__update_contact"));
    assert!(
        !a.allows(&reader, Kind::Tool, "crm__GET_contact"),
        "globs are case-sensitive"
    );
    let writer = caller(&["crm.write"]);
    assert!(a.allows(&writer, Kind::Tool, "crm__update_contact"));
    assert!(
        a.allows(&writer, Kind::Tool, "crm__delete_contact"),
        "crm__* covers it"
    );
    assert!(!a.allows(&writer, Kind::Tool, "files__read"));
}

#[test]
fn a_rule_needs_every_scope_it_lists() {
    let a = crm_rules();
    assert!(!a.allows(&caller(&["admin"]), Kind::Tool, "files__read"));
    assert!(!a.allows(&caller(&["ops"]), Kind::Tool, "files__read"));
    assert!(a.allows(&caller(&["ops", "admin"]), Kind::Tool, "files__read"));
}

#[test]
fn empty_scope_list_grants_any_authenticated_caller() {
    let a = crm_rules();
    assert!(a.allows(&caller(&[]), Kind::Tool, "public__echo"));
    assert!(!a.allows(&caller(&[]), Kind::Tool, "crm__get_contact"));
}

#[test]
fn tools_no_rule_covers_are_denied() {
    let a = crm_rules();
    let everything = caller(&["crm.read", "crm.write", "admin", "ops"]);
    assert!(!a.allows(&everything, Kind::Tool, "billing__charge"));
    assert!(a.scopes_granting(Kind::Tool, "billing__charge").is_empty());
    assert!(!a.grants_everything());
}

#[test]
fn scopes_granting_is_the_union_of_matching_rules() {
    let a = crm_rules();
    assert_eq!(
        a.scopes_granting(Kind::Tool, "crm__get_contact"),
        vec!["crm.read", "crm.write"]
    );
    assert_eq!(
        a.scopes_granting(Kind::Tool, "crm__update_contact"),
        vec!["crm.write"]
    );
    assert_eq!(
        a.scopes_granting(Kind::Tool, "crm__delete_x"),
        vec!["admin", "crm.write", "ops"]
    );
    assert!(a.scopes_granting(Kind::Tool, "public__echo").is_empty());
}

#[test]
fn no_rules_grants_every_tool() {
    let a = Authorizer::new(&[]).expect("empty");
    assert!(a.grants_everything());
    assert!(a.allows(&caller(&[]), Kind::Tool, "anything__at_all"));
}

#[test]
fn bad_glob_is_an_error() {
    assert!(Authorizer::new(&[rule(&["x"], &["crm__[get"])]).is_err());
}

fn caller_with(scopes: &[&str], claims: serde_json::Value) -> Principal {
    Identity {
        claims,
        ..(*caller(scopes)).clone()
    }
    .into()
}

#[test]
fn prompts_and_resources_are_granted_by_their_own_globs() {
    let a = Authorizer::new(&[AuthRule {
        scopes: vec!["crm.read".into()],
        tools: vec!["crm__get_*".into()],
        prompts: vec!["crm__summary*".into()],
        resources: vec!["crm://records/*".into()],
        ..AuthRule::default()
    }])
    .expect("rules");
    let reader = caller(&["crm.read"]);
    assert!(a.allows(&reader, Kind::Prompt, "crm__summary"));
    assert!(a.allows(&reader, Kind::Resource, "crm://records/7"));
    assert!(!a.allows(&reader, Kind::Resource, "files://etc/passwd"));
    // A tool glob grants no prompt of the same name, and the other way round.
    assert!(!a.allows(&reader, Kind::Prompt, "crm__get_contact"));
    assert!(!a.allows(&reader, Kind::Tool, "crm__summary"));
    // Without the scope, nothing of any kind.
    let nobody = caller(&[]);
    for (kind, name) in [
        (Kind::Tool, "crm__get_contact"),
        (Kind::Prompt, "crm__summary"),
        (Kind::Resource, "crm://records/7"),
    ] {
        assert!(!a.allows(&nobody, kind, name), "{kind:?} {name}");
        assert_eq!(a.scopes_granting(kind, name), vec!["crm.read"]);
    }
}

#[test]
fn claims_match_strings_and_lists_and_all_must_hold() {
    let a = Authorizer::new(&[AuthRule {
        claims: vec![
            ("groups".into(), vec!["crm-users".into(), "admins".into()]),
            ("tenant".into(), vec!["acme".into()]),
        ],
        tools: vec!["crm__*".into()],
        ..AuthRule::default()
    }])
    .expect("rules");
    let yes = [
        json!({"groups": ["eng", "crm-users"], "tenant": "acme"}),
        json!({"groups": "admins", "tenant": ["acme"]}),
    ];
    for claims in yes {
        assert!(
            a.allows(&caller_with(&[], claims.clone()), Kind::Tool, "crm__x"),
            "{claims}"
        );
    }
    let no = [
        json!({"groups": ["eng"], "tenant": "acme"}),
        json!({"groups": ["crm-users"]}),
        json!({"groups": ["crm-users"], "tenant": "globex"}),
        json!({"groups": [["crm-users"]], "tenant": "acme"}),
        json!({"groups": 1, "tenant": "acme"}),
        json!({}),
    ];
    for claims in no {
        assert!(
            !a.allows(&caller_with(&[], claims.clone()), Kind::Tool, "crm__x"),
            "{claims}"
        );
    }
}
