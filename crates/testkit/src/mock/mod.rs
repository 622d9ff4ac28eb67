//! Scriptable HTTP MCP upstreams. Each mock binds 127.0.0.1:0 and behaves like
//! a strict server of its era, so the gateway's wire behaviour is checked from
//! the outside: every request is recorded with its headers and body.
//!
//! "Down" means connection refused: the listener is closed and every open
//! connection is dropped (in-flight requests die with them, like a crash).
//! `set_down(false)` binds the same port again.

mod elicit;
mod faulty;
mod http;
mod legacy;
mod modern;
mod notify;
mod prompts;
mod tools;

pub use elicit::AskingUpstream;
pub use faulty::{faulty_stdio_script, Fault, FaultyUpstream};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::{mpsc, oneshot};
use tokio::task::{JoinHandle, JoinSet};

/// The opaque `requestState` of `Behavior::InputRequired`: it has every byte a
/// careless gateway might mangle (base64 alphabet, padding, space, quote, UTF-8).
pub const REQUEST_STATE: &str = "st+/= ä \"quoted\" 1";

/// Which protocol era the mock serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MockEra {
    /// 2026-07-28 only: stateless, `_meta` and headers validated strictly.
    Modern,
    /// 2025-11-25 (also accepts 2025-06-18 / 2025-03-26): `initialize` + sessions.
    Legacy,
    /// Both on one endpoint, decided per message.
    Dual,
}

/// What a tool does when called.
#[derive(Clone, Debug)]
pub enum Behavior {
    /// `{"upstream", "tool", "arguments"}` as text content and structuredContent.
    Echo,
    /// Modern: `input_required` with an elicitation and `REQUEST_STATE`, then a
    /// complete result on a retry carrying `inputResponses` and that exact state.
    /// Legacy: an `elicitation/create` server request on the SSE stream, answered
    /// by the client's POSTed response.
    InputRequired,
    /// `steps` progress notifications (when the call has a progressToken), then
    /// the echo result; always answered as SSE.
    Progress { steps: u32 },
    /// Wait, then echo. If the response stream closes first, the call is recorded
    /// in `cancelled()`.
    Slow(Duration),
    /// One `notifications/message` at each of debug, info, warning and error
    /// (whatever level the request asked for, as a handshake-era server whose
    /// session level nobody set would), then the echo result; always SSE.
    Logs,
    /// A JSON-RPC error response.
    Error { code: i64, message: String },
    /// A result with `isError: true`.
    ToolError,
}

#[derive(Clone, Debug)]
pub struct MockTool {
    pub name: String,
    pub input_schema: Value,
    pub behavior: Behavior,
}

impl MockTool {
    pub fn new(name: &str, input_schema: Value, behavior: Behavior) -> Self {
        MockTool {
            name: name.to_string(),
            input_schema,
            behavior,
        }
    }

    /// An echo tool taking any object.
    pub fn echo(name: &str) -> Self {
        Self::new(name, json!({"type": "object"}), Behavior::Echo)
    }
}

#[derive(Clone, Debug)]
pub struct MockSpec {
    pub era: MockEra,
    pub tools: Vec<MockTool>,
    /// Answer requests with `text/event-stream` instead of `application/json`.
    pub sse: bool,
    /// Paginate `tools/list` with cursors, this many tools per page.
    pub page_size: Option<usize>,
    /// `ttlMs` of modern `tools/list` and `server/discover` results.
    pub ttl_ms: u64,
    /// Shown in every result (`_meta["mock/upstream"]`, echo payloads, tool
    /// descriptions) so tests can see which upstream answered.
    pub label: String,
}

impl MockSpec {
    pub fn new(era: MockEra, label: &str, tools: Vec<MockTool>) -> Self {
        MockSpec {
            era,
            tools,
            sse: false,
            page_size: None,
            ttl_ms: 60_000,
            label: label.to_string(),
        }
    }
    pub fn modern(label: &str, tools: Vec<MockTool>) -> Self {
        Self::new(MockEra::Modern, label, tools)
    }
    pub fn legacy(label: &str, tools: Vec<MockTool>) -> Self {
        Self::new(MockEra::Legacy, label, tools)
    }
    pub fn dual(label: &str, tools: Vec<MockTool>) -> Self {
        Self::new(MockEra::Dual, label, tools)
    }
    pub fn with_sse(mut self, sse: bool) -> Self {
        self.sse = sse;
        self
    }
    pub fn with_page_size(mut self, n: usize) -> Self {
        self.page_size = Some(n);
        self
    }
    pub fn with_ttl_ms(mut self, ttl_ms: u64) -> Self {
        self.ttl_ms = ttl_ms;
        self
    }
}

/// One HTTP request as the mock received it.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub http_method: String,
    /// Lower-cased names, in arrival order.
    pub headers: Vec<(String, String)>,
    /// Parsed JSON; `Null` for an empty body, a JSON string for non-JSON bytes.
    pub body: Value,
}

impl Recorded {
    /// First value of a header (name case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }
    pub fn method(&self) -> Option<&str> {
        self.body.get("method").and_then(Value::as_str)
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Session {
    pub(crate) version: String,
    pub(crate) capabilities: Value,
}

pub(crate) struct Shared {
    pub(crate) era: MockEra,
    pub(crate) sse: bool,
    pub(crate) page_size: Option<usize>,
    pub(crate) ttl_ms: u64,
    pub(crate) label: String,
    pub(crate) tools: Mutex<Vec<MockTool>>,
    pub(crate) recorded: Mutex<Vec<Recorded>>,
    pub(crate) cancelled: Mutex<Vec<Value>>,
    pub(crate) sessions: Mutex<HashMap<String, Session>>,
    pub(crate) counter: AtomicU64,
    /// Legacy server requests (elicitation) waiting for the client's response, by id.
    pub(crate) pending: Mutex<HashMap<String, oneshot::Sender<Value>>>,
    pub(crate) listeners: notify::Listeners,
}

/// Lock, recovering from poisoning: a panicking test thread must not wedge the mock.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

enum Control {
    Down(oneshot::Sender<()>),
    Up(oneshot::Sender<std::io::Result<()>>),
    Shutdown(oneshot::Sender<()>),
}

/// A running mock upstream.
pub struct MockUpstream {
    /// `http://127.0.0.1:PORT/mcp`
    pub url: String,
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    control: mpsc::Sender<Control>,
    task: JoinHandle<()>,
}

impl MockUpstream {
    /// Bind 127.0.0.1:0 and serve. Panics if loopback cannot be bound (test helper).
    pub async fn start(spec: MockSpec) -> MockUpstream {
        let listener = bind(
            "127.0.0.1:0"
                .parse()
                .unwrap_or(SocketAddr::from(([127, 0, 0, 1], 0))),
        )
        .unwrap_or_else(|e| panic!("mock upstream: cannot bind 127.0.0.1:0: {e}"));
        let addr = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("mock upstream: no local addr: {e}"));
        let shared = Arc::new(Shared {
            era: spec.era,
            sse: spec.sse,
            page_size: spec.page_size.filter(|n| *n > 0),
            ttl_ms: spec.ttl_ms,
            label: spec.label,
            tools: Mutex::new(spec.tools),
            recorded: Mutex::default(),
            cancelled: Mutex::default(),
            sessions: Mutex::default(),
            counter: AtomicU64::new(1),
            pending: Mutex::default(),
            listeners: notify::Listeners::default(),
        });
        let (control, rx) = mpsc::channel(4);
        let task = tokio::spawn(supervise(shared.clone(), addr, Some(listener), rx));
        MockUpstream {
            url: format!("http://{addr}/mcp"),
            addr,
            shared,
            control,
            task,
        }
    }

    pub fn label(&self) -> &str {
        &self.shared.label
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        lock(&self.shared.recorded).clone()
    }

    /// `tools/call` requests for this tool (by the upstream's own name).
    pub fn calls(&self, tool: &str) -> Vec<Recorded> {
        self.requests()
            .into_iter()
            .filter(|r| {
                r.method() == Some("tools/call")
                    && r.body.pointer("/params/name").and_then(Value::as_str) == Some(tool)
            })
            .collect()
    }

    /// Requests with this JSON-RPC method.
    pub fn requests_for(&self, method: &str) -> Vec<Recorded> {
        self.requests()
            .into_iter()
            .filter(|r| r.method() == Some(method))
            .collect()
    }

    pub fn clear_requests(&self) {
        lock(&self.shared.recorded).clear();
    }

    /// JSON-RPC ids of calls whose response stream closed before they finished
    /// (the modern HTTP cancellation signal).
    pub fn cancelled(&self) -> Vec<Value> {
        lock(&self.shared.cancelled).clone()
    }

    /// Whether some call of this mock was cancelled within `within` (polled).
    pub async fn saw_cancellation(&self, within: std::time::Duration) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if !self.cancelled().is_empty() {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    /// Legacy: forget every session, so the next request with an old id gets 404.
    pub fn expire_sessions(&self) {
        lock(&self.shared.sessions).clear();
    }

    /// Legacy: number of live sessions.
    pub fn session_count(&self) -> usize {
        lock(&self.shared.sessions).len()
    }

    /// Replace the tool set and announce `notifications/tools/list_changed` on
    /// the open change streams that asked for it (none unless a client listens).
    pub fn set_tools(&self, tools: Vec<MockTool>) {
        *lock(&self.shared.tools) = tools;
        notify::tools_changed(&self.shared);
    }

    /// Replace the tool set without announcing it: only a client that lists
    /// again (its cached list's ttlMs ran out) sees the change.
    pub fn set_tools_silently(&self, tools: Vec<MockTool>) {
        *lock(&self.shared.tools) = tools;
    }

    /// Down = connection refused (listener closed, open connections dropped).
    /// Returns once the change is in effect. Panics if the port cannot be re-bound.
    pub async fn set_down(&self, down: bool) {
        if down {
            let (tx, rx) = oneshot::channel();
            if self.control.send(Control::Down(tx)).await.is_ok() {
                let _ = rx.await;
            }
        } else {
            let (tx, rx) = oneshot::channel();
            if self.control.send(Control::Up(tx)).await.is_ok() {
                if let Ok(Err(e)) = rx.await {
                    panic!("mock upstream: cannot re-bind {}: {e}", self.addr);
                }
            }
        }
    }

    pub async fn shutdown(self) {
        let (tx, rx) = oneshot::channel();
        if self.control.send(Control::Shutdown(tx)).await.is_ok() {
            let _ = rx.await;
        }
        let _ = self.task.await;
    }
}

fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = TcpSocket::new_v4()?;
    // Re-binding the same port after set_down must not wait out TIME_WAIT.
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(1024)
}

async fn supervise(
    shared: Arc<Shared>,
    addr: SocketAddr,
    mut listener: Option<TcpListener>,
    mut control: mpsc::Receiver<Control>,
) {
    let mut conns = JoinSet::new();
    loop {
        let cmd = match &listener {
            Some(l) => tokio::select! {
                accepted = l.accept() => {
                    if let Ok((stream, _)) = accepted {
                        conns.spawn(http::serve_connection(shared.clone(), stream));
                    }
                    continue;
                }
                Some(_) = conns.join_next(), if !conns.is_empty() => continue,
                cmd = control.recv() => cmd,
            },
            None => control.recv().await,
        };
        match cmd {
            Some(Control::Down(ack)) => {
                listener = None;
                drop_all(&mut conns).await;
                let _ = ack.send(());
            }
            Some(Control::Up(ack)) => {
                let res = match listener {
                    Some(_) => Ok(()),
                    None => bind(addr).map(|l| listener = Some(l)),
                };
                let _ = ack.send(res);
            }
            Some(Control::Shutdown(ack)) => {
                drop(listener);
                drop_all(&mut conns).await;
                let _ = ack.send(());
                return;
            }
            None => {
                drop_all(&mut conns).await;
                return;
            }
        }
    }
}

/// Abort every connection and wait until its socket is really closed.
async fn drop_all(conns: &mut JoinSet<()>) {
    conns.abort_all();
    while conns.join_next().await.is_some() {}
}
