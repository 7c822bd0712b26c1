#!/usr/bin/env bash
# One bounded fuzz run (the ctest tests fuzz_<name>, tests/fuzz/CMakeLists.txt): the seed corpus,
# then SECONDS of fuzzing. New inputs go to a scratch folder emptied first, so every run starts
# from the checked-in seeds and takes the same bounded time; a failing input is saved as
# <artifacts>crash-<sha1> (or leak-, timeout-, oom-). Any crash, leak, UB or broken property exits
# non-zero.
#   run_fuzzer.sh FUZZER SEEDS SCRATCH ARTIFACT_PREFIX SECONDS
set -euo pipefail
fuzzer=$1 seeds=$2 scratch=$3 artifacts=$4 seconds=$5
rm -rf "$scratch"
mkdir -p "$scratch"
# -timeout: no input may take 10 s; -rss_limit_mb: a decoder that allocates without bound fails.
exec "$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$artifacts" "$scratch" "$seeds"
