#!/usr/bin/env bash
# The main job: set everything up, then evaluate a bundled example kernel on a bundled task.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
BUILD_DIR=${KERNELGYM_BUILD_DIR:-build}
exec "$BUILD_DIR/env/kernelgym" eval --task cpu/softmax_rows --source tests/honest/softmax_rows_avx2/kernel.cpp "$@"
