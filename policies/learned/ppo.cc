#include "policies/learned/ppo.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

namespace kernelgym::learned {

nlohmann::json IterationStats::ToJson() const {
  return {{"iteration", iteration},         {"mean_reward", mean_reward},   {"mean_return", mean_return},
          {"first_gain", first_gain},       {"best_gain", best_gain},       {"failed_fraction", failed_fraction},
          {"entropy", entropy},             {"approx_kl", approx_kl},       {"clip_fraction", clip_fraction},
          {"value_loss", value_loss},       {"policy_loss", policy_loss},   {"evaluations", evaluations},
          {"reused", reused},               {"seconds", seconds}};
}

IterationStats SummarizeEpisodes(const std::vector<Episode>& episodes) {
  IterationStats s;
  if (episodes.empty()) return s;
  double rewards = 0, returns = 0, log_first = 0, log_best = 0;
  std::size_t steps = 0, failed = 0;
  for (const Episode& e : episodes) {
    const double starter = e.task->starter.speedup;
    auto ratio = [&](double speedup) { return speedup > 0 && starter > 0 ? speedup / starter : kFailedRatio; };
    log_first += std::log(ratio(e.first_speedup));
    log_best += std::log(ratio(e.best_speedup));
    returns += e.Return();
    for (const EpisodeStep& step : e.steps) {
      rewards += step.outcome.reward;
      ++steps;
      if (!step.outcome.ok()) ++failed;
    }
  }
  const double n = static_cast<double>(episodes.size());
  s.mean_reward = steps ? rewards / static_cast<double>(steps) : 0;
  s.mean_return = returns / n;
  s.first_gain = std::exp(log_first / n);
  s.best_gain = std::exp(log_best / n);
  s.failed_fraction = steps ? static_cast<double>(failed) / static_cast<double>(steps) : 0;
  return s;
}

void ComputeGae(const std::vector<float>& rewards, const std::vector<float>& values, double gamma, double lambda,
                std::vector<float>& advantages, std::vector<float>& returns) {
  const std::size_t n = rewards.size();
  advantages.assign(n, 0);
  returns.assign(n, 0);
  double next_advantage = 0, next_value = 0;
  for (std::size_t i = n; i-- > 0;) {
    const double delta = rewards[i] + gamma * next_value - values[i];
    next_advantage = delta + gamma * lambda * next_advantage;
    advantages[i] = static_cast<float>(next_advantage);
    returns[i] = static_cast<float>(next_advantage + values[i]);
    next_value = values[i];
  }
}

PpoTrainer::PpoTrainer(PolicyModel& policy, Evaluator& evaluator, std::vector<const TaskInfo*> tasks, PpoOptions options)
    : policy_(policy), evaluator_(evaluator), tasks_(std::move(tasks)), options_(options), rng_(options.seed) {}

std::vector<IterationStats> PpoTrainer::Train(const std::function<void(const IterationStats&)>& after) {
  std::vector<IterationStats> log;
  for (int i = 1; i <= options_.iterations; ++i) {
    log.push_back(Iterate(i));
    if (after) after(log.back());
  }
  return log;
}

IterationStats PpoTrainer::Iterate(int iteration) {
  const auto start = std::chrono::steady_clock::now();
  const std::size_t evaluations_before = evaluator_.evaluations(), reused_before = evaluator_.reused();
  // Every task once per pass, in a seeded order, so small task sets are covered evenly.
  std::vector<const TaskInfo*> batch;
  while (static_cast<int>(batch.size()) < options_.episodes) {
    std::vector<const TaskInfo*> pass = tasks_;
    std::shuffle(pass.begin(), pass.end(), rng_);
    for (const TaskInfo* t : pass)
      if (static_cast<int>(batch.size()) < options_.episodes) batch.push_back(t);
  }
  const std::vector<Episode> episodes = RunEpisodes(&policy_, evaluator_, batch, options_.steps, Chooser::kSample, rng_);

  // Flatten to samples with their advantages.
  std::vector<const PolicyState*> states;
  std::vector<std::vector<int>> actions;
  std::vector<float> old_logp, advantages, returns;
  for (const Episode& e : episodes) {
    std::vector<float> rewards, values, adv, ret;
    for (const EpisodeStep& s : e.steps) {
      rewards.push_back(static_cast<float>(s.outcome.reward));
      values.push_back(s.value);
    }
    ComputeGae(rewards, values, options_.gamma, options_.lambda, adv, ret);
    for (std::size_t i = 0; i < e.steps.size(); ++i) {
      states.push_back(&e.steps[i].state);
      actions.push_back(e.steps[i].action);
      old_logp.push_back(e.steps[i].logp);
      advantages.push_back(adv[i]);
      returns.push_back(ret[i]);
    }
  }
  // Normalized advantages: the scale of log-speedups differs from task to task.
  const double mean = std::accumulate(advantages.begin(), advantages.end(), 0.0) / std::max<std::size_t>(advantages.size(), 1);
  double var = 0;
  for (float a : advantages) var += (a - mean) * (a - mean);
  const double stddev = std::sqrt(var / std::max<std::size_t>(advantages.size(), 1)) + 1e-8;
  for (float& a : advantages) a = static_cast<float>((a - mean) / stddev);

  IterationStats stats = SummarizeEpisodes(episodes);
  stats.iteration = iteration;
  std::vector<std::size_t> order(states.size());
  std::iota(order.begin(), order.end(), 0);
  for (int epoch = 0; epoch < options_.epochs; ++epoch) {
    std::shuffle(order.begin(), order.end(), rng_);
    UpdateStats sum;
    int minibatches = 0;
    for (std::size_t at = 0; at < order.size(); at += static_cast<std::size_t>(options_.minibatch)) {
      const std::size_t end = std::min(order.size(), at + static_cast<std::size_t>(options_.minibatch));
      std::vector<const PolicyState*> mb_states;
      std::vector<std::vector<int>> mb_actions;
      std::vector<float> mb_logp, mb_adv, mb_ret;
      for (std::size_t i = at; i < end; ++i) {
        mb_states.push_back(states[order[i]]);
        mb_actions.push_back(actions[order[i]]);
        mb_logp.push_back(old_logp[order[i]]);
        mb_adv.push_back(advantages[order[i]]);
        mb_ret.push_back(returns[order[i]]);
      }
      const UpdateStats u = policy_.PpoStep(mb_states, mb_actions, mb_logp, mb_adv, mb_ret, options_.update);
      sum.policy_loss += u.policy_loss;
      sum.value_loss += u.value_loss;
      sum.entropy += u.entropy;
      sum.approx_kl += u.approx_kl;
      sum.clip_fraction += u.clip_fraction;
      ++minibatches;
    }
    if (epoch == options_.epochs - 1 && minibatches > 0) {
      const double n = minibatches;
      stats.policy_loss = sum.policy_loss / n;
      stats.value_loss = sum.value_loss / n;
      stats.entropy = sum.entropy / n;
      stats.approx_kl = sum.approx_kl / n;
      stats.clip_fraction = sum.clip_fraction / n;
    }
  }
  stats.evaluations = evaluator_.evaluations() - evaluations_before;
  stats.reused = evaluator_.reused() - reused_before;
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

}  // namespace kernelgym::learned
