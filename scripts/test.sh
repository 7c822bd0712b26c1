#!/usr/bin/env bash
# The whole test suite: set everything up, build, run every test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
BUILD_DIR=${KERNELGYM_BUILD_DIR:-build}
# One job per core: tests that compare timings are RUN_SERIAL (tests/integration/CMakeLists.txt).
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$(nproc)" "$@"

# The Python package (python/), tested against the server binary just built.
VENV=$(scripts/python_venv.sh)
KERNELGYM_BIN="$(cd "$BUILD_DIR" && pwd)/env/kernelgym" "$VENV/bin/python" -m pytest python/tests -q
