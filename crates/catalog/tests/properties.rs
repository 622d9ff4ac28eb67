//! Properties of the merge that must hold for any upstream lists.

#![allow(clippy::unwrap_used)] // test helpers: a panic is the failure report

use std::collections::HashSet;
use std::sync::Arc;

use junction_catalog::{merge, DropKind, ListStatus, NamingRules, ToolFilter, UpstreamTools};
use proptest::prelude::*;
use serde_json::{json, Value};

fn tool(name: &str, desc: u8) -> Value {
    json!({"name": name, "description": desc, "inputSchema": {"type": "object"}})
}

fn name() -> impl Strategy<Value = String> {
    // a small alphabet so duplicates and near-collisions are common
    "[ab._-]{1,6}|[a-zA-Z0-9 ]{0,4}"
}

fn upstreams() -> impl Strategy<Value = Vec<UpstreamTools>> {
    let ids = prop::sample::subsequence(vec!["a", "b", "c", "d"], 1..=4);
    ids.prop_flat_map(|ids| {
        let n = ids.len();
        (
            Just(ids),
            prop::collection::vec(prop::collection::vec((name(), any::<u8>()), 0..12), n),
            prop::collection::vec(0u8..3, n),
        )
    })
    .prop_map(|(ids, tools, statuses)| {
        ids.iter()
            .zip(tools)
            .zip(statuses)
            .map(|((id, tools), st)| UpstreamTools {
                upstream: id.to_string(),
                tools: Arc::new(tools.iter().map(|(n, d)| tool(n, *d)).collect()),
                ttl_ms: Some(1000),
                public: true,
                status: [ListStatus::Fresh, ListStatus::Stale, ListStatus::Missing][st as usize],
                generation: 1,
            })
            .collect()
    })
}

fn order() -> Vec<String> {
    ["a", "b", "c", "d"].iter().map(|s| s.to_string()).collect()
}

proptest! {
    #[test]
    fn no_duplicate_exposed_names_and_every_name_maps_back(
        lists in upstreams(), prefix in any::<bool>(), max in prop::option::of(4usize..40)
    ) {
        let naming = NamingRules { separator: "__".into(), prefix, max_name_length: max };
        let c = merge(&order(), &lists, &naming, &ToolFilter::default());
        let mut seen = HashSet::new();
        for t in &c.tools {
            prop_assert!(seen.insert(t.exposed.clone()), "duplicate {}", t.exposed);
            prop_assert!(junction_protocol::names::is_valid_tool_name(&t.exposed));
            prop_assert!(t.exposed.len() <= naming.limit());
            let back = c.resolve(&t.exposed).unwrap();
            prop_assert_eq!(&back.upstream, &t.upstream);
            prop_assert_eq!(&back.original, &t.original);
            // What a call sends upstream as params.name reads back as the name.
            let sent: String = serde_json::from_str(t.original_json.get()).unwrap();
            prop_assert_eq!(&sent, &t.original);
            let def: Value = serde_json::from_str(t.definition.get()).unwrap();
            prop_assert_eq!(def["name"].as_str(), Some(t.exposed.as_str()));
            if prefix && max.is_none() {
                prop_assert_eq!(&t.exposed, &format!("{}__{}", t.upstream, t.original));
            }
        }
        // Missing upstreams contribute nothing
        for l in lists.iter().filter(|l| l.status == ListStatus::Missing) {
            prop_assert!(c.tools.iter().all(|t| t.upstream != l.upstream));
            prop_assert!(c.degraded.contains(&l.upstream));
        }
        // every valid tool of a contributing upstream is exposed or dropped with a reason
        let offered: usize = lists.iter()
            .filter(|l| l.status != ListStatus::Missing)
            .map(|l| l.tools.len()).sum();
        prop_assert_eq!(offered, c.tools.len() + c.dropped.len());
    }

    #[test]
    fn the_order_of_lists_does_not_matter(lists in upstreams(), seed in any::<u64>()) {
        let naming = NamingRules::default();
        let a = merge(&order(), &lists, &naming, &ToolFilter::default());
        let mut shuffled = lists.clone();
        // deterministic shuffle from the seed
        let n = shuffled.len();
        for i in (1..n).rev() {
            let j = (seed.wrapping_mul(i as u64 + 7) % (i as u64 + 1)) as usize;
            shuffled.swap(i, j);
        }
        let b = merge(&order(), &shuffled, &naming, &ToolFilter::default());
        prop_assert_eq!(a.list_bytes(), b.list_bytes());
        prop_assert_eq!(a.version, b.version);
        prop_assert_eq!(&a.degraded, &b.degraded);
        prop_assert_eq!(&a.dropped, &b.dropped);
    }

    #[test]
    fn shortening_keeps_long_similar_names_within_the_limit_and_unique(
        suffixes in prop::collection::hash_set("[a-z0-9_]{0,6}", 1..60),
        max in 10usize..64,
    ) {
        // the names share a long head, so only the hash suffix tells them apart
        let head = "get_customer_order_history_for_region_and_period_";
        let tools: Vec<Value> = suffixes.iter().map(|s| tool(&format!("{head}{s}"), 0)).collect();
        let lists = [UpstreamTools {
            upstream: "crm".into(), tools: Arc::new(tools), ttl_ms: None, public: true,
            status: ListStatus::Fresh, generation: 1,
        }];
        let naming = NamingRules { max_name_length: Some(max), ..NamingRules::default() };
        let c = merge(&["crm".to_string()], &lists, &naming, &ToolFilter::default());
        let mut seen = HashSet::new();
        for t in &c.tools {
            prop_assert!(t.exposed.len() <= max);
            prop_assert!(seen.insert(t.exposed.clone()));
            prop_assert_eq!(&c.resolve(&t.exposed).unwrap().original, &t.original);
        }
        // nothing lost except a reported hash collision (about 2^-32 per pair)
        prop_assert!(c.dropped.iter().all(|d| d.kind == DropKind::NameCollision));
        prop_assert_eq!(c.tools.len() + c.dropped.len(), suffixes.len());
        prop_assert!(c.dropped.len() <= 1);
    }
}
