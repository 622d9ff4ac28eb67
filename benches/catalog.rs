//! Micro-benches of the catalog: merging 100 upstreams × 50 tools, resolving a
//! name in the resulting 5,000-tool catalog, and sealed list cursors.
//! `baseline/*` entries are measured in the same run for the ratios in
//! BENCHMARKS.md.

use std::collections::HashMap;
use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion};
use junction_catalog::{cursor, merge, ListStatus, NamingRules, ToolFilter, UpstreamTools};
use junction_protocol::seal::Sealer;
use serde_json::json;

#[path = "common/mod.rs"]
mod common;

const UPSTREAMS: usize = 100;
const TOOLS: usize = 50;

fn lists() -> (Vec<String>, Vec<UpstreamTools>) {
    let order: Vec<String> = (0..UPSTREAMS).map(|u| format!("upstream{u}")).collect();
    let lists = order
        .iter()
        .enumerate()
        .map(|(u, id)| UpstreamTools {
            upstream: id.clone(),
            tools: Arc::new(
                (0..TOOLS)
                    .map(|t| {
                        json!({
                            "name": format!("tool_{t}"),
                            "description": format!("Tool {t} of upstream {u}: does one thing well."),
                            "inputSchema": {"type": "object",
                                "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
                                "required": ["query"]},
                        })
                    })
                    .collect(),
            ),
            ttl_ms: Some(60_000),
            public: true,
            status: ListStatus::Fresh,
            generation: 1,
        })
        .collect();
    (order, lists)
}

fn benches(c: &mut Criterion) {
    let (order, lists) = lists();
    let naming = NamingRules::default();
    let filter = ToolFilter::default();
    let mut g = c.benchmark_group("catalog");

    let all: Vec<&serde_json::Value> = lists.iter().flat_map(|l| l.tools.iter()).collect();
    g.bench_function("baseline/serialize_5000_tools", |b| {
        b.iter(|| serde_json::to_vec(black_box(&all)))
    });
    g.bench_function("merge_100x50", |b| {
        b.iter(|| merge(black_box(&order), black_box(&lists), &naming, &filter))
    });

    let catalog = merge(&order, &lists, &naming, &filter);
    let names: Vec<String> = catalog.tools.iter().map(|t| t.exposed.clone()).collect();
    let plain: HashMap<String, usize> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.clone(), i))
        .collect();
    let mut i = 0usize;
    g.bench_function("baseline/hashmap_get_5000", |b| {
        b.iter(|| {
            i = (i + 7919) % names.len().max(1);
            plain.get(black_box(names[i].as_str())).copied()
        })
    });
    let mut j = 0usize;
    g.bench_function("resolve_5000", |b| {
        b.iter(|| {
            j = (j + 7919) % names.len().max(1);
            catalog.resolve(black_box(names[j].as_str())).is_some()
        })
    });
    g.bench_function("resolve_5000_miss", |b| {
        b.iter(|| {
            catalog
                .resolve(black_box("upstream7__no_such_tool"))
                .is_some()
        })
    });

    let sealer = Sealer::new(b"0123456789abcdef0123456789abcdef");
    let token = cursor::encode(&sealer, catalog.version, 200);
    g.bench_function("cursor_seal", |b| {
        b.iter(|| cursor::encode(&sealer, black_box(catalog.version), black_box(200)))
    });
    g.bench_function("cursor_open", |b| {
        b.iter(|| cursor::decode(&sealer, black_box(&token), catalog.version))
    });
    g.finish();
}

criterion_group! { name = catalog; config = common::short_runs(30); targets = benches }
criterion_main!(catalog);
