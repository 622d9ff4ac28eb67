"""A real OAuth 2.1 authorization server for Junction's end-to-end tests.

LOOPBACK-ONLY TEST SERVER: binds 127.0.0.1 and nothing else, keeps nothing on disk,
and has unauthenticated /test/* controls (mint any token, change modes).

Built on Authlib's framework-agnostic AuthorizationServer (see authz.py): client
authentication (client_secret_basic, client_secret_post), grant dispatch and the
RFC 6749 error JSON all come from the library. Access tokens are RFC 9068 JWTs
signed with a key generated at start (RS256 default, or ES256).

    auth_server.py [--port 0] --client ID:SECRET:SCOPE,SCOPE [--client ...]
                   [--config clients.json] [--alg RS256|ES256] [--token-ttl 300] [--verbose]

Prints one stdout line `READY http://127.0.0.1:<port>` once the socket listens
(that URL is the issuer), then serves until SIGTERM. Logs go to stderr.
clients.json: {"clients": [{"id": "..", "secret": "..", "scopes": ["a", "b"],
               "grant_types": ["client_credentials", "<token-exchange URN>"]}]}
(grant_types optional; default both). Run with tests/interop/.peers/py-oauth/bin/python.

  POST /token   grant_type=client_credentials | urn:ietf:params:oauth:grant-type:token-exchange
  GET  /jwks    GET /.well-known/oauth-authorization-server
  POST /test/mint   {"sub", "scope", "aud", "expires_in", "foreign_key"?, extra claims...}
                    -> {"access_token", "claims"}
  POST /test/mode   {"delay_ms", "token_ttl", "refuse"} (any subset) -> the whole mode;
                    GET /test/mode reads it
  GET  /test/stats  -> {"client_credentials": n, "token_exchange": n, "other": n, "errors": n,
                        "by_sub": {sub: n}, "log": [...]}
  POST /test/reset  stats cleared, mode back to the start values
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import secrets
import sys
import time
from collections import defaultdict

from authlib.oauth2.rfc6749.errors import InvalidGrantError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

import _loopback
from authz import AUTH_METHODS, TOKEN_EXCHANGE, Client, FormRequest, Server

DEFAULT_MODE = {"delay_ms": 0, "token_ttl": 300, "refuse": False}
STAT_NAMES = {"client_credentials": "client_credentials", TOKEN_EXCHANGE: "token_exchange"}
LOG_MAX = 500


class State:
    """Test mode and counters. /token answers are counted per grant when answered
    (after any delay), whatever the outcome; by_sub counts the tokens issued per `sub`."""

    def __init__(self, token_ttl: int):
        self.default_mode = dict(DEFAULT_MODE, token_ttl=token_ttl)
        self.reset()

    def reset(self) -> None:
        self.mode = dict(self.default_mode)
        self.counts = {"client_credentials": 0, "token_exchange": 0, "other": 0, "errors": 0}
        self.by_sub: dict[str, int] = defaultdict(int)
        self.log: list[dict] = []


def token_claims(token: str) -> dict:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def build_app(srv: Server, st: State, verbose: bool) -> Starlette:
    async def token(request: Request) -> Response:
        form = await request.form()
        items = [(k, v) for k, v in form.multi_items() if isinstance(v, str)]
        oreq = FormRequest(srv.issuer + "/token", request.headers, items)
        if st.mode["delay_ms"] > 0:
            await asyncio.sleep(st.mode["delay_ms"] / 1000)
        if st.mode["refuse"]:
            resp = srv.handle_error_response(oreq, InvalidGrantError("refused by test mode"))
        else:
            resp = srv.create_token_response(oreq)
        grant = STAT_NAMES.get(oreq.payload.grant_type, "other")
        st.counts[grant] += 1
        body = json.loads(resp.body)
        entry = {
            "grant": grant, "status": resp.status_code, "error": body.get("error"),
            "client_id": oreq.client.get_client_id() if oreq.client else None, "auth_method": oreq.auth_method,
            "scope": oreq.payload.scope, "audience": oreq.payload.datalist.get("audience", []),
            "resource": oreq.payload.datalist.get("resource", []), "sub": None,
        }
        if resp.status_code == 200:
            entry["sub"] = token_claims(body["access_token"]).get("sub")
            st.by_sub[entry["sub"]] += 1
        else:
            st.counts["errors"] += 1
        st.log = (st.log + [entry])[-LOG_MAX:]
        if verbose:
            print(f"auth_server: /token {json.dumps(entry)}", file=sys.stderr, flush=True)
        return resp

    async def jwks(_: Request) -> Response:
        return JSONResponse({"keys": [dict(srv.key.as_dict(private=False), alg=srv.alg, use="sig")]})

    async def metadata(_: Request) -> Response:
        return JSONResponse({
            "issuer": srv.issuer, "token_endpoint": srv.issuer + "/token", "jwks_uri": srv.issuer + "/jwks",
            "grant_types_supported": ["client_credentials", TOKEN_EXCHANGE],
            "token_endpoint_auth_methods_supported": AUTH_METHODS, "response_types_supported": [],
            "scopes_supported": sorted({s for c in srv.clients.values() for s in c.scopes}),
        })

    async def mint(request: Request) -> Response:
        req = await request.json()
        now = int(time.time())
        foreign = bool(req.pop("foreign_key", False))
        ttl = int(req.pop("expires_in", st.mode["token_ttl"]))
        claims = {"iss": srv.issuer, "sub": req.pop("sub", "user"), "aud": req.pop("aud", "junction"),
                  "iat": now, "exp": now + ttl, "jti": secrets.token_hex(8), "scope": req.pop("scope", "")}
        claims.update(req)  # extra claims last: they may override any of the above
        return JSONResponse({"access_token": srv.sign(claims, foreign), "claims": claims})

    async def mode(request: Request) -> Response:
        if request.method == "POST":
            req = await request.json()
            unknown = set(req) - set(DEFAULT_MODE)
            if unknown:
                return JSONResponse({"error": f"unknown mode keys {sorted(unknown)}"}, status_code=400)
            st.mode.update({k: (bool(v) if k == "refuse" else int(v)) for k, v in req.items()})
        return JSONResponse(st.mode)

    async def stats(_: Request) -> Response:
        return JSONResponse(dict(st.counts, by_sub=dict(st.by_sub), log=st.log))

    async def reset(_: Request) -> Response:
        st.reset()
        return JSONResponse({"ok": True, "mode": st.mode})

    return Starlette(routes=[
        Route("/token", token, methods=["POST"]),
        Route("/jwks", jwks, methods=["GET"]),
        Route("/.well-known/oauth-authorization-server", metadata, methods=["GET"]),
        Route("/test/mint", mint, methods=["POST"]),
        Route("/test/mode", mode, methods=["GET", "POST"]),
        Route("/test/stats", stats, methods=["GET"]),
        Route("/test/reset", reset, methods=["POST"]),
    ])


def parse_client(spec: str) -> Client:
    client_id, sep, rest = spec.partition(":")
    secret, sep2, scopes = rest.rpartition(":")
    if not (sep and sep2 and client_id and secret):
        raise argparse.ArgumentTypeError(f"--client wants ID:SECRET:SCOPES, got {spec!r}")
    return Client(client_id, secret, [s for s in scopes.replace(",", " ").split() if s])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--client", action="append", default=[], type=parse_client, metavar="ID:SECRET:SCOPES")
    p.add_argument("--config", metavar="FILE", help='JSON {"clients": [{"id","secret","scopes",...}]}')
    p.add_argument("--alg", choices=["RS256", "ES256"], default="RS256")
    p.add_argument("--token-ttl", type=int, default=DEFAULT_MODE["token_ttl"])
    p.add_argument("--verbose", action="store_true", help="log every /token answer to stderr")
    args = p.parse_args()
    clients = list(args.client)
    if args.config:
        with open(args.config) as f:
            for c in json.load(f)["clients"]:
                clients.append(Client(c["id"], c["secret"], list(c.get("scopes", [])), c.get("grant_types")))
    st = State(args.token_ttl)

    def make_app(port: int):
        issuer = f"http://127.0.0.1:{port}"
        srv = Server(issuer, args.alg, {c.client_id: c for c in clients}, lambda: st.mode["token_ttl"])
        return build_app(srv, st, args.verbose), issuer

    _loopback.serve(args.port, make_app)
    return 0


if __name__ == "__main__":
    sys.exit(main())
