#!/bin/sh
# Quick start, command 1: install what is missing, build, run the main job.
set -eu
cd "$(dirname "$0")"
scripts/deps.sh demo
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)"
exec scripts/demo.sh build
