#!/usr/bin/env bash
# Fleet benchmark: throughput of 1, 2 and 3 Junction replicas behind a
# round-robin HAProxy (nothing sticky), relative to one replica reached
# directly, all in one run on 127.0.0.1. The replicas are configured as a
# fleet is (shared request_state key, the fleet bus on a real redis-server,
# fleet.advertise_url); the upstream is the fast one (crates/testkit/src/fast.rs).
# Each cell is wrk tools/call at concurrency CONC; the cells alternate over
# ROUNDS rounds and the median is reported. Writes the fleet table between the
# `fleet` markers of BENCHMARKS.md.
#
# On a machine with fewer cores than replicas + load generator + upstream the
# replicas share the cores, so more replicas cannot mean more throughput: the
# table then shows what the balancer and the fleet wiring cost, not scaling.
#
# Env: SKIP_BUILD=1, DURATION (s per cell, default 3), ROUNDS (default 3),
#      CONC (default 32), OUT (default BENCHMARKS.md), KEEP=1.
# Needs wrk, haproxy, redis-server (installed from Debian when missing, as root).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE="$ROOT/benches/load"
DURATION=${DURATION:-3}
ROUNDS=${ROUNDS:-3}
CONC=${CONC:-32}
OUT=${OUT:-$ROOT/BENCHMARKS.md}
WORK=$(mktemp -d /tmp/junction-fleet.XXXXXX)
PIDS=()
LOG_TAG=fleet

# shellcheck source=lib.sh
. "$HERE/lib.sh"
trap cleanup EXIT
ensure_apt wrk
ensure_apt haproxy
command -v redis-server >/dev/null || bash "$ROOT/scripts/redis.sh" >/dev/null
cd "$ROOT"
build_binaries
start_upstream

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

REDIS_PORT=$(free_port)
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no > "$WORK/redis.out" 2>&1 &
PIDS+=("$!")
export JUNCTION_STATE_KEY=fleet-bench-key-0123456789abcdef0123456789abcdef

PORTS=()
for i in 1 2 3; do
  port=$(free_port)
  one_upstream_config "$WORK/replica$i.yaml"
  sed -i "s/listen: 127.0.0.1:0/listen: 127.0.0.1:$port/" "$WORK/replica$i.yaml"
  cat >> "$WORK/replica$i.yaml" <<YAML
request_state: {secret_env: JUNCTION_STATE_KEY}
fleet: {redis_url: "redis://127.0.0.1:$REDIS_PORT", advertise_url: "http://127.0.0.1:$port"}
YAML
  start_junction "$WORK/replica$i.yaml" "replica$i"
  PORTS+=("$port")
  log "replica $i on $J_ADDR (pid $J_PID)"
done

# One HAProxy per pool size, each in plain round-robin HTTP mode.
haproxy_for() { # N -> prints the frontend port
  local n=$1 port cfg
  port=$(free_port)
  cfg="$WORK/haproxy$n.cfg"
  {
    echo "global"
    echo "  maxconn 4096"
    echo "defaults"
    echo "  mode http"
    echo "  timeout connect 2s"
    echo "  timeout client 30s"
    echo "  timeout server 30s"
    echo "frontend mcp"
    echo "  bind 127.0.0.1:$port"
    echo "  default_backend replicas"
    echo "backend replicas"
    echo "  balance roundrobin"
    echo "  http-reuse always"
    for i in $(seq 1 "$n"); do echo "  server r$i 127.0.0.1:${PORTS[$((i - 1))]}"; done
  } > "$cfg"
  haproxy -f "$cfg" -db > "$WORK/haproxy$n.out" 2>&1 &
  # Called in $( ): the pid goes through a file to the EXIT trap's list.
  echo "$!" > "$WORK/haproxy$n.pid"
  for _ in $(seq 1 50); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.1
  done
  echo "$port"
}

declare -A URL
URL[alone]="http://127.0.0.1:${PORTS[0]}/mcp"
for n in 1 2 3; do
  URL[lb$n]="http://127.0.0.1:$(haproxy_for "$n")/mcp"
  PIDS+=("$(cat "$WORK/haproxy$n.pid")")
done
for cell in alone lb1 lb2 lb3; do check "${URL[$cell]}" tools/call fast__tool0; done

: > "$WORK/fleet.txt"
for round in $(seq 1 "$ROUNDS"); do
  for cell in alone lb1 lb2 lb3; do
    line=$(wrk_result -t2 -c"$CONC" -d"${DURATION}s" -s "$HERE/mcp.lua" "${URL[$cell]}" -- tools/call fast__tool0)
    echo "$cell $line" >> "$WORK/fleet.txt"
    log "round $round $cell: $line"
  done
done

python3 "$HERE/fleet_report.py" "$WORK/fleet.txt" "$OUT" "$(git -C "$ROOT" rev-parse --short HEAD)" \
  "$(machine)" "$CONC" "$DURATION" "$ROUNDS"
log "table written to $OUT"
