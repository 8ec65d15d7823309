#!/bin/sh
# Quick start, command 2: install what is missing, build, run every test.
#   ./run-tests.sh [ctest arguments...]     e.g. ./run-tests.sh -R wire
# Environment: BUILD_DIR (default build), CMAKE_ARGS (extra configure arguments),
#   UROCE_ALLOW_SKIP=1 to accept skipped tests (a knowingly partial run),
#   CTEST_PARALLEL_LEVEL (default: the number of CPUs; 1 runs the tests one at a time).
#
# A skipped test (exit 77: namespaces this machine refuses, say) makes the run fail:
# "100% tests passed" over a run that quietly left most tests out is not a pass.
set -eu
cd "$(dirname "$0")"
scripts/deps.sh test
scripts/check-tools.py
dir=${BUILD_DIR:-build}
# shellcheck disable=SC2086
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo ${CMAKE_ARGS:-} >/dev/null
cmake --build "$dir" -j"$(nproc)"
# Tests run side by side, one per CPU: each has its own namespaces, daemons and ports.
CTEST_PARALLEL_LEVEL=${CTEST_PARALLEL_LEVEL:-$(nproc)}
export CTEST_PARALLEL_LEVEL
junit=$(pwd)/$dir/ctest-junit.xml
rm -f "$junit"
rc=0
ctest --test-dir "$dir" --output-on-failure --output-junit "$junit" "$@" || rc=$?
[ $rc -eq 0 ] || exit $rc
exec scripts/skipped-tests.py "$junit"
