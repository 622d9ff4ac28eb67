#!/usr/bin/env bash
# The whole test suite: formatting, lints, every crate's tests, the end-to-end
# tests against the built binary (real Python SDK peers included), the Helm
# chart checks, and the instruction-count regression check. Installs what it needs first (idempotent, cached under
# tests/interop/.peers and target/tools).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tests/interop/setup.sh >/dev/null
[ -f scripts/redis.sh ] && bash scripts/redis.sh >/dev/null
bash scripts/haproxy.sh >/dev/null
bash scripts/chromium.sh >/dev/null
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
cargo build --workspace --quiet
./target/debug/junction validate --config gateway.yaml >/dev/null
for f in examples/*.yaml; do
  JUNCTION_STATE_KEY=ci-only-key-ci-only-key-ci-only-key CRM_TOKEN=x ./target/debug/junction validate --config "$f" >/dev/null
done
# One `cargo test` for the whole workspace (one feature resolution, so no
# dependency is built twice). The real-SDK test binaries (interop_matrix,
# python_sdk, node_sdk) are `test = false` in Cargo.toml: they run once, in
# tests/interop/run.sh below, which records their outcomes for RESULTS.md.
cargo test --workspace --no-fail-fast
bash scripts/chart-check.sh
# Real third-party peers and the official conformance suite, direct vs through
# Junction (baselines may only shrink); rewrites tests/interop/RESULTS.md.
bash tests/interop/run.sh
# Junction's own cost per request may not grow: instructions per proxied
# request under callgrind (release build), within 5 % of the committed
# baseline (benches/load/instr-baseline.json; UPDATE=1 to move it on purpose).
bash benches/load/instr-check.sh
# Short fuzz runs of every target (long runs: scripts/fuzz.sh 600).
cargo fuzz --version >/dev/null 2>&1 || cargo install cargo-fuzz --version 0.13.2 --locked --quiet
bash scripts/fuzz.sh "${FUZZ_SECONDS:-5}"
