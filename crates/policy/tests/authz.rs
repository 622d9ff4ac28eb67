//! Scope rules: globs over exposed names, every listed scope required, and the
//! scope set an insufficient_scope challenge names.

use junction_config::AuthRule;
use junction_policy::{Authorizer, Principal};
use serde_json::json;

fn rule(scopes: &[&str], tools: &[&str]) -> AuthRule {
    AuthRule {
        scopes: scopes.iter().map(|s| s.to_string()).collect(),
        tools: tools.iter().map(|s| s.to_string()).collect(),
    }
}

fn caller(scopes: &[&str]) -> Principal {
    Principal {
        subject: "alice".into(),
        scopes: scopes.iter().map(|s| s.to_string()).collect(),
        digest: "00".into(),
        claims: json!({}),
    }
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
    assert!(a.allows(&reader, "crm__get_contact"));
    assert!(a.allows(&reader, "crm__list_deals"));
    assert!(!a.allows(&reader, "crm__update_contact"));
    assert!(
        !a.allows(&reader, "crm__GET_contact"),
        "globs are case-sensitive"
    );
    let writer = caller(&["crm.write"]);
    assert!(a.allows(&writer, "crm__update_contact"));
    assert!(a.allows(&writer, "crm__delete_contact"), "crm__* covers it");
    assert!(!a.allows(&writer, "files__read"));
}

#[test]
fn a_rule_needs_every_scope_it_lists() {
    let a = crm_rules();
    assert!(!a.allows(&caller(&["admin"]), "files__read"));
    assert!(!a.allows(&caller(&["ops"]), "files__read"));
    assert!(a.allows(&caller(&["ops", "admin"]), "files__read"));
}

#[test]
fn empty_scope_list_grants_any_authenticated_caller() {
    let a = crm_rules();
    assert!(a.allows(&caller(&[]), "public__echo"));
    assert!(!a.allows(&caller(&[]), "crm__get_contact"));
}

#[test]
fn tools_no_rule_covers_are_denied() {
    let a = crm_rules();
    let everything = caller(&["crm.read", "crm.write", "admin", "ops"]);
    assert!(!a.allows(&everything, "billing__charge"));
    assert!(a.scopes_granting("billing__charge").is_empty());
    assert!(!a.grants_everything());
}

#[test]
fn scopes_granting_is_the_union_of_matching_rules() {
    let a = crm_rules();
    assert_eq!(
        a.scopes_granting("crm__get_contact"),
        vec!["crm.read", "crm.write"]
    );
    assert_eq!(a.scopes_granting("crm__update_contact"), vec!["crm.write"]);
    assert_eq!(
        a.scopes_granting("crm__delete_x"),
        vec!["admin", "crm.write", "ops"]
    );
    assert!(a.scopes_granting("public__echo").is_empty());
}

#[test]
fn no_rules_grants_every_tool() {
    let a = Authorizer::new(&[]).expect("empty");
    assert!(a.grants_everything());
    assert!(a.allows(&caller(&[]), "anything__at_all"));
}

#[test]
fn bad_glob_is_an_error() {
    assert!(Authorizer::new(&[rule(&["x"], &["crm__[get"])]).is_err());
}
