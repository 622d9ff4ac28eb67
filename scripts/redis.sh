#!/usr/bin/env bash
# Makes sure `redis-server` is installed (the policy crate's Redis rate-limit
# tests start their own instance on 127.0.0.1 with a free port). Idempotent:
# does nothing when redis-server is already on PATH.
set -euo pipefail

if command -v redis-server >/dev/null 2>&1; then
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "redis.sh: redis-server is missing and apt-get is not available; install Redis (>= 5) by hand" >&2
    exit 1
fi

SUDO=""
if [ "$(id -u)" != 0 ]; then
    SUDO="sudo"
fi

export DEBIAN_FRONTEND=noninteractive
# Install from the current package lists; refresh them once if that fails
# (a fresh machine has none).
if ! $SUDO apt-get install -y -q --no-install-recommends redis-server >/dev/null 2>&1; then
    $SUDO apt-get update -q >/dev/null
    $SUDO apt-get install -y -q --no-install-recommends redis-server >/dev/null
fi

# The Debian package starts a system service on :6379; the tests never use it.
command -v redis-server >/dev/null 2>&1 || {
    echo "redis.sh: redis-server still missing after install" >&2
    exit 1
}
echo "redis.sh: $(redis-server --version)"
