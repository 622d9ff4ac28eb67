//! The status report as one HTML page: inline CSS, no script, every value
//! escaped (`esc`). Reloads itself every 15 seconds.

use std::fmt::Write;

use super::report::{Report, RouteInfo, UpstreamInfo};

const STYLE: &str = r#"
:root{--fg:#1f2328;--muted:#656d76;--line:#d0d7de;--bg:#f6f8fa;--card:#fff;
--ok:#1a7f37;--okbg:#dafbe1;--bad:#cf222e;--badbg:#ffebe9;--warn:#9a6700;--warnbg:#fff8c5;
--idle:#57606a;--idlebg:#eaeef2}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 -apple-system,BlinkMacSystemFont,"Segoe UI","Noto Sans",Helvetica,Arial,sans-serif;color:var(--fg);background:var(--bg)}
header{background:#24292f;color:#fff;padding:14px 28px;display:flex;align-items:baseline;gap:18px;flex-wrap:wrap}
header h1{font-size:20px;margin:0;font-weight:600}
header .meta{color:#c9d1d9;font-size:13px}
header .meta b{color:#fff;font-weight:600}
main{padding:20px 28px;max-width:1400px}
.cards{display:flex;gap:12px;margin-bottom:18px;flex-wrap:wrap}
.card{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:10px 16px;min-width:150px}
.card .n{font-size:24px;font-weight:600}
.card .l{color:var(--muted);font-size:12px;text-transform:uppercase;letter-spacing:.04em}
section{background:var(--card);border:1px solid var(--line);border-radius:8px;margin-bottom:18px;overflow:hidden}
section h2{font-size:15px;margin:0;padding:10px 16px;background:var(--bg);border-bottom:1px solid var(--line)}
section h2 .sub{font-weight:400;color:var(--muted);margin-left:8px}
table{border-collapse:collapse;width:100%}
th,td{text-align:left;padding:7px 16px;border-bottom:1px solid var(--line);vertical-align:baseline}
.nowrap{white-space:nowrap}
.tag{display:inline-block;font-size:11px;font-weight:600;color:var(--idle);background:var(--idlebg);border-radius:4px;padding:0 5px;margin-right:6px;text-transform:uppercase}
th{font-size:12px;color:var(--muted);font-weight:600;text-transform:uppercase;letter-spacing:.03em}
tr:last-child td{border-bottom:0}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px}
.badge{display:inline-block;padding:1px 9px;border-radius:10px;font-size:12px;font-weight:600}
.up{color:var(--ok);background:var(--okbg)}
.down{color:var(--bad);background:var(--badbg)}
.unknown{color:var(--idle);background:var(--idlebg)}
.warn{color:var(--warn);background:var(--warnbg)}
.err{color:var(--bad);font-size:12.5px;max-width:460px;word-break:break-word}
.muted{color:var(--muted)}
.none{padding:10px 16px;color:var(--muted)}
footer{color:var(--muted);font-size:12px;padding:0 28px 24px}
footer a{color:inherit}
"#;

/// Escapes text for HTML element content and double-quoted attributes.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The whole page. `path` is the page's own path (for the JSON link).
pub fn render(r: &Report, path: &str) -> String {
    let mut h = String::with_capacity(16 * 1024);
    let up = r.upstreams.iter().filter(|u| u.health == "up").count();
    let tools: usize = r.routes.iter().map(|x| x.tools.len()).sum();
    let _ = write!(
        h,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"refresh\" content=\"15\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <title>Junction status</title><style>{STYLE}</style></head><body>\
         <header><h1>Junction status</h1><span class=\"meta\">version <b>{}</b></span>\
         <span class=\"meta\">config <b class=\"mono\">{}</b> loaded {}</span>\
         <span class=\"meta\">{}</span></header><main>",
        esc(r.junction),
        esc(&r.config.version),
        esc(&r.config.loaded_at),
        reload_text(r),
    );
    let _ = write!(
        h,
        "<div class=\"cards\">{}{}{}{}</div>",
        card(&format!("{up} / {}", r.upstreams.len()), "upstreams up"),
        card(&r.routes.len().to_string(), "routes"),
        card(&tools.to_string(), "exposed tools"),
        card(
            &r.rate_limits
                .as_ref()
                .map_or(0, |l| l.rules.len())
                .to_string(),
            "rate-limit rules"
        ),
    );
    upstreams(&mut h, &r.upstreams);
    for route in &r.routes {
        catalog(&mut h, route);
    }
    rate_limits(&mut h, r);
    let json = path.rsplit('/').next().unwrap_or_default();
    let _ = write!(
        h,
        "</main><footer>Generated {} · refreshes every 15 s · the same data as JSON: \
         <a href=\"{}.json\">{}.json</a> (Authorization header only)</footer></body></html>",
        esc(&r.generated_at),
        esc(json),
        esc(path),
    );
    h
}

fn card(n: &str, label: &str) -> String {
    format!(
        "<div class=\"card\"><div class=\"n\">{}</div><div class=\"l\">{}</div></div>",
        esc(n),
        esc(label)
    )
}

fn reload_text(r: &Report) -> String {
    match &r.config.last_reload {
        None => "no reload yet".into(),
        Some(l) if l.ok => format!("last reload <b>ok</b> at {}", esc(&l.at)),
        Some(l) => format!(
            "last reload <span class=\"badge down\">failed</span> at {}: {}",
            esc(&l.at),
            esc(l.error.as_deref().unwrap_or_default())
        ),
    }
}

fn upstreams(h: &mut String, list: &[UpstreamInfo]) {
    h.push_str(
        "<section id=\"upstreams\"><h2>Upstreams</h2><table><tr><th>Upstream</th><th>Health</th>\
         <th>Transport</th><th>Era</th><th>Breaker</th><th>Latency</th><th>Tools</th>\
         <th>Last error</th></tr>",
    );
    for u in list {
        let era = match &u.protocol_version {
            Some(v) => format!("{} <span class=\"muted\">{}</span>", esc(u.era), esc(v)),
            None => esc(u.era),
        };
        let breaker = match (u.breaker.state, u.breaker.retry_in_ms) {
            ("closed", _) if u.breaker.failures > 0 => format!(
                "<span class=\"badge warn\">closed</span> <span class=\"muted\">{} failed</span>",
                u.breaker.failures
            ),
            ("closed", _) => "<span class=\"badge up\">closed</span>".into(),
            (state, Some(ms)) => format!(
                "<span class=\"badge down\">{}</span> <span class=\"muted\">probe in {:.0} s</span>",
                esc(state),
                (ms as f64 / 1000.0).ceil()
            ),
            (state, None) => format!("<span class=\"badge down\">{}</span>", esc(state)),
        };
        let latency = u.latency_ms.map_or_else(
            || "<span class=\"muted\">–</span>".into(),
            |ms| format!("{ms:.1} ms"),
        );
        let error = match &u.last_error {
            None => "<span class=\"muted\">none</span>".into(),
            Some(e) => format!(
                "<div class=\"err\">{}</div><div class=\"muted\">{}</div>",
                esc(&e.message),
                esc(e.at.as_deref().unwrap_or("latest tool-list fetch"))
            ),
        };
        let _ = write!(
            h,
            "<tr><td><b>{id}</b></td><td><span class=\"badge {health}\">{health}</span></td>\
             <td><span class=\"tag\">{transport}</span><span class=\"mono\">{target}</span></td>\
             <td class=\"nowrap\">{era}</td><td class=\"nowrap\">{breaker}</td>\
             <td class=\"nowrap\">{latency}</td><td>{tools}</td><td>{error}</td></tr>",
            id = esc(&u.id),
            health = esc(u.health),
            transport = esc(u.transport),
            target = esc(&u.target),
            tools = u.tools,
        );
    }
    if list.is_empty() {
        h.push_str("<tr><td colspan=\"8\" class=\"muted\">no upstreams</td></tr>");
    }
    h.push_str("</table></section>");
}

fn catalog(h: &mut String, route: &RouteInfo) {
    let degraded = if route.degraded.is_empty() {
        String::new()
    } else {
        format!(
            " <span class=\"badge down\">degraded: {}</span>",
            esc(&route.degraded.join(", "))
        )
    };
    let _ = write!(
        h,
        "<section class=\"route\"><h2>Route <code>{}</code>\
         <span class=\"sub\">{} tools over {}</span>{degraded}</h2>",
        esc(&route.path),
        route.tools.len(),
        esc(&route.upstreams.join(", ")),
    );
    if route.tools.is_empty() {
        h.push_str("<div class=\"none\">no tools listed</div>");
    } else {
        h.push_str(
            "<table><tr><th>Exposed name</th><th>Upstream</th><th>Upstream's name</th></tr>",
        );
        for t in &route.tools {
            let _ = write!(
                h,
                "<tr><td class=\"mono\">{}</td><td>{}</td><td class=\"mono\">{}</td></tr>",
                esc(&t.name),
                esc(&t.upstream),
                esc(&t.original)
            );
        }
        h.push_str("</table>");
    }
    if !route.dropped.is_empty() {
        h.push_str("<table><tr><th>Left out</th><th>Upstream</th><th>Why</th></tr>");
        for d in &route.dropped {
            let _ = write!(
                h,
                "<tr><td class=\"mono\">{}</td><td>{}</td><td><span class=\"badge warn\">{}</span></td></tr>",
                esc(&d.tool),
                esc(&d.upstream),
                esc(d.reason)
            );
        }
        h.push_str("</table>");
    }
    h.push_str("</section>");
}

fn rate_limits(h: &mut String, r: &Report) {
    let Some(l) = &r.rate_limits else {
        h.push_str(
            "<section id=\"rate-limits\"><h2>Rate limits</h2>\
             <div class=\"none\">none configured</div></section>",
        );
        return;
    };
    let _ = write!(
        h,
        "<section id=\"rate-limits\"><h2>Rate limits<span class=\"sub\">backend {}, \
         failure mode {}, {} backend failures</span></h2><table><tr><th>Rule</th><th>Key</th>\
         <th>Rate</th><th>Burst</th><th>Methods</th><th>Live buckets</th></tr>",
        esc(l.backend),
        esc(l.failure_mode),
        l.backend_failures
    );
    for rule in &l.rules {
        let key = if rule.key.is_empty() {
            "<span class=\"muted\">one shared bucket</span>".into()
        } else {
            esc(&rule.key.join(" + "))
        };
        let live = rule.live_buckets.map_or_else(
            || "<span class=\"muted\">in Redis</span>".into(),
            |n| n.to_string(),
        );
        let _ = write!(
            h,
            "<tr><td><b>{}</b></td><td>{key}</td><td>{} per {}</td><td>{}</td>\
             <td class=\"mono\">{}</td><td>{live}</td></tr>",
            esc(&rule.name),
            rule.rate,
            esc(&rule.per),
            rule.burst,
            esc(&rule.methods.join(", ")),
        );
    }
    h.push_str("</table></section>");
}

#[cfg(test)]
mod tests {
    use super::super::report::*;
    use super::*;

    #[test]
    fn a_hostile_report_renders_as_text() {
        let evil = "<script>alert(1)</script>";
        let report = Report {
            junction: "0.0.0",
            generated_at: "now".into(),
            config: ConfigInfo {
                version: "abc".into(),
                loaded_at: "then".into(),
                last_reload: Some(ReloadInfo {
                    ok: false,
                    at: "later".into(),
                    error: Some("<img src=x onerror=alert(2)>".into()),
                }),
            },
            upstreams: vec![UpstreamInfo {
                id: "a".into(),
                transport: "stdio",
                target: evil.into(),
                era: "legacy",
                protocol_version: Some(evil.into()),
                health: "down",
                breaker: BreakerInfo {
                    state: "open",
                    failures: 0,
                    retry_in_ms: Some(1500),
                },
                tools: 0,
                last_error: Some(ErrorInfo {
                    message: evil.into(),
                    at: None,
                }),
                latency_ms: None,
            }],
            routes: vec![RouteInfo {
                path: "/mcp\"><b>".into(),
                upstreams: vec!["a".into()],
                degraded: vec!["a".into()],
                tools: Vec::new(),
                dropped: vec![DroppedInfo {
                    upstream: "a".into(),
                    tool: evil.into(),
                    reason: "invalid_name",
                }],
            }],
            rate_limits: None,
        };
        let page = render(&report, "/status");
        assert!(
            !page.contains("<script") && !page.contains("<img"),
            "{page}"
        );
        assert!(!page.contains("/mcp\"><b>"), "{page}");
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(page.contains("probe in 2 s"), "{page}");
        assert!(page.contains("href=\"status.json\""), "{page}");
    }

    #[test]
    fn everything_that_could_be_markup_is_escaped() {
        assert_eq!(
            esc(r#"<script>alert("x&'y")</script>"#),
            "&lt;script&gt;alert(&quot;x&amp;&#39;y&quot;)&lt;/script&gt;"
        );
    }
}
