//! Recorders of upstream work, below everything that goes upstream (the
//! tool-list source of `state`, list fan-outs, forwarded calls): a [`Record`]
//! counts one request's outcome exactly once (with what the call ended
//! with, [`Answer`], for a recorder that asks: the audit log), and counts a
//! request whose client left first as `cancelled`; [`UpstreamSpan`] is its
//! span when tracing is on, and the W3C trace context the request carries
//! upstream.

/// Records a call's outcome label once: [`Record::record`] with the
/// outcome, or, once [`Record::arm`]ed (the call went upstream), `cancelled`
/// when it is dropped unrecorded: the client went away while Junction waited
/// (the connection dropped the request's future, or the response stream's
/// reader is gone). Unarmed, a refusal drops it unrecorded: a refused request is no call.
pub struct Record {
    f: Option<RecordFn>,
    armed: bool,
}

type RecordFn = Box<dyn FnOnce(&str, Answer<'_>) + Send>;

/// What a call ended with, for a recorder that wants more than its outcome
/// label (the audit log: [`Record::answered`]).
#[derive(Clone, Copy)]
pub enum Answer<'a> {
    /// Not known where the outcome was recorded (cancelled, or counted
    /// before the answer was made).
    Unknown,
    /// The JSON-RPC message the client got: a result or an upstream's error.
    Message(&'a [u8]),
    /// Junction's error the client got.
    Failed(&'a crate::error::GatewayError),
}

impl Record {
    pub fn new(f: impl FnOnce(&str) + Send + 'static) -> Record {
        Record::answered(move |outcome: &str, _: Answer<'_>| f(outcome))
    }

    /// A recorder that is also told what the call ended with, where that
    /// is known ([`Record::record_answer`]).
    pub fn answered(f: impl FnOnce(&str, Answer<'_>) + Send + 'static) -> Record {
        Record {
            f: Some(Box::new(f)),
            armed: false,
        }
    }

    /// Counts one request in the upstream's series
    /// (`junction_upstream_requests_total`, and its duration since now).
    pub fn upstream(metrics: &junction_telemetry::Metrics, upstream: &str, method: &str) -> Record {
        Record::new(upstream_count(metrics, upstream, method))
    }

    /// From now on, dropping it unrecorded counts the call as `cancelled`.
    pub fn arm(&mut self) {
        self.armed = true;
    }

    pub fn record(self, outcome: &str) {
        self.record_answer(outcome, Answer::Unknown);
    }

    /// [`Record::record`], with what the client got.
    pub fn record_answer(mut self, outcome: &str, answer: Answer<'_>) {
        if let Some(f) = self.f.take() {
            f(outcome, answer);
        }
    }
}

/// What [`Record::upstream`] records, for a recorder that does more with
/// the outcome (an audit line).
pub fn upstream_count(
    metrics: &junction_telemetry::Metrics,
    upstream: &str,
    method: &str,
) -> impl FnOnce(&str) + Send + 'static {
    let started = std::time::Instant::now();
    let (m, u, method) = (metrics.clone(), upstream.to_owned(), method.to_owned());
    move |outcome: &str| {
        m.upstream_requests_total
            .with_label_values(&[&u, &method, outcome])
            .inc();
        m.upstream_request_duration_seconds
            .with_label_values(&[&u, &method])
            .observe(started.elapsed().as_secs_f64());
    }
}

impl Drop for Record {
    fn drop(&mut self) {
        if let Some(f) = self.f.take().filter(|_| self.armed) {
            f("cancelled", Answer::Unknown);
        }
    }
}

/// One list page request to an upstream, stopped at the list's `deadline`
/// (`None`), and counted in the upstream's series however it ends: `ok` (a
/// page, or -32601 from an upstream that has no such list: Junction reads
/// that as an empty list, not a failure), `error`, `upstream_timeout` (the
/// deadline passed), or `cancelled` when it is dropped unfinished (the client
/// that asked for the list left before it was in).
pub async fn counted_page<T, E>(
    metrics: &junction_telemetry::Metrics,
    upstream: &str,
    method: &str,
    deadline: tokio::time::Instant,
    page: impl std::future::Future<Output = Result<T, E>>,
) -> Option<Result<T, E>> {
    let mut record = Record::upstream(metrics, upstream, method);
    record.arm();
    let span = UpstreamSpan::start(upstream, method);
    let page = tokio::time::timeout_at(deadline, page).await.ok();
    let outcome = match &page {
        Some(Ok(_)) => "ok",
        Some(Err(_)) => "error",
        None => "upstream_timeout",
    };
    if let Some(span) = span {
        span.end(outcome);
    }
    record.record(outcome);
    page
}

/// The client span of one upstream request (a child of the request's server
/// span), when tracing is on.
pub struct UpstreamSpan(opentelemetry::Context);

impl UpstreamSpan {
    /// `None` (one atomic load) while tracing is off.
    pub fn start(upstream: &str, method: &str) -> Option<UpstreamSpan> {
        use opentelemetry::trace::{Span, SpanKind, TraceContextExt, Tracer};
        use opentelemetry::KeyValue;
        let tracer = junction_telemetry::otel::tracer()?;
        let parent = opentelemetry::Context::current();
        // A span the sampler drops costs no name and no attributes.
        let mut span = tracer
            .span_builder("upstream")
            .with_kind(SpanKind::Client)
            .start_with_context(tracer, &parent);
        if span.is_recording() {
            span.update_name(format!("{method} {upstream}"));
            span.set_attributes([
                KeyValue::new("junction.upstream", upstream.to_owned()),
                KeyValue::new("mcp.method.name", method.to_owned()),
            ]);
        }
        Some(UpstreamSpan(parent.with_span(span)))
    }

    /// `traceparent` (and `tracestate`) naming this span, for the upstream
    /// request's headers and `_meta`.
    pub fn context(&self) -> Option<(String, Option<String>)> {
        junction_telemetry::otel::traceparent(&self.0)
    }

    pub fn end(self, outcome: &str) {
        use opentelemetry::trace::{Status, TraceContextExt};
        let span = self.0.span();
        if !span.is_recording() {
            return span.end();
        }
        span.set_attribute(opentelemetry::KeyValue::new(
            "junction.outcome",
            outcome.to_owned(),
        ));
        if outcome != "ok" {
            span.set_status(Status::error(outcome.to_owned()));
        }
        span.end();
    }
}
