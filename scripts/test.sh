#!/usr/bin/env bash
# The whole test suite: formatting, lints, every crate's tests and the end-to-end
# tests against the built binary (which need tests/interop/setup.sh's venvs).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tests/interop/setup.sh >/dev/null
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
cargo build --workspace --quiet
for f in gateway.yaml; do
  case "$f" in *invalid*|*bad*) continue ;; esac
  [ -f "$f" ] && ./target/debug/junction validate --config "$f" >/dev/null
done
cargo test --workspace --no-fail-fast
