# Shared by benches/load/run.sh and benches/peers/run.sh (sourced, not run):
# building the binaries, starting processes on 127.0.0.1 and reading their
# CPU and memory from /proc. Needs ROOT, WORK and the PIDS array set.

log() { echo "[${LOG_TAG:-load}] $*" >&2; }

# cleanup: the EXIT trap; stops what this run started (by pid) and removes WORK unless KEEP=1.
cleanup() {
  for p in "${PIDS[@]:-}"; do
    [ -n "$p" ] && kill "$p" 2>/dev/null || true
  done
  [ "${KEEP:-0}" = 1 ] && echo "work dir kept: $WORK" >&2 || rm -rf "$WORK"
}

# ensure_apt TOOL: installs the Debian package of the same name when TOOL is missing.
ensure_apt() {
  command -v "$1" >/dev/null && return 0
  if [ "$(id -u)" = 0 ]; then
    apt-get install -y "$1" >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y "$1" >/dev/null; }
  else
    echo "$1 is missing: apt-get install -y $1" >&2; exit 1
  fi
}

# build_binaries: sets JUNCTION, UPSTREAM and NULL_PROXY (SKIP_BUILD=1 reuses target/release/junction;
# ONE_BUILD=1 builds all three in one cargo run, so the measured junction has
# the dev-dependencies' features unified in: one release build instead of two,
# for CI, where the count is compared with a baseline taken the same way).
build_binaries() {
  JUNCTION="$ROOT/target/release/junction"
  if [ "${ONE_BUILD:-0}" = 1 ]; then
    log "building release (one build)"
    cargo build --release --bin junction --bench load_upstream --bench null_proxy --message-format=json > "$WORK/build.json" || {
      jq -r 'select(.reason=="compiler-message") | .message.rendered' "$WORK/build.json" >&2; exit 1; }
    UPSTREAM=$(jq -r 'select(.reason=="compiler-artifact" and .target.name=="load_upstream") | .executable // empty' \
      "$WORK/build.json" | tail -1)
    NULL_PROXY=$(jq -r 'select(.reason=="compiler-artifact" and .target.name=="null_proxy") | .executable // empty' \
      "$WORK/build.json" | tail -1)
    [ -x "$JUNCTION" ] && [ -x "$UPSTREAM" ] || { echo "build did not produce the binaries" >&2; exit 1; }
    return 0
  fi
  if [ "${SKIP_BUILD:-0}" = 1 ]; then
    # Building the bench targets below relinks target/release/junction with
    # the dev-dependencies' features unified in: measure a copy of the one
    # built by `cargo build --release`.
    [ -x "$JUNCTION" ] || { echo "SKIP_BUILD=1 but $JUNCTION is not built" >&2; exit 1; }
    cp "$JUNCTION" "$WORK/junction"
    JUNCTION="$WORK/junction"
  fi
  cargo build --release --bench load_upstream --bench null_proxy --message-format=json > "$WORK/build.json" || {
    jq -r 'select(.reason=="compiler-message") | .message.rendered' "$WORK/build.json" >&2; exit 1; }
  if [ "${SKIP_BUILD:-0}" != 1 ]; then
    log "building release"
    # After the bench target, so the measured binary is the plain `cargo build
    # --release` one (building a bench target unifies dev-dependency features).
    cargo build --release --bin junction >&2
  fi
  UPSTREAM=$(jq -r 'select(.reason=="compiler-artifact" and .target.name=="load_upstream") | .executable // empty' \
    "$WORK/build.json" | tail -1)
  NULL_PROXY=$(jq -r 'select(.reason=="compiler-artifact" and .target.name=="null_proxy") | .executable // empty' \
    "$WORK/build.json" | tail -1)
  [ -x "$JUNCTION" ] && [ -x "$UPSTREAM" ] && [ -x "$NULL_PROXY" ] || { echo "build did not produce the binaries" >&2; exit 1; }
}

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

# start_upstream -> sets UP_PID, UP_ADDR (the fast upstream, 10 tools, 2 threads)
start_upstream() {
  "$UPSTREAM" --listen 127.0.0.1:0 --tools 10 --threads 2 > "$WORK/upstream.out" 2> "$WORK/upstream.err" &
  UP_PID=$!; PIDS+=("$UP_PID")
  UP_ADDR=$(wait_line "$WORK/upstream.out" 'fast upstream listening on (127\.0\.0\.1:[0-9]+)')
  log "fast upstream on $UP_ADDR (pid $UP_PID)"
}

# one_upstream_config FILE: Junction on 127.0.0.1:0 with the fast upstream (UP_ADDR) as its only upstream.
one_upstream_config() {
  cat > "$1" <<EOF
server:
  listen: 127.0.0.1:0
upstreams:
  - id: fast
    url: http://$UP_ADDR/mcp
routes:
  - path: /mcp
    upstreams: ["*"]
EOF
}

# auth_config SRC DEST: SRC plus JWT authentication (RS256 from a JWKS file,
# a fresh key pair per run, so the key is cached from the start) and one
# local rate-limit rule keyed by principal and tool that never rejects; sets
# MCP_AUTHORIZATION to a bearer token it accepts.
auth_config() {
  local issuer=https://idp.bench public_url=http://127.0.0.1:8080
  MCP_AUTHORIZATION="Bearer $(python3 "$HERE/jwt.py" "$WORK" "$issuer" "$public_url")"
  {
    sed '/^server:/a\  public_url: '"$public_url" "$1"
    echo "auth:"
    echo "  jwt: {issuer: \"$issuer\", jwks_file: \"$WORK/jwks.json\"}"
    echo "rate_limits:"
    echo "  rules:"
    echo "    - {name: per-user-tool, key: [principal, tool], rate: 1000000000, per: 1s, burst: 1000000000}"
  } > "$2"
}

# start_junction CONFIG NAME -> sets J_PID, J_ADDR once /readyz answers 200
start_junction() {
  "$JUNCTION" run --config "$1" > "$WORK/$2.out" 2> "$WORK/$2.err" &
  J_PID=$!; PIDS+=("$J_PID")
  J_ADDR=$(wait_line "$WORK/$2.out" 'junction listening on (127\.0\.0\.1:[0-9]+)')
  # Junction warms its catalog in the background right after binding.
  local i
  for i in $(seq 1 100); do
    curl -s -o /dev/null -w '%{http_code}' "http://$J_ADDR/readyz" | grep -q 200 && break
    sleep 0.1
  done
}

# check URL METHOD [NAME] [AUTHORIZATION]: the request must succeed before any number counts
# (within CHECK_TIMEOUT s, default 5: a Python peer's first call on a cold worker takes seconds).
check() {
  local body meta name_part=""
  meta='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}'
  [ -n "${3:-}" ] && name_part='"name":"'"$3"'","arguments":{"text":"hello"},'
  body=$(curl -sS --max-time "${CHECK_TIMEOUT:-5}" "$1" -H 'Content-Type: application/json' \
    -H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2026-07-28' \
    -H "Mcp-Method: $2" ${3:+-H "Mcp-Name: $3"} ${4:+-H "Authorization: $4"} \
    -d '{"jsonrpc":"2.0","id":1,"method":"'"$2"'","params":{'"$name_part$meta"'}}')
  # JSON, or an SSE stream whose data lines carry it (some peers answer that way).
  if ! echo "$body" | sed -n 's/^data: //p; /^{/p' | jq -se 'any(.[]; .result and (.error | not))' >/dev/null 2>&1; then
    echo "sanity check failed for $2 at $1: $body" >&2
    exit 1
  fi
}

TCK=$(getconf CLK_TCK)
# CPU of a process and its threads (utime + stime, clock ticks); children are
# not counted, so for a multi-process peer sum over its pids.
cpu_ticks() { local p t=0; for p in "$@"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done; echo "$t"; }
# cpu_split PID: "user_ticks system_ticks involuntary_switches" of a process,
# the switches summed over its threads (how often the kernel took the CPU away
# from it while it still had work: on shared cores, the cost of being busy).
cpu_split() {
  echo "$(awk '{print $14, $15}' "/proc/$1/stat") $(cat /proc/"$1"/task/*/status 2>/dev/null | awk '/^nonvoluntary_ctxt_switches/ {n += $2} END {print n + 0}')"
}
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
hwm_kib() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status"; }

# wrk_result ARGS...: wrk with benches/load/mcp.lua; prints its RESULT line
# (requests= duration_us= p50_us= p90_us= p99_us= max_us= errors= non2xx=).
wrk_result() {
  wrk "$@" | grep '^RESULT '
}

machine() {
  echo "$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(uname -sr)"
}
