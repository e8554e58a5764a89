#!/usr/bin/env bash
# Installs what the test suite needs on a fresh Debian 12 machine (run as root).
# - libamdhip64-5 / libamdhip64-dev: the real ROCm 5.2 HIP runtime and headers,
#   used for the bindings' regeneration check and the real-runtime smoke test.
# - bindgen, libclang-dev, clang: regenerate hip-sys' generated bindings.
set -euo pipefail
pkgs=(libamdhip64-5 libamdhip64-dev bindgen libclang-dev clang binutils)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y --no-install-recommends "${missing[@]}"
fi
