//! Load for the kill-and-restart scenario of tests/fleet.rs: calls whose
//! answers can be checked exactly (a sum, an echo of a unique argument), sent
//! through HAProxy by a client that never panics on a broken connection, and
//! every answer sorted into correct, a retryable error from the load
//! balancer, a broken connection, or wrong.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use junction_testkit::TestClient;
use serde_json::{json, Value};

use super::harness::{MARKER, WAIT};

/// How one call ended.
#[derive(Debug)]
pub enum Answer {
    /// The right result, from this replica.
    Correct(String),
    /// HAProxy's own 502/503/504 (no replica marker): the replica it picked
    /// died with the request, or none was up. Safe to retry.
    Retryable(u16),
    /// The connection broke before a whole response arrived. Safe to retry.
    Broken(String),
    /// Anything else: a result that is not the right one, or an error from a
    /// replica. The scenario allows none.
    Wrong(String),
}

/// Totals across every load task.
#[derive(Default)]
pub struct Tally {
    pub correct: AtomicU64,
    /// HAProxy's error statuses and how often each came.
    pub retryable: Mutex<BTreeMap<u16, u64>>,
    pub broken: Mutex<Vec<String>>,
    pub by_replica: Mutex<BTreeMap<String, u64>>,
    pub wrong: Mutex<Vec<String>>,
}

impl Tally {
    fn add(&self, a: Answer) {
        match a {
            Answer::Correct(r) => {
                *lock(&self.by_replica).entry(r).or_default() += 1;
                self.correct.fetch_add(1, Ordering::Relaxed);
            }
            Answer::Retryable(status) => *lock(&self.retryable).entry(status).or_default() += 1,
            Answer::Broken(why) => lock(&self.broken).push(why),
            Answer::Wrong(w) => lock(&self.wrong).push(w),
        }
    }

    /// Correct answers replica `name` gave so far.
    pub fn served_by(&self, name: &str) -> u64 {
        lock(&self.by_replica).get(name).copied().unwrap_or(0)
    }

    pub fn answers(&self) -> u64 {
        self.correct.load(Ordering::Relaxed)
            + lock(&self.retryable).values().sum::<u64>()
            + lock(&self.broken).len() as u64
            + lock(&self.wrong).len() as u64
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

pub struct Caller {
    http: Client<HttpConnector, Full<Bytes>>,
    /// Builds the requests (envelope and headers), never sends them.
    shape: TestClient,
}

impl Caller {
    /// A 2026-07-28 client.
    pub fn new(url: &str) -> Caller {
        Caller {
            http: Client::builder(TokioExecutor::new()).build_http(),
            shape: TestClient::modern(url),
        }
    }

    /// A handshake-era client with one session (initialized through `url`)
    /// for all its calls, whichever replica takes them.
    pub async fn with_session(url: &str) -> Caller {
        let shape = TestClient::legacy(url, "2025-11-25");
        let init = shape.initialize().await;
        assert_eq!(init.status, 200, "{}", init.text());
        Caller {
            http: Client::builder(TokioExecutor::new()).build_http(),
            shape,
        }
    }

    /// Call `n` of the mix: `weather__add` (stdio child of each replica),
    /// `alpha__echo` (modern upstream), `beta__echo` (handshake-era upstream),
    /// each with arguments unique to (task, n).
    pub async fn call(&self, task: u64, n: u64) -> Answer {
        let (name, args) = match n % 3 {
            0 => ("weather__add", json!({"a": task * 1_000_000 + n, "b": n})),
            1 => ("alpha__echo", json!({"task": task, "n": n})),
            _ => ("beta__echo", json!({"task": task, "n": n})),
        };
        let body = self
            .shape
            .envelope("tools/call", json!({"name": name, "arguments": args}));
        let (status, marker, bytes) = match self.send(&body).await {
            Ok(r) => r,
            Err(e) => return Answer::Broken(e),
        };
        let Some(replica) = marker else {
            return if matches!(status, 502..=504) {
                Answer::Retryable(status)
            } else {
                Answer::Wrong(format!("{status} without a replica marker: {bytes}"))
            };
        };
        let message = last_message(&bytes);
        let result = &message["result"];
        let right = match name {
            "weather__add" => result["structuredContent"]["sum"] == json!(task * 1_000_000 + 2 * n),
            _ => {
                let upstream = &name[..name.find("__").unwrap_or(0)];
                result["structuredContent"]
                    == json!({"upstream": upstream, "tool": "echo", "arguments": args})
            }
        };
        if status == 200 && right && result["isError"] != json!(true) {
            Answer::Correct(replica)
        } else {
            Answer::Wrong(format!("{name} {args} on {replica}: {status} {bytes}"))
        }
    }

    async fn send(&self, body: &Value) -> Result<(u16, Option<String>, String), String> {
        let mut req = hyper::Request::builder()
            .method("POST")
            .uri(self.shape.url());
        for (n, v) in self.shape.headers_for(body) {
            req = req.header(n, v);
        }
        let req = req
            .body(Full::new(Bytes::from(body.to_string())))
            .map_err(|e| e.to_string())?;
        let exchange = async {
            let resp = self.http.request(req).await.map_err(|e| format!("{e:?}"))?;
            let status = resp.status().as_u16();
            let marker = resp
                .headers()
                .get(MARKER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let bytes = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| format!("body: {e:?}"))?
                .to_bytes();
            Ok((status, marker, String::from_utf8_lossy(&bytes).into_owned()))
        };
        tokio::time::timeout(WAIT, exchange)
            .await
            .unwrap_or_else(|_| Err(format!("no answer within {WAIT:?}")))
    }
}

/// The JSON body, or the last message of an SSE body.
fn last_message(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|_| {
        junction_testkit::sse::parse_all(body.as_bytes())
            .pop()
            .unwrap_or(Value::Null)
    })
}

/// One load task per caller, calling until `stop` is set; every answer is
/// counted in `tally`.
pub fn run(
    callers: Vec<Caller>,
    tally: Arc<Tally>,
    stop: Arc<AtomicBool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    callers
        .into_iter()
        .zip(0..)
        .map(|(caller, task)| {
            let (tally, stop) = (tally.clone(), stop.clone());
            tokio::spawn(async move {
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    tally.add(caller.call(task, n).await);
                    n += 1;
                }
            })
        })
        .collect()
}
