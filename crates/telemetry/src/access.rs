//! The access log: one line per MCP request, in the shape of the other log
//! lines (text or JSON, target `junction::access`) but written without
//! tracing's formatting machinery.
//!
//! An access line is written for every request, so it is built by hand into
//! one buffer (integers with `itoa`, strings quoted only where a caller
//! controls them) and handed to the same buffered writer as every other
//! line: ~15k instructions per line through `tracing-subscriber`'s
//! formatter, a fraction of that here. Whether it is written is `log.access`
//! alone; the log level does not filter it.

use std::io::Write;
use std::net::IpAddr;
use std::sync::OnceLock;
use std::time::SystemTime;

use crate::{LogBuffer, LogFormat};

/// Where access lines go, once logging is set up (`init_logging`).
static ACCESS: OnceLock<AccessLog> = OnceLock::new();

/// The access log of this process, if logging was set up.
pub fn access_log() -> Option<&'static AccessLog> {
    ACCESS.get()
}

pub(crate) fn install(writer: LogBuffer, format: LogFormat) {
    let _ = ACCESS.set(AccessLog { writer, format });
}

/// The writer and the format of the access lines.
pub struct AccessLog {
    writer: LogBuffer,
    format: LogFormat,
}

/// One request's line. `None` fields are left out.
#[derive(Debug, Default)]
pub struct AccessRecord<'a> {
    /// The route's path (config).
    pub route: &'a str,
    /// The bounded method label.
    pub method: &'a str,
    /// Upstream id (config), once routed.
    pub upstream: Option<&'a str>,
    /// Exposed tool or prompt, or the resource URI, once routed.
    pub target: Option<&'a str>,
    pub status: u16,
    /// `ok` or `error`; for a streamed answer, `ok` once it reached its end
    /// or `aborted` when it was closed before.
    pub outcome: &'a str,
    /// The JSON-RPC code when Junction refused the request.
    pub error: Option<i64>,
    pub duration_us: u64,
    /// The principal's `sub`.
    pub principal: Option<&'a str>,
    pub client: Option<IpAddr>,
}

impl AccessLog {
    /// Queues one line (dropped, like any log line, when stderr is stuck).
    pub fn write(&self, record: &AccessRecord<'_>) {
        let line = render(record, self.format, SystemTime::now());
        self.writer.append(&line);
    }
}

/// The line for `record` at `now`, newline included: the text or JSON shape
/// `tracing-subscriber` gives every other line. Config names, labels and
/// numbers are written as they are; the target and the principal, which a
/// caller controls, are quoted and escaped (Rust escapes in text, JSON ones in
/// JSON), so no value can break a line or forge one.
fn render(r: &AccessRecord<'_>, format: LogFormat, now: SystemTime) -> Vec<u8> {
    let mut out = Vec::with_capacity(320);
    let time = humantime::format_rfc3339_micros(now);
    let mut num = itoa::Buffer::new();
    match format {
        LogFormat::Text => {
            let _ = write!(
                out,
                "{time}  INFO junction::access: request route={}",
                r.route
            );
            push(&mut out, &[" method=", r.method]);
            if let Some(u) = r.upstream {
                push(&mut out, &[" upstream=", u]);
            }
            if let Some(t) = r.target {
                let _ = write!(out, " target={t:?}");
            }
            push(&mut out, &[" status=", num.format(r.status)]);
            push(&mut out, &[" outcome=", r.outcome]);
            if let Some(e) = r.error {
                push(&mut out, &[" error=", num.format(e)]);
            }
            push(&mut out, &[" duration_us=", num.format(r.duration_us)]);
            if let Some(p) = r.principal {
                let _ = write!(out, " principal={p:?}");
            }
            if let Some(c) = r.client {
                let _ = write!(out, " client={c}");
            }
        }
        LogFormat::Json => {
            let _ = write!(
                out,
                r#"{{"timestamp":"{time}","level":"INFO","fields":{{"message":"request","route":"#
            );
            json_str(&mut out, r.route);
            push(&mut out, &[r#","method":"#]);
            json_str(&mut out, r.method);
            if let Some(u) = r.upstream {
                push(&mut out, &[r#","upstream":"#]);
                json_str(&mut out, u);
            }
            if let Some(t) = r.target {
                push(&mut out, &[r#","target":"#]);
                json_str(&mut out, t);
            }
            push(&mut out, &[r#","status":"#, num.format(r.status)]);
            push(&mut out, &[r#","outcome":"#]);
            json_str(&mut out, r.outcome);
            if let Some(e) = r.error {
                push(&mut out, &[r#","error":"#, num.format(e)]);
            }
            push(&mut out, &[r#","duration_us":"#, num.format(r.duration_us)]);
            if let Some(p) = r.principal {
                push(&mut out, &[r#","principal":"#]);
                json_str(&mut out, p);
            }
            if let Some(c) = r.client {
                let _ = write!(out, r#","client":"{c}""#);
            }
            push(&mut out, &[r#"},"target":"junction::access"}"#]);
        }
    }
    out.push(b'\n');
    out
}

fn push(out: &mut Vec<u8>, parts: &[&str]) {
    for p in parts {
        out.extend_from_slice(p.as_bytes());
    }
}

fn json_str(out: &mut Vec<u8>, s: &str) {
    // Writing a string into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    fn at() -> SystemTime {
        UNIX_EPOCH + Duration::from_micros(1_796_395_452_774_895)
    }

    fn full() -> AccessRecord<'static> {
        AccessRecord {
            route: "/mcp",
            method: "tools/call",
            upstream: Some("crm"),
            target: Some("crm__get \"x\"\nINFO forged"),
            status: 403,
            outcome: "error",
            error: Some(-31005),
            duration_us: 1234,
            principal: Some("alice@example.com"),
            client: "198.51.100.7".parse().ok(),
        }
    }

    fn text(r: &AccessRecord<'_>) -> String {
        String::from_utf8(render(r, LogFormat::Text, at())).unwrap_or_default()
    }

    #[test]
    fn text_lines_read_like_the_other_log_lines() {
        assert_eq!(
            text(&full()),
            "2026-12-04T14:44:12.774895Z  INFO junction::access: request route=/mcp \
             method=tools/call upstream=crm target=\"crm__get \\\"x\\\"\\nINFO forged\" \
             status=403 outcome=error error=-31005 duration_us=1234 \
             principal=\"alice@example.com\" client=198.51.100.7\n"
        );
        let bare = AccessRecord {
            route: "/mcp",
            method: "other",
            status: 401,
            outcome: "error",
            duration_us: 7,
            ..Default::default()
        };
        assert_eq!(
            text(&bare),
            "2026-12-04T14:44:12.774895Z  INFO junction::access: request route=/mcp \
             method=other status=401 outcome=error duration_us=7\n"
        );
    }

    #[test]
    fn json_lines_parse_with_the_fields_of_tracing_json_lines() {
        let line = render(&full(), LogFormat::Json, at());
        assert_eq!(line.last(), Some(&b'\n'));
        assert_eq!(line.iter().filter(|b| **b == b'\n').count(), 1);
        let v: serde_json::Value = serde_json::from_slice(&line).unwrap_or_default();
        assert_eq!(v["timestamp"], "2026-12-04T14:44:12.774895Z");
        assert_eq!(
            (v["level"].clone(), v["target"].clone()),
            ("INFO".into(), "junction::access".into())
        );
        let f = &v["fields"];
        assert_eq!(f["message"], "request");
        assert_eq!(f["target"], "crm__get \"x\"\nINFO forged");
        assert_eq!(
            (f["status"].clone(), f["error"].clone()),
            (403.into(), (-31005).into())
        );
        assert_eq!(f["duration_us"], 1234);
        assert_eq!(f["principal"], "alice@example.com");
        assert_eq!(f["client"], "198.51.100.7");
        let bare = AccessRecord {
            route: "/mcp",
            method: "other",
            status: 401,
            outcome: "error",
            ..Default::default()
        };
        let v: serde_json::Value =
            serde_json::from_slice(&render(&bare, LogFormat::Json, at())).unwrap_or_default();
        for absent in ["upstream", "target", "error", "principal", "client"] {
            assert!(v["fields"].get(absent).is_none(), "{absent} in {v}");
        }
    }
}
