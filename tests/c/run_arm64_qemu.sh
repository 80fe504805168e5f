#!/bin/sh
# run_arm64_qemu.sh - cross-compiles the aarch64 kernels with their test and runs them under
# qemu-user, so the ARM code is checked on an x86-64 machine.
#
# Installs gcc-aarch64-linux-gnu, libc6-dev-arm64-cross and qemu-user with apt when they are
# missing and this runs as root. Environment: CC_AARCH64 (default aarch64-linux-gnu-gcc),
# QEMU_AARCH64 (default qemu-aarch64), QEMU_CPU (default max).
set -eu

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CC=${CC_AARCH64:-aarch64-linux-gnu-gcc}
QEMU=${QEMU_AARCH64:-qemu-aarch64}
QEMU_CPU=${QEMU_CPU:-max}

if ! command -v "$CC" >/dev/null 2>&1 || ! command -v "$QEMU" >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "installing the aarch64 cross toolchain and qemu-user with apt-get"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq >/dev/null
        apt-get install -y -qq gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user >/dev/null
    else
        echo "need $CC and $QEMU (apt: gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user)" >&2
        exit 2
    fi
fi

OUT=$(mktemp -d "${TMPDIR:-/tmp}/crcm-arm64.XXXXXX")
trap 'rm -rf "$OUT"' EXIT INT TERM

COMMON="-std=c11 -O2 -g -Wall -Wextra -Wno-unused-function -DCRCM_HAVE_ARM64=1 -I$ROOT/csrc"

# UBSan if the cross toolchain can link it statically; otherwise build without it.
SAN=""
printf 'int main(void) { return 0; }\n' > "$OUT/probe.c"
if "$CC" -static -fsanitize=undefined -fno-sanitize-recover=undefined "$OUT/probe.c" \
        -o "$OUT/probe" >/dev/null 2>&1; then
    SAN="-fsanitize=undefined -fno-sanitize-recover=undefined"
else
    echo "note: $CC cannot link -fsanitize=undefined statically; building without it"
fi

# Only crc_arm64.c gets the +crc+crypto flags; cpu_arm64.c and the test are plain armv8-a.
"$CC" $COMMON $SAN -march=armv8-a+crc+crypto -c "$ROOT/csrc/crc_arm64.c" -o "$OUT/crc_arm64.o"
"$CC" $COMMON $SAN -c "$ROOT/csrc/cpu_arm64.c" -o "$OUT/cpu_arm64.o"
"$CC" $COMMON $SAN -c "$ROOT/tests/c/test_arm64_kernels.c" -o "$OUT/test.o"
"$CC" -static $SAN "$OUT/test.o" "$OUT/crc_arm64.o" "$OUT/cpu_arm64.o" -o "$OUT/test_arm64_kernels"

echo "running under $QEMU -cpu $QEMU_CPU${SAN:+ (UBSan)}"
"$QEMU" -cpu "$QEMU_CPU" "$OUT/test_arm64_kernels"
