//! What every phase after the edge knows about one request, below every
//! phase that reads it: the request context [`Cx`] (state, route, headers,
//! the caller, and the access line it owes), the client's era and
//! capabilities ([`ClientSide`]), and what the request was routed to
//! ([`Target`]). Plus the small readers of params and `_meta` that several
//! phases share.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Instant;

use http::{HeaderMap, HeaderValue};
use junction_catalog::{Catalog, ExposedTool};
use junction_protocol::jsonrpc::{Id, RawParams};
use junction_protocol::{meta, object};
use junction_upstream::UpstreamRequest;
use serde_json::value::RawValue;

use crate::cancel::Cancel;
use crate::error::GatewayError;
use crate::logging::{Level, LogFilter};
use crate::session::{self, Session};
use crate::state::{RouteState, State};

mod access;

pub use access::{AccessLine, LoggedStream};

/// What every phase after parsing needs to know about the request.
pub struct Cx<'a> {
    pub state: &'a State,
    pub route: &'a RouteState,
    pub headers: &'a HeaderMap,
    /// The `MCP-Protocol-Version` header (as text), looked up once: the era
    /// is decided by it, and a modern request's `_meta` is checked against it.
    pub protocol_version: Option<&'a str>,
    /// The headers the phases read on every request, found in one pass.
    pub known: Known<'a>,
    /// Digest of the authenticated principal; "" while authentication is off.
    pub principal: String,
    /// The authenticated caller, when `auth` is configured.
    pub identity: Option<junction_policy::Principal>,
    /// The TCP peer's address (see [`Cx::client_ip`]).
    pub peer_ip: Option<std::net::IpAddr>,
    /// Whether this request's access line is written (`log.access`, and
    /// logging set up): decided once, so a request pays for what the line
    /// needs only when it is written.
    pub access_log: bool,
    /// Whether the request has a span (`tracing` on): it then also keeps
    /// what it was routed to.
    pub traced: bool,
    /// (upstream, target) once the request is routed: the exposed tool or
    /// prompt, or the resource URI. Kept only for the access line.
    pub routed: std::sync::OnceLock<Routed>,
    /// The method label once the request is parsed.
    pub method: std::sync::OnceLock<&'static str>,
    /// Set when another replica relayed this request here (`fleet::Hop`):
    /// it is not relayed again nor rate-limited twice, and its caller is the
    /// one the hop names.
    pub hop: Option<crate::fleet::Hop>,
    /// The request body as the client sent it, kept only when replicas relay
    /// (`fleet.advertise_url`): what a relay sends on.
    pub body: std::sync::OnceLock<bytes::Bytes>,
    /// When the request arrived, while it has no response yet: a `Cx`
    /// dropped with this set belongs to a request whose client went away
    /// first (the connection dropped its future), and is counted and logged as
    /// `aborted` ([`Cx::drop`]).
    pub unanswered: Option<Instant>,
}

impl Cx<'_> {
    pub fn new<'a>(state: &'a State, route: &'a RouteState, headers: &'a HeaderMap) -> Cx<'a> {
        let known = Known::scan(headers);
        Cx {
            state,
            route,
            headers,
            protocol_version: known.protocol_version.and_then(|v| v.to_str().ok()),
            known,
            principal: String::new(),
            identity: None,
            peer_ip: None,
            access_log: false,
            traced: false,
            routed: std::sync::OnceLock::new(),
            method: std::sync::OnceLock::new(),
            hop: None,
            body: std::sync::OnceLock::new(),
            unanswered: None,
        }
    }

    /// The caller's address, for the `client_ip` rate key and the access
    /// line: the peer, or, when `server.trusted_proxies` lists the peer, the
    /// caller it names (`junction_policy::client_ip`), or for a relayed
    /// request the caller the first replica saw. Read only by those that
    /// need it.
    pub fn client_ip(&self) -> Option<std::net::IpAddr> {
        if let Some(hop) = self.hop {
            return hop.client;
        }
        let trusted = &self.state.config.server.trusted_proxies;
        self.peer_ip
            .map(|peer| junction_policy::client_ip(peer, self.headers, trusted))
    }

    /// Names the upstream and target of a routed request for its access
    /// line and its span.
    pub fn note_target(&self, target: &Target) {
        if !(self.access_log || self.traced) {
            return;
        }
        let routed = match target {
            Target::Tool { catalog, index } => Routed::Tool(catalog.clone(), *index),
            other => match other.routed() {
                Some((upstream, name)) => Routed::Named(upstream.to_owned(), name.to_owned()),
                None => return,
            },
        };
        let _ = self.routed.set(routed);
    }

    /// Whether any `Accept` value names `text/event-stream`.
    pub fn accepts_sse(&self) -> bool {
        self.known.accepts_sse
    }

    /// A request header's value as text. Pass a [`names`] constant on the
    /// hot path.
    pub fn header(&self, name: impl http::header::AsHeaderName) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The handshake-era session `token` names, and its `session::key`: one
    /// sealed with this gateway's key, opened for this very caller, and not
    /// ended by DELETE on this replica. Anything else is "session not found"
    /// (HTTP 404: the client initializes again).
    pub fn session(&self, token: &str) -> Result<(Session, String), GatewayError> {
        let s = session::open(&self.state.sealer, token).ok_or(GatewayError::SessionNotFound)?;
        let key = session::key(token);
        if s.p != self.principal || self.state.replica.revoked.is_revoked(&key) {
            return Err(GatewayError::SessionNotFound);
        }
        Ok((s, key))
    }

    /// The session of a request that must have one: its `Mcp-Session-Id`
    /// ([`Cx::session`]), `missing` when there is none.
    pub fn require_session(
        &self,
        missing: impl FnOnce() -> GatewayError,
    ) -> Result<(Session, String), GatewayError> {
        let token = text(self.known.session_id).ok_or_else(missing)?;
        self.session(token)
    }
}

/// The request headers the phases read on every request, each the first
/// value given (what `HeaderMap::get` returns), found in one pass over the
/// map: a lookup hashes its name, while comparing the few names a request
/// carries is cheaper than hashing eight (issue 26).
#[derive(Clone, Copy, Default)]
pub struct Known<'a> {
    pub protocol_version: Option<&'a HeaderValue>,
    pub method: Option<&'a HeaderValue>,
    pub name: Option<&'a HeaderValue>,
    pub session_id: Option<&'a HeaderValue>,
    pub authorization: Option<&'a HeaderValue>,
    pub origin: Option<&'a HeaderValue>,
    pub content_encoding: Option<&'a HeaderValue>,
    /// The first `Accept` value (whose first media type decides JSON or SSE).
    pub accept: Option<&'a HeaderValue>,
    /// Whether any `Accept` value names `text/event-stream`.
    pub accepts_sse: bool,
    /// Whether any `Mcp-Param-*` header came (a tool call checks them).
    pub param_headers: bool,
}

impl<'a> Known<'a> {
    pub fn scan(headers: &'a HeaderMap) -> Known<'a> {
        let mut k = Known::default();
        for (name, value) in headers {
            let slot = match name.as_str() {
                "mcp-protocol-version" => &mut k.protocol_version,
                "mcp-method" => &mut k.method,
                "mcp-name" => &mut k.name,
                "mcp-session-id" => &mut k.session_id,
                "authorization" => &mut k.authorization,
                "origin" => &mut k.origin,
                "content-encoding" => &mut k.content_encoding,
                "accept" => {
                    k.accepts_sse |= value
                        .to_str()
                        .is_ok_and(|s| s.contains("text/event-stream"));
                    &mut k.accept
                }
                other => {
                    k.param_headers |= other.starts_with("mcp-param-");
                    continue;
                }
            };
            slot.get_or_insert(value);
        }
        k
    }
}

/// A header's value as text (`None` when absent or not visible ASCII).
pub fn text(v: Option<&HeaderValue>) -> Option<&str> {
    v.and_then(|v| v.to_str().ok())
}

/// A request dropped before its response (the client closed the connection,
/// or timed out, while Junction waited for an upstream) is still a request:
/// `junction_requests_total{outcome="aborted"}` with its duration so far,
/// and an access line with status 499 (nginx's "client closed request"), so
/// nothing the client started goes uncounted.
impl Drop for Cx<'_> {
    fn drop(&mut self) {
        let Some(started) = self.unanswered.take() else {
            return;
        };
        let method = self.method.get().copied().unwrap_or("other");
        let m = &self.state.metrics;
        m.requests_total
            .with_label_values(&[&self.route.path, method, "aborted"])
            .inc();
        m.request_duration_seconds
            .with_label_values(&[&self.route.path, method])
            .observe(started.elapsed().as_secs_f64());
        if self.access_log {
            AccessLine {
                route: self.route,
                method,
                client: self.client_ip(),
                routed: self.routed.take(),
                status: 499,
                error: None,
                principal: self.identity.take(),
                started,
            }
            .write("aborted");
        }
    }
}

/// Which era the client speaks, with the capabilities it declared (per request
/// for modern clients, once per session for handshake-era ones).
pub enum ClientSide {
    Modern {
        /// As the client sent them (a JSON object), read only when an upstream
        /// asks the client something (`bridge::declared`).
        capabilities: Box<RawValue>,
        /// `_meta` logLevel of this request.
        log: Option<Level>,
        /// The request's other `_meta` members, forwarded upstream.
        forward_meta: Vec<(String, Box<RawValue>)>,
    },
    Legacy {
        /// From `initialize`, as the session token keeps them (`{}` for
        /// `initialize` itself, which reads its own params).
        capabilities: Box<RawValue>,
        /// `session::key` of the client's session ("" for `initialize`).
        session: String,
        /// What the session set with `logging/setLevel`.
        log: Option<Level>,
    },
}

impl ClientSide {
    pub fn is_modern(&self) -> bool {
        matches!(self, ClientSide::Modern { .. })
    }

    pub fn capabilities(&self) -> &RawValue {
        match self {
            ClientSide::Modern { capabilities, .. } | ClientSide::Legacy { capabilities, .. } => {
                capabilities
            }
        }
    }

    /// Which of the upstream's log messages reach this client.
    pub fn log_filter(&self) -> LogFilter {
        match self {
            ClientSide::Modern { log, .. } => LogFilter::modern(*log),
            ClientSide::Legacy { log, .. } => LogFilter::legacy(*log),
        }
    }

    /// The `_meta` entries an upstream request carries for this client: a
    /// modern client's own, and for a handshake-era session the log level it
    /// set (sessions have no `_meta` of their own for it).
    pub fn upstream_meta(&self, params: &RawParams<'_>) -> Vec<(String, Box<RawValue>)> {
        let (mut meta, level) = match self {
            ClientSide::Modern { forward_meta, .. } => return forward_meta.clone(),
            ClientSide::Legacy { log, .. } => (forwarded_meta(params), log),
        };
        if let Some(level) = level {
            meta.retain(|(k, _)| k != meta::LOG_LEVEL);
            if let Ok(raw) = serde_json::value::to_raw_value(level.name()) {
                meta.push((meta::LOG_LEVEL.to_owned(), raw));
            }
        }
        meta
    }

    /// The upstream request of `method` for this client: its capabilities,
    /// era, and the allow-listed headers of this request.
    pub fn upstream_request<'p>(
        &'p self,
        cx: &Cx<'_>,
        method: &'static str,
        params: RawParams<'p>,
        meta: Vec<(String, Box<RawValue>)>,
    ) -> UpstreamRequest<'p> {
        UpstreamRequest {
            method: method.into(),
            params,
            meta,
            client_capabilities: Some(Cow::Borrowed(self.capabilities())),
            param_headers: Vec::new(),
            forward_headers: junction_policy::forwardable_headers(cx.headers, &cx.state.forward),
            timeout: None,
            handshake_client: !self.is_modern(),
            authorization: None,
        }
    }

    /// A handshake-era call that `notifications/cancelled` can reach.
    pub fn cancellable(&self, cx: &Cx<'_>, id: &Id) -> Option<Cancel> {
        match self {
            ClientSide::Legacy { session, .. } => cx.state.replica.in_flight.register(session, id),
            ClientSide::Modern { .. } => None,
        }
    }
}

/// The (upstream, target) a routed request's access line and span name: a
/// tool's catalog entry, shared rather than its names copied (the common
/// case, on every call), or the names of any other target.
pub enum Routed {
    Tool(Arc<Catalog>, usize),
    Named(String, String),
}

impl Routed {
    pub fn names(&self) -> (&str, &str) {
        match self {
            Routed::Tool(catalog, index) => catalog
                .tools
                .get(*index)
                .map_or(("", ""), |t| (t.upstream.as_str(), t.exposed.as_str())),
            Routed::Named(upstream, target) => (upstream, target),
        }
    }
}

/// What a request was routed to (the pipeline's "resolve target" phase):
/// nothing upstream, or one upstream's tool, prompt, resource or task.
pub enum Target {
    /// Lists, discovery, sessions, streams: no one upstream.
    None,
    /// A tool of the route's catalog (the catalog it was resolved in).
    Tool { catalog: Arc<Catalog>, index: usize },
    /// A prompt by its exposed name, and the upstream's own name for it.
    Prompt {
        upstream: String,
        exposed: String,
        original: String,
    },
    /// A resource by the URI the client named, and the upstream's own URI
    /// (different when Junction namespaced it).
    Resource {
        upstream: String,
        uri: String,
        own: String,
    },
    /// A task Junction sealed for this caller (`tasks/*`), and the id as the
    /// client sent it.
    Task {
        task: crate::envelope::TaskRef,
        token: String,
    },
}

impl Target {
    /// (upstream, what the client named) of a routed request: the key of
    /// rate limits, authorization, requestState envelopes and the access line.
    pub fn routed(&self) -> Option<(&str, &str)> {
        match self {
            Target::None => None,
            Target::Tool { .. } => self
                .tool()
                .map(|t| (t.upstream.as_str(), t.exposed.as_str())),
            Target::Prompt {
                upstream, exposed, ..
            } => Some((upstream, exposed)),
            Target::Resource { upstream, uri, .. } => Some((upstream, uri)),
            Target::Task { task, .. } => Some((&task.upstream, &task.tool)),
        }
    }

    pub fn tool(&self) -> Option<&ExposedTool> {
        match self {
            Target::Tool { catalog, index } => catalog.tools.get(*index),
            _ => None,
        }
    }
}

/// A string member of params: absent is Ok(None), any other type is an error.
/// Borrowed from the params' text unless it has escapes to decode.
pub fn param_str<'a>(
    params: Option<&'a RawParams<'_>>,
    key: &str,
) -> Result<Option<Cow<'a, str>>, GatewayError> {
    let Some(raw) = params.and_then(|p| p.get(key)) else {
        return Ok(None);
    };
    junction_protocol::jsonrpc::raw_str(raw)
        .map(Some)
        .ok_or_else(|| GatewayError::InvalidParams(format!("params.{key} must be a string")))
}

/// `params._meta`'s members, read from the request's text without parsing it
/// again (the envelope's pass validated it): each key with its value's raw
/// JSON, forwarded as it is. A key given twice reads as its last value.
pub struct RequestMeta<'a>(Vec<(Cow<'a, str>, &'a str)>);

impl<'a> RequestMeta<'a> {
    pub fn get(&self, key: &str) -> Option<&'a str> {
        self.0.iter().rev().find(|(k, _)| k == key).map(|(_, v)| *v)
    }

    /// Every member in order, duplicates included.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &'a str)> + '_ {
        self.0.iter().map(|(k, v)| (k.as_ref(), *v))
    }
}

pub fn request_meta<'a>(
    params: Option<&'a RawParams<'_>>,
) -> Result<RequestMeta<'a>, GatewayError> {
    let raw = params
        .and_then(|p| p.get("_meta"))
        .ok_or_else(|| GatewayError::MissingMeta("params._meta is required".into()))?;
    object::members(raw.get())
        .map(|m| RequestMeta(m.collect()))
        .ok_or_else(|| GatewayError::MissingMeta("params._meta must be an object".into()))
}

/// A handshake-era request's `_meta` members to forward (none when `_meta` is
/// absent or not an object).
fn forwarded_meta(params: &RawParams<'_>) -> Vec<(String, Box<RawValue>)> {
    request_meta(Some(params))
        .map(forwardable_meta)
        .unwrap_or_default()
}

/// The `_meta` members a request carries upstream: all but the stamped ones
/// (version, capabilities, client info), which the upstream client re-states.
pub fn forwardable_meta(m: RequestMeta<'_>) -> Vec<(String, Box<RawValue>)> {
    // Each key once, with its last value (the one `RequestMeta::get` reads).
    let mut last = std::collections::BTreeMap::new();
    for (k, v) in m.iter().filter(|(k, _)| !meta::is_stamped(k)) {
        last.insert(k, v);
    }
    last.into_iter()
        .filter_map(|(k, v)| Some((k.to_owned(), RawValue::from_string(v.to_owned()).ok()?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(meta: &str) -> RawParams<'static> {
        let mut p = RawParams::new();
        p.insert(
            "_meta".into(),
            Cow::Owned(RawValue::from_string(meta.to_owned()).unwrap()),
        );
        p
    }

    #[test]
    fn known_headers_are_the_first_values_found_in_one_pass() {
        let mut h = HeaderMap::new();
        h.append("Mcp-Method", HeaderValue::from_static("tools/call"));
        h.append("mcp-method", HeaderValue::from_static("tools/list"));
        h.append("accept", HeaderValue::from_static("application/json"));
        h.append("accept", HeaderValue::from_static("text/event-stream"));
        h.append("x-other", HeaderValue::from_static("x"));
        h.append("mcp-name", HeaderValue::from_bytes(b"caf\xc3\xa9").unwrap());
        let k = Known::scan(&h);
        assert_eq!(
            text(k.method),
            Some("tools/call"),
            "the first value, as `get`"
        );
        assert_eq!(text(k.accept), Some("application/json"));
        assert!(k.accepts_sse, "any Accept value naming SSE counts");
        assert!(
            k.name.is_some() && text(k.name).is_none(),
            "present, not text"
        );
        assert!(k.protocol_version.is_none() && k.session_id.is_none());
        assert!(!k.param_headers);
        h.append("mcp-param-region", HeaderValue::from_static("eu"));
        assert!(Known::scan(&h).param_headers);
        assert!(!Known::scan(&HeaderMap::new()).accepts_sse);
    }

    #[test]
    fn param_str_borrows_plain_strings_and_decodes_escaped_ones() {
        let params: RawParams = serde_json::from_str(
            r#"{"plain":"get_weather","escaped":"caf\u00e9 \"x\"","num":1,"null":null}"#,
        )
        .unwrap_or_default();
        let plain = param_str(Some(&params), "plain");
        assert!(matches!(plain, Ok(Some(Cow::Borrowed("get_weather")))));
        let escaped = param_str(Some(&params), "escaped");
        assert!(matches!(escaped, Ok(Some(Cow::Owned(ref s))) if s == "café \"x\""));
        assert!(matches!(param_str(Some(&params), "absent"), Ok(None)));
        assert!(matches!(param_str(None, "plain"), Ok(None)));
        for bad in ["num", "null"] {
            assert!(
                matches!(
                    param_str(Some(&params), bad),
                    Err(GatewayError::InvalidParams(_))
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn meta_reads_the_last_of_a_duplicate_and_forwards_each_key_once() {
        let p = params(
            r#"{"traceparent":"a","io.modelcontextprotocol/protocolVersion":"2025-01-01",
                "x":{"deep":[1]},"traceparent":"b","io.modelcontextprotocol/protocolVersion":"2026-07-28"}"#,
        );
        let m = request_meta(Some(&p)).unwrap();
        assert_eq!(m.get(meta::PROTOCOL_VERSION), Some(r#""2026-07-28""#));
        assert_eq!(m.get("traceparent"), Some(r#""b""#));
        let forwarded: Vec<(String, String)> = forwardable_meta(m)
            .into_iter()
            .map(|(k, v)| (k, v.get().to_owned()))
            .collect();
        assert_eq!(
            forwarded,
            [("traceparent", r#""b""#), ("x", r#"{"deep":[1]}"#)]
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
        );
    }

    #[test]
    fn meta_that_is_not_an_object_is_refused() {
        for bad in ["[1]", "null", "\"{}\"", "3"] {
            assert!(
                matches!(
                    request_meta(Some(&params(bad))),
                    Err(GatewayError::MissingMeta(_))
                ),
                "{bad}"
            );
        }
        assert!(matches!(
            request_meta(None),
            Err(GatewayError::MissingMeta(_))
        ));
    }
}
