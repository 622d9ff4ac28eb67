//! stdio upstreams: a child process spawned on first use and respawned (with
//! a small backoff) after it dies; its era is probed per process.

mod lines;
mod proc;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwapOption;
use junction_protocol::jsonrpc::RpcError;
use junction_protocol::meta;
use serde_json::value::RawValue;
use tokio::time::Instant;

use crate::envelope::{self, Stamp};
use crate::era::{self, Era, EraPref};
use crate::stream::{Bridged, EventSource, Inner, ResponseStream};
use crate::{IdGen, UpstreamError, UpstreamEvent, UpstreamRequest};
use proc::Proc;

const PROBE_TIMEOUT_MAX: Duration = Duration::from_secs(5);
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);
/// A child that lived shorter than this counts as a crash loop for backoff.
const HEALTHY_LIFETIME: Duration = Duration::from_secs(5);
const BACKOFF_MAX: Duration = Duration::from_secs(2);

struct Ready {
    proc: Arc<Proc>,
    era: Era,
}

#[derive(Default)]
struct SpawnState {
    failures: u32,
    last_failure: Option<Instant>,
}

pub(crate) struct StdioTransport {
    upstream: String,
    command: Vec<String>,
    env: Vec<(String, String)>,
    cwd: Option<PathBuf>,
    timeout: Duration,
    pref: EraPref,
    ids: Arc<IdGen>,
    current: ArcSwapOption<Ready>,
    // Single-flight spawn + probe; holds the crash-loop backoff.
    spawn: tokio::sync::Mutex<SpawnState>,
    changes: tokio::sync::broadcast::Sender<String>,
    /// `upstreams[].max_response_bytes`: longest stdout line accepted.
    max_message: usize,
}

impl StdioTransport {
    /// `spec` gives id, timeout, era and limits; the stdio parts come apart.
    pub(crate) fn new(
        spec: &crate::UpstreamSpec,
        command: Vec<String>,
        env: Vec<(String, String)>,
        cwd: Option<PathBuf>,
        changes: tokio::sync::broadcast::Sender<String>,
    ) -> StdioTransport {
        StdioTransport {
            upstream: spec.id.clone(),
            command,
            env,
            cwd,
            timeout: spec.timeout,
            pref: spec.era,
            max_message: spec.max_message_bytes,
            ids: Arc::default(),
            current: ArcSwapOption::empty(),
            spawn: tokio::sync::Mutex::new(SpawnState::default()),
            changes,
        }
    }

    pub(crate) async fn era(&self) -> Result<Era, UpstreamError> {
        Ok(self.ensure_ready().await?.era.clone())
    }

    /// The era of the running child, if there is one.
    pub(crate) fn known_era(&self) -> Option<Era> {
        self.live().map(|r| r.era.clone())
    }

    fn live(&self) -> Option<Arc<Ready>> {
        self.current
            .load_full()
            .filter(|r| !r.proc.dead.is_cancelled())
    }

    async fn ensure_ready(&self) -> Result<Arc<Ready>, UpstreamError> {
        if let Some(r) = self.live() {
            return Ok(r);
        }
        let mut state = self.spawn.lock().await;
        if let Some(r) = self.live() {
            return Ok(r);
        }
        if let Some(old) = self.current.swap(None) {
            if old.proc.spawned_at.elapsed() < HEALTHY_LIFETIME {
                state.failures += 1;
                state.last_failure = Some(Instant::now());
            } else {
                state.failures = 0;
            }
            tracing::info!(upstream = %self.upstream, "stdio upstream died; respawning");
        }
        if let (Some(at), true) = (state.last_failure, state.failures > 0) {
            let backoff = (Duration::from_millis(100) * 2u32.saturating_pow(state.failures - 1))
                .min(BACKOFF_MAX);
            tokio::time::sleep_until(at + backoff).await;
        }
        match self.start().await {
            Ok(ready) => {
                let ready = Arc::new(ready);
                self.current.store(Some(ready.clone()));
                Ok(ready)
            }
            Err(e) => {
                state.failures += 1;
                state.last_failure = Some(Instant::now());
                Err(e)
            }
        }
    }

    async fn start(&self) -> Result<Ready, UpstreamError> {
        let proc = Proc::spawn(
            &self.upstream,
            &self.command,
            &self.env,
            self.cwd.as_ref(),
            self.changes.clone(),
            self.max_message,
        )?;
        let era = match self.pref {
            EraPref::Modern => Ok(Era::Modern),
            EraPref::Legacy => self.initialize(&proc).await,
            EraPref::Auto => match self.probe(&proc).await {
                Ok(Some(era)) => Ok(era),
                Ok(None) => self.initialize(&proc).await,
                Err(e) => Err(e),
            },
        };
        match era {
            Ok(era) => {
                tracing::debug!(upstream = %self.upstream, ?era, "stdio upstream ready");
                Ok(Ready { proc, era })
            }
            Err(e) => {
                proc.stop(Duration::ZERO).await;
                Err(e)
            }
        }
    }

    /// NOTES §3.2 on stdio: a result or a modern error means modern; any
    /// other error or silence means legacy (`None`).
    async fn probe(&self, proc: &Proc) -> Result<Option<Era>, UpstreamError> {
        let params = envelope::build_params(
            &Default::default(),
            &[],
            None,
            &Stamp::Modern { caps: None },
        );
        // Half the budget at most: a silent legacy server must leave time for
        // `initialize` within the same request deadline.
        let probe_timeout = (self.timeout / 2).min(PROBE_TIMEOUT_MAX);
        match call(proc, &self.ids, "server/discover", &params, probe_timeout).await {
            Ok(Ok(_)) => Ok(Some(Era::Modern)),
            Ok(Err(err)) if era::is_modern_code(err.code) => {
                era::modern_error_verdict(&err).map(Some)
            }
            Ok(Err(_)) | Err(UpstreamError::Timeout) => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn initialize(&self, proc: &Proc) -> Result<Era, UpstreamError> {
        let result = call(
            proc,
            &self.ids,
            "initialize",
            &envelope::initialize_params(),
            self.timeout,
        )
        .await?
        .map_err(UpstreamError::Rpc)?;
        let version = era::negotiated_version(&result)?;
        proc.write(envelope::initialized_bytes()).await?;
        Ok(Era::Legacy { version })
    }

    pub(crate) async fn request(
        &self,
        req: &UpstreamRequest<'_>,
        deadline: Instant,
    ) -> Result<ResponseStream, UpstreamError> {
        let ready = self.ensure_ready().await?;
        let id = self.ids.next();
        // Downstream tokens could collide on the shared channel: use ours.
        let progress = req
            .meta
            .iter()
            .find(|(k, _)| k == meta::PROGRESS_TOKEN)
            .map(|(_, theirs)| (format!("\"junction-{id}\""), theirs.clone()));
        let ours = progress
            .as_ref()
            .map(|(t, _)| envelope::raw_string(t.clone()));
        let stamp = match ready.era {
            Era::Modern => Stamp::Modern {
                caps: req.client_capabilities.as_deref(),
            },
            Era::Legacy { .. } => Stamp::Legacy,
        };
        let body = envelope::request_body(
            id,
            &req.method,
            &req.params,
            &req.meta,
            ours.as_deref(),
            &stamp,
        );
        let rx = ready.proc.register(id, progress)?;
        if let Err(e) = ready.proc.write(body).await {
            ready.proc.unregister(id);
            return Err(e);
        }
        // The receiver calls the request off when dropped early, in place
        // of a `CancelGuard`: one allocation (its box) per call, not two.
        let rx = rx.abandon_on_drop(ready.proc.clone(), id);
        Ok(
            ResponseStream::new(Inner::Source(Box::new(rx)), deadline, None)
                .with_replier(ready.proc.clone()),
        )
    }

    pub(crate) async fn shutdown(&self) {
        let _state = self.spawn.lock().await;
        if let Some(ready) = self.current.swap(None) {
            ready.proc.stop(SHUTDOWN_GRACE).await;
        }
    }
}

/// One internal request on the process, waited for; notifications ignored.
async fn call(
    proc: &Proc,
    ids: &IdGen,
    method: &str,
    params: &RawValue,
    timeout: Duration,
) -> Result<Result<Box<RawValue>, RpcError>, UpstreamError> {
    let id = ids.next();
    let mut rx = proc.register(id, None)?;
    let fut = async {
        proc.write(envelope::request_bytes(id, method, params))
            .await?;
        while let Some(item) = std::future::poll_fn(|cx| rx.poll_next(cx)).await {
            match item? {
                Bridged::Event(UpstreamEvent::Result(r)) => return Ok(Ok(r)),
                Bridged::Event(UpstreamEvent::Error(e)) => return Ok(Err(e)),
                Bridged::Event(UpstreamEvent::Notification(_)) | Bridged::ServerRequest(_) => {
                    continue
                }
            }
        }
        Err(UpstreamError::Closed)
    };
    let out = tokio::time::timeout(timeout, fut)
        .await
        .unwrap_or(Err(UpstreamError::Timeout));
    proc.unregister(id);
    out
}
