//! What replicas share through the fleet bus (`fleet.redis_url`), seen
//! through the round-robin load balancer: a session ended by DELETE, a
//! session's log level, and a `resources/subscribe` made on one replica
//! feeding the session's GET stream on another. A change may take a moment
//! to spread (the bus is Redis pub/sub), so each test probes until every
//! replica shows it, within `SPREAD`.

use std::collections::BTreeMap;
use std::future::Future;

use junction_testkit::sse::GetStream;

use super::*;
use harness::SPREAD;

/// Sends `probe` (which answers: the replica, whether it behaved as the
/// fleet should, what it said) until every replica has behaved so, or panics
/// at SPREAD naming each replica's last answer.
async fn until_every_replica<F, Fut>(what: &str, probe: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = (String, bool, String)>,
{
    let deadline = tokio::time::Instant::now() + SPREAD;
    let mut last: BTreeMap<String, (bool, String)> = BTreeMap::new();
    loop {
        let (replica, good, said) = probe().await;
        last.insert(replica, (good, said));
        if last.len() == REPLICAS && last.values().all(|(good, _)| *good) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: not on every replica within {SPREAD:?}; last answers: {last:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn delete_ends_the_session_on_every_replica() {
    let fleet = Fleet::start(UNLIMITED).await;
    let c = fleet.legacy();
    assert_eq!(c.initialize().await.status, 200);
    assert_eq!(c.request("ping", json!({})).await.status, 200);
    let deleted = c.delete_session().await;
    assert_eq!(deleted.status, 200, "{}", deleted.text());
    let deleted_on = served_by(&deleted);
    until_every_replica(
        &format!("the session DELETEd on {deleted_on} is unknown"),
        || async {
            let r = c.request("ping", json!({})).await;
            (
                served_by(&r),
                r.status == 404,
                format!("{} {}", r.status, r.text()),
            )
        },
    )
    .await;
}

#[tokio::test]
async fn a_session_log_level_holds_on_every_replica() {
    let fleet = Fleet::start(UNLIMITED).await;
    let c = fleet.legacy();
    assert_eq!(c.initialize().await.status, 200);
    let set = c
        .request("logging/setLevel", json!({"level": "warning"}))
        .await;
    assert_eq!(set.result(), &json!({}), "{}", set.text());
    let set_on = served_by(&set);
    until_every_replica(
        &format!("the level set on {set_on} filters log messages"),
        || async {
            let r = c.call_tool("alpha__chatty", json!({})).await;
            let levels: Vec<&str> = r
                .events
                .iter()
                .filter(|m| m["method"] == "notifications/message")
                .map(|m| m["params"]["level"].as_str().unwrap_or("?"))
                .collect();
            let good = levels == ["warning", "error"];
            (served_by(&r), good, format!("levels {levels:?}"))
        },
    )
    .await;
}

#[tokio::test]
async fn a_resource_subscription_made_on_one_replica_feeds_the_get_stream_on_another() {
    let fleet = Fleet::start(UNLIMITED).await;
    let c = fleet.legacy();
    assert_eq!(c.initialize().await.status, 200);
    let sid = c.session_id().expect("a session id");
    let (mut stream, streamed_on) = get_stream(&fleet.lb("/mcp"), &sid).await;
    assert_eq!(stream.status, 200);
    let uri = "mock://beta/readme";
    let sub = c.request("resources/subscribe", json!({"uri": uri})).await;
    assert_eq!(sub.result(), &json!({}), "{}", sub.text());
    let subscribed_on = served_by(&sub);
    assert_ne!(
        subscribed_on, streamed_on,
        "round robin moved the subscribe"
    );
    // Touched until the stream hears of it: the upstream learns of the
    // subscription at its own pace.
    let deadline = tokio::time::Instant::now() + SPREAD;
    let mut m = None;
    while m.is_none() && tokio::time::Instant::now() < deadline {
        fleet.beta.touch_resource(uri);
        m = stream.next(Duration::from_millis(200)).await;
    }
    assert_eq!(
        m,
        Some(
            json!({"jsonrpc": "2.0", "method": "notifications/resources/updated",
                    "params": {"uri": uri}})
        ),
        "GET stream on {streamed_on} after subscribing on {subscribed_on}"
    );
}

/// A handshake-era session's GET stream through the load balancer, and the
/// replica that serves it.
async fn get_stream(url: &str, sid: &str) -> (GetStream, String) {
    let headers = [
        ("mcp-session-id", sid),
        ("mcp-protocol-version", "2025-11-25"),
    ];
    let stream = GetStream::open(url, &headers, WAIT).await;
    let replica = stream
        .headers
        .get(MARKER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("none")
        .to_owned();
    (stream, replica)
}
