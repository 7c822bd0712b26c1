#include "policies/learned/offline.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>

namespace kernelgym::learned {
namespace {

// Minibatches of indices in a seeded order, one pass.
std::vector<std::vector<std::size_t>> Minibatches(std::size_t n, int size, std::mt19937_64& rng) {
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<std::vector<std::size_t>> out;
  for (std::size_t at = 0; at < n; at += static_cast<std::size_t>(size))
    out.emplace_back(order.begin() + static_cast<std::ptrdiff_t>(at),
                     order.begin() + static_cast<std::ptrdiff_t>(std::min(n, at + static_cast<std::size_t>(size))));
  return out;
}

// `options.epochs` passes over `n` samples in seeded minibatches; `step(batch)` takes one gradient
// step and returns its loss. The mean loss of each epoch.
std::vector<double> Fit(std::size_t n, const FitOptions& options,
                        const std::function<double(const std::vector<std::size_t>&)>& step) {
  std::vector<double> losses;
  if (n == 0) return losses;
  std::mt19937_64 rng(options.seed);
  for (int epoch = 0; epoch < options.epochs; ++epoch) {
    double sum = 0;
    const auto batches = Minibatches(n, options.minibatch, rng);
    for (const auto& batch : batches) sum += step(batch);
    losses.push_back(sum / static_cast<double>(batches.size()));
  }
  return losses;
}

std::vector<double> Ranks(const std::vector<double>& x) {
  std::vector<std::size_t> order(x.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return x[a] < x[b]; });
  std::vector<double> ranks(x.size());
  for (std::size_t i = 0; i < order.size();) {  // ties share their mean rank
    std::size_t j = i;
    while (j + 1 < order.size() && x[order[j + 1]] == x[order[i]]) ++j;
    for (std::size_t k = i; k <= j; ++k) ranks[order[k]] = (static_cast<double>(i) + static_cast<double>(j)) / 2;
    i = j + 1;
  }
  return ranks;
}

double Pearson(const std::vector<double>& a, const std::vector<double>& b) {
  const double n = static_cast<double>(a.size());
  const double ma = std::accumulate(a.begin(), a.end(), 0.0) / n, mb = std::accumulate(b.begin(), b.end(), 0.0) / n;
  double sab = 0, saa = 0, sbb = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    sab += (a[i] - ma) * (b[i] - mb);
    saa += (a[i] - ma) * (a[i] - ma);
    sbb += (b[i] - mb) * (b[i] - mb);
  }
  return saa > 0 && sbb > 0 ? sab / std::sqrt(saa * sbb) : 0;
}

}  // namespace

std::vector<double> CloneBestSettings(PolicyModel& policy, const std::vector<const TaskInfo*>& tasks,
                                      const KnobDataset& data, const FitOptions& options) {
  std::vector<PolicyState> states;
  std::vector<std::vector<int>> targets;
  for (const TaskInfo* task : tasks) {
    const auto rows = data.by_task.find(task->id);
    if (rows == data.by_task.end()) continue;
    const Measurement* best = nullptr;
    for (const Measurement& m : rows->second)
      if (m.ok() && (!best || m.speedup > best->speedup)) best = &m;
    if (!best) continue;
    const auto setting = task->space.FromKnobs(best->knobs);
    if (!setting) continue;  // a row of an older template
    states.push_back(EncodeState(policy.layout(), task->features, task->starter.features,
                                 EpisodeProgress{0, 1, 0, 0}, task->space, task->space.defaults()));
    targets.push_back(*setting);
  }
  return Fit(states.size(), options, [&](const std::vector<std::size_t>& batch) {
    std::vector<const PolicyState*> s;
    std::vector<std::vector<int>> t;
    for (std::size_t i : batch) {
      s.push_back(&states[i]);
      t.push_back(targets[i]);
    }
    return policy.CloneStep(s, t);
  });
}

std::vector<double> FitCostModel(CostModel& model, const std::vector<const TaskInfo*>& tasks, const KnobDataset& data,
                                 const FitOptions& options, std::size_t& samples) {
  std::vector<CostInput> inputs;
  std::vector<float> targets;
  for (const TaskInfo* task : tasks) {
    const auto rows = data.by_task.find(task->id);
    if (rows == data.by_task.end()) continue;
    for (const Measurement& m : rows->second) {
      const auto setting = task->space.FromKnobs(m.knobs);
      if (!m.ok() || !setting) continue;
      inputs.push_back(EncodeSetting(model.layout(), task->features, task->space, *setting));
      targets.push_back(static_cast<float>(std::log(m.speedup)));
    }
  }
  samples = inputs.size();
  return Fit(inputs.size(), options, [&](const std::vector<std::size_t>& batch) {
    std::vector<const CostInput*> in;
    std::vector<float> t;
    for (std::size_t i : batch) {
      in.push_back(&inputs[i]);
      t.push_back(targets[i]);
    }
    return model.FitStep(in, t);
  });
}

RankQuality MeasureRanking(CostModel& model, const TaskInfo& task, const std::vector<Measurement>& measured) {
  RankQuality q;
  std::vector<CostInput> inputs;
  std::vector<const Measurement*> rows;
  for (const Measurement& m : measured)
    if (const auto setting = task.space.FromKnobs(m.knobs)) {
      inputs.push_back(EncodeSetting(model.layout(), task.features, task.space, *setting));
      rows.push_back(&m);
    }
  if (inputs.empty()) return q;
  std::vector<const CostInput*> pointers;
  for (const CostInput& in : inputs) pointers.push_back(&in);
  const std::vector<float> predicted = model.Predict(pointers);
  std::vector<double> p, actual;
  double best = 0;
  std::size_t top = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (predicted[i] > predicted[top]) top = i;
    if (!rows[i]->ok()) continue;
    p.push_back(predicted[i]);
    actual.push_back(std::log(rows[i]->speedup));
    best = std::max(best, rows[i]->speedup);
  }
  q.samples = p.size();
  if (p.size() >= 2) q.spearman = Pearson(Ranks(p), Ranks(actual));
  q.top1_fraction = best > 0 && rows[top]->ok() ? rows[top]->speedup / best : 0;
  return q;
}

}  // namespace kernelgym::learned
