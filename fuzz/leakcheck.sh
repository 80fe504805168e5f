#!/usr/bin/env bash
# LeakSanitizer on the buffer paths (issue 6): runs fuzz/leak_workload.py on the ASan+UBSan
# build (build/variants/asan; the in-place build is left alone) with detect_leaks=1, for
# FEW and MANY iterations. CPython leaves a constant set of allocations at exit, so the
# leaked bytes LSan reports must not grow with the iterations; a positive control (64 bytes
# malloc'ed and dropped per iteration) must be reported. Exit 1 on a leak.
#   fuzz/leakcheck.sh [MANY=1000] [--no-build|--in-place]   (~1-2 min on 2 vCPUs, most of it LSan at exit)
# --no-build reuses build/variants/asan when it exists; --in-place checks the checkout's own
# in-place build, which must be the sanitized one (CI's asan step: CRCMERKLE_SANITIZE=1
# build_ext --inplace), so that CI builds ASan once for both steps. Either way the check below
# refuses a build without the ASan runtime in it.
set -euo pipefail
many=${1:-1000}
root=$(cd "$(dirname "$0")/.." && pwd)
if [ "${2:-}" = "--in-place" ]; then
    out=$root
elif [ "${2:-}" = "--no-build" ] && [ -d "$root/build/variants/asan/merkle" ]; then
    out=$root/build/variants/asan
else
    out=$("$root/fuzz/variant.sh" asan)
fi
cd "$out"  # cwd first on sys.path: this build's merkle, not the editable install's
export LD_PRELOAD="$(gcc -print-file-name=libasan.so)"
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1:exitcode=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# fewer threads for LSan to stop at exit (its tracer has been seen to crash, see leaked())
export OPENBLAS_NUM_THREADS=1
# LSan's tracer reading the threads' TLS crashed on every try on this VM kind since
# 2026-11-27 (signal 11 at a small address, also on code that passed before; with
# use_tls=0 it finishes): TLS is not scanned as a root, in every run alike, so the
# allocations only a thread-local holds count as leaked in all of them: a constant, which
# the comparison of FEW and MANY iterations (and the control) does not see
export LSAN_OPTIONS=${LSAN_OPTIONS:-use_tls=0}
# both extensions must be the variant's: merkle._crc (the scalar API and the hash classes)
# and merkle._native (the bulk API), each with its own copy of the C core
ASAN_OPTIONS=detect_leaks=0 python -c "
import merkle._crc as c, merkle._native as n
for m in (c, n):
    assert m.__file__.startswith('$out/merkle/'), m.__file__
    with open(m.__file__, 'rb') as f:  # an optimised build would make the control pass
        assert b'__asan_init' in f.read(), m.__file__ + ': not built with ASan'"
leaked() {  # bytes LSan reports at exit (0 if none)
    local log n try
    # LSan's leak scan stops the world with a tracer thread; when that fails it prints a
    # fatal error and exits with ASAN_OPTIONS' exitcode (0 here), reporting nothing: that is
    # "could not check", not "no leak", so it is retried and never read as 0
    for try in 1 2 3 4 5; do
        log=$(python -m fuzz.leak_workload "$@" 2>&1) || { echo "$log" >&2; return 1; }
        if printf '%s\n' "$log" | grep -q 'LeakSanitizer has encountered a fatal error'; then
            echo "leakcheck: LSan could not finish its scan (try $try of 5):" \
                 "$(printf '%s\n' "$log" | grep -m1 -i 'tracer\|fatal')" >&2
            continue
        fi
        n=$(printf '%s\n' "$log" | sed -n 's/.*SUMMARY: AddressSanitizer: \([0-9]*\) byte(s) leaked.*/\1/p')
        echo "${n:-0}"
        return 0
    done
    echo "leakcheck: LSan failed five times in a row" >&2
    return 1
}
# The three runs are independent processes (each one's LSan counts only its own heap), most
# of each one's time is LSan's single-threaded scan at exit: side by side, not one after the
# other (on 2 cores about 2 minutes -> 1).
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
leaked 10 >"$tmp/few" & p_few=$!
leaked "$many" >"$tmp/lots" & p_lots=$!
leaked "$many" --c-leak >"$tmp/control" & p_control=$!
st=0
for p in "$p_few" "$p_lots" "$p_control"; do wait "$p" || st=1; done
[ "$st" = 0 ] || exit 1
few=$(cat "$tmp/few") lots=$(cat "$tmp/lots") control=$(cat "$tmp/control")
# the positive control must be seen; a run in which LSan reported nothing at all is tried
# again (twice) before the check is declared inactive
for try in 2 3; do
    [ "$control" -lt $((lots + 64 * many / 2)) ] || break
    echo "leakcheck: control run $((try - 1)) reported $control bytes (expected >= lots + 32 B/iteration)" >&2
    control=$(leaked "$many" --c-leak)
done
echo "leakcheck: LSan leaked bytes at exit: 10 iterations $few, $many iterations $lots," \
     "control (+64 B/iteration) $control"
if [ "$control" -lt $((lots + 64 * many / 2)) ]; then
    echo "leakcheck: the positive control was not reported: LSan is not active" >&2; exit 1
fi
if [ "$lots" -gt $((few + 4096)) ]; then
    echo "leakcheck: leaked bytes grow with the iterations: a leak on a buffer path" >&2
    echo "  rerun: cd $out && LD_PRELOAD=$LD_PRELOAD ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=$LSAN_OPTIONS python -m fuzz.leak_workload $many" >&2
    exit 1
fi
echo "leakcheck: no leak"
