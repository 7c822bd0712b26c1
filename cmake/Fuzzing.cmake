# KERNELGYM_BUILD_FUZZERS: a build of the libFuzzer targets (tests/fuzz/) and nothing else, in its
# own build folder, configured with clang:
#   CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DKERNELGYM_BUILD_FUZZERS=ON
# Everything compiled here carries ASan + UBSan (UB aborts, so the fuzzer reports it as a crash)
# and libFuzzer's coverage instrumentation; the modules' targets are excluded from `all`, so only
# the libraries the fuzz targets link are built. The GoogleTest suites and the benchmarks are off.
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "KERNELGYM_BUILD_FUZZERS needs clang (libFuzzer): configure a separate build folder "
                      "with CC=clang CXX=clang++ (found ${CMAKE_CXX_COMPILER_ID})")
endif()
set(KERNELGYM_BUILD_TESTS OFF)
set(KERNELGYM_BUILD_BENCH OFF)
# -O1 is what libFuzzer recommends; -O0 compiles in about half the time and fuzzes slower. Line
# tables only: file:line in reports, less to compile. Never NDEBUG: asserts are checks too.
set(KERNELGYM_FUZZ_OPT -O1 CACHE STRING "Optimization level of the fuzz build (-O1, or -O0 to compile faster)")
set(CMAKE_BUILD_TYPE RelWithDebInfo)
set(CMAKE_CXX_FLAGS_RELWITHDEBINFO "${KERNELGYM_FUZZ_OPT} -gline-tables-only")
set(CMAKE_C_FLAGS_RELWITHDEBINFO "${KERNELGYM_FUZZ_OPT} -gline-tables-only")
set(KERNELGYM_SANITIZERS -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
add_compile_options(${KERNELGYM_SANITIZERS} -fsanitize=fuzzer-no-link)
add_link_options(${KERNELGYM_SANITIZERS})
