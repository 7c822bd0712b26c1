// Source mutations of a C++ kernel that need no model: the search's `mutate` proposer. Each
// operator rewrites one site of the source the way a performance engineer would try first —
// a SIMD pragma on a loop (with the reduction clause its body needs), an unroll hint, __restrict on
// the kernel's pointers, a polynomial exponential instead of the libm call. Nothing here knows
// whether a mutant is correct or faster: the environment decides, and the search keeps what wins.
//
// Mutants are whole sources (the search sends them as `replace` actions). Every operator is
// deterministic; the search samples among the mutants with its own seeded generator.
#pragma once

#include <string>
#include <vector>

namespace kernelgym::search {

struct Mutation {
  std::string op;           // the operator: "omp_simd", "unroll", "restrict", "exp_poly", ...
  std::string description;  // one line for the search graph's edge, e.g. "omp simd reduction(+:sum) on the loop at line 14"
  std::string source;       // the whole mutated source
};

// Every single-site mutation of `source` that applies, in source order per operator; none that
// leaves the source unchanged, no two with the same resulting source.
std::vector<Mutation> EnumerateMutations(const std::string& source);

// The operator names, for docs and tests.
const std::vector<std::string>& MutationOperators();

}  // namespace kernelgym::search
