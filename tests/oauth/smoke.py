"""Smoke test of the tests/oauth peers: starts auth_server.py and upstream.py on port 0
(127.0.0.1 only, all traffic loopback), then drives them with httpx2 and the official
MCP SDK client. One line per check; last line `oauth-smoke: N passed, M failed`;
exit 1 on any failure.

    tests/interop/.peers/py-oauth/bin/python tests/oauth/smoke.py
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from typing import Any

import httpx2
import jwt
import mcp
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

HERE = os.path.dirname(os.path.abspath(__file__))
EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
AT = "urn:ietf:params:oauth:token-type:access_token"
AUD = "urn:test:crm"
results = {"passed": 0, "failed": 0}


def check(name: str, ok: bool, detail: Any = "") -> bool:
    results["passed" if ok else "failed"] += 1
    print(f"{'ok  ' if ok else 'FAIL'} {name}" + ("" if ok else f": {detail}"), flush=True)
    return ok


def start(script: str, *args: str) -> tuple[subprocess.Popen, str, float]:
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, os.path.join(HERE, script), "--port", "0", *args],
                            stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline().split()
    if len(line) != 2 or line[0] != "READY":
        proc.kill()
        raise SystemExit(f"{script} did not print READY (got {line!r})")
    return proc, line[1], time.monotonic() - t0


def error_of(r: httpx2.Response) -> str | None:
    try:
        return r.json().get("error")
    except ValueError:
        return None


async def mcp_whoami(url: str, token: str | None, mode: str, statuses: list[int] | None = None) -> dict:
    headers = {"Authorization": f"Bearer {token}"} if token else None
    async with create_mcp_http_client(headers=headers, timeout=httpx2.Timeout(20)) as http:
        if statuses is not None:
            async def seen(resp: httpx2.Response) -> None:
                statuses.append(resp.status_code)
            http.event_hooks["response"].append(seen)
        async with mcp.Client(streamable_http_client(url, http_client=http), mode=mode, cache=None) as client:
            res = await client.call_tool("whoami", {})
            out = json.loads(res.content[0].text)
            if mode == "auto":  # the rest of the surface, once
                prompt = await client.get_prompt("greet", {"name": "Ada"})
                out["_greet"] = prompt.messages[0].content.text
                rec = await client.read_resource("crm://records/1")
                out["_record"] = json.loads(rec.contents[0].text)
                out["_echo"] = (await client.call_tool("echo", {"text": "hi"})).content[0].text
            out["_protocol"] = client.protocol_version
            return out


async def mcp_refused(url: str, token: str | None) -> tuple[str, list[int]]:
    """The SDK client's error (it turns an HTTP 401 into a generic MCPError) and the
    HTTP statuses it saw."""
    statuses: list[int] = []
    try:
        await mcp_whoami(url, token, "auto", statuses)
    except BaseException as exc:  # anyio wraps transport errors in (nested) groups
        return " | ".join(leaves(exc)), statuses
    return "", statuses


def leaves(exc: BaseException) -> list[str]:
    subs = getattr(exc, "exceptions", None)
    if not subs:
        return [f"{type(exc).__name__}: {exc}"]
    return [m for sub in subs for m in leaves(sub)]


def main() -> int:
    as_proc, issuer, as_t = start("auth_server.py", "--client", "junction:s3cret:crm.read,crm.write,files.read",
                                  "--client", "other:pw:files.read")
    up_proc, mcp_url, up_t = start("upstream.py", "--issuer", issuer, "--audience", AUD, "--scope", "crm.read")
    print(f"auth_server {issuer} ready in {as_t:.2f}s; upstream {mcp_url} ready in {up_t:.2f}s", flush=True)
    try:
        with httpx2.Client(base_url=issuer, timeout=20) as h:
            run_checks(h, issuer, mcp_url)
    finally:
        for p in (up_proc, as_proc):
            p.terminate()
            p.wait(10)
    print(f"oauth-smoke: {results['passed']} passed, {results['failed']} failed", flush=True)
    return 1 if results["failed"] else 0


def run_checks(h: httpx2.Client, issuer: str, mcp_url: str) -> None:
    jwks = jwt.PyJWKClient(issuer + "/jwks")

    def verify(token: str, aud: str) -> dict:
        key = jwks.get_signing_key_from_jwt(token)
        return jwt.decode(token, key, algorithms=["RS256"], audience=aud, issuer=issuer)

    def mint(**body: Any) -> str:
        return h.post("/test/mint", json=body).json()["access_token"]

    def exchange(subject: str, auth=("junction", "s3cret"), **extra: str) -> httpx2.Response:
        data = {"grant_type": EXCHANGE, "subject_token": subject, "subject_token_type": AT, **extra}
        return h.post("/token", data=data, auth=auth)

    meta = h.get("/.well-known/oauth-authorization-server").json()
    check("metadata names issuer, token endpoint, jwks, grants",
          meta["issuer"] == issuer and meta["token_endpoint"] == issuer + "/token"
          and meta["jwks_uri"] == issuer + "/jwks" and EXCHANGE in meta["grant_types_supported"], meta)

    # client_credentials
    r = h.post("/token", data={"grant_type": "client_credentials", "scope": "crm.read", "audience": AUD},
               auth=("junction", "s3cret"))
    body = r.json()
    claims = verify(body.get("access_token", ""), AUD) if r.status_code == 200 else {}
    check("client_credentials (basic) issues a signed JWT",
          r.status_code == 200 and body["token_type"] == "Bearer" and body["expires_in"] == 300
          and claims.get("sub") == "junction" and claims.get("client_id") == "junction"
          and claims.get("scope") == "crm.read" and claims["exp"] - claims["iat"] == 300, (r.status_code, body, claims))
    r = h.post("/token", data={"grant_type": "client_credentials", "client_id": "junction", "client_secret": "s3cret",
                               "resource": "http://127.0.0.1:1/mcp", "audience": AUD})
    claims = verify(r.json()["access_token"], AUD) if r.status_code == 200 else {}
    check("client_credentials (post) with resource+audience -> aud list, all allowed scopes",
          claims.get("aud") == [AUD, "http://127.0.0.1:1/mcp"] and claims.get("scope") == "crm.read crm.write files.read",
          (r.status_code, r.text, claims))
    r = h.post("/token", data={"grant_type": "client_credentials"}, auth=("junction", "wrong"))
    check("bad secret -> 401 invalid_client", r.status_code == 401 and error_of(r) == "invalid_client", r.text)
    r = h.post("/token", data={"grant_type": "client_credentials", "client_id": "nobody", "client_secret": "x"})
    check("unknown client -> invalid_client", error_of(r) == "invalid_client", r.text)
    r = h.post("/token", data={"grant_type": "client_credentials", "scope": "crm.read admin"}, auth=("junction", "s3cret"))
    check("scope beyond the client's -> invalid_scope", r.status_code == 400 and error_of(r) == "invalid_scope", r.text)
    r = h.post("/token", data={"grant_type": "password"}, auth=("junction", "s3cret"))
    check("unknown grant -> unsupported_grant_type", error_of(r) == "unsupported_grant_type", r.text)

    # token exchange
    user = mint(sub="alice", scope="crm.read crm.write", aud="junction")
    r = exchange(user, audience=AUD, scope="crm.read")
    body = r.json()
    exchanged = body.get("access_token", "")
    claims = verify(exchanged, AUD) if r.status_code == 200 else {}
    check("token exchange: sub kept, aud, scope, act.sub = client",
          r.status_code == 200 and body["issued_token_type"] == AT and body["token_type"] == "Bearer"
          and body["expires_in"] == 300 and claims.get("sub") == "alice" and claims.get("aud") == AUD
          and claims.get("scope") == "crm.read" and claims.get("act") == {"sub": "junction"}
          and claims.get("client_id") == "junction", (r.status_code, body, claims))
    r = exchange(user, auth=None, client_id="junction", client_secret="s3cret", resource="http://x.test/mcp")
    claims = verify(r.json().get("access_token", ""), "http://x.test/mcp") if r.status_code == 200 else {}
    check("token exchange (post auth, resource, no scope) keeps the subject's scope",
          claims.get("scope") == "crm.read crm.write", (r.status_code, r.text))
    r = exchange(user, audience=AUD, scope="crm.read crm.admin")
    check("exchange scope escalation -> invalid_scope", r.status_code == 400 and error_of(r) == "invalid_scope", r.text)
    r = exchange(mint(sub="mallory", scope="crm.read", exchange="deny"), audience=AUD)
    check("denied subject -> invalid_grant", error_of(r) == "invalid_grant", r.text)
    r = exchange(mint(sub="alice", scope="crm.read", expires_in=-10), audience=AUD)
    check("expired subject -> invalid_grant", error_of(r) == "invalid_grant", r.text)
    r = exchange(mint(sub="alice", scope="crm.read", foreign_key=True), audience=AUD)
    check("subject signed by another key -> invalid_grant", error_of(r) == "invalid_grant", r.text)
    r = exchange(user, auth=("junction", "nope"), audience=AUD)
    check("exchange with bad secret -> invalid_client", error_of(r) == "invalid_client", r.text)
    r = h.post("/token", data={"grant_type": EXCHANGE, "subject_token": user}, auth=("junction", "s3cret"))
    check("exchange without subject_token_type -> invalid_request", error_of(r) == "invalid_request", r.text)

    # MCP upstream, through the SDK client
    for mode in ("auto", "legacy", "2026-07-28"):
        try:
            who = asyncio.run(mcp_whoami(mcp_url, exchanged, mode))
        except BaseException as exc:
            who = {"exception": repr(exc)}
        check(f"MCP whoami with exchanged token ({mode})",
              who.get("sub") == "alice" and who.get("aud") == AUD and who.get("act") == {"sub": "junction"}
              and who.get("client_id") == "junction" and who.get("scope") == "crm.read"
              and (who.get("_protocol") == "2026-07-28") == (mode != "legacy"), who)
        if mode == "auto":
            check("MCP prompt greet, resource crm://records/1, tool echo",
                  who.get("_greet") == "Hello, Ada!" and who.get("_record") == {"id": 1, "name": "ACME Corp"}
                  and who.get("_echo") == "hi", who)
    refusals = {"no token": None, "wrong audience (the user token)": user,
                "foreign signature": mint(sub="alice", scope="crm.read", aud=AUD, foreign_key=True),
                "expired": mint(sub="alice", scope="crm.read", aud=AUD, expires_in=-5)}
    for name, tok in refusals.items():
        raw = httpx2.post(mcp_url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                          headers={"Accept": "application/json, text/event-stream",
                                   **({"Authorization": f"Bearer {tok}"} if tok else {})})
        sdk_err, statuses = asyncio.run(mcp_refused(mcp_url, tok))
        check(f"MCP {name} -> 401 invalid_token (raw and SDK client)",
              raw.status_code == 401 and error_of(raw) == "invalid_token"
              and raw.headers.get("www-authenticate", "").startswith("Bearer ")
              and sdk_err and statuses and set(statuses) == {401}, (raw.status_code, raw.text, sdk_err, statuses))
    cc = h.post("/token", data={"grant_type": "client_credentials", "scope": "files.read", "audience": AUD},
                auth=("junction", "s3cret")).json()["access_token"]
    raw = httpx2.post(mcp_url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                      headers={"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {cc}"})
    check("MCP token without --scope crm.read -> 403 insufficient_scope",
          raw.status_code == 403 and error_of(raw) == "insufficient_scope", (raw.status_code, raw.text))
    ups = httpx2.get(mcp_url.rsplit("/", 1)[0] + "/test/stats").json()
    check("upstream /test/stats counts accepted and refused tokens", ups["accepted"] >= 3 and ups["rejected"] >= 6, ups)

    # test controls
    h.post("/test/reset")
    mode = h.post("/test/mode", json={"delay_ms": 300, "token_ttl": 7}).json()
    t0 = time.monotonic()
    r = h.post("/token", data={"grant_type": "client_credentials"}, auth=("junction", "s3cret"))
    took = time.monotonic() - t0
    claims = verify(r.json()["access_token"], "junction") if r.status_code == 200 else {}
    check("mode delay_ms delays /token, token_ttl sets exp/expires_in",
          mode["delay_ms"] == 300 and took >= 0.29 and r.json().get("expires_in") == 7
          and claims.get("exp", 0) - claims.get("iat", 0) == 7, (mode, took, r.text))
    h.post("/test/mode", json={"delay_ms": 0, "refuse": True})
    r1 = h.post("/token", data={"grant_type": "client_credentials"}, auth=("junction", "s3cret"))
    r2 = exchange(user, audience=AUD)
    check("mode refuse -> every /token 400 invalid_grant",
          (r1.status_code, error_of(r1), r2.status_code, error_of(r2)) == (400, "invalid_grant", 400, "invalid_grant"),
          (r1.text, r2.text))
    h.post("/test/mode", json={"refuse": False})
    exchange(user, audience=AUD)
    exchange(user, audience=AUD)
    st = h.get("/test/stats").json()
    check("stats count answers per grant and tokens per sub",
          st["client_credentials"] == 2 and st["token_exchange"] == 3 and st["errors"] == 2
          and st["by_sub"] == {"junction": 1, "alice": 2}
          and st["log"][0]["auth_method"] == "client_secret_basic", st)
    r = h.post("/test/mode", json={"bogus": 1})
    check("mode rejects unknown keys", r.status_code == 400, r.text)
    reset = h.post("/test/reset").json()
    st = h.get("/test/stats").json()
    check("reset clears stats and mode", reset["mode"] == {"delay_ms": 0, "token_ttl": 300, "refuse": False}
          and st["client_credentials"] == 0 and st["by_sub"] == {}, (reset, st))


if __name__ == "__main__":
    sys.exit(main())
