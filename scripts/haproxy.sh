#!/usr/bin/env bash
# Makes sure `haproxy` is installed (tests/fleet.rs puts Debian's HAProxy, in
# plain round-robin HTTP mode, in front of three Junction replicas; it writes
# its own config to a temp dir and binds 127.0.0.1 on a free port). Idempotent:
# does nothing when haproxy is already on PATH.
set -euo pipefail

if command -v haproxy >/dev/null 2>&1; then
    exit 0
fi
# The Debian package may start a system service with its default config; the
# tests never use it.
bash "$(dirname "$0")/apt-ensure.sh" haproxy haproxy
echo "haproxy.sh: $(haproxy -v | head -1)"
