#include "policies/learned/episodes.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace kernelgym::learned {

double LogRatio(double speedup, double starter) {
  return speedup > 0 && starter > 0 ? std::log(speedup / starter) : 0.0;
}

int GreedyValue(const std::vector<float>& probs) {
  return static_cast<int>(std::max_element(probs.begin(), probs.end()) - probs.begin());
}

namespace {

int Sample(const std::vector<float>& probs, std::mt19937_64& rng) {
  // Drawn from the model's probabilities with our own generator, so the draw depends only on the
  // seed and not on libtorch's generator state.
  const double u = std::uniform_real_distribution<double>(0, 1)(rng);
  double total = 0;
  for (float p : probs) total += p;
  double acc = 0;
  for (std::size_t i = 0; i < probs.size(); ++i) {
    acc += probs[i] / total;
    if (u < acc) return static_cast<int>(i);
  }
  return static_cast<int>(probs.size()) - 1;
}

}  // namespace

double Episode::Return() const {
  double sum = 0;
  for (const EpisodeStep& s : steps) sum += s.outcome.reward;
  return sum;
}

TaskInfo LoadTaskInfo(Evaluator& evaluator, const FeatureLayout& layout, const std::string& task, bool with_starter) {
  TaskInfo info;
  info.id = task;
  info.task = evaluator.Task(task);
  info.space = KnobSpace::FromTask(info.task);
  if (info.space.empty()) throw std::runtime_error(task + " has no knob template: a knob policy cannot act on it");
  info.features = TaskFeatures(layout, info.task, info.space);
  if (with_starter) info.starter = evaluator.Starter(task);
  return info;
}

std::vector<Episode> RunEpisodes(PolicyModel* policy, Evaluator& evaluator, const std::vector<const TaskInfo*>& tasks,
                                 int steps, Chooser chooser, std::mt19937_64& rng) {
  if (!policy && (chooser == Chooser::kSample || chooser == Chooser::kGreedy))
    throw std::logic_error("RunEpisodes: a policy chooser without a policy");
  std::vector<Episode> episodes(tasks.size());
  std::vector<Setting> current(tasks.size());
  std::vector<const NamedFeatures*> last_features(tasks.size());
  std::vector<double> last_speedup(tasks.size());
  for (std::size_t e = 0; e < tasks.size(); ++e) {
    episodes[e].task = tasks[e];
    episodes[e].steps.reserve(static_cast<std::size_t>(std::max(steps, 0)));  // last_features points into it
    current[e] = tasks[e]->space.defaults();
    last_features[e] = &tasks[e]->starter.features;
    last_speedup[e] = tasks[e]->starter.speedup;
  }
  for (int t = 0; t < steps; ++t) {
    std::vector<EpisodeStep> step(tasks.size());
    if (policy) {
      for (std::size_t e = 0; e < tasks.size(); ++e) {
        const TaskInfo& task = *tasks[e];
        EpisodeProgress progress{t, steps, LogRatio(episodes[e].best_speedup, task.starter.speedup),
                                 LogRatio(last_speedup[e], task.starter.speedup)};
        step[e].state = EncodeState(policy->layout(), task.features, *last_features[e], progress, task.space, current[e]);
      }
    }
    std::vector<PolicyOutput> outputs;
    if (chooser == Chooser::kSample || chooser == Chooser::kGreedy) {
      std::vector<const PolicyState*> states;
      for (const EpisodeStep& s : step) states.push_back(&s.state);
      outputs = policy->Forward(states);
    }
    std::vector<Evaluator::Request> requests;
    for (std::size_t e = 0; e < tasks.size(); ++e) {
      const KnobSpace& space = tasks[e]->space;
      Setting action;
      switch (chooser) {
        case Chooser::kRandom: action = space.Random(rng); break;
        case Chooser::kDefault: action = space.defaults(); break;
        case Chooser::kSample:
        case Chooser::kGreedy: {
          const PolicyOutput& out = outputs[e];
          step[e].value = out.value;
          for (std::size_t k = 0; k < space.knobs(); ++k) {
            const auto& p = out.probs[k];
            const int v = chooser == Chooser::kSample ? Sample(p, rng) : GreedyValue(p);
            action.push_back(v);
            step[e].logp += std::log(std::max(p[v], 1e-12f));
          }
          break;
        }
      }
      step[e].action = action;
      requests.push_back({tasks[e]->id, space.ToKnobs(action)});
    }
    const std::vector<Measurement> measured = evaluator.Measure(requests);
    for (std::size_t e = 0; e < tasks.size(); ++e) {
      step[e].outcome = measured[e];
      Episode& episode = episodes[e];
      const double speedup = measured[e].ok() ? measured[e].speedup : 0;
      if (t == 0) episode.first_speedup = speedup;
      episode.final_speedup = speedup;
      episode.best_speedup = std::max(episode.best_speedup, speedup);
      current[e] = step[e].action;
      last_speedup[e] = speedup;
      episode.steps.push_back(std::move(step[e]));
      last_features[e] = &episode.steps.back().outcome.features;
    }
  }
  return episodes;
}

}  // namespace kernelgym::learned
