//! How the report writes values for people: times as RFC 3339 UTC,
//! durations the way the config writes them, upstream URLs and programs
//! without what could be a credential.

use std::time::{Duration, SystemTime};

/// A duration the way the config writes it.
pub fn duration_text(d: Duration) -> String {
    match (d.subsec_nanos(), d.as_secs()) {
        (0, s) if s % 3600 == 0 && s > 0 => format!("{}h", s / 3600),
        (0, s) if s % 60 == 0 && s > 0 => format!("{}m", s / 60),
        (0, s) => format!("{s}s"),
        (n, _) if n % 1_000_000 == 0 => format!("{}ms", d.as_millis()),
        _ => format!("{}us", d.as_micros()),
    }
}

/// `scheme://host[:port]/path`: user info (credentials), query and fragment
/// (which may carry API keys) left out.
pub fn display_url(url: &str) -> String {
    let Ok(uri) = url.parse::<http::Uri>() else {
        return "(unparsable URL)".into();
    };
    let scheme = uri.scheme_str().unwrap_or("http");
    let host = uri.host().unwrap_or_default();
    let port = uri.port().map(|p| format!(":{p}")).unwrap_or_default();
    format!("{scheme}://{host}{port}{}", uri.path())
}

/// The program's file name: its arguments (and directory) may hold secrets.
pub fn program_name(command: &[String]) -> String {
    let program = command.first().map(String::as_str).unwrap_or_default();
    std::path::Path::new(program)
        .file_name()
        .map_or_else(|| program.to_owned(), |n| n.to_string_lossy().into_owned())
}

/// UTC, to the second: `2026-07-28T12:34:56Z`.
pub fn rfc3339(t: SystemTime) -> String {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil from days (H. Hinnant), for days since 1970-01-01.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_utc_rfc3339() {
        let at = |s: u64| rfc3339(SystemTime::UNIX_EPOCH + Duration::from_secs(s));
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(at(1_785_242_096), "2026-07-28T12:34:56Z");
        assert_eq!(at(4_102_444_799), "2099-12-31T23:59:59Z");
    }

    #[test]
    fn urls_lose_credentials_query_and_fragment() {
        assert_eq!(
            display_url("https://user:pw@crm.internal:8443/mcp?api_key=k#x"),
            "https://crm.internal:8443/mcp"
        );
        assert_eq!(
            display_url("http://127.0.0.1:1/mcp"),
            "http://127.0.0.1:1/mcp"
        );
        assert_eq!(
            program_name(&["/opt/bin/files-mcp".into(), "--token=x".into()]),
            "files-mcp"
        );
    }

    #[test]
    fn durations_read_like_config() {
        assert_eq!(duration_text(Duration::from_secs(1)), "1s");
        assert_eq!(duration_text(Duration::from_secs(120)), "2m");
        assert_eq!(duration_text(Duration::from_secs(7200)), "2h");
        assert_eq!(duration_text(Duration::from_millis(250)), "250ms");
        assert_eq!(duration_text(Duration::from_millis(1500)), "1500ms");
    }
}
