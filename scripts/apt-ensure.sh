#!/usr/bin/env bash
# apt-ensure.sh COMMAND PACKAGE: makes sure COMMAND is on PATH, installing
# Debian's PACKAGE when it is not (from the current package lists, refreshed
# once if that fails: a fresh machine has none). Idempotent; what the test
# command and .ci/run install this way: redis-server, haproxy, chromium.
set -euo pipefail
cmd="$1" pkg="$2"

if command -v "$cmd" >/dev/null 2>&1; then
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "apt-ensure.sh: $cmd is missing and apt-get is not available; install $pkg by hand" >&2
    exit 1
fi

SUDO=""
if [ "$(id -u)" != 0 ]; then
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
if ! $SUDO apt-get install -y -q --no-install-recommends "$pkg" >/dev/null 2>&1; then
    $SUDO apt-get update -q >/dev/null
    $SUDO apt-get install -y -q --no-install-recommends "$pkg" >/dev/null
fi

command -v "$cmd" >/dev/null 2>&1 || {
    echo "apt-ensure.sh: $cmd still missing after installing $pkg" >&2
    exit 1
}
