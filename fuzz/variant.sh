#!/usr/bin/env bash
# Build both extensions (merkle._crc and merkle._native: setup.py builds every one) with build
# switches into build/variants/NAME, leaving the in-place build (merkle/*.so, which the rest
# of the checkout imports) untouched:
#   fuzz/variant.sh asan       # CRCMERKLE_SANITIZE=1 (ASan + UBSan)
#   fuzz/variant.sh coverage   # CRCMERKLE_COVERAGE=1 (gcov; .gcda land in build/variants/coverage/tmp)
# The variant is a directory holding `merkle/` (symlinks to the sources + the variant .so).
# Run Python from inside it (cwd first on sys.path beats the editable install's finder):
#   cd build/variants/asan && LD_PRELOAD=$(gcc -print-file-name=libasan.so) python -m fuzz ...
# (`fuzz` and `tests` are symlinked in too). Prints the variant directory.
set -euo pipefail
name=${1:?usage: fuzz/variant.sh asan|coverage}
root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/build/variants/$name
case $name in
    asan) export CRCMERKLE_SANITIZE=1 ;;
    coverage) export CRCMERKLE_COVERAGE=1 CRCMERKLE_DEBUG=${CRCMERKLE_DEBUG:-0} ;;
    *) echo "unknown variant $name (asan|coverage)" >&2; exit 2 ;;
esac
mkdir -p "$out/merkle"
for f in "$root"/merkle/*.py "$root"/merkle/py.typed; do ln -sfn "$f" "$out/merkle/"; done
ln -sfn "$root/fuzz" "$out/fuzz"
ln -sfn "$root/tests" "$out/tests"
(cd "$root" && python setup.py -q build_ext --build-lib "$out" --build-temp "$out/tmp" --force \
    >"$out/build.log" 2>&1) || { cat "$out/build.log" >&2; exit 1; }
# a fresh build starts a fresh coverage count
find "$out/tmp" -name '*.gcda' -delete 2>/dev/null || true
echo "$out"
