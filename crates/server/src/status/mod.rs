//! The read-only status page (`status` in the config): `GET <path>` is a
//! server-rendered HTML page (`html`), `GET <path>.json` the same report as
//! JSON (`report`). With a token configured both want
//! `Authorization: Bearer <token>` (compared as SHA-256 digests in constant
//! time; else 401 with `WWW-Authenticate: Bearer realm="junction-status"`),
//! and the HTML page also takes it as `?token=` so a browser can open it.
//! Also keeps the latest reload's outcome (`ReloadLog`), which `reload`
//! records and the page shows.

mod html;
mod report;
mod text;

use std::sync::Mutex;
use std::time::SystemTime;

use http::{header, HeaderValue, Method, Response, StatusCode};
use sha2::{Digest, Sha256};

use crate::response::{self, Body};
use crate::state::State;

/// Longest reload error kept.
const MAX_RELOAD_ERROR: usize = 2000;

/// When the serving config was loaded, and the latest reload attempt.
pub struct ReloadLog(Mutex<ReloadLogInner>);

struct ReloadLogInner {
    loaded_at: SystemTime,
    last: Option<Reload>,
}

/// One reload attempt.
#[derive(Clone, Debug)]
pub struct Reload {
    pub ok: bool,
    pub at: SystemTime,
    /// Why it failed.
    pub error: Option<String>,
}

impl Default for ReloadLog {
    fn default() -> Self {
        ReloadLog(Mutex::new(ReloadLogInner {
            loaded_at: SystemTime::now(),
            last: None,
        }))
    }
}

impl ReloadLog {
    fn lock(&self) -> std::sync::MutexGuard<'_, ReloadLogInner> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records a reload: `Ok` when its config now serves, else why not.
    pub fn record(&self, outcome: Result<(), &str>) {
        let at = SystemTime::now();
        let mut log = self.lock();
        let error = outcome.err().map(|e| {
            let mut e = e.to_owned();
            if e.len() > MAX_RELOAD_ERROR {
                let mut end = MAX_RELOAD_ERROR;
                while !e.is_char_boundary(end) {
                    end -= 1;
                }
                e.truncate(end);
                e.push('…');
            }
            e
        });
        if error.is_none() {
            log.loaded_at = at;
        }
        log.last = Some(Reload {
            ok: error.is_none(),
            at,
            error,
        });
    }

    /// (when the serving config was loaded, the latest attempt).
    pub fn read(&self) -> (SystemTime, Option<Reload>) {
        let log = self.lock();
        (log.loaded_at, log.last.clone())
    }
}

/// Whether `path` is the status page or its JSON while the page is on. No
/// allocation: every request that is not an admin endpoint passes here.
pub fn serves(state: &State, path: &str) -> bool {
    let status = &state.config.status;
    status.enabled
        && path
            .strip_prefix(status.path.as_str())
            .is_some_and(|rest| rest.is_empty() || rest == ".json")
}

/// The page or its JSON; `serves` said the path is ours.
pub async fn respond(
    state: &State,
    reloads: &ReloadLog,
    parts: &http::request::Parts,
) -> Response<Body> {
    // `serves` let through the path itself or the path plus `.json`.
    let json = parts.uri.path().len() > state.config.status.path.len();
    if parts.method != Method::GET && parts.method != Method::HEAD {
        let mut r = response::text(
            StatusCode::METHOD_NOT_ALLOWED,
            "the status page is read-only: GET\n",
        );
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    if let Some(expected) = &state.status_token {
        if !authorized(expected, parts, !json) {
            let mut r = response::text(
                StatusCode::UNAUTHORIZED,
                "the status page wants Authorization: Bearer <status token>\n",
            );
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"junction-status\""),
            );
            return r;
        }
    }
    let report = report::gather(state, reloads).await;
    let mut r = if json {
        response::json(
            StatusCode::OK,
            serde_json::to_vec_pretty(&report).unwrap_or_default(),
        )
    } else {
        let mut r = Response::new(response::full(html::render(
            &report,
            &state.config.status.path,
        )));
        let h = r.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        );
        // No script, no frames, nothing fetched: only the inline style.
        h.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(
                "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
            ),
        );
        r
    };
    let h = r.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    r
}

/// The bearer token of the `Authorization` header, or (HTML page only) of a
/// `token` query parameter, hashed and compared with `expected` in constant
/// time (hashing first also hides the token's length).
fn authorized(expected: &[u8; 32], parts: &http::request::Parts, query_ok: bool) -> bool {
    let header = parts
        .headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let (scheme, token) = v.trim().split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
        })
        .map(str::to_owned);
    let query = || {
        parts.uri.query().and_then(|q| {
            q.split('&')
                .filter_map(|pair| pair.split_once('='))
                .find(|(k, _)| *k == "token")
                .and_then(|(_, v)| percent_decode(v))
        })
    };
    let Some(token) = header.or_else(|| query_ok.then(query).flatten()) else {
        return false;
    };
    let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
    digest
        .iter()
        .zip(expected)
        .fold(0u8, |acc, (a, b)| acc | (a ^ b))
        == 0
}

/// `application/x-www-form-urlencoded` value decoding; `None` if malformed.
fn percent_decode(s: &str) -> Option<String> {
    let mut out = Vec::with_capacity(s.len());
    let mut bytes = s.bytes();
    while let Some(b) = bytes.next() {
        match b {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = [bytes.next()?, bytes.next()?];
                let hex = std::str::from_utf8(&hex).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
            }
            b => out.push(b),
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(uri: &str, auth: Option<&str>) -> http::request::Parts {
        let mut b = http::Request::builder().uri(uri);
        if let Some(a) = auth {
            b = b.header(header::AUTHORIZATION, a);
        }
        b.body(()).expect("request").into_parts().0
    }

    #[test]
    fn the_token_comes_from_the_header_or_for_the_page_the_query() {
        let expected: [u8; 32] = Sha256::digest(b"s3cret/+").into();
        let ok = |uri: &str, auth: Option<&str>, page: bool| {
            authorized(&expected, &parts(uri, auth), page)
        };
        assert!(ok("/status.json", Some("Bearer s3cret/+"), false));
        assert!(ok("/status.json", Some("bearer  s3cret/+ "), false));
        assert!(!ok("/status.json", Some("Bearer s3cret"), false));
        assert!(!ok("/status.json", Some("Basic s3cret/+"), false));
        assert!(!ok("/status.json", None, false));
        assert!(ok("/status?token=s3cret%2F%2B", None, true));
        assert!(
            !ok("/status.json?token=s3cret%2F%2B", None, false),
            "JSON: header only"
        );
        assert!(!ok("/status?token=s3cret%2F", None, true));
        assert!(!ok("/status?token=%zz", None, true));
    }

    #[test]
    fn reloads_are_remembered_with_their_outcome() {
        let log = ReloadLog::default();
        let (started, last) = log.read();
        assert!(last.is_none());
        log.record(Err("upstreams[0].url: bad"));
        let (loaded, last) = log.read();
        assert_eq!(
            loaded, started,
            "a failed reload changes nothing that serves"
        );
        let last = last.expect("recorded");
        assert!(!last.ok);
        assert_eq!(last.error.as_deref(), Some("upstreams[0].url: bad"));
        log.record(Ok(()));
        let (loaded, last) = log.read();
        let last = last.expect("recorded");
        assert!(last.ok && last.error.is_none());
        assert_eq!(loaded, last.at);
        log.record(Err(&"é".repeat(MAX_RELOAD_ERROR)));
        let kept = log.read().1.and_then(|r| r.error).unwrap_or_default();
        assert!(kept.len() <= MAX_RELOAD_ERROR + 3, "{}", kept.len());
    }
}
