// The `knobs` action (env/episode/knobs.h): knob values become #define lines in front of the
// task's template; anything outside a knob's domain is an error naming the knob and its values.
#include "env/episode/knobs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "datasets/suite.h"

namespace kernelgym {
namespace {

using Values = std::map<std::string, protocol::KnobValue>;

const char* kTemplate = "extern \"C\" void kernel() { /* BLOCK EXP */ }\n";

// Knobs are kept sorted by name, as the loader leaves them.
Task KnobTask() {
  Task task;
  task.id = "tst/knobs";
  task.knobs = {Knob{"BLOCK", {int64_t{4}, int64_t{8}, int64_t{16}}, int64_t{8}},
                Knob{"EXP", {std::string("std::exp"), std::string("exp_poly")}, std::string("std::exp")}};
  task.starter_source = "the starter\n";
  task.template_source = kTemplate;
  return task;
}

TEST(ApplyKnobs, NoValuesGiveTheDefaultCombination) {
  const EditOutcome out = ApplyKnobs(KnobTask(), {});
  ASSERT_TRUE(out.source.has_value()) << out.error;
  EXPECT_TRUE(out.error.empty());
  EXPECT_EQ(*out.source, std::string("#define BLOCK 8\n#define EXP std::exp\n") + kTemplate);
}

TEST(ApplyKnobs, GivenValuesReplaceTheirDefaultsOnly) {
  EditOutcome out = ApplyKnobs(KnobTask(), {{"EXP", std::string("exp_poly")}});
  ASSERT_TRUE(out.source.has_value()) << out.error;
  EXPECT_EQ(*out.source, std::string("#define BLOCK 8\n#define EXP exp_poly\n") + kTemplate);

  out = ApplyKnobs(KnobTask(), {{"BLOCK", int64_t{16}}, {"EXP", std::string("exp_poly")}});
  ASSERT_TRUE(out.source.has_value()) << out.error;
  EXPECT_EQ(*out.source, std::string("#define BLOCK 16\n#define EXP exp_poly\n") + kTemplate);
}

TEST(ApplyKnobs, TheSameValuesGiveTheSameBytes) {
  const Values values{{"BLOCK", int64_t{4}}};
  const EditOutcome a = ApplyKnobs(KnobTask(), values);
  const EditOutcome b = ApplyKnobs(KnobTask(), values);
  ASSERT_TRUE(a.source && b.source);
  EXPECT_EQ(*a.source, *b.source);
  // Giving a knob its default value is the same kernel as leaving it out (one compile-cache entry).
  const EditOutcome c = ApplyKnobs(KnobTask(), {{"BLOCK", int64_t{8}}});
  const EditOutcome d = ApplyKnobs(KnobTask(), {});
  ASSERT_TRUE(c.source && d.source);
  EXPECT_EQ(*c.source, *d.source);
}

TEST(ApplyKnobs, AnUnknownKnobIsNamedWithTheKnownOnes) {
  const EditOutcome out = ApplyKnobs(KnobTask(), {{"BLOCK", int64_t{4}}, {"UNROLL", int64_t{2}}});
  EXPECT_FALSE(out.source.has_value());
  EXPECT_EQ(out.error, "knobs: unknown knob 'UNROLL' (task tst/knobs has BLOCK, EXP)");
}

TEST(ApplyKnobs, AValueOutsideTheDomainListsTheAllowedValues) {
  EditOutcome out = ApplyKnobs(KnobTask(), {{"BLOCK", int64_t{5}}});
  EXPECT_FALSE(out.source.has_value());
  EXPECT_EQ(out.error, "knobs: BLOCK: 5 is not allowed (allowed: 4, 8, 16)");

  out = ApplyKnobs(KnobTask(), {{"EXP", std::string("expf")}});
  EXPECT_FALSE(out.source.has_value());
  EXPECT_EQ(out.error, "knobs: EXP: expf is not allowed (allowed: std::exp, exp_poly)");
}

TEST(ApplyKnobs, AValueOfTheWrongTypeNamesTheKnobAndTheValues) {
  EditOutcome out = ApplyKnobs(KnobTask(), {{"BLOCK", std::string("8")}});
  EXPECT_FALSE(out.source.has_value());
  EXPECT_EQ(out.error, "knobs: BLOCK: expects an integer, got string \"8\" (allowed: 4, 8, 16)");

  out = ApplyKnobs(KnobTask(), {{"BLOCK", 8.0}});  // a number that happens to be integral is still not an integer
  EXPECT_FALSE(out.source.has_value());
  EXPECT_EQ(out.error, "knobs: BLOCK: expects an integer, got number 8 (allowed: 4, 8, 16)");

  out = ApplyKnobs(KnobTask(), {{"EXP", int64_t{1}}});
  EXPECT_FALSE(out.source.has_value());
  EXPECT_EQ(out.error, "knobs: EXP: expects a string, got integer 1 (allowed: std::exp, exp_poly)");
}

TEST(ApplyKnobs, ATaskWithoutATemplateSaysSo) {
  Task plain;
  plain.id = "tst/plain";
  plain.starter_source = "the starter\n";
  EditOutcome out = ApplyKnobs(plain, {});
  EXPECT_FALSE(out.source.has_value());
  EXPECT_EQ(out.error, "task tst/plain has no knob template");
  out = ApplyKnobs(plain, {{"BLOCK", int64_t{4}}});
  EXPECT_EQ(out.error, "task tst/plain has no knob template");
}

// Three knobs, 3 x 2 x 4 = 24 combinations.
Task WideKnobTask() {
  Task task = KnobTask();
  task.knobs.push_back(Knob{"UNROLL", {int64_t{1}, int64_t{2}, int64_t{4}, int64_t{8}}, int64_t{1}});
  return task;
}

TEST(KnobCombinations, AllIsTheProductWithoutRepeats) {
  const std::vector<KnobCombination> all = AllKnobCombinations(WideKnobTask());
  EXPECT_EQ(all.size(), 24u);
  EXPECT_EQ(std::set<KnobCombination>(all.begin(), all.end()).size(), 24u);
  for (const KnobCombination& c : all) EXPECT_TRUE(ApplyKnobs(WideKnobTask(), c).source.has_value());
  EXPECT_TRUE(AllKnobCombinations(Task{}).size() == 1u && AllKnobCombinations(Task{})[0].empty());
}

TEST(KnobCombinations, TheCoveringSampleHasTheDefaultsAndEveryValue) {
  const Task task = WideKnobTask();
  const std::vector<KnobCombination> sample = CoveringKnobCombinations(task, 8, 1);
  ASSERT_EQ(sample.size(), 8u);
  EXPECT_EQ(KnobCombinationText(sample[0]), "BLOCK=8 EXP=std::exp UNROLL=1");
  EXPECT_EQ(std::set<KnobCombination>(sample.begin(), sample.end()).size(), sample.size()) << "no repeats";
  for (const Knob& knob : task.knobs)
    for (const Knob::Value& v : knob.values) {
      const protocol::KnobValue wanted = std::holds_alternative<int64_t>(v) ? protocol::KnobValue(std::get<int64_t>(v))
                                                                          : protocol::KnobValue(std::get<std::string>(v));
      const bool covered = std::any_of(sample.begin(), sample.end(),
                                       [&](const KnobCombination& c) { return c.at(knob.name) == wanted; });
      EXPECT_TRUE(covered) << knob.name << "=" << KnobValueText(v);
    }
  EXPECT_EQ(CoveringKnobCombinations(task, 8, 1), sample) << "deterministic per seed";
  EXPECT_EQ(CoveringKnobCombinations(task, 2, 1).size(), 5u) << "covering wins over the limit (1 + widest 4)";
  EXPECT_EQ(CoveringKnobCombinations(task, 24, 1).size(), 24u) << "the whole product when it fits";
}

TEST(ApplyKnobs, TheBundledSoftmaxTemplate) {
  const TaskLoadResult loaded = LoadTask(DefaultSuitesRoot() / "cpu" / "softmax_rows");
  ASSERT_TRUE(loaded.task.has_value()) << loaded.error;
  const EditOutcome out = ApplyKnobs(*loaded.task, {{"SIMD", int64_t{1}}, {"EXP", std::string("exp_poly")}});
  ASSERT_TRUE(out.source.has_value()) << out.error;
  EXPECT_EQ(out.source->rfind("#define EXP exp_poly\n#define RECOMPUTE 0\n#define SIMD 1\n", 0), 0u) << *out.source;
  EXPECT_NE(out.source->find(loaded.task->template_source), std::string::npos);
}

// The pallas version's template: Python assignments in name order, a string as a string literal;
// the cpu template of the same task is untouched by it.
TEST(ApplyKnobs, APallasVersionGetsPythonAssignmentsBeforeItsTemplate) {
  Task task = KnobTask();
  BackendVariant pallas;
  pallas.knobs = {Knob{"BM", {int64_t{128}, int64_t{256}}, int64_t{256}},
                  Knob{"K_BLOCK", {std::string("tile"), std::string("whole")}, std::string("tile")}};
  pallas.template_source = "def kernel(A, B):\n    return A\n";
  task.variants["pallas"] = pallas;
  EditOutcome out = ApplyKnobs(task, "pallas", {{"K_BLOCK", std::string("whole")}});
  ASSERT_TRUE(out.source.has_value()) << out.error;
  EXPECT_EQ(*out.source, "BM = 256\nK_BLOCK = \"whole\"\ndef kernel(A, B):\n    return A\n");
  out = ApplyKnobs(task, "pallas", {{"EXP", std::string("exp_poly")}});
  EXPECT_FALSE(out.source.has_value()) << "the cpu template's knobs are not the pallas version's";
  EXPECT_NE(out.error.find("has BM, K_BLOCK"), std::string::npos) << out.error;
  out = ApplyKnobs(task, "pallas", {{"K_BLOCK", std::string("\" + __import__('os')")}});
  EXPECT_FALSE(out.source.has_value()) << "only the declared values";
  out = ApplyKnobs(task, "cpu", {});
  ASSERT_TRUE(out.source.has_value());
  EXPECT_EQ(out.source->rfind("#define BLOCK 8\n", 0), 0u);
  EXPECT_EQ(AllKnobCombinations(task, "pallas").size(), 4u);
  task.variants["pallas"].knobs.clear();
  out = ApplyKnobs(task, "pallas", {});
  EXPECT_FALSE(out.source.has_value()) << "never the cpu template on pallas";
  EXPECT_NE(out.error.find("no knob template on pallas"), std::string::npos) << out.error;
}

TEST(ApplyKnobs, TheBundledGemmPallasTemplate) {
  const TaskLoadResult loaded = LoadTask(DefaultSuitesRoot() / "jaxbench-p" / "gemm");
  ASSERT_TRUE(loaded.task.has_value()) << loaded.error;
  const EditOutcome out = ApplyKnobs(*loaded.task, "pallas", {{"K_BLOCK", std::string("k4")}});
  ASSERT_TRUE(out.source.has_value()) << out.error;
  EXPECT_EQ(out.source->rfind("K_BLOCK = \"k4\"\nTILE = \"t256\"\n", 0), 0u) << *out.source;
  EXPECT_EQ(AllKnobCombinations(*loaded.task, "pallas").size(), 4u);
  EXPECT_NE(out.source->find(loaded.task->variants.at("pallas").template_source), std::string::npos);
}

}  // namespace
}  // namespace kernelgym
