//! `overrides` on routes and upstreams: what they take and how bad ones read.

use junction_config::*;

const UP: &str = "upstreams: [{id: a, url: 'http://127.0.0.1:1/mcp', overrides: {tools: {get: {name: fetch}}}}]\n";

#[test]
fn overrides_are_read_on_routes_and_upstreams() {
    let c = load_str(
        &format!("{UP}routes: [{{path: /mcp, overrides: {{tools: {{a__add: {{name: sum, title: Sum, description: '', hide: [debug], pin: {{units: metric, n: 2}}}}}}, prompts: {{a__greet: {{name: hello}}}}, resources: {{'file:///x': {{title: X}}}}}}}}]"),
        &[],
    )
    .expect("valid");
    let u = &c.upstreams[0].overrides;
    assert_eq!(u.tools[0].0, "get");
    assert_eq!(u.tools[0].1.name.as_deref(), Some("fetch"));
    let r = &c.routes[0].overrides;
    let (key, add) = &r.tools[0];
    assert_eq!(key, "a__add");
    assert_eq!(add.name.as_deref(), Some("sum"));
    assert_eq!(add.description.as_deref(), Some(""));
    assert_eq!(add.hide, ["debug"]);
    assert_eq!(add.pin.len(), 2);
    assert_eq!(add.path, "routes[0].overrides.tools.a__add");
    assert_eq!(r.prompts[0].1.name.as_deref(), Some("hello"));
    assert_eq!(r.resources[0].1.title.as_deref(), Some("X"));
}

#[test]
fn bad_overrides_are_refused_with_their_key_paths() {
    let e = load_str(
        &format!("{UP}routes: [{{path: /mcp, overrides: {{tools: {{x: {{name: 'bad name'}}, y: {{name: z}}, z: {{}}, w: {{hide: [p], pin: {{p: 1}}, extra: 1}}, v: {{pin: [p]}}}}, resources: {{'u://r': {{name: r}}}}, things: {{}}}}}}]"),
        &[],
    )
    .expect_err("invalid");
    let mut paths = e.paths();
    paths.sort();
    assert_eq!(
        paths,
        [
            "routes[0].overrides.resources.u://r.name",
            "routes[0].overrides.things",
            "routes[0].overrides.tools.v.pin",
            "routes[0].overrides.tools.w.extra",
            "routes[0].overrides.tools.w.pin.p",
            "routes[0].overrides.tools.x.name",
            "routes[0].overrides.tools.z",
        ],
        "{e}"
    );
    assert!(e.to_string().contains("already does"), "{e}");
}

#[test]
fn a_guardrail_is_read_and_a_bad_one_refused() {
    let c = load_str(
        &format!("{UP}routes: [{{path: /mcp, guardrail: {{url: 'https://guard.example/check', timeout: 500ms, on_error: allow, results: true}}}}]"),
        &[],
    )
    .expect("valid");
    let g = c.routes[0].guardrail.as_ref().expect("guardrail");
    assert_eq!(g.url, "https://guard.example/check");
    assert_eq!(g.timeout, std::time::Duration::from_millis(500));
    assert!(g.fail_open && g.results);
    let d = load_str(
        &format!("{UP}routes: [{{path: /mcp, guardrail: {{url: 'https://g/'}}}}]"),
        &[],
    )
    .expect("valid");
    let g = d.routes[0].guardrail.as_ref().expect("guardrail");
    assert!(
        !g.fail_open && !g.results,
        "fail closed, requests only, by default"
    );
    let e = load_str(
        &format!("{UP}routes: [{{path: /mcp, guardrail: {{url: 'ftp://g', on_error: maybe, timeout: 0s, other: 1}}}}]"),
        &[],
    )
    .expect_err("invalid");
    let mut paths = e.paths();
    paths.sort();
    assert_eq!(
        paths,
        [
            "routes[0].guardrail.on_error",
            "routes[0].guardrail.other",
            "routes[0].guardrail.timeout",
            "routes[0].guardrail.url",
        ],
        "{e}"
    );
}
