// `kernelgym train`: learned policies and cost models over knob templates (docs/learned.md).
//   kernelgym train sweep       measure every setting of tasks' templates (a dataset, the best known)
//   kernelgym train ppo         PPO on training tasks; evaluation on held-out ones
//   kernelgym train bc          behavior cloning of the best settings in a dataset
//   kernelgym train cost-model  fit the cost model `kernelgym search --cost-model` uses
//   kernelgym train eval        a saved policy on held-out tasks against defaults and random knobs
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "policies/common/command_flags.h"
#include "policies/learned/heldout.h"
#include "policies/learned/offline.h"
#include "policies/learned/ppo.h"

namespace kernelgym::learned {

struct TaskSelection {
  std::vector<std::string> suites;   // every templated task of these suites ...
  std::vector<std::string> tasks;    // ... or these
  std::vector<std::string> holdout;  // never trained on; evaluated when given
};

struct TrainCommand {
  TaskSelection selection;
  std::string backend = "cpu";
  std::string out;
  std::string measurements;  // the measurement store (default: <out>/measurements.jsonl)
  std::vector<std::string> data;
  std::string init, policy;
  int envs_per_task = 1;
  ModelConfig model;
  PpoOptions ppo;
  FitOptions fit;
  HeldoutOptions heldout;
  int checkpoint_every = 5;
  bool knob_names = true;  // false: --no-knob-names (BuildLayout)
  policies::EnvFlags env;
  CLI::App *app = nullptr, *sweep = nullptr, *ppo_app = nullptr, *bc = nullptr, *cost = nullptr, *eval = nullptr;
};

void AddTrainCommand(CLI::App& app, TrainCommand& command);
int RunTrainCommand(TrainCommand& command);

}  // namespace kernelgym::learned
