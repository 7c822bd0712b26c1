// The cost model: log-speedup of a knob setting from the task's features and one row per knob.
// The rows are encoded one by one and summed (a set encoder), so the model takes any number of
// knobs in any order and shares what it learns about a knob name across tasks.
#include <torch/torch.h>

#include "policies/learned/plugin/archive.h"
#include "policies/learned/plugin/models.h"

namespace kernelgym::learned::plugin {
namespace {

struct CostNetImpl : torch::nn::Module {
  CostNetImpl(int64_t task, int64_t row, int64_t hidden)
      : rows(register_module("rows", torch::nn::Sequential(torch::nn::Linear(row, hidden), torch::nn::ReLU(),
                                                           torch::nn::Linear(hidden, hidden), torch::nn::ReLU()))),
        head(register_module("head", torch::nn::Sequential(torch::nn::Linear(hidden + task, hidden), torch::nn::ReLU(),
                                                           torch::nn::Linear(hidden, 1)))) {}
  torch::Tensor forward(const torch::Tensor& task, const torch::Tensor& knob_rows, const torch::Tensor& mask) {
    const torch::Tensor encoded = rows->forward(knob_rows) * mask.unsqueeze(-1).to(torch::kFloat32);  // [B, K, H]
    return head->forward(torch::cat({encoded.sum(1), task}, -1)).squeeze(-1);
  }
  torch::nn::Sequential rows, head;
};
TORCH_MODULE(CostNet);

class TorchCostModel final : public CostModel {
 public:
  TorchCostModel(FeatureLayout layout, int hidden, double learning_rate, nlohmann::json info)
      : layout_(std::move(layout)),
        hidden_(hidden),
        net_(static_cast<int64_t>(layout_.task_size()), static_cast<int64_t>(layout_.choice_size()), hidden),
        optimizer_(net_->parameters(), torch::optim::AdamOptions(learning_rate)),
        info_(std::move(info)) {}

  const FeatureLayout& layout() const override { return layout_; }
  const nlohmann::json& info() const override { return info_; }
  CostNet& net() { return net_; }
  torch::optim::Adam& optimizer() { return optimizer_; }

  std::vector<float> Predict(const std::vector<const CostInput*>& inputs) override {
    if (inputs.empty()) return {};
    torch::NoGradGuard no_grad;
    const torch::Tensor out = Run(inputs).contiguous();
    return std::vector<float>(out.data_ptr<float>(), out.data_ptr<float>() + out.numel());
  }

  double FitStep(const std::vector<const CostInput*>& inputs, const std::vector<float>& targets) override {
    const torch::Tensor loss = (Run(inputs) - Vector(targets)).pow(2).mean();
    optimizer_.zero_grad();
    loss.backward();
    optimizer_.step();
    return loss.item<double>();
  }

  bool Save(const std::filesystem::path& file, const nlohmann::json& info, std::string& error) const override {
    return SaveArchive(file, {kCostModelKind, {{"hidden", hidden_}}, layout_, info}, *net_, optimizer_, error);
  }

 private:
  torch::Tensor Run(const std::vector<const CostInput*>& inputs) {
    std::vector<const std::vector<float>*> tasks;
    std::vector<const std::vector<std::vector<float>>*> rows;
    for (const CostInput* in : inputs) {
      tasks.push_back(&in->task);
      rows.push_back(&in->knob_rows);
    }
    auto [knob_rows, mask] = PadRows(rows, layout_.choice_size());
    return net_->forward(Stack(tasks, layout_.task_size()), knob_rows, mask);
  }

  FeatureLayout layout_;
  int hidden_;
  CostNet net_;
  torch::optim::Adam optimizer_;
  nlohmann::json info_;
};

}  // namespace

std::unique_ptr<CostModel> CreateCostModel(const FeatureLayout& layout, const ModelConfig& config) {
  UseOneThread();
  torch::manual_seed(config.seed);
  return std::make_unique<TorchCostModel>(layout, config.hidden, config.learning_rate, nlohmann::json::object());
}

std::unique_ptr<CostModel> LoadCostModel(const std::filesystem::path& file, std::string& error) {
  return LoadModel<TorchCostModel>(file, kCostModelKind, error, [](const ArchiveHeader& header) {
    return std::make_unique<TorchCostModel>(header.layout, header.config.value("hidden", 64), 1e-3, header.info);
  });
}

}  // namespace kernelgym::learned::plugin
