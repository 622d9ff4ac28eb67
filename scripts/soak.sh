#!/usr/bin/env bash
# Bounded soak by hand: mixed load (lists, calls, MRTR retries, SSE streams opened
# and dropped, a legacy session, a stdio upstream) against four upstreams while
# one restarts every 3 s and the config reloads every 5 s. Prints request counts,
# RSS and descriptor figures, and fails on any unexplained error or growth.
#   scripts/soak.sh [SECONDS]   (default 600; CI runs the same test for 20 s)
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-600}"
JUNCTION_SOAK_SECS="$secs" cargo test --release --test soak -- --nocapture 2>&1 |
  grep -E '^soak:|test result|panicked|assert'
