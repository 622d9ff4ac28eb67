//! `tracing`: OpenTelemetry traces of MCP requests, exported over OTLP/HTTP
//! (protobuf). Off unless `enabled`; validated here, run by the telemetry
//! crate (`junction_telemetry::otel`). Read at start: a reload does not
//! change it.

use std::time::Duration;

use serde_json::Value;

use crate::checks;
use crate::walk::{Ctx, Obj};

/// Where and how spans go.
#[derive(Clone, Debug, PartialEq)]
pub struct TracingConfig {
    pub enabled: bool,
    /// The OTLP/HTTP traces URL (`…/v1/traces`).
    pub endpoint: String,
    /// Share of new traces recorded, 0.0..=1.0; a client's sampled flag is
    /// followed when it sends `traceparent`.
    pub sampling_ratio: f64,
    pub service_name: String,
    /// Finished spans waiting for export; more are dropped and counted.
    pub max_queue: usize,
    /// Extra headers of every export request (e.g. an API key).
    pub headers: Vec<(String, String)>,
    /// One export request's deadline.
    pub timeout: Duration,
}

impl Default for TracingConfig {
    fn default() -> Self {
        TracingConfig {
            enabled: false,
            endpoint: "http://127.0.0.1:4318/v1/traces".into(),
            sampling_ratio: 1.0,
            service_name: "junction".into(),
            max_queue: 2048,
            headers: Vec::new(),
            timeout: Duration::from_secs(10),
        }
    }
}

pub(crate) fn tracing(ctx: &mut Ctx, v: Option<&Value>) -> TracingConfig {
    let d = TracingConfig::default();
    let o = Obj::new(
        ctx,
        v,
        "tracing",
        &[
            "enabled",
            "endpoint",
            "sampling_ratio",
            "service_name",
            "max_queue",
            "headers",
            "timeout",
        ],
    );
    let endpoint = match o.nonempty(ctx, "endpoint") {
        Some(url) => {
            checks::http_url(ctx, &o.key_path("endpoint"), &url, false);
            url
        }
        None => d.endpoint,
    };
    let sampling_ratio = match o.get("sampling_ratio") {
        None => d.sampling_ratio,
        // A number, or its text (from a `JUNCTION_TRACING__SAMPLING_RATIO`).
        Some(v) => match v
            .as_f64()
            .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
        {
            Some(r) if (0.0..=1.0).contains(&r) => r,
            _ => {
                ctx.err(
                    &o.key_path("sampling_ratio"),
                    "expected a number from 0.0 (no new trace) to 1.0 (every trace)",
                );
                d.sampling_ratio
            }
        },
    };
    let headers = o
        .string_map(ctx, "headers")
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(name, path, value)| {
            checks::header_name(ctx, &path, &name).map(|_| (name, value))
        })
        .collect();
    TracingConfig {
        enabled: o.boolean(ctx, "enabled", false),
        endpoint,
        sampling_ratio,
        service_name: o.nonempty(ctx, "service_name").unwrap_or(d.service_name),
        max_queue: o
            .int(ctx, "max_queue", 1, 1_000_000)
            .map_or(d.max_queue, |n| n as usize),
        headers,
        timeout: o.positive_duration(ctx, "timeout", d.timeout),
    }
}
