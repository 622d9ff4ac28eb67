//! Prompt and resource lists: the merge as a client of `prompts/list` and
//! `resources/list` sees it (exact bytes for small inputs, properties for any
//! input), and the per-upstream list cache and per-route URI memo. Time is
//! paused (tokio test-util), so TTLs are deterministic.

#![allow(clippy::unwrap_used)] // test helpers: a panic is the failure report

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use junction_catalog::lists::{
    literal_prefix, match_template, merge_keyed, merge_prompts, namespaced, resolve_prompt,
    split_namespaced, Contribution, Fanned, Listed, Lookup, MergedList, NAMESPACE,
};
use junction_catalog::{ListCache, NamingRules, Overrides, ResourceIndex};
use proptest::prelude::*;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

fn contribution(upstream: &str, items: Vec<Value>) -> Contribution {
    Contribution {
        upstream: upstream.to_owned(),
        items,
        ttl_ms: 60_000,
        public: true,
    }
}

fn fanned(contributions: Vec<Contribution>) -> Fanned {
    Fanned {
        contributions,
        degraded: Vec::new(),
    }
}

fn ids(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// The page as `list_page` writes it: items joined into one array.
fn bytes(m: &MergedList) -> String {
    let items: Vec<&str> = m.items.iter().map(|i| i.get()).collect();
    format!("[{}]", items.join(","))
}

/// The version as it was defined when it lived in the server.
fn version_of(kind: &str, m: &MergedList) -> u64 {
    let mut h = Sha256::new();
    h.update(kind.as_bytes());
    for i in &m.items {
        h.update([0u8]);
        h.update(i.get().as_bytes());
    }
    let d = h.finalize();
    u64::from_be_bytes(d[..8].try_into().unwrap())
}

fn resource(uri: &str, name: &str) -> Value {
    json!({"uri": uri, "name": name})
}

fn prompt(name: &str) -> Value {
    json!({"name": name, "description": format!("says {name}")})
}

// ---- snapshots ----

#[test]
fn snapshot_of_two_upstreams_listing_the_same_uri() {
    let f = Fanned {
        contributions: vec![
            contribution(
                "alpha",
                vec![
                    resource("file:///b", "alpha b"),
                    resource("file:///a", "alpha a"),
                ],
            ),
            Contribution {
                ttl_ms: 5_000,
                public: false,
                ..contribution(
                    "beta",
                    vec![
                        resource("file:///a", "beta a"),
                        json!({"name": "no uri"}),
                        resource("mem://c", "beta c"),
                        resource("file:///a", "beta a again"),
                    ],
                )
            },
        ],
        degraded: vec!["gamma".into()],
    };
    let (items, owners) = merge_keyed(&f, "uri", "resource");
    let m = MergedList::new("resources", items, &f.contributions, f.degraded.clone());
    assert_eq!(
        bytes(&m),
        concat!(
            r#"[{"name":"alpha a","uri":"file:///a"},"#,
            r#"{"name":"alpha b","uri":"file:///b"},"#,
            r#"{"name":"beta a","uri":"junction://beta/file:///a"},"#,
            r#"{"name":"beta c","uri":"mem://c"}]"#
        )
    );
    let o = |k: &str, u: &str| (k.to_owned(), u.to_owned());
    assert_eq!(
        owners,
        [
            o("file:///a", "alpha"),
            o("file:///b", "alpha"),
            o("junction://beta/file:///a", "beta"),
            o("mem://c", "beta"),
        ]
    );
    assert_eq!(m.version, version_of("resources", &m));
    assert_eq!((m.ttl_ms, m.public), (5_000, false));
    assert_eq!(m.degraded, ["gamma"]);
    assert_eq!(
        split_namespaced("junction://beta/file:///a", &ids(&["alpha", "beta"])),
        Some(("beta", "file:///a"))
    );
}

#[test]
fn snapshot_of_a_template_merge_and_its_prefixes() {
    let t = |t: &str| json!({"uriTemplate": t, "name": "t"});
    let f = fanned(vec![
        contribution("a", vec![t("mock://items/{id}"), t("{+path}")]),
        contribution("b", vec![t("mock://items/{id}"), t("mock://items/x/{id}")]),
    ]);
    let (items, owners) = merge_keyed(&f, "uriTemplate", "resource template");
    let m = MergedList::new("resourceTemplates", items, &f.contributions, Vec::new());
    assert_eq!(
        bytes(&m),
        concat!(
            r#"[{"name":"t","uriTemplate":"mock://items/{id}"},"#,
            r#"{"name":"t","uriTemplate":"{+path}"},"#,
            r#"{"name":"t","uriTemplate":"mock://items/x/{id}"},"#,
            r#"{"name":"t","uriTemplate":"junction://b/mock://items/{id}"}]"#
        )
    );
    let prefixes: Vec<(String, String)> = owners
        .into_iter()
        .map(|(t, u)| (literal_prefix(&t).to_owned(), u))
        .filter(|(p, _)| !p.is_empty())
        .collect();
    assert_eq!(
        match_template(&prefixes, "mock://items/x/1"),
        Some("b".into())
    );
    assert_eq!(
        match_template(&prefixes, "mock://items/1"),
        Some("a".into())
    );
    assert_eq!(
        match_template(&prefixes, "junction://b/mock://items/1"),
        Some("b".into())
    );
    assert_eq!(match_template(&prefixes, "file:///x"), None);
}

#[test]
fn snapshot_of_a_prompt_merge() {
    let f = Fanned {
        contributions: vec![
            contribution("beta", vec![prompt("greet"), prompt("ask")]),
            contribution(
                "alpha",
                vec![
                    prompt("zeta"),
                    json!({"description": "nameless"}),
                    prompt("ask"),
                    prompt("mid"),
                ],
            ),
        ],
        degraded: Vec::new(),
    };
    let m = merge_prompts(f.clone(), &NamingRules::default(), &Overrides::default());
    assert_eq!(
        bytes(&m),
        concat!(
            r#"[{"description":"says ask","name":"beta__ask"},"#,
            r#"{"description":"says greet","name":"beta__greet"},"#,
            r#"{"description":"says ask","name":"alpha__ask"},"#,
            r#"{"description":"says mid","name":"alpha__mid"},"#,
            r#"{"description":"says zeta","name":"alpha__zeta"}]"#
        )
    );
    assert_eq!(m.version, version_of("prompts", &m));

    // prefix: never — the later upstream's `ask` collides and is left out
    let never = NamingRules {
        prefix: false,
        ..NamingRules::default()
    };
    let m = merge_prompts(f, &never, &Overrides::default());
    assert_eq!(
        bytes(&m),
        concat!(
            r#"[{"description":"says ask","name":"ask"},"#,
            r#"{"description":"says greet","name":"greet"},"#,
            r#"{"description":"says mid","name":"mid"},"#,
            r#"{"description":"says zeta","name":"zeta"}]"#
        )
    );
}

#[test]
fn prompt_names_resolve_without_a_list() {
    let ups = ids(&["alpha", "beta"]);
    let r = NamingRules::default();
    let pair = |u: &str, o: &str| Some((u.to_owned(), o.to_owned()));
    assert_eq!(resolve_prompt(&r, &ups, "beta__ask"), pair("beta", "ask"));
    assert_eq!(resolve_prompt(&r, &ups, "beta__a__b"), pair("beta", "a__b"));
    assert_eq!(resolve_prompt(&r, &ups, "gamma__ask"), None);
    assert_eq!(resolve_prompt(&r, &ups, "beta__"), None);
    assert_eq!(resolve_prompt(&r, &ups, "ask"), None);
    let never = NamingRules {
        prefix: false,
        ..NamingRules::default()
    };
    assert_eq!(
        resolve_prompt(&never, &ups, "beta__ask"),
        pair("alpha", "beta__ask")
    );
    assert_eq!(resolve_prompt(&never, &[], "ask"), None);
}

#[test]
fn the_version_depends_on_the_kind_and_the_items() {
    let items = vec![json!({"uri": "a"})];
    let a = MergedList::new("resources", items.clone(), &[], Vec::new());
    let b = MergedList::new("resourceTemplates", items, &[], Vec::new());
    let c = MergedList::new("resources", vec![json!({"uri": "b"})], &[], Vec::new());
    assert_ne!(a.version, b.version);
    assert_ne!(a.version, c.version);
    assert_eq!(a.version, version_of("resources", &a));
}

// ---- properties ----

fn key() -> impl Strategy<Value = String> {
    // a small alphabet so shared keys (namespacing) are common; never NAMESPACE
    "[ab:/{}]{0,4}"
}

fn ups() -> impl Strategy<Value = Vec<String>> {
    prop::sample::subsequence(vec!["a", "b", "c", "d"], 1..=4)
        .prop_map(|v| v.into_iter().map(str::to_owned).collect())
}

/// Contributions in config order, some items without the key.
fn contributions(field: &'static str) -> impl Strategy<Value = Fanned> {
    ups().prop_flat_map(move |ids| {
        let n = ids.len();
        (
            Just(ids),
            prop::collection::vec(
                prop::collection::vec((prop::option::weighted(0.9, key()), any::<u8>()), 0..10),
                n,
            ),
        )
            .prop_map(move |(ids, lists)| {
                fanned(
                    ids.iter()
                        .zip(lists)
                        .map(|(id, items)| {
                            let items = items
                                .into_iter()
                                .map(|(k, tag)| match k {
                                    Some(k) => json!({ field: k, "tag": tag }),
                                    None => json!({ "tag": tag }),
                                })
                                .collect();
                            contribution(id, items)
                        })
                        .collect(),
                )
            })
    })
}

proptest! {
    #[test]
    fn keyed_merge_has_no_duplicates_and_namespaced_keys_split_back(f in contributions("uri")) {
        let route: Vec<String> = f.contributions.iter().map(|c| c.upstream.clone()).collect();
        let (items, owners) = merge_keyed(&f, "uri", "resource");
        prop_assert_eq!(items.len(), owners.len());
        let mut seen = HashSet::new();
        let mut first_owner: HashMap<String, String> = HashMap::new();
        for (item, (listed, owner)) in items.iter().zip(&owners) {
            prop_assert_eq!(item["uri"].as_str(), Some(listed.as_str()));
            prop_assert!(seen.insert(listed.clone()), "duplicate {}", listed);
            match split_namespaced(listed, &route) {
                Some((u, own)) => {
                    // namespaced: its upstream and own URI, which an earlier one listed
                    prop_assert_eq!(u, owner.as_str());
                    prop_assert_eq!(first_owner.get(own).map(|o| o != owner), Some(true));
                }
                None => {
                    prop_assert!(first_owner.insert(listed.clone(), owner.clone()).is_none());
                }
            }
        }
        // every upstream's distinct keys are all listed, in config order then bytewise
        let mut expect = Vec::new();
        for c in &f.contributions {
            let mut keys: Vec<&str> = c.items.iter().filter_map(|i| i["uri"].as_str()).collect();
            keys.sort_unstable();
            keys.dedup();
            expect.extend(keys.into_iter().map(|k| (c.upstream.clone(), k.to_owned())));
        }
        let got: Vec<(String, String)> = owners.iter().map(|(listed, owner)| {
            let own = split_namespaced(listed, &route).map_or(listed.as_str(), |(_, own)| own);
            (owner.clone(), own.to_owned())
        }).collect();
        prop_assert_eq!(got, expect);
    }

    #[test]
    fn keyed_merge_is_stable(f in contributions("uriTemplate")) {
        let (a, ao) = merge_keyed(&f, "uriTemplate", "resource template");
        let (b, bo) = merge_keyed(&f.clone(), "uriTemplate", "resource template");
        prop_assert_eq!(&ao, &bo);
        let a = MergedList::new("resourceTemplates", a, &f.contributions, Vec::new());
        let b = MergedList::new("resourceTemplates", b, &f.contributions, Vec::new());
        prop_assert_eq!(bytes(&a), bytes(&b));
        prop_assert_eq!(a.version, b.version);
    }

    #[test]
    fn prompt_merge_has_no_duplicates_and_names_resolve_back(
        f in contributions("name"), prefix in any::<bool>(), sep in "__|\\.|-"
    ) {
        let naming = NamingRules { separator: sep, prefix, max_name_length: None };
        let route: Vec<String> = f.contributions.iter().map(|c| c.upstream.clone()).collect();
        let m = merge_prompts(f.clone(), &naming, &Overrides::default());
        let again = merge_prompts(f.clone(), &naming, &Overrides::default());
        prop_assert_eq!(bytes(&m), bytes(&again));
        prop_assert_eq!(m.version, again.version);
        prop_assert_eq!(m.version, version_of("prompts", &m));
        let mut seen = HashSet::new();
        let mut expect = Vec::new();
        for c in &f.contributions {
            let mut names: Vec<&str> = c.items.iter().filter_map(|i| i["name"].as_str()).collect();
            names.sort_unstable();
            for n in names {
                let exposed = naming.full_name(&c.upstream, n);
                if !seen.insert(exposed.clone()) {
                    continue;
                }
                expect.push(exposed.clone());
                // each kept prompt resolves back to where it came from
                let back = resolve_prompt(&naming, &route, &exposed);
                if !prefix {
                    prop_assert_eq!(back, Some((route[0].clone(), n.to_owned())));
                } else if !n.is_empty() && !c.upstream.contains(naming.separator.as_str()) {
                    prop_assert_eq!(back, Some((c.upstream.clone(), n.to_owned())));
                }
            }
        }
        // exactly the first of each exposed name is kept, in that order
        let names: Vec<String> = m.items.iter().map(|i| {
            let v: Value = serde_json::from_str(i.get()).unwrap();
            v["name"].as_str().unwrap().to_owned()
        }).collect();
        prop_assert_eq!(names.iter().collect::<HashSet<_>>().len(), names.len());
        prop_assert_eq!(names, expect);
    }

    #[test]
    fn namespaced_uris_split_back(upstream in "[a-z0-9_-]{1,8}", uri in ".{0,20}") {
        let route = vec!["other".to_owned(), upstream.clone()];
        let ns = namespaced(&upstream, &uri);
        prop_assert!(ns.starts_with(NAMESPACE));
        prop_assert_eq!(split_namespaced(&ns, &route), Some((upstream.as_str(), uri.as_str())));
        // not an upstream of the route: not Junction's
        prop_assert_eq!(split_namespaced(&ns, &route[..1]), None);
    }
}

// ---- the list cache ----

fn items(upstream: &str, ttl_ms: u64) -> Listed {
    Listed::Items(Contribution {
        ttl_ms,
        ..contribution(upstream, vec![prompt("p")])
    })
}

fn ttl_of(l: &Listed) -> Option<u64> {
    match l {
        Listed::Items(c) => Some(c.ttl_ms),
        Listed::Unsupported => None,
    }
}

const DEFAULT_TTL: Duration = Duration::from_secs(30);

#[test]
fn the_tables_can_be_shared_across_threads() {
    fn shared<T: Send + Sync>() {}
    shared::<ListCache>();
    shared::<ResourceIndex>();
}

#[tokio::test(start_paused = true)]
async fn a_list_is_fresh_for_its_ttl_then_served_stale() {
    let cache = ListCache::new();
    assert!(cache.is_empty());
    assert_eq!(cache.get("a", "fp", "prompts/list"), None);
    cache.put("a", "fp", "prompts/list", &items("a", 1_000), DEFAULT_TTL);
    let (l, fresh) = cache.get("a", "fp", "prompts/list").unwrap();
    assert!(fresh);
    assert_eq!(ttl_of(&l), Some(1_000));

    tokio::time::advance(Duration::from_millis(400)).await;
    let (l, fresh) = cache.get("a", "fp", "prompts/list").unwrap();
    assert!(fresh);
    assert_eq!(ttl_of(&l), Some(600), "what is left of its lifetime");

    tokio::time::advance(Duration::from_millis(600)).await;
    let (l, fresh) = cache.get("a", "fp", "prompts/list").unwrap();
    assert!(!fresh);
    assert_eq!(ttl_of(&l), Some(0), "the last good list, out of date");
    assert_eq!(
        l,
        Listed::Items(Contribution {
            ttl_ms: 0,
            ..contribution("a", vec![prompt("p")])
        })
    );

    // another fingerprint or method is another list
    assert_eq!(cache.get("a", "fp2", "prompts/list"), None);
    assert_eq!(cache.get("a", "fp", "resources/list"), None);
    assert_eq!(cache.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn unsupported_is_cached_for_the_default_ttl() {
    let cache = ListCache::new();
    cache.put(
        "a",
        "fp",
        "resources/list",
        &Listed::Unsupported,
        DEFAULT_TTL,
    );
    assert_eq!(
        cache.get("a", "fp", "resources/list"),
        Some((Listed::Unsupported, true))
    );
    tokio::time::advance(DEFAULT_TTL).await;
    assert_eq!(
        cache.get("a", "fp", "resources/list"),
        Some((Listed::Unsupported, false))
    );
}

#[tokio::test(start_paused = true)]
async fn a_zero_ttl_list_is_stale_at_once() {
    let cache = ListCache::new();
    cache.put("a", "fp", "prompts/list", &items("a", 0), DEFAULT_TTL);
    let (l, fresh) = cache.get("a", "fp", "prompts/list").unwrap();
    assert!(!fresh);
    assert_eq!(ttl_of(&l), Some(0));
}

#[tokio::test(start_paused = true)]
async fn invalidate_marks_only_the_named_lists_stale_and_keeps_them() {
    let cache = ListCache::new();
    for m in ["prompts/list", "resources/list", "resources/templates/list"] {
        cache.put("a", "fp", m, &items("a", 60_000), DEFAULT_TTL);
        cache.put("b", "fp", m, &items("b", 60_000), DEFAULT_TTL);
    }
    cache.invalidate("a", &["resources/list", "resources/templates/list"]);
    let fresh = |u: &str, m: &str| cache.get(u, "fp", m).map(|(_, f)| f);
    assert_eq!(fresh("a", "prompts/list"), Some(true));
    assert_eq!(fresh("a", "resources/list"), Some(false));
    assert_eq!(fresh("a", "resources/templates/list"), Some(false));
    assert_eq!(fresh("b", "resources/list"), Some(true));
    assert_eq!(cache.len(), 6);
    // a new fetch makes it fresh again
    cache.put("a", "fp", "resources/list", &items("a", 10), DEFAULT_TTL);
    assert_eq!(fresh("a", "resources/list"), Some(true));
}

#[tokio::test(start_paused = true)]
async fn retain_drops_lists_of_removed_or_changed_upstreams() {
    let cache = ListCache::new();
    cache.put("a", "fp1", "prompts/list", &items("a", 1_000), DEFAULT_TTL);
    cache.put(
        "a",
        "fp1",
        "resources/list",
        &items("a", 1_000),
        DEFAULT_TTL,
    );
    cache.put("b", "fp1", "prompts/list", &items("b", 1_000), DEFAULT_TTL);
    cache.put(
        "c",
        "fp1",
        "prompts/list",
        &Listed::Unsupported,
        DEFAULT_TTL,
    );
    // after a reload: a unchanged, b changed, c gone
    let now: HashMap<&str, &str> = [("a", "fp1"), ("b", "fp2")].into_iter().collect();
    cache.retain(|id, fp| now.get(id).is_some_and(|f| *f == fp));
    assert_eq!(cache.len(), 2);
    assert!(cache.get("a", "fp1", "prompts/list").is_some());
    assert!(cache.get("a", "fp1", "resources/list").is_some());
    assert_eq!(cache.get("b", "fp1", "prompts/list"), None);
    assert_eq!(cache.get("c", "fp1", "prompts/list"), None);
}

// ---- the resource index ----

#[tokio::test(start_paused = true)]
async fn the_uri_memo_knows_its_uris_for_the_ttl() {
    let ix = ResourceIndex::new();
    let route = ids(&["a", "b"]);
    assert_eq!(ix.lookup_uri("/mcp", &route, "file:///x"), Lookup::Stale);
    let owners: HashMap<String, String> = [
        ("file:///x".to_owned(), "a".to_owned()),
        (namespaced("b", "file:///x"), "b".to_owned()),
    ]
    .into_iter()
    .collect();
    ix.set_uris("/mcp", &route, owners, 1_000);
    assert_eq!(
        ix.lookup_uri("/mcp", &route, "file:///x"),
        Lookup::Found("a".into())
    );
    assert_eq!(ix.lookup_uri("/mcp", &route, "file:///y"), Lookup::Unknown);
    // templates have their own expiry: not set yet
    assert_eq!(
        ix.lookup_template("/mcp", &route, "file:///y"),
        Lookup::Stale
    );
    // another route knows nothing
    assert_eq!(ix.lookup_uri("/other", &route, "file:///x"), Lookup::Stale);
    tokio::time::advance(Duration::from_millis(1_000)).await;
    assert_eq!(ix.lookup_uri("/mcp", &route, "file:///x"), Lookup::Stale);
    assert_eq!(ix.len(), 2);
}

#[tokio::test(start_paused = true)]
async fn the_template_memo_picks_the_most_specific_prefix() {
    let ix = ResourceIndex::new();
    let route = ids(&["a", "b"]);
    let p = |a: &str, u: &str| (a.to_owned(), u.to_owned());
    ix.set_templates(
        "/mcp",
        &route,
        vec![p("mock://", "a"), p("mock://items/", "b")],
        1_000,
    );
    assert_eq!(
        ix.lookup_template("/mcp", &route, "mock://items/1"),
        Lookup::Found("b".into())
    );
    assert_eq!(
        ix.lookup_template("/mcp", &route, "mock://other"),
        Lookup::Found("a".into())
    );
    assert_eq!(
        ix.lookup_template("/mcp", &route, "file:///"),
        Lookup::Unknown
    );
    assert_eq!(ix.lookup_uri("/mcp", &route, "mock://other"), Lookup::Stale);
    tokio::time::advance(Duration::from_millis(1_001)).await;
    assert_eq!(
        ix.lookup_template("/mcp", &route, "mock://items/1"),
        Lookup::Stale
    );
}

#[tokio::test(start_paused = true)]
async fn the_memo_resets_when_the_route_upstreams_change() {
    let ix = ResourceIndex::new();
    let before = ids(&["a", "b"]);
    let after = ids(&["a", "c"]);
    let owners: HashMap<String, String> = [("u".to_owned(), "b".to_owned())].into_iter().collect();
    ix.set_uris("/mcp", &before, owners.clone(), 60_000);
    ix.set_templates("/mcp", &before, vec![("u".into(), "b".into())], 60_000);
    assert_eq!(
        ix.lookup_uri("/mcp", &before, "u"),
        Lookup::Found("b".into())
    );
    assert_eq!(ix.lookup_uri("/mcp", &after, "u"), Lookup::Stale);
    assert_eq!(ix.lookup_template("/mcp", &after, "u"), Lookup::Stale);
    // and the old upstream set does not come back with it
    assert_eq!(ix.lookup_uri("/mcp", &before, "u"), Lookup::Stale);
    ix.set_uris("/mcp", &before, owners, 60_000);
    ix.retain(|route| route != "/mcp");
    assert!(ix.is_empty());
}

#[test]
fn a_filtered_list_keeps_order_and_gets_its_own_version() {
    let f = fanned(vec![contribution(
        "a",
        vec![prompt("one"), prompt("two"), prompt("three")],
    )]);
    let all = merge_prompts(f, &NamingRules::default(), &Overrides::default());
    let some = all.filtered("prompts", |raw| !raw.get().contains("\"a__two\""));
    let kept: Vec<&str> = all
        .items
        .iter()
        .map(|i| i.get())
        .filter(|i| !i.contains("\"a__two\""))
        .collect();
    assert_eq!(bytes(&some), format!("[{}]", kept.join(",")));
    assert_eq!(some.items.len(), 2);
    assert_eq!(some.version, version_of("prompts", &some));
    assert_ne!(
        some.version, all.version,
        "a cursor of one never pages the other"
    );
    assert!(!some.public, "it depends on who asks");
    let same = all.filtered("prompts", |_| true);
    assert_eq!(same.version, all.version);
}
