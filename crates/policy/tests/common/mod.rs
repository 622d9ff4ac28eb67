//! Shared test support: throwaway keys, token minting, a JWKS server, a real
//! redis-server on a free loopback port.
#![allow(dead_code)]

use std::net::{SocketAddr, TcpListener as StdListener};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use junction_config::{AuthConfig, JwksSource, JwtConfig};
use serde_json::{json, Value};

pub const ISSUER: &str = "https://idp.test";
pub const PUBLIC_URL: &str = "http://127.0.0.1:8080";

fn key_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/keys")
        .join(name)
}

pub fn key_bytes(name: &str) -> Vec<u8> {
    std::fs::read(key_path(name)).expect("test key")
}

/// The public JWK of a test key (`rsa1`, `rsa2`, `ec`, `ed`) with a `kid`.
pub fn jwk(name: &str, kid: &str) -> Value {
    let all: Value = serde_json::from_slice(&key_bytes("public-jwk.json")).expect("jwk json");
    let mut k = all[name].clone();
    k["kid"] = json!(kid);
    k["use"] = json!("sig");
    k
}

pub fn jwks(keys: &[Value]) -> String {
    json!({ "keys": keys }).to_string()
}

pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs()
}

/// Claims of a token that should pass: right issuer, default audience, 5 min left.
pub fn claims(sub: &str) -> Value {
    json!({
        "iss": ISSUER,
        "aud": PUBLIC_URL,
        "sub": sub,
        "iat": now(),
        "exp": now() + 300,
        "scope": "crm.read crm.write",
    })
}

/// Signs `claims` with test key `name` (`rsa1`/`rsa2` → RS256, `ec` → ES256, `ed` → EdDSA).
pub fn sign(name: &str, kid: Option<&str>, claims: &Value) -> String {
    let pem = key_bytes(&format!("{name}.pem"));
    let (alg, key) = match name {
        "ec" => (Algorithm::ES256, EncodingKey::from_ec_pem(&pem)),
        "ed" => (Algorithm::EdDSA, EncodingKey::from_ed_pem(&pem)),
        _ => (Algorithm::RS256, EncodingKey::from_rsa_pem(&pem)),
    };
    let mut header = Header::new(alg);
    header.kid = kid.map(str::to_owned);
    jsonwebtoken::encode(&header, claims, &key.expect("encoding key")).expect("sign")
}

/// A token with a hand-written header and an HMAC-SHA256 signature under `secret`.
pub fn sign_hs256_raw(header: &Value, claims: &Value, secret: &[u8]) -> String {
    use jsonwebtoken::crypto;
    let msg = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let sig = crypto::sign(
        msg.as_bytes(),
        &EncodingKey::from_secret(secret),
        Algorithm::HS256,
    )
    .expect("hmac");
    format!("{msg}.{sig}")
}

pub fn unsigned(header: &Value, claims: &Value) -> String {
    format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    )
}

pub fn auth_config(jwks: JwksSource, scopes_supported: &[&str]) -> AuthConfig {
    AuthConfig {
        jwt: JwtConfig {
            issuer: ISSUER.into(),
            audiences: vec![PUBLIC_URL.into()],
            jwks,
            leeway: Duration::from_secs(60),
        },
        authorization_servers: vec![ISSUER.into()],
        scopes_supported: scopes_supported.iter().map(|s| s.to_string()).collect(),
        rules: vec![],
    }
}

/// A JWKS document served over HTTP on 127.0.0.1; swap the body to rotate keys.
pub struct JwksServer {
    pub url: String,
    body: Arc<Mutex<(u16, String)>>,
    hits: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl JwksServer {
    pub async fn start(body: String) -> JwksServer {
        use http_body_util::Full;
        use hyper::service::service_fn;
        use hyper_util::rt::{TokioExecutor, TokioIo};

        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let state = Arc::new(Mutex::new((200u16, body)));
        let hits = Arc::new(AtomicUsize::new(0));
        let (s, h) = (state.clone(), hits.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (s, h) = (s.clone(), h.clone());
                tokio::spawn(async move {
                    let svc = service_fn(move |_req| {
                        h.fetch_add(1, Ordering::SeqCst);
                        let (status, body) = s.lock().expect("lock").clone();
                        async move {
                            hyper::Response::builder()
                                .status(status)
                                .header("content-type", "application/json")
                                .body(Full::new(bytes::Bytes::from(body)))
                        }
                    });
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        JwksServer {
            url: format!("http://{addr}/jwks.json"),
            body: state,
            hits,
            task,
        }
    }

    pub fn serve(&self, status: u16, body: String) {
        *self.body.lock().expect("lock") = (status, body);
    }

    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

impl Drop for JwksServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A free port on 127.0.0.1 (bound, then released).
pub fn free_port() -> u16 {
    let l = StdListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// A redis-server child on 127.0.0.1, killed on drop.
pub struct RedisServer {
    pub port: u16,
    child: Option<std::process::Child>,
}

impl RedisServer {
    pub fn start() -> RedisServer {
        Self::start_on(free_port())
    }

    pub fn start_on(port: u16) -> RedisServer {
        let child = std::process::Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start redis-server ({e}): run scripts/redis.sh to install it")
            });
        let server = RedisServer {
            port,
            child: Some(child),
        };
        server.wait_ready();
        server
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    fn wait_ready(&self) {
        use std::io::{Read, Write};
        let addr: SocketAddr = ([127, 0, 0, 1], self.port).into();
        for _ in 0..200 {
            if let Ok(mut s) =
                std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(100))
            {
                let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
                let mut buf = [0u8; 16];
                if s.write_all(b"PING\r\n").is_ok() {
                    if let Ok(n) = s.read(&mut buf) {
                        if buf[..n].starts_with(b"+PONG") {
                            return;
                        }
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("redis-server on port {} did not answer PING", self.port);
    }

    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}
