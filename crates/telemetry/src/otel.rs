//! OpenTelemetry traces (`tracing` in the config; off by default): the tracer
//! the server starts its spans with, W3C trace context in and out, and the
//! export of finished spans over OTLP/HTTP (protobuf, by `opentelemetry-otlp`
//! on hyper).
//!
//! Export never runs on the request path: a finished span is handed to a
//! bounded queue (`tracing.max_queue`) with one `try_send`; a task batches the
//! queue into export requests. A full queue drops the span and counts it in
//! `junction_trace_spans_dropped_total` (the SDK's own batch processor drops
//! silently, which is why the queue is Junction's). With tracing off nothing
//! here exists: [`tracer`] is one atomic load that answers `None`.
//!
//! Process-wide, like the access log: set once at start by `main`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::{SpanContext, TraceContextExt, TracerProvider as _};
use opentelemetry::Context;
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{
    Sampler, SdkTracer, SdkTracerProvider, Span, SpanData, SpanExporter, SpanProcessor,
};
use opentelemetry_sdk::Resource;
use prometheus::IntCounter;
use tokio::sync::{mpsc, Notify};

/// Spans per export request at most.
const BATCH: usize = 512;
/// How long the first span of a batch waits for company.
const LINGER: Duration = Duration::from_millis(500);

struct Tracing {
    tracer: SdkTracer,
    provider: SdkTracerProvider,
    queue: std::sync::Arc<Queue>,
    exporter: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

static TRACING: OnceLock<Tracing> = OnceLock::new();

/// The tracer Junction's spans come from.
pub use opentelemetry_sdk::trace::SdkTracer as Tracer;

/// The tracer, when tracing is on.
pub fn tracer() -> Option<&'static SdkTracer> {
    TRACING.get().map(|t| &t.tracer)
}

/// What `init_tracing` needs from the config.
pub struct TraceSettings<'a> {
    pub endpoint: &'a str,
    pub sampling_ratio: f64,
    pub service_name: &'a str,
    pub max_queue: usize,
    pub headers: &'a [(String, String)],
    pub timeout: Duration,
}

/// Starts tracing (inside the tokio runtime: the export task is spawned on
/// it). A second call does nothing.
pub fn init_tracing(s: &TraceSettings<'_>, dropped: IntCounter) -> Result<(), String> {
    if TRACING.get().is_some() {
        return Ok(());
    }
    let headers: HashMap<String, String> = s.headers.iter().cloned().collect();
    let client = opentelemetry_http::hyper::HyperClient::new(https_connector()?, s.timeout, None);
    let resource = Resource::builder()
        .with_service_name(s.service_name.to_owned())
        .build();
    let mut exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(client)
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(s.endpoint)
        .with_timeout(s.timeout)
        .with_headers(headers)
        .build()
        .map_err(|e| format!("tracing.endpoint {}: {e}", s.endpoint))?;
    // The export loop is Junction's, so the exporter learns the resource here.
    exporter.set_resource(&resource);
    let (tx, rx) = mpsc::channel(s.max_queue.max(1));
    let queue = std::sync::Arc::new(Queue {
        tx,
        dropped,
        closing: AtomicBool::new(false),
        close: Notify::new(),
    });
    let task = tokio::spawn(export_loop(exporter, rx, queue.clone()));
    let provider = SdkTracerProvider::builder()
        .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
            s.sampling_ratio,
        ))))
        .with_span_processor(Processor(queue.clone()))
        .with_resource(resource)
        .build();
    let tracer = provider.tracer("junction");
    let _ = TRACING.set(Tracing {
        tracer,
        provider,
        queue,
        exporter: Mutex::new(Some(task)),
    });
    Ok(())
}

/// Exports what is queued and stops (at shutdown), waiting at most `grace`.
pub async fn shutdown_tracing(grace: Duration) {
    let Some(t) = TRACING.get() else { return };
    t.queue.closing.store(true, Ordering::Release);
    t.queue.close.notify_one();
    let task = t.exporter.lock().ok().and_then(|mut g| g.take());
    if let Some(task) = task {
        let _ = tokio::time::timeout(grace, task).await;
    }
    let _ = t.provider.shutdown();
}

/// The trace context a client sent (`traceparent`, `tracestate`), as the
/// parent of the request's span; an empty context when it sent none.
pub fn extract(headers: &http::HeaderMap) -> Context {
    struct Headers<'a>(&'a http::HeaderMap);
    impl Extractor for Headers<'_> {
        fn get(&self, key: &str) -> Option<&str> {
            self.0.get(key).and_then(|v| v.to_str().ok())
        }
        fn keys(&self) -> Vec<&str> {
            self.0.keys().map(|k| k.as_str()).collect()
        }
    }
    TraceContextPropagator::new().extract(&Headers(headers))
}

/// `traceparent` and `tracestate` values for a request made inside `cx`'s
/// span (W3C trace context); `None` without a valid span.
pub fn traceparent(cx: &Context) -> Option<(String, Option<String>)> {
    let span = cx.span();
    let sc: &SpanContext = span.span_context();
    if !sc.is_valid() {
        return None;
    }
    let parent = format!(
        "00-{}-{}-{:02x}",
        sc.trace_id(),
        sc.span_id(),
        sc.trace_flags().to_u8()
    );
    let state = sc.trace_state().header();
    Some((parent, (!state.is_empty()).then_some(state)))
}

fn https_connector(
) -> Result<hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>, String>
{
    Ok(hyper_rustls::HttpsConnectorBuilder::new()
        .with_webpki_roots()
        .https_or_http()
        .enable_http1()
        .build())
}

/// The bounded hand-over from finished spans to the export task.
#[derive(Debug)]
struct Queue {
    tx: mpsc::Sender<SpanData>,
    dropped: IntCounter,
    closing: AtomicBool,
    close: Notify,
}

#[derive(Debug)]
struct Processor(std::sync::Arc<Queue>);

impl SpanProcessor for Processor {
    fn on_start(&self, _span: &mut Span, _cx: &Context) {}

    fn on_end(&self, span: SpanData) {
        if !span.span_context.is_sampled() {
            return;
        }
        if self.0.tx.try_send(span).is_err() {
            self.0.dropped.inc();
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        Ok(())
    }

    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        self.0.closing.store(true, Ordering::Release);
        self.0.close.notify_one();
        Ok(())
    }
}

async fn export_loop(
    exporter: opentelemetry_otlp::SpanExporter,
    mut rx: mpsc::Receiver<SpanData>,
    queue: std::sync::Arc<Queue>,
) {
    let mut batch: Vec<SpanData> = Vec::with_capacity(BATCH);
    loop {
        let closing = tokio::select! {
            got = rx.recv() => match got {
                Some(span) => {
                    batch.push(span);
                    false
                }
                None => true,
            },
            () = queue.close.notified() => true,
        };
        if !closing {
            // Let a few more arrive, so one request carries many spans.
            let until = tokio::time::Instant::now() + LINGER;
            while batch.len() < BATCH {
                let room = BATCH - batch.len();
                match tokio::time::timeout_at(until, rx.recv_many(&mut batch, room)).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
            }
        } else {
            while let Ok(span) = rx.try_recv() {
                batch.push(span);
            }
        }
        if !batch.is_empty() {
            let spans = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
            if let Err(e) = exporter.export(spans).await {
                tracing::warn!(error = %e, "exporting spans failed");
            }
        }
        if closing || queue.closing.load(Ordering::Acquire) && rx.is_empty() {
            return;
        }
    }
}
