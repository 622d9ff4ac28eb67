//! One spawned stdio child: a writer task, a reader task demultiplexing
//! responses by id and progress by token, and a stderr logger; and each
//! call's receiving side (`StdioRx`), the `EventSource` of its stream.

use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use serde_json::value::RawValue;
use tokio::io::{AsyncRead, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::lines::{read_line, stderr_loop, Line};
use crate::envelope::{self, Incoming};
use crate::stream::{is_bridgeable, Bridged, EventSource, Item, Reply, ReplyFuture, ServerRequest};
use crate::{lock, UpstreamError, UpstreamEvent};
use junction_protocol::jsonrpc::{Id, RpcError};

/// Notifications buffered per request before we start dropping them; the
/// reader never waits on a slow consumer (it would stall every request).
const EVENTS_PER_REQUEST: usize = 256;

struct Pending {
    events: mpsc::Sender<Bridged>,
    done: oneshot::Sender<Item>,
    token: Option<String>,
}

#[derive(Default)]
struct RoutesInner {
    closed: bool,
    pending: HashMap<i64, Pending>,
    /// our progress token (JSON text) → (request id, downstream token)
    progress: HashMap<String, (i64, Box<RawValue>)>,
}

pub(crate) struct Proc {
    pub(crate) upstream: String,
    pub(crate) spawned_at: Instant,
    writer: mpsc::Sender<Vec<u8>>,
    routes: Arc<Mutex<RoutesInner>>,
    pub(crate) dead: CancellationToken,
    close_stdin: CancellationToken,
    child: Mutex<Option<Child>>,
}

/// The receiving side of one request.
pub(crate) struct StdioRx {
    events: mpsc::Receiver<Bridged>,
    done: Option<oneshot::Receiver<Item>>,
    stashed: Option<Item>,
    /// Set for a client's call (`abandon_on_drop`): the request to call off
    /// if this is dropped before the response.
    call: Option<(Arc<Proc>, i64)>,
}

impl StdioRx {
    /// Dropped before `settle`, this unregisters request `id` and tells the
    /// child it was cancelled: what a `ResponseStream` dropped early does.
    pub(crate) fn abandon_on_drop(mut self, proc: Arc<Proc>, id: i64) -> StdioRx {
        self.call = Some((proc, id));
        self
    }
}

impl EventSource for StdioRx {
    /// Notifications first; the final item only once every earlier one is out.
    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Item>> {
        loop {
            if let Some(item) = self.stashed.take() {
                if let Ok(ev) = self.events.try_recv() {
                    self.stashed = Some(item);
                    return Poll::Ready(Some(Ok(ev)));
                }
                return Poll::Ready(Some(item));
            }
            let Some(done) = self.done.as_mut() else {
                return Poll::Ready(None);
            };
            // Closed events (`Ready(None)`) leave the answer to wait for.
            if let Poll::Ready(Some(ev)) = self.events.poll_recv(cx) {
                return Poll::Ready(Some(Ok(ev)));
            }
            let item = std::task::ready!(Pin::new(done).poll(cx));
            self.done = None;
            self.stashed = Some(item.unwrap_or(Err(UpstreamError::Closed)));
        }
    }

    fn settle(mut self: Box<Self>) {
        self.call = None;
    }
}

impl Drop for StdioRx {
    fn drop(&mut self) {
        if let Some((proc, id)) = self.call.take() {
            proc.unregister(id);
            if !proc.dead.is_cancelled() {
                proc.write_now(envelope::cancelled_bytes(
                    id,
                    "request cancelled by the gateway",
                ));
            }
        }
    }
}

/// Answers to server requests are lines on stdin (no deadline: the writer
/// queue is the only wait).
impl Reply for Proc {
    fn reply(&self, message: Vec<u8>, _deadline: Instant) -> ReplyFuture<'_> {
        Box::pin(self.write(message))
    }
}

impl Proc {
    pub(crate) fn spawn(
        upstream: &str,
        command: &[String],
        env: &[(String, String)],
        cwd: Option<&PathBuf>,
        changes: broadcast::Sender<String>,
        max_line: usize,
    ) -> Result<Arc<Proc>, UpstreamError> {
        let (program, args) = command
            .split_first()
            .ok_or_else(|| UpstreamError::Unavailable("empty stdio command".to_owned()))?;
        let mut cmd = Command::new(program);
        cmd.args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(dir) = cwd {
            cmd.current_dir(dir);
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| UpstreamError::Unavailable(format!("spawning {program:?}: {e}")))?;
        let missing = || UpstreamError::Unavailable("child has no stdio pipes".to_owned());
        let stdin = child.stdin.take().ok_or_else(missing)?;
        let stdout = child.stdout.take().ok_or_else(missing)?;
        let stderr = child.stderr.take().ok_or_else(missing)?;
        tracing::debug!(upstream, pid = ?child.id(), "spawned stdio upstream");

        let (writer, rx) = mpsc::channel(256);
        let proc = Arc::new(Proc {
            upstream: upstream.to_owned(),
            spawned_at: Instant::now(),
            writer,
            routes: Arc::default(),
            dead: CancellationToken::new(),
            close_stdin: CancellationToken::new(),
            child: Mutex::new(Some(child)),
        });
        tokio::spawn(write_loop(stdin, rx, proc.close_stdin.clone()));
        tokio::spawn(read_loop(
            stdout,
            Reader {
                routes: proc.routes.clone(),
                writer: proc.writer.clone(),
                upstream: proc.upstream.clone(),
                dead: proc.dead.clone(),
                close_stdin: proc.close_stdin.clone(),
                changes,
                max_line,
            },
        ));
        tokio::spawn(stderr_loop(stderr, proc.upstream.clone()));
        Ok(proc)
    }

    /// Register a request (and its rewritten progress token) before writing it.
    pub(crate) fn register(
        &self,
        id: i64,
        progress: Option<(String, Box<RawValue>)>,
    ) -> Result<StdioRx, UpstreamError> {
        let (events_tx, events) = mpsc::channel(EVENTS_PER_REQUEST);
        let (done_tx, done) = oneshot::channel();
        let mut routes = lock(&self.routes);
        if routes.closed {
            return Err(UpstreamError::Unavailable(
                "stdio upstream exited".to_owned(),
            ));
        }
        let token = progress.map(|(ours, theirs)| {
            routes.progress.insert(ours.clone(), (id, theirs));
            ours
        });
        routes.pending.insert(
            id,
            Pending {
                events: events_tx,
                done: done_tx,
                token,
            },
        );
        Ok(StdioRx {
            events,
            done: Some(done),
            stashed: None,
            call: None,
        })
    }

    pub(crate) fn unregister(&self, id: i64) {
        let mut routes = lock(&self.routes);
        if let Some(p) = routes.pending.remove(&id) {
            if let Some(t) = p.token {
                routes.progress.remove(&t);
            }
        }
    }

    /// Write one line; fails only if the process is gone.
    pub(crate) async fn write(&self, mut line: Vec<u8>) -> Result<(), UpstreamError> {
        line.push(b'\n');
        self.writer
            .send(line)
            .await
            .map_err(|_| UpstreamError::Unavailable("stdio upstream exited".to_owned()))
    }

    /// Best effort, never waits (used from Drop).
    pub(crate) fn write_now(&self, mut line: Vec<u8>) {
        line.push(b'\n');
        if self.writer.try_send(line).is_err() {
            tracing::debug!(upstream = %self.upstream, "stdio writer busy or gone; dropped a message");
        }
    }

    /// Close stdin, wait up to `grace`, then kill.
    pub(crate) async fn stop(&self, grace: std::time::Duration) {
        self.close_stdin.cancel();
        let child = lock(&self.child).take();
        let Some(mut child) = child else { return };
        match tokio::time::timeout(grace, child.wait()).await {
            Ok(status) => {
                tracing::debug!(upstream = %self.upstream, ?status, "stdio upstream exited")
            }
            Err(_) => {
                tracing::debug!(upstream = %self.upstream, "stdio upstream ignored EOF; killing");
                let _ = child.kill().await;
            }
        }
    }
}

async fn write_loop(
    mut stdin: ChildStdin,
    mut rx: mpsc::Receiver<Vec<u8>>,
    close: CancellationToken,
) {
    loop {
        tokio::select! {
            _ = close.cancelled() => break,
            line = rx.recv() => {
                let Some(line) = line else { break };
                if stdin.write_all(&line).await.is_err() || stdin.flush().await.is_err() {
                    break;
                }
            }
        }
    }
    // Dropping stdin closes the pipe: the child sees EOF.
}

/// What the stdout reader shares with its process (never the process itself,
/// so dropping the `Proc` still kills the child).
struct Reader {
    routes: Arc<Mutex<RoutesInner>>,
    writer: mpsc::Sender<Vec<u8>>,
    upstream: String,
    dead: CancellationToken,
    close_stdin: CancellationToken,
    changes: broadcast::Sender<String>,
    max_line: usize,
}

async fn read_loop<R: AsyncRead + Unpin>(stdout: R, rd: Reader) {
    let Reader {
        routes,
        writer,
        upstream,
        dead,
        close_stdin,
        changes,
        max_line,
    } = rd;
    let mut r = BufReader::new(stdout);
    loop {
        match read_line(&mut r, max_line).await {
            Ok(Some(Line::Text(bytes))) => {
                handle_line(&bytes, &routes, &writer, &changes, &upstream)
            }
            Ok(Some(Line::TooLong)) => {
                tracing::warn!(upstream = %upstream, max_line, "skipping a stdout line over upstreams[].max_response_bytes")
            }
            Ok(None) => break,
            Err(e) => {
                tracing::debug!(upstream = %upstream, error = %e, "reading stdout failed");
                break;
            }
        }
    }
    tracing::debug!(upstream = %upstream, "stdio upstream closed stdout");
    let pending = {
        let mut routes = lock(&routes);
        routes.closed = true;
        routes.progress.clear();
        std::mem::take(&mut routes.pending)
    };
    for (_, p) in pending {
        let _ = p.done.send(Err(UpstreamError::Closed));
    }
    dead.cancel();
    close_stdin.cancel();
}

fn handle_line(
    bytes: &[u8],
    routes: &Mutex<RoutesInner>,
    writer: &mpsc::Sender<Vec<u8>>,
    changes: &broadcast::Sender<String>,
    upstream: &str,
) {
    let Ok(text) = std::str::from_utf8(bytes) else {
        tracing::debug!(upstream, "skipping a stdout line that is not UTF-8");
        return;
    };
    let text = text.trim();
    if text.is_empty() {
        return;
    }
    let msg = match envelope::classify(text) {
        Ok(m) => m,
        Err(e) => {
            tracing::debug!(upstream, error = %e, "skipping a stdout line that is not JSON-RPC");
            return;
        }
    };
    match msg {
        Incoming::Response {
            id: Some(Id::Num(id)),
            outcome,
        } => finish(routes, id, outcome, upstream),
        Incoming::Response { id, .. } => {
            tracing::debug!(upstream, ?id, "response for no request of ours")
        }
        Incoming::Notification { method, .. } if crate::is_change_notification(&method) => {
            let _ = changes.send(method);
        }
        Incoming::Notification {
            method,
            params,
            raw,
        } => route_notification(routes, &method, params, raw, upstream),
        Incoming::ServerRequest { id, method, params } => {
            let request = ServerRequest { id, method, params };
            let Some(request) = route_server_request(routes, request) else {
                return;
            };
            let mut line = envelope::answer_server_request(&request.id, &request.method);
            let method = request.method;
            line.push(b'\n');
            if writer.try_send(line).is_err() {
                tracing::debug!(upstream, method, "could not answer a server request");
            }
        }
    }
}

fn finish(
    routes: &Mutex<RoutesInner>,
    id: i64,
    outcome: Result<Box<RawValue>, RpcError>,
    upstream: &str,
) {
    let pending = {
        let mut routes = lock(routes);
        let p = routes.pending.remove(&id);
        if let Some(t) = p.as_ref().and_then(|p| p.token.as_ref()) {
            routes.progress.remove(t);
        }
        p
    };
    let Some(p) = pending else {
        tracing::debug!(
            upstream,
            id,
            "late response for a finished or cancelled request"
        );
        return;
    };
    let event = match outcome {
        Ok(result) => UpstreamEvent::Result(result),
        Err(error) => UpstreamEvent::Error(error),
    };
    let _ = p.done.send(Ok(Bridged::Event(event)));
}

/// A server request on stdio names no request of ours. With exactly one call
/// in flight it can only belong to that call, which may relay it to its
/// client; otherwise (and for `ping`) it comes back to be answered here.
fn route_server_request(
    routes: &Mutex<RoutesInner>,
    request: ServerRequest,
) -> Option<ServerRequest> {
    if !is_bridgeable(&request.method) {
        return Some(request);
    }
    let routes = lock(routes);
    let mut pending = routes.pending.values();
    match (pending.next(), pending.next()) {
        (Some(p), None) => match p.events.try_send(Bridged::ServerRequest(request)) {
            Ok(()) => None,
            Err(mpsc::error::TrySendError::Full(Bridged::ServerRequest(r)))
            | Err(mpsc::error::TrySendError::Closed(Bridged::ServerRequest(r))) => Some(r),
            Err(_) => None,
        },
        _ => Some(request),
    }
}

fn route_notification(
    routes: &Mutex<RoutesInner>,
    method: &str,
    params: Option<Box<RawValue>>,
    raw: Box<RawValue>,
    upstream: &str,
) {
    let routes = lock(routes);
    let (target, event) = if method == "notifications/progress" {
        let found = params.as_deref().and_then(|p| {
            let key = envelope::progress_token_key(p)?;
            let (id, theirs) = routes.progress.get(&key)?;
            Some((*id, envelope::with_progress_token(p, theirs)?))
        });
        match found {
            Some((id, rewritten)) => (Some(id), rewritten),
            None => (None, raw),
        }
    } else if method == "notifications/message" && routes.pending.len() == 1 {
        // stdio log messages carry no request reference; with one request in
        // flight there is only one place it can belong.
        (routes.pending.keys().next().copied(), raw)
    } else {
        (None, raw)
    };
    match target.and_then(|id| routes.pending.get(&id)) {
        Some(p) => {
            if p.events
                .try_send(Bridged::Event(UpstreamEvent::Notification(event)))
                .is_err()
            {
                tracing::debug!(
                    upstream,
                    method,
                    "request not reading its notifications; dropped one"
                );
            }
        }
        None => tracing::debug!(upstream, method, "notification for no request in flight"),
    }
}
