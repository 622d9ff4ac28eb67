"""Python SDK client <-> Python SDK server, no gateway: the baseline the Junction
interop tests compare against, and a pin on the wire facts NOTES-python.md records.

Stdlib only. Started by tests/interop/run_python_direct.sh after setup.sh.
Every server binds 127.0.0.1 port 0 and reports its port with `READY <port>`.
Prints one line per check and, last, `python-direct: N passed, M failed`;
exits 1 if anything failed.
"""

from __future__ import annotations

import concurrent.futures
import http.client
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
PEERS = HERE.parent / ".peers"
PY2 = str(PEERS / "py-mcp2" / "bin" / "python")
PY1 = str(PEERS / "py-mcp1" / "bin" / "python")
MODERN = "2026-07-28"
LEGACY = "2025-11-25"
MODERN_TOOLS = ["py_add", "py_echo", "py_lookup", "py_confirm", "py_slow"]
LEGACY_TOOLS = ["legacy_greet", "legacy_count"]
READY_TIMEOUT_S = 60


class CheckFailed(Exception):
    pass


def expect(cond: bool, what: str) -> None:
    if not cond:
        raise CheckFailed(what)


@dataclass
class Server:
    name: str
    argv: list[str]
    proc: subprocess.Popen[str] | None = None
    port: int = 0
    stderr: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            self.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL
        )
        threading.Thread(target=self._drain_stderr, daemon=True).start()

    def _drain_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)

    def wait_ready(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        deadline = time.monotonic() + READY_TIMEOUT_S
        result: list[str] = []
        reader = threading.Thread(target=lambda: result.append(self.proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        reader.join(max(0.0, deadline - time.monotonic()))
        line = result[0] if result else ""
        if not line.startswith("READY "):
            raise RuntimeError(f"{self.name} did not get ready: {line!r}; stderr: {''.join(self.stderr)[-2000:]}")
        self.port = int(line.split()[1])

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def run_client(url: str, mode: str, *extra: str) -> tuple[int, dict[str, Any] | None, str]:
    argv = [PY2, str(HERE / "client.py"), "--url", url, "--mode", mode, "--timeout", "60", *extra]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=180)
    doc = None
    if p.returncode == 0:
        doc = json.loads(p.stdout)
    return p.returncode, doc, p.stderr


def client_ok(url: str, mode: str, *extra: str) -> dict[str, Any]:
    rc, doc, err = run_client(url, mode, *extra)
    if rc != 0 or doc is None:
        raise CheckFailed(f"client exited {rc}: {err.strip().splitlines()[0] if err.strip() else ''}")
    return doc


def text_of(call: dict[str, Any]) -> str:
    expect("result" in call, f"{call['name']} has no result: {call.get('error')}")
    return "".join(c.get("text", "") for c in call["result"]["content"] if c.get("type") == "text")


def raw_post(port: int, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, dict[str, str], str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers}
    conn.request("POST", "/mcp", body=json.dumps(body), headers=h)
    resp = conn.getresponse()
    data = resp.read().decode("utf-8", "replace")
    conn.close()
    return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data


def rpc_error(data: str) -> dict[str, Any]:
    doc = json.loads(data)
    expect("error" in doc, f"expected a JSON-RPC error, got {data[:200]}")
    return doc["error"]


META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}


def modern_headers(method: str, **extra: str) -> dict[str, str]:
    return {"MCP-Protocol-Version": MODERN, "Mcp-Method": method, **extra}


def call_body(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": args, "_meta": META}}


def build_checks(servers: dict[str, Server]) -> list[tuple[str, Callable[[], None]]]:
    checks: list[tuple[str, Callable[[], None]]] = []

    def add(name: str) -> Callable[[Callable[[], None]], Callable[[], None]]:
        def deco(fn: Callable[[], None]) -> Callable[[], None]:
            checks.append((name, fn))
            return fn

        return deco

    modern_names = [n for n in servers if n.startswith("modern")]
    legacy_names = [n for n in servers if n.startswith("legacy")]

    for sname in modern_names:
        srv = servers[sname]
        sse = "sse" in sname
        stateful = "stateful" in sname
        for mode in ("auto", "legacy", MODERN):

            @add(f"{sname} <- client {mode}: list + add/echo/lookup(x-mcp-header, non-ASCII)")
            def _(srv: Server = srv, mode: str = mode) -> None:
                doc = client_ok(
                    srv.url, mode,
                    "--call", "py_add", "--args", '{"a": 2, "b": 3}',
                    "--call", "py_echo", "--args", '{"text": "héllo  wörld "}',
                    "--call", "py_lookup", "--args", '{"region": "Zürich", "q": "x"}',
                )  # fmt: skip
                expect(doc["protocolVersion"] == (LEGACY if mode == "legacy" else MODERN), f"version {doc['protocolVersion']}")
                expect(doc["tools"] == MODERN_TOOLS, f"tools {doc['tools']}")
                add_, echo, lookup = doc["calls"]
                expect(text_of(add_) == "5" and add_["result"]["structuredContent"] == {"result": 5}, f"add {add_}")
                expect(add_["result"]["isError"] is False, "add isError")
                expect(text_of(echo) == "héllo  wörld ", f"echo {echo}")
                expect(text_of(lookup) == "Zürich:x", f"lookup {lookup}")

            if mode != "legacy" or stateful and sse:
                # Elicitation: MRTR on 2026-07-28; a server->client request on a
                # legacy session, which needs a stateful server with SSE responses.
                @add(f"{sname} <- client {mode}: py_confirm accepted via elicitation")
                def _(srv: Server = srv, mode: str = mode) -> None:
                    doc = client_ok(srv.url, mode, "--accept-elicitation", "--call", "py_confirm", "--args", '{"item": "disk"}')
                    call = doc["calls"][0]
                    expect(text_of(call) == "confirmed disk", f"confirm {call}")
                    expect(len(call["elicitations"]) == 1, f"elicitations {call['elicitations']}")
                    expect(call["elicitations"][0]["message"] == "Confirm disk?", "elicitation message")
                    expect(call["elicitations"][0]["requestedSchema"]["properties"]["ok"]["type"] == "boolean", "schema")

                @add(f"{sname} <- client {mode}: py_confirm declined")
                def _(srv: Server = srv, mode: str = mode) -> None:
                    doc = client_ok(srv.url, mode, "--decline-elicitation", "--call", "py_confirm", "--args", '{"item": "disk"}')
                    expect(text_of(doc["calls"][0]) == "declined disk", f"decline {doc['calls'][0]}")

        @add(f"{sname} <- client 2026-07-28 without elicitation capability: -32021")
        def _(srv: Server = srv) -> None:
            doc = client_ok(srv.url, MODERN, "--allow-errors", "--call", "py_confirm", "--args", '{"item": "disk"}')
            err = doc["calls"][0].get("error")
            expect(err is not None and err["code"] == -32021, f"expected -32021, got {doc['calls'][0]}")
            expect(err["data"]["requiredCapabilities"] == {"elicitation": {"form": {}}}, f"data {err['data']}")

        @add(f"{sname} <- client auto: unknown tool is an isError result, not a JSON-RPC error")
        def _(srv: Server = srv) -> None:
            doc = client_ok(srv.url, "auto", "--allow-errors", "--call", "no_such_tool")
            call = doc["calls"][0]
            expect("result" in call and call["result"]["isError"] is True, f"unknown tool {call}")

        if sse:
            for mode in ("auto", "legacy"):

                @add(f"{sname} <- client {mode}: py_slow streams 3 progress notifications")
                def _(srv: Server = srv, mode: str = mode) -> None:
                    doc = client_ok(srv.url, mode, "--call", "py_slow", "--args", '{"steps": 3}')
                    call = doc["calls"][0]
                    expect(text_of(call) == "done 3", f"slow {call}")
                    expect([p[0] for p in call["progress"]] == [1, 2, 3], f"progress {call['progress']}")
                    expect(call["progress"][-1] == [3, 3, "step 3"], f"progress {call['progress']}")

        # Raw wire facts the gateway relies on (see NOTES-python.md).
        @add(f"{sname} raw: discover with full headers -> supportedVersions [{MODERN}]")
        def _(srv: Server = srv) -> None:
            body = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": META}}
            status, _h, data = raw_post(srv.port, body, modern_headers("server/discover"))
            expect(status == 200, f"status {status}")
            res = json.loads(data)["result"]
            expect(res["supportedVersions"] == [MODERN] and res["resultType"] == "complete", f"discover {res}")

        @add(f"{sname} raw: wrong Mcp-Name -> 400 -32020")
        def _(srv: Server = srv) -> None:
            h = modern_headers("tools/call", **{"Mcp-Name": "py_echo"})
            status, _h, data = raw_post(srv.port, call_body("py_add", {"a": 1, "b": 2}), h)
            expect(status == 400 and rpc_error(data)["code"] == -32020, f"{status} {data[:200]}")

        @add(f"{sname} raw: missing Mcp-Param-Region -> 400 -32020")
        def _(srv: Server = srv) -> None:
            h = modern_headers("tools/call", **{"Mcp-Name": "py_lookup"})
            status, _h, data = raw_post(srv.port, call_body("py_lookup", {"region": "eu", "q": "x"}), h)
            expect(status == 400 and rpc_error(data)["code"] == -32020, f"{status} {data[:200]}")

        @add(f"{sname} raw: right headers incl. base64 Mcp-Param-Region -> 200")
        def _(srv: Server = srv) -> None:
            h = modern_headers("tools/call", **{"Mcp-Name": "py_lookup", "Mcp-Param-Region": "=?base64?WsO8cmljaA==?="})
            status, _h, data = raw_post(srv.port, call_body("py_lookup", {"region": "Zürich", "q": "x"}), h)
            expect(status == 200, f"{status} {data[:200]}")
            expect(data.find("Z\\u00fcrich:x") >= 0 or data.find("Zürich:x") >= 0, data[:300])

        @add(f"{sname} raw: unsupported version -> 400 -32022 with data.supported")
        def _(srv: Server = srv) -> None:
            meta = {**META, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}
            body = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}}
            h = {"MCP-Protocol-Version": "2099-01-01", "Mcp-Method": "server/discover"}
            status, _h, data = raw_post(srv.port, body, h)
            err = rpc_error(data)
            expect(status == 400 and err["code"] == -32022 and err["data"]["supported"] == [MODERN], f"{status} {data}")

        @add(f"{sname} raw: modern tools/list without _meta -> 400 -32602")
        def _(srv: Server = srv) -> None:
            status, _h, data = raw_post(srv.port, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, modern_headers("tools/list"))
            expect(status == 400 and rpc_error(data)["code"] == -32602, f"{status} {data[:200]}")

        @add(f"{sname} raw: initialize -> legacy InitializeResult {LEGACY}")
        def _(srv: Server = srv, sse: bool = sse, stateful: bool = stateful) -> None:
            body = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                    "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "check", "version": "0"}}}  # fmt: skip
            status, h, data = raw_post(srv.port, body, {})
            expect(status == 200, f"status {status}")
            if h.get("content-type", "").startswith("text/event-stream"):
                data = next(line[5:] for line in data.splitlines() if line.startswith("data:"))
            res = json.loads(data)["result"]
            expect(res["protocolVersion"] == LEGACY, f"init {res}")
            expect(("mcp-session-id" in h) == stateful, f"session id present={'mcp-session-id' in h}, stateful={stateful}")

    for sname in legacy_names:
        srv = servers[sname]
        sse = "sse" in sname
        for mode in ("auto", "legacy"):

            @add(f"{sname} <- client {mode}: greet + count")
            def _(srv: Server = srv, mode: str = mode, sse: bool = sse) -> None:
                doc = client_ok(
                    srv.url, mode,
                    "--call", "legacy_greet", "--args", '{"name": "Ann"}',
                    "--call", "legacy_count", "--args", '{"n": 3}',
                )  # fmt: skip
                expect(doc["protocolVersion"] == LEGACY, f"version {doc['protocolVersion']}")
                expect(doc["tools"] == LEGACY_TOOLS, f"tools {doc['tools']}")
                expect(doc["serverInfo"] == {"name": "py-legacy", "version": "1.30.0"}, f"serverInfo {doc['serverInfo']}")
                greet, count = doc["calls"]
                expect(text_of(greet) == "Hello, Ann!", f"greet {greet}")
                expect(text_of(count) == "counted 3", f"count {count}")
                if sse:
                    expect([p[0] for p in count["progress"]] == [1, 2, 3], f"progress {count['progress']}")

        @add(f"{sname} <- client {MODERN}: fails (modern-only client vs 1.x server)")
        def _(srv: Server = srv) -> None:
            rc, _doc, err = run_client(srv.url, MODERN)
            expect(rc != 0, "a pinned modern client unexpectedly worked against mcp 1.x")
            expect("Bad Request" in err, f"stderr: {err[-300:]}")

        @add(f"{sname} raw: server/discover -> HTTP 400, non-modern JSON-RPC error")
        def _(srv: Server = srv) -> None:
            body = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": META}}
            status, _h, data = raw_post(srv.port, body, modern_headers("server/discover"))
            err = rpc_error(data)
            expect(status == 400 and err["code"] == -32600, f"{status} {data[:200]}")

    return checks


def main() -> int:
    for py in (PY1, PY2):
        if not os.access(py, os.X_OK):
            print(f"python-direct: {py} missing; run tests/interop/setup.sh", file=sys.stderr)
            return 2
    modern = [PY2, str(HERE / "server_modern.py"), "0"]
    legacy = [PY1, str(HERE / "server_legacy.py"), "0"]
    servers = {
        "modern-json-stateless": Server("modern-json-stateless", modern + ["--json", "--stateless"]),
        "modern-sse-stateful": Server("modern-sse-stateful", modern + ["--sse", "--stateful"]),
        "modern-sse-stateless": Server("modern-sse-stateless", modern + ["--sse", "--stateless"]),
        "legacy-sse-stateful": Server("legacy-sse-stateful", legacy + ["--sse", "--stateful"]),
        "legacy-json-stateless": Server("legacy-json-stateless", legacy + ["--json", "--stateless"]),
    }
    passed = failed = 0
    try:
        for s in servers.values():
            s.start()
        for s in servers.values():
            s.wait_ready()
        checks = build_checks(servers)

        def run(check: tuple[str, Callable[[], None]]) -> tuple[str, str | None]:
            name, fn = check
            try:
                fn()
                return name, None
            except CheckFailed as exc:
                return name, str(exc)
            except Exception as exc:  # a crash in a check is a failure, reported like one
                return name, f"{type(exc).__name__}: {exc}"

        with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
            for name, err in pool.map(run, checks):
                if err is None:
                    passed += 1
                    print(f"ok   - {name}", flush=True)
                else:
                    failed += 1
                    print(f"FAIL - {name}: {err}", flush=True)
    finally:
        for s in servers.values():
            s.stop()
    print(f"python-direct: {passed} passed, {failed} failed")
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
