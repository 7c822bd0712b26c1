// A cost model file as `kernelgym search --cost-model` uses it: predicted log-speedups for knob
// settings of one task. Torch-free: the model runs in the plugin, loaded on first use.
#pragma once

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "policies/learned/knob_space.h"
#include "policies/learned/model_api.h"

namespace kernelgym::learned {

class KnobRanker {
 public:
  // nullptr with `error`: the plugin or the file cannot be loaded, the file is not a cost model,
  // or the task has no knob template.
  static std::unique_ptr<KnobRanker> Load(const std::filesystem::path& file, const protocol::TaskInfo& task,
                                          std::string& error);
  // Predicted log-speedup per setting; a setting outside the task's template gets -infinity.
  std::vector<double> Score(const std::vector<KnobMap>& settings);
  const nlohmann::json& info() const { return model_->info(); }

 private:
  std::unique_ptr<CostModel> model_;
  KnobSpace space_;
  std::vector<float> task_features_;
};

}  // namespace kernelgym::learned
