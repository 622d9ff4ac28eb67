//! One spawned stdio child: a writer task, a reader task demultiplexing
//! responses by id and progress by token, and a stderr logger.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use serde_json::value::RawValue;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::envelope::{self, Incoming};
use crate::stream::{is_bridgeable, Bridged, Item, ServerRequest};
use crate::{lock, UpstreamError, UpstreamEvent};
use junction_protocol::jsonrpc::{Id, RpcError};

const MAX_STDERR_LINE: usize = 8 * 1024;
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
}

impl StdioRx {
    /// Notifications first; the final item only once every earlier one is out.
    pub(crate) async fn next(&mut self) -> Option<Item> {
        loop {
            if let Some(item) = self.stashed.take() {
                if let Ok(ev) = self.events.try_recv() {
                    self.stashed = Some(item);
                    return Some(Ok(ev));
                }
                return Some(item);
            }
            let done = self.done.as_mut()?;
            tokio::select! {
                biased;
                Some(ev) = self.events.recv() => return Some(Ok(ev)),
                item = done => {
                    self.done = None;
                    self.stashed = Some(item.unwrap_or(Err(UpstreamError::Closed)));
                }
            }
        }
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

enum Line {
    Text(Vec<u8>),
    TooLong,
}

/// Newline-delimited reading with a cap, so a child cannot make us buffer
/// without bound; an overlong line is skipped whole.
async fn read_line<R: AsyncRead + Unpin>(
    r: &mut BufReader<R>,
    max: usize,
) -> std::io::Result<Option<Line>> {
    let mut line = Vec::new();
    let mut too_long = false;
    loop {
        let buf = r.fill_buf().await?;
        if buf.is_empty() {
            return Ok(match (too_long, line.is_empty()) {
                (true, _) => Some(Line::TooLong),
                (false, true) => None,
                (false, false) => Some(Line::Text(line)),
            });
        }
        let (chunk, found) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        if !too_long {
            if line.len() + chunk.len() > max {
                too_long = true;
                line = Vec::new();
            } else {
                line.extend_from_slice(chunk);
            }
        }
        let used = found.unwrap_or(buf.len());
        r.consume(used);
        if found.is_some() {
            return Ok(Some(if too_long {
                Line::TooLong
            } else {
                Line::Text(line)
            }));
        }
    }
}

async fn stderr_loop<R: AsyncRead + Unpin>(stderr: R, upstream: String) {
    let mut r = BufReader::new(stderr);
    while let Ok(Some(line)) = read_line(&mut r, MAX_STDERR_LINE).await {
        match line {
            Line::Text(t) => {
                tracing::debug!(upstream = %upstream, "stderr: {}", String::from_utf8_lossy(&t).trim_end())
            }
            Line::TooLong => {
                tracing::debug!(upstream = %upstream, "stderr: (overlong line skipped)")
            }
        }
    }
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
