// The `knobs` action: values for a task's template parameters (task.json's `knobs`, the
// template.cpp beside it) turned into a kernel source. This is the discrete action space of
// learned policies; a value outside a knob's declared domain is an expected failure, a value
// naming the knob and its allowed values, which the episode turns into an observation with a
// penalty.
#pragma once

#include <map>
#include <cstdint>
#include <string>
#include <vector>

#include "datasets/task.h"
#include "env/episode/source_edits.h"
#include "env/protocol/messages.h"

namespace kernelgym {

// The source: one `#define NAME value` line per knob of the task, in name order, then the
// template. Knobs not in `values` take their default, so an empty map gives the default
// combination. The same values always give the same bytes (the compile cache relies on it).
[[nodiscard]] EditOutcome ApplyKnobs(const Task& task, const std::map<std::string, protocol::KnobValue>& values);

// The same on `backend`'s version of the task: a version with its own template (pallas.json's
// `knobs`, template.py) gets one Python line `NAME = value` per knob, in name order, then
// template.py; the root backend ("cpu", or any backend without a version) gets the above.
[[nodiscard]] EditOutcome ApplyKnobs(const Task& task, std::string_view backend,
                                     const std::map<std::string, protocol::KnobValue>& values);

// One value per knob of a task: a point of its discrete action space.
using KnobCombination = std::map<std::string, protocol::KnobValue>;

// Every combination of the task's knob values (the cartesian product), in a fixed order.
std::vector<KnobCombination> AllKnobCombinations(const Task& task);
std::vector<KnobCombination> AllKnobCombinations(const Task& task, std::string_view backend);

// A sample that covers every value of every knob: the defaults first, then a diagonal (the i-th
// takes each knob's (i + k)-th value, k the knob's index; as many as the widest domain), then
// combinations drawn with `seed` up to `limit` in all (the covering part is kept even when it
// alone exceeds `limit`). The whole product when it is no larger than `limit`. For checks that cannot afford the product on every run (the CI's knobs test); the
// full sweep is a benchmark (bench/knob_sweep.py).
std::vector<KnobCombination> CoveringKnobCombinations(const Task& task, std::size_t limit, uint64_t seed);
std::vector<KnobCombination> CoveringKnobCombinations(const Task& task, std::string_view backend, std::size_t limit,
                                                      uint64_t seed);

// "A=1 B=exp_poly": a combination as text, in name order.
std::string KnobCombinationText(const KnobCombination& combination);

}  // namespace kernelgym
