// The knob policy network. A context encoder (the observation, task and episode features), a
// scorer that gives each (knob, value) choice a logit from the encoded context and the choice's
// own features, and a value head. Scoring choices by their features, rather than having one
// output per knob slot, is what lets one network act on a task whose template it never saw: a
// knob named like one it knows (SIMD, NB, EXP, ...) with values of similar shape gets a sensible
// distribution, and the softmax runs over exactly the knob's domain.
#include <torch/torch.h>

#include "policies/learned/plugin/archive.h"
#include "policies/learned/plugin/models.h"

namespace kernelgym::learned::plugin {
namespace {

struct PolicyNetImpl : torch::nn::Module {
  PolicyNetImpl(int64_t context, int64_t choice, int64_t hidden)
      : encoder(register_module("encoder", torch::nn::Sequential(torch::nn::Linear(context, hidden), torch::nn::Tanh(),
                                                                 torch::nn::Linear(hidden, hidden), torch::nn::Tanh()))),
        scorer(register_module("scorer", torch::nn::Sequential(torch::nn::Linear(hidden + choice, hidden),
                                                               torch::nn::Tanh(), torch::nn::Linear(hidden, 1)))),
        value(register_module("value", torch::nn::Sequential(torch::nn::Linear(hidden, hidden), torch::nn::Tanh(),
                                                             torch::nn::Linear(hidden, 1)))) {}
  torch::nn::Sequential encoder, scorer, value;
};
TORCH_MODULE(PolicyNet);

// A batch of states as tensors: the contexts [B, C], the choices [B, K, V, D] and which of them
// exist [B, K, V]; knobs [B, K] marks the knobs a state has (tasks differ in knob count).
struct Batch {
  torch::Tensor context, choices, valid, knobs;
};

Batch MakeBatch(const std::vector<const PolicyState*>& states, const FeatureLayout& layout) {
  std::size_t knobs = 1, values = 1;
  for (const PolicyState* s : states) {
    knobs = std::max(knobs, s->choices.size());
    for (const auto& k : s->choices) values = std::max(values, k.size());
  }
  const auto B = static_cast<int64_t>(states.size()), K = static_cast<int64_t>(knobs), V = static_cast<int64_t>(values);
  const auto D = static_cast<int64_t>(layout.choice_size());
  std::vector<const std::vector<float>*> contexts;
  for (const PolicyState* s : states) contexts.push_back(&s->context);
  Batch batch;
  batch.context = Stack(contexts, layout.context_size());
  batch.choices = torch::zeros({B, K, V, D});
  batch.valid = torch::zeros({B, K, V}, torch::kBool);
  batch.knobs = torch::zeros({B, K}, torch::kBool);
  auto c = batch.choices.accessor<float, 4>();
  auto valid = batch.valid.accessor<bool, 3>();
  auto has = batch.knobs.accessor<bool, 2>();
  for (int64_t b = 0; b < B; ++b) {
    const auto& choices = states[b]->choices;
    for (std::size_t k = 0; k < choices.size(); ++k) {
      has[b][static_cast<int64_t>(k)] = !choices[k].empty();
      for (std::size_t v = 0; v < choices[k].size(); ++v) {
        valid[b][static_cast<int64_t>(k)][static_cast<int64_t>(v)] = true;
        for (int64_t d = 0; d < D && d < static_cast<int64_t>(choices[k][v].size()); ++d)
          c[b][static_cast<int64_t>(k)][static_cast<int64_t>(v)][d] = choices[k][v][d];
      }
    }
  }
  // A padded knob gets one valid dummy value so its softmax is defined; `knobs` masks it out.
  batch.valid.index_put_({torch::indexing::Slice(), torch::indexing::Slice(), 0},
                         batch.valid.index({torch::indexing::Slice(), torch::indexing::Slice(), 0}) | ~batch.knobs);
  return batch;
}

class TorchPolicy final : public PolicyModel {
 public:
  TorchPolicy(FeatureLayout layout, int hidden, double learning_rate, nlohmann::json info)
      : layout_(std::move(layout)),
        hidden_(hidden),
        net_(static_cast<int64_t>(layout_.context_size()), static_cast<int64_t>(layout_.choice_size()), hidden),
        optimizer_(net_->parameters(), torch::optim::AdamOptions(learning_rate)),
        info_(std::move(info)) {}

  const FeatureLayout& layout() const override { return layout_; }
  const nlohmann::json& info() const override { return info_; }
  PolicyNet& net() { return net_; }
  torch::optim::Adam& optimizer() { return optimizer_; }

  std::vector<PolicyOutput> Forward(const std::vector<const PolicyState*>& states) override {
    torch::NoGradGuard no_grad;
    const Batch batch = MakeBatch(states, layout_);
    auto [log_probs, values] = Evaluate(batch);
    const torch::Tensor probs = log_probs.exp();
    std::vector<PolicyOutput> out(states.size());
    auto p = probs.accessor<float, 3>();
    auto v = values.accessor<float, 1>();
    for (std::size_t b = 0; b < states.size(); ++b) {
      out[b].value = v[static_cast<int64_t>(b)];
      for (std::size_t k = 0; k < states[b]->choices.size(); ++k) {
        out[b].probs.emplace_back();
        for (std::size_t i = 0; i < states[b]->choices[k].size(); ++i)
          out[b].probs.back().push_back(p[static_cast<int64_t>(b)][static_cast<int64_t>(k)][static_cast<int64_t>(i)]);
      }
    }
    return out;
  }

  UpdateStats PpoStep(const std::vector<const PolicyState*>& states, const std::vector<std::vector<int>>& actions,
                      const std::vector<float>& old_logp, const std::vector<float>& advantages,
                      const std::vector<float>& returns, const PpoConfig& config) override {
    const Batch batch = MakeBatch(states, layout_);
    auto [log_probs, values] = Evaluate(batch);
    const torch::Tensor logp = ActionLogProb(log_probs, batch, actions);
    const torch::Tensor old = Vector(old_logp), adv = Vector(advantages), ret = Vector(returns);
    const torch::Tensor ratio = (logp - old).exp();
    const torch::Tensor surrogate =
        torch::min(ratio * adv, torch::clamp(ratio, 1 - config.clip, 1 + config.clip) * adv);
    const torch::Tensor policy_loss = -surrogate.mean();
    const torch::Tensor value_loss = (values - ret).pow(2).mean();
    const torch::Tensor entropy = Entropy(log_probs, batch).mean();
    const torch::Tensor loss = policy_loss + config.value_coef * value_loss - config.entropy_coef * entropy;
    optimizer_.zero_grad();
    loss.backward();
    torch::nn::utils::clip_grad_norm_(net_->parameters(), config.max_grad_norm);
    optimizer_.step();
    UpdateStats stats;
    stats.policy_loss = policy_loss.item<double>();
    stats.value_loss = value_loss.item<double>();
    stats.entropy = entropy.item<double>();
    // The (old - new) estimator of KL(old || new) on the sampled actions.
    stats.approx_kl = (old - logp.detach()).mean().item<double>();
    stats.clip_fraction = ((ratio.detach() - 1).abs() > config.clip).to(torch::kFloat32).mean().item<double>();
    return stats;
  }

  double CloneStep(const std::vector<const PolicyState*>& states, const std::vector<std::vector<int>>& targets) override {
    const Batch batch = MakeBatch(states, layout_);
    auto [log_probs, values] = Evaluate(batch);
    const torch::Tensor loss = -ActionLogProb(log_probs, batch, targets).mean();
    optimizer_.zero_grad();
    loss.backward();
    optimizer_.step();
    return loss.item<double>();
  }

  bool Save(const std::filesystem::path& file, const nlohmann::json& info, std::string& error) const override {
    return SaveArchive(file, {kPolicyKind, {{"hidden", hidden_}}, layout_, info}, *net_, optimizer_, error);
  }

 private:
  // Log-probabilities [B, K, V] (invalid choices at -inf-like) and values [B].
  std::pair<torch::Tensor, torch::Tensor> Evaluate(const Batch& batch) {
    const torch::Tensor encoded = net_->encoder->forward(batch.context);  // [B, H]
    const auto sizes = batch.choices.sizes();
    const torch::Tensor expanded = encoded.unsqueeze(1).unsqueeze(1).expand({sizes[0], sizes[1], sizes[2], encoded.size(1)});
    const torch::Tensor logits = net_->scorer->forward(torch::cat({expanded, batch.choices}, -1)).squeeze(-1);
    const torch::Tensor masked = logits.masked_fill(~batch.valid, -1e9);
    return {torch::log_softmax(masked, -1), net_->value->forward(encoded).squeeze(-1)};
  }

  static torch::Tensor ActionLogProb(const torch::Tensor& log_probs, const Batch& batch,
                                     const std::vector<std::vector<int>>& actions) {
    const auto B = log_probs.size(0), K = log_probs.size(1);
    torch::Tensor index = torch::zeros({B, K, 1}, torch::kLong);
    auto a = index.accessor<int64_t, 3>();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t k = 0; k < K && k < static_cast<int64_t>(actions[b].size()); ++k) a[b][k][0] = actions[b][k];
    const torch::Tensor taken = log_probs.gather(2, index).squeeze(-1);  // [B, K]
    return (taken * batch.knobs.to(torch::kFloat32)).sum(1);
  }

  static torch::Tensor Entropy(const torch::Tensor& log_probs, const Batch& batch) {
    const torch::Tensor p = log_probs.exp();
    const torch::Tensor per_knob = -(p * log_probs).masked_fill(~batch.valid, 0).sum(-1);  // [B, K]
    return (per_knob * batch.knobs.to(torch::kFloat32)).sum(1);
  }

  FeatureLayout layout_;
  int hidden_;
  PolicyNet net_;
  torch::optim::Adam optimizer_;
  nlohmann::json info_;
};

}  // namespace

std::unique_ptr<PolicyModel> CreatePolicy(const FeatureLayout& layout, const ModelConfig& config) {
  UseOneThread();
  torch::manual_seed(config.seed);
  return std::make_unique<TorchPolicy>(layout, config.hidden, config.learning_rate, nlohmann::json::object());
}

std::unique_ptr<PolicyModel> LoadPolicy(const std::filesystem::path& file, double learning_rate, std::string& error) {
  std::unique_ptr<TorchPolicy> policy =
      LoadModel<TorchPolicy>(file, kPolicyKind, error, [&](const ArchiveHeader& header) {
        return std::make_unique<TorchPolicy>(header.layout, header.config.value("hidden", 64), learning_rate,
                                             header.info);
      });
  // The saved optimizer state carries its own learning rate; the caller's wins.
  if (policy)
    for (auto& group : policy->optimizer().param_groups())
      static_cast<torch::optim::AdamOptions&>(group.options()).lr(learning_rate);
  return policy;
}

}  // namespace kernelgym::learned::plugin
