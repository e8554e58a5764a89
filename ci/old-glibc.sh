#!/usr/bin/env bash
# Proves the hook on an older glibc: Debian bullseye (glibc 2.31), whose loader audits and binds
# differently from 2.35+: PLT, `-z now`, LD_BIND_NOW=1, `-fno-plt` and address-taken programs
# must all be held to the limit by the redirected definitions (libamvgpu/src/redirect.rs).
#
#   ci/old-glibc.sh [root-dir]     (run as root; default root: target/old-glibc/bullseye)
#
# 1. installs debootstrap if missing;
# 2. debootstraps a minimal bullseye with gcc and libc6-dev into the root, once (a root that
#    already answers `ldd --version` with 2.31 is reused; ~2 min and ~350 MB the first time);
# 3. runs `cargo test -p libamvgpu --test compat old_glibc_root` with AMVGPU_OLD_GLIBC_ROOT set:
#    the test copies libamvgpu.so into the root, compiles the fixtures and a stand-in runtime
#    INSIDE the root with its own gcc (so they need nothing newer than glibc 2.31), and runs
#    them under the root's own loader with `chroot`.
# The simulator (hipsim) cannot be used there: it imports GLIBC_2.33/2.34 symbols.
set -euo pipefail

cd "$(dirname "$0")/.."
root="${1:-target/old-glibc/bullseye}"
mirror="${OLD_GLIBC_MIRROR:-http://deb.debian.org/debian}"

if [ "$(id -u)" -ne 0 ]; then
    echo "old-glibc.sh: needs root (debootstrap and chroot)" >&2
    exit 1
fi

if ! command -v debootstrap >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y --no-install-recommends debootstrap
fi

version="$(chroot "$root" ldd --version 2>/dev/null || true)"
if [[ "${version%%$'\n'*}" == *" 2.31" ]]; then
    echo "old-glibc.sh: reusing $root"
else
    partial="$root.partial"
    rm -rf "$partial"
    mkdir -p "$(dirname "$root")"
    start=$(date +%s)
    debootstrap --variant=minbase --include=gcc,libc6-dev bullseye "$partial" "$mirror"
    rm -rf "$root"
    mv "$partial" "$root"
    echo "old-glibc.sh: debootstrap took $(( $(date +%s) - start )) s"
fi

# The debug build (what the tests use) and the release build (LTO, what operators deploy).
for profile in dev release; do
    AMVGPU_OLD_GLIBC_ROOT="$(cd "$root" && pwd)" \
        cargo test --profile "$profile" -p libamvgpu --test compat old_glibc_root -- --nocapture
done
