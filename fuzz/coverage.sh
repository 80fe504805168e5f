#!/usr/bin/env bash
# C coverage reached by the fuzz targets (gcov): builds the CRCMERKLE_COVERAGE=1 variant in
# build/variants/coverage (the in-place build is left alone), runs every target for SECONDS
# each, then prints gcov's line and branch coverage per file of csrc/.
#   fuzz/coverage.sh [SECONDS=60] [ENGINE=auto]
set -euo pipefail
secs=${1:-60}
engine=${2:-auto}
root=$(cd "$(dirname "$0")/.." && pwd)
out=$("$root/fuzz/variant.sh" coverage)
cd "$out"
python -c "import merkle._native as n, sys; assert n.__file__.startswith('$out'), n.__file__"
for t in kernels tree blockmeta diff; do
    python -m fuzz "$t" --engine "$engine" --time "$secs" 2>&1 \
        | grep -E "^fuzz:|^Done|stat::number_of_executed_units|stat::average_exec|DONE" || true
done
cd "$out/tmp"
echo "== gcov (csrc/, this CPU's kernels; arm64 files are not built here)"
for src in "$root"/csrc/*.c; do
    obj="$out/tmp/csrc/$(basename "${src%.c}").o"
    [ -f "$obj" ] || continue
    gcov -n -b -o "$out/tmp/csrc" "$src" 2>/dev/null \
        | awk -v f="$(basename "$src")" '/^File/ {keep = index($0, f) > 0} keep && /^(Lines|Branches|Taken)/ {printf "%-16s %s\n", f, $0}'
done | awk '!seen[$0]++'
# Not reached by design: read_probe.c (benchmark probe), crcm_xnmodp and the C-API wrappers
# crcm_crc32/crcm_*_combine/crcm_compiled_backends (no Python caller).
