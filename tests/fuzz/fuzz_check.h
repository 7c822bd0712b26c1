// What every fuzz target asserts with: a property that fails prints what was expected and aborts,
// which libFuzzer reports as a crash and saves the input (crash-<sha1>) for a regression file.
// Independent of NDEBUG: these are the properties under test, not debug-only checks.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

namespace kernelgym::fuzz {

[[noreturn]] inline void Fail(const char* file, int line, const char* condition, const std::string& what) {
  std::fprintf(stderr, "%s:%d: property failed: %s\n  %s\n", file, line, condition, what.c_str());
  std::abort();
}

}  // namespace kernelgym::fuzz

#define FUZZ_CHECK(condition, what)                                            \
  do {                                                                         \
    if (!(condition)) ::kernelgym::fuzz::Fail(__FILE__, __LINE__, #condition, what); \
  } while (false)
