//! The merged catalog of one route: exposed tools in order, the reverse route
//! table, and the list pre-serialized once so `tools/list` is a byte copy.

use bytes::Bytes;
use junction_protocol::xmcp::HeaderParam;
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};

#[derive(Clone, Debug)]
pub struct ExposedTool {
    /// The name clients see and call.
    pub exposed: String,
    /// Owning upstream id.
    pub upstream: String,
    /// The upstream's own name for the tool (what goes upstream).
    pub original: String,
    /// `original` as a JSON string: what a call's `params.name` becomes
    /// upstream (written once here, not serialized per call).
    pub original_json: Box<RawValue>,
    /// The upstream tool object with `name` replaced by `exposed`.
    pub definition: Box<RawValue>,
    /// The tool's validated `x-mcp-header` annotations (upstream schema).
    pub header_params: Vec<HeaderParam>,
    /// Arguments every call gets, whatever the client sent for them (a
    /// route's `pin` overrides), as raw JSON values.
    pub pinned: Vec<(String, Box<RawValue>)>,
}

/// Why a tool was left out; `as_str` is a bounded metric label.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DropKind {
    NotAnObject,
    MissingName,
    InvalidName,
    NameTooLong,
    InvalidInputSchema,
    InvalidHeaderAnnotation,
    Duplicate,
    NameCollision,
    /// `tools.drop_secret_headers` and an annotation that looks like a secret.
    SecretHeader,
    /// Its definition differs from its pin, or it has none (`pins`).
    Quarantined,
}

impl DropKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DropKind::NotAnObject => "not_an_object",
            DropKind::MissingName => "missing_name",
            DropKind::InvalidName => "invalid_name",
            DropKind::NameTooLong => "name_too_long",
            DropKind::InvalidInputSchema => "invalid_input_schema",
            DropKind::InvalidHeaderAnnotation => "invalid_x_mcp_header",
            DropKind::Duplicate => "duplicate",
            DropKind::NameCollision => "name_collision",
            DropKind::SecretHeader => "secret_header",
            DropKind::Quarantined => "quarantined",
        }
    }
}

/// A tool left out of the catalog; the caller logs it and counts it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dropped {
    pub upstream: String,
    /// The tool's name as the upstream sent it (`""` when it had none).
    pub tool: String,
    pub kind: DropKind,
    /// Human-readable detail for the log line (not a metric label).
    pub reason: String,
}

/// Fields are public for reading; `tools` must not be edited in place (the
/// route table and the serialized pages are derived from it at build time).
/// `public` may be cleared by a caller that filters by authorization.
#[derive(Clone, Debug)]
pub struct Catalog {
    pub tools: Vec<ExposedTool>,
    pub dropped: Vec<Dropped>,
    /// Upstream ids (route order) served from a stale list or left out.
    pub degraded: Vec<String>,
    /// Config key paths of tool overrides that matched no listed tool (known
    /// only when no upstream is degraded).
    pub unmatched: Vec<String>,
    /// (name a client would call, why) of each tool held back by its pin.
    pub quarantined: Vec<(String, String)>,
    pub ttl_ms: u64,
    pub public: bool,
    /// Hash of the serialized tool list: same tools, same version.
    pub version: u64,
    /// Exposed name → position. FNV, not SipHash: the keys are the
    /// upstreams' tool names, looked up once per call (issue 26).
    index: fnv::FnvHashMap<String, usize>,
    /// `[def0,def1,…]`
    bytes: Bytes,
    /// Byte range of each definition inside `bytes`.
    spans: Vec<(usize, usize)>,
}

impl Catalog {
    /// `tools` must already be unique by exposed name (merge guarantees it).
    pub(crate) fn build(
        tools: Vec<ExposedTool>,
        dropped: Vec<Dropped>,
        degraded: Vec<String>,
        ttl_ms: u64,
        public: bool,
    ) -> Catalog {
        let total: usize = tools.iter().map(|t| t.definition.get().len() + 1).sum();
        let mut buf = Vec::with_capacity(total + 2);
        let mut spans = Vec::with_capacity(tools.len());
        let mut index = fnv::FnvHashMap::with_capacity_and_hasher(tools.len(), Default::default());
        buf.push(b'[');
        for (i, tool) in tools.iter().enumerate() {
            if i > 0 {
                buf.push(b',');
            }
            let start = buf.len();
            buf.extend_from_slice(tool.definition.get().as_bytes());
            spans.push((start, buf.len()));
            index.insert(tool.exposed.clone(), i);
        }
        buf.push(b']');
        let digest = Sha256::digest(&buf);
        let mut first = [0u8; 8];
        first.copy_from_slice(&digest[..8]);
        Catalog {
            tools,
            dropped,
            degraded,
            unmatched: Vec::new(),
            quarantined: Vec::new(),
            ttl_ms,
            public,
            version: u64::from_be_bytes(first),
            index,
            bytes: Bytes::from(buf),
            spans,
        }
    }

    /// The tool behind an exposed name: owning upstream and original name.
    pub fn resolve(&self, exposed: &str) -> Option<&ExposedTool> {
        self.index.get(exposed).and_then(|&i| self.tools.get(i))
    }

    /// Where the tool behind an exposed name sits in `tools`.
    pub fn position(&self, exposed: &str) -> Option<usize> {
        self.index.get(exposed).copied()
    }

    /// The whole list as one JSON array (shared, no copy).
    pub fn list_bytes(&self) -> Bytes {
        self.bytes.clone()
    }

    /// JSON array bytes of `tools[start..start+page_size]` and the offset of
    /// the next page (None at the end). `page_size` 0 means no limit. A start
    /// past the end gives `[]`. The full list is shared without copying.
    pub fn page(&self, start: usize, page_size: usize) -> (Bytes, Option<usize>) {
        let len = self.tools.len();
        if start >= len {
            return (Bytes::from_static(b"[]"), None);
        }
        let end = if page_size == 0 {
            len
        } else {
            start.saturating_add(page_size).min(len)
        };
        let next = (end < len).then_some(end);
        if start == 0 && end == len {
            return (self.bytes.clone(), next);
        }
        let (Some(&(from, _)), Some(&(_, to))) = (self.spans.get(start), self.spans.get(end - 1))
        else {
            return (Bytes::from_static(b"[]"), None);
        };
        let mut buf = Vec::with_capacity(to - from + 2);
        buf.push(b'[');
        buf.extend_from_slice(self.bytes.get(from..to).unwrap_or_default());
        buf.push(b']');
        (Bytes::from(buf), next)
    }

    /// A sub-catalog (e.g. the tools a caller is granted), with its own
    /// version and pages; it is marked private because it depends on who asks.
    pub fn filtered(&self, mut keep: impl FnMut(&ExposedTool) -> bool) -> Catalog {
        let tools: Vec<ExposedTool> = self.tools.iter().filter(|t| keep(t)).cloned().collect();
        Catalog::build(
            tools,
            self.dropped.clone(),
            self.degraded.clone(),
            self.ttl_ms,
            false,
        )
    }
}
