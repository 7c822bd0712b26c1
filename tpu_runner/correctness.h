// Comparing a candidate's output with the reference's: the one place tolerances are applied.
// Used by the runner (trusted verdicts on correctness trials) and by the harness (checking every
// timed call), so both apply exactly the same rule.
#pragma once

#include <cstddef>
#include <span>

#include "core/result.h"
#include "datasets/task.h"

namespace kernelgym {

// An element passes when |actual - expected| <= atol + rtol * |expected|, both finite (or both
// the same non-finite value). Integer dtypes compare exactly.
[[nodiscard]] OutputCheck CompareOutput(const TensorSpec& spec, std::span<const std::byte> expected,
                                        std::span<const std::byte> actual);

// The same rule as CompareOutput, as a yes/no answer in one vectorizable pass: what the timing
// loop asks after every timed call. (On "no", CompareOutput gives the details.) Non-finite
// values always answer "no", even where CompareOutput would accept them (NaN == NaN).
[[nodiscard]] bool OutputWithinTolerance(const TensorSpec& spec, std::span<const std::byte> expected,
                                         std::span<const std::byte> actual);

// Fills an output buffer with a value no correct kernel leaves behind: a quiet NaN for floats
// (variant 0) or a huge finite sentinel (variant 1), a sentinel integer for integer dtypes.
// Two variants let a repeat call see different garbage, exposing reads of uninitialized output.
void FillPoison(DType dtype, std::span<std::byte> buffer, int variant);

}  // namespace kernelgym
