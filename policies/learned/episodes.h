// Knob episodes: a policy (or random choice) sets a task's knobs `steps` times in a row, each
// setting measured through the Evaluator. Used by PPO's rollouts and by the held-out evaluation.
// Episodes of one batch run in lockstep, so the step-t settings of every episode are measured
// together (concurrently, one env per task at a time or more: EvaluatorOptions::envs_per_task).
#pragma once

#include <random>
#include <string>
#include <vector>

#include "policies/learned/features.h"
#include "policies/learned/measurements.h"
#include "policies/learned/model_api.h"

namespace kernelgym::learned {

// log(speedup / the starter's): the progress features' scale; 0 when either is not positive (a
// failed step).
double LogRatio(double speedup, double starter);
// The index of a knob's most likely value (the greedy choice).
int GreedyValue(const std::vector<float>& probs);

// What the learned side knows of a task: its template, features and the starter's evaluation.
struct TaskInfo {
  std::string id;
  protocol::TaskInfo task;  // tasks.get
  KnobSpace space;
  std::vector<float> features;  // TaskFeatures
  Measurement starter;
};
// Throws std::runtime_error for a task without a knob template or a starter that fails.
// `with_starter` false leaves `starter` empty (the cost model needs no evaluation of its own).
TaskInfo LoadTaskInfo(Evaluator& evaluator, const FeatureLayout& layout, const std::string& task,
                      bool with_starter = true);

struct EpisodeStep {
  PolicyState state;  // what the policy saw (empty for random episodes)
  Setting action;
  float logp = 0, value = 0;
  Measurement outcome;
};

struct Episode {
  const TaskInfo* task = nullptr;
  std::vector<EpisodeStep> steps;
  // Speedups against the reference (0: no correct kernel): the setting of step 1, the last, the best.
  double first_speedup = 0, final_speedup = 0, best_speedup = 0;
  double Return() const;  // sum of the env's rewards
};

enum class Chooser {
  kSample,   // the policy's distribution (training, and the "sampled" evaluation)
  kGreedy,   // each knob's most likely value
  kRandom,   // uniform over each knob's domain (the baseline; no policy needed)
  kDefault,  // the template's defaults every step (the baseline a template starts from)
};

// One episode per entry of `tasks` (a task may appear more than once), `steps` settings each.
// `policy` may be null for kRandom and kDefault.
std::vector<Episode> RunEpisodes(PolicyModel* policy, Evaluator& evaluator, const std::vector<const TaskInfo*>& tasks,
                                 int steps, Chooser chooser, std::mt19937_64& rng);

}  // namespace kernelgym::learned
