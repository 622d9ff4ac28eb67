#!/usr/bin/env bash
# Interop runner (called by .ci/run): installs the pinned peers (setup.sh), builds
# the gateway, runs the conformance comparison (conformance/run_conformance.py,
# which also shrinks the expected-failure baselines) and the real-SDK end-to-end
# tests (tests/interop_matrix.rs, tests/python_sdk.rs, tests/node_sdk.rs), then
# writes tests/interop/RESULTS.md from what this run saw (results.py) and prints
#   interop: N passed, M failed
# Exit status is non-zero when anything failed. Everything binds 127.0.0.1.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cd "$repo"
target="${CARGO_TARGET_DIR:-$repo/target}"
results="$target/interop-results"
rm -rf "$results"
mkdir -p "$results"

echo "== interop: peers"
bash "$here/setup.sh" || { echo "interop: 0 passed, 1 failed"; exit 1; }

echo "== interop: build"
cargo build --workspace --quiet || { echo "interop: 0 passed, 1 failed"; exit 1; }

echo "== interop: conformance (direct vs through Junction)"
python3 "$here/conformance/run_conformance.py" --junction "$target/debug/junction" \
  --results "$results"
conformance_rc=$?

echo "== interop: real SDKs through Junction"
JUNCTION_INTEROP_RESULTS="$results" cargo test --workspace --test interop_matrix --test python_sdk --test node_sdk \
  -- --test-threads=2 2>&1 | tee "$results/cargo-test.log"
tests_rc=${PIPESTATUS[0]}

python3 "$here/results.py" "$results"
read -r passed failed < "$results/summary" || { passed=0; failed=1; }
if [[ $conformance_rc -ne 0 || $tests_rc -ne 0 ]] && [[ $failed -eq 0 ]]; then
  failed=1
fi
echo "interop: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
