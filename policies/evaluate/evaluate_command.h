// `kernelgym evaluate` (policies on a suite -> reports, a comparison and a plot) and
// `kernelgym collect` (a policy on a suite with recording -> a dataset folder with its card).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "policies/common/command_flags.h"
#include "policies/evaluate/suite_run.h"

namespace kernelgym::evaluate {

struct EvaluateCommand {
  std::vector<std::string> policies;
  SuiteRunOptions run;
  std::string out = "evaluation";
  std::vector<std::string> compare;  // report JSON files to compare instead of running
  llm::ChatOptions chat;
  policies::EnvFlags env;
  std::string prompts;
  CLI::App* app = nullptr;
};
void AddEvaluateCommand(CLI::App& app, EvaluateCommand& command);
int RunEvaluateCommand(EvaluateCommand& command);

struct CollectCommand {
  std::string policy = "knob-search";
  SuiteRunOptions run;
  std::string out;
  llm::ChatOptions chat;
  policies::EnvFlags env;  // --local-runners only: collect starts its own server, its store in --out
  std::string prompts;
  CLI::App* app = nullptr;
};
void AddCollectCommand(CLI::App& app, CollectCommand& command);
int RunCollectCommand(CollectCommand& command);

}  // namespace kernelgym::evaluate
