#include "policies/learned/ranker.h"

#include <limits>

#include "policies/learned/features.h"

namespace kernelgym::learned {

std::unique_ptr<KnobRanker> KnobRanker::Load(const std::filesystem::path& file, const protocol::TaskInfo& task,
                                             std::string& error) {
  const ModelPlugin* plugin = LoadModelPlugin(error);
  if (!plugin) return nullptr;
  auto ranker = std::unique_ptr<KnobRanker>(new KnobRanker());
  ranker->model_ = plugin->load_cost_model(file, error);
  if (!ranker->model_) return nullptr;
  ranker->space_ = KnobSpace::FromTask(task);
  if (ranker->space_.empty()) {
    error = "task " + task.summary.id + " has no knob template: a cost model has nothing to rank";
    return nullptr;
  }
  ranker->task_features_ = TaskFeatures(ranker->model_->layout(), task, ranker->space_);
  return ranker;
}

std::vector<double> KnobRanker::Score(const std::vector<KnobMap>& settings) {
  std::vector<double> scores(settings.size(), -std::numeric_limits<double>::infinity());
  std::vector<CostInput> inputs;
  std::vector<std::size_t> where;
  for (std::size_t i = 0; i < settings.size(); ++i)
    if (const auto setting = space_.FromKnobs(settings[i])) {
      inputs.push_back(EncodeSetting(model_->layout(), task_features_, space_, *setting));
      where.push_back(i);
    }
  std::vector<const CostInput*> pointers;
  for (const CostInput& in : inputs) pointers.push_back(&in);
  const std::vector<float> predicted = model_->Predict(pointers);
  for (std::size_t j = 0; j < where.size(); ++j) scores[where[j]] = predicted[j];
  return scores;
}

}  // namespace kernelgym::learned
