#!/usr/bin/env bash
# CI check on Junction's own cost: user-space instructions per proxied
# request, counted by callgrind (benches/load/instructions.sh), must not grow
# by more than TOLERANCE percent (default 5) over the committed baseline
# (benches/load/instr-baseline.json) for any of: tools/call, tools/list, and
# tools/call with JWT auth and one rate-limit rule. Instruction counts do not
# move with the machine's load, so this holds on a shared CI machine where
# timings would not. A deliberate increase updates the baseline in the same
# commit (UPDATE=1 writes it), saying why.
#
# Env: TOLERANCE (percent, default 5), UPDATE=1, SKIP_BUILD=1. About 2 minutes
# after the release build. Needs valgrind and wrk (installed when missing, as root).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE="$ROOT/benches/load"
BASELINE="$HERE/instr-baseline.json"
WORK=$(mktemp -d /tmp/junction-instr-check.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

ONE_BUILD=1 RAW_OUT="$WORK/now.json" OUT="$WORK/bench.md" DURATION="${DURATION:-3}" \
  bash "$HERE/instructions.sh" >&2
python3 - "$BASELINE" "$WORK/now.json" "${TOLERANCE:-5}" "${UPDATE:-0}" <<'PY'
import json
import sys

baseline_path, now_path, tolerance, update = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4] == "1"
now = json.load(open(now_path))
checked = ["junction_call", "junction_list", "junction_auth_call"]
if update:
    with open(baseline_path, "w") as f:
        json.dump({k: now[k] for k in sorted(now)}, f, indent=2)
        f.write("\n")
    print(f"baseline written: {baseline_path}")
    sys.exit(0)
base = json.load(open(baseline_path))
failed = False
for key in checked:
    if key not in now:
        print(f"FAIL  {key}: not measured")
        failed = True
        continue
    change = 100.0 * (now[key] - base[key]) / base[key]
    verdict = "FAIL" if change > tolerance else "ok  "
    failed |= change > tolerance
    print(f"{verdict}  {key}: {now[key]:,} instructions/request (baseline {base[key]:,}, {change:+.1f} %)")
for key in ("direct_call", "direct_list"):
    if key in now and key in base:
        print(f"      {key} (the upstream alone, for reference): {now[key]:,} (baseline {base[key]:,})")
if failed:
    print(f"instruction count grew by more than {tolerance} %: find the change, or update the baseline "
          "(UPDATE=1 benches/load/instr-check.sh) in a commit that says why")
    sys.exit(1)
PY
