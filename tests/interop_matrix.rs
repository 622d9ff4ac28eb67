//! The interop matrix (issue 5, item 2): every real upstream behind ONE Junction
//! route at the same time, every real client through it.
//!
//! Upstreams: Python mcp 2.x `MCPServer` in all four of stateful/stateless x
//! SSE/JSON (both eras on one path), Python mcp 1.x `FastMCP` (handshake era only), the
//! TypeScript `server-everything` over Streamable HTTP (handshake era, sessions),
//! and a Python mcp 2.x server over stdio that Junction spawns.
//! Clients: Python 2.x in `auto`, `2026-07-28` and `legacy` modes, Python 1.x,
//! the inspector CLI in legacy and modern era, the TypeScript SDK client.
//!
//! Each client must list the same merged catalog (every upstream present, modern
//! clients included: the handshake-era upstreams must not vanish) and call one
//! tool on every upstream with the right result. All pairs are run, then one
//! table of pair → result is printed and the test fails if any pair failed.
//! With `JUNCTION_INTEROP_RESULTS` set, each pair is recorded for RESULTS.md.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use junction_testkit::peers::{self, Peer};
use junction_testkit::{spawn_gateway, Gateway};
use serde_json::{json, Value};
use tokio::process::Command;

/// One upstream of the route: its id, what it is, and the call that proves it works.
struct Upstream {
    id: &'static str,
    peer: String,
    era: &'static str,
    tool: &'static str,
    args: Value,
    expect: &'static str,
    /// Tools that must appear in the catalog under this upstream's prefix.
    listed: &'static [&'static str],
}

fn upstreams() -> Vec<Upstream> {
    let py2 = peers::pip_version("py-mcp2");
    let py1 = peers::pip_version("py-mcp1");
    let ev = peers::npm_version("@modelcontextprotocol/server-everything");
    vec![
        Upstream {
            id: "m2-sf-sse",
            peer: format!("Python mcp {py2} MCPServer"),
            era: "stateful, SSE (2026-07-28 + handshake)",
            tool: "py_add",
            args: json!({"a": 2, "b": 3}),
            expect: "5",
            listed: &["py_add", "py_echo", "py_lookup", "py_confirm", "py_slow"],
        },
        Upstream {
            id: "m2-sl-json",
            peer: format!("Python mcp {py2} MCPServer"),
            era: "stateless, JSON (2026-07-28 + handshake)",
            tool: "py_lookup",
            args: json!({"region": "eu-1", "q": "x"}),
            expect: "eu-1:x",
            listed: &["py_add", "py_echo", "py_lookup"],
        },
        Upstream {
            id: "m2-sl-sse",
            peer: format!("Python mcp {py2} MCPServer"),
            era: "stateless, SSE (2026-07-28 + handshake)",
            tool: "py_echo",
            args: json!({"text": "stateless sse"}),
            expect: "stateless sse",
            listed: &["py_add", "py_echo"],
        },
        Upstream {
            id: "m2-sf-json",
            peer: format!("Python mcp {py2} MCPServer"),
            era: "stateful, JSON (2026-07-28 + handshake)",
            tool: "py_add",
            args: json!({"a": 7, "b": 8}),
            expect: "15",
            listed: &["py_add", "py_echo"],
        },
        Upstream {
            id: "m1",
            peer: format!("Python mcp {py1} FastMCP"),
            era: "stateful, SSE (handshake only)",
            tool: "legacy_greet",
            args: json!({"name": "Ada"}),
            expect: "Hello, Ada!",
            listed: &["legacy_greet", "legacy_count"],
        },
        Upstream {
            id: "ev",
            peer: format!("server-everything {ev}"),
            era: "Streamable HTTP, sessions (handshake only)",
            tool: "get-sum",
            args: json!({"a": 20, "b": 22}),
            expect: "The sum of 20 and 22 is 42.",
            listed: &["echo", "get-sum", "trigger-long-running-operation"],
        },
        Upstream {
            id: "stdio",
            peer: format!("Python mcp {py2} MCPServer"),
            era: "stdio (spawned by Junction)",
            tool: "py_echo",
            args: json!({"text": "über stdio"}),
            expect: "über stdio",
            listed: &["py_add", "py_echo"],
        },
    ]
}

/// A client of the matrix: a name, its version and era, and how to run it.
#[derive(Clone, Copy)]
enum Client {
    Py2(&'static str),
    Py1,
    Inspector(&'static str),
    TypeScript,
}

impl Client {
    fn all() -> [Client; 7] {
        [
            Client::Py2("auto"),
            Client::Py2("2026-07-28"),
            Client::Py2("legacy"),
            Client::Py1,
            Client::Inspector("legacy"),
            Client::Inspector("modern"),
            Client::TypeScript,
        ]
    }

    /// The protocol version (prefix) the client must end up speaking with
    /// Junction; None where the client does not report it.
    fn expected_protocol(self) -> Option<&'static str> {
        match self {
            Client::Py2("legacy") | Client::Py1 | Client::TypeScript => Some("2025-"),
            Client::Py2(_) => Some("2026-07-28"),
            Client::Inspector(_) => None,
        }
    }

    fn name(self) -> String {
        match self {
            Client::Py2(mode) => format!(
                "Python mcp {} Client mode={mode}",
                peers::pip_version("py-mcp2")
            ),
            Client::Py1 => format!("Python mcp {} ClientSession", peers::pip_version("py-mcp1")),
            Client::Inspector(era) => format!(
                "inspector CLI {} --protocol-era {era}",
                peers::npm_version("@modelcontextprotocol/inspector")
            ),
            Client::TypeScript => format!(
                "TypeScript SDK {} Client",
                peers::npm_version("@modelcontextprotocol/sdk")
            ),
        }
    }
}

/// What a client saw: the catalog and, per upstream id, the call's text result
/// (or why the call failed).
struct Seen {
    tools: Vec<String>,
    protocol: String,
    results: Vec<Result<String, String>>,
}

async fn output(mut cmd: Command, what: &str) -> Result<Value, String> {
    cmd.kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(180), cmd.output())
        .await
        .map_err(|_| format!("{what} did not finish within 180 s"))?
        .map_err(|e| format!("{what} did not start: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let tail: String = stderr
            .lines()
            .rev()
            .take(12)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("\n");
        return Err(format!("{what} failed ({}): {tail}\n{stdout}", out.status));
    }
    serde_json::from_str(stdout.trim())
        .map_err(|e| format!("{what}: output is not one JSON value ({e}): {stdout:?}"))
}

fn names(list: &Value) -> Vec<String> {
    list.as_array()
        .map(|a| {
            a.iter()
                .map(|t| {
                    t.as_str()
                        .or_else(|| t["name"].as_str())
                        .unwrap_or_default()
                        .to_owned()
                })
                .collect()
        })
        .unwrap_or_default()
}

fn text(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Runs a script client (client.py, client_v1.py, client.mjs): one process lists
/// and makes every call.
async fn script_client(client: Client, url: &str, ups: &[Upstream]) -> Result<Seen, String> {
    let mut cmd = match client {
        Client::Py2(mode) => {
            let mut c = Command::new(peers::python("py-mcp2"));
            c.arg(peers::interop().join("python/client.py")).args([
                "--url",
                url,
                "--mode",
                mode,
                "--allow-errors",
            ]);
            c
        }
        Client::Py1 => {
            let mut c = Command::new(peers::python("py-mcp1"));
            c.arg(peers::interop().join("python/client_v1.py"))
                .args(["--url", url]);
            c
        }
        Client::TypeScript => {
            let mut c = peers::node_cmd();
            c.arg(peers::interop().join("node/client.mjs"))
                .args(["--url", url, "--allow-errors"])
                .env("JUNCTION_NODE_PEERS", peers::node_dir());
            c
        }
        Client::Inspector(_) => unreachable!("the inspector runs one process per method"),
    };
    for u in ups {
        cmd.args(["--call", &format!("{}__{}", u.id, u.tool)])
            .args(["--args", &u.args.to_string()]);
    }
    let report = output(cmd, &client.name()).await?;
    let calls = report["calls"].as_array().cloned().unwrap_or_default();
    let results = (0..ups.len())
        .map(|i| match calls.get(i) {
            None => Err("no call record".to_owned()),
            Some(c) if c.get("error").is_some_and(|e| !e.is_null()) => {
                Err(format!("error {}", c["error"]))
            }
            Some(c) => Ok(text(&c["result"])),
        })
        .collect();
    Ok(Seen {
        tools: names(&report["tools"]),
        protocol: report["protocolVersion"].as_str().unwrap_or("?").to_owned(),
        results,
    })
}

/// The inspector CLI, `--format json -q`: `{"result": …}` or `{"error": …}`.
async fn inspector(era: &str, url: &str, args: &[&str]) -> Result<Value, String> {
    // Its catalog and client config default to ~/.mcp-inspector: a scratch HOME.
    let home = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut cmd = peers::node_cmd();
    cmd.arg(
        peers::node_dir()
            .join("node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js"),
    )
    .args([
        "--cli",
        url,
        "--protocol-era",
        era,
        "--format",
        "json",
        "-q",
    ])
    .args(args)
    .env("HOME", home.path())
    .env("MCP_CATALOG_PATH", home.path().join("mcp.json"))
    .env("MCP_CLIENT_CONFIG_PATH", home.path().join("client.json"));
    let v = output(cmd, &format!("inspector ({era}) {args:?}")).await?;
    match v.get("error") {
        Some(e) if !e.is_null() => Err(format!("error {e}")),
        _ => Ok(v["result"].clone()),
    }
}

async fn inspector_client(era: &'static str, url: &str, ups: &[Upstream]) -> Result<Seen, String> {
    let list = inspector(era, url, &["--method", "tools/list"]).await?;
    let mut results = Vec::new();
    for u in ups {
        let name = format!("{}__{}", u.id, u.tool);
        let args = u.args.to_string();
        let r = inspector(
            era,
            url,
            &[
                "--method",
                "tools/call",
                "--tool-name",
                &name,
                "--tool-args-json",
                &args,
            ],
        )
        .await
        .map(|res| text(&res));
        results.push(r);
    }
    Ok(Seen {
        tools: names(&list["tools"]),
        protocol: era.to_owned(),
        results,
    })
}

async fn run_client(client: Client, url: &str, ups: &[Upstream]) -> Result<Seen, String> {
    match client {
        Client::Inspector(era) => inspector_client(era, url, ups).await,
        other => script_client(other, url, ups).await,
    }
}

/// The expected catalog: every listed tool of every upstream is present, all
/// names carry a prefix of the route, upstreams come in config order. Each
/// problem names the upstream it belongs to (None: the whole catalog).
fn catalog_problems(tools: &[String], ups: &[Upstream]) -> Vec<(Option<&'static str>, String)> {
    let mut problems = Vec::new();
    for u in ups {
        for t in u.listed {
            let name = format!("{}__{t}", u.id);
            if !tools.contains(&name) {
                problems.push((Some(u.id), format!("{name} missing from tools/list")));
            }
        }
    }
    let order: Vec<usize> = tools
        .iter()
        .filter_map(|t| {
            ups.iter()
                .position(|u| t.starts_with(&format!("{}__", u.id)))
        })
        .collect();
    if order.len() != tools.len() {
        problems.push((None, "a name without an upstream prefix".to_owned()));
    }
    if order.windows(2).any(|w| w[0] > w[1]) {
        problems.push((None, "upstreams not in config order".to_owned()));
    }
    problems
}

async fn start_upstreams(ups: &[Upstream]) -> (Vec<Peer>, String) {
    let (sf_sse, sl_json, sl_sse, sf_json, m1, ev) = tokio::join!(
        peers::python_server("py-mcp2", "server_modern.py", &["--stateful", "--sse"]),
        peers::python_server("py-mcp2", "server_modern.py", &["--stateless", "--json"]),
        peers::python_server("py-mcp2", "server_modern.py", &["--stateless", "--sse"]),
        peers::python_server("py-mcp2", "server_modern.py", &["--stateful", "--json"]),
        peers::python_server("py-mcp1", "server_legacy.py", &["--stateful", "--sse"]),
        peers::server_everything(),
    );
    let stdio = json!([
        peers::python("py-mcp2").display().to_string(),
        peers::interop()
            .join("python/server_modern.py")
            .display()
            .to_string(),
        "0",
        "--stdio"
    ]);
    // HTTP upstreams in the order of `upstreams()`, then the stdio one.
    let running = vec![sf_sse, sl_json, sl_sse, sf_json, m1, ev];
    let mut yaml = String::from("server: {listen: 127.0.0.1:0}\nupstreams:\n");
    for (u, peer) in ups.iter().zip(&running) {
        yaml += &format!("  - {{id: {}, url: {}}}\n", u.id, peer.url);
    }
    let last = ups.last().expect("the stdio upstream is last");
    yaml += &format!("  - {{id: {}, command: {stdio}}}\n", last.id);
    (running, yaml)
}

#[tokio::test]
async fn every_client_sees_and_calls_every_upstream_through_one_route() {
    let ups = upstreams();
    let (peers_running, yaml) = start_upstreams(&ups).await;
    let gw: Gateway = spawn_gateway(Path::new(env!("CARGO_BIN_EXE_junction")), &yaml).await;
    let url = gw.url("/mcp");

    // Clients run two at a time (2 cores); each is a separate process.
    let clients = Client::all();
    let mut seen = Vec::new();
    for pair in clients.chunks(2) {
        let runs = pair.iter().map(|c| run_client(*c, &url, &ups));
        seen.extend(futures_util::future::join_all(runs).await);
    }

    let mut table = vec![format!(
        "{:<48} {:<10} {:<7} {}",
        "client", "upstream", "result", "detail"
    )];
    let mut failures = 0;
    let mut reference: Option<Vec<String>> = None;
    for (client, outcome) in clients.iter().zip(&seen) {
        let cname = client.name();
        let seen = match outcome {
            Ok(s) => s,
            Err(why) => {
                failures += ups.len();
                for u in &ups {
                    table.push(format!("{cname:<48} {:<10} FAIL    {why}", u.id));
                    record_pair(&cname, "?", u, false, why);
                }
                continue;
            }
        };
        let mut catalog = catalog_problems(&seen.tools, &ups);
        if let Some(want) = client.expected_protocol() {
            if !seen.protocol.starts_with(want) {
                catalog.push((
                    None,
                    format!(
                        "negotiated {:?}, want {want}… (the era under test)",
                        seen.protocol
                    ),
                ));
            }
        }
        match &reference {
            None => reference = Some(seen.tools.clone()),
            Some(first) if *first != seen.tools => catalog.push((
                None,
                format!("catalog differs from the first client's: {:?}", seen.tools),
            )),
            Some(_) => {}
        }
        for (u, r) in ups.iter().zip(&seen.results) {
            let mut why: Vec<String> = catalog
                .iter()
                .filter(|(owner, _)| owner.is_none_or(|id| id == u.id))
                .map(|(_, p)| p.clone())
                .collect();
            match r {
                Ok(t) if t == u.expect => {}
                Ok(t) => why.push(format!(
                    "{}__{} gave {t:?}, want {:?}",
                    u.id, u.tool, u.expect
                )),
                Err(e) => why.push(format!("{}__{}: {e}", u.id, u.tool)),
            }
            let ok = why.is_empty();
            failures += usize::from(!ok);
            let detail = if ok {
                format!("listed, {}__{} = {:?}", u.id, u.tool, u.expect)
            } else {
                why.join("; ")
            };
            table.push(format!(
                "{cname:<48} {:<10} {:<7} {detail}",
                u.id,
                if ok { "ok" } else { "FAIL" }
            ));
            record_pair(&cname, &seen.protocol, u, ok, &detail);
        }
    }
    let table = table.join("\n");
    println!("{table}");
    drop(peers_running);
    assert!(
        failures == 0,
        "{failures} client × upstream pairs failed:\n{table}\n--- gateway stderr ---\n{}",
        gw.stderr()
    );
}

fn record_pair(client: &str, protocol: &str, u: &Upstream, ok: bool, detail: &str) {
    peers::record(
        "matrix.jsonl",
        &json!({"client": client, "client_protocol": protocol, "upstream": u.id,
                "upstream_peer": u.peer, "upstream_era": u.era,
                "result": if ok { "pass" } else { "fail" }, "detail": detail}),
    );
}
