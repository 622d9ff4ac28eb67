#!/usr/bin/env bash
# User-space instructions per request, counted by callgrind: the fast upstream
# answering wrk directly (the baseline), then Junction proxying the same
# requests to a native upstream. Instruction counts do not move with the
# machine's load or the hypervisor's steal time the way CPU seconds do, so this
# is the figure to compare between commits; kernel time (the loopback sockets)
# is not in it. Writes the instructions table between the `instr` markers of
# BENCHMARKS.md.
#
# Then the same Junction with JWT auth and one rate-limit rule.
#
# Env: SKIP_BUILD=1, DURATION (s per measured run, default 5), CONC (wrk
#      connections, default 4), OUT (default BENCHMARKS.md), KEEP=1,
#      RAW_OUT (also write the per-request figures there as JSON).
# Loopback only; about 1 minute after the build.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE="$ROOT/benches/load"
DURATION=${DURATION:-5}
CONC=${CONC:-4}
OUT=${OUT:-$ROOT/BENCHMARKS.md}
WORK=$(mktemp -d /tmp/junction-instr.XXXXXX)
PIDS=()
LOG_TAG=instr

# shellcheck source=lib.sh
. "$HERE/lib.sh"
trap cleanup EXIT
ensure_apt wrk
ensure_apt valgrind
ensure_apt jq
cd "$ROOT"
build_binaries

# measure LABEL PID URL METHOD [NAME]: warm up, zero the counters, drive DURATION
# seconds of wrk, dump; appends "label requests instructions callgrind-file".
measure() {
  local label=$1 pid=$2 url=$3 method=$4 name=${5:-} line req file
  wrk -t2 -c"$CONC" -d2s -s "$HERE/mcp.lua" "$url" -- "$method" $name > /dev/null
  callgrind_control -z "$pid" > /dev/null
  line=$(wrk_result -t2 -c"$CONC" -d"${DURATION}s" -s "$HERE/mcp.lua" "$url" -- "$method" $name)
  callgrind_control -d "$pid" > /dev/null
  sleep 1
  req=$(echo "$line" | sed -E 's/.*requests=([0-9]+).*/\1/')
  file=$(ls -t "$WORK"/cg."$pid".* | head -1)
  echo "$label $req $(grep -E '^(summary|totals):' "$file" | head -1 | awk '{print $2}') $file" >> "$WORK/instr.txt"
  log "$label: $line"
}

under_callgrind() { # OUTFILE CMD... (stdout to OUTFILE) -> sets CG_PID
  local out=$1; shift
  valgrind --tool=callgrind --callgrind-out-file="$WORK/cg.%p" "$@" > "$out" 2> "$out.err" &
  CG_PID=$!; PIDS+=("$CG_PID")
}

# 1. The upstream by itself, under callgrind, answering wrk.
under_callgrind "$WORK/up-cg.out" "$UPSTREAM" --listen 127.0.0.1:0 --tools 10 --threads 2; pid=$CG_PID
addr=$(wait_line "$WORK/up-cg.out" 'fast upstream listening on (127\.0\.0\.1:[0-9]+)')
check "http://$addr/mcp" tools/call tool0
measure direct_call "$pid" "http://$addr/mcp" tools/call tool0
measure direct_list "$pid" "http://$addr/mcp" tools/list
kill "$pid" 2>/dev/null || true

# 2. Junction under callgrind in front of a native upstream.
start_upstream
one_upstream_config "$WORK/instr.yaml"
under_callgrind "$WORK/junction-cg.out" "$JUNCTION" run --config "$WORK/instr.yaml"; pid=$CG_PID
addr=$(wait_line "$WORK/junction-cg.out" 'junction listening on (127\.0\.0\.1:[0-9]+)')
CHECK_TIMEOUT=20 check "http://$addr/mcp" tools/call fast__tool0
measure junction_call "$pid" "http://$addr/mcp" tools/call fast__tool0
measure junction_list "$pid" "http://$addr/mcp" tools/list
kill "$pid" 2>/dev/null || true

# 3. The same with JWT authentication (RS256 from a JWKS file, so the key is
# cached) and one local rate-limit rule keyed by principal and tool that never
# rejects: the edge policy most installs run.
auth_config "$WORK/instr.yaml" "$WORK/instr-auth.yaml"
export MCP_AUTHORIZATION
under_callgrind "$WORK/junction-auth-cg.out" "$JUNCTION" run --config "$WORK/instr-auth.yaml"; pid=$CG_PID
addr=$(wait_line "$WORK/junction-auth-cg.out" 'junction listening on (127\.0\.0\.1:[0-9]+)')
CHECK_TIMEOUT=20 check "http://$addr/mcp" tools/call fast__tool0 "$MCP_AUTHORIZATION"
measure junction_auth_call "$pid" "http://$addr/mcp" tools/call fast__tool0
unset MCP_AUTHORIZATION

# RAW_OUT: the per-request figures as JSON, for benches/load/instr-check.sh.
if [ -n "${RAW_OUT:-}" ]; then
  awk '{printf "%s%s\"%s\": %d", (NR > 1 ? ", " : "{"), "", $1, $3 / $2} END {print "}"}' "$WORK/instr.txt" > "$RAW_OUT"
fi
python3 "$HERE/instructions.py" "$WORK/instr.txt" "$OUT" "$(git -C "$ROOT" rev-parse --short HEAD)" "$(machine)" "$CONC" "$DURATION"
log "table written to $OUT"
