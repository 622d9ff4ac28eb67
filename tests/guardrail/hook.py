"""A guardrail webhook for Junction's tests (stdlib only; any python3).

POST / takes Junction's JSON ({phase, route, principal, tool, upstream,
upstream_tool, arguments | result}) and decides by what the call carries:

- arguments.text "deny-me"     -> deny (reason "no denials today")
- arguments.text "rewrite-me"  -> rewrite the arguments to {"text": "rewritten"}
- arguments.text "slow"        -> answers after 3 s (past Junction's timeout)
- arguments.text "crash"       -> the process exits without answering
- a result of a tool named "delay" or "slow_compute" upstream (the task
  servers' tools), or one holding "leak" anywhere -> rewrite the result to
  "[filtered]"
- a result holding "secret" anywhere -> deny (reason "no secrets in results")
- anything else                -> allow

Every request body is appended as one JSON line to --log, so a test can
check what Junction sent. Binds 127.0.0.1 only; prints `READY
http://127.0.0.1:<port>` once listening.
"""

import argparse
import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOG = None


def decide(body):
    if body.get("phase") == "result":
        result = json.dumps(body.get("result"))
        if "leak" in result or body.get("upstream_tool") in ("delay", "slow_compute"):
            return {"decision": "rewrite",
                    "result": {"content": [{"type": "text", "text": "[filtered]"}]}}
        if "secret" in result:
            return {"decision": "deny", "reason": "no secrets in results"}
        return {"decision": "allow"}
    text = (body.get("arguments") or {}).get("text")
    if text == "deny-me":
        return {"decision": "deny", "reason": "no denials today"}
    if text == "rewrite-me":
        return {"decision": "rewrite", "arguments": {"text": "rewritten"}}
    if text == "slow":
        time.sleep(3)
    if text == "crash":
        os._exit(3)
    return {"decision": "allow"}


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("content-length", "0")))
        body = json.loads(raw)
        with open(LOG, "a") as f:
            f.write(json.dumps({"body": body, "headers": dict(self.headers)}) + "\n")
        out = json.dumps(decide(body)).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)


def main():
    global LOG
    p = argparse.ArgumentParser()
    p.add_argument("--log", required=True)
    LOG = p.parse_args().log
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"READY http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
