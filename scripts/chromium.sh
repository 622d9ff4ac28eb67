#!/usr/bin/env bash
# Makes sure Debian's `chromium` is installed (the status page's screenshot
# test, tests/status/browser.rs, runs it headless against a gateway on
# 127.0.0.1). Idempotent: does nothing when chromium is already on PATH.
set -euo pipefail

if command -v chromium >/dev/null 2>&1; then
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "chromium.sh: chromium is missing and apt-get is not available; install it by hand" >&2
    exit 1
fi

SUDO=""
if [ "$(id -u)" != 0 ]; then
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
# From the current package lists; refreshed once if that fails (a fresh
# machine has none).
$SUDO apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1 || {
    $SUDO apt-get update -q >/dev/null
    $SUDO apt-get install -y -q --no-install-recommends chromium >/dev/null
}
