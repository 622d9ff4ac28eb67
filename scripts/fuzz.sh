#!/usr/bin/env bash
# Run every cargo-fuzz target for N seconds each (default 10).
#   scripts/fuzz.sh            # all targets, 10 s each (CI)
#   scripts/fuzz.sh 600        # long run by hand
#   scripts/fuzz.sh 60 seal_open
# Needs cargo-fuzz (`cargo install cargo-fuzz`) and a C++ compiler for
# libFuzzer. Only stable Rust is installed here, so RUSTC_BOOTSTRAP=1 lets it
# use the nightly-only sanitizer flags cargo-fuzz passes. A crash leaves its
# input in fuzz/artifacts/<target>/; turn it into a regression test.
set -euo pipefail
cd "$(dirname "$0")/.."

secs="${1:-10}"
shift || true
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz.sh: cargo-fuzz is missing: cargo install cargo-fuzz" >&2
    exit 2
fi
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets < <(cargo fuzz list)
fi

export RUSTC_BOOTSTRAP=1
cargo fuzz build
mkdir -p fuzz/artifacts
for t in "${targets[@]}"; do
    echo "== fuzz $t for ${secs}s"
    mkdir -p "fuzz/corpus/$t"
    log="fuzz/artifacts/$t.log"
    # -rss_limit_mb bounds memory; a leak or blow-up fails the run too.
    if ! cargo fuzz run "$t" "fuzz/corpus/$t" -- \
        -max_total_time="$secs" -rss_limit_mb=2048 -print_final_stats=1 >"$log" 2>&1; then
        tail -n 40 "$log" >&2
        echo "fuzz.sh: $t FAILED; crashing input in fuzz/artifacts/$t/, log in $log" >&2
        exit 1
    fi
    grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss_mb)' "$log" || true
done
echo "fuzz.sh: ${#targets[@]} targets ran ${secs}s each, no crash"
