// The steps the episode policies share (episode_policy.cc, learned_policy.cc): start an episode,
// submit the best step seen and read the verdict, or submit the starter when a policy cannot act
// on the task.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "env/client/client.h"
#include "policies/evaluate/episode_policy.h"
#include "policies/common/paid_speedup.h"
#include "policies/evaluate/report.h"

namespace kernelgym::evaluate {

double SecondsSince(std::chrono::steady_clock::time_point start);

// env.make + env.reset with the context's settings; the env id, and its first observation (its
// `speedup` is the paid one: PaidSpeedup).
std::string StartEpisode(client::Client& env, const EpisodeContext& c, int max_steps, protocol::Observation& first);

// The speedup a step (or reset) was paid for: measured, or a pallas evaluation's trusted estimate.
using policies::PaidSpeedup;  // policies/common/paid_speedup.h

// A step's observation with `speedup` set to the paid one (PaidSpeedup), its kind noted in `out`.
protocol::Observation Paid(const protocol::StepResult& r, TaskOutcome& out);

// Reverts to `best_step` (unless the episode is there), submits, fills the outcome's verdict and
// closes the env. `policy` is kept with each step in the trajectory store.
void SubmitBest(client::Client& env, const std::string& id, int64_t current_step, int64_t best_step, TaskOutcome& out,
                const std::string& policy);

// The starter policy's whole episode: reset, submit the starter.
TaskOutcome SubmitStarter(client::Client& env, const EpisodeContext& c, const std::string& policy);

}  // namespace kernelgym::evaluate
