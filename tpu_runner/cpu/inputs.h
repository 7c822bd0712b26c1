// Filling input tensors from the task's initializers. Deterministic given a seed, fast enough to
// refresh inputs between timed rounds, and the same code in every process.
#pragma once

#include <cstdint>
#include <span>

#include "datasets/task.h"

namespace kernelgym {

// xoshiro256** seeded through splitmix64: fast, good enough statistically, reproducible.
class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t Next();
  double Uniform01();     // [0, 1)
  double Normal();        // standard normal (ziggurat)

 private:
  uint64_t s_[4];
};

// A seed derived from a base seed and a stream index (distinct per input and trial).
uint64_t MixSeed(uint64_t base, uint64_t stream);

// Fills the whole tensor from its initializer.
void FillInput(const TensorSpec& spec, std::span<std::byte> buffer, uint64_t seed);

// Redraws about `fraction` of the elements, at random positions, from the initializer: enough
// to change the outputs (so a cached answer is wrong) at a fraction of the cost of a refill.
// A structured input (permutation, partition) is redrawn whole, which keeps it valid.
void RefreshInput(const TensorSpec& spec, std::span<std::byte> buffer, uint64_t seed, double fraction);

}  // namespace kernelgym
