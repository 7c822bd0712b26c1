// The learned side without a server: knob spaces, the feature encoding and its layout, the model
// plugin (save/load round trips and the refusals), the measurement store and GAE.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "policies/learned/features.h"
#include "policies/learned/measurements.h"
#include "policies/learned/model_api.h"
#include "policies/learned/ppo.h"
#include "policies/learned/ranker.h"

namespace kernelgym::learned {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

// A tasks.get answer with the fields the learned side reads: category, work, knobs.
protocol::TaskInfo Task(const std::string& id, const std::string& category, double flops, double bytes,
                        std::map<std::string, protocol::KnobDomain> knobs) {
  protocol::TaskInfo task;
  task.summary.id = id;
  task.summary.category = category;
  task.summary.flops = flops;
  task.summary.bytes = bytes;
  task.knobs = std::move(knobs);
  return task;
}

std::vector<protocol::KnobValue> Ints(std::initializer_list<int64_t> values) { return {values.begin(), values.end()}; }

protocol::TaskInfo SoftmaxTask() {
  return Task("cpu/softmax_rows", "normalization", 4.2e6, 8.4e6,
              {{"SIMD", {Ints({0, 1}), int64_t{0}}},
               {"EXP", {{std::string("std::exp"), std::string("exp_poly")}, std::string("std::exp")}},
               {"RECOMPUTE", {Ints({0, 1}), int64_t{0}}}});
}

protocol::TaskInfo GemmTask() {
  return Task("x/gemm", "gemm", 2e9, 1.2e7,
              {{"NB", {Ints({16, 64, 256}), int64_t{64}}}, {"PACK", {Ints({0, 1}), int64_t{0}}},
               {"TILE_Z", {Ints({1, 2}), int64_t{1}}}});
}

const std::vector<std::string> kServerFeatures = {"status_ok", "log_speedup", "steps_left_fraction",
                                                  "log_best_speedup", "reused", "log10_task_flops"};

fs::path TempDir() {
  fs::path dir = fs::temp_directory_path() / ("kg-learned-" + std::to_string(::getpid()) + "-" +
                                              ::testing::UnitTest::GetInstance()->current_test_info()->name());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

const ModelPlugin& Plugin() {
  std::string error;
  const ModelPlugin* plugin = LoadModelPlugin(error);
  if (!plugin) ADD_FAILURE() << error;
  return *plugin;
}

TEST(KnobSpaceTest, KnobsInNameOrderWithDefaultsAndEveryCombination) {
  const KnobSpace space = KnobSpace::FromTask(SoftmaxTask());
  ASSERT_EQ(space.knobs(), 3u);
  EXPECT_EQ(space.name(0), "EXP");
  EXPECT_EQ(space.name(2), "SIMD");
  EXPECT_EQ(space.size(), 8u);
  EXPECT_EQ(space.Key(space.defaults()), "EXP=std::exp,RECOMPUTE=0,SIMD=0");
  const auto all = space.Enumerate();
  ASSERT_EQ(all.size(), 8u);
  EXPECT_EQ(std::set<Setting>(all.begin(), all.end()).size(), 8u);
  for (const Setting& s : all) EXPECT_EQ(space.FromKnobs(space.ToKnobs(s)), s);
  KnobMap outside = space.ToKnobs(space.defaults());
  outside["SIMD"] = int64_t{7};
  EXPECT_FALSE(space.FromKnobs(outside));
  outside.erase("SIMD");
  EXPECT_FALSE(space.FromKnobs(outside));
  EXPECT_TRUE(KnobSpace::FromTask(Task("t", "", 0, 0, {})).empty());
}

// On pallas a task's knobs are its pallas version's template (pallas.json); task.json's (the cpu
// template) are never offered there: the runner would refuse every setting of them. Before, the
// trainer read the top level only, and `train --backend pallas` saw the cpu knobs or none.
TEST(KnobSpaceTest, OnPallasTheVersionsTemplateNeverTheCpuOne) {
  protocol::TaskInfo task = SoftmaxTask();
  task.versions["pallas"].knobs = {{"ROWS", {Ints({8, 16}), int64_t{16}}}};
  const KnobSpace pallas = KnobSpace::FromTask(TaskForBackend(task, "pallas"));
  ASSERT_EQ(pallas.knobs(), 1u);
  EXPECT_EQ(pallas.name(0), "ROWS");
  EXPECT_EQ(pallas.Key(pallas.defaults()), "ROWS=16");
  EXPECT_EQ(KnobSpace::FromTask(TaskForBackend(task, "cpu")).knobs(), 3u);
  task.versions["pallas"].knobs.clear();  // a pallas version without a template: no knobs at all
  EXPECT_TRUE(KnobSpace::FromTask(TaskForBackend(task, "pallas")).empty());
}

// Off a TPU a pallas step's observation carries no speedup (nothing ran on a chip); what the env
// paid is the trusted estimate in the step's info. The store keeps that, labelled; a failed step
// or an untrusted estimate is 0.
TEST(MeasurementTest, APallasStepIsWorthItsPaidEstimateLabelled) {
  protocol::Observation o;
  o.status = "ok";
  o.speedup = 0;
  std::string kind;
  EXPECT_DOUBLE_EQ(policies::PaidSpeedup(o, {{"speedup_kind", "estimated"}, {"estimated_speedup", 1.45}}, kind), 1.45);
  EXPECT_EQ(kind, "estimated");
  kind.clear();
  EXPECT_EQ(policies::PaidSpeedup(o, json::object(), kind), 0.0) << "an untrusted estimate is not paid";
  EXPECT_EQ(kind, "");
  o.status = "incorrect";
  EXPECT_EQ(policies::PaidSpeedup(o, {{"speedup_kind", "estimated"}, {"estimated_speedup", 3.0}}, kind), 0.0);

  Measurement m;
  m.task = "jaxbench-p/rms_norm";
  m.backend = "pallas";
  m.key = "ROWS=16";
  m.knobs = {{"ROWS", int64_t{16}}};
  m.status = "ok";
  m.speedup = 1.45;
  m.speedup_kind = "estimated";
  std::string error;
  const std::optional<Measurement> back = MeasurementFromJson(MeasurementToJson(m), error);
  ASSERT_TRUE(back) << error;
  EXPECT_EQ(back->speedup_kind, "estimated");
  EXPECT_EQ(back->backend, "pallas");
  EXPECT_DOUBLE_EQ(back->speedup, 1.45);
}

TEST(FeaturesTest, LayoutLeavesOutHistoryFeaturesAndSizesMatchTheEncoding) {
  const FeatureLayout layout = BuildLayout(kServerFeatures, {SoftmaxTask()});
  EXPECT_EQ(layout.observation, (std::vector<std::string>{"status_ok", "log_speedup", "log10_task_flops"}));
  EXPECT_EQ(layout.knob_names, (std::vector<std::string>{"EXP", "RECOMPUTE", "SIMD"}));
  EXPECT_EQ(layout.value_tokens, (std::vector<std::string>{"exp_poly", "std::exp"}));
  const KnobSpace space = KnobSpace::FromTask(SoftmaxTask());
  const std::vector<float> task = TaskFeatures(layout, SoftmaxTask(), space);
  EXPECT_EQ(task.size(), layout.task_size());
  const PolicyState state = EncodeState(layout, task, {{"log_speedup", 1e9}, {"status_ok", 1}}, {1, 4, 0.5, 0.2}, space,
                                        space.defaults());
  EXPECT_EQ(state.context.size(), layout.context_size());
  EXPECT_FLOAT_EQ(state.context[1], 20.0f);  // clamped: no input outside [-20, 20]
  ASSERT_EQ(state.choices.size(), 3u);
  for (const auto& knob : state.choices)
    for (const auto& row : knob) {
      EXPECT_EQ(row.size(), layout.choice_size());
      for (float x : row) EXPECT_TRUE(std::isfinite(x));
    }
  // A task whose knob names the layout never saw: every one lands in the "other" slot.
  const KnobSpace gemm = KnobSpace::FromTask(GemmTask());
  const std::vector<float> row = ChoiceFeatures(layout, gemm, 0, 2, gemm.defaults());
  EXPECT_EQ(row[layout.knob_names.size()], 1.0f);
}

TEST(FeaturesTest, AServerWithoutAFeatureTheModelReadsIsRefusedByName) {
  const FeatureLayout layout = BuildLayout(kServerFeatures, {SoftmaxTask()});
  std::string error;
  EXPECT_TRUE(CheckServerFeatures(layout, kServerFeatures, error)) << error;
  EXPECT_FALSE(CheckServerFeatures(layout, {"status_ok", "log_speedup"}, error));
  EXPECT_NE(error.find("'log10_task_flops'"), std::string::npos) << error;
  EXPECT_NE(error.find("retrain"), std::string::npos) << error;
}

TEST(FeatureLayoutTest, JsonRoundTripAndAnotherVersionIsRefused) {
  const FeatureLayout layout = BuildLayout(kServerFeatures, {SoftmaxTask(), GemmTask()});
  std::string error;
  const auto back = FeatureLayout::FromJson(layout.ToJson(), error);
  ASSERT_TRUE(back) << error;
  EXPECT_EQ(*back, layout);
  json old = layout.ToJson();
  old["version"] = kFeatureLayoutVersion + 1;
  EXPECT_FALSE(FeatureLayout::FromJson(old, error));
  EXPECT_NE(error.find("version"), std::string::npos) << error;
  EXPECT_FALSE(FeatureLayout::FromJson(json{{"format", "something else"}}, error));
}

std::vector<PolicyState> States(const FeatureLayout& layout) {
  std::vector<PolicyState> states;
  for (const protocol::TaskInfo& task : {SoftmaxTask(), GemmTask()}) {
    const KnobSpace space = KnobSpace::FromTask(task);
    states.push_back(EncodeState(layout, TaskFeatures(layout, task, space), {{"log_speedup", -1.2}}, {0, 2, 0, 0}, space,
                                 space.defaults()));
  }
  return states;
}

TEST(PolicyModelTest, SaveLoadRoundTripGivesTheSameDistributionsAndInfo) {
  const fs::path dir = TempDir();
  const FeatureLayout layout = BuildLayout(kServerFeatures, {SoftmaxTask(), GemmTask()});
  auto policy = Plugin().create_policy(layout, {.hidden = 16, .learning_rate = 1e-2, .seed = 3});
  const std::vector<PolicyState> states = States(layout);
  const std::vector<const PolicyState*> batch = {&states[0], &states[1]};
  // Train a little so the weights are not the initial ones.
  for (int i = 0; i < 5; ++i) policy->CloneStep(batch, {{1, 0, 1}, {2, 1, 0}});
  const auto before = policy->Forward(batch);
  std::string error;
  ASSERT_TRUE(policy->Save(dir / "policy.pt", {{"trained_by", "test"}}, error)) << error;
  auto loaded = Plugin().load_policy(dir / "policy.pt", 1e-2, error);
  ASSERT_TRUE(loaded) << error;
  EXPECT_EQ(loaded->layout(), layout);
  EXPECT_EQ(loaded->info()["trained_by"], "test");
  const auto after = loaded->Forward(batch);
  ASSERT_EQ(after.size(), before.size());
  for (std::size_t b = 0; b < before.size(); ++b) {
    EXPECT_FLOAT_EQ(after[b].value, before[b].value);
    ASSERT_EQ(after[b].probs.size(), before[b].probs.size());
    for (std::size_t k = 0; k < before[b].probs.size(); ++k) {
      ASSERT_EQ(after[b].probs[k].size(), before[b].probs[k].size());  // masked to each knob's domain
      float total = 0;
      for (std::size_t v = 0; v < before[b].probs[k].size(); ++v) {
        EXPECT_FLOAT_EQ(after[b].probs[k][v], before[b].probs[k][v]);
        total += after[b].probs[k][v];
      }
      EXPECT_NEAR(total, 1.0f, 1e-5);
    }
  }
  // Cloning moved the distribution toward the targets: EXP=exp_poly (index 1) for softmax.
  EXPECT_GT(after[0].probs[0][1], 0.5f);
}

TEST(PolicyModelTest, TrainingIsDeterministicGivenTheSeed) {
  const FeatureLayout layout = BuildLayout(kServerFeatures, {SoftmaxTask(), GemmTask()});
  const std::vector<PolicyState> states = States(layout);
  const std::vector<const PolicyState*> batch = {&states[0], &states[1]};
  std::vector<float> values;
  for (int run = 0; run < 2; ++run) {
    auto policy = Plugin().create_policy(layout, {.hidden = 16, .learning_rate = 1e-2, .seed = 11});
    for (int i = 0; i < 3; ++i)
      policy->PpoStep(batch, {{1, 0, 1}, {2, 1, 0}}, {-2.0f, -2.5f}, {1.0f, -1.0f}, {0.5f, -0.5f}, PpoConfig{});
    values.push_back(policy->Forward(batch)[1].value);
  }
  EXPECT_EQ(values[0], values[1]);
}

TEST(ModelFilesTest, TheWrongKindAGarbageFileAndAMissingFileAreClearErrors) {
  const fs::path dir = TempDir();
  const FeatureLayout layout = BuildLayout(kServerFeatures, {SoftmaxTask()});
  auto cost = Plugin().create_cost_model(layout, {.hidden = 8, .learning_rate = 1e-2, .seed = 1});
  std::string error;
  ASSERT_TRUE(cost->Save(dir / "cost.pt", json::object(), error)) << error;
  EXPECT_FALSE(Plugin().load_policy(dir / "cost.pt", 1e-3, error));
  EXPECT_NE(error.find("is a kernelgym-cost-model, not a kernelgym-knob-policy"), std::string::npos) << error;
  std::ofstream(dir / "garbage.pt") << "not a model";
  EXPECT_FALSE(Plugin().load_cost_model(dir / "garbage.pt", error));
  EXPECT_NE(error.find("cannot read the model file"), std::string::npos) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos) << "one line, no C++ stack trace: " << error;
  EXPECT_FALSE(Plugin().load_policy(dir / "missing.pt", 1e-3, error));
  EXPECT_NE(error.find("no such model file"), std::string::npos) << error;
}

TEST(CostModelTest, FitsASmallTableAndRanksThroughTheRanker) {
  const fs::path dir = TempDir();
  const FeatureLayout layout = BuildLayout(kServerFeatures, {SoftmaxTask()});
  auto model = Plugin().create_cost_model(layout, {.hidden = 32, .learning_rate = 1e-2, .seed = 1});
  const KnobSpace space = KnobSpace::FromTask(SoftmaxTask());
  const std::vector<float> task = TaskFeatures(layout, SoftmaxTask(), space);
  // log-speedup = SIMD + EXP=exp_poly - RECOMPUTE: a table a small network fits exactly.
  std::vector<CostInput> inputs;
  std::vector<float> targets;
  for (const Setting& s : space.Enumerate()) {
    inputs.push_back(EncodeSetting(layout, task, space, s));
    targets.push_back(static_cast<float>(s[2] + (s[0] == 0 ? 1 : 0) - s[1]));
  }
  std::vector<const CostInput*> batch;
  for (const CostInput& in : inputs) batch.push_back(&in);
  double loss = 0;
  for (int i = 0; i < 400; ++i) loss = model->FitStep(batch, targets);
  EXPECT_LT(loss, 0.01);
  std::string error;
  ASSERT_TRUE(model->Save(dir / "cost.pt", json::object(), error)) << error;
  auto ranker = KnobRanker::Load(dir / "cost.pt", SoftmaxTask(), error);
  ASSERT_TRUE(ranker) << error;
  KnobMap best = space.ToKnobs({0, 0, 1}), worst = space.ToKnobs({1, 1, 0}), outside = best;
  outside["SIMD"] = int64_t{3};
  const std::vector<double> scores = ranker->Score({worst, best, outside});
  EXPECT_GT(scores[1], scores[0] + 2);
  EXPECT_TRUE(std::isinf(scores[2]) && scores[2] < 0);
  EXPECT_FALSE(KnobRanker::Load(dir / "cost.pt", Task("no/template", "", 0, 0, {}), error));
  EXPECT_NE(error.find("no knob template"), std::string::npos) << error;
}

TEST(MeasurementStoreTest, ReopensWhatItWroteSkipsATornLineAndReadsCollectExports) {
  const fs::path dir = TempDir();
  std::string error;
  {
    auto store = MeasurementStore::Open(dir / "m.jsonl", error);
    ASSERT_TRUE(store) << error;
    Measurement m;
    m.task = "cpu/softmax_rows";
    m.knobs = {{"SIMD", int64_t{1}}, {"EXP", std::string("exp_poly")}};
    m.key = "EXP=exp_poly,SIMD=1";
    m.status = "ok";
    m.speedup = 1.9;
    m.reward = std::log(1.9);
    m.features = {{"log_speedup", std::log(1.9)}};
    ASSERT_TRUE(store->Add(m, error)) << error;
    m.speedup = 5;  // a second measurement of the same key is not kept
    ASSERT_TRUE(store->Add(m, error));
  }
  std::ofstream(dir / "m.jsonl", std::ios::app) << "{\"task\": \"cpu/softmax_ro";  // a crash mid-line
  auto store = MeasurementStore::Open(dir / "m.jsonl", error);
  ASSERT_TRUE(store) << error;
  ASSERT_EQ(store->size(), 1u);
  const Measurement* m = store->Find("cpu/softmax_rows", "EXP=exp_poly,SIMD=1");
  ASSERT_TRUE(m);
  EXPECT_DOUBLE_EQ(m->speedup, 1.9);
  EXPECT_DOUBLE_EQ(m->features.at("log_speedup"), std::log(1.9));

  // A `dataset export --format transitions` row: the action is a JSON string.
  std::ofstream(dir / "t.jsonl") << R"({"task":"cpu/rms_norm","action_kind":"knobs","action":"{\"kind\":\"knobs\",\"values\":{\"SIMD\":1,\"ACC\":4}}","status":"ok","speedup":2.5})"
                                 << "\n"
                                 << R"({"task":"cpu/rms_norm","action_kind":"replace","action":"{}","status":"ok","speedup":9})"
                                 << "\n";
  const auto data = LoadKnobDataset({dir / "m.jsonl", dir / "t.jsonl"}, error);
  ASSERT_TRUE(data) << error;
  ASSERT_EQ(data->by_task.at("cpu/rms_norm").size(), 1u);
  EXPECT_EQ(data->by_task.at("cpu/rms_norm")[0].key, "ACC=4,SIMD=1");
  EXPECT_EQ(data->by_task.at("cpu/softmax_rows").size(), 1u);
  EXPECT_EQ(data->skipped, 2u);  // the replace row and the torn line
}

TEST(PpoTest, GaeMatchesTheRecursionByHand) {
  std::vector<float> adv, ret;
  ComputeGae({1, 0, 2}, {0.5, 0.25, 1}, 0.9, 0.8, adv, ret);
  const double d2 = 2 - 1, d1 = 0 + 0.9 * 1 - 0.25, d0 = 1 + 0.9 * 0.25 - 0.5;
  const double a2 = d2, a1 = d1 + 0.72 * a2, a0 = d0 + 0.72 * a1;
  EXPECT_NEAR(adv[2], a2, 1e-6);
  EXPECT_NEAR(adv[1], a1, 1e-6);
  EXPECT_NEAR(adv[0], a0, 1e-6);
  EXPECT_NEAR(ret[0], a0 + 0.5, 1e-6);
}

}  // namespace
}  // namespace kernelgym::learned
