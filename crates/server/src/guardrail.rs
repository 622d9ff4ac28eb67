//! A route's guardrail webhook (`routes[].guardrail`): an HTTP service asked
//! before a `tools/call` goes upstream, and optionally once its result is in,
//! that may allow it, deny it (a clear error to the client), or hand back a
//! rewritten request or result. Bounded by its timeout; when it fails (down,
//! slow, a bad answer) the route's `on_error` decides: `allow` (fail open) or
//! `deny` (fail closed, HTTP 503). Decisions and latency are counted in
//! `junction_guardrail_decisions_total{route,phase,decision}` and
//! `junction_guardrail_duration_seconds{route,phase}`.
//!
//! The exchange (JSON over POST): Junction sends `{"phase": "request" |
//! "result", "route", "principal" (sub or null), "tool" (exposed name),
//! "upstream", "upstream_tool", "arguments", "result" (result phase only)}`;
//! the hook answers `{"decision": "allow" | "deny" | "rewrite", "reason"?,
//! "arguments"? | "result"?}`. Never a token or a header of the caller.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::error::GatewayError;

type HttpsClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// One route's hook. Cloned into a [`ResultCheck`] (its client shares its
/// connections).
#[derive(Clone)]
pub struct Guardrail {
    url: http::Uri,
    timeout: Duration,
    fail_open: bool,
    results: bool,
    client: HttpsClient,
}

/// What the hook decided about a request or a result.
pub enum Verdict {
    Allow,
    /// Go on with this instead (the request's arguments, or the result).
    Rewrite(Box<RawValue>),
}

#[derive(Deserialize)]
struct Answer {
    decision: String,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    arguments: Option<Box<RawValue>>,
    #[serde(default)]
    result: Option<Box<RawValue>>,
}

impl Guardrail {
    pub fn new(
        url: &str,
        timeout: Duration,
        fail_open: bool,
        results: bool,
    ) -> Result<Guardrail, String> {
        let url: http::Uri = url
            .parse()
            .map_err(|e| format!("guardrail.url {url:?}: {e}"))?;
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_webpki_roots()
            .https_or_http()
            .enable_http1()
            .build();
        Ok(Guardrail {
            url,
            timeout,
            fail_open,
            results,
            client: Client::builder(TokioExecutor::new()).build(https),
        })
    }

    /// Whether results are sent to the hook too.
    pub fn checks_results(&self) -> bool {
        self.results
    }

    /// The request phase: the call's arguments as they would go upstream.
    pub async fn request(
        &self,
        call: &Call<'_>,
        arguments: Option<&RawValue>,
    ) -> Result<Verdict, GatewayError> {
        let body = call.body("request", arguments, None);
        self.ask(call, "request", body, |a| a.arguments).await
    }

    /// The result phase: the upstream's result, before the client sees it.
    pub async fn result(
        &self,
        call: &Call<'_>,
        result: &RawValue,
    ) -> Result<Verdict, GatewayError> {
        let body = call.body("result", None, Some(result));
        self.ask(call, "result", body, |a| a.result).await
    }

    async fn ask(
        &self,
        call: &Call<'_>,
        phase: &'static str,
        body: Value,
        rewritten: impl FnOnce(Answer) -> Option<Box<RawValue>>,
    ) -> Result<Verdict, GatewayError> {
        let started = Instant::now();
        let answer = tokio::time::timeout(self.timeout, self.post(body)).await;
        let m = call.metrics;
        m.guardrail_duration_seconds
            .with_label_values(&[call.route, phase])
            .observe(started.elapsed().as_secs_f64());
        let count = |decision: &str| {
            m.guardrail_decisions_total
                .with_label_values(&[call.route, phase, decision])
                .inc();
        };
        let answer = match answer {
            Ok(Ok(a)) => a,
            Ok(Err(why)) => return self.failed(call, phase, why, count),
            Err(_) => {
                return self.failed(
                    call,
                    phase,
                    format!("no answer within {:?}", self.timeout),
                    count,
                )
            }
        };
        match answer.decision.as_str() {
            "allow" => {
                count("allow");
                Ok(Verdict::Allow)
            }
            "deny" => {
                count("deny");
                Err(GatewayError::GuardrailDenied {
                    reason: answer
                        .reason
                        .unwrap_or_else(|| "denied by the route's guardrail".into()),
                })
            }
            "rewrite" => match rewritten(answer) {
                Some(raw) if raw.get().trim_start().starts_with('{') => {
                    count("rewrite");
                    Ok(Verdict::Rewrite(raw))
                }
                _ => self.failed(
                    call,
                    phase,
                    format!(
                        "a rewrite without a JSON object `{}`",
                        if phase == "request" {
                            "arguments"
                        } else {
                            "result"
                        }
                    ),
                    count,
                ),
            },
            other => self.failed(call, phase, format!("unknown decision {other:?}"), count),
        }
    }

    /// The hook failed: allowed (fail open) or refused (fail closed).
    fn failed(
        &self,
        call: &Call<'_>,
        phase: &str,
        why: String,
        count: impl Fn(&str),
    ) -> Result<Verdict, GatewayError> {
        tracing::warn!(route = %call.route, phase, error = %why, fail_open = self.fail_open, "guardrail failed");
        if self.fail_open {
            count("error_allowed");
            Ok(Verdict::Allow)
        } else {
            count("error_denied");
            Err(GatewayError::GuardrailUnavailable { detail: why })
        }
    }

    async fn post(&self, body: Value) -> Result<Answer, String> {
        let request = http::Request::post(self.url.clone())
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body.to_string())))
            .map_err(|e| e.to_string())?;
        let response = self
            .client
            .request(request)
            .await
            .map_err(|e| format!("cannot reach it: {e}"))?;
        let status = response.status();
        let bytes = response
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("reading its answer: {e}"))?
            .to_bytes();
        if !status.is_success() {
            return Err(format!("it answered HTTP {status}"));
        }
        serde_json::from_slice(&bytes).map_err(|e| format!("its answer is not a decision: {e}"))
    }
}

/// What the hook is told about a call, and where its decision is counted.
pub struct Call<'a> {
    pub route: &'a str,
    /// The caller's `sub`, when authenticated.
    pub principal: Option<&'a str>,
    pub tool: &'a str,
    pub upstream: &'a str,
    pub upstream_tool: &'a str,
    pub metrics: &'a junction_telemetry::Metrics,
}

/// A call's result phase with what [`Call`] borrows owned: a streamed
/// answer's result is checked after the request that started it has
/// returned, and a task's result when a later request reads it. Built only
/// for routes that check results.
pub struct ResultCheck {
    guardrail: Guardrail,
    route: String,
    principal: Option<String>,
    tool: String,
    upstream: String,
    upstream_tool: String,
    metrics: junction_telemetry::Metrics,
}

impl ResultCheck {
    pub fn new(guardrail: &Guardrail, call: &Call<'_>) -> ResultCheck {
        ResultCheck {
            guardrail: guardrail.clone(),
            route: call.route.to_owned(),
            principal: call.principal.map(str::to_owned),
            tool: call.tool.to_owned(),
            upstream: call.upstream.to_owned(),
            upstream_tool: call.upstream_tool.to_owned(),
            metrics: call.metrics.clone(),
        }
    }

    /// [`Guardrail::result`] for this call.
    pub async fn result(&self, result: &RawValue) -> Result<Verdict, GatewayError> {
        let call = Call {
            route: &self.route,
            principal: self.principal.as_deref(),
            tool: &self.tool,
            upstream: &self.upstream,
            upstream_tool: &self.upstream_tool,
            metrics: &self.metrics,
        };
        self.guardrail.result(&call, result).await
    }
}

impl Call<'_> {
    fn body(&self, phase: &str, arguments: Option<&RawValue>, result: Option<&RawValue>) -> Value {
        let raw = |r: Option<&RawValue>| {
            r.and_then(|r| serde_json::from_str::<Value>(r.get()).ok())
                .unwrap_or(Value::Null)
        };
        let mut body = json!({
            "phase": phase,
            "route": self.route,
            "principal": self.principal,
            "tool": self.tool,
            "upstream": self.upstream,
            "upstream_tool": self.upstream_tool,
        });
        if phase == "request" {
            body["arguments"] = raw(arguments);
        } else {
            body["result"] = raw(result);
        }
        body
    }
}
