//! The access log: one line per MCP request, in the shape of the other log
//! lines (text or JSON, target `junction::access`) but written without
//! tracing's formatting machinery.
//!
//! An access line is written for every request, so it is built by hand into
//! one buffer (integers with `itoa`, the timestamp's date and time of day
//! formatted once per second, strings quoted only where a caller controls
//! them and escaped only when they need it) and handed to the same buffered writer as every other
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
    let mut num = itoa::Buffer::new();
    match format {
        LogFormat::Text => {
            timestamp(&mut out, now);
            push(
                &mut out,
                &["  INFO junction::access: request route=", r.route],
            );
            push(&mut out, &[" method=", r.method]);
            if let Some(u) = r.upstream {
                push(&mut out, &[" upstream=", u]);
            }
            if let Some(t) = r.target {
                push(&mut out, &[" target="]);
                debug_str(&mut out, t);
            }
            push(&mut out, &[" status=", num.format(r.status)]);
            push(&mut out, &[" outcome=", r.outcome]);
            if let Some(e) = r.error {
                push(&mut out, &[" error=", num.format(e)]);
            }
            push(&mut out, &[" duration_us=", num.format(r.duration_us)]);
            if let Some(p) = r.principal {
                push(&mut out, &[" principal="]);
                debug_str(&mut out, p);
            }
            if let Some(c) = r.client {
                push(&mut out, &[" client="]);
                ip(&mut out, c);
            }
        }
        LogFormat::Json => {
            push(&mut out, &[r#"{"timestamp":""#]);
            timestamp(&mut out, now);
            push(
                &mut out,
                &[r#"","level":"INFO","fields":{"message":"request","route":"#],
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
                push(&mut out, &[r#","client":""#]);
                ip(&mut out, c);
                out.push(b'"');
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

/// `now` in RFC 3339 with microseconds, as `humantime` writes it
/// (`2026-12-04T14:44:12.774895Z`). The part up to the second is formatted
/// once per second and thread, the rest from integers.
fn timestamp(out: &mut Vec<u8>, now: SystemTime) {
    thread_local! {
        static SECOND: std::cell::Cell<(u64, [u8; 19])> = const { std::cell::Cell::new((u64::MAX, [0; 19])) };
    }
    let since = now
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = since.as_secs();
    let (cached, mut prefix) = SECOND.get();
    if cached != secs {
        let whole = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
        let text = humantime::format_rfc3339_seconds(whole).to_string();
        // "YYYY-MM-DDTHH:MM:SSZ": everything but the zone.
        if let Some(head) = text.as_bytes().get(..19) {
            prefix.copy_from_slice(head);
            SECOND.set((secs, prefix));
        }
    }
    out.extend_from_slice(&prefix);
    let micros = since.subsec_micros();
    let mut digits = [b'0'; 6];
    let mut n = micros;
    for d in digits.iter_mut().rev() {
        *d = b'0' + (n % 10) as u8;
        n /= 10;
    }
    out.push(b'.');
    out.extend_from_slice(&digits);
    out.push(b'Z');
}

/// Bytes a quoted string keeps as they are, in Rust's `Debug` and in JSON:
/// printable ASCII but the quote and the backslash.
fn plain(s: &str) -> bool {
    s.bytes()
        .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
}

/// `s` quoted and escaped as `{s:?}` writes it.
fn debug_str(out: &mut Vec<u8>, s: &str) {
    if plain(s) {
        push(out, &["\"", s, "\""]);
    } else {
        let _ = write!(out, "{s:?}");
    }
}

fn json_str(out: &mut Vec<u8>, s: &str) {
    if plain(s) {
        push(out, &["\"", s, "\""]);
    } else {
        // Writing a string into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, s);
    }
}

/// The address as `Display` writes it (IPv4 from integers).
fn ip(out: &mut Vec<u8>, ip: IpAddr) {
    match ip {
        IpAddr::V4(v4) => {
            let mut num = itoa::Buffer::new();
            for (i, octet) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    out.push(b'.');
                }
                out.extend_from_slice(num.format(octet).as_bytes());
            }
        }
        IpAddr::V6(v6) => {
            let _ = write!(out, "{v6}");
        }
    }
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

    #[test]
    fn timestamps_match_humantime_across_seconds_and_small_fractions() {
        // The per-thread second cache must follow the clock both ways.
        for micros in [
            1_796_395_452_000_042,
            1_796_395_452_999_999,
            1_796_395_453_000_000,
            1_796_395_451_500_000,
            951_782_400_123_456,
        ] {
            let t = UNIX_EPOCH + Duration::from_micros(micros);
            let mut out = Vec::new();
            timestamp(&mut out, t);
            assert_eq!(
                String::from_utf8(out).unwrap_or_default(),
                humantime::format_rfc3339_micros(t).to_string()
            );
        }
    }

    #[test]
    fn quoting_and_addresses_match_debug_and_display() {
        for s in [
            "plain name",
            "tab\there",
            "quote\"",
            "back\\slash",
            "caf\u{e9}",
            "",
        ] {
            let mut out = Vec::new();
            debug_str(&mut out, s);
            assert_eq!(String::from_utf8(out).unwrap_or_default(), format!("{s:?}"));
            let mut out = Vec::new();
            json_str(&mut out, s);
            assert_eq!(
                String::from_utf8(out).unwrap_or_default(),
                serde_json::to_string(s).unwrap_or_default()
            );
        }
        for a in [
            "0.0.0.0",
            "255.255.255.255",
            "10.0.12.7",
            "::1",
            "2001:db8::8a2e:370:7334",
        ] {
            let addr: IpAddr = a.parse().unwrap_or(IpAddr::from([1, 1, 1, 1]));
            let mut out = Vec::new();
            ip(&mut out, addr);
            assert_eq!(String::from_utf8(out).unwrap_or_default(), addr.to_string());
        }
    }
}
