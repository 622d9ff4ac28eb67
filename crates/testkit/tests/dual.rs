use junction_testkit::{MockSpec, MockTool, MockUpstream, TestClient};
use serde_json::json;

#[tokio::test]
async fn serves_both_eras_on_one_endpoint() {
    let up = MockUpstream::start(MockSpec::dual("both", vec![MockTool::echo("hello")])).await;
    let modern = TestClient::modern(&up.url);
    let d = modern.request("server/discover", json!({})).await;
    assert_eq!(d.status, 200);
    assert!(d.result()["supportedVersions"]
        .as_array()
        .unwrap()
        .contains(&json!("2025-11-25")));
    let r = modern.call_tool("hello", json!({})).await;
    assert_eq!(r.result()["resultType"], "complete");
    assert!(r.header("mcp-session-id").is_none());

    let legacy = TestClient::legacy(&up.url, "2025-11-25");
    assert_eq!(legacy.initialize().await.status, 200);
    let r = legacy.call_tool("hello", json!({})).await;
    assert_eq!(r.result()["structuredContent"]["upstream"], "both");
    assert!(r.result().get("resultType").is_none());
}
