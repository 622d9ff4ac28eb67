//! A tiny OAuth token endpoint on 127.0.0.1 (port 0) that counts and
//! records its requests and answers as each test scripts, plus builders for
//! the credentials under test.
#![allow(dead_code)]

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use junction_config::{ClientAuthMethod, Credentials, OAuthClient, SecretSource};
use junction_policy::{Caller, CredentialError, UpstreamCredentials};
use serde_json::{json, Value};

/// One request the endpoint got: its form fields and `Authorization`.
#[derive(Clone, Debug)]
pub struct Seen {
    pub form: HashMap<String, String>,
    pub authorization: Option<String>,
}

/// What the endpoint answers: status, JSON body, delay.
pub type Script = dyn Fn(&Seen, usize) -> (u16, Value, Duration) + Send + Sync;

pub struct TokenEndpoint {
    pub url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    hits: Arc<AtomicUsize>,
}

impl TokenEndpoint {
    pub async fn start(
        script: impl Fn(&Seen, usize) -> (u16, Value, Duration) + Send + Sync + 'static,
    ) -> TokenEndpoint {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}/token", listener.local_addr().expect("addr"));
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let hits: Arc<AtomicUsize> = Arc::default();
        let script: Arc<Script> = Arc::new(script);
        let (seen2, hits2) = (seen.clone(), hits.clone());
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (seen, hits, script) = (seen2.clone(), hits2.clone(), script.clone());
                let svc = service_fn(move |req: Request<Incoming>| {
                    let (seen, hits, script) = (seen.clone(), hits.clone(), script.clone());
                    async move {
                        let authorization = req
                            .headers()
                            .get("authorization")
                            .and_then(|v| v.to_str().ok())
                            .map(str::to_owned);
                        let body = req
                            .into_body()
                            .collect()
                            .await
                            .map(|b| b.to_bytes())
                            .unwrap_or_default();
                        let form = form_urlencoded::parse(&body).into_owned().collect();
                        let s = Seen {
                            form,
                            authorization,
                        };
                        let n = hits.fetch_add(1, Ordering::SeqCst);
                        seen.lock().expect("log").push(s.clone());
                        let (status, body, delay) = script(&s, n);
                        tokio::time::sleep(delay).await;
                        let res = Response::builder()
                            .status(status)
                            .header("content-type", "application/json")
                            .body(Full::new(Bytes::from(body.to_string())))
                            .expect("response");
                        Ok::<_, Infallible>(res)
                    }
                });
                tokio::spawn(async move {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tcp), svc)
                        .await;
                });
            }
        });
        TokenEndpoint { url, seen, hits }
    }

    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("log").clone()
    }
}

/// Token `tok-<n>` (n counts requests), living `expires_in` seconds.
pub fn tokens(expires_in: u64) -> impl Fn(&Seen, usize) -> (u16, Value, Duration) {
    move |_, n| {
        let body = json!({"access_token": format!("tok-{n}"), "token_type": "Bearer", "expires_in": expires_in});
        (200, body, Duration::ZERO)
    }
}

pub fn client(url: &str) -> OAuthClient {
    OAuthClient {
        token_url: url.to_owned(),
        client_id: "junction".into(),
        client_secret: SecretSource::Env("SECRET".into()),
        scopes: vec!["crm.read".into()],
        audience: Some("https://crm/mcp".into()),
        resource: Some("https://crm/mcp".into()),
        auth_method: ClientAuthMethod::ClientSecretBasic,
        timeout: Duration::from_secs(5),
        ca_file: None,
    }
}

pub fn build(cfg: &Credentials) -> UpstreamCredentials {
    let env = HashMap::from([("SECRET".to_owned(), "s3cret".to_owned())]);
    UpstreamCredentials::new("crm", cfg, &env).expect("credentials")
}

pub fn exchange(url: &str, cache_size: usize) -> UpstreamCredentials {
    build(&Credentials::TokenExchange {
        client: client(url),
        cache_size,
    })
}

pub async fn own(c: &UpstreamCredentials) -> Result<(String, bool), CredentialError> {
    let t = c.for_caller(None).await?.expect("a token");
    Ok((t.value, t.fresh))
}

pub async fn as_caller(
    c: &UpstreamCredentials,
    token: &str,
    claims: &Value,
) -> Result<(String, bool), CredentialError> {
    let t = c
        .for_caller(Some(Caller { token, claims }))
        .await?
        .expect("a token");
    Ok((t.value, t.fresh))
}

pub fn in_secs(s: u64) -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
        + s
}
