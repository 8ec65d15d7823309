#!/bin/sh
# Quick start, command 2: install what is missing, build, run every test.
#   ./run-tests.sh [ctest arguments...]     e.g. ./run-tests.sh -R wire
# Environment: BUILD_DIR (default build), CMAKE_ARGS (extra configure arguments).
set -eu
cd "$(dirname "$0")"
scripts/deps.sh test
dir=${BUILD_DIR:-build}
# shellcheck disable=SC2086
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo ${CMAKE_ARGS:-} >/dev/null
cmake --build "$dir" -j"$(nproc)"
exec ctest --test-dir "$dir" --output-on-failure "$@"
