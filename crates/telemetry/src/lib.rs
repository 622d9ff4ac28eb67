//! Metric families, log setup and the audit log (`audit`). One
//! `prometheus::Registry` is made in `main` and passed down; every subsystem
//! registers its families here, so names and label sets are decided in one
//! file. Labels are bounded: config names, methods and outcomes only; never
//! ids, arguments or error text.

use std::sync::OnceLock;

mod access;
pub mod audit;
pub mod otel;
mod writer;

pub use access::{access_log, AccessLog, AccessRecord};
pub use writer::{LogBuffer, LogGuard};

use prometheus::{
    Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry,
};

/// The gateway's metric families (DESIGN §7), shared: a clone is one
/// reference count, not one per family (a tool call keeps a clone to record
/// its outcome when it ends).
#[derive(Clone)]
pub struct Metrics(std::sync::Arc<MetricFamilies>);

impl std::ops::Deref for Metrics {
    type Target = MetricFamilies;

    fn deref(&self) -> &MetricFamilies {
        &self.0
    }
}

/// A request counter and its duration histogram for one fixed label set with
/// outcome `ok`, looked up in their vecs on first use and then kept: the hot
/// path pays one `OnceLock` read instead of hashing its label values into each
/// vec's map on every request. Sound because children are never removed from
/// the vecs (no `remove_label_values` anywhere), so a kept child is the one a
/// scrape reads; series appear on first use, as before.
#[derive(Default)]
pub struct OkSeries(OnceLock<(IntCounter, Histogram)>);

impl OkSeries {
    /// Counts one request taking `secs`. `children` looks the pair up for the
    /// request's outcome: the first time for `ok` (then kept), every time for
    /// any other outcome (rare, and not the pair kept here).
    pub fn observe(&self, ok: bool, secs: f64, children: impl FnOnce() -> (IntCounter, Histogram)) {
        let looked_up;
        let (count, duration) = if ok {
            self.0.get_or_init(children)
        } else {
            looked_up = children();
            &looked_up
        };
        count.inc();
        duration.observe(secs);
    }
}

/// One upstream's per-tool `OkSeries` (`junction_tool_calls_total` and
/// its duration, outcome `ok`), by exposed tool name: a call pays one map
/// read instead of the label cap's lookup and two vec lookups. A tool's
/// label never changes once given (`ToolLabels` only grows), so the kept
/// pair is the one a fresh lookup would find. Bounded by the label cap: a
/// tool past it is looked up every time, as before. FNV, not SipHash: the
/// keys are short names from the catalog, at most the cap of them, and
/// hashing them is most of the read.
#[derive(Default)]
pub struct ToolOkSeries(std::sync::RwLock<fnv::FnvHashMap<String, (IntCounter, Histogram)>>);

impl ToolOkSeries {
    /// Counts one call of `tool` taking `secs`; `children` looks its pair
    /// up for the call's outcome: once for `ok` (then kept), every time for
    /// any other outcome (rare, and not the pair kept here).
    pub fn observe(
        &self,
        tool: &str,
        ok: bool,
        secs: f64,
        children: impl FnOnce() -> (IntCounter, Histogram),
    ) {
        let count = |(calls, duration): &(IntCounter, Histogram)| {
            calls.inc();
            duration.observe(secs);
        };
        if !ok {
            return count(&children());
        }
        {
            let kept = self
                .0
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(pair) = kept.get(tool) {
                return count(pair);
            }
        }
        let pair = children();
        count(&pair);
        let mut kept = self
            .0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if kept.len() < ToolLabels::DEFAULT_CAP {
            kept.entry(tool.to_owned()).or_insert(pair);
        }
    }
}

pub struct MetricFamilies {
    pub requests_total: IntCounterVec,
    pub request_duration_seconds: HistogramVec,
    pub tool_calls_total: IntCounterVec,
    pub upstream_requests_total: IntCounterVec,
    pub upstream_up: IntGaugeVec,
    pub upstream_tools: IntGaugeVec,
    pub upstream_connections_opened_total: IntCounterVec,
    pub upstream_connections: IntGaugeVec,
    /// Tokens for upstream requests by `kind` (`static`, `client_credentials`,
    /// `token_exchange`, `passthrough`) and `outcome` (`fresh`: a token
    /// request was made; `cached`; `refused`, `unavailable`, `audience_mismatch`).
    pub upstream_credentials_total: IntCounterVec,
    /// Finished spans the export queue had no room for (`otel`).
    pub trace_spans_dropped_total: IntCounter,
    /// Tools held back by their pins, per upstream, as of the last merge.
    pub tools_quarantined: IntGaugeVec,
    /// A route's guardrail webhook: its decisions, and how long it took.
    pub guardrail_decisions_total: IntCounterVec,
    pub guardrail_duration_seconds: HistogramVec,
    pub tools_dropped_total: IntCounterVec,
    pub catalog_lookups_total: IntCounterVec,
    pub tool_call_duration_seconds: HistogramVec,
    pub upstream_request_duration_seconds: HistogramVec,
    pub fanout_duration_seconds: HistogramVec,
    pub auth_failures_total: IntCounterVec,
    pub rate_limited_total: IntCounterVec,
    pub config_reloads_total: IntCounterVec,
    pub config_last_reload_success: IntGauge,
    pub open_streams: IntGaugeVec,
    /// A replica's bounded tables (held calls, ended sessions, ...): live
    /// entries and the most each holds, set at each scrape.
    pub table_entries: IntGaugeVec,
    pub table_capacity: IntGaugeVec,
    /// The fleet bus (`fleet.redis_url`), set at each scrape; no series
    /// without one: 1 while subscribed to Redis and caught up.
    pub fleet_connected: IntGaugeVec,
    /// Changes the fleet bus dropped because Redis was down too long.
    pub fleet_dropped_total: IntCounterVec,
    /// Which exposed tool names may be used as a `tool` label (bounded).
    pub tool_labels: ToolLabels,
    /// `open_streams{kind="call"}` and `catalog_lookups_total{result=hit|miss}`,
    /// kept once looked up (every tool call touches them).
    open_call_streams: OnceLock<IntGauge>,
    catalog_hits: OnceLock<IntCounter>,
    catalog_misses: OnceLock<IntCounter>,
}

impl MetricFamilies {
    /// `open_streams{kind="call"}`.
    pub fn open_call_streams(&self) -> &IntGauge {
        self.open_call_streams
            .get_or_init(|| self.open_streams.with_label_values(&["call"]))
    }

    /// `catalog_lookups_total{result="hit"}` (a memo served the catalog) or
    /// `{result="miss"}` (it was merged).
    pub fn catalog_lookup(&self, hit: bool) -> &IntCounter {
        let (slot, result) = if hit {
            (&self.catalog_hits, "hit")
        } else {
            (&self.catalog_misses, "miss")
        };
        slot.get_or_init(|| self.catalog_lookups_total.with_label_values(&[result]))
    }
}

/// At most `cap` distinct tool names become label values; every later one is
/// counted as `other`, so a catalog of thousands of tools cannot blow up the
/// series count. Names come only from the catalog (never from client input).
#[derive(Clone)]
pub struct ToolLabels {
    seen: std::sync::Arc<std::sync::RwLock<std::collections::HashSet<String>>>,
    cap: usize,
}

impl ToolLabels {
    pub const DEFAULT_CAP: usize = 500;

    pub fn new(cap: usize) -> ToolLabels {
        ToolLabels {
            seen: Default::default(),
            cap,
        }
    }

    /// The label to use for this catalog tool name.
    pub fn label<'a>(&self, tool: &'a str) -> &'a str {
        if let Ok(seen) = self.seen.read() {
            if seen.contains(tool) {
                return tool;
            }
            if seen.len() >= self.cap {
                return "other";
            }
        }
        match self.seen.write() {
            Ok(mut seen) if seen.len() < self.cap || seen.contains(tool) => {
                seen.insert(tool.to_owned());
                tool
            }
            _ => "other",
        }
    }
}

const LATENCY_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 30.0,
];

fn histogram(name: &str, help: &str, labels: &[&str]) -> Result<HistogramVec, prometheus::Error> {
    HistogramVec::new(
        HistogramOpts::new(name, help).buckets(LATENCY_BUCKETS.to_vec()),
        labels,
    )
}

impl Metrics {
    pub fn new(registry: &Registry) -> Result<Metrics, prometheus::Error> {
        let m = MetricFamilies {
            requests_total: IntCounterVec::new(
                Opts::new(
                    "junction_requests_total",
                    "MCP requests received, by route, method and outcome",
                ),
                &["route", "method", "outcome"],
            )?,
            request_duration_seconds: HistogramVec::new(
                HistogramOpts::new("junction_request_duration_seconds", "MCP request duration")
                    .buckets(vec![
                        0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                        10.0,
                    ]),
                &["route", "method"],
            )?,
            tool_calls_total: IntCounterVec::new(
                Opts::new(
                    "junction_tool_calls_total",
                    "tools/call requests, by upstream, tool and outcome",
                ),
                &["upstream", "tool", "outcome"],
            )?,
            upstream_requests_total: IntCounterVec::new(
                Opts::new(
                    "junction_upstream_requests_total",
                    "Requests sent to upstreams",
                ),
                &["upstream", "method", "outcome"],
            )?,
            upstream_up: IntGaugeVec::new(
                Opts::new(
                    "junction_upstream_up",
                    "1 when the upstream answered its last request",
                ),
                &["upstream"],
            )?,
            upstream_tools: IntGaugeVec::new(
                Opts::new(
                    "junction_upstream_tools",
                    "Tools the upstream contributes to the catalog",
                ),
                &["upstream"],
            )?,
            upstream_connections_opened_total: IntCounterVec::new(
                Opts::new(
                    "junction_upstream_connections_opened_total",
                    "Connections opened to an HTTP upstream (TCP, TLS and HTTP handshake done)",
                ),
                &["upstream"],
            )?,
            upstream_connections: IntGaugeVec::new(
                Opts::new(
                    "junction_upstream_connections",
                    "Open connections to an HTTP upstream, in use or idle in the pool",
                ),
                &["upstream"],
            )?,
            upstream_credentials_total: IntCounterVec::new(
                Opts::new(
                    "junction_upstream_credentials_total",
                    "Tokens obtained for upstream requests, by credentials kind and outcome",
                ),
                &["upstream", "kind", "outcome"],
            )?,
            guardrail_decisions_total: IntCounterVec::new(
                Opts::new(
                    "junction_guardrail_decisions_total",
                    "Guardrail webhook decisions (allow, deny, rewrite, error_allowed, error_denied) by route and phase",
                ),
                &["route", "phase", "decision"],
            )?,
            guardrail_duration_seconds: HistogramVec::new(
                HistogramOpts::new(
                    "junction_guardrail_duration_seconds",
                    "Time the guardrail webhook took to decide, by route and phase",
                ),
                &["route", "phase"],
            )?,
            tools_quarantined: IntGaugeVec::new(
                Opts::new(
                    "junction_tools_quarantined",
                    "Tools of an upstream held back because their definition no longer matches its pin (or has none)",
                ),
                &["upstream"],
            )?,
            trace_spans_dropped_total: IntCounter::new(
                "junction_trace_spans_dropped_total",
                "Finished spans dropped because the export queue (tracing.max_queue) was full",
            )?,
            tools_dropped_total: IntCounterVec::new(
                Opts::new(
                    "junction_tools_dropped_total",
                    "Upstream tools left out of the catalog",
                ),
                &["upstream", "reason"],
            )?,
            catalog_lookups_total: IntCounterVec::new(
                Opts::new("junction_catalog_lookups_total", "Catalog reads, by result"),
                &["result"],
            )?,
            tool_call_duration_seconds: histogram(
                "junction_tool_call_duration_seconds",
                "tools/call duration through the gateway",
                &["upstream", "tool"],
            )?,
            upstream_request_duration_seconds: histogram(
                "junction_upstream_request_duration_seconds",
                "Duration of requests to upstreams",
                &["upstream", "method"],
            )?,
            fanout_duration_seconds: histogram(
                "junction_fanout_duration_seconds",
                "tools/list fan-out duration per route",
                &["route"],
            )?,
            auth_failures_total: IntCounterVec::new(
                Opts::new(
                    "junction_auth_failures_total",
                    "Rejected authentications, by reason",
                ),
                &["reason"],
            )?,
            rate_limited_total: IntCounterVec::new(
                Opts::new(
                    "junction_rate_limited_total",
                    "Requests rejected by a rate-limit rule",
                ),
                &["rule"],
            )?,
            config_reloads_total: IntCounterVec::new(
                Opts::new("junction_config_reloads_total", "Config reloads, by result"),
                &["result"],
            )?,
            config_last_reload_success: IntGauge::new(
                "junction_config_last_reload_success",
                "1 when the last config (re)load succeeded",
            )?,
            open_streams: IntGaugeVec::new(
                Opts::new("junction_open_streams", "Open SSE streams, by kind"),
                &["kind"],
            )?,
            table_entries: IntGaugeVec::new(
                Opts::new(
                    "junction_table_entries",
                    "Live entries in one of the replica's bounded tables",
                ),
                &["table"],
            )?,
            table_capacity: IntGaugeVec::new(
                Opts::new(
                    "junction_table_capacity",
                    "The most entries one of the replica's bounded tables holds",
                ),
                &["table"],
            )?,
            fleet_connected: IntGaugeVec::new(
                Opts::new(
                    "junction_fleet_connected",
                    "1 while the fleet bus is subscribed to its Redis and caught up",
                ),
                &["bus"],
            )?,
            fleet_dropped_total: IntCounterVec::new(
                Opts::new(
                    "junction_fleet_dropped_total",
                    "Changes the fleet bus dropped because its queue was full while Redis was unreachable",
                ),
                &["bus"],
            )?,
            tool_labels: ToolLabels::new(ToolLabels::DEFAULT_CAP),
            open_call_streams: OnceLock::new(),
            catalog_hits: OnceLock::new(),
            catalog_misses: OnceLock::new(),
        };
        m.config_last_reload_success.set(1);
        registry.register(Box::new(m.requests_total.clone()))?;
        registry.register(Box::new(m.request_duration_seconds.clone()))?;
        registry.register(Box::new(m.tool_calls_total.clone()))?;
        registry.register(Box::new(m.upstream_requests_total.clone()))?;
        registry.register(Box::new(m.upstream_up.clone()))?;
        registry.register(Box::new(m.upstream_tools.clone()))?;
        registry.register(Box::new(m.tools_dropped_total.clone()))?;
        registry.register(Box::new(m.catalog_lookups_total.clone()))?;
        registry.register(Box::new(m.tool_call_duration_seconds.clone()))?;
        registry.register(Box::new(m.upstream_request_duration_seconds.clone()))?;
        registry.register(Box::new(m.fanout_duration_seconds.clone()))?;
        registry.register(Box::new(m.auth_failures_total.clone()))?;
        registry.register(Box::new(m.rate_limited_total.clone()))?;
        registry.register(Box::new(m.config_reloads_total.clone()))?;
        registry.register(Box::new(m.config_last_reload_success.clone()))?;
        registry.register(Box::new(m.open_streams.clone()))?;
        registry.register(Box::new(m.table_entries.clone()))?;
        registry.register(Box::new(m.table_capacity.clone()))?;
        registry.register(Box::new(m.fleet_connected.clone()))?;
        registry.register(Box::new(m.fleet_dropped_total.clone()))?;
        registry.register(Box::new(m.upstream_connections_opened_total.clone()))?;
        registry.register(Box::new(m.upstream_connections.clone()))?;
        registry.register(Box::new(m.upstream_credentials_total.clone()))?;
        registry.register(Box::new(m.trace_spans_dropped_total.clone()))?;
        registry.register(Box::new(m.tools_quarantined.clone()))?;
        registry.register(Box::new(m.guardrail_decisions_total.clone()))?;
        registry.register(Box::new(m.guardrail_duration_seconds.clone()))?;
        registry.register(Box::new(DroppedLines::new(
            "junction_log_lines_dropped_total",
            "Log lines dropped because stderr did not keep up",
            writer::dropped_lines,
        )?))?;
        registry.register(Box::new(DroppedLines::new(
            "junction_audit_lines_dropped_total",
            "Audit lines dropped because the audit file did not keep up",
            audit::dropped_lines,
        )?))?;
        Ok(Metrics(std::sync::Arc::new(m)))
    }
}

/// `junction_log_lines_dropped_total` and `junction_audit_lines_dropped_total`:
/// a writer's count ([`writer::dropped_lines`], [`audit::dropped_lines`]),
/// brought up to date at each scrape.
struct DroppedLines {
    counter: IntCounter,
    read: fn() -> u64,
    /// One scrape at a time adds the difference.
    sync: std::sync::Mutex<()>,
}

impl DroppedLines {
    fn new(name: &str, help: &str, read: fn() -> u64) -> Result<DroppedLines, prometheus::Error> {
        Ok(DroppedLines {
            counter: IntCounter::new(name, help)?,
            read,
            sync: std::sync::Mutex::new(()),
        })
    }
}

impl prometheus::core::Collector for DroppedLines {
    fn desc(&self) -> Vec<&prometheus::core::Desc> {
        self.counter.desc()
    }

    fn collect(&self) -> Vec<prometheus::proto::MetricFamily> {
        let _one = self.sync.lock().unwrap_or_else(|e| e.into_inner());
        let (dropped, shown) = ((self.read)(), self.counter.get());
        if dropped > shown {
            self.counter.inc_by(dropped - shown);
        }
        self.counter.collect()
    }
}

/// Renders the registry in the Prometheus text format.
pub fn render(registry: &Registry) -> Vec<u8> {
    use prometheus::Encoder;
    let mut buf = Vec::new();
    // Encoding into a Vec cannot fail for the text encoder.
    let _ = prometheus::TextEncoder::new().encode(&registry.gather(), &mut buf);
    buf
}

/// Log format chosen in config.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

/// Installs the global tracing subscriber writing to stderr. `filter` is an
/// env-filter directive such as `info` or `junction=debug`; `RUST_LOG` wins when set.
///
/// Lines are formatted where they are logged and written by a thread of
/// their own (`writer`): no request pays a system call for its log lines,
/// and a stalled stderr reader cannot stall request handling.
pub fn init_logging(format: LogFormat, filter: &str) -> LogGuard {
    let Ok((buffer, guard)) = writer::start(std::io::stderr()) else {
        // No thread for the writer: log straight to stderr.
        let _ = install(format, filter, std::io::stderr);
        return LogGuard::none();
    };
    if !install(format, filter, buffer.clone()) {
        return LogGuard::none();
    }
    audit::log_buffer(buffer.clone());
    access::install(buffer, format);
    guard
}

/// The global subscriber writing to `writer`; false if one was installed.
fn install<W>(format: LogFormat, filter: &str, writer: W) -> bool
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(filter));
    // Colour only for a person at a terminal: escape codes in a file or a
    // collector's pipe are noise (and cost more than the rest of the line).
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(writer);
    match format {
        LogFormat::Json => builder.json().try_init().is_ok(),
        LogFormat::Text => builder.try_init().is_ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropped_log_lines_are_read_from_the_writer_at_each_scrape() {
        let registry = Registry::new();
        assert!(Metrics::new(&registry).is_ok());
        let before = writer::dropped_lines();
        let text = String::from_utf8(render(&registry)).unwrap_or_default();
        let after = writer::dropped_lines();
        let shown = text
            .lines()
            .find_map(|l| l.strip_prefix("junction_log_lines_dropped_total "))
            .and_then(|v| v.trim().parse::<u64>().ok());
        // Other tests in this binary drop lines on purpose, concurrently.
        assert!(
            shown.is_some_and(|n| (before..=after).contains(&n)),
            "{shown:?} not in {before}..={after}:\n{text}"
        );
    }

    #[test]
    fn tool_ok_series_keeps_each_tools_ok_pair_up_to_the_label_cap() {
        let registry = Registry::new();
        let Ok(m) = Metrics::new(&registry) else {
            panic!("metrics register");
        };
        let series = ToolOkSeries::default();
        let lookups = std::cell::Cell::new(0);
        let children = |tool: &str, outcome: &str| {
            lookups.set(lookups.get() + 1);
            (
                m.tool_calls_total.with_label_values(&["up", tool, outcome]),
                m.tool_call_duration_seconds
                    .with_label_values(&["up", tool]),
            )
        };
        for (tool, ok) in [
            ("a", true),
            ("b", true),
            ("a", true),
            ("a", false),
            ("b", true),
        ] {
            let outcome = if ok { "ok" } else { "error" };
            series.observe(tool, ok, 0.1, || children(tool, outcome));
        }
        let count =
            |tool: &str, o: &str| m.tool_calls_total.with_label_values(&["up", tool, o]).get();
        assert_eq!(
            (count("a", "ok"), count("a", "error"), count("b", "ok")),
            (2, 1, 2)
        );
        let duration = m.tool_call_duration_seconds.with_label_values(&["up", "a"]);
        assert_eq!(duration.get_sample_count(), 3);
        assert_eq!(
            lookups.get(),
            3,
            "each tool's ok looked up once, error every time"
        );
        // Past the cap nothing more is kept: such a tool is looked up per call.
        for i in 0..ToolLabels::DEFAULT_CAP {
            series.observe(&format!("t{i}"), true, 0.1, || children("other", "ok"));
        }
        let before = lookups.get();
        series.observe("late", true, 0.1, || children("other", "ok"));
        series.observe("late", true, 0.1, || children("other", "ok"));
        assert_eq!(lookups.get() - before, 2);
        assert_eq!(count("other", "ok"), ToolLabels::DEFAULT_CAP as u64 + 2);
    }

    #[test]
    fn ok_series_keeps_the_ok_pair_and_looks_others_up_each_time() {
        let registry = Registry::new();
        let Ok(m) = Metrics::new(&registry) else {
            panic!("metrics register");
        };
        let series = OkSeries::default();
        let lookups = std::cell::Cell::new(0);
        let children = |outcome: &str| {
            lookups.set(lookups.get() + 1);
            (
                m.requests_total
                    .with_label_values(&["/mcp", "ping", outcome]),
                m.request_duration_seconds
                    .with_label_values(&["/mcp", "ping"]),
            )
        };
        series.observe(true, 0.1, || children("ok"));
        series.observe(true, 0.1, || children("ok"));
        series.observe(false, 0.1, || children("error"));
        series.observe(false, 0.1, || children("error"));
        series.observe(true, 0.1, || children("ok"));
        let count = |o: &str| {
            m.requests_total
                .with_label_values(&["/mcp", "ping", o])
                .get()
        };
        assert_eq!((count("ok"), count("error")), (3, 2));
        let duration = m
            .request_duration_seconds
            .with_label_values(&["/mcp", "ping"]);
        assert_eq!(duration.get_sample_count(), 5);
        assert_eq!(lookups.get(), 3, "ok looked up once, error every time");
    }

    #[test]
    fn tool_labels_are_capped_with_an_other_bucket() {
        let l = ToolLabels::new(2);
        assert_eq!(l.label("a__x"), "a__x");
        assert_eq!(l.label("a__y"), "a__y");
        assert_eq!(l.label("a__z"), "other");
        assert_eq!(
            l.label("a__x"),
            "a__x",
            "names seen before keep their label"
        );
    }

    #[test]
    fn families_render_with_their_names() {
        let r = Registry::new();
        let m = Metrics::new(&r).unwrap();
        m.requests_total
            .with_label_values(&["/mcp", "tools/list", "ok"])
            .inc();
        m.upstream_credentials_total
            .with_label_values(&["crm", "client_credentials", "fresh"])
            .inc();
        let text = String::from_utf8(render(&r)).unwrap();
        assert!(text.contains(
            "junction_requests_total{method=\"tools/list\",outcome=\"ok\",route=\"/mcp\"} 1"
        ));
        assert!(text.contains(
            "junction_upstream_credentials_total{kind=\"client_credentials\",outcome=\"fresh\",upstream=\"crm\"} 1"
        ));
        assert!(
            Metrics::new(&r).is_err(),
            "registering twice in one registry must fail"
        );
    }
}
