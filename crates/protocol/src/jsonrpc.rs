//! JSON-RPC 2.0 envelopes, parsed only as far as routing needs (NOTES §2.1).
//!
//! Client messages keep every `params` member as raw JSON, so `arguments` and
//! friends are forwarded byte for byte. The byte builders splice raw parts into
//! a new envelope instead of re-serializing them.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::codes;

/// JSON-RPC id: string or integer (null, floats, bools and objects are rejected).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Id {
    Num(i64),
    Str(String),
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Id::Num(n) => write!(f, "{n}"),
            Id::Str(s) => f.write_str(s),
        }
    }
}

impl From<i64> for Id {
    fn from(n: i64) -> Self {
        Id::Num(n)
    }
}

impl From<String> for Id {
    fn from(s: String) -> Self {
        Id::Str(s)
    }
}

impl From<&str> for Id {
    fn from(s: &str) -> Self {
        Id::Str(s.to_owned())
    }
}

/// A raw JSON value that is a string, as text: borrowed from the raw text
/// unless it has escapes to decode; `None` for any other JSON type. The text
/// is valid JSON already, so `object::string` reads it without a parse.
pub fn raw_str(raw: &RawValue) -> Option<Cow<'_, str>> {
    crate::object::string(raw.get())
}

/// `params` object kept as raw values: key -> raw JSON (nothing re-serialized).
/// Read from a client's message, keys and values borrow its bytes (a key is
/// owned only when it had escapes to decode); members Junction sets itself are
/// owned (`Cow::Owned`). `RawParams<'static>` owns all of it.
pub type RawParams<'a> = BTreeMap<Cow<'a, str>, Cow<'a, RawValue>>;

/// A JSON-RPC error object.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<serde_json::Value>,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }

    pub fn with_data(mut self, data: serde_json::Value) -> Self {
        self.data = Some(data);
        self
    }
}

/// One message a client may send: never a response, never a batch. The
/// method is borrowed from the body unless it has escapes.
#[derive(Debug)]
pub enum ClientMessage<'a> {
    Request {
        id: Id,
        method: Cow<'a, str>,
        params: Option<RawParams<'a>>,
    },
    Notification {
        method: Cow<'a, str>,
        params: Option<RawParams<'a>>,
    },
}

impl<'a> ClientMessage<'a> {
    pub fn method(&self) -> &str {
        match self {
            ClientMessage::Request { method, .. } | ClientMessage::Notification { method, .. } => {
                method
            }
        }
    }

    pub fn params(&self) -> Option<&RawParams<'a>> {
        match self {
            ClientMessage::Request { params, .. } | ClientMessage::Notification { params, .. } => {
                params.as_ref()
            }
        }
    }

    pub fn id(&self) -> Option<&Id> {
        match self {
            ClientMessage::Request { id, .. } => Some(id),
            ClientMessage::Notification { .. } => None,
        }
    }
}

/// The envelope members we look at. `present` keeps an explicit `null`
/// distinguishable from an absent member (`"id": null` must be rejected).
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(default, borrow, deserialize_with = "present")]
    jsonrpc: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    method: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present_params")]
    params: Option<Params<'a>>,
    #[serde(default, borrow, deserialize_with = "present")]
    result: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    error: Option<&'a RawValue>,
}

fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

fn present_params<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Params<'de>>, D::Error> {
    Params::deserialize(d).map(Some)
}

/// `params` read in the envelope's own pass: an object's members (each kept
/// raw), or why it is not one. Params with duplicate keys are rejected:
/// which duplicate "wins" differs between parsers, and a header check must
/// see the same value the upstream will.
enum Params<'a> {
    Object(RawParams<'a>),
    /// The first key seen twice (the rest of the object is skipped).
    Duplicate(String),
    /// Also `null`: present but not an object.
    NotObject,
}

impl<'de> Deserialize<'de> for Params<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ParamsVisitor)
    }
}

struct ParamsVisitor;

impl<'de> Visitor<'de> for ParamsVisitor {
    type Value = Params<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Params<'de>, A::Error> {
        let mut out = RawParams::new();
        while let Some(Key(k)) = map.next_key::<Key<'de>>()? {
            if out.contains_key(&k) {
                map.next_value::<IgnoredAny>()?;
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                return Ok(Params::Duplicate(k.into_owned()));
            }
            out.insert(k, Cow::Borrowed(map.next_value::<&'de RawValue>()?));
        }
        Ok(Params::Object(out))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Params<'de>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Params::NotObject)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Params<'de>, E> {
        Ok(Params::NotObject)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Params<'de>, E> {
        Ok(Params::NotObject)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Params<'de>, E> {
        Ok(Params::NotObject)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Params<'de>, E> {
        Ok(Params::NotObject)
    }

    fn visit_str<E>(self, _: &str) -> Result<Params<'de>, E> {
        Ok(Params::NotObject)
    }

    fn visit_unit<E>(self) -> Result<Params<'de>, E> {
        Ok(Params::NotObject)
    }
}

/// A `params` key: borrowed from the message unless it had escapes to decode
/// (serde's own `Cow<str>` always copies).
struct Key<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(KeyVisitor)
    }
}

struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = Key<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Borrowed(v)))
    }

    fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Owned(v.to_owned())))
    }

    fn visit_string<E>(self, v: String) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Owned(v)))
    }
}

fn invalid(message: &str) -> RpcError {
    RpcError::new(codes::INVALID_REQUEST, message)
}

/// Parse one HTTP POST body / stdio line from a client.
///
/// Errors carry the JSON-RPC error to send: invalid JSON (or not UTF-8) is
/// `-32700`; a batch, a response, `id: null`, a non-integer or non-string id,
/// `jsonrpc` other than `"2.0"`, a missing or non-string method, non-object
/// params and duplicate envelope or params keys are `-32600`.
pub fn parse_client_message(body: &[u8]) -> Result<ClientMessage<'_>, RpcError> {
    let text = std::str::from_utf8(body)
        .map_err(|_| RpcError::new(codes::PARSE_ERROR, "body is not UTF-8"))?;
    // One pass in the common case: an object that reads as an envelope is
    // valid JSON as a whole (serde_json checks the members it skips and the
    // trailing bytes). Anything else takes the two-step path below, which
    // tells a parse error (-32700) from an invalid request (-32600).
    let env = match serde_json::from_str::<Envelope<'_>>(text) {
        Ok(env) if text.trim_start().starts_with('{') => env,
        _ => envelope_slow(text)?,
    };
    if env.result.is_some() || env.error.is_some() {
        return Err(invalid("clients must not send responses"));
    }
    // The members are valid JSON already: `raw_str` reads a string without
    // another parse (and is `None` for any other type).
    match env.jsonrpc.and_then(raw_str) {
        Some(v) if v == "2.0" => {}
        _ => return Err(invalid("\"jsonrpc\" must be \"2.0\"")),
    }
    let method = match env.method.map(raw_str) {
        Some(Some(m)) if !m.is_empty() => m,
        Some(_) => return Err(invalid("\"method\" must be a non-empty string")),
        None => return Err(invalid("missing \"method\"")),
    };
    let params = match env.params {
        None => None,
        Some(Params::Object(members)) => Some(members),
        Some(Params::Duplicate(k)) => {
            return Err(invalid(&format!(
                "malformed \"params\": duplicate key {k:?}"
            )))
        }
        Some(Params::NotObject) => return Err(invalid("\"params\" must be an object")),
    };
    match env.id {
        None => Ok(ClientMessage::Notification { method, params }),
        Some(raw) => Ok(ClientMessage::Request {
            id: parse_id(raw)?,
            method,
            params,
        }),
    }
}

/// The envelope of a body the one-pass parse refused, or the error it deserves.
fn envelope_slow(text: &str) -> Result<Envelope<'_>, RpcError> {
    let whole: &RawValue = serde_json::from_str(text)
        .map_err(|e| RpcError::new(codes::PARSE_ERROR, format!("invalid JSON: {e}")))?;
    match whole.get().as_bytes().first() {
        Some(b'{') => {}
        Some(b'[') => return Err(invalid("batches are not supported")),
        _ => return Err(invalid("a message must be a JSON object")),
    }
    serde_json::from_str(whole.get()).map_err(|e| invalid(&format!("malformed envelope: {e}")))
}

fn parse_id(raw: &RawValue) -> Result<Id, RpcError> {
    let text = raw.get();
    if text.starts_with('"') {
        raw_str(raw)
            .map(|s| Id::Str(s.into_owned()))
            .ok_or_else(|| invalid("\"id\" is not a valid string"))
    } else {
        // Valid JSON already, so Rust's integer syntax is JSON's here: only
        // an integer in i64 range parses; 1.0, 1e3, true, null, {} do not.
        text.parse::<i64>()
            .map(Id::Num)
            .map_err(|_| invalid("\"id\" must be a string or an integer"))
    }
}

/// Any message from a server (response, notification, or server request), raw parts.
#[derive(Debug, Deserialize)]
pub struct ServerMessage {
    #[serde(default)]
    pub id: Option<Id>,
    #[serde(default)]
    pub method: Option<String>,
    #[serde(default)]
    pub params: Option<Box<RawValue>>,
    #[serde(default)]
    pub result: Option<Box<RawValue>>,
    #[serde(default)]
    pub error: Option<RpcError>,
}

impl ServerMessage {
    /// Parse one server message (an SSE `data` payload, a stdio line, a JSON
    /// body), as text: read from a `str`, serde_json checks no string's UTF-8
    /// again (from bytes it checks every string it keeps, `result` included).
    pub fn parse(text: &str) -> Result<ServerMessage, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// A response carries `result` or `error` and no `method`.
    pub fn is_response(&self) -> bool {
        self.method.is_none() && (self.result.is_some() || self.error.is_some())
    }
}

/// Serialize a value we built ourselves. `Id`, `&str` and `RpcError` cannot fail
/// to serialize (string keys only); `null` keeps the output valid JSON regardless.
fn push_json<T: Serialize + ?Sized>(out: &mut Vec<u8>, v: &T) {
    let mark = out.len();
    if serde_json::to_writer(&mut *out, v).is_err() {
        out.truncate(mark);
        out.extend_from_slice(b"null");
    }
}

/// `"key":`, the key escaped: a member's start, for a writer that builds an
/// object piece by piece.
pub fn push_key(out: &mut Vec<u8>, key: &str) {
    push_str_json(out, key);
    out.push(b':');
}

/// A JSON string for `s`, as serde_json writes it: a string with nothing to
/// escape (no `"`, `\\` or control character, the usual key, method or id) is
/// copied between quotes; any other goes through serde_json. The hot path
/// writes ~7 strings per call, and serde_json's writer costs a few hundred
/// instructions each for what is almost always a plain copy.
fn push_str_json(out: &mut Vec<u8>, s: &str) {
    if !crate::object::needs_escape(s) {
        out.reserve(s.len() + 2);
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        push_json(out, s);
    }
}

fn push_id(out: &mut Vec<u8>, id: &Id) {
    match id {
        Id::Num(n) => out.extend_from_slice(itoa::Buffer::new().format(*n).as_bytes()),
        Id::Str(s) => push_str_json(out, s),
    }
}

const HEAD: &[u8] = br#"{"jsonrpc":"2.0""#;

/// `{"jsonrpc":"2.0","id":..,"result":..}`
pub fn result_bytes(id: &Id, result: &RawValue) -> Vec<u8> {
    result_bytes_of_json(id, result.get().as_bytes())
}

/// [`result_bytes`] around bytes the caller wrote itself and knows to be one
/// JSON value (a list page assembled from pre-serialized items): wrapping them
/// in a `RawValue` would parse the whole page again just to check it.
pub fn result_bytes_of_json(id: &Id, result: &[u8]) -> Vec<u8> {
    debug_assert!(
        serde_json::from_slice::<serde::de::IgnoredAny>(result).is_ok(),
        "result_bytes_of_json given invalid JSON"
    );
    let mut out = Vec::with_capacity(HEAD.len() + result.len() + 32);
    out.extend_from_slice(HEAD);
    out.extend_from_slice(br#","id":"#);
    push_id(&mut out, id);
    out.extend_from_slice(br#","result":"#);
    out.extend_from_slice(result);
    out.push(b'}');
    out
}

/// `{"jsonrpc":"2.0","id":..,"error":{..}}`; without an id (unparseable request)
/// the `id` member is left out, as the MCP schema's `JSONRPCErrorResponse` allows.
pub fn error_bytes(id: Option<&Id>, err: &RpcError) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEAD.len() + err.message.len() + 64);
    out.extend_from_slice(HEAD);
    if let Some(id) = id {
        out.extend_from_slice(br#","id":"#);
        push_id(&mut out, id);
    }
    out.extend_from_slice(br#","error":"#);
    push_json(&mut out, err);
    out.push(b'}');
    out
}

/// `{"jsonrpc":"2.0","method":..,"params":..}`
pub fn notification_bytes(method: &str, params: &RawValue) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEAD.len() + method.len() + params.get().len() + 32);
    out.extend_from_slice(HEAD);
    out.extend_from_slice(br#","method":"#);
    push_str_json(&mut out, method);
    out.extend_from_slice(br#","params":"#);
    out.extend_from_slice(params.get().as_bytes());
    out.push(b'}');
    out
}

/// `{"jsonrpc":"2.0","id":..,"method":..,"params":..}`
pub fn request_bytes(id: &Id, method: &str, params: &RawValue) -> Vec<u8> {
    request_bytes_with(id, method, params.get().len(), |out| {
        out.extend_from_slice(params.get().as_bytes())
    })
}

/// `request_bytes` with the params written in place by `write_params` (which
/// must write one valid JSON value): the upstream request body is built once,
/// without an intermediate params buffer. `hint`: expected params length.
pub fn request_bytes_with(
    id: &Id,
    method: &str,
    hint: usize,
    write_params: impl FnOnce(&mut Vec<u8>),
) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEAD.len() + method.len() + hint + 48);
    out.extend_from_slice(HEAD);
    out.extend_from_slice(br#","id":"#);
    push_id(&mut out, id);
    out.extend_from_slice(br#","method":"#);
    push_str_json(&mut out, method);
    out.extend_from_slice(br#","params":"#);
    write_params(&mut out);
    out.push(b'}');
    out
}

/// Build a raw JSON object from raw members, in the given order (used to rebuild
/// params around raw `arguments` without re-serializing them). Keys are escaped;
/// callers must not pass the same key twice.
pub fn raw_object<'a>(members: impl IntoIterator<Item = (&'a str, &'a RawValue)>) -> Box<RawValue> {
    let mut out = Vec::with_capacity(128);
    write_object(&mut out, members.into_iter().map(|(k, v)| (k, v.get())));
    // Every piece is valid JSON, so this cannot fail; `null` is the unreachable fallback.
    String::from_utf8(out)
        .ok()
        .and_then(|s| RawValue::from_string(s).ok())
        .unwrap_or_else(|| RawValue::NULL.to_owned())
}

/// Appends `{"key":value,...}`: keys escaped, each value's text (which must be
/// valid JSON) copied as it is, nothing re-validated.
pub fn write_object<'a>(out: &mut Vec<u8>, members: impl IntoIterator<Item = (&'a str, &'a str)>) {
    out.push(b'{');
    for (i, (key, value)) in members.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        push_str_json(out, key);
        out.push(b':');
        out.extend_from_slice(value.as_bytes());
    }
    out.push(b'}');
}

#[cfg(test)]
#[path = "jsonrpc_tests.rs"]
mod tests;
