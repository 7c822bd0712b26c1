#!/usr/bin/env bash
# Installs missing dependencies, then configures and builds kernelgym into build/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
BUILD_DIR=${KERNELGYM_BUILD_DIR:-build}
if [[ ! -f "$BUILD_DIR/build.ninja" ]]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release
fi
cmake --build "$BUILD_DIR" -j "$(nproc)"
# The pallas backend's jax + libtpu (the worker's interpreter; the C++ build does not need it).
scripts/pallas_venv.sh >/dev/null
