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
# KERNELGYM_REQUIRE_TRAINERS: the trainer smoke tests (test_trainers.py) fail, not skip, without TRL.
# pytest-xdist, one worker more than there are cores: most of these tests wait on a server and its
# runners (measured on 2 cores: 137 s serial, 73 s with 3 workers, 79 s with 2, 91 s with 4).
KERNELGYM_REQUIRE_TRAINERS=1 KERNELGYM_BIN="$(cd "$BUILD_DIR" && pwd)/cli/kernelgym" "$VENV/bin/python" -m pytest python/tests -q \
  -n "$(( $(nproc) + 1 ))"

# Fuzzing (tests/fuzz/): the protocol decoders, the action and reply parsers and the task loader,
# built with clang, libFuzzer, ASan and UBSan into their own folder, each fuzzed for a few seconds
# (KERNELGYM_FUZZ_SECONDS at configure time) from its checked-in seeds. Any crash, leak, UB or
# broken property fails the suite.
FUZZ_DIR=${KERNELGYM_FUZZ_BUILD_DIR:-build-fuzz}
if [[ ! -f "$FUZZ_DIR/build.ninja" ]]; then
  CC=clang CXX=clang++ cmake -S . -B "$FUZZ_DIR" -G Ninja -DKERNELGYM_BUILD_FUZZERS=ON
fi
cmake --build "$FUZZ_DIR" -j "$(nproc)"
ctest --test-dir "$FUZZ_DIR" --output-on-failure -j "$(nproc)" -L fuzz
