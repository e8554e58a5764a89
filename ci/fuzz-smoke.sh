#!/usr/bin/env bash
# Fuzz smoke test: builds every cargo-fuzz target in fuzz/ and runs each one briefly.
# Exits non-zero if a target fails to build or any run finds a crash (the crashing input
# is left in fuzz/artifacts/<target>/ by libFuzzer).
#
#   ci/fuzz-smoke.sh                 # 20 s per target
#   FUZZ_SECONDS=300 ci/fuzz-smoke.sh
#
# cargo-fuzz passes nightly-only flags (-Zsanitizer=address, -Cpasses=sancov-module);
# only a stable toolchain is installed, so RUSTC_BOOTSTRAP=1 lets stable rustc take them.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${FUZZ_SECONDS:-20}"
export RUSTC_BOOTSTRAP=1

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi

mapfile -t targets < <(cargo fuzz list)
if [ "${#targets[@]}" -eq 0 ]; then
    echo "fuzz-smoke: no targets in fuzz/" >&2
    exit 1
fi

echo "fuzz-smoke: building ${targets[*]}"
cargo fuzz build

failed=()
for target in "${targets[@]}"; do
    echo "fuzz-smoke: $target for ${seconds}s"
    # -max_total_time bounds the run; a crash or leak makes libFuzzer exit non-zero.
    if ! cargo fuzz run "$target" -- -max_total_time="$seconds" -print_final_stats=1; then
        failed+=("$target")
    fi
done

if [ "${#failed[@]}" -gt 0 ]; then
    echo "fuzz-smoke: FAILED: ${failed[*]} (inputs in fuzz/artifacts/)" >&2
    exit 1
fi
echo "fuzz-smoke: ${#targets[@]} targets ran ${seconds}s each without a crash"
