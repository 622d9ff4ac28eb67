//! `junction`: run the gateway, validate a config, print the merged catalog, or
//! run one of the demo stdio MCP servers the default `gateway.yaml` uses.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::{Parser, Subcommand};
use junction_server::{Shared, State};

/// jemalloc rather than glibc malloc: in the same run (BENCHMARKS.md) it cut
/// user-space instructions per proxied `tools/call` by ~13 % and RSS per idle
/// connection from 15.7 to 8.3 KiB (its large size classes leave untouched
/// pages of hyper's 8 KiB buffers unbacked; glibc's heap interleaves them).
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser)]
#[command(
    name = "junction",
    version,
    about = "One MCP endpoint in front of many MCP servers"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the gateway (the default).
    Run {
        #[arg(long, short, default_value = "gateway.yaml")]
        config: PathBuf,
    },
    /// Check a config: prints every error with its key path; exit 1 if any.
    Validate {
        #[arg(long, short, default_value = "gateway.yaml")]
        config: PathBuf,
    },
    /// Print the merged tool catalog of every route: exposed name, upstream, original name.
    Catalog {
        #[arg(long, short, default_value = "gateway.yaml")]
        config: PathBuf,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Show how each pinned upstream's tools differ from their pins
        /// (`upstreams[].pins`), instead of the catalog.
        #[arg(long, conflicts_with = "write_pins")]
        diff: bool,
        /// Record every pinned upstream's tools as listed now into its pin
        /// file: the operator's approval of what they review with --diff.
        #[arg(long)]
        write_pins: bool,
    },
    /// Run a demo MCP server on stdio (`weather`: modern era, `notes`: handshake era).
    #[command(hide = true)]
    Demo { kind: String },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let command = cli.command.unwrap_or(Command::Run {
        config: PathBuf::from("gateway.yaml"),
    });
    let result = match command {
        Command::Validate { config } => return validate(&config),
        Command::Demo { kind } => demo(&kind),
        Command::Run { config } => runtime().and_then(|rt| rt.block_on(run(config))),
        Command::Catalog {
            config,
            json,
            diff,
            write_pins,
        } => runtime().and_then(|rt| {
            rt.block_on(async {
                if diff || write_pins {
                    pins(config, write_pins).await
                } else {
                    catalog(config, json).await
                }
            })
        }),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("junction: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

fn process_env() -> Vec<(String, String)> {
    std::env::vars().collect()
}

fn load(path: &std::path::Path) -> anyhow::Result<junction_config::Config> {
    junction_config::load(path, &process_env())
        .map_err(|errors| anyhow::anyhow!("invalid config {}:\n{errors}", path.display()))
}

fn validate(path: &std::path::Path) -> ExitCode {
    match junction_config::load(path, &process_env()) {
        Ok(c) => {
            println!(
                "{}: ok ({} upstreams, {} routes)",
                path.display(),
                c.upstreams.len(),
                c.routes.len()
            );
            ExitCode::SUCCESS
        }
        Err(errors) => {
            eprintln!("{}: invalid", path.display());
            eprintln!("{errors}");
            ExitCode::FAILURE
        }
    }
}

async fn build_state(
    config: junction_config::Config,
    registry: &prometheus::Registry,
) -> anyhow::Result<State> {
    let metrics = junction_telemetry::Metrics::new(registry).context("registering metrics")?;
    let env: HashMap<String, String> = std::env::vars().collect();
    State::build(config, &env, metrics)
        .await
        .context("building the gateway state")
}

async fn run(path: PathBuf) -> anyhow::Result<()> {
    let config = load(&path)?;
    let format = match config.log.format {
        junction_config::LogFormat::Json => junction_telemetry::LogFormat::Json,
        junction_config::LogFormat::Text => junction_telemetry::LogFormat::Text,
    };
    let _log = junction_telemetry::init_logging(format, &config.log.level);
    let _audit = start_audit(&config.audit)?;
    let registry = prometheus::Registry::new();
    #[cfg(target_os = "linux")]
    {
        let _ = registry.register(Box::new(
            prometheus::process_collector::ProcessCollector::for_self(),
        ));
    }
    let listen = config.server.listen;
    let scheme = if config.server.tls.is_some() {
        "https"
    } else {
        "http"
    };
    let tracing_config = config.tracing.clone();
    let state = Arc::new(build_state(config, &registry).await?);
    if tracing_config.enabled {
        let t = &tracing_config;
        junction_telemetry::otel::init_tracing(
            &junction_telemetry::otel::TraceSettings {
                endpoint: &t.endpoint,
                sampling_ratio: t.sampling_ratio,
                service_name: &t.service_name,
                max_queue: t.max_queue,
                headers: &t.headers,
                timeout: t.timeout,
            },
            state.metrics.trace_spans_dropped_total.clone(),
        )
        .map_err(|e| anyhow::anyhow!(e))?;
    }
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("binding {listen}"))?;
    let local = listener.local_addr()?;
    let shared = Arc::new(Shared::new(state.clone(), registry).map_err(|e| anyhow::anyhow!(e))?);
    // The one line on stdout: tests and scripts read the bound port from it.
    println!("junction listening on {local}");
    tracing::info!(%local, %scheme, config = %path.display(), "junction listening");
    tokio::spawn(junction_server::warm_up(state));
    tokio::spawn(junction_server::watch(shared.clone(), path.clone()));
    junction_server::serve(listener, shared.clone(), shutdown_signal()).await;
    // Stop the clients of the state serving at the end (a reload may have
    // replaced the first one).
    shared.state.load_full().shutdown().await;
    junction_telemetry::otel::shutdown_tracing(std::time::Duration::from_secs(5)).await;
    tracing::info!("junction stopped");
    Ok(())
}

/// The audit log, when `audit.enabled`: its file opened now, so a path
/// that cannot be written fails the start, and opened again on SIGHUP (log
/// rotation). Hold the guard until the end: dropping it writes out what waits.
fn start_audit(
    audit: &junction_config::AuditConfig,
) -> anyhow::Result<Option<junction_telemetry::LogGuard>> {
    use junction_config::AuditFile;
    use junction_telemetry::audit::{self, AuditTarget};
    if !audit.enabled {
        return Ok(None);
    }
    let target = match &audit.file {
        Some(AuditFile::Path(path)) => AuditTarget::File(path),
        // Validation requires a file once enabled: this is `stderr`.
        Some(AuditFile::Stderr) | None => AuditTarget::Stderr,
    };
    let guard = audit::install(target).with_context(|| match &audit.file {
        Some(AuditFile::Path(path)) => format!("opening the audit file {}", path.display()),
        _ => "starting the audit log".to_owned(),
    })?;
    #[cfg(unix)]
    if let AuditTarget::File(_) = target {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut hup) = signal(SignalKind::hangup()) {
            tokio::spawn(async move {
                while hup.recv().await.is_some() {
                    audit::reopen();
                }
            });
        }
    }
    Ok(Some(guard))
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// `junction catalog --diff` / `--write-pins`: every upstream with `pins`,
/// its tools as listed now against its pin file.
async fn pins(path: PathBuf, write: bool) -> anyhow::Result<()> {
    use junction_catalog::pins::{changes, pin, pinned_part, PinFile};
    let config = load(&path)?;
    let _log = junction_telemetry::init_logging(junction_telemetry::LogFormat::Text, "warn");
    let pinned: Vec<(String, PathBuf, std::time::Duration)> = config
        .upstreams
        .iter()
        .filter_map(|u| Some((u.id.clone(), u.pins.as_ref()?.file.clone(), u.list_ttl)))
        .collect();
    if pinned.is_empty() {
        anyhow::bail!("no upstream has `pins`: nothing to compare");
    }
    let deadline = config.catalog.list_deadline;
    let registry = prometheus::Registry::new();
    // Writing pins must work before the files exist.
    let state = if write {
        let mut config = config;
        for u in &mut config.upstreams {
            u.pins = None;
        }
        build_state(config, &registry).await?
    } else {
        build_state(config, &registry).await?
    };
    let mut differ = 0;
    for (id, file, ttl) in &pinned {
        let Some(u) = state.upstreams.get(id) else {
            continue;
        };
        let listed = state.cache.get(u.source.as_ref(), *ttl, deadline).await;
        if listed.status == junction_catalog::ListStatus::Missing {
            anyhow::bail!("upstream {id} did not list its tools; nothing was compared");
        }
        let now: Vec<(String, serde_json::Map<String, serde_json::Value>)> = listed
            .tools
            .iter()
            .filter_map(|t| {
                let o = t.as_object()?;
                Some((o.get("name")?.as_str()?.to_owned(), o.clone()))
            })
            .collect();
        if write {
            let pins = PinFile {
                tools: now.iter().map(|(n, o)| (n.clone(), pin(o))).collect(),
            };
            let text = serde_json::to_string_pretty(&pins)?
                + "
";
            std::fs::write(file, text)
                .with_context(|| format!("upstream {id}: writing {}", file.display()))?;
            println!("{id}: {} tool(s) pinned in {}", now.len(), file.display());
            continue;
        }
        let old: PinFile = match std::fs::read(file) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .with_context(|| format!("upstream {id}: pin file {}", file.display()))?,
            Err(e) => anyhow::bail!("upstream {id}: pin file {}: {e}", file.display()),
        };
        for (name, tool) in &now {
            match old.tools.get(name) {
                None => {
                    differ += 1;
                    println!("{id}/{name}: new, not pinned");
                }
                Some(p) if p.digest != junction_catalog::pins::digest(tool) => {
                    differ += 1;
                    let now = pinned_part(tool);
                    println!("{id}/{name}: changed");
                    for member in changes(&p.definition, &now) {
                        println!("  {member}:");
                        println!(
                            "    pinned: {}",
                            p.definition
                                .get(&member)
                                .unwrap_or(&serde_json::Value::Null)
                        );
                        println!(
                            "    now:    {}",
                            now.get(&member).unwrap_or(&serde_json::Value::Null)
                        );
                    }
                }
                Some(_) => {}
            }
        }
        for name in old
            .tools
            .keys()
            .filter(|n| !now.iter().any(|(m, _)| m == *n))
        {
            differ += 1;
            println!("{id}/{name}: pinned, no longer listed");
        }
    }
    state.shutdown().await;
    if !write {
        println!("{differ} difference(s) from the pins");
    }
    Ok(())
}

async fn catalog(path: PathBuf, json: bool) -> anyhow::Result<()> {
    let config = load(&path)?;
    let _log = junction_telemetry::init_logging(junction_telemetry::LogFormat::Text, "warn");
    let registry = prometheus::Registry::new();
    let routes: Vec<String> = config.routes.iter().map(|r| r.path.clone()).collect();
    let state = build_state(config, &registry).await?;
    let mut out = Vec::new();
    // Overrides that match no listed tool: typos, or tools that went away.
    let mut unmatched = Vec::new();
    for path in &routes {
        let Some(catalog) = junction_server::route_catalog_for(&state, path).await else {
            continue;
        };
        for t in &catalog.tools {
            let secret = junction_catalog::secret_like_headers(&t.header_params);
            let flags: Vec<String> = secret
                .iter()
                .map(|h| format!("secret-like header {h}"))
                .collect();
            out.push(serde_json::json!({
                "route": path,
                "exposed": t.exposed,
                "upstream": t.upstream,
                "original": t.original,
                "flags": flags,
            }));
        }
        if !catalog.degraded.is_empty() {
            eprintln!(
                "route {path}: degraded upstreams (not reachable): {}",
                catalog.degraded.join(", ")
            );
        }
        for origin in &catalog.unmatched {
            unmatched.push(format!("{origin}: names no tool that route {path} lists"));
        }
    }
    state.shutdown().await;
    for e in &unmatched {
        eprintln!("error: {e}");
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!(
            "{:<8} {:<40} {:<16} {:<24} FLAGS",
            "ROUTE", "EXPOSED", "UPSTREAM", "ORIGINAL"
        );
        for t in &out {
            let s = |k: &str| t[k].as_str().unwrap_or("").to_owned();
            let flags: Vec<&str> = t["flags"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|f| f.as_str())
                .collect();
            println!(
                "{:<8} {:<40} {:<16} {:<24} {}",
                s("route"),
                s("exposed"),
                s("upstream"),
                s("original"),
                flags.join("; ")
            );
        }
    }
    if !unmatched.is_empty() {
        anyhow::bail!("{} override(s) name nothing", unmatched.len());
    }
    Ok(())
}

fn demo(kind: &str) -> anyhow::Result<()> {
    let kind: junction_demo::DemoKind = kind.parse().map_err(|e| anyhow::anyhow!("{e}"))?;
    junction_demo::run_stdio(kind).context("demo server")
}
