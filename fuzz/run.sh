#!/usr/bin/env bash
# The long fuzz campaign (issue 6): every target for SECONDS each (default 600), with atheris
# (coverage-guided libFuzzer) when it is installed, else the built-in engine; the corpus
# grows in build/fuzz-corpus/TARGET across runs, failing inputs land in
# build/fuzz-crashes/TARGET. Prints executions and exec/s per target; exit 1 on a finding.
#   fuzz/run.sh [SECONDS=600] [TARGET...]     e.g. fuzz/run.sh 3600 kernels
# C line/branch coverage of the same targets: fuzz/coverage.sh SECONDS.
set -uo pipefail
secs=${1:-600}
shift || true
targets=${*:-kernels tree blockmeta diff}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
mkdir -p build/fuzz-logs
status=0
for t in $targets; do
    log=build/fuzz-logs/$t.log
    python -m fuzz "$t" --time "$secs" >"$log" 2>&1
    rc=$?
    summary=$(grep -E "^fuzz:|^Done|stat::number_of_executed_units|stat::average_exec_per_sec| DONE +cov:" "$log" | tr '\n' ' ')
    echo "$t: exit $rc: $summary"
    if [ $rc -ne 0 ]; then
        status=1
        grep -E "Error|error|Traceback|AssertionError|crash-|saved to" "$log" | head -20
    fi
done
exit $status
