//! Hot reload: on SIGHUP or when the config file's bytes change, parse →
//! validate → build the whole new state aside → one atomic swap. A bad config
//! keeps the old state serving, logs why, and sets
//! `junction_config_last_reload_success` to 0. Either way the outcome is kept
//! for the status page (`Shared::reloads`). Upstream clients the new state no
//! longer uses are shut down after the shutdown grace period, so in-flight
//! requests on them finish first.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::listener::Shared;
use crate::state::State;

/// How often the file is looked at (Kubernetes swaps ConfigMap files through a
/// symlink, which inotify-style watching misses; reading is cheap).
const POLL: Duration = Duration::from_secs(1);

fn digest(path: &Path) -> Option<[u8; 32]> {
    std::fs::read(path).ok().map(|b| Sha256::digest(&b).into())
}

/// Runs until the process ends.
pub async fn watch(shared: Arc<Shared>, path: PathBuf) {
    let mut last = digest(&path);
    #[cfg(unix)]
    let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
    loop {
        #[cfg(unix)]
        let signalled = match hup.as_mut() {
            Some(h) => tokio::select! {
                _ = h.recv() => true,
                _ = tokio::time::sleep(POLL) => false,
            },
            None => {
                tokio::time::sleep(POLL).await;
                false
            }
        };
        #[cfg(not(unix))]
        let signalled = {
            tokio::time::sleep(POLL).await;
            false
        };
        let now = digest(&path);
        if !signalled && now == last {
            continue;
        }
        last = now;
        reload(&shared, &path).await;
    }
}

type Built = (State, Option<tokio_rustls::TlsAcceptor>);

async fn build(
    config: junction_config::Config,
    env: Vec<(String, String)>,
    prev: &State,
    metrics: junction_telemetry::Metrics,
) -> Result<Built, String> {
    if config.server.listen != prev.config.server.listen {
        tracing::warn!(old = %prev.config.server.listen, new = %config.server.listen,
            "server.listen changed: it takes effect at the next restart");
    }
    let tls = match &config.server.tls {
        Some(t) => Some(crate::tls::acceptor(t)?),
        None => None,
    };
    let env: HashMap<String, String> = env.into_iter().collect();
    let state = State::rebuild(config, &env, metrics, Some(prev))
        .await
        .map_err(|e| e.to_string())?;
    Ok((state, tls))
}

/// One reload attempt; returns whether the new config is now serving.
pub async fn reload(shared: &Shared, path: &Path) -> bool {
    let prev = shared.state.load_full();
    let metrics = prev.metrics.clone();
    let env: Vec<(String, String)> = std::env::vars().collect();
    let outcome = match junction_config::load(path, &env) {
        Err(e) => Err(e.to_string()),
        Ok(config) => build(config, env, &prev, metrics.clone()).await,
    };
    match outcome {
        Ok((state, tls)) => {
            let retired = state.retired_from(&prev);
            let grace = state.config.server.shutdown_grace;
            let state = Arc::new(state);
            shared.state.store(state.clone());
            shared.tls.store(tls.map(Arc::new));
            // The reload is the event: clients see list_changed for whatever
            // the new config changed in their view, without waiting for a poll.
            state.replica.hub.reloaded(&state);
            metrics
                .config_reloads_total
                .with_label_values(&["success"])
                .inc();
            metrics.config_last_reload_success.set(1);
            shared.reloads.record(Ok(()));
            tracing::info!(config = %path.display(), retired = retired.len(), "config reloaded");
            tokio::spawn(crate::listener::warm_up(state));
            tokio::spawn(async move {
                tokio::time::sleep(grace).await;
                for client in retired {
                    client.shutdown().await;
                }
            });
            true
        }
        Err(e) => {
            metrics
                .config_reloads_total
                .with_label_values(&["failure"])
                .inc();
            metrics.config_last_reload_success.set(0);
            shared.reloads.record(Err(&e));
            tracing::error!(config = %path.display(), error = %e, "config reload failed; the previous config keeps serving");
            false
        }
    }
}
