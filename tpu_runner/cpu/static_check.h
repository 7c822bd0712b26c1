// Stage 1: checks on the candidate's source text before anything runs.
// The text check gives early, precise messages; the compiler's include trace (compiler.cc)
// re-checks what was actually included, so macro tricks cannot get past both.
#pragma once

#include <string>
#include <vector>

#include "core/result.h"
#include "datasets/task.h"

namespace kernelgym {

inline constexpr std::size_t kMaxSourceBytes = 256 * 1024;

// Headers every task allows: math, fixed-width types, memory helpers, containers that only
// allocate, SIMD intrinsics and OpenMP. No threads, clocks, I/O, dynamic loading or system calls.
const std::vector<std::string>& DefaultAllowedHeaders();

struct StaticCheckResult {
  bool ok = true;
  std::string message;                   // first problem, one line
  std::vector<Diagnostic> diagnostics;   // every problem, with its line
};

[[nodiscard]] StaticCheckResult CheckSource(const std::string& source, const KernelPolicy& policy);

// True when `header` (as written between <> or "") is in the task's allowed set.
bool IsAllowedHeader(const std::string& header, const KernelPolicy& policy);

// The first assembler directive in `assembly` (the compiler's own assembly output for the kernel,
// inline assembly included) that reads a file (.incbin, .include) or builds text the output does
// not show (.macro, .irp, .irpc); empty when there is none. Checked on the compiler's output, not
// the source, so neither C++ macros nor string splicing hide a directive; the text-building
// directives are refused too, because an assembler macro can spell one (".in\\s" with s = cbin).
// A directive is a '.' not preceded by a symbol character, case-insensitive, anywhere in a line:
// conservative, since GCC itself emits none of them.
std::string AssemblerFileDirective(const std::string& assembly);

}  // namespace kernelgym
