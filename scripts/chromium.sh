#!/usr/bin/env bash
# Makes sure Debian's `chromium` is installed (the status page's screenshot
# test, tests/status/browser.rs, runs it headless against a gateway on
# 127.0.0.1). Idempotent: does nothing when chromium is already on PATH.
set -euo pipefail
exec bash "$(dirname "$0")/apt-ensure.sh" chromium chromium
