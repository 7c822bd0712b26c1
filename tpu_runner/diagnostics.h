// Parsers for what g++ writes: JSON diagnostics (-fdiagnostics-format=json), the include trace
// (-H) and vectorization remarks (-fopt-info-vec-all=<file>).
#pragma once

#include <string>
#include <vector>

#include "core/result.h"

namespace kernelgym {

struct CompilerOutput {
  std::vector<Diagnostic> diagnostics;        // errors, warnings, notes (children flattened)
  std::vector<std::string> direct_includes;   // headers the main file included (resolved paths)
  std::vector<std::string> unparsed;          // stderr lines that were neither (linker errors, ...)
};

// Splits g++'s stderr into the -H trace, the JSON diagnostics array and anything else.
// `source_name` is the candidate's file name; diagnostics elsewhere (headers) keep their path.
CompilerOutput ParseCompilerStderr(const std::string& stderr_text);

// Remarks for lines of `source_name` only, one per (line, vectorized, message) — g++ repeats a
// remark per inlined copy and per vector size it tries — keeping the first column.
std::vector<Remark> ParseVectorizationRemarks(const std::string& remarks_text, const std::string& source_name);

}  // namespace kernelgym
