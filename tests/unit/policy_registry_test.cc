// The episode policies' registry: the built-in ones by name, a clear error for an unknown name
// and for a policy whose needs the command line does not meet, and a policy added from outside
// (docs/adding_a_policy.md) runs through the same calls.
#include <gtest/gtest.h>

#include <algorithm>

#include "policies/evaluate/episode_policy.h"

namespace kernelgym::evaluate {
namespace {

class FixedPolicy final : public EpisodePolicy {
 public:
  std::string_view name() const override { return "fixed"; }
  TaskOutcome Run(client::Client&, const EpisodeContext& c, std::ostream&) override {
    TaskOutcome out;
    out.task = c.task.summary.id;
    out.status = "fixed";
    return out;
  }
};

TEST(PolicyRegistry, TheBuiltinPoliciesAreRegisteredByName) {
  RegisterBuiltinPolicies();
  const std::vector<std::string> names = PolicyRegistry::Global().Names();
  for (const char* name : {"starter", "random-knobs", "knob-search", "mutate-search", "learned-knobs", "agent"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
    std::string error;
    const std::unique_ptr<EpisodePolicy> policy = PolicyRegistry::Global().Create(name, error);
    ASSERT_TRUE(policy) << name << ": " << error;
    EXPECT_EQ(policy->name(), name);
  }
  RegisterBuiltinPolicies();  // idempotent
  EXPECT_EQ(PolicyRegistry::Global().Names(), names);
}

TEST(PolicyRegistry, AnUnknownNameIsAnErrorListingTheKnownOnes) {
  RegisterBuiltinPolicies();
  std::string error;
  EXPECT_FALSE(PolicyRegistry::Global().Create("no-such-policy", error));
  EXPECT_NE(error.find("no-such-policy"), std::string::npos) << error;
  EXPECT_NE(error.find("knob-search"), std::string::npos) << error;
  EpisodeContext given;
  EXPECT_FALSE(PolicyRegistry::Global().Ready("no-such-policy", given, error));
}

TEST(PolicyRegistry, APolicyWhoseNeedsAreNotMetNamesTheMissingFlag) {
  RegisterBuiltinPolicies();
  const PolicyRegistry& registry = PolicyRegistry::Global();
  EpisodeContext given;
  std::string error;
  EXPECT_TRUE(registry.Ready("starter", given, error)) << error;
  EXPECT_FALSE(registry.Ready("agent", given, error));
  EXPECT_NE(error.find("--endpoint"), std::string::npos) << error;
  EXPECT_FALSE(registry.Ready("learned-knobs", given, error));
  EXPECT_NE(error.find("--policy-model"), std::string::npos) << error;
  given.policy_model = "policy.pt";
  EXPECT_TRUE(registry.Ready("learned-knobs", given, error)) << error;
}

TEST(PolicyRegistry, APolicyAddedFromOutsideIsCreatedLikeTheBuiltinOnes) {
  PolicyRegistry& registry = PolicyRegistry::Global();
  registry.Register({"fixed", "a test policy", {}, [] { return std::make_unique<FixedPolicy>(); }});
  std::string error;
  std::unique_ptr<EpisodePolicy> policy = registry.Create("fixed", error);
  ASSERT_TRUE(policy) << error;
  EXPECT_EQ(policy->name(), "fixed");
  EXPECT_NE(registry.NameList().find("fixed"), std::string::npos);
  // A second registration replaces the first (its needs included).
  registry.Register({"fixed", "now needs a policy file", {.policy_model = true},
                     [] { return std::make_unique<FixedPolicy>(); }});
  EpisodeContext given;
  EXPECT_FALSE(registry.Ready("fixed", given, error));
  const std::vector<std::string> names = registry.Names();
  EXPECT_EQ(std::count(names.begin(), names.end(), "fixed"), 1);
}

}  // namespace
}  // namespace kernelgym::evaluate
