#!/usr/bin/env bash
# Peer comparison (by hand, never in CI: it installs two Python gateways from
# PyPI and takes several minutes). Junction, ContextForge and the fastmcp proxy
# each in front of the same fast upstream (crates/testkit/src/fast.rs), the
# same wrk tools/call load at each, alternating, in one run; writes the table
# between the peers markers of BENCHMARKS.md as ratios to Junction.
#
# Env: DURATION (s per run, default 3), ROUNDS (default 3), SKIP_BUILD=1,
#      PYTHON312 (default /root/.pyenv/versions/3.12.1/bin/python3.12),
#      PEERS (default "fastmcp contextforge"), OUT, KEEP=1 keeps the work dir.
# The venvs live in benches/peers/.venv-* (gitignored), pinned below and
# rebuilt when a pin changes. Everything binds 127.0.0.1.
set -euo pipefail

FASTMCP_VERSION=4.1.6
CONTEXTFORGE_VERSION=1.1.0

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE="$ROOT/benches/peers"
LOAD="$ROOT/benches/load"
DURATION=${DURATION:-3}
ROUNDS=${ROUNDS:-3}
PYTHON312=${PYTHON312:-/root/.pyenv/versions/3.12.1/bin/python3.12}
PEERS=${PEERS:-fastmcp contextforge}
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

# first_tool URL [AUTHORIZATION]: the name under which a gateway exposes the
# upstream's tool0 (each peer names proxied tools its own way).
first_tool() {
  curl -sS -m 10 "$1" -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/list' ${2:+-H "Authorization: $2"} \
    -d '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}' \
    | sed -n 's/^data: //p; /^{/p' | jq -r '[.result.tools[].name | select(test("tool0$"))][0] // empty'
}

for peer in $PEERS; do
  case $peer in
    fastmcp) venv fastmcp "fastmcp==$FASTMCP_VERSION" ;;
    contextforge) venv contextforge "mcp-contextforge-gateway==$CONTEXTFORGE_VERSION" ;;
    *) echo "unknown peer $peer" >&2; exit 2 ;;
  esac
done

ensure_wrk
cd "$ROOT"
build_binaries
start_upstream

# Targets: NAME URL TOOL AUTHORIZATION PIDS (space-separated, for CPU); AUTHORIZATION
# is `-` for none, since `read` collapses empty tab-separated fields.
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

start_fastmcp() {
  local port; port=$(free_port)
  # `fastmcp run URL` is the documented proxy: it connects to the remote
  # server and serves it again (Streamable HTTP with --transport http).
  (cd "$WORK" && exec "$HERE/.venv-fastmcp/bin/fastmcp" run "http://$UP_ADDR/mcp" --transport http \
    --host 127.0.0.1 --port "$port" --no-banner --log-level ERROR > "$WORK/fastmcp.out" 2>&1) &
  local pid=$!; PIDS+=("$pid")
  wait_http "http://127.0.0.1:$port/mcp" 60
  local tool; tool=$(first_tool "http://127.0.0.1:$port/mcp")
  [ -n "$tool" ] || { echo "fastmcp proxy lists no tool0" >&2; cat "$WORK/fastmcp.out" >&2; exit 1; }
  printf 'fastmcp\thttp://127.0.0.1:%s/mcp\t%s\t-\t%s\n' "$port" "$tool" "$(descendants "$pid" | xargs)" >> "$TARGETS"
  log "fastmcp proxy on 127.0.0.1:$port (pid $pid), tool $tool"
}

start_contextforge() {
  local port venv="$HERE/.venv-contextforge" dir="$WORK/contextforge"
  port=$(free_port)
  mkdir -p "$dir"
  # Its own secrets generator (it refuses to start on placeholders), SQLite,
  # loopback upstreams allowed (SSRF protection blocks them by default).
  "$venv/bin/init-secrets" --output "$dir/.env.secrets" --force > /dev/null
  (
    cd "$dir"
    set -a; . "$dir/.env.secrets"; set +a
    export HOST=127.0.0.1 PORT="$port" DATABASE_URL="sqlite:///$dir/cf.db" \
      PLATFORM_ADMIN_EMAIL=admin@bench.test SSRF_ALLOW_LOCALHOST=true LOG_LEVEL=ERROR
    exec "$venv/bin/mcpgateway" --host 127.0.0.1 --port "$port" > "$dir/out.log" 2>&1
  ) &
  local pid=$!; PIDS+=("$pid")
  wait_http "http://127.0.0.1:$port/health" 120
  # An admin token signed with the gateway's own secret, by its own tool.
  local token
  token=$(cd "$dir" && set -a && . "$dir/.env.secrets" && set +a && \
    "$venv/bin/python" -m mcpgateway.utils.create_jwt_token -u admin@bench.test --exp 120 --admin 2>/dev/null | tail -1)
  # Registration: the upstream as a "gateway" (Streamable HTTP); its tools
  # then appear on the gateway's /mcp endpoint.
  curl -sS -m 30 -o "$dir/register.json" -w '%{http_code}' "http://127.0.0.1:$port/gateways" \
    -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
    -d '{"name":"fast","url":"http://'"$UP_ADDR"'/mcp","transport":"STREAMABLEHTTP"}' > "$dir/register.code"
  grep -q '^20' "$dir/register.code" || { echo "contextforge registration failed: $(cat "$dir/register.json")" >&2; exit 1; }
  local tool; tool=$(first_tool "http://127.0.0.1:$port/mcp" "Bearer $token")
  [ -n "$tool" ] || { echo "contextforge lists no tool0" >&2; tail -20 "$dir/out.log" >&2; exit 1; }
  printf 'contextforge\thttp://127.0.0.1:%s/mcp\t%s\tBearer %s\t%s\n' "$port" "$tool" "$token" \
    "$(descendants "$pid" | xargs)" >> "$TARGETS"
  log "contextforge on 127.0.0.1:$port (pid $pid), tool $tool"
}

for peer in $PEERS; do "start_$peer"; done

RESULTS="$WORK/peers.tsv"
printf 'round\tconc\ttarget\trequests\tduration_us\tp50_us\tp99_us\terrors\tnon2xx\tticks\tupstream_ticks\trss_kib\n' > "$RESULTS"
while IFS=$'\t' read -r name url tool auth pids; do
  [ "$auth" = - ] && auth=""
  check "$url" tools/call "$tool" "$auth"
  MCP_AUTHORIZATION=$auth wrk -t2 -c32 -d1s -s "$LOAD/mcp.lua" "$url" -- tools/call "$tool" > /dev/null
done < "$TARGETS"

for round in $(seq 1 "$ROUNDS"); do
  for conc in 1 32; do
    threads=1; [ "$conc" -gt 1 ] && threads=2
    while IFS=$'\t' read -r name url tool auth pids; do
      [ "$auth" = - ] && auth=""
      t0=$(cpu_ticks $pids); u0=$(cpu_ticks "$UP_PID")
      line=$(MCP_AUTHORIZATION=$auth wrk_result -t"$threads" -c"$conc" -d"${DURATION}s" --latency \
        -s "$LOAD/mcp.lua" "$url" -- tools/call "$tool")
      t1=$(cpu_ticks $pids); u1=$(cpu_ticks "$UP_PID")
      rss=0; for p in $pids; do rss=$((rss + $(rss_kib "$p"))); done
      echo "$line" | awk -v r="$round" -v c="$conc" -v t="$name" -v tt=$((t1 - t0)) -v ut=$((u1 - u0)) -v m="$rss" '
        { for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
          printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r, c, t, v["requests"], v["duration_us"],
            v["p50_us"], v["p99_us"], v["errors"], v["non2xx"], tt, ut, m }' >> "$RESULTS"
      log "round $round c=$conc $name: $line"
    done < "$TARGETS"
  done
done

export RESULTS OUT TCK DURATION ROUNDS FASTMCP_VERSION CONTEXTFORGE_VERSION
export MACHINE="$(machine)"
export REV="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
python3 "$HERE/report.py"
log "peer table written to $OUT"
