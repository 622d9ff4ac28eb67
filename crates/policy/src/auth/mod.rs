//! OAuth 2.1 resource server (NOTES §10): bearer JWTs verified against the
//! configured issuer's keys, audience = Junction's canonical URL (RFC 8707),
//! challenges per RFC 6750 and metadata per RFC 9728.

mod cache;
mod jwks;

pub use cache::LastToken;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, Validation};
use junction_config::{AuthConfig, JwksSource};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::PolicyError;
use jwks::{Keys, Lookup};

/// Longer bearer values are refused before any parsing.
const MAX_TOKEN_BYTES: usize = 16 * 1024;
/// Scopes never advertised (NOTES §10: SHOULD NOT in challenges or `scopes_supported`).
const NEVER_ADVERTISED: &str = "offline_access";

/// The verified caller: one allocation shared by every request that
/// presents the same token (see `cache`), so handing it to a request is a
/// count, not a copy of its strings. Read its fields through [`Identity`].
#[derive(Clone, Debug, PartialEq)]
pub struct Principal(std::sync::Arc<Identity>);

/// What a verified token says about its caller.
#[derive(Clone, Debug, PartialEq)]
pub struct Identity {
    pub subject: String,
    /// From `scope` and `scp` (space-separated string or array), sorted,
    /// unique.
    pub scopes: Vec<String>,
    /// Lower-case hex SHA-256 over issuer and subject: stable across replicas
    /// and restarts, used to bind sessions and requestState envelopes.
    pub digest: String,
    /// Every claim of the token, for rules that need more than scopes.
    pub claims: Value,
}

impl From<Identity> for Principal {
    fn from(identity: Identity) -> Principal {
        Principal(std::sync::Arc::new(identity))
    }
}

impl std::ops::Deref for Principal {
    type Target = Identity;

    fn deref(&self) -> &Identity {
        &self.0
    }
}

/// Why a request was not authenticated: HTTP 401 with [`Authenticator::challenge`].
/// [`AuthError::JwksUnavailable`] is the gateway's fault rather than the
/// client's (the IdP's keys could not be loaded); a server may answer it 503.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("no bearer token")]
    Missing,
    #[error("access token in the query string")]
    TokenInQuery,
    #[error("malformed token")]
    Malformed,
    #[error("bad signature")]
    BadSignature,
    #[error("token expired")]
    Expired,
    #[error("token not yet valid")]
    NotYetValid,
    #[error("wrong issuer")]
    WrongIssuer,
    #[error("wrong audience")]
    WrongAudience,
    #[error("unknown signing key")]
    UnknownKey,
    #[error("algorithm not allowed for this key")]
    Algorithm,
    #[error("signing keys unavailable")]
    JwksUnavailable,
}

impl AuthError {
    /// The `reason` label of `junction_auth_failures_total`.
    pub fn reason(&self) -> &'static str {
        match self {
            AuthError::Missing => "missing",
            AuthError::TokenInQuery => "token_in_query",
            AuthError::Malformed => "malformed",
            AuthError::BadSignature => "bad_signature",
            AuthError::Expired => "expired",
            AuthError::NotYetValid => "not_yet_valid",
            AuthError::WrongIssuer => "wrong_issuer",
            AuthError::WrongAudience => "wrong_audience",
            AuthError::UnknownKey => "unknown_key",
            AuthError::Algorithm => "algorithm",
            AuthError::JwksUnavailable => "jwks_unavailable",
        }
    }

    /// RFC 6750 §3.1 `error` code and a fixed description (never token text).
    fn code(&self) -> Option<(&'static str, &'static str)> {
        let invalid = "invalid_token";
        Some(match self {
            AuthError::Missing => return None,
            AuthError::TokenInQuery => (
                "invalid_request",
                "send the access token in the Authorization header, not the query",
            ),
            AuthError::Malformed => (invalid, "the token is not a well-formed JWT"),
            AuthError::BadSignature => (invalid, "the token signature does not verify"),
            AuthError::Expired => (invalid, "the token has expired"),
            AuthError::NotYetValid => (invalid, "the token is not valid yet"),
            AuthError::WrongIssuer => (invalid, "the token was issued by another issuer"),
            AuthError::WrongAudience => (invalid, "the token was not issued for this resource"),
            AuthError::UnknownKey => (invalid, "the token is signed with an unknown key"),
            AuthError::Algorithm => (invalid, "the token algorithm is not accepted"),
            AuthError::JwksUnavailable => (invalid, "the signing keys could not be loaded"),
        })
    }
}

pub struct Authenticator {
    issuer: String,
    audiences: Vec<String>,
    /// Without a trailing slash.
    public_url: String,
    leeway: u64,
    keys: Keys,
    authorization_servers: Vec<String>,
    scopes_supported: Vec<String>,
    /// Tokens that verified recently (see `cache`).
    verified: cache::Verified,
}

impl Authenticator {
    /// Loads a JWKS file now (an unusable file is an error); a JWKS URL is
    /// fetched on the first request that needs it.
    pub fn new(cfg: &AuthConfig, public_url: &str) -> Result<Authenticator, PolicyError> {
        let keys = match &cfg.jwt.jwks {
            JwksSource::File(path) => Keys::from_file(path)?,
            JwksSource::Url(url) => Keys::from_url(url)?,
        };
        Ok(Authenticator {
            issuer: cfg.jwt.issuer.clone(),
            audiences: cfg.jwt.audiences.clone(),
            public_url: public_url.trim_end_matches('/').to_owned(),
            leeway: cfg.jwt.leeway.as_secs(),
            keys,
            authorization_servers: cfg.authorization_servers.clone(),
            scopes_supported: cfg
                .scopes_supported
                .iter()
                .filter(|s| *s != NEVER_ADVERTISED)
                .cloned()
                .collect(),
            verified: cache::Verified::default(),
        })
    }

    /// How soon an unknown `kid` may trigger another JWKS fetch (default 30 s).
    pub fn with_refetch_interval(mut self, interval: Duration) -> Self {
        self.keys.set_refetch_interval(interval);
        self
    }

    /// `authorization`: the `Authorization` header value, if any; `query`: the
    /// request URI's query (a token there is refused, RFC 6750 §2.3 / NOTES §10);
    /// `route_path`: the route, whose canonical URL is also a valid audience.
    pub async fn authenticate(
        &self,
        authorization: Option<&str>,
        query: Option<&str>,
        route_path: &str,
    ) -> Result<Principal, AuthError> {
        if query.is_some_and(has_query_token) {
            return Err(AuthError::TokenInQuery);
        }
        let (principal, _) = self.authenticated(authorization, route_path).await?;
        Ok(principal)
    }

    /// `authenticate` once the query is checked, with until when and under
    /// which key set the principal is remembered (`None`: it is not, as a
    /// token without `exp`).
    async fn authenticated(
        &self,
        authorization: Option<&str>,
        route_path: &str,
    ) -> Result<(Principal, Option<(Instant, u64)>), AuthError> {
        let token = bearer(authorization)?;
        let cache_key = self.verified.key(token.as_bytes(), route_path);
        let keys = self.keys.generation();
        if let Some((p, until)) = self.verified.get(&cache_key, keys, Instant::now()) {
            return Ok((p, Some((until, keys))));
        }
        self.verify_and_remember(token, cache_key, route_path).await
    }

    /// A token not found in the table under `cache_key` (its key): verified,
    /// and remembered when it may be.
    async fn verify_and_remember(
        &self,
        token: &str,
        cache_key: cache::Key,
        route_path: &str,
    ) -> Result<(Principal, Option<(Instant, u64)>), AuthError> {
        let principal = self.verify(token, route_path).await?;
        let keys = self.keys.generation();
        let until = self.verified.put(cache_key, &principal, self.leeway, keys);
        Ok((principal, until.map(|until| (until, keys))))
    }

    /// `authenticate` for the `Authorization` field as it arrived: the same
    /// outcome as `authenticate(field.to_str().ok(), ..)`. A token verified
    /// before is found from the field's bytes; only one that is not is read
    /// as text (`to_str` checks every byte, and a token is hundreds). A hit is
    /// exact: its bytes are a token that passed `to_str` when it was verified,
    /// and what `bearer_bytes` leaves around it (the scheme, spaces and tabs)
    /// passes it too.
    ///
    /// `last`: the token the client's connection presented last
    /// ([`LastToken`]), looked at first and kept up to date.
    pub async fn authenticate_field(
        &self,
        last: Option<&LastToken>,
        field: Option<&http::HeaderValue>,
        query: Option<&str>,
        route_path: &str,
    ) -> Result<Principal, AuthError> {
        if query.is_some_and(has_query_token) {
            return Err(AuthError::TokenInQuery);
        }
        let token = field.and_then(|f| bearer_bytes(f.as_bytes()));
        let mut missed = None;
        if let Some(token) = token {
            let (keys, now) = (self.keys.generation(), Instant::now());
            if let Some(p) = last.and_then(|l| l.get(token, route_path, keys, now)) {
                return Ok(p);
            }
            let key = self.verified.key(token, route_path);
            if let Some((p, until)) = self.verified.get(&key, keys, now) {
                if let Some(last) = last {
                    last.put(token, route_path, &p, until, keys);
                }
                return Ok(p);
            }
            missed = Some(key);
        }
        let text = field.and_then(|f| f.to_str().ok());
        let (p, remembered) = match missed {
            // Looked for in the table already: the text's token is the same
            // bytes (above), so it is not hashed and looked for again.
            Some(key) => {
                let text_token = bearer(text)?;
                debug_assert_eq!(Some(text_token.as_bytes()), token);
                self.verify_and_remember(text_token, key, route_path)
                    .await?
            }
            None => self.authenticated(text, route_path).await?,
        };
        if let (Some(last), Some(token), Some((until, keys))) = (last, token, remembered) {
            last.put(token, route_path, &p, until, keys);
        }
        Ok(p)
    }

    /// The signature and claims check of `authenticate`, without the cache.
    async fn verify(&self, token: &str, route_path: &str) -> Result<Principal, AuthError> {
        let (alg, kid) = peek_header(token)?;
        let keys = match self.keys.lookup(kid.as_deref(), alg).await {
            Lookup::Keys(keys) => keys,
            Lookup::UnknownKid => return Err(AuthError::UnknownKey),
            Lookup::WrongAlg => return Err(AuthError::Algorithm),
            Lookup::Unavailable => return Err(AuthError::JwksUnavailable),
        };
        let validation = self.validation(alg, route_path);
        let mut last = AuthError::BadSignature;
        for key in keys {
            match jsonwebtoken::decode::<Value>(token, &key.key, &validation) {
                Ok(data) => return self.principal(data.claims),
                Err(e) => {
                    last = map_error(e.kind());
                    // Without a `kid` several keys may be candidates; only a
                    // signature failure means "try the next one".
                    if last != AuthError::BadSignature {
                        return Err(last);
                    }
                }
            }
        }
        Err(last)
    }

    fn validation(&self, alg: Algorithm, route_path: &str) -> Validation {
        let mut v = Validation::new(alg);
        v.leeway = self.leeway;
        v.validate_nbf = true;
        v.set_issuer(&[&self.issuer]);
        let mut aud: HashSet<String> = self.audiences.iter().cloned().collect();
        aud.insert(self.resource(Some(route_path)));
        v.aud = Some(aud);
        v.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        v
    }

    fn principal(&self, claims: Value) -> Result<Principal, AuthError> {
        let subject = claims
            .get("sub")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or(AuthError::Malformed)?
            .to_owned();
        // `scope` (RFC 9068: space-separated) and `scp` (common: an array),
        // each accepted in either shape.
        let mut scopes: Vec<String> = ["scope", "scp"]
            .iter()
            .filter_map(|c| claims.get(*c))
            .flat_map(|v| match v {
                Value::String(s) => s.split_ascii_whitespace().map(str::to_owned).collect(),
                Value::Array(a) => a
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect(),
                _ => Vec::new(),
            })
            .collect();
        scopes.sort();
        scopes.dedup();
        let mut h = Sha256::new();
        // Length-prefixed so no issuer/subject pair can collide with another.
        h.update((self.issuer.len() as u64).to_be_bytes());
        h.update(self.issuer.as_bytes());
        h.update(subject.as_bytes());
        let digest = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
        Ok(Identity {
            subject,
            scopes,
            digest,
            claims,
        }
        .into())
    }

    /// The `WWW-Authenticate` value of a 401 for `err` on `route_path`.
    pub fn challenge(&self, route_path: &str, err: &AuthError) -> String {
        let mut out = format!(
            "Bearer resource_metadata=\"{}\"",
            quote_safe(&self.resource_metadata_url(Some(route_path)))
        );
        if !self.scopes_supported.is_empty() {
            out.push_str(&format!(
                ", scope=\"{}\"",
                quote_safe(&self.scopes_supported.join(" "))
            ));
        }
        if let Some((code, description)) = err.code() {
            out.push_str(&format!(
                ", error=\"{code}\", error_description=\"{description}\""
            ));
        }
        out
    }

    /// The `WWW-Authenticate` value of a 403 for a call outside the grant:
    /// `scopes` = every scope that would grant it ([`crate::Authorizer::scopes_granting`]).
    pub fn insufficient_scope_challenge(&self, route_path: &str, scopes: &[String]) -> String {
        let scopes: Vec<&str> = scopes
            .iter()
            .map(String::as_str)
            .filter(|s| *s != NEVER_ADVERTISED)
            .collect();
        let mut out = String::from("Bearer error=\"insufficient_scope\"");
        if !scopes.is_empty() {
            out.push_str(&format!(", scope=\"{}\"", quote_safe(&scopes.join(" "))));
        }
        out.push_str(&format!(
            ", resource_metadata=\"{}\"",
            quote_safe(&self.resource_metadata_url(Some(route_path)))
        ));
        out
    }

    /// `<public_url>/.well-known/oauth-protected-resource[<route path>]`.
    pub fn resource_metadata_url(&self, route_path: Option<&str>) -> String {
        format!(
            "{}/.well-known/oauth-protected-resource{}",
            self.public_url,
            route_path.unwrap_or("")
        )
    }

    /// The resource identifier: the public URL, or the route's canonical URL.
    pub fn resource(&self, route_path: Option<&str>) -> String {
        format!("{}{}", self.public_url, route_path.unwrap_or(""))
    }

    /// The RFC 9728 document served at [`Self::resource_metadata_url`].
    pub fn resource_metadata(&self, route_path: Option<&str>) -> Value {
        let mut doc = json!({
            "resource": self.resource(route_path),
            "authorization_servers": self.authorization_servers,
            "bearer_methods_supported": ["header"],
        });
        if !self.scopes_supported.is_empty() {
            doc["scopes_supported"] = json!(self.scopes_supported);
        }
        doc
    }
}

fn has_query_token(query: &str) -> bool {
    query
        .split(['&', ';'])
        .any(|pair| percent_decoded(pair.split('=').next().unwrap_or("")) == b"access_token")
}

/// `%XX` decoded, so `%61ccess_token` is caught too.
fn percent_decoded(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let hex = |c: u8| (c as char).to_digit(16);
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            if let (Some(h), Some(l)) = (
                b.get(i + 1).and_then(|c| hex(*c)),
                b.get(i + 2).and_then(|c| hex(*c)),
            ) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

/// The bearer token of an `Authorization` value, exactly as authentication
/// reads it (so what Junction checked is what it may carry on).
pub fn bearer_token(authorization: Option<&str>) -> Option<&str> {
    bearer(authorization).ok()
}

fn bearer(authorization: Option<&str>) -> Result<&str, AuthError> {
    let value = authorization.ok_or(AuthError::Missing)?.trim();
    let (scheme, rest) = value.split_once(' ').unwrap_or((value, ""));
    // Another scheme (Basic, …) carries no bearer token: RFC 6750 §3.1 says
    // to answer it like a request without credentials.
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(AuthError::Missing);
    }
    let token = rest.trim();
    if token.is_empty()
        || token.len() > MAX_TOKEN_BYTES
        || memchr::memchr(b' ', token.as_bytes()).is_some()
    {
        return Err(AuthError::Malformed);
    }
    Ok(token)
}

/// `bearer` on a field's bytes: the token it would find in the field's
/// text, or `None` where it would fail. Trims only spaces and tabs, the
/// whitespace a field's text (`to_str`) can hold, so a field with any other
/// byte around the token finds no token here.
fn bearer_bytes(value: &[u8]) -> Option<&[u8]> {
    fn trim(v: &[u8]) -> &[u8] {
        let blank = |b: &u8| *b == b' ' || *b == b'\t';
        let start = v.iter().position(|b| !blank(b)).unwrap_or(v.len());
        let end = v.iter().rposition(|b| !blank(b)).map_or(start, |e| e + 1);
        &v[start..end]
    }
    let value = trim(value);
    let (scheme, rest) = match memchr::memchr(b' ', value) {
        Some(at) => (&value[..at], &value[at + 1..]),
        None => (value, &[][..]),
    };
    if !scheme.eq_ignore_ascii_case(b"bearer") {
        return None;
    }
    let token = trim(rest);
    if token.is_empty() || token.len() > MAX_TOKEN_BYTES || memchr::memchr(b' ', token).is_some() {
        return None;
    }
    Some(token)
}

/// The header's `alg` and `kid`, read before any key is chosen. Only the
/// algorithms Junction's keys can have pass: `none` and `HS*` stop here.
fn peek_header(token: &str) -> Result<(Algorithm, Option<String>), AuthError> {
    let mut parts = token.split('.');
    let (Some(head), Some(_), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(AuthError::Malformed);
    };
    let bytes = URL_SAFE_NO_PAD
        .decode(head)
        .map_err(|_| AuthError::Malformed)?;
    let header: Value = serde_json::from_slice(&bytes).map_err(|_| AuthError::Malformed)?;
    let alg = match header.get("alg").and_then(Value::as_str) {
        Some("RS256") => Algorithm::RS256,
        Some("ES256") => Algorithm::ES256,
        Some("EdDSA") => Algorithm::EdDSA,
        Some(_) => return Err(AuthError::Algorithm),
        None => return Err(AuthError::Malformed),
    };
    // RFC 7515 §4.1.11: extensions we do not implement must be refused.
    // (`jku`/`x5u`/`jwk` are ignored: keys come only from the config.)
    if header.get("crit").is_some() {
        return Err(AuthError::Malformed);
    }
    let kid = match header.get("kid") {
        None => None,
        Some(Value::String(k)) => Some(k.clone()),
        Some(_) => return Err(AuthError::Malformed),
    };
    Ok((alg, kid))
}

fn map_error(kind: &ErrorKind) -> AuthError {
    match kind {
        ErrorKind::InvalidSignature => AuthError::BadSignature,
        ErrorKind::ExpiredSignature => AuthError::Expired,
        ErrorKind::ImmatureSignature => AuthError::NotYetValid,
        ErrorKind::InvalidIssuer => AuthError::WrongIssuer,
        ErrorKind::InvalidAudience => AuthError::WrongAudience,
        ErrorKind::MissingRequiredClaim(c) if c == "iss" => AuthError::WrongIssuer,
        ErrorKind::MissingRequiredClaim(c) if c == "aud" => AuthError::WrongAudience,
        ErrorKind::InvalidAlgorithm | ErrorKind::MissingAlgorithm => AuthError::Algorithm,
        _ => AuthError::Malformed,
    }
}

/// Values inside a quoted-string: config text, but never let it break the header.
fn quote_safe(s: &str) -> String {
    s.chars()
        .filter(|c| *c != '"' && *c != '\\' && !c.is_control())
        .collect()
}
