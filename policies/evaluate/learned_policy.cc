#include "policies/evaluate/learned_policy.h"

#include <chrono>

#include "policies/evaluate/episode_steps.h"
#include "policies/learned/episodes.h"
#include "policies/learned/features.h"
#include "policies/learned/model_api.h"

namespace kernelgym::evaluate {
namespace {

// Each step, the policy sees what it was trained on (the task's features, the last observation's
// features, the episode's progress and the current setting) and every knob takes its most likely
// value; after `budget` steps the best one is submitted. The model is loaded once per file.
class LearnedKnobsPolicy final : public EpisodePolicy {
 public:
  std::string_view name() const override { return "learned-knobs"; }

  TaskOutcome Run(client::Client& env, const EpisodeContext& c, std::ostream& log) override {
    const auto start = std::chrono::steady_clock::now();
    std::string error;
    learned::PolicyModel* model = Load(c.policy_model, error);
    const learned::KnobSpace space = learned::KnobSpace::FromTask(c.task);
    if (!model || space.empty()) {
      log << "learned-knobs: " << (model ? c.task.summary.id + " has no knob template" : error)
          << ": submitting the starter\n";
      return SubmitStarter(env, c, "learned-knobs");
    }
    const std::vector<std::string> feature_names = env.Hello().feature_names;
    std::string mismatch;
    if (!learned::CheckServerFeatures(model->layout(), feature_names, mismatch)) {
      log << "learned-knobs: " << mismatch << ": submitting the starter\n";
      return SubmitStarter(env, c, "learned-knobs");
    }
    TaskOutcome out;
    out.task = c.task.summary.id;
    protocol::Observation first;
    const std::string id = StartEpisode(env, c, c.budget + 3, first);
    const double starter = first.speedup;
    out.starter_speedup = out.best_speedup = starter;
    const std::vector<float> task_features = learned::TaskFeatures(model->layout(), c.task, space);
    learned::NamedFeatures last = learned::NameFeatures(feature_names, first.features);
    learned::Setting current = space.defaults();
    double last_speedup = starter;
    int64_t best_step = 0, current_step = 0;
    for (int t = 0; t < c.budget; ++t) {
      const learned::EpisodeProgress progress{t, c.budget, learned::LogRatio(out.best_speedup, starter),
                                              learned::LogRatio(last_speedup, starter)};
      const learned::PolicyState state =
          learned::EncodeState(model->layout(), task_features, last, progress, space, current);
      const learned::PolicyOutput output = model->Forward({&state}).at(0);
      learned::Setting action;
      for (const std::vector<float>& probs : output.probs) action.push_back(learned::GreedyValue(probs));
      const protocol::Observation o =
          Paid(env.Step(id, protocol::KnobsAction{space.ToKnobs(action)}, {{"policy", "learned-knobs"}}), out);
      ++out.steps;
      current_step = o.step;
      current = action;
      last = learned::NameFeatures(feature_names, o.features);
      last_speedup = o.status == "ok" ? o.speedup : 0;
      if (o.status == "ok" && o.speedup > out.best_speedup) {
        out.best_speedup = o.speedup;
        best_step = current_step;
      }
    }
    SubmitBest(env, id, current_step, best_step, out, "learned-knobs");
    out.seconds = SecondsSince(start);
    return out;
  }

 private:
  learned::PolicyModel* Load(const std::filesystem::path& file, std::string& error) {
    if (model_ && file == file_) return model_.get();
    const learned::ModelPlugin* plugin = learned::LoadModelPlugin(error);
    if (!plugin) return nullptr;
    model_ = plugin->load_policy(file, /*learning_rate=*/0, error);
    file_ = file;
    return model_.get();
  }

  std::unique_ptr<learned::PolicyModel> model_;
  std::filesystem::path file_;
};

}  // namespace

std::unique_ptr<EpisodePolicy> MakeLearnedKnobsPolicy() { return std::make_unique<LearnedKnobsPolicy>(); }

}  // namespace kernelgym::evaluate
