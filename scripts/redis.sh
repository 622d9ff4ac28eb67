#!/usr/bin/env bash
# Makes sure `redis-server` is installed (the policy crate's Redis rate-limit
# tests start their own instance on 127.0.0.1 with a free port). Idempotent:
# does nothing when redis-server is already on PATH.
set -euo pipefail

if command -v redis-server >/dev/null 2>&1; then
    exit 0
fi
# The Debian package starts a system service on :6379; the tests never use it.
bash "$(dirname "$0")/apt-ensure.sh" redis-server redis-server
echo "redis.sh: $(redis-server --version)"
