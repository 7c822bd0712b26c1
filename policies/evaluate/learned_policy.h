// learned-knobs: a trained knob policy (kernelgym train ppo|bc, docs/learned.md) as an episode
// policy, so that `kernelgym evaluate` and `collect` run it like any other.
#pragma once

#include <memory>

#include "policies/evaluate/episode_policy.h"

namespace kernelgym::evaluate {

std::unique_ptr<EpisodePolicy> MakeLearnedKnobsPolicy();

}  // namespace kernelgym::evaluate
