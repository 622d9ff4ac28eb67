//! The merge contract of DESIGN §2, as a user of `tools/list` would check it.

#![allow(clippy::unwrap_used)] // test helpers: a panic is the failure report

use std::sync::Arc;

use junction_catalog::{
    merge, Catalog, DropKind, ListStatus, NamingRules, ToolFilter, UpstreamTools,
};
use serde_json::{json, Value};

fn tool(name: &str) -> Value {
    json!({"description": format!("does {name}"), "inputSchema": {"type": "object"}, "name": name})
}

fn list(id: &str, tools: Vec<Value>) -> UpstreamTools {
    UpstreamTools {
        upstream: id.to_owned(),
        tools: Arc::new(tools),
        ttl_ms: Some(60_000),
        public: true,
        status: ListStatus::Fresh,
        generation: 1,
    }
}

fn ids(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn names(c: &Catalog) -> Vec<&str> {
    c.tools.iter().map(|t| t.exposed.as_str()).collect()
}

fn all() -> ToolFilter {
    ToolFilter::default()
}

fn bytes(c: &Catalog) -> String {
    String::from_utf8(c.list_bytes().to_vec()).unwrap()
}

#[test]
fn snapshot_of_a_small_merge() {
    let lists = [
        list("beta", vec![tool("echo")]),
        list("alpha", vec![tool("search"), tool("get")]),
    ];
    let c = merge(
        &ids(&["alpha", "beta"]),
        &lists,
        &NamingRules::default(),
        &all(),
    );
    assert_eq!(
        bytes(&c),
        concat!(
            r#"[{"description":"does get","inputSchema":{"type":"object"},"name":"alpha__get"},"#,
            r#"{"description":"does search","inputSchema":{"type":"object"},"name":"alpha__search"},"#,
            r#"{"description":"does echo","inputSchema":{"type":"object"},"name":"beta__echo"}]"#
        )
    );
    assert!(c.dropped.is_empty() && c.degraded.is_empty());
    // the version is a pure function of the bytes
    let again = merge(
        &ids(&["alpha", "beta"]),
        &lists,
        &NamingRules::default(),
        &all(),
    );
    assert_eq!(c.version, again.version);
}

#[test]
fn upstreams_in_config_order_then_tools_bytewise() {
    let lists = [
        list("zeta", vec![tool("b"), tool("a")]),
        list(
            "alpha",
            vec![tool("a_b"), tool("a.b"), tool("B"), tool("a")],
        ),
    ];
    let c = merge(
        &ids(&["zeta", "alpha"]),
        &lists,
        &NamingRules::default(),
        &all(),
    );
    assert_eq!(
        names(&c),
        [
            "zeta__a",
            "zeta__b",
            "alpha__B",
            "alpha__a",
            "alpha__a.b",
            "alpha__a_b"
        ]
    );
}

#[test]
fn every_exposed_name_resolves_to_upstream_and_original() {
    let lists = [
        list("alpha", vec![tool("get")]),
        list("beta", vec![tool("get")]),
    ];
    let c = merge(
        &ids(&["alpha", "beta"]),
        &lists,
        &NamingRules::default(),
        &all(),
    );
    let t = c.resolve("beta__get").unwrap();
    assert_eq!((t.upstream.as_str(), t.original.as_str()), ("beta", "get"));
    assert!(c.resolve("get").is_none());
    assert!(c.resolve("gamma__get").is_none());

    let never = NamingRules {
        prefix: false,
        ..NamingRules::default()
    };
    let c = merge(&ids(&["alpha"]), &lists[..1], &never, &all());
    assert_eq!(names(&c), ["get"]);
    assert_eq!(c.resolve("get").unwrap().upstream, "alpha");
}

#[test]
fn definition_keeps_other_members_and_carries_the_exposed_name() {
    let original = json!({"name": "q", "title": "Query", "annotations": {"readOnlyHint": true},
        "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}},
        "outputSchema": {"type": "array"}, "_meta": {"x": [1, 2.5, null]}});
    let c = merge(
        &ids(&["db"]),
        &[list("db", vec![original.clone()])],
        &NamingRules::default(),
        &all(),
    );
    let def: Value = serde_json::from_str(c.tools[0].definition.get()).unwrap();
    let mut expected = original;
    expected["name"] = json!("db__q");
    assert_eq!(def, expected);
}

#[test]
fn invalid_x_mcp_header_tool_is_dropped_and_the_rest_kept() {
    let bad = json!({"name": "bad", "inputSchema": {"type": "object", "properties": {
        "items": {"type": "array", "items": {"type": "string", "x-mcp-header": "Region"}}}}});
    let number = json!({"name": "num", "inputSchema": {"type": "object", "properties": {
        "n": {"type": "number", "x-mcp-header": "N"}}}});
    let good = json!({"name": "good", "inputSchema": {"type": "object", "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"}}}});
    let c = merge(
        &ids(&["a"]),
        &[list("a", vec![bad, good, number, tool("plain")])],
        &NamingRules::default(),
        &all(),
    );
    assert_eq!(names(&c), ["a__good", "a__plain"]);
    assert_eq!(
        c.resolve("a__good").unwrap().header_params[0].header,
        "Mcp-Param-Region"
    );
    let dropped: Vec<_> = c
        .dropped
        .iter()
        .map(|d| (d.tool.as_str(), d.kind))
        .collect();
    assert_eq!(
        dropped,
        [
            ("bad", DropKind::InvalidHeaderAnnotation),
            ("num", DropKind::InvalidHeaderAnnotation)
        ]
    );
    assert!(c
        .dropped
        .iter()
        .all(|d| d.upstream == "a" && !d.reason.is_empty()));
}

#[test]
fn malformed_tools_are_dropped_with_a_reason() {
    let tools = vec![
        json!("not an object"),
        json!({"inputSchema": {"type": "object"}}),
        json!({"name": 7, "inputSchema": {"type": "object"}}),
        json!({"name": "has space", "inputSchema": {"type": "object"}}),
        json!({"name": "no_schema"}),
        json!({"name": "null_schema", "inputSchema": null}),
        json!({"name": "array_root", "inputSchema": {"type": "array"}}),
        tool("ok"),
    ];
    let c = merge(
        &ids(&["u"]),
        &[list("u", tools)],
        &NamingRules::default(),
        &all(),
    );
    assert_eq!(names(&c), ["u__ok"]);
    let mut got: Vec<_> = c
        .dropped
        .iter()
        .map(|d| (d.tool.as_str(), d.kind))
        .collect();
    got.sort_by_key(|(t, _)| *t);
    assert_eq!(
        got,
        [
            ("", DropKind::NotAnObject),
            ("", DropKind::MissingName),
            ("", DropKind::MissingName),
            ("array_root", DropKind::InvalidInputSchema),
            ("has space", DropKind::InvalidName),
            ("no_schema", DropKind::InvalidInputSchema),
            ("null_schema", DropKind::InvalidInputSchema),
        ]
    );
}

#[test]
fn duplicates_keep_the_first_as_listed() {
    let mut second = tool("dup");
    second["description"] = json!("second");
    let c = merge(
        &ids(&["u"]),
        &[list("u", vec![tool("dup"), second])],
        &NamingRules::default(),
        &all(),
    );
    assert_eq!(names(&c), ["u__dup"]);
    assert!(c.tools[0].definition.get().contains("does dup"));
    assert_eq!(c.dropped.len(), 1);
    assert_eq!(c.dropped[0].kind, DropKind::Duplicate);
}

#[test]
fn unprefixed_collision_drops_the_later_upstream() {
    let never = NamingRules {
        prefix: false,
        ..NamingRules::default()
    };
    let lists = [
        list("b", vec![tool("x")]),
        list("a", vec![tool("x"), tool("y")]),
    ];
    let c = merge(&ids(&["a", "b"]), &lists, &never, &all());
    assert_eq!(names(&c), ["x", "y"]);
    assert_eq!(c.resolve("x").unwrap().upstream, "a");
    assert_eq!(
        (c.dropped[0].upstream.as_str(), c.dropped[0].kind),
        ("b", DropKind::NameCollision)
    );
}

#[test]
fn filtered_tools_are_not_exposed_and_not_reported_as_dropped() {
    let f = ToolFilter::new(&ids(&["a__*"]), &ids(&["a__secret"])).unwrap();
    let lists = [
        list("a", vec![tool("get"), tool("secret")]),
        list("b", vec![tool("get")]),
    ];
    let c = merge(&ids(&["a", "b"]), &lists, &NamingRules::default(), &f);
    assert_eq!(names(&c), ["a__get"]);
    assert!(c.dropped.is_empty());
}

#[test]
fn stale_upstream_is_degraded_but_served_and_missing_contributes_nothing() {
    let mut stale = list("s", vec![tool("old")]);
    stale.status = ListStatus::Stale;
    let mut missing = list("m", vec![tool("ghost")]);
    missing.status = ListStatus::Missing;
    let lists = [list("f", vec![tool("new")]), stale, missing];
    let c = merge(
        &ids(&["f", "s", "m", "never-listed"]),
        &lists,
        &NamingRules::default(),
        &all(),
    );
    assert_eq!(names(&c), ["f__new", "s__old"]);
    assert_eq!(c.degraded, ["s", "m", "never-listed"]);
}

#[test]
fn ttl_is_the_minimum_and_legacy_counts_as_zero() {
    let mut a = list("a", vec![tool("t")]);
    a.ttl_ms = Some(30_000);
    let mut b = list("b", vec![tool("t")]);
    b.ttl_ms = Some(5_000);
    b.status = ListStatus::Stale;
    let mut m = list("m", vec![]);
    m.ttl_ms = Some(1);
    m.status = ListStatus::Missing;
    m.public = false;
    let naming = NamingRules::default();
    let c = merge(
        &ids(&["a", "b", "m"]),
        &[a.clone(), b.clone(), m],
        &naming,
        &all(),
    );
    assert_eq!(c.ttl_ms, 5_000);
    assert!(
        c.public,
        "a Missing upstream does not make the list private"
    );

    let mut legacy = list("l", vec![tool("t")]);
    legacy.ttl_ms = None;
    legacy.public = false;
    let c = merge(&ids(&["a", "l"]), &[a, legacy], &naming, &all());
    assert_eq!(c.ttl_ms, 0);
    assert!(!c.public);
    assert_eq!(merge(&[], &[], &naming, &all()).ttl_ms, 0);
}

#[test]
fn shortened_names_fit_and_map_back() {
    let naming = NamingRules {
        max_name_length: Some(24),
        ..NamingRules::default()
    };
    let long_a = "fetch_customer_orders_by_region";
    let long_b = "fetch_customer_orders_by_country";
    let c = merge(
        &ids(&["crm"]),
        &[list("crm", vec![tool(long_a), tool(long_b), tool("get")])],
        &naming,
        &all(),
    );
    assert_eq!(c.tools.len(), 3);
    for t in &c.tools {
        assert!(t.exposed.len() <= 24, "{}", t.exposed);
        assert_eq!(c.resolve(&t.exposed).unwrap().original, t.original);
    }
    assert!(names(&c).contains(&"crm__get"));
}

#[test]
fn prefixed_names_longer_than_128_are_shortened_not_lost() {
    let name = "t".repeat(128);
    let c = merge(
        &ids(&["alpha"]),
        &[list("alpha", vec![tool(&name)])],
        &NamingRules::default(),
        &all(),
    );
    assert_eq!(c.tools.len(), 1);
    assert_eq!(c.tools[0].exposed.len(), 128);
    assert_eq!(c.tools[0].original, name);
}

#[test]
fn pages_concatenate_to_the_full_list() {
    let tools: Vec<Value> = (0..7).map(|i| tool(&format!("t{i}"))).collect();
    let c = merge(
        &ids(&["u"]),
        &[list("u", tools)],
        &NamingRules::default(),
        &all(),
    );
    let full: Vec<Value> = serde_json::from_slice(&c.list_bytes()).unwrap();
    for size in 1..=8 {
        let mut got = Vec::new();
        let mut start = Some(0);
        while let Some(s) = start {
            let (page, next) = c.page(s, size);
            let items: Vec<Value> = serde_json::from_slice(&page).unwrap();
            assert!(items.len() <= size);
            got.extend(items);
            start = next;
        }
        assert_eq!(got, full, "page size {size}");
    }
    assert_eq!(&c.page(0, 0).0[..], &c.list_bytes()[..]);
    assert_eq!(c.page(99, 3), (bytes::Bytes::from_static(b"[]"), None));
}

#[test]
fn a_caller_specific_view_is_private_with_its_own_version() {
    let c = merge(
        &ids(&["u"]),
        &[list("u", vec![tool("a"), tool("b")])],
        &NamingRules::default(),
        &all(),
    );
    let view = c.filtered(|t| t.original == "b");
    assert_eq!(names(&view), ["u__b"]);
    assert!(!view.public);
    assert_ne!(view.version, c.version);
    assert!(view.resolve("u__a").is_none());
    assert_eq!(view.resolve("u__b").unwrap().original, "b");
}

fn curated(overrides: &[(&str, junction_catalog::Override)]) -> ToolFilter {
    let mut o = junction_catalog::Overrides::default();
    for (k, v) in overrides {
        o.tools.insert(k.to_string(), v.clone());
    }
    ToolFilter::default().with_overrides(o)
}

#[test]
fn overrides_rename_rewrite_hide_and_pin_and_report_what_matched_nothing() {
    let add = json!({"name": "add", "description": "adds",
        "inputSchema": {"type": "object", "properties": {"a": {}, "units": {}, "debug": {}}, "required": ["a", "units"]}});
    let lists = [list("calc", vec![add, tool("mul")])];
    let filter = curated(&[
        (
            "calc__add",
            junction_catalog::Override {
                name: Some("sum".into()),
                title: Some("Sum".into()),
                hide: vec!["debug".into()],
                pin: vec![("units".into(), json!("metric"))],
                origin: "routes[0].overrides.tools.calc__add".into(),
                ..Default::default()
            },
        ),
        (
            "calc__nope",
            junction_catalog::Override {
                description: Some("x".into()),
                origin: "routes[0].overrides.tools.calc__nope".into(),
                ..Default::default()
            },
        ),
    ]);
    let c = merge(&ids(&["calc"]), &lists, &NamingRules::default(), &filter);
    // Still in the upstream's order of its own names: a rename moves nothing.
    assert_eq!(names(&c), ["sum", "calc__mul"]);
    let sum = c.resolve("sum").unwrap();
    assert_eq!(sum.original, "add", "a call goes upstream by its own name");
    let def: Value = serde_json::from_str(sum.definition.get()).unwrap();
    assert_eq!(
        def,
        json!({"name": "sum", "title": "Sum", "description": "adds",
            "inputSchema": {"type": "object", "properties": {"a": {}}, "required": ["a"]}})
    );
    assert_eq!(sum.pinned.len(), 1);
    assert_eq!(sum.pinned[0].0, "units");
    assert!(c.resolve("calc__add").is_none(), "the old name is gone");
    assert_eq!(c.unmatched, ["routes[0].overrides.tools.calc__nope"]);
}

#[test]
fn a_rename_onto_a_taken_name_is_dropped_as_a_collision() {
    let lists = [list("calc", vec![tool("add"), tool("mul")])];
    let filter = curated(&[(
        "calc__add",
        junction_catalog::Override {
            name: Some("calc__mul".into()),
            ..Default::default()
        },
    )]);
    let c = merge(&ids(&["calc"]), &lists, &NamingRules::default(), &filter);
    assert_eq!(names(&c), ["calc__mul"]);
    assert_eq!(c.dropped.len(), 1);
    assert_eq!(c.dropped[0].kind, DropKind::NameCollision);
}
