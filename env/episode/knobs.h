// The `knobs` action: values for a task's template parameters (task.json's `knobs`, the
// template.cpp beside it) turned into a kernel source. This is the discrete action space of
// learned policies; a value outside a knob's declared domain is an expected failure, a value
// naming the knob and its allowed values, which the episode turns into an observation with a
// penalty.
#pragma once

#include <map>
#include <string>

#include "datasets/task.h"
#include "env/episode/source_edits.h"
#include "env/protocol/messages.h"

namespace kernelgym {

// The source: one `#define NAME value` line per knob of the task, in name order, then the
// template. Knobs not in `values` take their default, so an empty map gives the default
// combination. The same values always give the same bytes (the compile cache relies on it).
[[nodiscard]] EditOutcome ApplyKnobs(const Task& task, const std::map<std::string, protocol::KnobValue>& values);

}  // namespace kernelgym
