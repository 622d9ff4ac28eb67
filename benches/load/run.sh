#!/usr/bin/env bash
# Load harness: Junction against the direct path, in one sitting.
#
# Builds release, starts the fast upstream (crates/testkit/src/fast.rs) and
# two Junctions in front of it on 127.0.0.1 (plain, and with JWT auth + one
# rate-limit rule), drives the same tools/call and tools/list load with wrk at
# the upstream directly and through each Junction, in alternation, then
# (SCALING=1) tools/list over 1/10/50/100 upstreams of 50 tools, then
# (STREAMS=1) memory per open change stream up to 10,000 streams.
# Writes the tables between the load markers of BENCHMARKS.md.
#
# Env: SKIP_BUILD=1 (use the built target/release/junction), DURATION (s per run, default 2), ROUNDS (default 3),
#      SCALING (1|0), SCALE_DURATION (s, default 2), STREAMS (1|0), STREAM_LEVELS (default 0,1000,5000,10000),
#      OUT (default BENCHMARKS.md), KEEP=1 keeps the work dir. Loopback only; total about 4 minutes.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE="$ROOT/benches/load"
DURATION=${DURATION:-2}
ROUNDS=${ROUNDS:-3}
SCALING=${SCALING:-1}
SCALE_DURATION=${SCALE_DURATION:-2}
STREAMS=${STREAMS:-1}
STREAM_LEVELS=${STREAM_LEVELS:-0,1000,5000,10000}
OUT=${OUT:-$ROOT/BENCHMARKS.md}
WORK=$(mktemp -d /tmp/junction-load.XXXXXX)
PIDS=()

# shellcheck source=lib.sh
. "$HERE/lib.sh"
trap cleanup EXIT
ensure_apt wrk
cd "$ROOT"
build_binaries
start_upstream

one_upstream_config "$WORK/load.yaml"
start_junction "$WORK/load.yaml" junction
JUNCTION_PID=$J_PID; JUNCTION_ADDR=$J_ADDR
log "junction on $JUNCTION_ADDR (pid $JUNCTION_PID)"

# The same Junction with JWT authentication (a JWKS file, so the key is cached
# from the start; RS256, a fresh key pair per run) and one local rate-limit
# rule keyed by principal and tool, generous enough never to reject here.
auth_config "$WORK/load.yaml" "$WORK/auth.yaml"
start_junction "$WORK/auth.yaml" junction-auth
AUTH_PID=$J_PID; AUTH_ADDR=$J_ADDR
log "junction with JWT + rate limit on $AUTH_ADDR (pid $AUTH_PID)"

# The floor: a TCP proxy that only copies bytes (benches/load/null_proxy.rs).
"$NULL_PROXY" --listen 127.0.0.1:0 --upstream "$UP_ADDR" > "$WORK/null.out" 2> "$WORK/null.err" &
NULL_PID=$!; PIDS+=("$NULL_PID")
NULL_ADDR=$(wait_line "$WORK/null.out" 'null proxy listening on (127\.0\.0\.1:[0-9]+)')
log "null proxy on $NULL_ADDR (pid $NULL_PID)"

DIRECT_URL="http://$UP_ADDR/mcp"
NULL_URL="http://$NULL_ADDR/mcp"
THROUGH_URL="http://$JUNCTION_ADDR/mcp"
AUTH_URL="http://$AUTH_ADDR/mcp"

check "$DIRECT_URL" tools/call tool0
check "$NULL_URL" tools/call tool0
check "$THROUGH_URL" tools/call fast__tool0
check "$AUTH_URL" tools/call fast__tool0 "$MCP_AUTHORIZATION"
check "$DIRECT_URL" tools/list
check "$THROUGH_URL" tools/list
check "$AUTH_URL" tools/list "" "$MCP_AUTHORIZATION"
# The authenticated Junction must really check: no token, 401.
code=$(curl -s -o /dev/null -w '%{http_code}' "$AUTH_URL" -H 'Content-Type: application/json' \
  -H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2026-07-28' \
  -H 'Mcp-Method: tools/list' -d '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}')
[ "$code" = 401 ] || { echo "junction-auth answered $code without a token (want 401)" >&2; exit 1; }

J_RSS_IDLE=$(rss_kib "$JUNCTION_PID")
A_RSS_IDLE=$(rss_kib "$AUTH_PID")
U_RSS_IDLE=$(rss_kib "$UP_PID")
J_RSS_LOAD=0; U_RSS_LOAD=0

RESULTS="$WORK/results.tsv"
printf 'round\tkind\tconc\ttarget\trequests\tduration_us\tp50_us\tp90_us\tp99_us\terrors\tnon2xx\tjunction_ticks\tupstream_ticks\tproxy_user\tproxy_sys\tproxy_preempted\tupstream_user\tupstream_sys\tupstream_preempted\n' > "$RESULTS"

# run_wrk ROUND KIND CONC TARGET URL METHOD [NAME]; TARGET is direct, junction or junction_auth.
run_wrk() {
  local round=$1 kind=$2 conc=$3 target=$4 url=$5 method=$6 name=${7:-}
  local threads=1; [ "$conc" -gt 1 ] && threads=2
  local line sampler="" pid=$JUNCTION_PID authorization=""
  if [ "$target" = junction_auth ]; then pid=$AUTH_PID; authorization=$MCP_AUTHORIZATION; fi
  [ "$target" = null_proxy ] && pid=$NULL_PID
  local -a ps0 us0 ps1 us1
  read -r -a ps0 < <(cpu_split "$pid"); read -r -a us0 < <(cpu_split "$UP_PID")
  if [ "$conc" -gt 1 ] && [ "$target" = junction ]; then
    ( sleep "$(awk -v d="$DURATION" 'BEGIN { print d / 2 }')"; echo "$(rss_kib "$JUNCTION_PID") $(rss_kib "$UP_PID")" > "$WORK/rss.sample" ) &
    sampler=$!
  fi
  line=$(MCP_AUTHORIZATION=$authorization wrk_result -t"$threads" -c"$conc" -d"${DURATION}s" --latency \
    -s "$HERE/mcp.lua" "$url" -- "$method" $name)
  read -r -a ps1 < <(cpu_split "$pid"); read -r -a us1 < <(cpu_split "$UP_PID")
  if [ -n "$sampler" ]; then
    wait "$sampler" || true
    read -r jr ur < "$WORK/rss.sample"
    [ "$jr" -gt "$J_RSS_LOAD" ] && J_RSS_LOAD=$jr
    [ "$ur" -gt "$U_RSS_LOAD" ] && U_RSS_LOAD=$ur
  fi
  # user, system, preempted of the serving process, then of the upstream;
  # the tick columns are user + system.
  local pu=$((ps1[0] - ps0[0])) pk=$((ps1[1] - ps0[1])) uu=$((us1[0] - us0[0])) uk=$((us1[1] - us0[1]))
  local split="$pu\t$pk\t$((ps1[2] - ps0[2]))\t$uu\t$uk\t$((us1[2] - us0[2]))"
  echo "$line" | awk -v r="$round" -v k="$kind" -v c="$conc" -v t="$target" -v jt=$((pu + pk)) -v ut=$((uu + uk)) -v sp="$split" '
    { for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
      printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r, k, c, t, v["requests"], v["duration_us"],
        v["p50_us"], v["p90_us"], v["p99_us"], v["errors"], v["non2xx"], jt, ut, sp }' >> "$RESULTS"
  log "round $round $kind c=$conc $target: $line"
}

log "warm-up"
for url_name in "$DIRECT_URL tool0" "$THROUGH_URL fast__tool0" "$AUTH_URL fast__tool0"; do
  set -- $url_name
  MCP_AUTHORIZATION=$MCP_AUTHORIZATION wrk -t2 -c32 -d1s -s "$HERE/mcp.lua" "$1" -- tools/call "$2" > /dev/null
done

for round in $(seq 1 "$ROUNDS"); do
  for conc in 1 32; do
    run_wrk "$round" tools/call "$conc" direct "$DIRECT_URL" tools/call tool0
    run_wrk "$round" tools/call "$conc" null_proxy "$NULL_URL" tools/call tool0
    run_wrk "$round" tools/call "$conc" junction "$THROUGH_URL" tools/call fast__tool0
    run_wrk "$round" tools/call "$conc" junction_auth "$AUTH_URL" tools/call fast__tool0
    run_wrk "$round" tools/list "$conc" direct "$DIRECT_URL" tools/list
    run_wrk "$round" tools/list "$conc" junction "$THROUGH_URL" tools/list
    run_wrk "$round" tools/list "$conc" junction_auth "$AUTH_URL" tools/list
  done
done
J_HWM=$(hwm_kib "$JUNCTION_PID"); U_HWM=$(hwm_kib "$UP_PID")
kill "$JUNCTION_PID" "$AUTH_PID" 2>/dev/null || true

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
  check "http://$SCALE_ADDR/u100" tools/list
  S_RSS=$(rss_kib "$SCALE_PID")
  scale_run() { # N ROUTE URL [METHOD NAME]
    local line
    line=$(wrk_result -t1 -c1 -d"${SCALE_DURATION}s" --latency -s "$HERE/mcp.lua" "$3" -- "${4:-tools/list}" ${5:-})
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

# ---- memory per open change stream: a fresh Junction per kind ----
STREAMS_TSV="$WORK/streams.tsv"
if [ "$STREAMS" = 1 ]; then
  # Junction's own cap is 10,000 change streams per process (notify::MAX_SUBSCRIBERS);
  # every stream is one socket on each side, so both need the descriptors.
  ulimit -n "$(ulimit -Hn)"
  printf 'kind\tn\trss_kib\topen_streams\n' > "$STREAMS_TSV"
  # conn: idle keep-alive connections (the baseline: what any HTTP connection costs);
  # session: handshake-era sessions minted by initialize, no stream held;
  # get: their GET streams; listen: modern subscriptions/listen streams.
  for kind in conn session get listen; do
    start_junction "$WORK/load.yaml" "streams-$kind"
    python3 "$HERE/streams.py" --url "http://$J_ADDR/mcp" --pid "$J_PID" --kind "$kind" \
      --levels "$STREAM_LEVELS" >> "$STREAMS_TSV"
    kill "$J_PID" 2>/dev/null || true
  done
fi

export RESULTS SCALE STREAMS_TSV OUT TCK A_RSS_IDLE J_RSS_IDLE J_RSS_LOAD J_HWM U_RSS_IDLE U_RSS_LOAD U_HWM S_RSS DURATION ROUNDS
export MACHINE="$(machine)"
export REV="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
python3 "$HERE/report.py"
log "tables written to $OUT"
