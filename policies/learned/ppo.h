// PPO over the knob action space (Schulman et al. 2017): each iteration runs `episodes` knob
// episodes of `steps` settings on tasks drawn from the training set, computes GAE advantages,
// and takes `epochs` passes of clipped-surrogate minibatch updates with a value loss and an
// entropy bonus. Given the seed and the same measurements (MeasurementStore), every draw, every
// minibatch and every update is the same: training is deterministic.
#pragma once

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <ostream>
#include <random>
#include <vector>

#include "policies/learned/episodes.h"
#include "policies/learned/model_api.h"

namespace kernelgym::learned {

struct PpoOptions {
  int iterations = 20;
  int episodes = 8;  // per iteration, in lockstep
  int steps = 4;     // settings per episode
  double gamma = 0.95;
  double lambda = 0.95;
  int epochs = 4;
  int minibatch = 16;
  PpoConfig update;
  uint64_t seed = 1;
};

// One line of the training log.
struct IterationStats {
  int iteration = 0;
  double mean_reward = 0;     // per step
  double mean_return = 0;     // per episode
  double first_gain = 0;      // geometric mean over episodes of step 1's speedup / the starter's
  double best_gain = 0;       // ... of the episode's best speedup / the starter's
  double failed_fraction = 0; // steps whose kernel failed
  double entropy = 0, approx_kl = 0, clip_fraction = 0, value_loss = 0, policy_loss = 0;  // last epoch's means
  std::size_t evaluations = 0, reused = 0;  // real env steps and store hits this iteration
  double seconds = 0;
  nlohmann::json ToJson() const;
};

// Gains are geometric means of speedup ratios; a failed step counts as the starter (ratio 1)
// would flatter, so it counts as kFailedRatio.
inline constexpr double kFailedRatio = 0.1;
IterationStats SummarizeEpisodes(const std::vector<Episode>& episodes);

// Advantages and returns by GAE(gamma, lambda) for one episode; the episode ends after its last
// step (no bootstrap).
void ComputeGae(const std::vector<float>& rewards, const std::vector<float>& values, double gamma, double lambda,
                std::vector<float>& advantages, std::vector<float>& returns);

class PpoTrainer {
 public:
  PpoTrainer(PolicyModel& policy, Evaluator& evaluator, std::vector<const TaskInfo*> tasks, PpoOptions options);
  // Runs the iterations; `after` is called after each one (logging, checkpoints).
  std::vector<IterationStats> Train(const std::function<void(const IterationStats&)>& after);

 private:
  IterationStats Iterate(int iteration);

  PolicyModel& policy_;
  Evaluator& evaluator_;
  std::vector<const TaskInfo*> tasks_;
  PpoOptions options_;
  std::mt19937_64 rng_;
};

}  // namespace kernelgym::learned
