# Shared by .ci/fast (the contributor's tier) and .ci/run (CI): the virtualenv and what is
# installed in it, the Java runtime for Spark, the pytest wrapper, and the test sets each step
# runs (one list each, so that a file moved between steps moves everywhere at once).
# Sourced, not run; the caller has done `cd` to the checkout's root and `set -euo pipefail`.

PY=${PYTHON:-python3}
VENV=${CRCMERKLE_VENV:-.venv}

step() { printf '\n==> %s\n' "$*"; }

# ----------------------------------------------------------------------------- test sets
# The fast tier's serial pass: tests that measure the machine or own a machine-wide resource,
# run alone after the parallel pass (a second xdist worker beside them would change what they
# measure, or hold what they need):
#   test_concurrency.py      two reconciler processes that must overlap in time (a start
#                            barrier 1.5 s ahead; on two busy cores one could miss it)
#   test_parser_limits.py    hostile counts must fail within 1 s (wall clock)
#   test_fuzz_short.py       time-boxed fuzzing: executions per second are the measure
# The simulated hosts' modules (a Spark master + 3 workers in mount namespaces at the fixed
# /srv/ozone/disk*, behind one machine-wide lock) are not here: tests/conftest.py makes them
# one unit of work that the xdist workers take first, so they never wait on each other's lock.
FAST_SERIAL=(tests/test_concurrency.py tests/test_parser_limits.py tests/test_fuzz_short.py)
# Out of the fast tier, in CI's `campaigns` step: the long process-level campaigns (their
# durations in the fast tier's report put it past its 10 minutes). Each module is marked
# `slow` (pytestmark), as are the single tests of 40 s or more elsewhere; the campaigns step
# runs `-m slow`, the fast tier `-m "not slow"` and ignores these files outright.
#   test_simhosts_jobs.py    the jobs on simulated hosts (~6 minutes of a standalone cluster;
#                            the harness itself stays in the fast tier: test_simhosts_smoke.py)
#   test_demo_hosts.py       `spark demo --hosts 3` end to end on simulated hosts (the longest
#                            single test of the suite: a cluster, a generated cluster, 4 jobs)
#   test_leaks.py            memory growth over thousands of calls, with its positive control
#   test_spark_ctrl_c.py     Ctrl-C at each stage of a Spark job's life, a JVM each
#   test_crash_kill.py       writers SIGKILLed at every step, then re-run
#   test_soak.py             the soak loop
#   test_resource_limits.py  runs under rlimits (file descriptors, memory), a process each
CAMPAIGNS=(tests/spark/test_simhosts_jobs.py tests/spark/test_simhosts_bookies.py
           tests/spark/test_demo_hosts.py tests/test_leaks.py
           tests/spark/test_spark_ctrl_c.py tests/test_crash_kill.py tests/test_soak.py
           tests/test_resource_limits.py)
# The PySpark 3.5 step: the tests that exercise Spark's API surface, chosen by what they touch
# (the rest of tests/spark checks crcmerkle's own logic through these same calls):
#   session start, conf, launcher     test_spark_session, test_spark_launcher,
#                                     test_spark_fresh_clone (spark-submit, status tracker)
#   UDF registration, pandas/Arrow    test_spark_udfs (every form, spark.udf.register,
#   UDFs, mapInArrow                  mapInArrow)
#   readers/writers, collection       test_spark_jobs (createDataFrame, parallelize +
#                                     accumulators, mapInArrow, Parquet out and in, Window,
#                                     toArrow / toPandas of 64-bit columns)
#   grouping by key, broadcasts       test_spark_bookkeeper (the bookie job: a repartition by
#                                     ledger with mapInArrow, since groupBy().applyInArrow is
#                                     PySpark 4's; unionByName with missing columns)
#   Spark's exceptions                test_spark_errors (class names and texts differ by version)
#   executors importing the driver's  test_spark_layout (a layout pickled by reference)
#   modules
#   locality and the JVM internals    test_spark_locality (makeRDD with preferred hosts,
#                                     statusStore, listenerBus), test_spark_hostscan
#                                     (inheritable_thread_target), test_simhosts_smoke (real
#                                     executors on 3 hosts; last: it stops the local session)
SPARK_API_TESTS=(tests/spark/test_spark_session.py tests/spark/test_spark_launcher.py
                 tests/spark/test_spark_fresh_clone.py tests/spark/test_spark_udfs.py
                 tests/spark/test_spark_jobs.py tests/spark/test_spark_bookkeeper.py
                 tests/spark/test_spark_errors.py tests/spark/test_spark_layout.py
                 tests/spark/test_spark_locality.py tests/spark/test_spark_hostscan.py
                 tests/spark/test_simhosts_smoke.py)
# The ASan + UBSan step: the tests whose subject is native code (csrc/, merkle/*.pyx): the
# kernels and backends, buffers and bulk entry points, combine/fold, the tree columns and
# their proto2 codec and diff (csrc/ozone_tree.c), BookKeeper entries (csrc/bookkeeper.c), the
# Cython API's integer and buffer rules, threads on released-GIL kernels, module state across sub-interpreters, the short fuzz
# campaign over every target, and the buffer-release check. The rest of the suite reaches
# the same entry points with ordinary, valid inputs.
NATIVE_TESTS=(tests/test_core_api_ints.py tests/test_core_backend.py tests/test_core_buffers.py
              tests/test_core_bulk.py tests/test_core_combine.py tests/test_core_crc64.py
              tests/test_core_hash.py tests/test_core_kernels.py tests/test_fold_fixed.py
              tests/test_subinterpreters.py tests/test_concurrency.py tests/test_leaks.py
              tests/test_tree.py tests/test_treefile.py tests/test_diff.py tests/test_merge.py
              tests/test_compose.py tests/test_compose_golden.py tests/test_ozone_golden.py
              tests/test_ozone_values.py tests/test_parser_limits.py
              tests/test_copycheck_core.py tests/test_core_bookkeeper.py
              tests/test_fuzz_short.py)
# The wheel step's smoke set, run on every CPython's installed wheel: the wheel is what gets
# imported, its kernels against the reference, CRC-64/NVME, sub-interpreters, the API, trees
# and the command line's exit codes.
WHEEL_SMOKE=(tests/test_installed.py tests/test_core_api_ints.py tests/test_core_kernels.py
             tests/test_core_hash.py tests/test_core_crc64.py tests/test_subinterpreters.py
             tests/test_tree.py tests/test_exit_codes.py)
# The whole wheel suite (one CPython, two xdist workers): the suite minus the Spark jobs and
# the process-level campaigns, which test no packaging, and minus the wall-clock tests
# (FAST_SERIAL's: they run alone in the fast tier and under ASan; beside a second worker and a
# wheel build they would measure the load).
WHEEL_SUITE_IGNORES=(--ignore=tests/spark --ignore=tests/test_crash_kill.py
    --ignore=tests/test_soak.py --ignore=tests/test_fuzz_short.py
    --ignore=tests/test_resource_limits.py --ignore=tests/test_leaks.py
    --ignore=tests/test_concurrency.py --ignore=tests/test_parser_limits.py)

split_serial() {  # split_serial FILE...: PARALLEL and SERIAL, the files not in / in FAST_SERIAL
    local f
    PARALLEL=() SERIAL=()
    for f in "$@"; do
        if [[ " ${FAST_SERIAL[*]} " == *" $f "* ]]; then SERIAL+=("$f"); else PARALLEL+=("$f"); fi
    done
}

ignore_args() {  # ignore_args FILE...: --ignore=FILE for each
    local f
    for f in "$@"; do printf -- '--ignore=%s\n' "$f"; done
}

# pytest that must run tests: exit status 5 (nothing collected: a renamed file, a wrong -m or
# -k) is a failure with its own line, not a quiet pass. Two guards against a run that never
# ends (seen: an ASan abort in an xdist worker left the asan step with idle workers for 25
# minutes, pytest-xdist's loadfile scheduler re-queuing the crashed worker's work unit to a
# replacement that never got it, pytest-xdist issues 784 and 1378):
#   --max-worker-restart=0 under -n: a crashed worker ends the run, failed, instead of being
#                          replaced (a crash is a finding of its own; the test it was running
#                          is reported as failed with the worker's exit status);
#   timeout                each run is killed after CRCMERKLE_CI_PYTEST_TIMEOUT seconds (default
#                          2700: 45 minutes, about 3x the longest step on a busy machine) and
#                          the step fails with its own line.
pytest_expect() {  # pytest_expect PYTHON PYTEST-ARGS...
    local py=$1 st=0 limit=${CRCMERKLE_CI_PYTEST_TIMEOUT:-2700} a guard=()
    shift
    for a in "$@"; do [ "$a" != -n ] || guard=(--max-worker-restart=0); done
    timeout -k 30 "$limit" "$py" -m pytest "${guard[@]}" "$@" || st=$?
    if [ "$st" = 5 ]; then
        echo "FAILED: pytest collected no tests (exit 5) where tests were expected: $*" >&2
    elif [ "$st" = 124 ] || [ "$st" = 137 ]; then
        echo "FAILED: pytest did not end within ${limit} s and was killed (a hang?): $*" >&2
    fi
    return "$st"
}

# ----------------------------------------------------------------------------- install
ci_java() {
step "Java runtime for Spark"
if ! command -v java >/dev/null 2>&1 && [ -z "${JAVA_HOME:-}" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq >/dev/null
        apt-get install -y -qq openjdk-17-jre-headless >/dev/null
    else
        echo "need a Java 17+ runtime for the Spark tests (apt: openjdk-17-jre-headless)" >&2
        exit 2
    fi
fi
java -version 2>&1 | head -1
}

ci_zookeeper() {
step "ZooKeeper for the BookKeeper metadata tests (Debian's zookeeper package)"
# tests/zookeeper_server.py runs the package's jars standalone on 127.0.0.1 in a private
# directory; the package starts no service. Under CI=true its tests fail when it is missing.
if [ ! -f /usr/share/java/zookeeper.jar ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq >/dev/null
        apt-get install -y -qq zookeeper >/dev/null
    else
        echo "need Debian's zookeeper package for the BookKeeper metadata tests" \
             "(apt-get install zookeeper); they skip without it" >&2
        return 0
    fi
fi
echo "zookeeper: $(dpkg-query -W -f='${Version}' zookeeper 2>/dev/null || echo present)"
}

ci_install() {
step "virtualenv in $VENV"
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
. "$VENV/bin/activate"
python -m pip install -q --upgrade pip

step "install crcmerkle with test dependencies (builds the native extension)"
# Build requirements live in the venv too: the sanitizer step rebuilds the extension in place.
python -m pip install -q "setuptools>=64" wheel "Cython>=3.0" "numpy>=2.0" build auditwheel
# dev: ruff, mypy and pre-commit, which tests/test_precommit.py runs over the tree
python -m pip install -q --no-build-isolation -e ".[test,plot,ozone,dev]"
# The checkout's own bytecode, written once: where PYTHONDONTWRITEBYTECODE is set (this
# sandbox's environment sets it) no import writes it, so every process the suite starts (an
# xdist worker, a CLI subprocess, a Spark Python worker) compiled merkle/ and spark_udfs/
# from source again, about 0.2 s of CPU each. Python still checks each .pyc against its
# source, so an edited module is compiled afresh.
python -m compileall -q -j 0 merkle spark_udfs crcmerkle_cli.py >/dev/null
# atheris (coverage-guided fuzzing) only as a binary wheel: building it needs clang and
# libFuzzer; without it tests/test_fuzz_short.py still runs the built-in engine
python -m pip install -q --only-binary=:all: "atheris>=2.3" \
    || echo "atheris: no wheel for this Python/platform; the atheris engine test will skip"
python -c "import merkle; print('backend:', merkle.backend(), '| available:', merkle.available_backends())"
}
