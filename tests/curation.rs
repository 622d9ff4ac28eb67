//! A route curates what it exposes (`overrides`), end to end: tools of a real
//! MCP server on the official Python SDK renamed, redescribed, with a hidden
//! and a pinned input property (the pinned one also an `x-mcp-header`, so
//! the header the upstream gets carries the pinned value); prompts and
//! resources of a mock upstream renamed and retitled; `junction catalog`
//! showing the result and naming an override that matches nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use junction_testkit::peers::python_server;
use junction_testkit::{spawn_gateway, MockSpec, MockTool, MockUpstream, TestClient};
use serde_json::{json, Value};

fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_junction"))
}

fn config(sdk: &str, mock: &str, extra_override: &str) -> String {
    format!(
        r#"
server: {{listen: 127.0.0.1:0}}
upstreams:
  - id: py
    url: "{sdk}"
    overrides:
      tools:
        py_echo: {{name: say, description: "Say it back"}}
  - id: mock
    url: "{mock}"
routes:
  - path: /mcp
    overrides:
      tools:
        py__py_lookup: {{name: lookup_eu, title: "Look up (EU)", pin: {{region: eu}}}}
        py__py_add: {{hide: [b]}}{extra_override}
      prompts:
        mock__greet: {{name: hello, title: "Say hello"}}
      resources:
        "mock://mock/readme": {{title: "Read me first", description: "curated"}}
"#
    )
}

fn tool<'a>(list: &'a Value, name: &str) -> &'a Value {
    list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("{name} in {list}"))
}

#[tokio::test]
async fn overrides_rename_pin_hide_and_retitle_what_a_route_exposes() {
    let sdk = python_server("py-mcp2", "server_modern.py", &["--stateless", "--json"]).await;
    let mock = MockUpstream::start(MockSpec::modern("mock", vec![MockTool::echo("echo")])).await;
    let gw = spawn_gateway(bin(), &config(&sdk.url, &mock.url, "")).await;
    let c = TestClient::modern(&gw.url("/mcp"));

    let list = c.request("tools/list", json!({})).await;
    let list = list.result();
    let say = tool(list, "py__say");
    assert_eq!(say["description"], "Say it back", "upstream-level override");
    let lookup = tool(list, "lookup_eu");
    assert_eq!(lookup["title"], "Look up (EU)");
    assert!(
        lookup["inputSchema"]["properties"].get("region").is_none(),
        "a pinned property is not offered: {lookup}"
    );
    let add = tool(list, "py__py_add");
    assert!(add["inputSchema"]["properties"].get("b").is_none(), "{add}");
    for gone in ["py__py_echo", "py__py_lookup"] {
        assert!(
            list["tools"]
                .as_array()
                .unwrap()
                .iter()
                .all(|t| t["name"] != gone),
            "{gone} is renamed away"
        );
    }

    // Calls map back to the upstream's names; the pinned value wins, and the
    // x-mcp-header the upstream checks carries it too.
    let said = c.call_tool("py__say", json!({"text": "hi"})).await;
    assert_eq!(said.result()["content"][0]["text"], "hi", "{:?}", said.body);
    let looked = c.call_tool("lookup_eu", json!({"q": "x"})).await;
    assert_eq!(
        looked.result()["content"][0]["text"],
        "eu:x",
        "{:?}",
        looked.body
    );
    let old = c.call_tool("py__py_lookup", json!({"q": "x"})).await;
    assert_eq!(old.error_code(), Some(-32602), "the old name is unknown");

    // Prompts and resources of the mock: renamed and retitled.
    let prompts = c.request("prompts/list", json!({})).await;
    let hello = prompts.result()["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "hello")
        .cloned()
        .unwrap_or_else(|| panic!("{:?}", prompts.body));
    assert_eq!(hello["title"], "Say hello");
    let got = c
        .request(
            "prompts/get",
            json!({"name": "hello", "arguments": {"name": "Ada"}}),
        )
        .await;
    assert_eq!(
        got.result()["messages"][0]["content"]["text"],
        "Hello Ada, from mock"
    );
    let old = c
        .request(
            "prompts/get",
            json!({"name": "mock__greet", "arguments": {"name": "Ada"}}),
        )
        .await;
    assert_eq!(old.error_code(), Some(-32602));
    let resources = c.request("resources/list", json!({})).await;
    let readme = resources.result()["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["uri"] == "mock://mock/readme")
        .cloned()
        .unwrap();
    assert_eq!(readme["title"], "Read me first");
    assert_eq!(readme["description"], "curated");
}

#[tokio::test]
async fn junction_catalog_shows_the_curated_names_and_refuses_one_that_matches_nothing() {
    let sdk = python_server("py-mcp2", "server_modern.py", &["--stateless", "--json"]).await;
    let mock = MockUpstream::start(MockSpec::modern("mock", vec![MockTool::echo("echo")])).await;
    let dir = tempfile::tempdir().unwrap();
    let write = |extra: &str| {
        let path = dir.path().join("gateway.yaml");
        std::fs::write(&path, config(&sdk.url, &mock.url, extra)).unwrap();
        path
    };
    // Async, so the mock upstream on this test's runtime keeps answering.
    let run = |path: std::path::PathBuf| async move {
        tokio::process::Command::new(bin())
            .args(["catalog", "--json", "--config"])
            .arg(path)
            .output()
            .await
            .unwrap()
    };
    let ok = run(write("")).await;
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let rows: Value = serde_json::from_slice(&ok.stdout).unwrap();
    let row = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["exposed"] == "lookup_eu")
        .unwrap();
    assert_eq!(row["original"], "py_lookup");
    assert_eq!(row["upstream"], "py");

    let typo = run(write("\n        py__py_lokup: {description: typo}")).await;
    assert!(
        !typo.status.success(),
        "{}",
        String::from_utf8_lossy(&typo.stderr)
    );
    let stderr = String::from_utf8_lossy(&typo.stderr);
    assert!(
        stderr.contains("routes[0].overrides.tools.py__py_lokup"),
        "{stderr}"
    );
}

fn pinned_config(sdk: &str, pins: &Path, unpinned: &str) -> String {
    format!(
        r#"
server: {{listen: 127.0.0.1:0}}
upstreams:
  - id: py
    url: "{sdk}"
    pins: {{file: "{}", unpinned: {unpinned}}}
"#,
        pins.display()
    )
}

async fn junction(args: &[&str], config: &Path) -> std::process::Output {
    tokio::process::Command::new(bin())
        .args(args)
        .arg("--config")
        .arg(config)
        .output()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_tool_whose_definition_drifts_from_its_pin_is_quarantined() {
    let sdk = python_server("py-mcp2", "server_modern.py", &["--stateless", "--json"]).await;
    let dir = tempfile::tempdir().unwrap();
    let pins = dir.path().join("py-pins.json");
    let config = dir.path().join("gateway.yaml");
    std::fs::write(&config, pinned_config(&sdk.url, &pins, "quarantine")).unwrap();

    // The operator reviews and records the tools as they are listed now.
    let wrote = junction(&["catalog", "--write-pins"], &config).await;
    assert!(
        wrote.status.success(),
        "{}",
        String::from_utf8_lossy(&wrote.stderr)
    );
    let gw = spawn_gateway(bin(), &std::fs::read_to_string(&config).unwrap()).await;
    let c = TestClient::modern(&gw.url("/mcp"));
    assert_eq!(
        c.call_tool("py__py_echo", json!({"text": "hi"}))
            .await
            .status,
        200
    );
    drop(gw);

    // What was reviewed differs from what the upstream lists now (as after a
    // silent change upstream), and one tool was never reviewed.
    let mut file: Value = serde_json::from_slice(&std::fs::read(&pins).unwrap()).unwrap();
    file["tools"]["py_echo"]["definition"]["description"] = json!("Echo the text back.");
    file["tools"]["py_echo"]["digest"] = json!("sha256:reviewed-before-the-change");
    file["tools"].as_object_mut().unwrap().remove("py_add");
    std::fs::write(&pins, file.to_string()).unwrap();

    let diff = junction(&["catalog", "--diff"], &config).await;
    let out = String::from_utf8_lossy(&diff.stdout);
    assert!(out.contains("py/py_echo: changed"), "{out}");
    assert!(out.contains("description:"), "{out}");
    assert!(out.contains("py/py_add: new, not pinned"), "{out}");

    let gw = spawn_gateway(bin(), &std::fs::read_to_string(&config).unwrap()).await;
    let c = TestClient::modern(&gw.url("/mcp"));
    let list = c.request("tools/list", json!({})).await;
    let names: Vec<&str> = list.result()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        !names.contains(&"py__py_echo") && !names.contains(&"py__py_add"),
        "{names:?}"
    );
    assert!(names.contains(&"py__py_lookup"), "{names:?}");
    let refused = c.call_tool("py__py_echo", json!({"text": "hi"})).await;
    assert_eq!(refused.status, 403, "{:?}", refused.body);
    assert_eq!(refused.error_code(), Some(-31005));
    let message = refused.body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("quarantined") && message.contains("description"),
        "{message}"
    );
    let scrape = TestClient::modern(&gw.url("/metrics"))
        .raw("GET", vec![], vec![])
        .await;
    let scrape = String::from_utf8_lossy(&scrape.raw);
    assert_eq!(
        junction_testkit::metric(
            &scrape,
            "junction_tools_dropped_total{reason=\"quarantined\",upstream=\"py\"}"
        ),
        Some(2.0),
        "{scrape}"
    );
    assert_eq!(
        junction_testkit::metric(&scrape, "junction_tools_quarantined{upstream=\"py\"}"),
        Some(2.0),
        "{scrape}"
    );
    drop(gw);

    // `unpinned: allow` lets the unreviewed one through, not the drifted one.
    std::fs::write(&config, pinned_config(&sdk.url, &pins, "allow")).unwrap();
    let gw = spawn_gateway(bin(), &std::fs::read_to_string(&config).unwrap()).await;
    let c = TestClient::modern(&gw.url("/mcp"));
    assert_eq!(
        c.call_tool("py__py_add", json!({"a": 1, "b": 2}))
            .await
            .status,
        200
    );
    assert_eq!(
        c.call_tool("py__py_echo", json!({"text": "x"}))
            .await
            .status,
        403
    );
}
