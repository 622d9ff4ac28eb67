"""A real MCP upstream (official Python SDK, mcp 2.3.0 `MCPServer`) that demands an
OAuth bearer token, for Junction's end-to-end tests. Binds 127.0.0.1 only.

    upstream.py [--port 0] --issuer http://127.0.0.1:<as-port> --audience AUD
                [--scope SCOPE]... [--stateless|--stateful] [--json|--sse] [--path /mcp]

Prints one stdout line `READY http://127.0.0.1:<port>/mcp` once the socket listens,
then serves Streamable HTTP until SIGTERM (2026-07-28 and handshake-era clients on
the same path; default stateless + JSON answers, like ../interop/python/server_modern.py).
Run with tests/interop/.peers/py-oauth/bin/python.

The SDK's own auth (AuthSettings + a TokenVerifier) guards the MCP path: a request
without a bearer token, or with one the verifier refuses, gets 401
{"error":"invalid_token"} + WWW-Authenticate from the SDK; a token lacking a --scope
gets 403 insufficient_scope. The verifier (PyJWT) checks the JWT's signature against
the issuer's /jwks (fetched lazily from loopback, re-fetched on an unknown kid),
`iss` == --issuer, `exp`, and that `aud` (string or list) contains --audience.

Tools:     whoami() -> JSON text {"sub","aud","scope","client_id","act"} of the token received
           echo(text) -> text
Prompt:    greet(name) -> "Hello, <name>!"
Resource:  crm://records/1 -> JSON text {"id": 1, "name": "ACME Corp"}
Also (no auth): GET /test/stats -> {"accepted": n, "rejected": n, "rejections": [reason, ...]}
(the last 100 reasons, e.g. "aud: Audience doesn't match"), POST /test/reset clears it.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import anyio
import jwt
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import Context, MCPServer
from starlette.requests import Request
from starlette.responses import JSONResponse

import _loopback

ALGORITHMS = ["RS256", "ES256"]


class JwtVerifier:
    """mcp.server.auth TokenVerifier: a JWT of `issuer` for `audience`, or None (-> 401)."""

    def __init__(self, issuer: str, audience: str):
        self.issuer, self.audience = issuer, audience
        self.jwks = jwt.PyJWKClient(issuer + "/jwks", cache_keys=True, lifespan=60, timeout=10)
        self.stats: dict[str, Any] = {"accepted": 0, "rejected": 0, "rejections": []}

    def _decode(self, token: str) -> dict[str, Any]:
        key = self.jwks.get_signing_key_from_jwt(token)
        return jwt.decode(
            token, key, algorithms=ALGORITHMS, audience=self.audience, issuer=self.issuer,
            options={"require": ["exp", "iss", "aud", "sub"]},
        )

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            claims = await anyio.to_thread.run_sync(self._decode, token)
        except (jwt.PyJWTError, ValueError) as err:
            reason = f"{type(err).__name__}: {err}"
            self.stats["rejected"] += 1
            self.stats["rejections"] = (self.stats["rejections"] + [reason])[-100:]
            print(f"upstream: token refused: {reason}", file=sys.stderr, flush=True)
            return None
        self.stats["accepted"] += 1
        aud = claims["aud"]
        return AccessToken(
            token=token,
            client_id=str(claims.get("client_id") or ""),
            scopes=str(claims.get("scope") or "").split(),
            expires_at=int(claims["exp"]),
            resource=self.audience if (aud == self.audience or self.audience in aud) else None,
            subject=str(claims["sub"]),
            claims=claims,
        )


def build(port: int, args: argparse.Namespace) -> tuple[Any, str]:
    url = f"http://127.0.0.1:{port}{args.path}"
    verifier = JwtVerifier(args.issuer, args.audience)
    srv = MCPServer(
        name="oauth-upstream", version="2.3.0-oauth", instructions="Junction OAuth test upstream",
        token_verifier=verifier,
        auth=AuthSettings(
            issuer_url=args.issuer,
            resource_server_url=url,  # also serves /.well-known/oauth-protected-resource<path>
            required_scopes=args.scope or None,
            validate_token_resource=False,  # the verifier checks `aud` against --audience itself
        ),
    )

    def current_claims(ctx: Context) -> dict[str, Any]:
        tok = get_access_token()
        if tok is None:  # fall back to the HTTP request the SDK attached
            user = getattr(getattr(ctx.request_context, "request", None), "user", None)
            tok = getattr(user, "access_token", None)
        if tok is None or tok.claims is None:
            raise RuntimeError("no access token in this request's context")
        return tok.claims

    @srv.tool()
    def whoami(ctx: Context) -> str:
        """The claims of the bearer token this request carried: sub, aud, scope, client_id, act."""
        c = current_claims(ctx)
        return json.dumps({k: c.get(k) for k in ("sub", "aud", "scope", "client_id", "act")})

    @srv.tool()
    def echo(text: str) -> str:
        """Echo the text back unchanged."""
        return text

    @srv.prompt()
    def greet(name: str) -> str:
        """Greet someone by name."""
        return f"Hello, {name}!"

    @srv.resource("crm://records/1", name="record-1", mime_type="application/json")
    def record_1() -> str:
        """CRM record 1."""
        return json.dumps({"id": 1, "name": "ACME Corp"})

    @srv.custom_route("/test/stats", methods=["GET"])
    async def stats(_: Request) -> JSONResponse:
        return JSONResponse(verifier.stats)

    @srv.custom_route("/test/reset", methods=["POST"])
    async def reset(_: Request) -> JSONResponse:
        verifier.stats.update(accepted=0, rejected=0, rejections=[])
        return JSONResponse({"ok": True})

    app = srv.streamable_http_app(
        streamable_http_path=args.path, json_response=args.json_response,
        stateless_http=args.stateless, host="127.0.0.1",
    )
    return app, url


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--issuer", required=True, help="the authorization server, e.g. http://127.0.0.1:PORT")
    p.add_argument("--audience", required=True, help="this upstream's audience; must be in the token's aud")
    p.add_argument("--scope", action="append", default=[], help="a scope every token must carry (repeatable)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--stateless", dest="stateless", action="store_true", default=True)
    g.add_argument("--stateful", dest="stateless", action="store_false")
    r = p.add_mutually_exclusive_group()
    r.add_argument("--json", dest="json_response", action="store_true", default=True)
    r.add_argument("--sse", dest="json_response", action="store_false")
    p.add_argument("--path", default="/mcp")
    args = p.parse_args()
    args.issuer = args.issuer.rstrip("/")
    _loopback.serve(args.port, lambda port: build(port, args), lifespan="on")
    return 0


if __name__ == "__main__":
    sys.exit(main())
