#!/usr/bin/env bash
# Peer comparison (by hand, never in CI: it installs two Python gateways from
# PyPI and takes several minutes). Junction, ContextForge and the fastmcp proxy
# each in front of the same fast upstream (crates/testkit/src/fast.rs), the
# same wrk tools/call load at each, alternating, in one run; writes the table
# between the peers markers of BENCHMARKS.md as ratios to Junction.
#
# Env: DURATION (s per run, default 20: a peer serves tens of calls a second,
#      so a short cell holds too few for a median), ROUNDS (default 2), SKIP_BUILD=1,
#      PYTHON312 (default /root/.pyenv/versions/3.12.1/bin/python3.12),
#      PEERS (default "fastmcp contextforge fastmcp-cadir contextforge-cadir"),
#      PEER_WORKERS (worker processes per peer, default nproc: Junction may use
#      every core too), OUT, KEEP=1 keeps the work dir.
# Each peer runs twice: with the stock trust store (SSL_CERT_FILE/SSL_CERT_DIR
# unset, so OpenSSL's default CA file, as on a plain Debian/Ubuntu host) and,
# as NAME-cadir, with only SSL_CERT_DIR set. Both peers build a fresh HTTP client,
# and with it a verifying TLS context, for every upstream exchange even over
# plain http; with a CA file that context parses the whole bundle (~30 ms of
# CPU here, twice per call), with a CA directory certificates are looked up
# lazily. Proxy variables are unset for every peer (all traffic is loopback).
# The venvs live in benches/peers/.venv-* (gitignored), pinned below and
# rebuilt when a pin changes. Everything binds 127.0.0.1.
set -euo pipefail

FASTMCP_VERSION=4.1.6
CONTEXTFORGE_VERSION=1.1.0

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE="$ROOT/benches/peers"
LOAD="$ROOT/benches/load"
DURATION=${DURATION:-20}
ROUNDS=${ROUNDS:-2}
PYTHON312=${PYTHON312:-/root/.pyenv/versions/3.12.1/bin/python3.12}
PEERS=${PEERS:-fastmcp contextforge fastmcp-cadir contextforge-cadir}
PEER_WORKERS=${PEER_WORKERS:-$(nproc)}
# wrk drops from its latency histogram (and counts as a timeout) any response
# slower than --timeout (default 2 s), which 32 queued calls to a peer exceed.
WRK_TIMEOUT=${WRK_TIMEOUT:-60s}
WARMUP=${WARMUP:-3}
export CHECK_TIMEOUT=30
OUT=${OUT:-$ROOT/BENCHMARKS.md}
WORK=$(mktemp -d /tmp/junction-peers.XXXXXX)
PIDS=()
LOG_TAG=peers

# shellcheck source=../load/lib.sh
. "$LOAD/lib.sh"
trap cleanup EXIT

# venv NAME REQUIREMENT: benches/peers/.venv-NAME with exactly REQUIREMENT installed.
venv() {
  local dir="$HERE/.venv-$1" stamp="$HERE/.venv-$1/.junction-stamp"
  if [ -x "$dir/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$2" ]; then
    return 0
  fi
  log "installing $2 into $dir"
  rm -rf "$dir"
  "$PYTHON312" -m venv "$dir"
  "$dir/bin/pip" install --quiet --disable-pip-version-check --no-input "$2" >&2
  echo "$2" > "$stamp"
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# wait_http URL SECONDS: until URL answers at all (any status).
wait_http() {
  local i
  for i in $(seq 1 "$(($2 * 10))"); do
    [ "$(curl -s -o /dev/null -m 1 -w '%{http_code}' "$1" || true)" != 000 ] && return 0
    sleep 0.1
  done
  echo "nothing answered at $1 within $2 s" >&2
  return 1
}

# descendants PID: PID and every process below it (a peer's CPU is the tree's).
descendants() {
  local p=$1 c
  echo "$p"
  for c in $(pgrep -P "$p" || true); do descendants "$c"; done
}

# settle ROOT...: until the process trees under ROOTs are idle (at most 2 ticks of
# CPU in 0.5 s between them: idle peers run timers), at most 30 s. A Python peer keeps working on calls wrk gave up
# on (the end of a cell, the warm-up), which would otherwise be charged to the
# next cell, whichever gateway it measures.
settle() {
  local pids i a b
  pids=$(for p in "$@"; do descendants "$p"; done | xargs)
  for i in $(seq 1 60); do
    a=$(cpu_ticks $pids); sleep 0.5; b=$(cpu_ticks $pids)
    [ $((b - a)) -le 2 ] && return 0
  done
  log "still busy after 30 s: $pids"
}

# peer_env VARIANT: the environment prefix (for `env`) a peer runs under; see the header.
peer_env() {
  local e=(-u SSL_CERT_FILE -u SSL_CERT_DIR -u http_proxy -u https_proxy -u HTTP_PROXY -u HTTPS_PROXY
    -u all_proxy -u ALL_PROXY NO_PROXY=127.0.0.1,localhost)
  if [ "$1" = cadir ]; then
    e+=("SSL_CERT_DIR=$("$PYTHON312" -c 'import ssl; print(ssl.get_default_verify_paths().openssl_capath)')")
  fi
  printf '%s\n' "${e[@]}"
}

# first_tool URL [AUTHORIZATION]: the name under which a gateway exposes the
# upstream's tool0 (each peer names proxied tools its own way).
first_tool() {
  curl -sS -m 30 "$1" -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/list' ${2:+-H "Authorization: $2"} \
    -d '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}' \
    | sed -n 's/^data: //p; /^{/p' | jq -r '[.result.tools[].name | select(test("tool0$"))][0] // empty'
}

for peer in $PEERS; do
  case $peer in
    fastmcp | fastmcp-cadir) venv fastmcp "fastmcp==$FASTMCP_VERSION" ;;
    contextforge | contextforge-cadir) venv contextforge "mcp-contextforge-gateway==$CONTEXTFORGE_VERSION" ;;
    *) echo "unknown peer $peer" >&2; exit 2 ;;
  esac
done

ensure_apt wrk
cd "$ROOT"
build_binaries
start_upstream

# Targets: NAME URL TOOL AUTHORIZATION ROOT_PID (its process tree is the CPU and
# memory counted); AUTHORIZATION is `-` for none, since `read` collapses empty
# tab-separated fields.
TARGETS="$WORK/targets.tsv"
: > "$TARGETS"
printf 'direct\thttp://%s/mcp\ttool0\t-\t%s\n' "$UP_ADDR" "$UP_PID" >> "$TARGETS"

cat > "$WORK/junction.yaml" <<EOF
server:
  listen: 127.0.0.1:0
upstreams:
  - id: fast
    url: http://$UP_ADDR/mcp
EOF
start_junction "$WORK/junction.yaml" junction
printf 'junction\thttp://%s/mcp\tfast__tool0\t-\t%s\n' "$J_ADDR" "$J_PID" >> "$TARGETS"
log "junction on $J_ADDR (pid $J_PID)"

# start_fastmcp NAME VARIANT: the proxy `fastmcp run URL` builds (create_proxy,
# a fresh backend client per request), as an ASGI app under uvicorn with
# PEER_WORKERS workers (benches/peers/fastmcp_proxy.py says why).
start_fastmcp() {
  local port env; port=$(free_port)
  mapfile -t env < <(peer_env "$2")
  (cd "$WORK" && exec env "${env[@]}" FASTMCP_PROXY_TARGET="http://$UP_ADDR/mcp" \
    "$HERE/.venv-fastmcp/bin/uvicorn" --factory --workers "$PEER_WORKERS" --host 127.0.0.1 --port "$port" \
    --log-level error --no-access-log --app-dir "$HERE" fastmcp_proxy:app > "$WORK/$1.out" 2>&1) &
  local pid=$!; PIDS+=("$pid")
  wait_http "http://127.0.0.1:$port/mcp" 60
  local tool; tool=$(first_tool "http://127.0.0.1:$port/mcp")
  [ -n "$tool" ] || { echo "fastmcp proxy lists no tool0" >&2; cat "$WORK/$1.out" >&2; exit 1; }
  printf '%s\thttp://127.0.0.1:%s/mcp\t%s\t-\t%s\n' "$1" "$port" "$tool" "$pid" >> "$TARGETS"
  log "$1 on 127.0.0.1:$port (pid $pid, $PEER_WORKERS workers), tool $tool"
}

# start_contextforge NAME VARIANT
start_contextforge() {
  local port venv="$HERE/.venv-contextforge" dir="$WORK/$1" env
  port=$(free_port)
  mkdir -p "$dir"
  mapfile -t env < <(peer_env "$2")
  # Its own secrets generator (it refuses to start on placeholders), SQLite,
  # loopback upstreams allowed (SSRF protection blocks them by default),
  # PEER_WORKERS uvicorn workers (its CLI's "production-style multiprocess"),
  # and no rate limiting: by default /mcp allows 100 requests a minute per
  # worker and answers the rest 429 at once (Junction here has no limit either).
  "$venv/bin/init-secrets" --output "$dir/.env.secrets" --force > /dev/null
  (
    cd "$dir"
    set -a; . "$dir/.env.secrets"; set +a
    export HOST=127.0.0.1 PORT="$port" DATABASE_URL="sqlite:///$dir/cf.db" \
      PLATFORM_ADMIN_EMAIL=admin@bench.test SSRF_ALLOW_LOCALHOST=true LOG_LEVEL=ERROR \
      RATE_LIMITING_ENABLED=false
    exec env "${env[@]}" "$venv/bin/mcpgateway" --host 127.0.0.1 --port "$port" --workers "$PEER_WORKERS" \
      > "$dir/out.log" 2>&1
  ) &
  local pid=$!; PIDS+=("$pid")
  wait_http "http://127.0.0.1:$port/health" 120
  # An admin token signed with the gateway's own secret, by its own tool.
  local token
  token=$(cd "$dir" && set -a && . "$dir/.env.secrets" && set +a && \
    "$venv/bin/python" -m mcpgateway.utils.create_jwt_token -u admin@bench.test --exp 120 --admin 2>/dev/null | tail -1)
  # Registration: the upstream as a "gateway" (Streamable HTTP); its tools
  # then appear on the gateway's /mcp endpoint.
  curl -sS -m 60 -o "$dir/register.json" -w '%{http_code}' "http://127.0.0.1:$port/gateways" \
    -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
    -d '{"name":"fast","url":"http://'"$UP_ADDR"'/mcp","transport":"STREAMABLEHTTP"}' > "$dir/register.code"
  grep -q '^20' "$dir/register.code" || { echo "contextforge registration failed: $(cat "$dir/register.json")" >&2; exit 1; }
  local tool; tool=$(first_tool "http://127.0.0.1:$port/mcp" "Bearer $token")
  [ -n "$tool" ] || { echo "contextforge lists no tool0" >&2; tail -20 "$dir/out.log" >&2; exit 1; }
  printf '%s\thttp://127.0.0.1:%s/mcp\t%s\tBearer %s\t%s\n' "$1" "$port" "$tool" "$token" "$pid" >> "$TARGETS"
  log "$1 on 127.0.0.1:$port (pid $pid, $PEER_WORKERS workers), tool $tool"
}

for peer in $PEERS; do
  case $peer in
    *-cadir) "start_${peer%-cadir}" "$peer" cadir ;;
    *) "start_$peer" "$peer" stock ;;
  esac
done
ROOTS=$(cut -f5 "$TARGETS" | xargs)

RESULTS="$WORK/peers.tsv"
printf 'round\tconc\ttarget\trequests\tduration_us\tp50_us\tp99_us\terrors\tnon2xx\tticks\tupstream_ticks\trss_kib\n' > "$RESULTS"
while IFS=$'\t' read -r name url tool auth root; do
  [ "$auth" = - ] && auth=""
  check "$url" tools/call "$tool" "$auth"
  MCP_AUTHORIZATION=$auth wrk -t2 -c32 -d"${WARMUP}s" --timeout "$WRK_TIMEOUT" -s "$LOAD/mcp.lua" "$url" \
    -- tools/call "$tool" > /dev/null
  settle $ROOTS
done < "$TARGETS"

for round in $(seq 1 "$ROUNDS"); do
  for conc in 1 32; do
    threads=1; [ "$conc" -gt 1 ] && threads=2
    while IFS=$'\t' read -r name url tool auth root; do
      [ "$auth" = - ] && auth=""
      pids=$(descendants "$root" | xargs)
      t0=$(cpu_ticks $pids); u0=$(cpu_ticks "$UP_PID")
      line=$(MCP_AUTHORIZATION=$auth wrk_result -t"$threads" -c"$conc" -d"${DURATION}s" --timeout "$WRK_TIMEOUT" \
        --latency -s "$LOAD/mcp.lua" "$url" -- tools/call "$tool")
      t1=$(cpu_ticks $pids); u1=$(cpu_ticks "$UP_PID")
      rss=0; for p in $pids; do rss=$((rss + $(rss_kib "$p"))); done
      echo "$line" | awk -v r="$round" -v c="$conc" -v t="$name" -v tt=$((t1 - t0)) -v ut=$((u1 - u0)) -v m="$rss" '
        { for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
          printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r, c, t, v["requests"], v["duration_us"],
            v["p50_us"], v["p99_us"], v["errors"], v["non2xx"], tt, ut, m }' >> "$RESULTS"
      log "round $round c=$conc $name: $line"
      settle $ROOTS
    done < "$TARGETS"
  done
done

export RESULTS OUT TCK DURATION ROUNDS FASTMCP_VERSION CONTEXTFORGE_VERSION PEER_WORKERS
export MACHINE="$(machine)"
export REV="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
python3 "$HERE/report.py"
log "peer table written to $OUT"
