"""The Authlib side of tests/oauth/auth_server.py (a loopback-only test authorization
server): clients, the client_credentials and RFC 8693 token-exchange grants, and the
AuthorizationServer that signs RFC 9068 JWT access tokens. No sockets here; the HTTP
app lives in auth_server.py, which binds 127.0.0.1 only.

Client authentication, grant dispatch and every error answer (RFC 6749 §5.2 JSON:
invalid_client, invalid_grant, invalid_scope, unsupported_grant_type, ...) come from
Authlib; this file only supplies the models and the token-exchange rules.
"""

from __future__ import annotations

import secrets
from collections import defaultdict
from collections.abc import Callable

from authlib.oauth2.rfc6749 import AuthorizationServer, ClientMixin, OAuth2Payload, OAuth2Request, grants
from authlib.oauth2.rfc6749.errors import (
    InvalidGrantError,
    InvalidRequestError,
    InvalidScopeError,
    UnauthorizedClientError,
)
from authlib.oauth2.rfc9068 import JWTBearerTokenGenerator
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import ECKey, KeySet, RSAKey
from starlette.responses import JSONResponse

TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
AUTH_METHODS = ["client_secret_basic", "client_secret_post"]


class Client(ClientMixin):
    def __init__(self, client_id: str, secret: str, scopes: list[str], grant_types: list[str] | None = None):
        self.client_id, self.secret, self.scopes = client_id, secret, scopes
        self.grant_types = grant_types or ["client_credentials", TOKEN_EXCHANGE]

    def get_client_id(self):
        return self.client_id

    def get_default_redirect_uri(self):
        return None

    def get_allowed_scope(self, scope):
        # Requests are checked by the grants (invalid_scope); no scope asked = all allowed.
        return " ".join(self.scopes) if scope is None else scope

    def check_redirect_uri(self, redirect_uri):
        return False

    def check_client_secret(self, client_secret):
        return secrets.compare_digest(self.secret.encode(), client_secret.encode())

    def check_endpoint_auth_method(self, method, endpoint):
        return method in AUTH_METHODS

    def check_response_type(self, response_type):
        return False

    def check_grant_type(self, grant_type):
        return grant_type in self.grant_types


class Subject:
    """The "user" handed to Authlib's token generator: who the token is about, its aud, extra claims."""

    def __init__(self, sub: str, aud: str | list[str], extra: dict | None = None):
        self.sub, self.aud, self.extra = sub, aud, extra or {}

    def get_user_id(self):
        return self.sub


class FormPayload(OAuth2Payload):
    def __init__(self, items: list[tuple[str, str]]):
        self._data = dict(items)  # a repeated parameter: the last one (audience/resource use datalist)
        self._datalist = defaultdict(list)
        for k, v in items:
            self._datalist[k].append(v)

    @property
    def data(self):
        return self._data

    @property
    def datalist(self):
        return self._datalist


class FormRequest(OAuth2Request):
    def __init__(self, uri: str, headers, items: list[tuple[str, str]]):
        super().__init__("POST", uri, headers=headers)
        self.payload = FormPayload(items)

    @property
    def form(self):
        return self.payload.data

    @property
    def args(self):
        return {}


def requested_audience(request: OAuth2Request, default: str) -> str | list[str]:
    """RFC 8693 `audience` and RFC 8707 `resource` (each may repeat) -> the `aud` claim."""
    values = request.payload.datalist.get("audience", []) + request.payload.datalist.get("resource", [])
    values = list(dict.fromkeys(v for v in values if v))
    if not values:
        return default
    return values[0] if len(values) == 1 else values


def check_scope_within(scope: str | None, allowed: list[str], what: str) -> None:
    if scope is None:
        return
    extra = set(scope.split()) - set(allowed)
    if extra:
        raise InvalidScopeError(f"scope {' '.join(sorted(extra))} is not within the {what}")


class ClientCredentialsGrant(grants.ClientCredentialsGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = AUTH_METHODS

    def validate_requested_scope(self):
        check_scope_within(self.request.payload.scope, self.request.client.scopes, "client's allowed scopes")

    def create_token_response(self):
        client_id = self.client.get_client_id()
        subject = Subject(client_id, requested_audience(self.request, client_id))
        token = self.generate_token(user=subject, scope=self.request.payload.scope, include_refresh_token=False)
        self.save_token(token)
        return 200, token, self.TOKEN_RESPONSE_HEADER


class TokenExchangeGrant(grants.BaseGrant, grants.TokenEndpointMixin):
    """RFC 8693 token exchange: an authenticated client trades a user's access token
    (one this server issued) for a new one, aud = `audience`/`resource`, act.sub = client."""

    GRANT_TYPE = TOKEN_EXCHANGE
    TOKEN_ENDPOINT_AUTH_METHODS = AUTH_METHODS

    def validate_token_request(self):
        client = self.authenticate_token_endpoint_client()
        if not client.check_grant_type(self.GRANT_TYPE):
            raise UnauthorizedClientError(f"The client is not authorized to use 'grant_type={self.GRANT_TYPE}'")
        self.request.client = client
        data = self.request.payload.data
        subject_token, subject_type = data.get("subject_token"), data.get("subject_token_type")
        if not subject_token:
            raise InvalidRequestError("Missing 'subject_token' in request.")
        if subject_type != ACCESS_TOKEN_TYPE:
            raise InvalidRequestError(f"'subject_token_type' must be {ACCESS_TOKEN_TYPE}")
        wanted = data.get("requested_token_type")
        if wanted and wanted != ACCESS_TOKEN_TYPE:
            raise InvalidRequestError(f"only {ACCESS_TOKEN_TYPE} can be issued")
        claims = self.server.verify_own_token(subject_token)
        if claims is None:
            raise InvalidGrantError("subject_token is not a valid, unexpired token of this issuer")
        if claims.get("exchange") == "deny":
            raise InvalidGrantError("subject may not be exchanged")
        if not isinstance(claims.get("sub"), str):
            raise InvalidGrantError("subject_token has no 'sub'")
        subject_scopes = str(claims.get("scope") or "").split()
        check_scope_within(self.request.payload.scope, subject_scopes, "subject token's scopes")
        self.request.credential = claims

    def create_token_response(self):
        claims = self.request.credential
        client_id = self.client.get_client_id()
        act = {"sub": client_id}
        if isinstance(claims.get("act"), dict):
            act["act"] = claims["act"]  # RFC 8693 §4.1: prior delegation nests
        subject = Subject(claims["sub"], requested_audience(self.request, client_id), {"act": act})
        scope = self.request.payload.scope
        if scope is None:
            scope = str(claims.get("scope") or "")
        token = self.generate_token(user=subject, scope=scope, include_refresh_token=False)
        token["issued_token_type"] = ACCESS_TOKEN_TYPE
        self.save_token(token)
        return 200, token, self.TOKEN_RESPONSE_HEADER


class Signer(JWTBearerTokenGenerator):
    def __init__(self, issuer: str, alg: str, keys: KeySet, ttl: Callable[[], int]):
        super().__init__(issuer, alg=alg, expires_generator=lambda _client, _grant: ttl())
        self.keys = keys

    def get_jwks(self):
        return self.keys

    def get_audiences(self, client, user, scope):
        return user.aud

    def get_extra_claims(self, client, grant_type, user, scope):
        return dict(user.extra)


def new_key(alg: str, kid: str | None = None) -> RSAKey | ECKey:
    params = {"kid": kid} if kid else None
    if alg == "RS256":
        return RSAKey.generate_key(2048, parameters=params)
    return ECKey.generate_key("P-256", parameters=params)


class Server(AuthorizationServer):
    """Authlib's AuthorizationServer wired to the two grants, RFC 9068 JWTs and a fresh key.
    `ttl()` gives the lifetime of each token issued (the test mode's token_ttl)."""

    def __init__(self, issuer: str, alg: str, clients: dict[str, Client], ttl: Callable[[], int]):
        super().__init__()
        self.issuer, self.alg, self.clients = issuer, alg, clients
        self.key = new_key(alg)
        self.key.ensure_kid()
        self.keys = KeySet([self.key])
        self.register_token_generator("default", Signer(issuer, alg, self.keys, ttl))
        self.register_grant(ClientCredentialsGrant)
        self.register_grant(TokenExchangeGrant)

    def query_client(self, client_id):
        return self.clients.get(client_id)

    def save_token(self, token, request):
        pass  # stateless JWTs; auth_server.py counts answers in its HTTP handler

    def send_signal(self, name, *args, **kwargs):
        pass

    def create_oauth2_request(self, request):
        return request  # already a FormRequest built by the HTTP handler

    def handle_response(self, status, body, headers):
        return JSONResponse(body, status_code=status, headers=dict(headers))

    def sign(self, claims: dict, foreign: bool = False) -> str:
        # foreign: same kid, another key, so a signature check against /jwks must fail
        key = KeySet([new_key(self.alg, self.key.kid)]) if foreign else self.keys
        return jwt.encode({"alg": self.alg, "typ": "at+jwt"}, claims, key)

    def verify_own_token(self, token: str) -> dict | None:
        try:
            claims = jwt.decode(token, self.keys, algorithms=[self.alg]).claims
            jwt.JWTClaimsRegistry(iss={"essential": True, "value": self.issuer}, exp={"essential": True}).validate(claims)
        except (JoseError, ValueError, TypeError):
            return None
        return claims
