//! What cannot move between replicas, reached from any of them: a call held
//! for a modern client's retry and a question waiting for a handshake-era
//! client's answer are relayed to the replica holding them
//! (`fleet.advertise_url`), and a `notifications/cancelled` for a call running
//! elsewhere travels on the fleet bus. Each test sends its two requests to
//! different replicas through the balancer.

use super::*;
use harness::SPREAD;

#[tokio::test]
async fn a_held_call_is_found_by_a_retry_on_another_replica() {
    let fleet = Fleet::start(UNLIMITED).await;
    let c = fleet
        .modern()
        .with_capabilities(json!({"elicitation": {"form": {}}}));
    let first = c.call_tool("beta__ask", json!({"q": 1})).await;
    let r = first.result();
    assert_eq!(r["resultType"], "input_required", "{}", first.text());
    let held_on = served_by(&first);
    let answer = json!({"action": "accept", "content": {"ok": true}});
    let retry = c
        .request(
            "tools/call",
            json!({"name": "beta__ask", "arguments": {"q": 1},
                   "inputResponses": accept_all(r, json!({"ok": true})),
                   "requestState": r["requestState"]}),
        )
        .await;
    assert_ne!(served_by(&retry), held_on, "round robin moved the retry");
    assert_eq!(
        retry.result()["structuredContent"]["elicitation"],
        answer,
        "the retry on {} continued the call held on {held_on}: {}",
        served_by(&retry),
        retry.text()
    );
    assert_eq!(fleet.beta.calls("ask").len(), 1, "one upstream call");
}

#[tokio::test]
async fn an_elicitation_answer_posted_to_another_replica_reaches_the_waiting_call() {
    let fleet = Fleet::start(UNLIMITED).await;
    let c = fleet.legacy().with_capabilities(json!({"elicitation": {}}));
    assert_eq!(c.initialize().await.status, 200);
    let mut stream = c
        .stream(
            "tools/call",
            json!({"name": "beta__ask", "arguments": {}}),
            vec![],
        )
        .await;
    let waiting_on = stream.header(MARKER).expect("a replica").to_owned();
    let asked = stream.next(WAIT).await.expect("a server request");
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    let answer = json!({"action": "accept", "content": {"ok": true}});
    let ack = c.respond(asked["id"].clone(), answer.clone()).await;
    let answered_on = served_by(&ack);
    assert_ne!(answered_on, waiting_on, "round robin moved the answer");
    assert_eq!(
        ack.status,
        202,
        "answer on {answered_on} for the call waiting on {waiting_on}: {}",
        ack.text()
    );
    let last = stream.next(WAIT).await.expect("the final result");
    assert_eq!(
        last["result"]["structuredContent"]["elicitation"], answer,
        "{last}"
    );
}

#[tokio::test]
async fn a_cancellation_sent_to_another_replica_ends_the_call() {
    let fleet = Fleet::start(UNLIMITED).await;
    let c = fleet.legacy();
    assert_eq!(c.initialize().await.status, 200);
    let body = c.envelope(
        "tools/call",
        json!({"name": "alpha__slow", "arguments": {}}),
    );
    let call = async { c.stream_body(&body, vec![]).await };
    let cancel = async {
        until("the upstream runs the call", &fleet, || {
            !fleet.alpha.calls("slow").is_empty()
        })
        .await;
        let n = c
            .notify(
                "notifications/cancelled",
                json!({"requestId": body["id"], "reason": "user"}),
            )
            .await;
        assert_eq!(n.status, 202, "{}", n.text());
        served_by(&n)
    };
    let (stream, cancelled_on) = tokio::join!(call, cancel);
    let running_on = stream.header(MARKER).expect("a replica").to_owned();
    assert_ne!(
        cancelled_on, running_on,
        "round robin moved the cancellation"
    );
    assert!(
        fleet.alpha.saw_cancellation(SPREAD).await,
        "the call running on {running_on} was cancelled through {cancelled_on}"
    );
}
