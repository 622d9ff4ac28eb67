//! One OAuth 2.1 client of one token endpoint: a form POST over the
//! hyper-util client with rustls (public roots plus an optional CA file),
//! and its answer read as a token, a refusal (4xx with an OAuth `error`) or
//! an outage. The client secret is never logged: `Debug` redacts it and no
//! error text includes it.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use bytes::Bytes;
use http::{header, HeaderValue, Request, Uri};
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use junction_config::{ClientAuthMethod, OAuthClient};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use serde_json::Value;

use super::CredentialError;

/// RFC 8693 §2.1.
pub(crate) const TOKEN_EXCHANGE_GRANT: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
pub(crate) const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";
/// A token response is a few KiB at most; anything near this is not one.
const MAX_RESPONSE_BYTES: usize = 64 * 1024;
/// Longest OAuth `error_description` kept for logs.
const MAX_DESCRIPTION: usize = 200;
/// `expires_in` beyond this is read as this (a year): nothing lives forever.
const MAX_EXPIRES_IN: Duration = Duration::from_secs(365 * 24 * 3600);

type HttpClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// What the endpoint issued.
pub(crate) struct Issued {
    pub(crate) access_token: String,
    /// `expires_in` as sent; None when the endpoint did not say.
    pub(crate) expires_in: Option<Duration>,
}

pub(crate) struct Endpoint {
    url: Uri,
    client_id: String,
    client_secret: String,
    /// `Basic …` for `client_secret_basic`, made once.
    basic: Option<HeaderValue>,
    /// Parameters every request of this client carries (`scope`, `audience`, `resource`).
    extra: Vec<(&'static str, String)>,
    timeout: Duration,
    client: HttpClient,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("url", &self.url)
            .field("client_id", &self.client_id)
            .field("client_secret", &"<redacted>")
            .field("extra", &self.extra)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// Builds the client (reads `ca_file`, no network I/O).
    pub(crate) fn new(cfg: &OAuthClient, client_secret: String) -> Result<Endpoint, String> {
        let url: Uri = cfg
            .token_url
            .parse()
            .map_err(|e| format!("token_url: {e}"))?;
        let basic = match cfg.auth_method {
            ClientAuthMethod::ClientSecretPost => None,
            ClientAuthMethod::ClientSecretBasic => {
                // RFC 6749 §2.3.1: both form-encoded before the Basic encoding.
                let pair = format!(
                    "{}:{}",
                    form_urlencoded::byte_serialize(cfg.client_id.as_bytes()).collect::<String>(),
                    form_urlencoded::byte_serialize(client_secret.as_bytes()).collect::<String>()
                );
                let mut v = HeaderValue::from_str(&format!("Basic {}", STANDARD.encode(pair)))
                    .map_err(|_| "client credentials do not fit a header".to_owned())?;
                v.set_sensitive(true);
                Some(v)
            }
        };
        let mut extra = Vec::new();
        if !cfg.scopes.is_empty() {
            extra.push(("scope", cfg.scopes.join(" ")));
        }
        if let Some(a) = &cfg.audience {
            extra.push(("audience", a.clone()));
        }
        if let Some(r) = &cfg.resource {
            extra.push(("resource", r.clone()));
        }
        Ok(Endpoint {
            url,
            client_id: cfg.client_id.clone(),
            client_secret,
            basic,
            extra,
            timeout: cfg.timeout,
            client: http_client(cfg.ca_file.as_deref())?,
        })
    }

    pub(crate) fn url(&self) -> &Uri {
        &self.url
    }

    /// The client credentials grant (RFC 6749 §4.4).
    pub(crate) async fn client_credentials(&self) -> Result<Issued, CredentialError> {
        self.request(&[("grant_type", "client_credentials")]).await
    }

    /// RFC 8693 token exchange with `subject` (an access token) as subject token.
    pub(crate) async fn exchange(&self, subject: &str) -> Result<Issued, CredentialError> {
        self.request(&[
            ("grant_type", TOKEN_EXCHANGE_GRANT),
            ("subject_token", subject),
            ("subject_token_type", ACCESS_TOKEN_TYPE),
        ])
        .await
    }

    /// The form body: `grant`, then the client's own parameters, then the
    /// client's id and secret when they go in the body.
    pub(crate) fn form(&self, grant: &[(&str, &str)]) -> String {
        let mut form = form_urlencoded::Serializer::new(String::new());
        form.extend_pairs(grant);
        form.extend_pairs(self.extra.iter().map(|(k, v)| (*k, v.as_str())));
        if self.basic.is_none() {
            form.append_pair("client_id", &self.client_id);
            form.append_pair("client_secret", &self.client_secret);
        }
        form.finish()
    }

    async fn request(&self, grant: &[(&str, &str)]) -> Result<Issued, CredentialError> {
        let mut req = Request::post(self.url.clone())
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(header::ACCEPT, "application/json")
            .body(Full::new(Bytes::from(self.form(grant))))
            .map_err(|e| CredentialError::Unavailable(format!("bad token request: {e}")))?;
        if let Some(basic) = &self.basic {
            req.headers_mut()
                .insert(header::AUTHORIZATION, basic.clone());
        }
        let exchange = async {
            let res = self
                .client
                .request(req)
                .await
                .map_err(|e| CredentialError::Unavailable(error_chain(&e)))?;
            let status = res.status().as_u16();
            let body = Limited::new(res.into_body(), MAX_RESPONSE_BYTES)
                .collect()
                .await
                .map_err(|e| {
                    CredentialError::Unavailable(format!("reading the answer (HTTP {status}): {e}"))
                })?
                .to_bytes();
            Ok::<_, CredentialError>((status, body))
        };
        let (status, body) = tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| {
                CredentialError::Unavailable(format!("no answer within {}", humanize(self.timeout)))
            })??;
        read_answer(status, &body)
    }
}

/// A status and body from the endpoint, read as RFC 6749 §5.1 / §5.2 say.
/// 408 and 429 are the endpoint's trouble, not a refusal.
pub(crate) fn read_answer(status: u16, body: &[u8]) -> Result<Issued, CredentialError> {
    let json: Option<Value> = serde_json::from_slice(body).ok();
    match status {
        200..=299 => {
            let json = json.ok_or_else(|| {
                CredentialError::Unavailable("the token response is not JSON".into())
            })?;
            issued(&json)
        }
        400..=499 if status != 408 && status != 429 => {
            let field = |name: &str| {
                json.as_ref()
                    .and_then(|j| j.get(name))
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            };
            Err(CredentialError::Refused {
                status,
                error: field("error").filter(|e| is_error_code(e)),
                description: field("error_description").map(|d| printable(&d)),
            })
        }
        _ => Err(CredentialError::Unavailable(format!(
            "the token endpoint answered HTTP {status}"
        ))),
    }
}

fn issued(json: &Value) -> Result<Issued, CredentialError> {
    let bad = |why: &str| CredentialError::Unavailable(format!("bad token response: {why}"));
    let token = json
        .get("access_token")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("no access_token"))?;
    // Sent as `Authorization: Bearer <token>`: visible ASCII only.
    if token.is_empty() || !token.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
        return Err(bad("the access_token cannot be sent as a bearer token"));
    }
    match json.get("token_type").and_then(Value::as_str) {
        // REQUIRED by RFC 6749, yet some endpoints leave it out.
        None => {}
        Some(t) if t.eq_ignore_ascii_case("bearer") => {}
        Some(_) => return Err(bad("token_type is not Bearer")),
    }
    let expires_in = match json.get("expires_in") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => n.as_f64(),
        // Some endpoints send it as a string.
        Some(Value::String(s)) => s.trim().parse::<f64>().ok(),
        Some(_) => None,
    }
    .filter(|s| s.is_finite())
    .map(|s| Duration::from_secs_f64(s.max(0.0)).min(MAX_EXPIRES_IN));
    Ok(Issued {
        access_token: token.to_owned(),
        expires_in,
    })
}

/// RFC 6749 §5.2: `error` is `%x20-21 / %x23-5B / %x5D-7E`; kept short, it
/// is what a caller and a log see.
fn is_error_code(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| (0x21..=0x7e).contains(&b) && b != b'"' && b != b'\\')
}

fn printable(s: &str) -> String {
    s.chars()
        .filter(|c| !c.is_control())
        .take(MAX_DESCRIPTION)
        .collect()
}

fn humanize(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// An error and its causes (hyper-util's own text is only "client error (Connect)").
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

fn http_client(ca_file: Option<&Path>) -> Result<HttpClient, String> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = ca_file {
        let bad = |e: &dyn std::fmt::Display| format!("ca_file {}: {e}", path.display());
        let pem = std::fs::read(path).map_err(|e| bad(&e))?;
        let mut added = 0;
        for cert in CertificateDer::pem_slice_iter(&pem) {
            roots.add(cert.map_err(|e| bad(&e))?).map_err(|e| bad(&e))?;
            added += 1;
        }
        if added == 0 {
            return Err(bad(&"no certificates"));
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS setup: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .enable_http2()
        .build();
    Ok(Client::builder(TokioExecutor::new()).build(https))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(method: ClientAuthMethod) -> OAuthClient {
        OAuthClient {
            token_url: "https://idp.test/token".into(),
            client_id: "junction gw".into(),
            client_secret: junction_config::SecretSource::Env("S".into()),
            scopes: vec!["a".into(), "b:c".into()],
            audience: Some("https://crm/mcp".into()),
            resource: None,
            auth_method: method,
            timeout: Duration::from_secs(10),
            ca_file: None,
        }
    }

    #[test]
    fn basic_form_encodes_id_and_secret_and_keeps_them_out_of_the_body() {
        let e = Endpoint::new(
            &client(ClientAuthMethod::ClientSecretBasic),
            "s&cr=t".into(),
        )
        .expect("endpoint");
        let basic = e.basic.as_ref().and_then(|v| v.to_str().ok());
        let want = format!("Basic {}", STANDARD.encode("junction+gw:s%26cr%3Dt"));
        assert_eq!(basic, Some(want.as_str()));
        assert_eq!(
            e.form(&[("grant_type", "client_credentials")]),
            "grant_type=client_credentials&scope=a+b%3Ac&audience=https%3A%2F%2Fcrm%2Fmcp"
        );
        let shown = format!("{e:?}");
        assert!(
            !shown.contains("s&cr=t") && shown.contains("<redacted>"),
            "{shown}"
        );
    }

    #[test]
    fn post_puts_id_and_secret_in_the_body() {
        let e = Endpoint::new(&client(ClientAuthMethod::ClientSecretPost), "pw".into())
            .expect("endpoint");
        assert!(e.basic.is_none());
        assert!(e
            .form(&[("grant_type", "client_credentials")])
            .ends_with("&client_id=junction+gw&client_secret=pw"));
    }

    #[test]
    fn answers() {
        let ok = read_answer(
            200,
            br#"{"access_token":"t1","token_type":"bearer","expires_in":"90"}"#,
        )
        .expect("token");
        assert_eq!(
            (ok.access_token.as_str(), ok.expires_in),
            ("t1", Some(Duration::from_secs(90)))
        );
        let no_expiry = read_answer(200, br#"{"access_token":"t"}"#).expect("token");
        assert_eq!(no_expiry.expires_in, None);
        for bad in [
            &br#"{"token_type":"Bearer"}"#[..],
            br#"{"access_token":"a b"}"#,
            br#"{"access_token":"t","token_type":"DPoP"}"#,
            b"<html>",
        ] {
            assert!(matches!(
                read_answer(200, bad),
                Err(CredentialError::Unavailable(_))
            ));
        }
        let refused = read_answer(
            400,
            br#"{"error":"invalid_client","error_description":"who\nare you"}"#,
        );
        assert_eq!(
            refused.err(),
            Some(CredentialError::Refused {
                status: 400,
                error: Some("invalid_client".into()),
                description: Some("whoare you".into()),
            })
        );
        assert!(matches!(
            read_answer(401, b"nope"),
            Err(CredentialError::Refused { error: None, .. })
        ));
        for status in [429, 500, 503, 302] {
            assert!(matches!(
                read_answer(status, b"{}"),
                Err(CredentialError::Unavailable(_))
            ));
        }
    }
}
