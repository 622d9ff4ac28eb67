#!/usr/bin/env bash
# Load harness: Junction against the direct path, in one sitting.
#
# Builds release, starts the fast upstream (crates/testkit/src/fast.rs) and
# Junction in front of it on 127.0.0.1, drives the same tools/call and
# tools/list load with wrk at the upstream directly and through Junction, in
# alternation, then (SCALING=1) tools/list over 1/10/50/100 upstreams of 50
# tools. Writes the tables between the load markers of BENCHMARKS.md.
#
# Env: SKIP_BUILD=1 (use the built target/release/junction), DURATION (s per run, default 2), ROUNDS (default 3), SCALING (1|0),
#      SCALE_DURATION (s, default 2), OUT (default BENCHMARKS.md), KEEP=1 keeps
#      the work dir. Loopback only; total well under 3 minutes.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE="$ROOT/benches/load"
DURATION=${DURATION:-2}
ROUNDS=${ROUNDS:-3}
SCALING=${SCALING:-1}
SCALE_DURATION=${SCALE_DURATION:-2}
OUT=${OUT:-$ROOT/BENCHMARKS.md}
WORK=$(mktemp -d /tmp/junction-load.XXXXXX)
PIDS=()

cleanup() {
  for p in "${PIDS[@]:-}"; do
    [ -n "$p" ] && kill "$p" 2>/dev/null || true
  done
  [ "${KEEP:-0}" = 1 ] && echo "work dir kept: $WORK" >&2 || rm -rf "$WORK"
}
trap cleanup EXIT

log() { echo "[load] $*" >&2; }

if ! command -v wrk >/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    apt-get install -y wrk >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y wrk >/dev/null; }
  else
    echo "wrk is missing: apt-get install -y wrk" >&2; exit 1
  fi
fi

cd "$ROOT"
cargo build --release --bench load_upstream --message-format=json > "$WORK/build.json" || {
  jq -r 'select(.reason=="compiler-message") | .message.rendered' "$WORK/build.json" >&2; exit 1; }
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  log "building release"
  # After the bench target, so the measured binary is the plain `cargo build
  # --release` one (building a bench target unifies dev-dependency features).
  cargo build --release --bin junction >&2
fi
JUNCTION="$ROOT/target/release/junction"
UPSTREAM=$(jq -r 'select(.reason=="compiler-artifact" and .target.name=="load_upstream") | .executable // empty' \
  "$WORK/build.json" | tail -1)
[ -x "$JUNCTION" ] && [ -x "$UPSTREAM" ] || { echo "build did not produce the binaries" >&2; exit 1; }

# wait_line FILE REGEX: the first match of REGEX in FILE (sed -E with one group), within 20 s.
wait_line() {
  local file=$1 re=$2 i
  for i in $(seq 1 200); do
    if grep -qE "$re" "$file" 2>/dev/null; then
      grep -oE "$re" "$file" | head -1 | sed -E "s/$re/\1/"
      return 0
    fi
    sleep 0.1
  done
  echo "timed out waiting for '$re' in $file" >&2
  cat "$file" >&2 || true
  return 1
}

"$UPSTREAM" --listen 127.0.0.1:0 --tools 10 --threads 2 > "$WORK/upstream.out" 2> "$WORK/upstream.err" &
UP_PID=$!; PIDS+=("$UP_PID")
UP_ADDR=$(wait_line "$WORK/upstream.out" 'fast upstream listening on (127\.0\.0\.1:[0-9]+)')
log "fast upstream on $UP_ADDR (pid $UP_PID)"

# start_junction CONFIG NAME -> sets J_PID, J_ADDR
start_junction() {
  "$JUNCTION" run --config "$1" > "$WORK/$2.out" 2> "$WORK/$2.err" &
  J_PID=$!; PIDS+=("$J_PID")
  J_ADDR=$(wait_line "$WORK/$2.out" 'junction listening on (127\.0\.0\.1:[0-9]+)')
}

cat > "$WORK/load.yaml" <<EOF
server:
  listen: 127.0.0.1:0
upstreams:
  - id: fast
    url: http://$UP_ADDR/mcp
routes:
  - path: /mcp
    upstreams: ["*"]
EOF
start_junction "$WORK/load.yaml" junction
JUNCTION_PID=$J_PID; JUNCTION_ADDR=$J_ADDR
log "junction on $JUNCTION_ADDR (pid $JUNCTION_PID)"

DIRECT_URL="http://$UP_ADDR/mcp"
THROUGH_URL="http://$JUNCTION_ADDR/mcp"

# The same request must succeed on both paths before any number counts.
check() { # URL METHOD [NAME]
  local body meta name_part=""
  meta='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}'
  [ -n "${3:-}" ] && name_part='"name":"'"$3"'","arguments":{"text":"hello"},'
  body=$(curl -sS --max-time 5 "$1" -H 'Content-Type: application/json' \
    -H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2026-07-28' \
    -H "Mcp-Method: $2" ${3:+-H "Mcp-Name: $3"} \
    -d '{"jsonrpc":"2.0","id":1,"method":"'"$2"'","params":{'"$name_part$meta"'}}')
  if ! echo "$body" | jq -e '.result and (.error | not)' >/dev/null 2>&1; then
    echo "sanity check failed for $2 at $1: $body" >&2
    exit 1
  fi
}
# Junction warms its catalog in the background right after binding.
for i in $(seq 1 50); do
  curl -s -o /dev/null -w '%{http_code}' "http://$JUNCTION_ADDR/readyz" | grep -q 200 && break
  sleep 0.1
done
check "$DIRECT_URL" tools/call tool0
check "$THROUGH_URL" tools/call fast__tool0
check "$DIRECT_URL" tools/list
check "$THROUGH_URL" tools/list

TCK=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
hwm_kib() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status"; }

J_RSS_IDLE=$(rss_kib "$JUNCTION_PID")
U_RSS_IDLE=$(rss_kib "$UP_PID")
J_RSS_LOAD=0; U_RSS_LOAD=0

RESULTS="$WORK/results.tsv"
printf 'round\tkind\tconc\ttarget\trequests\tduration_us\tp50_us\tp90_us\tp99_us\terrors\tnon2xx\tjunction_ticks\tupstream_ticks\n' > "$RESULTS"

# run_wrk ROUND KIND CONC TARGET URL METHOD [NAME]
run_wrk() {
  local round=$1 kind=$2 conc=$3 target=$4 url=$5 method=$6 name=${7:-}
  local threads=1; [ "$conc" -gt 1 ] && threads=2
  local j0 u0 j1 u1 line sampler=""
  j0=$(cpu_ticks "$JUNCTION_PID"); u0=$(cpu_ticks "$UP_PID")
  if [ "$conc" -gt 1 ]; then
    ( sleep "$(awk -v d="$DURATION" 'BEGIN { print d / 2 }')"; echo "$(rss_kib "$JUNCTION_PID") $(rss_kib "$UP_PID")" > "$WORK/rss.sample" ) &
    sampler=$!
  fi
  line=$(wrk -t"$threads" -c"$conc" -d"${DURATION}s" --latency -s "$HERE/mcp.lua" "$url" -- "$method" $name \
    | grep '^RESULT ')
  j1=$(cpu_ticks "$JUNCTION_PID"); u1=$(cpu_ticks "$UP_PID")
  if [ -n "$sampler" ]; then
    wait "$sampler" || true
    read -r jr ur < "$WORK/rss.sample"
    [ "$jr" -gt "$J_RSS_LOAD" ] && J_RSS_LOAD=$jr
    [ "$ur" -gt "$U_RSS_LOAD" ] && U_RSS_LOAD=$ur
  fi
  # RESULT requests=.. duration_us=.. p50_us=.. p90_us=.. p99_us=.. max_us=.. errors=.. non2xx=..
  echo "$line" | awk -v r="$round" -v k="$kind" -v c="$conc" -v t="$target" -v jt=$((j1 - j0)) -v ut=$((u1 - u0)) '
    { for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
      printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r, k, c, t, v["requests"], v["duration_us"],
        v["p50_us"], v["p90_us"], v["p99_us"], v["errors"], v["non2xx"], jt, ut }' >> "$RESULTS"
  log "round $round $kind c=$conc $target: $line"
}

log "warm-up"
for url_name in "$DIRECT_URL tool0" "$THROUGH_URL fast__tool0"; do
  set -- $url_name
  wrk -t2 -c32 -d1s -s "$HERE/mcp.lua" "$1" -- tools/call "$2" > /dev/null
done

for round in $(seq 1 "$ROUNDS"); do
  for conc in 1 32; do
    run_wrk "$round" tools/call "$conc" direct "$DIRECT_URL" tools/call tool0
    run_wrk "$round" tools/call "$conc" junction "$THROUGH_URL" tools/call fast__tool0
    run_wrk "$round" tools/list "$conc" direct "$DIRECT_URL" tools/list
    run_wrk "$round" tools/list "$conc" junction "$THROUGH_URL" tools/list
  done
done
J_HWM=$(hwm_kib "$JUNCTION_PID"); U_HWM=$(hwm_kib "$UP_PID")
kill "$JUNCTION_PID" 2>/dev/null || true

# ---- scaling: tools/list over N upstreams of 50 tools, cached and cold ----
SCALE="$WORK/scaling.tsv"
printf 'n\troute\trequests\tp50_us\tp99_us\terrors\tnon2xx\n' > "$SCALE"
S_RSS=""
if [ "$SCALING" = 1 ]; then
  NS="1 10 50 100"
  {
    echo "server:"
    echo "  listen: 127.0.0.1:0"
    echo "upstreams:"
    for i in $(seq 0 99); do
      # cached: the upstream's ttlMs is 60 s
      echo "  - {id: u$i, url: \"http://$UP_ADDR/u$i/tools=50/mcp\"}"
      # cold: ttlMs 0, so every tools/list fans out; s0 is the slow one (20 ms)
      if [ "$i" = 0 ]; then delay=/delay=20; else delay=; fi
      echo "  - {id: s$i, url: \"http://$UP_ADDR/s$i/tools=50/ttl=0$delay/mcp\"}"
      # cold, all fast: the fan-out's own cost
      echo "  - {id: f$i, url: \"http://$UP_ADDR/f$i/tools=50/ttl=0/mcp\"}"
    done
    echo "routes:"
    for n in $NS; do
      for kind in u s f; do
        ids=$(seq -s, -f "$kind%g" 0 $((n - 1)))
        echo "  - {path: /$kind$n, upstreams: [$ids]}"
      done
    done
  } > "$WORK/scale.yaml"
  start_junction "$WORK/scale.yaml" scale
  SCALE_PID=$J_PID; SCALE_ADDR=$J_ADDR
  for i in $(seq 1 100); do
    curl -s -o /dev/null -w '%{http_code}' "http://$SCALE_ADDR/readyz" | grep -q 200 && break
    sleep 0.1
  done
  check "http://$SCALE_ADDR/u100" tools/list
  S_RSS=$(rss_kib "$SCALE_PID")
  scale_run() { # N ROUTE URL [METHOD NAME]
    local line
    line=$(wrk -t1 -c1 -d"${SCALE_DURATION}s" --latency -s "$HERE/mcp.lua" "$3" -- "${4:-tools/list}" ${5:-} \
      | grep '^RESULT ')
    echo "$line" | awk -v n="$1" -v r="$2" '
      { for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
        printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n, r, v["requests"], v["p50_us"], v["p99_us"], v["errors"], v["non2xx"] }' >> "$SCALE"
    log "scaling n=$1 $2: $line"
  }
  # Baselines in the same run: one 50-tool upstream directly, and the slow one directly.
  scale_run 1 direct50 "http://$UP_ADDR/u0/tools=50/mcp"
  scale_run 1 directslow "http://$UP_ADDR/s0/tools=50/ttl=0/delay=20/mcp"
  scale_run 1 directcall "http://$UP_ADDR/u0/tools=50/mcp" tools/call tool0
  check "http://$SCALE_ADDR/u100" tools/call u0__tool0
  for n in $NS; do
    scale_run "$n" cached "http://$SCALE_ADDR/u$n"
    # a tools/call also goes through the route's catalog: does its cost grow with N?
    scale_run "$n" call "http://$SCALE_ADDR/u$n" tools/call u0__tool0
    scale_run "$n" cold_slow "http://$SCALE_ADDR/s$n"
    scale_run "$n" cold_fast "http://$SCALE_ADDR/f$n"
  done
  S_RSS_AFTER=$(rss_kib "$SCALE_PID")
  S_RSS="$S_RSS $S_RSS_AFTER"
  kill "$SCALE_PID" 2>/dev/null || true
fi

export RESULTS SCALE OUT TCK J_RSS_IDLE J_RSS_LOAD J_HWM U_RSS_IDLE U_RSS_LOAD U_HWM S_RSS DURATION ROUNDS
export MACHINE="$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(uname -sr)"
export REV="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
python3 "$HERE/report.py"
log "tables written to $OUT"
