//! Building the JSON-RPC messages we send and sorting the ones we receive.
//! Payloads (`arguments`, results) stay raw: we only wrap them.

use std::borrow::Cow;

use junction_protocol::jsonrpc::{self, Id, RawParams, RpcError, ServerMessage};
use junction_protocol::{meta, version};
use serde_json::value::RawValue;

/// What goes into `params._meta` besides the forwarded downstream entries.
pub(crate) enum Stamp<'a> {
    /// Modern upstream: protocol version, client capabilities, client info.
    Modern { caps: Option<&'a RawValue> },
    /// Handshake-era upstream: everything was said in `initialize`.
    Legacy,
}

fn raw(s: String) -> Box<RawValue> {
    RawValue::from_string(s).unwrap_or_else(|_| RawValue::NULL.to_owned())
}

fn json_string(s: &str) -> Box<RawValue> {
    raw(serde_json::to_string(s).unwrap_or_else(|_| "null".to_owned()))
}

/// `clientInfo` as raw JSON text (Junction's name and version).
const CLIENT_INFO: &str = concat!(
    r#"{"name":"junction","version":""#,
    env!("CARGO_PKG_VERSION"),
    r#""}"#
);

/// `params` (minus any stray `_meta`) plus a `_meta` built from the forwarded
/// entries and the era's stamp. `progress` replaces a forwarded progressToken
/// (stdio rewrites tokens so they cannot collide on the shared channel).
pub(crate) fn build_params(
    params: &RawParams,
    forwarded: &[(String, Box<RawValue>)],
    progress: Option<&RawValue>,
    stamp: &Stamp<'_>,
) -> Box<RawValue> {
    let mut out = Vec::with_capacity(256);
    write_params(&mut out, params, forwarded, progress, stamp);
    raw(String::from_utf8(out).unwrap_or_default())
}

/// The whole request body, written once from the raw parts (the hot path:
/// the members are valid JSON already, so nothing is parsed or validated again).
pub(crate) fn request_body(
    id: i64,
    method: &str,
    params: &RawParams,
    forwarded: &[(String, Box<RawValue>)],
    progress: Option<&RawValue>,
    stamp: &Stamp<'_>,
) -> Vec<u8> {
    // Room for the stamped `_meta` members (version, capabilities, client
    // info: ~200 bytes) besides the client's own: the body is written once,
    // without growing.
    let hint = params.values().map(|v| v.get().len() + 16).sum::<usize>() + 320;
    jsonrpc::request_bytes_with(&Id::Num(id), method, hint, |out| {
        write_params(out, params, forwarded, progress, stamp)
    })
}

/// Writes params: the client's members but `_meta`, in order, then a `_meta`
/// of the forwarded members (each key once, its first value; never a stamped
/// one) followed by the era's stamp. Written straight into `out`: the stamp's
/// keys are constants, so only forwarded keys are checked for escapes.
fn write_params(
    out: &mut Vec<u8>,
    params: &RawParams,
    forwarded: &[(String, Box<RawValue>)],
    progress: Option<&RawValue>,
    stamp: &Stamp<'_>,
) {
    out.push(b'{');
    let mut first = true;
    for (key, value) in params.iter().filter(|(k, _)| *k != "_meta") {
        if !std::mem::take(&mut first) {
            out.push(b',');
        }
        jsonrpc::push_key(out, key);
        out.extend_from_slice(value.get().as_bytes());
    }
    // `_meta` opens with its first member.
    let mut meta_open = false;
    let mut open_meta = |out: &mut Vec<u8>| {
        if std::mem::replace(&mut meta_open, true) {
            out.push(b',');
        } else {
            if !first {
                out.push(b',');
            }
            out.extend_from_slice(br#""_meta":{"#);
        }
    };
    for (i, (key, value)) in forwarded.iter().enumerate() {
        if meta::is_stamped(key) || forwarded[..i].iter().any(|(k, _)| k == key) {
            continue;
        }
        let value = match (key.as_str(), progress) {
            (meta::PROGRESS_TOKEN, Some(ours)) => ours,
            _ => value,
        };
        open_meta(out);
        jsonrpc::push_key(out, key);
        out.extend_from_slice(value.get().as_bytes());
    }
    if let Stamp::Modern { caps } = stamp {
        // The stamp's keys and version need no escapes (a test reads the
        // whole back): written piece by piece, not checked member by member.
        open_meta(out);
        let caps = caps.map_or("{}", |c| c.get());
        for piece in [
            "\"",
            meta::PROTOCOL_VERSION,
            "\":\"",
            version::MODERN,
            "\",\"",
            meta::CLIENT_CAPABILITIES,
            "\":",
            caps,
            ",\"",
            meta::CLIENT_INFO,
            "\":",
            CLIENT_INFO,
        ] {
            out.extend_from_slice(piece.as_bytes());
        }
    }
    if meta_open {
        out.push(b'}');
    }
    out.push(b'}');
}

pub(crate) fn request_bytes(id: i64, method: &str, params: &RawValue) -> Vec<u8> {
    jsonrpc::request_bytes(&Id::Num(id), method, params)
}

/// What Junction tells a handshake-era upstream it can do: everything a
/// downstream client might answer. Junction relays each such request to the
/// client of the call it belongs to, and refuses it when that client did not
/// declare the capability (NOTES §6, §12.3).
const LEGACY_CLIENT_CAPABILITIES: &str =
    r#"{"elicitation":{"form":{},"url":{}},"sampling":{},"roots":{}}"#;

pub(crate) fn initialize_params() -> Box<RawValue> {
    raw(format!(
        r#"{{"protocolVersion":"{}","capabilities":{LEGACY_CLIENT_CAPABILITIES},"clientInfo":{}}}"#,
        version::LEGACY[0],
        CLIENT_INFO
    ))
}

pub(crate) fn initialized_bytes() -> Vec<u8> {
    jsonrpc::notification_bytes("notifications/initialized", &raw("{}".to_owned()))
}

pub(crate) fn cancelled_bytes(id: i64, reason: &str) -> Vec<u8> {
    let params = format!(
        r#"{{"requestId":{id},"reason":{}}}"#,
        json_string(reason).get()
    );
    jsonrpc::notification_bytes("notifications/cancelled", &raw(params))
}

/// Our answer to a server→client request on a legacy channel: `ping` gets `{}`;
/// anything else is refused, since we initialize with no client capabilities.
pub(crate) fn answer_server_request(id: &Id, method: &str) -> Vec<u8> {
    if method == "ping" {
        jsonrpc::result_bytes(id, &raw("{}".to_owned()))
    } else {
        let err = RpcError::new(
            junction_protocol::codes::METHOD_NOT_FOUND,
            format!("junction does not offer {method} to upstreams"),
        );
        jsonrpc::error_bytes(Some(id), &err)
    }
}

/// `Mcp-Name` source: `params.name` (tools/call, prompts/get), `params.uri`
/// (resources/read) or `params.taskId` (the tasks extension's methods).
/// Borrowed from the params' text unless the JSON string has escapes.
pub(crate) fn mcp_name<'a>(method: &str, params: &'a RawParams) -> Option<Cow<'a, str>> {
    let key = match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" => "uri",
        // The tasks extension mirrors the task id (SEP-2663, routing headers).
        "tasks/get" | "tasks/update" | "tasks/cancel" => "taskId",
        _ => return None,
    };
    jsonrpc::raw_str(params.get(key)?)
}

/// One message from an upstream, sorted by kind.
pub(crate) enum Incoming {
    Response {
        id: Option<Id>,
        outcome: Result<Box<RawValue>, RpcError>,
    },
    Notification {
        method: String,
        params: Option<Box<RawValue>>,
        raw: Box<RawValue>,
    },
    ServerRequest {
        id: Id,
        method: String,
        params: Option<Box<RawValue>>,
    },
}

pub(crate) fn classify(text: &str) -> Result<Incoming, String> {
    let msg = ServerMessage::parse(text).map_err(|e| format!("invalid JSON-RPC: {e}"))?;
    match (msg.id, msg.method) {
        (Some(id), Some(method)) => Ok(Incoming::ServerRequest {
            id,
            method,
            params: msg.params,
        }),
        (None, Some(method)) => Ok(Incoming::Notification {
            method,
            params: msg.params,
            raw: raw(text.to_owned()),
        }),
        (id, None) => match (msg.result, msg.error) {
            (Some(result), None) => Ok(Incoming::Response {
                id,
                outcome: Ok(result),
            }),
            (None, Some(error)) => Ok(Incoming::Response {
                id,
                outcome: Err(error),
            }),
            _ => Err("response without exactly one of result/error".to_owned()),
        },
    }
}

#[derive(serde::Deserialize)]
struct ProgressParams {
    #[serde(rename = "progressToken")]
    progress_token: Option<serde_json::Value>,
}

/// The progress token of a `notifications/progress`, as a lookup key.
pub(crate) fn progress_token_key(params: &RawValue) -> Option<String> {
    let p: ProgressParams = serde_json::from_str(params.get()).ok()?;
    p.progress_token.map(|t| t.to_string())
}

/// The same progress notification with the downstream's token put back.
pub(crate) fn with_progress_token(params: &RawValue, token: &RawValue) -> Option<Box<RawValue>> {
    let mut members: RawParams = serde_json::from_str(params.get()).ok()?;
    members.insert(meta::PROGRESS_TOKEN.into(), Cow::Borrowed(token));
    let params = jsonrpc::raw_object(members.iter().map(|(k, v)| (k.as_ref(), v.as_ref())));
    let bytes = jsonrpc::notification_bytes("notifications/progress", &params);
    String::from_utf8(bytes).ok().map(raw)
}

pub(crate) fn raw_string(s: String) -> Box<RawValue> {
    raw(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(s: &str) -> Box<RawValue> {
        raw(s.to_owned())
    }

    #[test]
    fn modern_params_keep_arguments_and_add_meta() {
        let mut params = RawParams::new();
        params.insert("name".into(), Cow::Owned(r(r#""echo""#)));
        params.insert("arguments".into(), Cow::Owned(r(r#"{"b":1,  "a":2}"#)));
        let fwd = vec![("progressToken".to_owned(), r("7"))];
        let out = build_params(&params, &fwd, None, &Stamp::Modern { caps: None });
        let v: serde_json::Value = serde_json::from_str(out.get()).unwrap_or_default();
        assert!(out.get().contains(r#"{"b":1,  "a":2}"#), "{}", out.get());
        assert_eq!(v["_meta"]["progressToken"], 7);
        assert_eq!(v["_meta"][meta::PROTOCOL_VERSION], "2026-07-28");
        assert_eq!(v["_meta"][meta::CLIENT_CAPABILITIES], serde_json::json!({}));
        assert_eq!(v["_meta"][meta::CLIENT_INFO]["name"], "junction");
    }

    #[test]
    fn request_body_is_the_request_around_build_params() {
        let mut params = RawParams::new();
        params.insert("name".into(), Cow::Owned(r(r#""echo""#)));
        params.insert("arguments".into(), Cow::Owned(r(r#"{"b":1,  "a":2}"#)));
        params.insert("_meta".into(), Cow::Owned(r(r#"{"stray":1}"#)));
        let fwd = vec![("k\"ey".to_owned(), r("[1]"))];
        let caps = r(r#"{"sampling":{}}"#);
        let stamp = Stamp::Modern { caps: Some(&caps) };
        let built = build_params(&params, &fwd, None, &stamp);
        let body = request_body(7, "tools/call", &params, &fwd, None, &stamp);
        assert_eq!(body, request_bytes(7, "tools/call", &built));
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        assert_eq!(v["params"]["_meta"]["k\"ey"], serde_json::json!([1]));
        assert_eq!(
            v["params"]["_meta"][meta::CLIENT_CAPABILITIES]["sampling"],
            serde_json::json!({})
        );
        assert_eq!(
            v["params"]["_meta"][meta::PROTOCOL_VERSION],
            version::MODERN
        );
        assert_eq!(
            v["params"]["_meta"][meta::CLIENT_INFO],
            serde_json::json!({"name": "junction", "version": env!("CARGO_PKG_VERSION")})
        );
    }

    #[test]
    fn forwarded_meta_keeps_each_key_once_and_never_a_stamped_one() {
        let fwd = vec![
            ("a".to_owned(), r("1")),
            (meta::PROTOCOL_VERSION.to_owned(), r(r#""1999-01-01""#)),
            ("a".to_owned(), r("2")),
            ("progressToken".to_owned(), r(r#""down""#)),
        ];
        let ours = r(r#""jp-1""#);
        for (stamp, want) in [
            (
                Stamp::Legacy,
                r#"{"_meta":{"a":1,"progressToken":"jp-1"}}"#.to_owned(),
            ),
            (
                Stamp::Modern { caps: None },
                format!(
                    r#"{{"_meta":{{"a":1,"progressToken":"jp-1","{}":"{}","{}":{{}},"{}":{{"name":"junction","version":"{}"}}}}}}"#,
                    meta::PROTOCOL_VERSION,
                    version::MODERN,
                    meta::CLIENT_CAPABILITIES,
                    meta::CLIENT_INFO,
                    env!("CARGO_PKG_VERSION")
                ),
            ),
        ] {
            let out = build_params(&RawParams::new(), &fwd, Some(&ours), &stamp);
            assert_eq!(out.get(), want);
        }
        let mut params = RawParams::new();
        params.insert("name".into(), Cow::Owned(r(r#""x""#)));
        let out = build_params(&params, &[], None, &Stamp::Legacy);
        assert_eq!(out.get(), r#"{"name":"x"}"#);
    }

    #[test]
    fn legacy_params_without_meta_have_no_meta_member() {
        let out = build_params(&RawParams::new(), &[], None, &Stamp::Legacy);
        assert_eq!(out.get(), "{}");
    }

    #[test]
    fn progress_override_replaces_token() {
        let fwd = vec![("progressToken".to_owned(), r(r#""down""#))];
        let ours = r(r#""jp-1""#);
        let out = build_params(&RawParams::new(), &fwd, Some(&ours), &Stamp::Legacy);
        assert_eq!(out.get(), r#"{"_meta":{"progressToken":"jp-1"}}"#);
    }

    #[test]
    fn mcp_name_is_the_decoded_name_or_uri() {
        let mut params = RawParams::new();
        params.insert("name".into(), Cow::Owned(r(r#""get_weather""#)));
        params.insert("uri".into(), Cow::Owned(r(r#""file:///caf\u00e9""#)));
        let name = mcp_name("tools/call", &params);
        assert!(matches!(name, Some(Cow::Borrowed("get_weather"))));
        assert_eq!(
            mcp_name("prompts/get", &params).as_deref(),
            Some("get_weather")
        );
        assert_eq!(
            mcp_name("resources/read", &params).as_deref(),
            Some("file:///café")
        );
        assert_eq!(mcp_name("tools/list", &params), None);
        params.insert("name".into(), Cow::Owned(r("7")));
        assert_eq!(mcp_name("tools/call", &params), None);
    }

    #[test]
    fn classify_kinds() {
        assert!(matches!(
            classify(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#),
            Ok(Incoming::Response { outcome: Ok(_), .. })
        ));
        assert!(matches!(
            classify(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#),
            Ok(Incoming::ServerRequest { .. })
        ));
        assert!(matches!(
            classify(r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#),
            Ok(Incoming::Notification { .. })
        ));
        assert!(classify("not json").is_err());
        assert!(classify(r#"{"jsonrpc":"2.0","id":1}"#).is_err());
    }

    #[test]
    fn progress_token_round_trip() {
        let p = r(r#"{"progressToken":"jp-3","progress":1}"#);
        assert_eq!(progress_token_key(&p).as_deref(), Some(r#""jp-3""#));
        let back = with_progress_token(&p, &r("42")).map(|b| b.get().to_owned());
        let v: serde_json::Value =
            serde_json::from_str(back.as_deref().unwrap_or("null")).unwrap_or_default();
        assert_eq!(v["params"]["progressToken"], 42);
        assert_eq!(v["params"]["progress"], 1);
    }
}
