// Running one policy over a suite (`kernelgym evaluate` and `kernelgym collect` both do): every
// task, `episodes` times, a progress bar on the way, a Report at the end.
#pragma once

#include "core/progress.h"

#include <ostream>
#include <string>
#include <vector>

#include "env/client/client.h"
#include <CLI/CLI.hpp>

#include "policies/evaluate/episode_policy.h"
#include "policies/evaluate/report.h"

namespace kernelgym::evaluate {

struct SuiteRunOptions {
  std::string suite = "cpu";
  std::string backend = "cpu";
  std::vector<std::string> tasks;  // only these tasks of the suite (empty: all)
  int episodes = 1;
  int budget = 16;
  uint64_t seed = 1;  // episode e of task t uses seed + e (the same inputs for every policy)
  bool record = false;
  roles::Assistant* assistant = nullptr;
  std::string model;
  std::filesystem::path policy_model;  // learned-knobs: the trained policy file
};

// The flags that fill SuiteRunOptions (--suite, --backend, --task, --episodes, --max-evaluations, --seed,
// --policy-model), shared by `evaluate` and `collect`.
void AddSuiteRunFlags(CLI::App& app, SuiteRunOptions& run);

// Whether every policy of `names` is registered and has what it needs from `run` (a chat model,
// a policy file); false with `error` naming the flag that is missing.
bool PoliciesReady(const std::vector<std::string>& names, const SuiteRunOptions& run, std::string& error);

// The tasks of `suite` that have a version for `backend`, then one episode each (x episodes).
// An episode that fails with a server error is an outcome with status "error: ..." (not correct);
// transport failures propagate.
// `progress`: where the progress bar goes (nullptr: none); `terminal`: redraw it in place.
Report RunSuite(client::Client& env, EpisodePolicy& policy, const SuiteRunOptions& options, std::ostream* progress,
                bool terminal, std::ostream& log);

}  // namespace kernelgym::evaluate
