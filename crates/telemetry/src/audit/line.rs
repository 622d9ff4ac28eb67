//! One audit line: the call's members in a fixed order, rendered by hand
//! into one JSON object and a newline.

use std::io::Write;
use std::net::IpAddr;
use std::time::{Duration, SystemTime};

use serde_json::Value;

/// The client's JSON-RPC id, as it sent it.
#[derive(Clone, Copy, Debug)]
pub enum JsonRpcId<'a> {
    Num(i64),
    Str(&'a str),
}

/// What a line is about: its method (the line's `event`), which also names
/// the keys of the two names a line carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// `tools/call`: the exposed tool and the upstream's own name of it.
    ToolsCall,
    /// `prompts/get`: the exposed prompt and the upstream's own name of it.
    PromptsGet,
    /// `resources/read`: the URI the client named and the one sent upstream.
    ResourcesRead,
}

impl Method {
    /// The line's `event`, its name's key and its upstream name's key.
    fn keys(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Method::ToolsCall => ("tools/call", "tool", "upstream_tool"),
            Method::PromptsGet => ("prompts/get", "prompt", "upstream_prompt"),
            Method::ResourcesRead => ("resources/read", "uri", "upstream_uri"),
        }
    }
}

/// One call's line. Optional members are left out when `None`, except
/// `principal` and `client`, which are `null`.
#[derive(Debug)]
pub struct AuditLine<'a> {
    /// Fresh per call (128-bit hex).
    pub request_id: &'a str,
    pub jsonrpc_id: JsonRpcId<'a>,
    /// The route's path (config).
    pub route: &'a str,
    /// The principal's `sub`.
    pub principal: Option<&'a str>,
    pub client: Option<IpAddr>,
    /// The method (the line's `event`), which says what `name` and
    /// `upstream_name` are.
    pub method: Method,
    /// What the client named: the exposed tool or prompt, the URI.
    pub name: &'a str,
    pub upstream: &'a str,
    /// The upstream's own name of it.
    pub upstream_name: &'a str,
    /// The outcome label of the call's metric (`junction_tool_calls_total`,
    /// or `junction_upstream_requests_total` for prompts and resources).
    pub outcome: &'a str,
    /// Junction's JSON-RPC code when it refused or failed the call.
    pub error_code: Option<i64>,
    pub duration: Duration,
    /// Redacted, when switched on.
    pub arguments: Option<&'a Value>,
    /// The result the client got, redacted, when switched on.
    pub result: Option<&'a Value>,
    /// The upstream's JSON-RPC error the client got, when results are on.
    pub upstream_error: Option<&'a Value>,
}

/// The line for `l` at `now`, newline included. Members in a fixed order;
/// every string through serde_json's escaping, so no value a caller sent
/// can break a line or forge one.
pub(super) fn render(l: &AuditLine<'_>, now: SystemTime) -> Vec<u8> {
    let mut out = Vec::with_capacity(384);
    let (event, name_key, upstream_name_key) = l.method.keys();
    let _ = write!(
        out,
        r#"{{"time":"{}","event":"{event}","request_id":"#,
        humantime::format_rfc3339_micros(now)
    );
    json(&mut out, l.request_id);
    out.extend_from_slice(br#","jsonrpc_id":"#);
    match l.jsonrpc_id {
        JsonRpcId::Num(n) => out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes()),
        JsonRpcId::Str(s) => json(&mut out, s),
    }
    out.extend_from_slice(br#","route":"#);
    json(&mut out, l.route);
    out.extend_from_slice(br#","principal":"#);
    match l.principal {
        Some(p) => json(&mut out, p),
        None => out.extend_from_slice(b"null"),
    }
    match l.client {
        Some(ip) => {
            let _ = write!(out, r#","client":"{ip}""#);
        }
        None => out.extend_from_slice(br#","client":null"#),
    }
    for (key, value) in [
        (name_key, l.name),
        ("upstream", l.upstream),
        (upstream_name_key, l.upstream_name),
        ("outcome", l.outcome),
    ] {
        let _ = write!(out, r#","{key}":"#);
        json(&mut out, value);
    }
    if let Some(code) = l.error_code {
        let _ = write!(out, r#","error_code":{code}"#);
    }
    let _ = write!(
        out,
        r#","duration_ms":{:.3}"#,
        l.duration.as_secs_f64() * 1000.0
    );
    for (key, value) in [
        ("arguments", l.arguments),
        ("result", l.result),
        ("upstream_error", l.upstream_error),
    ] {
        if let Some(v) = value {
            let _ = write!(out, r#","{key}":"#);
            // Writing into a Vec cannot fail; a Value's keys are strings.
            let _ = serde_json::to_writer(&mut out, v);
        }
    }
    out.extend_from_slice(b"}\n");
    out
}

/// `s` as a JSON string.
fn json(out: &mut Vec<u8>, s: &str) {
    // Writing a string into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}
#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::UNIX_EPOCH;

    fn line() -> AuditLine<'static> {
        AuditLine {
            request_id: "00112233445566778899aabbccddeeff",
            jsonrpc_id: JsonRpcId::Str("a\"b"),
            route: "/mcp",
            principal: Some("alice\n{\"forged\":1}"),
            client: "198.51.100.7".parse().ok(),
            method: Method::ToolsCall,
            name: "crm__get",
            upstream: "crm",
            upstream_name: "get",
            outcome: "ok",
            error_code: None,
            duration: Duration::from_micros(1234),
            arguments: None,
            result: None,
            upstream_error: None,
        }
    }

    fn parsed(l: &AuditLine<'_>) -> (Vec<u8>, Value) {
        let at = UNIX_EPOCH + Duration::from_micros(1_796_395_452_774_895);
        let bytes = render(l, at);
        let v = serde_json::from_slice(&bytes).unwrap_or_default();
        (bytes, v)
    }

    #[test]
    fn a_line_is_one_json_object_with_its_members_in_order() {
        let (bytes, v) = parsed(&line());
        assert_eq!(bytes.iter().filter(|b| **b == b'\n').count(), 1);
        assert_eq!(bytes.last(), Some(&b'\n'));
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            text.starts_with(r#"{"time":"2026-12-04T14:44:12.774895Z","event":"tools/call","request_id":"00112233445566778899aabbccddeeff","jsonrpc_id":"a\"b","route":"/mcp","#),
            "{text}"
        );
        assert_eq!(v["principal"], "alice\n{\"forged\":1}");
        assert_eq!(v["client"], "198.51.100.7");
        assert_eq!(
            (
                v["tool"].clone(),
                v["upstream"].clone(),
                v["upstream_tool"].clone()
            ),
            (json!("crm__get"), json!("crm"), json!("get"))
        );
        assert_eq!(v["outcome"], "ok");
        assert_eq!(v["duration_ms"], 1.234);
        for absent in ["error_code", "arguments", "result", "upstream_error"] {
            assert!(v.get(absent).is_none(), "{absent} in {v}");
        }
    }

    #[test]
    fn prompts_and_resources_are_named_as_their_method_names_them() {
        let prompt = AuditLine {
            method: Method::PromptsGet,
            name: "crm__greet",
            upstream_name: "greet",
            ..line()
        };
        let (bytes, v) = parsed(&prompt);
        let text = String::from_utf8_lossy(&bytes);
        assert!(text.contains(r#""event":"prompts/get","#), "{text}");
        assert_eq!(
            (&v["prompt"], &v["upstream_prompt"]),
            (&json!("crm__greet"), &json!("greet"))
        );
        assert!(
            v.get("tool").is_none() && v.get("upstream_tool").is_none(),
            "{v}"
        );
        let resource = AuditLine {
            method: Method::ResourcesRead,
            name: "crm://a\"b",
            upstream_name: "file:///a",
            ..line()
        };
        let (_, v) = parsed(&resource);
        assert_eq!(v["event"], "resources/read");
        assert_eq!(
            (&v["uri"], &v["upstream_uri"]),
            (&json!("crm://a\"b"), &json!("file:///a"))
        );
        assert!(v.get("tool").is_none(), "{v}");
    }

    #[test]
    fn optional_members_appear_when_given_and_unknown_callers_are_null() {
        let (args, result, err) = (json!({"q": 1}), json!({"content": []}), json!({"code": 7}));
        let l = AuditLine {
            jsonrpc_id: JsonRpcId::Num(-3),
            principal: None,
            client: None,
            outcome: "forbidden",
            error_code: Some(-31005),
            arguments: Some(&args),
            result: Some(&result),
            upstream_error: Some(&err),
            ..line()
        };
        let (_, v) = parsed(&l);
        assert_eq!(v["jsonrpc_id"], -3);
        assert!(v["principal"].is_null() && v["client"].is_null(), "{v}");
        assert_eq!(v["error_code"], -31005);
        assert_eq!(
            (
                v["arguments"].clone(),
                v["result"].clone(),
                v["upstream_error"].clone()
            ),
            (args, result, err)
        );
    }
}
